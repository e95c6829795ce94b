"""What survives downstream compilers: XLA's HLO metadata, IREE's flow locations, MLIR passes.

Shared by the survival tests and benchmarks/bench_downstream.py. The models are the issue's
three: seed 003's MLP, nn.TransformerEncoder (2 layers x 64) and a 2-layer Llama config.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.util
import os
import re
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from modelprov._cli import _examples
from modelprov.stablehlo import StableHLOProgram, read_mlir_sources

_INSTRUCTION = re.compile(
    r"^\s*(?:ROOT\s+)?%(?P<name>[\w.\-]+)\s*=\s*\S+\s+(?P<opcode>[\w\-]+)\(.*?"
    r"metadata=\{(?P<metadata>[^}]*)\}"
)
_INSTRUCTION_ANY = re.compile(
    r"^\s*(?:ROOT\s+)?%(?P<name>[\w.\-]+)\s*=\s*\S+\s+(?P<opcode>[\w\-]+)\("
)
_OP_NAME = re.compile(r'op_name="(?P<op_name>[^"]*)"')
_FRAME_ID = re.compile(r"stack_frame_id=(?P<id>\d+)")
_SOURCE_FILE = re.compile(r'source_file="(?P<file>[^"]*)"')
_SOURCE_LINE = re.compile(r"source_line=(?P<line>\d+)")
_TABLE_ROW = re.compile(r"^(?P<id>\d+) (?P<body>.*)$")
_FIELD = re.compile(r"(\w+)=(\d+)")

_LOCATION_FILE = re.compile(r'loc\("(?P<file>[^"]+)":\d+:\d+\)')


@functools.cache
def tool_folders() -> tuple[str, ...]:
    """The installed folders of the lowering tools' packages (modelprov, torchax, jax, jaxlib).

    Their files are the tools' frames, wherever the checkout is and whatever its folder is
    called (``git clone`` names it ``modelprov``, like the package).
    """
    folders = []
    for name in ("modelprov", "torchax", "jax", "jaxlib"):
        spec = importlib.util.find_spec(name)
        for folder in (spec.submodule_search_locations or []) if spec else []:
            folders.append(os.path.join(os.path.realpath(folder), ""))
    return tuple(folders)


def is_tool_source(path: str) -> bool:
    """True for a file inside one of the :func:`tool_folders` (not a user or torch frame)."""
    return os.path.realpath(path).startswith(tool_folders())


def location_files(text: str) -> set[str]:
    """Every file an MLIR text's file locations name (``loc("file":line:column)``)."""
    return {match["file"] for match in _LOCATION_FILE.finditer(text)}


# Instructions that compute nothing of the model: inputs, constants, plumbing.
_NOT_COMPUTING = frozenset({"parameter", "constant", "tuple", "get-tuple-element"})


def llama() -> tuple[torch.nn.Module, tuple[Any, ...], dict[str, Any]]:
    """A 2-layer Llama config (hidden 64, 4 heads, 2 KV heads), random weights."""
    from transformers import LlamaConfig, LlamaModel

    torch.manual_seed(0)
    config = LlamaConfig(
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        vocab_size=1000,
        max_position_embeddings=64,
    )
    return LlamaModel(config).eval(), (torch.randint(0, 1000, (1, 8)),), {"use_cache": False}


