"""Black-box tools as one registry (name -> runner -> options), and modelprov.optimize_with.

A tool is registered once, where its runner is defined (``@register_tool``): its name, the
labelled option sets the tests and the zoo benchmark run it with, and the runner, which
takes a ModelProto and the tool's options and returns the tool's ModelProto. optimize_with,
the tests and the benchmarks all read :data:`TOOLS`, so a new tool is one definition here.
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, overload

import onnx
import onnx_ir as ir

from modelprov._base._registry import Registry
from modelprov._model_io._convert import ModelInput, model_input
from modelprov._model_io._files import load_model_proto
from modelprov.core._policy import Policies
from modelprov.errors import CorrespondenceError, MissingDependencyError, UsageError
from modelprov.onnx.recover._recover import recover_with_report

if TYPE_CHECKING:
    from torch.onnx import ONNXProgram

__all__ = ["TOOLS", "BlackBoxTool", "ToolRegistry", "ToolSetting", "optimize_with", "register_tool"]

Runner = Callable[..., onnx.ModelProto]
"""``runner(proto, **options) -> proto``: the tool's output for a model (never the input)."""


@dataclasses.dataclass(frozen=True)
class ToolSetting:
    """One labelled way to run a tool (``ort-basic``: onnxruntime with ``level="basic"``).

    ``portable`` is False where the output depends on this machine's CPU (onnxruntime's
    ``all`` level lays tensors out for it): sweeps that compare machines leave it out.
    """

    label: str
    tool: str
    options: Mapping[str, Any]
    portable: bool = True


@dataclasses.dataclass(frozen=True)
class BlackBoxTool:
    """A registered black-box tool: its name, its runner and the settings it is run with."""

    name: str
    run: Runner
    settings: tuple[ToolSetting, ...]


class ToolRegistry(Registry[BlackBoxTool]):
    """The black-box tools by name, in the order they were registered."""

    def __init__(self) -> None:
        super().__init__("black-box tool")

    def settings(self, *, portable_only: bool = False) -> list[ToolSetting]:
        """Every tool's settings, tool by tool (only the portable ones if asked)."""
        return [
            setting
            for tool in self.entries()
            for setting in tool.settings
            if setting.portable or not portable_only
        ]


TOOLS = ToolRegistry()
"""The one registry of black-box tools: optimize_with, the tests and the benchmarks read it."""


def register_tool(
    name: str,
    *settings: ToolSetting | tuple[str, Mapping[str, Any]],
    registry: ToolRegistry = TOOLS,
) -> Callable[[Runner], Runner]:
    """Registers the decorated runner as the tool ``name``; ``settings`` are labelled
    option sets (``("ort-basic", {"level": "basic"})`` or a :class:`ToolSetting`), the
    tool's name with no options when none is given."""

    def decorate(run: Runner) -> Runner:
        given = settings or ((name, {}),)
        made = tuple(
            item if isinstance(item, ToolSetting) else ToolSetting(item[0], name, item[1])
            for item in given
        )
        registry.register(BlackBoxTool(name, run, made))
        return run

    return decorate

_ORT_LEVELS = {
    "disable": "ORT_DISABLE_ALL",
    "basic": "ORT_ENABLE_BASIC",
    "extended": "ORT_ENABLE_EXTENDED",
    "all": "ORT_ENABLE_ALL",
}


def _missing(tool: str, error: ImportError) -> MissingDependencyError:
    return MissingDependencyError(
        f"optimize_with({tool!r}) needs the {tool} package ({error}); install it with "
        f'pip install {tool}  (or pip install "modelprov[tools]")'
    )


