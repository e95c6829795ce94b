"""The report's data packed for the page: columns, one string table, nothing derivable.

``report_data`` builds one record per node, source and group; written out as is, a
48,000-node graph takes 23 MB, mostly the same stack traces, module paths and op types
repeated per record. ``pack`` turns the document into columns whose strings are indices
into one table of distinct strings (``strings``) and whose metadata maps are indices into
one table of distinct maps (``keysets``), and leaves out what the page derives: a node's
state, consumers and drawing position, a group's members, counts, label, size and inner
edges. ``unpack`` gives the document back exactly (the page's script does the same).
The format is documented in docs/metadata-format.md (``modelprov.report``, version 2).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from modelprov._base._versioned import header_problem
from modelprov.errors import MetadataError
from modelprov.keys import REPORT_FORMAT
from modelprov.report._layout import GAP_X, GAP_Y, NODE_H, NODE_W, PAD

__all__ = ["REPORT_VERSION", "pack", "unpack"]

REPORT_VERSION = 2
"""The version of ``modelprov.report`` data this module writes and reads."""

_SOURCE_STRINGS = ("id", "fx", "module", "type", "target", "file", "trace")
_NODE_STRINGS = ("name", "op", "domain", "confidence")
_PLAIN = ("title", "colors", "summary", "code")
_STEP_X = NODE_W + GAP_X
_STEP_Y = NODE_H + GAP_Y


class _Tables:
    """The distinct strings and metadata maps of a document, each numbered once."""

    def __init__(self) -> None:
        self.strings: list[str] = []
        self.keysets: list[list[int]] = [[]]
        self._string_index: dict[str, int] = {}
        self._keyset_index: dict[tuple[int, ...], int] = {(): 0}

    def index(self, text: str) -> int:
        found = self._string_index.get(text)
        if found is None:
            found = self._string_index[text] = len(self.strings)
            self.strings.append(text)
        return found

    def string(self, text: str | None) -> int | None:
        return None if text is None else self.index(text)

    def column(self, texts: Iterable[str | None]) -> list[int | None]:
        """``[self.string(text) for text in texts]``, faster (one call per column)."""
        known, strings = self._string_index, self.strings
        result: list[int | None] = []
        append = result.append
        for text in texts:
            if text is None:
                append(None)
                continue
            found = known.get(text)
            if found is None:
                found = known[text] = len(strings)
                strings.append(text)
            append(found)
        return result

    def keyset(self, keys: Mapping[str, str]) -> int:
        if not keys:
            return 0
        flat = tuple(self.index(part) for item in keys.items() for part in item)
        found = self._keyset_index.get(flat)
        if found is None:
            found = self._keyset_index[flat] = len(self.keysets)
            self.keysets.append(list(flat))
        return found


def _pack_sources(sources: Sequence[Mapping[str, Any]], tables: _Tables) -> dict[str, list[Any]]:
    columns: dict[str, list[Any]] = {
        name: tables.column([source[name] for source in sources]) for name in _SOURCE_STRINGS
    }
    columns["line"] = [source["line"] for source in sources]
    columns["keys"] = [tables.keyset(source["keys"]) for source in sources]
    return columns


def _grid(values: Iterable[int], step: int, what: str) -> list[int]:
    """Layout coordinates as cell numbers (``PAD + cell * step``)."""
    cells = [(value - PAD) // step for value in values]
    for value, cell in zip(values, cells, strict=True):
        if PAD + cell * step != value:
            raise MetadataError(f"report data: {what} {value} is off the layout grid")
    return cells


def pack(document: Mapping[str, Any]) -> dict[str, Any]:
    """The compact form of a ``report_data`` document (see the module docstring)."""
    tables = _Tables()
    nodes = document["nodes"]
    node_columns: dict[str, list[Any]] = {
        name: tables.column([node.get(name) for node in nodes]) for name in _NODE_STRINGS
    }
    node_columns["src"] = [node["src"] for node in nodes]
    node_columns["keys"] = [tables.keyset(node["keys"]) for node in nodes]
    # Producers as distances back (small numbers, repeated: they compress well).
    node_columns["in"] = [[i - p for p in node["in"]] for i, node in enumerate(nodes)]
    node_columns["group"] = [node["group"] for node in nodes]
    node_columns["col"] = _grid([node["x"] for node in nodes], _STEP_X, "x")
    node_columns["row"] = _grid([node["y"] for node in nodes], _STEP_Y, "y")
    groups = document["groups"]
    packed: dict[str, Any] = {"format": document["format"], "version": REPORT_VERSION}
    packed.update({name: document[name] for name in _PLAIN})
    if "numerics" in document:
        packed["numerics"] = document["numerics"]
    packed["layout"] = {
        "node_w": NODE_W,
        "node_h": NODE_H,
        "gap_x": GAP_X,
        "gap_y": GAP_Y,
        "pad": PAD,
    }
    packed["sources"] = _pack_sources(document["sources"], tables)
    packed["lost"] = _pack_sources(document["lost"], tables)
    packed["nodes"] = node_columns
    packed["groups"] = {
        "path": tables.column([group["path"] for group in groups]),
        "type": tables.column([group["type"] for group in groups]),
        "parent": [group["parent"] for group in groups],
        "open": [g for g, group in enumerate(groups) if group["open"]],
    }
    packed["strings"] = tables.strings
    packed["keysets"] = tables.keysets
    return packed


# --- back to the document -----------------------------------------------------------------


def _lookup(strings: Sequence[str]) -> Callable[[int | None], str | None]:
    def text(index: int | None) -> str | None:
        return None if index is None else strings[index]

    return text


def _unpack_sources(
    columns: Mapping[str, list[Any]],
    text: Callable[[int | None], str | None],
    keys: Callable[[int], dict[str, str]],
) -> list[dict[str, Any]]:
    sources = []
    for k in range(len(columns["id"])):
        source: dict[str, Any] = {name: text(columns[name][k]) for name in _SOURCE_STRINGS}
        source["line"] = columns["line"][k]
        source["keys"] = keys(columns["keys"][k])
        sources.append(source)
    return sources


def _state(confidence: str | None, sources: int) -> str:
    """A node's state, as ``report._states.node_state`` decides it from the same facts."""
    if confidence in ("named", "inferred"):
        return "recovered"
    if not sources:
        return "none"
    return "merged" if sources > 1 else "exact"


