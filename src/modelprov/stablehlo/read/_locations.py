"""Op locations that are provenance: written after lowering, read back from any MLIR.

Each op lowered from an FX node gets ``loc("<module path>/<source node>"(<user frames>))``:

- the name is the module path (``layers.0.self_attn``) and the node of the user's
  ``torch.export`` program (``linear``; the source id ONNX exports share), joined by ``/``;
  ops of the root module have just the node name;
- inside, the user frame as a ``callsite`` chain of ``"<function>"("<file>":<line>:0)``
  frames (the user frame first, then its callers), as JAX writes Python frames; XLA turns
  the name into ``op_name`` and the frames into the instruction's stack frames;
- an op lowered from several nodes gets a ``fused[...]`` location of one such name each.

Ops whose location named no node keep theirs. :func:`decode` reads these names back from a
location of any MLIR Python binding (JAX's ``jaxlib.mlir.ir`` or IREE's ``iree.compiler.ir``),
so provenance is found after tools that drop attributes (IREE's flow stage) but keep
locations.
"""

from __future__ import annotations

import collections
import dataclasses
import re
import types
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, TypeVar

from modelprov.core._sources import Source
from modelprov.core._stack_trace import Frame
from modelprov.errors import StableHLOError
from modelprov.stablehlo.lower._frames import is_tool_file
from modelprov.stablehlo.read._location_keys import attribute_text, location_keys

__all__ = [
    "MAX_LOCATION_PARTS",
    "carried_keys",
    "decode",
    "decoder",
    "keys_reader",
    "located_source",
    "location_label",
    "location_name",
    "name_and_child",
    "provenance_location",
    "relocate",
    "walk_names",
    "with_aliases",
    "without_frames",
]

_T = TypeVar("_T")
_NAME = re.compile(r"^(?:(?P<module>[\w.]+)/)?(?P<node>[A-Za-z_]\w*)$")


def located_source(module: str, node: str, frames: tuple[Frame, ...]) -> Source:
    """What one provenance location says, as a ``Source``: ``id`` the node of the user's
    torch.export program (the shared source id), ``module_path`` the module path ('' for the
    root module), ``call_stack`` the recorded frames (outermost first; the last, the user
    frame, gives ``file`` and ``line``). The other fields are unknown ('')."""
    user_frame = frames[-1] if frames else None
    return Source(
        id=node,
        fx_node="",
        module_path=module,
        module_type="",
        target="",
        file=user_frame.file if user_frame else None,
        line=user_frame.line if user_frame else None,
        stack_trace="",
        call_stack=frames,
    )


def location_name(module: str, node: str) -> str:
    """The location name of an op: ``module/node``, or ``node`` for the root module."""
    return f"{module}/{node}" if module else node


def _frame_location(ir: Any, frames: Sequence[Frame]) -> Any:
    if not frames:
        return ir.Location.unknown()
    located = [
        ir.Location.name(
            frame.function or "<unknown>", childLoc=ir.Location.file(frame.file, frame.line, 0)
        )
        for frame in reversed(frames)
    ]
    if len(located) == 1:
        return located[0]
    return ir.Location.callsite(located[0], located[1:])


def provenance_location(ir: Any, infos: Sequence[Source]) -> Any:
    """The location of an op lowered from ``infos`` (a name, or a fused list of names)."""
    parts: list[Any] = []
    seen: set[str] = set()
    for info in infos:
        for node in info.shared_ids():
            name = location_name(info.module_path, node)
            if name in seen:
                continue
            seen.add(name)
            parts.append(ir.Location.name(name, childLoc=_frame_location(ir, info.call_stack)))
    if len(parts) == 1:
        return parts[0]
    return ir.Location.fused(parts)


def with_aliases(
    nodes: Sequence[str],
    infos: Mapping[str, Source],
    aliases: Mapping[str, tuple[Source, ...]],
) -> list[Source]:
    """The infos of ``nodes``, each followed by the nodes whose output it produces."""
    result: list[Source] = []
    for name in nodes:
        result.append(infos[name])
        result.extend(aliases.get(name, ()))
    return result


def location_label(
    nodes: Sequence[str],
    infos: Mapping[str, Source],
    aliases: Mapping[str, tuple[Source, ...]],
) -> str:
    """The ``;``-joined location names of ``nodes`` and the nodes they stand for, each
    shared id once, in order (an op's record of its provenance as one string)."""
    names: list[str] = []
    for info in with_aliases(nodes, infos, aliases):
        for node in info.shared_ids():
            label = location_name(info.module_path, node)
            if label not in names:
                names.append(label)
    return ";".join(names)


