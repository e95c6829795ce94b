"""reduce_range from /proc/cpuinfo text: x86 without VNNI needs it, everything else does not."""

from __future__ import annotations

import hypothesis
import hypothesis.strategies as st
import pytest

from modelprov.onnx.quantize._int8_cpu import VNNI_FLAGS, cpuinfo_flags, int8_cpu, this_cpu

# The first lines of /proc/cpuinfo on real machines, flags shortened to the interesting part.
_HASWELL = """processor\t: 0
vendor_id\t: GenuineIntel
model name\t: Intel(R) Xeon(R) CPU E5-2680 v3 @ 2.50GHz
flags\t\t: fpu vme de pse tsc msr sse sse2 ssse3 fma cx16 sse4_1 sse4_2 avx f16c avx2 bmi2
bogomips\t: 4988.27

processor\t: 1
flags\t\t: fpu vme de pse tsc msr sse sse2 ssse3 fma cx16 sse4_1 sse4_2 avx f16c avx2 bmi2
"""
_EPYC_ZEN3 = """processor\t: 0
vendor_id\t: AuthenticAMD
model name\t: AMD EPYC 7B13
flags\t\t: fpu sse sse2 avx avx2 sha_ni vaes vpclmulqdq
"""
_ICELAKE = """processor\t: 0
model name\t: Intel(R) Xeon(R) Platinum 8375C
flags\t\t: avx2 avx512f avx512dq avx512bw avx512vl avx512_vbmi avx512_vnni avx512_bitalg
"""
_ALDER_LAKE = """processor\t: 0
model name\t: 12th Gen Intel(R) Core(TM) i7-12700
flags\t\t: sse4_2 avx avx2 avx_vnni sha_ni
"""
_ARM = """processor\t: 0
BogoMIPS\t: 243.75
Features\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp asimddp
CPU implementer\t: 0x41
"""


@pytest.mark.parametrize(
    ("machine", "cpuinfo", "reduce_range", "described"),
    [
        ("x86_64", _HASWELL, True, "x86_64 CPU without VNNI"),
        ("x86_64", _EPYC_ZEN3, True, "x86_64 CPU without VNNI"),
        ("x86_64", _ICELAKE, False, "x86_64 CPU with VNNI"),
        ("x86_64", _ALDER_LAKE, False, "x86_64 CPU with VNNI"),
        ("AMD64", None, True, "AMD64 CPU, VNNI unknown"),  # Windows: no /proc/cpuinfo
        ("x86_64", "processor\t: 0\n", True, "x86_64 CPU, VNNI unknown"),  # no flags line
        ("aarch64", _ARM, False, "aarch64 CPU"),
        ("arm64", None, False, "arm64 CPU"),  # macOS on Apple silicon
        ("", None, False, "unknown CPU"),
    ],
)
def test_reduce_range_follows_the_cpu(
    machine: str, cpuinfo: str | None, reduce_range: bool, described: str
) -> None:
    cpu = int8_cpu(machine, cpuinfo)
    assert cpu.reduce_range is reduce_range
    assert cpu.describe() == described


def test_flags_are_read_from_the_first_flags_line_only() -> None:
    haswell = _HASWELL.splitlines()[3].partition(": ")[2]
    assert cpuinfo_flags(_HASWELL) == frozenset(haswell.split(" ")) and "avx2" in haswell
    assert "avx512_vnni" in (cpuinfo_flags(_ICELAKE) or ())
    assert cpuinfo_flags("") is None
    # A flag name merely containing "vnni" is not VNNI.
    assert int8_cpu("x86_64", "flags\t: avx2 avx512_vnni_fake xvnni\n").reduce_range


_OTHER_FLAGS = st.sampled_from(
    ["fpu", "sse2", "avx", "avx2", "fma", "avx512f", "avx512bw", "avx512_bf16", "amx_int8"]
)


# No timing checks: the suite also runs under CPU emulation (qemu) and on a busy machine.
@hypothesis.settings(deadline=None, suppress_health_check=[hypothesis.HealthCheck.too_slow])
@hypothesis.given(
    flags=st.lists(st.one_of(_OTHER_FLAGS, st.sampled_from(sorted(VNNI_FLAGS))), max_size=12),
    spacing=st.sampled_from(["\t\t: ", ": ", " :  "]),
)
def test_any_flag_list_needs_reduce_range_exactly_when_it_lacks_vnni(
    flags: list[str], spacing: str
) -> None:
    text = f"processor\t: 0\nflags{spacing}{' '.join(flags)}\nbugs\t\t: spectre_v1\n"
    cpu = int8_cpu("x86_64", text)
    assert cpu.vnni is bool(set(flags) & VNNI_FLAGS)
    assert cpu.reduce_range is not cpu.vnni


def test_this_cpu_is_read_once() -> None:
    assert this_cpu() is this_cpu()
    assert this_cpu().machine