@register_tool(
    "onnxruntime",
    ("ort-basic", {"level": "basic"}),
    ("ort-extended", {"level": "extended"}),
    ToolSetting("ort-all", "onnxruntime", {"level": "all"}, portable=False),
)
def _run_onnxruntime(
    proto: onnx.ModelProto, level: str = "extended", **options: Any
) -> onnx.ModelProto:
    try:
        import onnxruntime as ort
    except ImportError as error:
        raise _missing("onnxruntime", error) from None
    if level not in _ORT_LEVELS:
        raise ValueError(f"onnxruntime level must be one of {sorted(_ORT_LEVELS)}, got {level!r}")
    session_options = ort.SessionOptions()
    session_options.graph_optimization_level = getattr(
        ort.GraphOptimizationLevel, _ORT_LEVELS[level]
    )
    for key, value in options.items():
        session_options.add_session_config_entry(key, str(value))
    with tempfile.TemporaryDirectory(prefix="modelprov-ort-") as folder:
        source = os.path.join(folder, "input.onnx")
        target = os.path.join(folder, "optimized.onnx")
        onnx.save(proto, source)
        session_options.optimized_model_filepath = target
        ort.InferenceSession(source, session_options, providers=["CPUExecutionProvider"])
        return load_model_proto(target)


@register_tool("onnxsim")
def _run_onnxsim(proto: onnx.ModelProto, **options: Any) -> onnx.ModelProto:
    try:
        import onnxsim
    except ImportError as error:
        raise _missing("onnxsim", error) from None
    simplified, ok = onnxsim.simplify(proto, **options)
    if not ok:
        raise CorrespondenceError(
            "onnxsim could not validate its simplified model (its outputs differ from the "
            "input model's); run it with other options or use another tool"
        )
    return simplified  # type: ignore[no-any-return]


@register_tool("onnxslim")
def _run_onnxslim(proto: onnx.ModelProto, **options: Any) -> onnx.ModelProto:
    try:
        import onnxslim
    except ImportError as error:
        raise _missing("onnxslim", error) from None
    return onnxslim.slim(proto, **options)  # type: ignore[no-any-return]


@register_tool("onnxoptimizer")
def _run_onnxoptimizer(proto: onnx.ModelProto, **options: Any) -> onnx.ModelProto:
    try:
        import onnxoptimizer
    except ImportError as error:
        raise _missing("onnxoptimizer", error) from None
    return onnxoptimizer.optimize(proto, **options)  # type: ignore[no-any-return]


@overload
def optimize_with(
    tool: str, model: ir.Model | ONNXProgram, *, policies: Policies | None = ..., **options: Any
) -> ir.Model: ...
@overload
def optimize_with(
    tool: str,
    model: onnx.ModelProto | str | os.PathLike[str],
    *,
    policies: Policies | None = ...,
    **options: Any,
) -> onnx.ModelProto: ...
def optimize_with(
    tool: str,
    model: ModelInput,
    *,
    policies: Policies | None = None,
    **options: Any,
) -> onnx.ModelProto | ir.Model:
    """Runs a third-party optimizer on ``model`` and restores provenance on its result.

    Args:
        tool: ``"onnxruntime"`` (options: ``level="basic"|"extended"|"all"`` and session
            config entries), ``"onnxsim"``, ``"onnxslim"`` or ``"onnxoptimizer"`` (options
            go to the tool's own function).
        model: the model with provenance (ModelProto, onnx_ir.Model, path or
            torch.onnx.ONNXProgram).
        policies: merge policies for :func:`modelprov.recover`.

    Returns:
        The tool's model with provenance, as an onnx_ir.Model for an onnx_ir.Model or
        ONNXProgram input, else as a ModelProto.
    """
    registered = TOOLS.get(tool)
    if registered is None:
        raise UsageError(f"unknown tool {tool!r}; choose one of {', '.join(TOOLS)}")
    found = model_input(model, where="optimize_with", path_as="proto", load_weights=True)
    proto = ir.to_proto(found) if isinstance(found, ir.Model) else found
    optimized = registered.run(proto, **options)
    restored, _ = recover_with_report(proto, optimized, policies=policies)
    if isinstance(restored, ir.Model):
        return restored
    return ir.from_proto(restored) if isinstance(found, ir.Model) else restored