def relocate(
    operations: Iterable[tuple[Any, Sequence[str]]],
    infos: Mapping[str, Source],
    aliases: Mapping[str, tuple[Source, ...]] | None = None,
) -> int:
    """Give each ``(operation, FX node names)`` pair with nodes its provenance location.

    Ops without nodes (hoisted constants, returns, functions) lose JAX's Python frames, which
    name the lowering's code, not the model's (see :func:`without_frames`). Must run inside
    the module's MLIR context; returns how many ops were relocated.
    """
    from jaxlib.mlir import ir

    cache: dict[tuple[str, ...], Any] = {}
    count = 0
    for operation, nodes in operations:
        if not nodes:
            operation.location = without_frames(ir, operation.location)
            continue
        key = tuple(nodes)
        location = cache.get(key)
        if location is None:
            location = cache[key] = provenance_location(ir, with_aliases(key, infos, aliases or {}))
        operation.location = location
        count += 1
    return count


def without_frames(ir: Any, location: Any) -> Any:
    """The location of an op from no FX node: unknown.

    JAX's location there names the lowering's own code (Python frames of torchax, jax and
    modelprov, scopes such as ``jit(forward)``), never the model; a plain name left behind
    could also be mistaken for a source node.
    """
    del location
    return ir.Location.unknown()


MAX_LOCATION_PARTS = 100_000
"""Most locations (names, fused parts, call sites) one op's location is walked through."""


def walk_names(
    ir: Any,
    location: Any,
    stop: Callable[[str, Any], bool],
    carried: Callable[[Any], Mapping[str, Any] | None] | None = None,
) -> Iterator[tuple[str, Any, bool, Mapping[str, Any]]]:
    """Every name in ``location`` breadth first, as ``(name, child location, stopped, keys)``.

    Fused locations give each part, call sites their callee; the walk goes on into the
    child of a name that ``stop(name, child)`` rejects. ``carried(fused)`` (an
    ``ir.FusedLoc``) says which keys a fused location carries (``_location_keys``), None for
    none; ``keys`` are those of the fused locations enclosing the name, the innermost's
    winning (empty without ``carried``). Each distinct location is visited once per set of
    enclosing carriers (once in all without ``carried``), so the walk is linear in the
    location's size even when its parts are shared (aliases make a DAG); more than
    ``MAX_LOCATION_PARTS`` visits, keys handed out and keys merged raise StableHLOError.
    The one walker of the readers (:func:`decode`, :func:`carried_keys`) and of the
    exporter (``_attach``).
    """
    no_keys: Mapping[str, Any] = types.MappingProxyType({})
    # Carrier chains as numbers: 0 none, then one per keyed fused location met in a chain.
    chains: list[Mapping[str, Any]] = [no_keys]
    pending = collections.deque([(location, 0)])
    seen = {(_identity(location), 0)}
    key_parts = 0
    first_name = ""
    while pending:
        loc, chain = pending.popleft()
        keys = chains[chain]
        typeid = loc.typeid
        children: Iterable[Any] = ()
        inner = chain
        if typeid == ir.NameLoc.static_typeid:
            name, child = name_and_child(ir, loc)
            first_name = first_name or name
            stopped = stop(name, child)
            key_parts += len(keys)
            yield name, child, stopped, keys
            if not stopped:
                children = (child,)
        elif typeid == ir.FusedLoc.static_typeid:
            fused = ir.FusedLoc(loc)
            children = fused.locations
            own = carried(fused) if carried is not None else None
            if own:
                merged = {**keys, **own}
                key_parts += len(merged)
                inner = len(chains)
                chains.append(types.MappingProxyType(merged))
        elif typeid == ir.CallSiteLoc.static_typeid:
            children = (ir.CallSiteLoc(loc).callee,)
        for child in children:
            key = (_identity(child), inner)
            if key not in seen:
                seen.add(key)
                pending.append((child, inner))
        if len(seen) + key_parts > MAX_LOCATION_PARTS:
            # Not the location printed: a shared DAG prints every path (2**n of them).
            named = f" (the first named {first_name[:80]!r})" if first_name else ""
            raise StableHLOError(
                f"a location has more than {MAX_LOCATION_PARTS:,} parts{named}; pass MLIR "
                "whose locations name fewer sources"
            )


def name_and_child(ir: Any, location: Any) -> tuple[str, Any]:
    """A NameLoc's name and child location; ``""`` and an unknown location for another kind."""
    if location.typeid != ir.NameLoc.static_typeid:
        return "", ir.Location.unknown()
    name_loc = ir.NameLoc(location)
    return str(name_loc.name_str), name_loc.child_loc


def _identity(location: Any) -> Any:
    """What tells distinct locations apart (the uniqued attribute), hashable."""
    return getattr(location, "attr", location)