class _ResidualBlock(nn.Module):  # type: ignore[misc]
    """A conv residual (conv, BN, ReLU, conv, BN, skip) then a pre-norm attention + MLP."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(channels)
        self.relu = nn.ReLU()
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1)
        self.bn2 = nn.BatchNorm2d(channels)
        self.norm1 = nn.LayerNorm(channels)
        self.attn = nn.MultiheadAttention(channels, 4, batch_first=True)
        self.norm2 = nn.LayerNorm(channels)
        self.mlp = nn.Sequential(
            nn.Linear(channels, 2 * channels), nn.GELU(), nn.Linear(2 * channels, channels)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.relu(x + self.bn2(self.conv2(self.relu(self.bn1(self.conv1(x))))))
        batch, channels, height, width = x.shape
        tokens = x.flatten(2).transpose(1, 2)
        h = self.norm1(tokens)
        tokens = tokens + self.attn(h, h, h, need_weights=False)[0]
        tokens = tokens + self.mlp(self.norm2(tokens))
        return tokens.transpose(1, 2).reshape(batch, channels, height, width)


class ConvTransformer(nn.Module):  # type: ignore[misc]
    """Stem conv, two residual blocks (conv + attention), a mean-pooled linear head."""

    def __init__(self, channels: int = 32, classes: int = 10) -> None:
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(3, channels, 3, stride=2, padding=1), nn.BatchNorm2d(channels), nn.ReLU()
        )
        self.blocks = nn.Sequential(_ResidualBlock(channels), _ResidualBlock(channels))
        self.head = nn.Linear(channels, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        features = self.blocks(self.stem(x))
        return self.head(features.mean(dim=(2, 3)))  # a root-level op: mean


def conv_transformer() -> tuple[torch.nn.Module, tuple[Any, ...], dict[str, Any]]:
    """ConvTransformer (eval) on a (2, 3, 16, 16) input, non-trivial BatchNorm statistics."""
    torch.manual_seed(0)
    model = ConvTransformer()
    for module in model.modules():
        if isinstance(module, nn.BatchNorm2d):
            module.running_mean.uniform_(-0.5, 0.5)
            module.running_var.uniform_(0.5, 1.5)
    return model.eval(), (torch.randn(2, 3, 16, 16),), {}


MODELS: dict[str, Callable[[], tuple[torch.nn.Module, tuple[Any, ...], dict[str, Any]]]] = {
    "mlp": lambda: (*_examples.mlp(), {}),
    "transformer_encoder": lambda: (*_examples.transformer_encoder(), {}),
    "llama": llama,
    "conv_transformer": conv_transformer,
}


@dataclasses.dataclass(frozen=True)
class HloInstruction:
    """One instruction of compiled HLO text and what its metadata says."""

    name: str
    opcode: str
    operands: tuple[str, ...]
    op_name: str
    file: str | None
    line: int | None


def hlo_instructions(text: str) -> list[HloInstruction]:
    """Instructions of ``Compiled.as_text()`` with op_name and innermost source frame."""
    files, functions, locations, frames = _tables(text)
    found: list[HloInstruction] = []
    for line in text.splitlines():
        match = _INSTRUCTION_ANY.match(line)
        if match is None:
            continue
        metadata_match = re.search(r"metadata=\{([^}]*)\}", line)
        metadata = metadata_match.group(1) if metadata_match else ""
        op_name = _OP_NAME.search(metadata)
        file: str | None = None
        source_line: int | None = None
        frame = _FRAME_ID.search(metadata)
        if frame is not None:
            location = locations.get(frames.get(int(frame["id"]), {}).get("file_location_id", -1))
            if location is not None:
                file = files.get(location.get("file_name_id", -1))
                source_line = location.get("line")
        elif _SOURCE_FILE.search(metadata):
            file = _SOURCE_FILE.search(metadata)["file"]  # type: ignore[index]
            line_match = _SOURCE_LINE.search(metadata)
            source_line = int(line_match["line"]) if line_match else None
        rest = line[match.end() :]
        operands = tuple(re.findall(r"%([\w.\-]+)", rest.split(")", 1)[0]))
        found.append(
            HloInstruction(
                match["name"],
                match["opcode"],
                operands,
                op_name["op_name"] if op_name else "",
                file,
                source_line,
            )
        )
    del functions
    return found


def _tables(
    text: str,
) -> tuple[dict[int, str], dict[int, str], dict[int, dict[str, int]], dict[int, dict[str, int]]]:
    files: dict[int, str] = {}
    functions: dict[int, str] = {}
    locations: dict[int, dict[str, int]] = {}
    frames: dict[int, dict[str, int]] = {}
    section = ""
    for line in text.splitlines():
        stripped = line.strip()
        if stripped in ("FileNames", "FunctionNames", "FileLocations", "StackFrames"):
            section = stripped
            continue
        if not stripped or stripped.startswith(("%", "ENTRY", "HloModule", "ROOT", "}")):
            if stripped.startswith(("%", "ENTRY")):
                section = ""
            continue
        row = _TABLE_ROW.match(stripped)
        if row is None or not section:
            continue
        key, body = int(row["id"]), row["body"]
        if section == "FileNames":
            files[key] = body.strip('"')
        elif section == "FunctionNames":
            functions[key] = body.strip('"')
        elif section == "FileLocations":
            locations[key] = {k: int(v) for k, v in _FIELD.findall(body)}
        elif section == "StackFrames":
            frames[key] = {k: int(v) for k, v in _FIELD.findall(body)}
    return files, functions, locations, frames


def compiled_hlo(program: StableHLOProgram, *inputs: Any) -> str:
    """XLA's optimized HLO text of ``program`` compiled for CPU through ``jax.jit``.

    ``inputs`` are the flattened user inputs (tensors, then constants such as ``False``).
    """
    import jax
    import numpy as np

    arrays = tuple(
        x.detach().numpy() if isinstance(x, torch.Tensor) else np.asarray(x) for x in inputs
    )
    return str(jax.jit(program.exported.call).lower(program.weights, arrays).compile().as_text())


def module_paths_and_nodes(program: StableHLOProgram) -> set[str]:
    """Every ``module/source node`` (or ``node``) location name the program's ops carry."""
    names: set[str] = set()
    for op in program.ops:
        names.update(name for name in op.location.split(";") if op.nodes)
    return names


