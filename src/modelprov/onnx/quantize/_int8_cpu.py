"""Whether onnxruntime's 8-bit kernels on this CPU need 7-bit weights (``reduce_range``).

On x86 CPUs without VNNI, onnxruntime's u8s8 kernels (8-bit activations times int8 weights)
multiply with ``vpmaddubsw``, whose 16-bit sums of two products saturate: a model quantized
with full 8-bit weights loses accuracy there (the README's MLP: 0.10 absolute error instead
of 0.01, measured under ``qemu-x86_64 -cpu Haswell``). ``reduce_range=True`` quantizes the
weights to 7 bits, which cannot saturate; onnxruntime's documentation recommends it for
exactly these CPUs. CPUs with AVX512-VNNI or AVX-VNNI, and non-x86 CPUs, do not saturate.

VNNI is read from ``/proc/cpuinfo`` on Linux (the ``avx512_vnni`` / ``avx_vnni`` flags).
Elsewhere on x86 (no ``/proc/cpuinfo``) the answer is unknown and 7-bit weights are chosen:
on a VNNI CPU they cost little (same MLP: 0.008 instead of 0.010).
"""

from __future__ import annotations

import dataclasses
import functools
import platform

__all__ = ["VNNI_FLAGS", "Int8Cpu", "cpuinfo_flags", "int8_cpu", "this_cpu"]

VNNI_FLAGS = frozenset({"avx512_vnni", "avx_vnni"})
"""Linux's names for the instructions that multiply 8-bit integers without saturating."""

_X86_MACHINES = frozenset({"x86_64", "amd64", "x64", "i386", "i486", "i586", "i686", "x86"})
_CPUINFO = "/proc/cpuinfo"


@dataclasses.dataclass(frozen=True)
class Int8Cpu:
    """What the CPU's integer kernels need: ``reduce_range`` and why, in words."""

    machine: str
    vnni: bool | None
    """True / False as the CPU reports it; None when it could not be read."""

    @property
    def x86(self) -> bool:
        return self.machine.lower() in _X86_MACHINES

    @property
    def reduce_range(self) -> bool:
        """7-bit weights: on x86 unless the CPU is known to have VNNI."""
        return self.x86 and self.vnni is not True

    def describe(self) -> str:
        """``"x86_64 CPU without VNNI"``, ``"aarch64 CPU"``, ..."""
        if not self.x86:
            return f"{self.machine or 'unknown'} CPU"
        if self.vnni is None:
            return f"{self.machine} CPU, VNNI unknown"
        return f"{self.machine} CPU {'with' if self.vnni else 'without'} VNNI"


def cpuinfo_flags(text: str) -> frozenset[str] | None:
    """The feature flags of the first processor in ``/proc/cpuinfo`` text (None: no flags line).

    x86 Linux writes ``flags\\t\\t: fpu vme ...``; ARM writes ``Features``, which is read too.
    """
    for line in text.splitlines():
        name, colon, value = line.partition(":")
        if colon and name.strip().lower() in ("flags", "features"):
            return frozenset(value.split())
    return None


def int8_cpu(machine: str, cpuinfo: str | None) -> Int8Cpu:
    """The CPU described by ``platform.machine()`` and ``/proc/cpuinfo`` text (None: unreadable)."""
    flags = None if cpuinfo is None else cpuinfo_flags(cpuinfo)
    return Int8Cpu(machine=machine, vnni=None if flags is None else bool(flags & VNNI_FLAGS))


@functools.cache
def this_cpu() -> Int8Cpu:
    """The CPU this process runs on (read once)."""
    try:
        with open(_CPUINFO, encoding="utf-8", errors="replace") as stream:
            text: str | None = stream.read()
    except OSError:
        text = None
    return int8_cpu(platform.machine(), text)
