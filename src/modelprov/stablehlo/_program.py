"""StableHLOProgram: the labelled StableHLO module, its portable artifact, and how to run it."""

from __future__ import annotations

import dataclasses
import inspect
import io
import os
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from modelprov.annotation import effective_annotations
from modelprov.core._scoping import KeyScoping, within
from modelprov.core._sources import Source
from modelprov.errors import StableHLOError
from modelprov.stablehlo._records import OpRecord, provenance_attributes

__all__ = ["EXPORT_SUFFIX", "WEIGHTS_SUFFIX", "StableHLOProgram", "load_exported"]

EXPORT_SUFFIX = ".jaxexport"
"""``save(path)`` writes ``jax.export.Exported.serialize()`` bytes to ``path + EXPORT_SUFFIX``."""

WEIGHTS_SUFFIX = ".weights.npz"
"""``save(path)`` writes the weights (``arr_0``, ``arr_1``, ... in call order) here."""


@dataclasses.dataclass(frozen=True)
class StableHLOProgram:
    """A model lowered to StableHLO whose ops carry ``modelprov.*`` and user attributes.

    The exported function is ``forward(weights, inputs)``: ``weights`` are the model's
    parameters, buffers and constants (in ``weights`` order), ``inputs`` the flattened user
    inputs of ``torch.export``. :meth:`run` supplies the weights.

    Attributes:
        text: the MLIR module text with attributes, without debug locations.
        text_with_locations: the same text with locations (``loc("jit(forward)/<node>/...")``).
        exported: the ``jax.export.Exported`` whose serialized module holds the attributes.
        weights: parameters, buffers and lifted constants as JAX arrays, in call order.
        ops: every op of the module (functions and the module itself excluded), in printing
            order, with the attributes modelprov set.
        nodes: provenance of the decomposed ExportedProgram's call nodes, by name, as
            ``Source`` records (``id`` the node's name, ``source_nodes`` the user's nodes).
        annotations: the normalized user annotations that were applied.
        aliases: FX node -> the nodes of the user's program without ops of their own
            (``dropout`` in eval mode, ``contiguous``...) whose output its ops produce;
            they are sources of those ops too.
        exported_program: the decomposed ``torch.export.ExportedProgram`` that was lowered;
            its FX node names are the ``modelprov.node`` values.
        scoping: which annotation keys apply to which source (``core._scoping``, shared
            with the ONNX exporter); None: every key of a source's module and its ancestors.
        exits: source id -> the modules declaring value-scoped keys whose output some op of
            that source makes (the backend's answer ``scoping`` asks for).
    """

    text: str
    text_with_locations: str
    exported: Any
    weights: tuple[Any, ...]
    ops: tuple[OpRecord, ...]
    nodes: Mapping[str, Source]
    annotations: Mapping[str, Mapping[str, str]]
    exported_program: Any = dataclasses.field(default=None, repr=False, compare=False)
    aliases: Mapping[str, tuple[Source, ...]] = dataclasses.field(
        default_factory=dict, repr=False, compare=False
    )
    scoping: KeyScoping | None = dataclasses.field(default=None, repr=False, compare=False)
    exits: Mapping[str, frozenset[str]] = dataclasses.field(
        default_factory=dict, repr=False, compare=False
    )

    @property
    def unattributed_ops(self) -> tuple[OpRecord, ...]:
        """Ops whose location names no FX node (hoisted constants, shape checks)."""
        return tuple(op for op in self.ops if not op.nodes)

    @property
    def coverage(self) -> float:
        """Share of the lowered function's non-constant ops that carry ``modelprov.node``.

        Ops of JAX's dynamic-shape wrapper (``OpRecord.in_wrapper``) are not counted; they
        are in ``unattributed_ops``. 1.0 when nothing is counted.
        """
        counted = [op for op in self.ops if not op.is_constant and not op.in_wrapper]
        if not counted:
            return 1.0
        return sum(1 for op in counted if op.nodes) / len(counted)

    def ops_for(self, module_path: str) -> tuple[OpRecord, ...]:
        """The ops made by the module at ``module_path`` or its submodules ('' for all)."""
        return tuple(
            op
            for op in self.ops
            if op.nodes and any(within(self.nodes[n].module_path, module_path) for n in op.nodes)
        )

    def sources(self, op: OpRecord | int) -> tuple[Source, ...]:
        """The sources ``op`` (a record or its index) was lowered from.

        One source per node of the user's torch.export program: ``id`` is that node's name
        (the id ONNX exports of the same program write, see ``modelprov.join_sources``),
        ``fx_node`` the decomposed node the op was lowered from, ``file``/``line`` the user
        frame its location records. ``Source.metadata`` holds that node's own ``modelprov.*``
        provenance keys and the user keys that apply to it, before any merging: as on the
        ONNX export of the same program, module-scoped keys of its module (inherited from
        ancestors) and value-scoped keys of the modules whose output it makes.
        """
        record = self.ops[op] if isinstance(op, int) else op
        result: list[Source] = []
        infos = [
            info
            for name in record.nodes
            for info in (self.nodes[name], *self.aliases.get(name, ()))
        ]
        for info in infos:
            for source_id in info.shared_ids():
                if any(source.id == source_id for source in result):
                    continue  # a node without ops of its own from the same user node
                metadata = {**provenance_attributes(info), **self._user_keys(info, source_id)}
                result.append(
                    dataclasses.replace(info, id=source_id, metadata=metadata, source_nodes=())
                )
        return tuple(result)

    def _user_keys(self, info: Source, source_id: str) -> dict[str, str]:
        if self.scoping is None:
            return effective_annotations(self.annotations, info.module_path)
        exits = self.exits.get(source_id, frozenset())
        applied = self.scoping.source_keys(
            info.module_path, leaves=exits.__contains__, made=info.shared_ids()
        )
        return {key: item.value for key, item in applied.items()}

    def run(self, *args: Any, **kwargs: Any) -> list[np.ndarray[Any, Any]]:
        """Run on XLA (CPU here) with torch tensors or arrays; returns numpy arrays.

        Takes the arguments the way the model's ``forward`` does (positional or by name,
        as in the example inputs of the export); arguments torch.export fixed as constants
        (``use_cache=False``...) may be left out, and must keep their value when given.
        """
        inputs = tuple(_to_numpy(arg) for arg in self._flat_inputs(args, kwargs))
        try:
            outputs = self.exported.call(self.weights, inputs)
        except Exception as exc:
            raise StableHLOError(
                f"running the StableHLO program failed: {type(exc).__name__}: {exc}; "
                f"it expects {len(self.exported.in_avals) - len(self.weights)} inputs shaped "
                f"{[str(a) for a in self.exported.in_avals[len(self.weights) :]]}"
            ) from exc
        return [np.asarray(output) for output in _flatten(outputs)]

    def _flat_inputs(self, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> list[Any]:
        """The exported function's inputs: arguments bound like ``forward``'s, flattened in
        the order of the export's example inputs, constants left out."""
        program = self.exported_program
        example = getattr(program, "example_inputs", None) if program is not None else None
        if program is None or example is None:
            if kwargs:
                raise StableHLOError(
                    "this program does not know its model's signature; pass the inputs "
                    "positionally, flattened"
                )
            return _flatten(args)
        example_args, example_kwargs = example
        if not kwargs and not example_kwargs:
            return _flatten(args)
        parameters = _forward_parameters(program)
        try:
            bound = inspect.Signature(parameters).bind_partial(*args, **kwargs).arguments
        except TypeError as exc:
            listed = ", ".join(p.name for p in parameters)
            raise StableHLOError(
                f"run() arguments do not match the model's forward({listed}): {exc}"
            ) from None
        names = [p.name for p in parameters[: len(example_args)]] + list(example_kwargs)
        given = dict(zip(names[: len(example_args)], example_args, strict=True))
        given.update(example_kwargs)
        leaves: list[Any] = []
        missing: list[str] = []
        is_constant = _constant_leaves(program)
        for name in names:
            start = len(leaves)
            leaves.extend(_flatten(given[name]))
            constants = [is_constant(i) for i in range(start, len(leaves))]
            if name not in bound:
                if not all(constants):
                    missing.append(name)
                continue
            values = _flatten(bound[name])
            fixed = [v for v, c, e in zip(values, constants, leaves[start:], strict=False) if c]
            expected = [e for e, c in zip(leaves[start:], constants, strict=False) if c]
            if fixed != expected or len(values) != len(constants):
                raise StableHLOError(
                    f"run() got {name}={bound[name]!r}, but the export fixed it to "
                    f"{given[name]!r} (a constant in the graph); export again to change it"
                )
            leaves[start:] = values
        if missing:
            raise StableHLOError(
                f"run() misses {', '.join(map(repr, missing))}: the export took them as inputs"
            )
        return leaves

    def save(self, path: str | os.PathLike[str]) -> tuple[str, str, str]:
        """Write ``path`` (MLIR text), ``path + ".jaxexport"`` and ``path + ".weights.npz"``.

        The ``.jaxexport`` file is ``jax.export.Exported.serialize()``: load it with
        :func:`load_exported` (or ``jax.export.deserialize``); its module keeps the attributes.
        Each file is written to a temporary file in the same folder, then renamed over.
        Returns the three paths.
        """
        text_path = os.fspath(path)
        export_path = text_path + EXPORT_SUFFIX
        weights_path = text_path + WEIGHTS_SUFFIX
        buffer = io.BytesIO()
        np.savez(buffer, *(np.asarray(weight) for weight in self.weights))
        _atomic_write(text_path, self.text.encode("utf-8"))
        _atomic_write(export_path, bytes(self.exported.serialize()))
        _atomic_write(weights_path, buffer.getvalue())
        return text_path, export_path, weights_path


def load_exported(path: str | os.PathLike[str]) -> tuple[Any, tuple[np.ndarray[Any, Any], ...]]:
    """Load what :meth:`StableHLOProgram.save` wrote at ``path``: ``(Exported, weights)``.

    Run it with ``exported.call(weights, inputs)``.
    """
    import jax.export

    base = os.fspath(path)
    with open(base + EXPORT_SUFFIX, "rb") as handle:
        exported = jax.export.deserialize(bytearray(handle.read()))
    with np.load(base + WEIGHTS_SUFFIX) as archive:
        weights = tuple(archive[f"arr_{i}"] for i in range(len(archive.files)))
    return exported, weights


def _atomic_write(path: str, data: bytes) -> None:
    # modelprov's one atomic writer: umask permissions, stale temporaries cleaned up.
    from modelprov._model_io._files import atomic_write_bytes

    atomic_write_bytes(path, data)


def _flatten(value: Any) -> list[Any]:
    if isinstance(value, list | tuple):
        return [leaf for item in value for leaf in _flatten(item)]
    if isinstance(value, dict):
        return [leaf for item in value.values() for leaf in _flatten(item)]
    return [value]


def _forward_parameters(program: Any) -> list[inspect.Parameter]:
    """``forward``'s parameters as torch.export recorded them (positional ones first)."""
    return list(inspect.signature(program.module().forward).parameters.values())


def _constant_leaves(program: Any) -> Callable[[int], bool]:
    """Whether the i-th flattened user input was specialized into a constant by torch.export
    (the graph computes with the example's value whatever is passed)."""
    from torch.export.graph_signature import ConstantArgument, InputKind

    specs = [s for s in program.graph_signature.input_specs if s.kind == InputKind.USER_INPUT]
    return lambda index: index < len(specs) and isinstance(specs[index].arg, ConstantArgument)


def _to_numpy(value: Any) -> Any:
    detach = getattr(value, "detach", None)
    if callable(detach):
        return detach().cpu().numpy()
    return value