def hlo_survival(program: StableHLOProgram, hlo_text: str) -> tuple[int, int, list[HloInstruction]]:
    """(computing instructions, those naming a module path/node and a user line, misses)."""
    names = module_paths_and_nodes(program)
    instructions = hlo_instructions(hlo_text)
    constants = {i.name for i in instructions if i.opcode == "constant"}
    counted = [
        i
        for i in instructions
        if i.opcode not in _NOT_COMPUTING
        and not (i.opcode == "broadcast" and set(i.operands) <= constants)
    ]
    misses: list[HloInstruction] = []
    good = 0
    for instruction in counted:
        tail = instruction.op_name.split(";")
        named = any(_ends_with_name(part, names) for part in tail)
        user_line = (
            instruction.file is not None
            and instruction.line is not None
            and not is_tool_source(instruction.file)
        )
        if named and user_line:
            good += 1
        else:
            misses.append(instruction)
    return len(counted), good, misses


_CALLED = re.compile(r"\b(?P<kind>calls|to_apply)=%?(?P<name>[\w.\-]+)")


def kernel_instructions(hlo_text: str) -> set[str]:
    """Names of the instructions a profiler shows: those of computations that run on their
    own (the entry, while/conditional/call bodies), not of fused computations or of the
    scalar reducers a reduce applies; a fusion is one of them, named by its own metadata."""
    from modelprov.stablehlo import read_hlo_sources

    inner = {m["name"] for m in _CALLED.finditer(hlo_text) if m["kind"] == "to_apply"}
    inner |= {
        m["name"]
        for line in hlo_text.splitlines()
        if " fusion(" in line
        for m in _CALLED.finditer(line)
        if m["kind"] == "calls"
    }
    return {op.name for op in read_hlo_sources(hlo_text) if op.computation not in inner}