def unpack(packed: Mapping[str, Any]) -> dict[str, Any]:
    """The ``report_data`` document a packed one was made from."""
    if header_problem(packed, format=REPORT_FORMAT, versions=(REPORT_VERSION,)):
        raise MetadataError(
            f"report data: expected format {REPORT_FORMAT!r} version {REPORT_VERSION}, got "
            f"{packed.get('format')!r} version {packed.get('version')!r}"
        )
    strings: list[str] = packed["strings"]
    keysets: list[list[int]] = packed["keysets"]
    text = _lookup(strings)

    def keys(index: int) -> dict[str, str]:
        flat = keysets[index]
        return {strings[flat[k]]: strings[flat[k + 1]] for k in range(0, len(flat), 2)}

    columns = packed["nodes"]
    count = len(columns["group"])
    nodes: list[dict[str, Any]] = []
    consumers: list[list[int]] = [[] for _ in range(count)]
    for i in range(count):
        src = columns["src"][i]
        confidence = text(columns["confidence"][i])
        node: dict[str, Any] = {
            "name": text(columns["name"][i]),
            "op": text(columns["op"][i]),
            "domain": text(columns["domain"][i]),
            "state": _state(confidence, len(src)),
            "src": src,
            "keys": keys(columns["keys"][i]),
        }
        if confidence is not None:
            node["confidence"] = confidence
        producers = [i - d for d in columns["in"][i]]
        for p in producers:
            consumers[p].append(i)
        node.update(
            {
                "in": producers,
                "group": columns["group"][i],
                "x": PAD + columns["col"][i] * _STEP_X,
                "y": PAD + columns["row"][i] * _STEP_Y,
            }
        )
        nodes.append(node)
    for i, node in enumerate(nodes):
        node["out"] = consumers[i]

    group_columns = packed["groups"]
    paths = [text(p) or "" for p in group_columns["path"]]
    parents: list[int | None] = group_columns["parent"]
    members: list[list[int]] = [[] for _ in paths]
    edges: list[list[list[int]]] = [[] for _ in paths]
    for i, node in enumerate(nodes):
        g = node["group"]
        members[g].append(i)
        edges[g].extend([p, i] for p in node["in"] if p < i and nodes[p]["group"] == g)
    subtree = [len(m) for m in members]
    first = [m[0] if m else count for m in members]
    for g in reversed(range(len(paths))):
        parent = parents[g]
        if parent is not None:
            subtree[parent] += subtree[g]
            first[parent] = min(first[parent], first[g])
    opened = set(group_columns["open"])
    groups = []
    for g, path in enumerate(paths):
        columns_used = [nodes[i]["x"] for i in members[g]]
        widest = max(((x - PAD) // _STEP_X + 1 for x in columns_used), default=1)
        rows = max(((nodes[i]["y"] - PAD) // _STEP_Y + 1 for i in members[g]), default=0)
        groups.append(
            {
                "path": path,
                "label": path.rpartition(".")[2] if path else "(root module)",
                "type": text(group_columns["type"][g]),
                "parent": parents[g],
                "depth": path.count(".") + 1 if path else 0,
                "nodes": members[g],
                "count": subtree[g],
                "first": first[g],
                "w": 2 * PAD + widest * NODE_W + (widest - 1) * GAP_X,
                "h": 2 * PAD + rows * NODE_H + max(rows - 1, 0) * GAP_Y,
                "edges": edges[g],
                "open": g in opened,
            }
        )
    document: dict[str, Any] = {"format": packed["format"], "version": packed["version"]}
    document.update({name: packed[name] for name in ("title", "colors", "summary")})
    document["sources"] = _unpack_sources(packed["sources"], text, keys)
    document["nodes"] = nodes
    document["groups"] = groups
    document["lost"] = _unpack_sources(packed["lost"], text, keys)
    document["code"] = packed["code"]
    if "numerics" in packed:
        document["numerics"] = packed["numerics"]
    return document
