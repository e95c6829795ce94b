"""modelprov.functionize: ATen ops or nn.Module calls as calls of model-local functions.

``level="aten"``: the main-graph nodes computing one FX node (its *primary* source, below)
become one call in domain ``pkg.torch.aten``, named from the ATen qualified name
(``aten::addmm.default`` -> ``aten_addmm_default``); inputs are the schema's tensor
arguments in order (a ``Tensor[]`` argument ``t`` gives ``t_0``, ``t_1``, …; an absent one is
an empty input), attributes the non-tensor arguments with the call's values; constants the
nodes read that are no argument are copied into the body. ``level="module"``: each
nn.Module call (``pkg.torch.onnx.name_scopes`` / ``class_hierarchy``), innermost first,
becomes a call in domain ``pkg.torch.module`` named from the class. Equal bodies share one
function; ``overload`` is the first 12 hex digits of its structural hash.

Left as they are and reported (:attr:`FunctionizeResult.skipped`, and logged): nodes with
subgraphs (If, Loop, Scan), nodes without FX provenance or ATen schema, groups whose nodes
cannot become one node (a path leaves and re-enters them) or read values that match no
argument. Existing functions are kept.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import os
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, overload

import onnx_ir as ir

from modelprov._model_io._convert import ModelInput, ModelProto, run_on_copy
from modelprov.core._policy import Policies
from modelprov.core._provenance import Provenance
from modelprov.core._sources import _literal_list
from modelprov.errors import UsageError
from modelprov.keys import (
    ATEN_DOMAIN,
    ATEN_SCHEMA_KEY,
    ATEN_SCHEMAS_KEY,
    ATEN_TARGET_KEY,
    CLASS_HIERARCHY_KEY,
    MODULE_CLASS_KEY,
    MODULE_DOMAIN,
    NAME_SCOPES_KEY,
)
from modelprov.onnx._pass_options import FunctionizeOptions, Level
from modelprov.onnx.functions._aten_call import (
    AtenCall,
    call_of,
    function_name,
    load_schemas,
    onnx_attribute,
    schema_of,
)
from modelprov.onnx.functions._call_provenance import call_metadata, rewrite_table
from modelprov.onnx.functions._node_order import record_node_order, store_node_order
from modelprov.onnx.functions._wrap import (
    Region,
    Wrapper,
    constant_node,
    has_subgraphs,
    is_constant,
)

if TYPE_CHECKING:
    from torch.onnx import ONNXProgram

__all__ = [
    "ATEN_TARGET_KEY",
    "MODULE_CLASS_KEY",
    "FunctionizePass",
    "FunctionizeResult",
    "Skipped",
    "functionize",
]

logger = logging.getLogger(__name__)

MAX_COPIED_CONSTANT_BYTES = 1 << 16
_IDENTIFIER = re.compile(r"\W")


@dataclasses.dataclass(frozen=True)
class Skipped:
    """Nodes functionize left as they were, and why."""

    nodes: tuple[str, ...]
    reason: str


def _label(node: ir.Node) -> str:
    return node.name or node.op_type


@dataclasses.dataclass
class FunctionizeResult(ir.passes.PassResult):
    """The pass's result: the model, whether it changed, the calls made and what was left."""

    calls: int = 0
    skipped: tuple[Skipped, ...] = ()


@dataclasses.dataclass
class _Run:
    """What one run of the pass made and left (kept per run, never on the pass)."""

    calls: int = 0
    skipped: list[Skipped] = dataclasses.field(default_factory=list)