def hlo_op_name_coverage(
    program: StableHLOProgram,
    hlo_text: str,
    *,
    kernels_only: bool = False,
    splat_constants: bool = True,
) -> tuple[int, int, list[HloInstruction]]:
    """(computing instructions, those whose op_name names a module path/source node or a
    root-level node, misses) of optimized HLO text; parameters, constants and tuples aside,
    broadcasts of constants and XLA's fusions counted. Every instruction of the text (the
    entry, fused computations' bodies, reducers: what a dump shows), or with
    ``kernels_only`` those of :func:`kernel_instructions` (what a profiler shows).
    ``splat_constants=False`` sets broadcasts of constants aside too: HLO's form of a splat
    constant (XLA's builder writes every splat of more than one element as one)."""
    names = module_paths_and_nodes(program)
    instructions = hlo_instructions(hlo_text)
    constants = {i.name for i in instructions if i.opcode == "constant"}
    counted = [
        i
        for i in instructions
        if i.opcode not in _NOT_COMPUTING
        and (splat_constants or not (i.opcode == "broadcast" and set(i.operands) <= constants))
    ]
    if kernels_only:
        kept = kernel_instructions(hlo_text)
        counted = [i for i in counted if i.name in kept]
    misses = [
        i for i in counted if not any(_ends_with_name(part, names) for part in i.op_name.split(";"))
    ]
    return len(counted), len(counted) - len(misses), misses


def _ends_with_name(op_name: str, names: set[str]) -> bool:
    parts = op_name.split("/")
    return any("/".join(parts[i : i + k]) in names for k in (1, 2) for i in range(len(parts)))


def iree_flow(program: StableHLOProgram) -> bytes:
    """IREE's ``--compile-to=flow`` output (with locations) of the program's MLIR."""
    import iree.compiler.tools as iree_tools

    output = iree_tools.compile_str(
        program.text_with_locations,
        input_type="stablehlo",
        extra_args=["--compile-to=flow", "--mlir-print-debuginfo"],
    )
    assert isinstance(output, bytes)
    return output


def iree_survival(flow: bytes) -> tuple[int, int]:
    """(ops whose location is known, those naming a module path/source node)."""
    ops = read_mlir_sources(flow)
    known = [op for op in ops if op.location_known]
    return len(known), sum(1 for op in known if op.has_location)


def canonicalize_and_cse(text: str) -> str:
    """``text`` after MLIR's canonicalize and CSE passes (JAX's bindings), with locations."""
    from jax._src.interpreters import mlir
    from jaxlib.mlir import ir
    from jaxlib.mlir.passmanager import PassManager

    with mlir.make_ir_context():
        module = ir.Module.parse(text)
        PassManager.parse("builtin.module(func.func(canonicalize,cse))").run(module.operation)
        assert module.operation.verify()
        return str(module.operation.get_asm(enable_debug_info=True))


def run_text(program: StableHLOProgram, text: str, *inputs: torch.Tensor) -> list[Any]:
    """Run MLIR ``text`` (the program's function, transformed) on XLA with its weights."""
    import dataclasses as dc

    import numpy as np
    from jax._src.export import _export as jax_export_internals
    from jax._src.interpreters import mlir
    from jaxlib.mlir import ir

    with mlir.make_ir_context():
        module = ir.Module.parse(text)
        serialized = jax_export_internals._module_to_bytecode(module)
    exported = dc.replace(program.exported, mlir_module_serialized=serialized)
    outputs = exported.call(program.weights, tuple(x.numpy() for x in inputs))
    return [np.asarray(output) for output in outputs]


@dataclasses.dataclass(frozen=True)
class StageCounts:
    """What one stage's output keeps of the user keys (docs/downstream.md, per stage).

    ``attributes``: ops with a ``custom.*`` attribute; ``frontend``: ops (HLO instructions)
    whose ``mhlo.frontend_attributes`` (HLO ``frontend_attributes``) hold ``modelprov.*``
    keys, ``frontend_keys`` those holding a ``custom.*`` key too; ``keyed_locations``: ops
    whose location carries user keys (``modelprov.keys``); ``keyed_modules``: module paths
    whose sources get user keys when the output is read back (``read_mlir_sources`` /
    ``read_hlo_sources``).
    """

    attributes: int
    frontend: int
    frontend_keys: int
    keyed_locations: int
    keyed_modules: frozenset[str]


_LOC_ALIAS = re.compile(r"^(?P<alias>#loc\d*) = (?P<body>.*)$")
_LOC_REFERENCE = re.compile(r"#loc\d*\b")
_OP_LOCATION = re.compile(r"loc\((?P<alias>#loc\d*)\)\s*$")