def decode(ir: Any, location: Any) -> list[Source]:
    """The provenance names in ``location`` (a Location of the binding module ``ir``), as
    sources (:func:`located_source`).

    Fused locations give one entry per named part; call sites are searched on their callee;
    names that are not ``module/node`` (JAX's ``jit(...)`` scopes, argument names) or whose
    frames are the lowering tools' (JAX's own locations) are looked through to their child.
    User keys a fused location carries (``_location_keys``) become the ``metadata`` of the
    names inside it (as text). Entries are distinct, in order; the same name met twice
    (fused locations of merged ops) is one entry with the keys of both.
    """
    is_provenance = _provenance_stop(ir)

    def texts(fused: Any) -> dict[str, str] | None:
        carried = location_keys(ir, fused)
        if not carried:
            return None
        found = {key: attribute_text(ir, value) for key, value in carried.items()}
        return {key: text for key, text in found.items() if text is not None}

    found: dict[tuple[str, str, tuple[Frame, ...]], tuple[Source, dict[str, str]]] = {}
    for name, child, stopped, keys in walk_names(ir, location, is_provenance, texts):
        if stopped:
            match = _NAME.match(name)
            assert match is not None
            frames = _frames(ir, child)
            key = (match["module"] or "", match["node"], frames)
            entry = found.get(key)
            if entry is None:
                entry = found[key] = (located_source(*key), {})
            for user_key, value in keys.items():  # the first met wins
                entry[1].setdefault(user_key, value)
    return [_with_metadata(source, keys) if keys else source for source, keys in found.values()]


def decoder(ir: Any) -> Callable[[Any], list[Source]]:
    """:func:`decode` for many ops: a location shared by ops (or by aliases) is read once."""
    read = _read_once(lambda location: decode(ir, location))
    return lambda location: list(read(location))


def carried_keys(ir: Any, location: Any) -> dict[str, Any]:
    """Every user key the provenance names in ``location`` carry (``_location_keys``; name
    -> ``ir.Attribute``, typed as written): names in walk order, the first name's value
    winning, and for one name its innermost carrier's. Walked by :func:`walk_names`."""

    def keys_of(fused: Any) -> dict[str, Any] | None:
        return location_keys(ir, fused)

    found: dict[str, Any] = {}
    for _, _, _, keys in walk_names(ir, location, _provenance_stop(ir), keys_of):
        for key, value in keys.items():
            found.setdefault(key, value)
    return found


def keys_reader(ir: Any) -> Callable[[Any], dict[str, Any]]:
    """:func:`carried_keys` for many ops: a location shared by ops is read once."""
    read = _read_once(lambda location: carried_keys(ir, location))
    return lambda location: dict(read(location))


def _read_once(read: Callable[[Any], _T]) -> Callable[[Any], _T]:
    """``read`` with its result kept per location (by identity): callers copy it."""
    cache: dict[Any, _T] = {}

    def cached(location: Any) -> _T:
        key = _identity(location)
        if key not in cache:
            cache[key] = read(location)
        return cache[key]

    return cached


def _provenance_stop(ir: Any) -> Callable[[str, Any], bool]:
    """Where the walk stops: at a name that is provenance (``module/node`` over user frames)."""

    def is_provenance(name: str, child: Any) -> bool:
        return _NAME.match(name) is not None and _is_frame_chain(ir, child)

    return is_provenance


def _with_metadata(entry: Source, keys: Mapping[str, str]) -> Source:
    return dataclasses.replace(entry, metadata=types.MappingProxyType(dict(keys)))


def _is_frame_chain(ir: Any, location: Any) -> bool:
    """True for what :func:`_frame_location` writes: unknown, or frames of no lowering tool."""
    if location.typeid == ir.UnknownLoc.static_typeid:
        return True
    if location.typeid not in (ir.CallSiteLoc.static_typeid, ir.NameLoc.static_typeid):
        return False
    frames = _frames(ir, location)
    return bool(frames) and not any(is_tool_file(frame.file) for frame in frames)


def _frames(ir: Any, location: Any) -> tuple[Frame, ...]:
    """Frames of a chain written by :func:`_frame_location`, outermost first."""
    inner_first: list[Frame] = []
    pending: Any = location
    while pending is not None:
        typeid = pending.typeid
        if typeid == ir.CallSiteLoc.static_typeid:
            site = ir.CallSiteLoc(pending)
            inner_first.extend(_single_frame(ir, site.callee))
            pending = site.caller
        else:
            inner_first.extend(_single_frame(ir, pending))
            pending = None
    return tuple(reversed(inner_first))


def _single_frame(ir: Any, location: Any) -> list[Frame]:
    function = ""
    if location.typeid == ir.NameLoc.static_typeid:
        function, location = name_and_child(ir, location)
    if location.typeid != ir.FileLineColLoc.static_typeid:
        return []
    file_loc = ir.FileLineColLoc(location)
    return [Frame(str(file_loc.filename), int(file_loc.start_line), function, "")]