_LEVEL_BEHAVIOURS: dict[str, str] = {"aten": "_wrap_aten_ops", "module": "_wrap_module_calls"}
"""Which method of :class:`FunctionizePass` each ``level`` runs."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class FunctionizePass(FunctionizeOptions, ir.passes.InPlacePass):
    """Wraps ATen ops (``level="aten"``) or nn.Module calls (``"module"``) into functions.

    The two levels are two behaviours, named by the methods they run
    (:data:`_LEVEL_BEHAVIOURS`): ``_wrap_aten_ops`` (each FX node's ATen op, main graph
    only) and ``_wrap_module_calls`` (each nn.Module call, innermost first). The fields
    are the options. The result (:class:`FunctionizeResult`) counts the call
    nodes made (``calls``) and lists what was left as it was (``skipped``); ``modified`` is
    true when a call was made.
    """

    policies: Policies | None = None

    def __post_init__(self) -> None:
        if self.level not in _LEVEL_BEHAVIOURS:
            raise UsageError(f"functionize level must be 'aten' or 'module', got {self.level!r}")

    def __call__(self, model_or_result: ir.Model | ir.passes.PassResult, /) -> FunctionizeResult:
        result = super().__call__(model_or_result)
        assert isinstance(result, FunctionizeResult)  # call() makes one
        return result

    def call(self, model: ir.Model) -> FunctionizeResult:
        run = _Run()
        order = record_node_order(model)  # inline gives it back (_node_order)
        provenance = Provenance.read(model)
        wrapper = Wrapper(model)
        getattr(self, _LEVEL_BEHAVIOURS[self.level])(model, provenance, wrapper, run)
        if run.calls:
            if model.ir_version is None or model.ir_version < 10:
                model.ir_version = 10
            rewrite_table(model, provenance.table)
            store_node_order(model, order)
            if not _is_sorted(model.graph):
                model.graph.sort()
        for skipped in run.skipped:
            logger.info(
                "functionize left %d node(s) (%s): %s",
                len(skipped.nodes),
                ", ".join(skipped.nodes[:4]),
                skipped.reason,
            )
        logger.info(
            "functionize(level=%r): %d call(s) of %d function(s); %d group(s) left as they were",
            self.level,
            run.calls,
            len(wrapper.functions),
            len(run.skipped),
        )
        return FunctionizeResult(model, run.calls > 0, run.calls, tuple(run.skipped))

    def _wrap(self, wrapper: Wrapper, provenance: Provenance, region: Region, run: _Run) -> ir.Node:
        indices: set[int] = set()
        for node in region.nodes:
            indices.update(provenance.node_sources.get(node, frozenset()))
        outputs = wrapper.outputs_of(region.nodes)
        produced: set[int] = set()
        for value in outputs:
            produced.update(provenance.value_sources.get(value, frozenset()))
        metadata = call_metadata(
            provenance, indices, produced, label=f"call_{region.key}", policies=self.policies
        )
        old_sources = [provenance.value_sources.get(value) for value in outputs]
        call = wrapper.wrap(region, metadata)
        run.calls += 1
        provenance.node_sources[call] = frozenset(indices)
        for value, sources in zip(call.outputs, old_sources, strict=True):
            if sources is not None:
                provenance.value_sources[value] = sources
        return call

    # -- level="aten" -------------------------------------------------------------------

    def _wrap_aten_ops(
        self, model: ir.Model, provenance: Provenance, wrapper: Wrapper, run: _Run
    ) -> None:
        schemas = load_schemas(model.metadata_props.get(ATEN_SCHEMAS_KEY))
        groups: dict[str, list[ir.Node]] = {}
        primaries: dict[str, int] = {}
        orphans: list[ir.Node] = []
        fx_of: dict[ir.Node, str] = {}
        for node in model.graph:
            if _is_call(model, node):
                continue  # functionized already: a call stays as it is
            if has_subgraphs(node):
                run.skipped.append(Skipped((_label(node),), "holds subgraphs (If/Loop/Scan)"))
                continue
            primary = _primary(node, provenance, schemas)
            fx_of[node] = provenance.table[primary].fx_node if primary is not None else ""
            if primary is None:
                orphans.append(node)
                continue
            key = provenance.table[primary].fx_node
            groups.setdefault(key, []).append(node)
            primaries.setdefault(key, primary)
        if orphans:
            run.skipped.append(
                Skipped(tuple(_label(n) for n in orphans), "no FX node with an ATen schema")
            )
        names = _value_names(model.graph)
        order = {node: index for index, node in enumerate(model.graph)}
        regions: list[Region] = []
        for key, nodes in groups.items():
            source = provenance.table[primaries[key]]
            call = call_of(source.metadata, names, schemas)
            labels = tuple(_label(node) for node in nodes)
            if call is None:
                run.skipped.append(Skipped(labels, f"{source.target}: no ATen schema found"))
                continue
            if not wrapper.is_convex(nodes, order):
                run.skipped.append(
                    Skipped(labels, f"{call.target}: a path leaves these nodes and comes back")
                )
                continue
            region = _aten_region(key, nodes, call, provenance, fx_of, schemas)
            if isinstance(region, str):
                run.skipped.append(Skipped(labels, region))
                continue
            regions.append(region)
        # Consumers read their own copies of external constants before any wrapping, so
        # a constant never becomes an extra output of the call that made it.
        for region in regions:
            _detach_constants(region)
        for region in regions:
            self._wrap(wrapper, provenance, region, run)
        for name, value in list(model.graph.initializers.items()):
            if not value.uses() and not value.is_graph_output():
                del model.graph.initializers[name]

    # -- level="module" -----------------------------------------------------------------

    def _wrap_module_calls(
        self, model: ir.Model, provenance: Provenance, wrapper: Wrapper, run: _Run
    ) -> None:
        schemas = load_schemas(model.metadata_props.get(ATEN_SCHEMAS_KEY))
        chains: dict[ir.Node, list[tuple[str, str]]] = {}
        for node in model.graph:
            primary = _primary(node, provenance, schemas)
            metadata: Mapping[str, str] = node.metadata_props
            if primary is not None:
                metadata = provenance.table[primary].metadata
            chains[node] = _module_chain(metadata)
            if node.domain == MODULE_DOMAIN and _is_call(model, node):
                chains[node] = _parents_of_call(node, chains[node])
        paths: dict[str, tuple[int, int, str]] = {}
        for position, node in enumerate(model.graph):
            for depth, (path, cls) in enumerate(chains[node], start=1):
                paths.setdefault(path, (depth, position, cls))
        for path, (depth, _, cls) in sorted(
            paths.items(), key=lambda item: (-item[1][0], item[1][1])
        ):
            nodes = [
                node
                for node in model.graph
                if len(chains.get(node, ())) >= depth and chains[node][depth - 1][0] == path
            ]
            if not nodes:
                continue
            labels = tuple(_label(node) for node in nodes)
            if any(has_subgraphs(node) for node in nodes):
                run.skipped.append(Skipped(labels, f"module {path!r} holds subgraphs"))
                continue
            order = {node: index for index, node in enumerate(model.graph)}
            if not wrapper.is_convex(nodes, order):
                run.skipped.append(
                    Skipped(labels, f"module {path!r}: a path leaves its nodes and comes back")
                )
                continue
            inputs = _external_inputs(nodes)
            short = cls.rpartition(".")[2] or cls
            region = Region(
                nodes=nodes,
                inputs=list(inputs),
                input_names=[f"input_{i}" for i in range(len(inputs))],
                domain=MODULE_DOMAIN,
                name=_identifier(short),
                key=path,
                function_metadata={MODULE_CLASS_KEY: cls},
                doc_string=cls,
            )
            call = self._wrap(wrapper, provenance, region, run)
            chains[call] = chains[nodes[0]][: depth - 1]
        _name_nested_variants(model, wrapper)
        unwrapped = [_label(node) for node in model.graph if node.domain != MODULE_DOMAIN]
        if unwrapped:
            run.skipped.append(Skipped(tuple(unwrapped), "in no module below the root"))


def _name_nested_variants(model: ir.Model, wrapper: Wrapper) -> None:
    """Functions called inside other functions carry their variant in the name.

    onnxruntime 1.32 cannot resolve the overload of a call inside a function body ("not
    a registered function/op"), so such functions are named ``<Class>_<overload>`` with an
    empty overload; calls from the main graph only keep the overload field.
    """
    nested = {
        node.op_identifier()
        for function in wrapper.functions.values()
        for node in function
        if node.op_identifier() in wrapper.functions
    }
    renamed: dict[ir.OperatorIdentifier, ir.OperatorIdentifier] = {}
    for key in sorted(nested):
        function = model.functions.pop(key)
        function.name = f"{function.name}_{function.overload}"
        function.overload = ""
        renamed[key] = function.identifier()
        model.functions[function.identifier()] = function
        wrapper.functions[function.identifier()] = wrapper.functions.pop(key)
    if not renamed:
        return
    graphs: list[ir.Graph | ir.Function] = [model.graph, *model.functions.values()]
    for graph in graphs:
        for node in graph:
            new = renamed.get(node.op_identifier())
            if new is not None:
                node.op_type, node.overload = new[1], new[2]


def _is_call(model: ir.Model, node: ir.Node) -> bool:
    """True for a call of a function functionize made (a model functionized before)."""
    return node.domain in (ATEN_DOMAIN, MODULE_DOMAIN) and node.op_identifier() in model.functions


def _parents_of_call(call: ir.Node, chain: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The modules around an existing module call (named ``call_<path>``): its chain up to
    its own module, which it computes already; all of it when its module is not found."""
    path = (call.name or "").removeprefix("call_")
    for depth, (module, _) in enumerate(chain):
        if module == path or re.fullmatch(re.escape(module) + r"_\d+", path):
            return chain[:depth]
    return []


def _identifier(text: str) -> str:
    name = _IDENTIFIER.sub("_", text)
    return name if name and not name[0].isdigit() else f"_{name}"


def _is_sorted(graph: ir.Graph) -> bool:
    seen: set[ir.Value] = set()
    for node in graph:
        for value in node.inputs:
            if value is not None and value.producer() is not None and value not in seen:
                return False
        seen.update(node.outputs)
    return True


def _external_inputs(nodes: Sequence[ir.Node]) -> list[ir.Value]:
    produced = {value for node in nodes for value in node.outputs}
    inputs: dict[ir.Value, None] = {}
    for node in nodes:
        for value in node.inputs:
            if value is not None and value not in produced:
                inputs.setdefault(value, None)
    return list(inputs)


def _has_schema(target: str, schemas: Mapping[str, str]) -> bool:
    """True when the model's schema pool or, failing that, torch has the target's schema
    (torch is imported only when the pool lacks it)."""
    if not target or "." not in target:
        return False
    namespace = target.partition("::")[0] if "::" in target else target.partition(".")[0]
    if namespace in _PYTHON_NAMESPACES:
        return False
    pooled = target if "::" in target else target.replace(".", "::", 1)
    return pooled in schemas or _torch_has_schema(target)


_PYTHON_NAMESPACES = frozenset({"operator", "_operator", "builtins", "math"})
"""Modules of the Python functions FX graphs call (``operator.getitem``): no ATen op."""


@functools.cache
def _torch_has_schema(target: str) -> bool:
    try:
        return schema_of(target) is not None
    except Exception:
        return False


def _primary(node: ir.Node, provenance: Provenance, schemas: Mapping[str, str]) -> int | None:
    """The source whose ATen op a node belongs to.

    The source an output value is named after; else the earliest source whose output
    the node produces (later ones are aliases such as a removed clone); else the latest
    source it computes (earlier ones were folded into it).
    """
    table = provenance.table
    indices = [
        index
        for index in sorted(provenance.node_sources.get(node, frozenset()))
        if table[index].fx_node and _has_schema(table[index].target, schemas)
    ]
    if not indices:
        return None
    names = {value.name for value in node.outputs}
    for index in indices:
        if table[index].fx_node in names:
            return index
    produced: set[int] = set()
    for value in node.outputs:
        produced.update(provenance.value_sources.get(value, frozenset()))
    for index in indices:
        if index in produced:
            return index
    return indices[-1]


def _value_names(graph: ir.Graph) -> dict[str, str]:
    """FX names -> ONNX value names, for plain exports without the aten_call record."""
    names: dict[str, str] = {}
    for value in graph.inputs:
        if value.name:
            names[value.name] = value.name
    for name in graph.initializers:
        flat = _IDENTIFIER.sub("_", name)
        for prefix in ("p_", "b_", "c_", ""):
            names.setdefault(prefix + flat, name)
    for node in graph:
        for value in node.outputs:
            if value.name:
                names.setdefault(value.name, value.name)
    return names


def _aten_region(
    key: str,
    nodes: list[ir.Node],
    call: AtenCall,
    provenance: Provenance,
    fx_of: Mapping[ir.Node, str],
    schemas: Mapping[str, str],
) -> Region | str:
    """The region of one ATen call, or why it cannot be one."""
    externals = _external_inputs(nodes)
    slots: list[tuple[str, str, str]] = []
    for argument in call.tensor_arguments:
        for position, (fx, onnx_name) in enumerate(argument.tensors):
            name = f"{argument.name}_{position}" if argument.is_list else argument.name
            slots.append((name, fx, onnx_name))
    chosen: list[ir.Value | None] = [None] * len(slots)
    used: set[ir.Value] = set()
    primary_fx = {
        value: _producer_fx(value, provenance, fx_of, schemas)
        for value in externals
        if value.producer()
    }
    for index, (_, fx, onnx_name) in enumerate(slots):
        if not fx:
            continue
        for value in externals:
            if value in used:
                continue
            if value.name in (onnx_name, fx) or primary_fx.get(value) == fx:
                chosen[index] = value
                used.add(value)
                break
    loose = [value for value in externals if value not in used and not is_constant(value)]
    for index, (_, fx, _) in enumerate(slots):
        if chosen[index] is None and fx and loose:
            chosen[index] = loose.pop(0)
            used.add(chosen[index])  # type: ignore[arg-type]
    if loose:
        return (
            f"{call.target}: reads {loose[0].name!r}, which matches no tensor argument "
            f"({', '.join(name for name, _, _ in slots) or 'none'})"
        )
    if len(slots) < len({v for v in chosen if v is not None}):
        return f"{call.target}: more inputs than tensor arguments"
    constants = [value for value in externals if value not in used]
    for value in constants:
        if value.const_value is not None and value.const_value.nbytes > MAX_COPIED_CONSTANT_BYTES:
            return (
                f"{call.target}: reads the large constant {value.name!r}, which matches no "
                "tensor argument"
            )
    attributes = [
        attribute
        for argument in call.arguments
        if not argument.is_tensor
        for attribute in [onnx_attribute(argument)]
        if attribute is not None
    ]
    return Region(
        nodes=nodes,
        inputs=chosen,
        input_names=[name for name, _, _ in slots],
        domain=ATEN_DOMAIN,
        name=function_name(call.target),
        key=key,
        external_constants=constants,
        attributes=attributes,
        declared=[argument.name for argument in call.arguments if not argument.is_tensor],
        function_metadata={ATEN_TARGET_KEY: call.target, ATEN_SCHEMA_KEY: call.schema},
        doc_string=call.schema,
    )


def _producer_fx(
    value: ir.Value,
    provenance: Provenance,
    fx_of: Mapping[ir.Node, str],
    schemas: Mapping[str, str],
) -> str:
    producer = value.producer()
    if producer is None:
        return ""
    known = fx_of.get(producer)
    if known is not None:
        return known
    primary = _primary(producer, provenance, schemas)
    return provenance.table[primary].fx_node if primary is not None else ""


def _detach_constants(region: Region) -> None:
    """Gives the region its own Constant node per external constant it reads.

    Done for every region before any is wrapped, so a constant never becomes an extra
    output of the call that made it.
    """
    copies: dict[ir.Value, ir.Value] = {}
    for value in region.external_constants:
        constant = constant_node(value)
        copies[value] = constant.outputs[0]
        region.constants.append(constant)
    # The region's own reads only: a shared constant may have thousands of other uses.
    for node in region.nodes:
        for index, read in enumerate(node.inputs):
            if read is not None and read in copies:
                node.replace_input_with(index, copies[read])


def _module_chain(metadata: Mapping[str, str]) -> list[tuple[str, str]]:
    """(module path, class) pairs from the root's child down to the module of an op."""
    scopes = _literal_list(metadata.get(NAME_SCOPES_KEY, ""))
    classes = _literal_list(metadata.get(CLASS_HIERARCHY_KEY, ""))
    if len(scopes) != len(classes):
        return []
    pairs = list(zip(scopes, classes, strict=True))[1:]
    if pairs:
        last_class = pairs[-1][1]
        if not re.search(r"(^|\.)[A-Z_]\w*$", last_class) or last_class.startswith("aten."):
            pairs.pop()
    return pairs


@overload
def functionize(
    model: ModelProto | str | os.PathLike[str],
    *,
    level: Level = ...,
    policies: Policies | None = ...,
) -> ModelProto: ...
@overload
def functionize(
    model: ir.Model | ONNXProgram, *, level: Level = ..., policies: Policies | None = ...
) -> ir.Model: ...
def functionize(
    model: ModelInput,
    *,
    level: Level = "aten",
    policies: Policies | None = None,
) -> ModelProto | ir.Model:
    """Wraps each ATen op (``level="aten"``) or nn.Module call (``"module"``) into a call
    of a model-local function; equal bodies share one function.

    Args:
        model: an ModelProto, onnx_ir.Model, path or torch.onnx.ONNXProgram (from
            torch.onnx or modelprov); not modified.
        level: ``"aten"`` (domain ``pkg.torch.aten``) or ``"module"`` (``pkg.torch.module``).
        policies: merge policies for the call nodes' metadata (default DEFAULT_POLICIES).

    Returns:
        The functionized model, of the same kind as ``model`` (a ModelProto for a path,
        an onnx_ir.Model for an ONNXProgram). What was left as it was is
        logged (logger ``modelprov.onnx.functions._functionize``); :class:`FunctionizePass` returns
        it as :attr:`FunctionizeResult.skipped`.
    """
    functionized, _ = run_on_copy(
        FunctionizePass(level=level, policies=policies), model, where="functionize"
    )
    return functionized