def keyed_location_ops(text: str) -> int:
    """Ops of MLIR text (any dialect, printed with debug info) whose location carries user
    keys: written inline or through the text's location aliases (an op spanning lines has
    its location on its last line)."""
    bodies: dict[str, str] = {}
    for line in text.splitlines():
        match = _LOC_ALIAS.match(line)
        if match:
            bodies[match["alias"]] = match["body"]
    keyed: dict[str, bool] = {}

    def is_keyed(alias: str) -> bool:
        if alias not in keyed:
            keyed[alias] = False  # cycles: not keyed
            body = bodies.get(alias, "")
            keyed[alias] = "modelprov.keys" in body or any(
                is_keyed(ref) for ref in _LOC_REFERENCE.findall(body) if ref != alias
            )
        return keyed[alias]

    count = 0
    for line in text.splitlines():
        if _LOC_ALIAS.match(line) or not line.rstrip().endswith(")") or " loc(" not in line:
            continue
        inline = line[line.index(" loc(") :]  # IREE prints locations inline
        match = _OP_LOCATION.search(line)
        if "modelprov.keys" in inline or (match is not None and is_keyed(match["alias"])):
            count += 1
    return count


def mlir_stage_counts(text: str | bytes) -> StageCounts:
    """:class:`StageCounts` of MLIR text (StableHLO, or IREE's output)."""
    decoded = text.decode() if isinstance(text, bytes) else text
    ops = read_mlir_sources(text)
    frontend = [line for line in decoded.splitlines() if "mhlo.frontend_attributes = {" in line]
    return StageCounts(
        attributes=sum(1 for op in ops if any(k.startswith("custom.") for k in op.attributes)),
        frontend=sum(1 for line in frontend if "modelprov." in line.split("mhlo.frontend")[1]),
        frontend_keys=sum(1 for line in frontend if "custom." in line.split("mhlo.frontend")[1]),
        keyed_locations=keyed_location_ops(decoded),
        keyed_modules=frozenset(
            s.module_path for op in ops for s in op.sources if _has_user_keys(s.metadata)
        ),
    )


def hlo_stage_counts(hlo_text: str) -> StageCounts:
    """:class:`StageCounts` of HLO text (no attributes or locations there: frontend
    attributes only)."""
    from modelprov.stablehlo import read_hlo_sources

    ops = read_hlo_sources(hlo_text)
    return StageCounts(
        attributes=0,
        frontend=sum(1 for op in ops if "modelprov.node" in op.attributes),
        frontend_keys=sum(1 for op in ops if any(k.startswith("custom.") for k in op.attributes)),
        keyed_locations=0,
        keyed_modules=frozenset(
            s.module_path for op in ops for s in op.sources if _has_user_keys(s.metadata)
        ),
    )


def _has_user_keys(metadata: Any) -> bool:
    return any(str(key).startswith("custom.") for key in metadata)


IREE_STAGES = ("input", "global-optimization", "flow")


def iree_stage(program: StableHLOProgram, stage: str) -> bytes:
    """IREE's ``--compile-to=<stage>`` output (with locations) of the program's MLIR."""
    import iree.compiler.tools as iree_tools

    output = iree_tools.compile_str(
        program.text_with_locations,
        input_type="stablehlo",
        extra_args=[f"--compile-to={stage}", "--mlir-print-debuginfo"],
    )
    assert isinstance(output, bytes)
    return output


def stage_counts(program: StableHLOProgram, *inputs: Any, iree: bool = True) -> dict[str, Any]:
    """:class:`StageCounts` at every stage of docs/downstream.md's user-key table."""
    found: dict[str, StageCounts] = {
        "export": mlir_stage_counts(program.text_with_locations),
        "canonicalize+cse": mlir_stage_counts(canonicalize_and_cse(program.text_with_locations)),
        "xla optimized": hlo_stage_counts(compiled_hlo(program, *inputs)),
    }
    if iree:
        for stage in IREE_STAGES:
            found[f"iree {stage}"] = mlir_stage_counts(iree_stage(program, stage))
    return found
