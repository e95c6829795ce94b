"""Sources (original operations) and the sources table modelprov stores in a model.

A source is one operation of the unoptimized export: one FX node for a torch export, or
one node for any other model. The table keeps every source's original metadata, pooled
and deduplicated, under the model-level key ``modelprov.sources``; each node names its
sources under the node-level key ``modelprov.sources``. Pure Python: no torch, no onnx.
Formats: docs/metadata-format.md.
"""

from __future__ import annotations

import ast
import base64
import dataclasses
import functools
import json
import re
import types
import zlib
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from typing import Any

from modelprov._base._versioned import header_problem
from modelprov._torch._compat import fx_node_text_name, fx_node_text_target
from modelprov.core import _stack_trace
from modelprov.errors import MetadataError
from modelprov.keys import (
    CLASS_HIERARCHY_KEY,
    FX_NODE_KEY,
    KEPT_FOR_RECALL_KEY,
    NAME_SCOPES_KEY,
    NAMESPACE_KEY,
    NODE_SOURCES_KEY,
    OUTPUT_OF_KEY,
    RESERVED_PREFIX,
    STACK_TRACE_KEY,
    TABLE_FORMAT,
    TABLE_KEY,
)

__all__ = [
    "FX_NODE_KEY",
    "KEPT_FOR_RECALL_KEY",
    "MAX_TABLE_BYTES",
    "MAX_VALUE_BYTES",
    "NAMESPACE_KEY",
    "NAME_SCOPES_KEY",
    "NODE_SOURCES_KEY",
    "OUTPUT_OF_KEY",
    "RESERVED_PREFIX",
    "STACK_TRACE_KEY",
    "TABLE_KEY",
    "TABLE_VERSION",
    "Source",
    "SourceTable",
    "dump_ids",
    "parse_ids",
]

TABLE_VERSION = 1

MAX_VALUE_BYTES = 1 << 20
"""Largest metadata value accepted (1 MiB); larger ones are almost surely not provenance."""

MAX_TABLE_BYTES = 1 << 28
"""Largest sources table accepted, as stored and once inflated (256 MiB)."""

MAX_INFLATE_RATIO = 100
"""A compressed table may inflate to at most this many times its size (pooled strings
compress about 5-10 times; a zip bomb about 1000 times) ..."""

MIN_INFLATE_LIMIT = 1 << 24
"""... or to 16 MiB, whichever is larger."""

_ZLIB_LEVEL = 3
"""zlib level 3 of 9: on the zoo's optimized tables 12-20 % larger than level 6
(the default) in a third of the time, and a table is 1-5 % of a model's metadata (optimize
writes it every run; any level reads back the same)."""

_HEADER_TEXT = json.dumps(
    {"format": TABLE_FORMAT, "version": TABLE_VERSION}, separators=(",", ":")
)[:-1]
"""The sources table document's opening: its format and version, without the closing brace."""

_NO_METADATA: Mapping[str, str] = types.MappingProxyType({})

_TEXT_TYPES = frozenset({str})


@dataclasses.dataclass(frozen=True)
class Source:
    """One original operation and the metadata it had in the unoptimized export.

    Attributes:
        id: unique within the model: the FX node's name, or ``node:<name>`` for nodes
            that did not come from an FX node.
        fx_node: the FX node's name ('' when unknown).
        module_path: qualified name of the module that ran it ('' for the root module).
        module_type: qualified class name of that module ('' when unknown).
        target: the ATen target, e.g. ``aten.transpose.int`` ('' when unknown).
        file: file of the innermost frame of the user's own code (frames of torch,
            modelprov, the standard library and site-packages skipped; see
            ``_stack_trace.user_frame``); None when there is no trace.
        line: line of that frame.
        stack_trace: the full stack trace ('' when none); ``frames()`` parses it.
        metadata: every original key/value pair of the source, unchanged (empty for the
            per-FX-node records of a StableHLO export, whose op attributes are derived from
            the fields).
        source_nodes: for a node of a decomposed torch.export program (StableHLO), the
            node(s) of the user's program before decomposition it was made from, the ids
            ONNX exports of the same program use; empty when unknown or not decomposed.
        call_stack: the user's call stack down to the user frame (outermost first, tool
            frames skipped, paths rewritten), as StableHLO op locations record it; empty
            when not computed (``frames()`` parses the whole ``stack_trace`` instead).

    ``source_nodes`` and ``call_stack`` live in memory only: the sources table stores
    ``id`` and ``metadata`` (docs/metadata-format.md), and ``from_metadata`` rebuilds the
    rest from the metadata.
    """

    id: str
    fx_node: str
    module_path: str
    module_type: str
    target: str
    file: str | None
    line: int | None
    stack_trace: str
    metadata: Mapping[str, str] = dataclasses.field(default_factory=lambda: _NO_METADATA)
    source_nodes: tuple[str, ...] = ()
    call_stack: tuple[_stack_trace.Frame, ...] = ()

    def shared_ids(self) -> tuple[str, ...]:
        """The ids an ONNX export of the same program gives this source: ``source_nodes``,
        else the source's own id."""
        return self.source_nodes or (self.id,)

    def frames(self) -> list[_stack_trace.Frame]:
        """The whole stack of this source, outermost frame first (first trace if merged)."""
        traces = _stack_trace.split_merged_traces(self.stack_trace)
        return _stack_trace.frames(traces[0]) if traces else []

    @classmethod
    def from_metadata(
        cls,
        source_id: str,
        metadata: Mapping[str, str],
        *,
        user_code: _stack_trace.UserCode | None = None,
    ) -> Source:
        """Builds a source from one node's original metadata; ``user_code`` says which
        files are the user's (default: outside torch, modelprov, stdlib, site-packages)."""
        fx_text = metadata.get(FX_NODE_KEY, "")
        fx_name, target = fx_node_text_name(fx_text), fx_node_text_target(fx_text)
        scopes = _literal_list(metadata.get(NAME_SCOPES_KEY, ""))
        classes = _literal_list(metadata.get(CLASS_HIERARCHY_KEY, ""))
        trace = metadata.get(STACK_TRACE_KEY, "")
        frame = _stack_trace.user_frame(trace, user_code) if trace else None
        if not target and classes and classes[-1].startswith("aten."):
            target = classes[-1]
        return cls(
            id=source_id,
            fx_node=fx_name,
            module_path=scopes[-2] if len(scopes) >= 2 else "",
            module_type=classes[-2] if len(classes) >= 2 else "",
            target=target,
            file=frame.file if frame else None,
            line=frame.line if frame else None,
            stack_trace=trace,
            metadata=types.MappingProxyType(dict(metadata)),
        )


def _literal_list(value: str) -> list[str]:
    """Parses a Python list-of-strings literal (never evaluates code); [] when it is not."""
    return list(_parsed_literal_list(value))


_SIMPLE_LIST = re.compile(r"\[(?:'[^'\\\n]*'(?:, '[^'\\\n]*')*)?\]")
_SIMPLE_ITEM = re.compile(r"'([^'\\\n]*)'")


@functools.lru_cache(maxsize=8192)
def _parsed_literal_list(value: str) -> tuple[str, ...]:
    # Layers repeat the same class hierarchies: parse each distinct text once. Lists of
    # quoted strings without quotes or escapes (what torch.onnx writes) are read directly.
    if not value.startswith("["):
        return ()
    if _SIMPLE_LIST.fullmatch(value):
        return tuple(_SIMPLE_ITEM.findall(value))
    try:
        parsed = ast.literal_eval(value)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return ()
    if isinstance(parsed, list) and all(isinstance(item, str) for item in parsed):
        return tuple(parsed)
    return ()


def fx_node_name(metadata: Mapping[str, str]) -> str:
    """The FX node name recorded in a node's metadata, or ''."""
    return fx_node_text_name(metadata.get(FX_NODE_KEY, ""))


class _StringPool(dict[str, int]):
    """Texts and their indices in order of first use: ``pool[text]`` adds a new text."""

    def __missing__(self, text: str) -> int:
        index = self[text] = len(self)
        return index


class SourceTable:
    """All sources of a model, in order of first appearance in the unoptimized export.

    Each :class:`Source` is built when first asked for: the metadata writers read only ids
    and metadata (:meth:`id_of`, :meth:`metadata_of`), which need no parsed fields.
    """

    def __init__(self, sources: Iterable[Source] = ()) -> None:
        self._ids: list[str] = []
        self._metadata: list[Mapping[str, str]] = []
        self._sources: list[Source | None] = []
        self._index: dict[str, int] = {}
        for source in sources:
            self.add(source)

    def add(self, source: Source) -> int:
        """Adds a source and returns its index; a duplicate id is an error."""
        index = self._add_entry(source.id, source.metadata)
        self._sources[index] = source
        return index

    def _add_entry(self, source_id: str, metadata: Mapping[str, str]) -> int:
        """Adds a source by id and metadata (``metadata`` must not change afterwards); its
        :class:`Source` is built on first access."""
        if source_id in self._index:
            raise MetadataError(f"sources table: duplicate source id {source_id!r}")
        index = self._index[source_id] = len(self._ids)
        self._ids.append(source_id)
        self._metadata.append(metadata)
        self._sources.append(None)
        return index

    def __len__(self) -> int:
        return len(self._ids)

    def __getitem__(self, index: int) -> Source:
        source = self._sources[index]
        if source is None:
            source = self._sources[index] = Source.from_metadata(
                self._ids[index], self._metadata[index]
            )
        return source

    def __iter__(self) -> Iterator[Source]:
        return (self[index] for index in range(len(self._ids)))

    def __contains__(self, source_id: object) -> bool:
        return source_id in self._index

    def id_of(self, index: int) -> str:
        """The id of the source at ``index`` (without building its :class:`Source`)."""
        return self._ids[index]

    def metadata_of(self, index: int) -> Mapping[str, str]:
        """The original metadata of the source at ``index`` (read-only; without building
        its :class:`Source`)."""
        return self._metadata[index]

    def index_of(self, source_id: str) -> int:
        """The index of a source id; MetadataError when the table lacks it."""
        try:
            return self._index[source_id]
        except KeyError:
            raise MetadataError(
                f"node names source {source_id!r}, which the model's {TABLE_KEY!r} table "
                "does not hold; the metadata was edited by hand or the table is stale — "
                "rebuild it with modelprov.optimize or modelprov.recover"
            ) from None

    def by_id(self, source_id: str) -> Source:
        """The source with this id."""
        return self[self.index_of(source_id)]

    def ids(self, indices: Iterable[int]) -> list[str]:
        """Source ids for indices, in table order."""
        ids = self._ids
        return [ids[index] for index in sorted(indices)]

    def dumps(self, *, carried: Collection[str] = ()) -> str:
        """The versioned JSON form.

        Sources in ``carried`` are left out of the entries (a node carries their metadata
        verbatim) but keep their place in ``order``. Values are pooled, stack traces by
        frame; the document is zlib-compressed and base64-encoded when that is smaller.
        """
        pool = _StringPool()
        intern = pool.__getitem__  # the text's index, added if new
        split_chunks = _stack_trace.split_chunks
        entries = []
        for source_id, source_metadata in zip(self._ids, self._metadata, strict=True):
            if source_id in carried:
                continue
            metadata = [
                # A value of one line is one chunk (most values: only traces span lines).
                [intern(key), *map(intern, split_chunks(value))]
                if "\n" in value
                else [intern(key), intern(value)]
                for key, value in source_metadata.items()
            ]
            entries.append({"id": source_id, "metadata": metadata})
        body = {
            "order": list(self._ids),
            "strings": list(pool),
            "sources": entries,
        }
        # Lists and dicts built just above hold no cycles: no need for json to look for them.
        plain = json.dumps(body, ensure_ascii=False, separators=(",", ":"), check_circular=False)
        # The documents are put together as text: json.dumps of the header, the encoding
        # and the body (or the payload, base64 needs no escapes) writes exactly this.
        packed = base64.b64encode(zlib.compress(plain.encode(), _ZLIB_LEVEL)).decode("ascii")
        if len(packed) < len(plain):
            return f'{_HEADER_TEXT},"encoding":"zlib+base64","payload":"{packed}"}}'
        return f'{_HEADER_TEXT},"encoding":"json",{plain[1:]}'

    @classmethod
    def loads(cls, text: str, *, where: str = "model") -> tuple[SourceTable, list[str]]:
        """Parses the JSON form into the stored sources and the order of all source ids.

        Validates everything: types, the version (an int, exactly 1), string-pool indices
        (in range, never negative), unique ids, and sizes (the text and the decompressed
        payload at most :data:`MAX_TABLE_BYTES`). Raises MetadataError naming ``where``.
        """
        if not isinstance(text, str):
            raise MetadataError(f"{where}: {TABLE_KEY!r} is not valid UTF-8 text")
        if len(text) > MAX_TABLE_BYTES:
            raise MetadataError(
                f"{where}: {TABLE_KEY!r} holds {len(text)} characters (limit "
                f"{MAX_TABLE_BYTES}); the table is corrupt or not modelprov's"
            )
        document = _json_document(text, where, "the sources table")
        problem = header_problem(document, format=TABLE_FORMAT, versions=(TABLE_VERSION,))
        if problem is not None and problem.field != "version":
            raise MetadataError(f"{where}: {TABLE_KEY!r} is not a modelprov sources table")
        if problem is not None:
            raise MetadataError(
                f"{where}: sources table version {problem.found!r} is not supported by this "
                f"modelprov (supports {TABLE_VERSION}); upgrade modelprov"
            )
        encoding = document.get("encoding", "json")
        if encoding == "zlib+base64":
            document = _json_document(
                _inflate(document.get("payload"), where), where, "the sources table payload"
            )
            if not isinstance(document, dict):
                raise MetadataError(f"{where}: the sources table payload is not a JSON object")
        elif encoding != "json":
            raise MetadataError(f"{where}: unknown sources table encoding {encoding!r}")
        strings = document.get("strings")
        entries = document.get("sources")
        order = document.get("order")
        if not isinstance(strings, list) or not isinstance(entries, list):
            raise MetadataError(f"{where}: sources table lacks 'strings' or 'sources'")
        if not all(isinstance(item, str) for item in strings):
            raise MetadataError(f"{where}: sources table 'strings' holds a non-string")
        if not isinstance(order, list) or not all(isinstance(item, str) for item in order):
            raise MetadataError(f"{where}: sources table 'order' must be a list of source ids")
        table = cls()
        for position, entry in enumerate(entries):
            source_id, metadata = _table_entry(
                entry, strings, f"{where}: sources table entry {position}"
            )
            if source_id in table:
                raise MetadataError(f"{where}: sources table holds source {source_id!r} twice")
            table._add_entry(source_id, types.MappingProxyType(metadata))
        return table, order


def _json_document(text: str, where: str, what: str) -> Any:
    """JSON text parsed; MetadataError for bad JSON or nesting too deep to parse."""
    try:
        return json.loads(text)
    except RecursionError:
        raise MetadataError(f"{where}: {what} is nested too deeply; it is corrupt") from None
    except ValueError as error:
        raise MetadataError(f"{where}: {what} is not valid JSON: {error}") from None


def _inflate(payload: object, where: str) -> str:
    """The zlib+base64 payload as text, refusing more than MAX_TABLE_BYTES once inflated."""
    if not isinstance(payload, str):
        raise MetadataError(f"{where}: sources table payload is missing or not a string")
    try:
        packed = base64.b64decode(payload, validate=True)
        limit = min(MAX_TABLE_BYTES, max(MIN_INFLATE_LIMIT, MAX_INFLATE_RATIO * len(packed)))
        inflater = zlib.decompressobj()
        data = inflater.decompress(packed, limit + 1)
        if len(data) > limit or inflater.unconsumed_tail:
            raise MetadataError(
                f"{where}: sources table payload of {len(packed)} bytes inflates to more than "
                f"{limit} bytes; refused as corrupt (modelprov's tables compress far less)"
            )
        if not inflater.eof:
            raise MetadataError(f"{where}: sources table payload is truncated")
        return data.decode("utf-8")
    except (ValueError, zlib.error) as error:
        raise MetadataError(f"{where}: sources table payload is corrupt ({error})") from None


def _table_entry(entry: object, strings: list[str], where: str) -> tuple[str, dict[str, str]]:
    """One checked ``{"id", "metadata": [[key, piece...]...]}`` entry of the table."""
    if not isinstance(entry, dict) or not isinstance(entry.get("id"), str):
        raise MetadataError(f"{where}: must be an object with a string 'id'")
    items = entry.get("metadata")
    if not isinstance(items, list):
        raise MetadataError(f"{where} ({entry['id']!r}): 'metadata' must be a list")
    count = len(strings)
    metadata: dict[str, str] = {}
    for item in items:
        if (
            not isinstance(item, list)
            or not item
            or not all(type(index) is int and 0 <= index < count for index in item)
        ):
            raise MetadataError(
                f"{where} ({entry['id']!r}): metadata entry {str(item)[:60]!r} must list "
                f"string-pool indices in 0..{count - 1}"
            )
        key = strings[item[0]]
        value = "".join(strings[index] for index in item[1:])
        if key in metadata:
            raise MetadataError(f"{where} ({entry['id']!r}): key {key!r} appears twice")
        metadata[key] = value
    return entry["id"], metadata


def check_text(metadata: Mapping[Any, Any], *, where: str) -> None:
    """Raises MetadataError when a key or value is not valid UTF-8 text (protobuf hands
    such strings over as bytes)."""
    for key, value in metadata.items():
        if not isinstance(key, str):
            raise MetadataError(
                f"{where}: metadata key {key!r} is not valid UTF-8; remove it or run "
                "modelprov recover, which repairs invalid metadata"
            )
        if not isinstance(value, str):
            raise MetadataError(
                f"{where}: the value of metadata key {key!r} is not valid UTF-8 "
                f"({value!r:.60}); fix it or run modelprov recover, which repairs "
                "invalid metadata"
            )


def node_label(name: str | None, op_type: str, position: int) -> str:
    """How source ids and messages name a node: its name, or ``<op_type>@<position>`` (its
    index in graph order, subgraphs after their parent) when it has none."""
    return name or f"{op_type}@{position}"


def carries_source(label: str, metadata: Mapping[str, str], source: Source) -> bool:
    """True when a node's own metadata holds ``source`` verbatim and identifies it, so the
    node needs neither ``modelprov.sources`` nor a table entry for it."""
    return (
        original_metadata(metadata) == dict(source.metadata)
        and own_source_id(label, metadata) == source.id
    )


class FxNames(dict[str, str]):
    """FX node texts and the names they start with, each text parsed once."""

    def __missing__(self, text: str) -> str:
        name = self[text] = fx_node_text_name(text)
        return name


def own_source_id(label: str, metadata: Mapping[str, str], fx_names: FxNames | None = None) -> str:
    """The id a node standing for itself gives its source: FX node name or node:<label>
    (``fx_names``, when given, holds the names of texts parsed before)."""
    if fx_names is None:
        return fx_node_name(metadata) or f"node:{label}"
    return fx_names[metadata.get(FX_NODE_KEY, "")] or f"node:{label}"


def original_metadata(metadata: Mapping[str, str]) -> dict[str, str]:
    """A node's metadata without modelprov's own keys."""
    return {k: v for k, v in metadata.items() if not k.startswith(RESERVED_PREFIX)}


def collect_sources(
    model_metadata: Mapping[str, str],
    nodes: Iterable[tuple[str, Mapping[str, str]]],
    *,
    stored_table: SourceTable | None = None,
) -> tuple[SourceTable, list[list[str]]]:
    """All sources of a model and each node's source ids, from metadata alone.

    ``nodes`` are (label, metadata) pairs in graph order. Nodes naming their sources
    (``modelprov.sources``) are looked up in the table; other nodes stand for themselves:
    their metadata is their source's (a plain torch.onnx export, or a node modelprov left
    as it was). Sources are ordered by the table's ``order``, then by first appearance.
    ``stored_table``, when given, stands for the model's table (every source stored, in
    its order), so a caller holding it skips writing and parsing its JSON form.
    """
    text = model_metadata.get(TABLE_KEY)
    if stored_table is not None:
        stored, order = stored_table, list(stored_table._ids)
    else:
        stored, order = SourceTable.loads(text) if text else (SourceTable(), [])
    # Per source id: its metadata, and its Source when one is built already.
    found: dict[str, Mapping[str, str]] = dict(zip(stored._ids, stored._metadata, strict=True))
    built: dict[str, Source] = {
        source_id: source
        for source_id, source in zip(stored._ids, stored._sources, strict=True)
        if source is not None
    }
    variants: dict[str, int] = {}
    node_ids: list[list[str]] = []
    reserved_mark = "\n" + RESERVED_PREFIX
    named: list[str] = []  # ids that nodes name, to be found in the table
    fx_names = FxNames()  # the nodes one FX node lowers to repeat its text: parsed once
    for label, metadata in nodes:
        ids_text = metadata.get(NODE_SOURCES_KEY)
        if ids_text is not None:
            ids = compact_ids(ids_text)
            if ids is None:
                ids = parse_ids(ids_text, where=f"node {label!r}")
            named.extend(ids)
            node_ids.append(ids)
            continue
        try:
            # One scan of all keys at once; a key with the prefix (or a newline that fakes
            # one) takes the filtering path.
            clean = reserved_mark not in "\n" + "\n".join(metadata)
        except TypeError:
            clean = False
        if clean:
            original = metadata  # copied below when it makes a new source
        else:
            try:
                original = {k: v for k, v in metadata.items() if not k.startswith(RESERVED_PREFIX)}
            except (TypeError, AttributeError):
                original = {}  # a key is not text: check_text says which
            if len(original) != len(metadata):
                check_text(metadata, where=f"node {label!r}")
        if not original and not label:
            node_ids.append([])
            continue
        base = own_source_id(label, original, fx_names)
        source_id = base
        while source_id in found and found[source_id] != original:
            variants[base] = variants.get(base, 1) + 1
            source_id = f"{base}#{variants[base]}"
        if source_id not in found:
            # A new source: its values are checked here (a known one's equal checked ones).
            if not set(map(type, original.values())) <= _TEXT_TYPES:  # the types, in C
                check_text(metadata, where=f"node {label!r}")
            for key, value in original.items():
                if 4 * len(value) <= MAX_VALUE_BYTES:
                    continue  # at most 4 bytes a character: within the limit, no need to encode
                size = len(value.encode("utf-8", "surrogatepass"))
                if size > MAX_VALUE_BYTES:
                    raise MetadataError(
                        f"node {label!r}: metadata key {key!r} holds {size} bytes (limit "
                        f"{MAX_VALUE_BYTES}); strip or shorten it before running modelprov"
                    )
            found[source_id] = types.MappingProxyType(dict(original))
        node_ids.append([source_id])
    missing = [i for i in named if i not in found]
    if missing:
        raise MetadataError(
            f"nodes name source {missing[0]!r}, which the model's {TABLE_KEY!r} table does "
            "not hold; the metadata was edited by hand or the table is stale"
        )
    ordered = [i for i in order if i in found]
    seen = set(ordered)
    for source_id in found:
        if source_id not in seen:
            ordered.append(source_id)
    table = SourceTable()
    for source_id in ordered:
        index = table._add_entry(source_id, found[source_id])
        table._sources[index] = built.get(source_id)
    return table, node_ids


_JSON_ESCAPED = re.compile(r'[\x00-\x1f"\\]')
"""Characters a JSON string escapes (``json.dumps`` with ``ensure_ascii=False``)."""


def dump_ids(ids: Sequence[str]) -> str:
    """The node-level ``modelprov.sources`` value: a JSON array of source ids."""
    if not ids:
        return "[]"
    # Searched joined by a comma (never escaped): the '","' separator holds quotes.
    if _JSON_ESCAPED.search(",".join(ids)) is None:  # nothing to escape: json.dumps' text
        return '["' + '","'.join(ids) + '"]'
    return json.dumps(list(ids), ensure_ascii=False, separators=(",", ":"))


_COMPACT_IDS = re.compile(r'\["[^"\\\x00-\x1f]*"(?:,"[^"\\\x00-\x1f]*")*\]|\[\]')
"""The form ``dump_ids`` writes when no id needs escaping: ``["a","b"]`` or ``[]``."""


def compact_ids(value: object) -> list[str] | None:
    """The ids of a ``modelprov.sources`` value in the compact form ``dump_ids`` writes
    (no escapes, no spaces), read without a JSON parser; None for any other text."""
    if type(value) is not str or _COMPACT_IDS.fullmatch(value) is None:
        return None
    return value[2:-2].split('","') if len(value) > 2 else []


def parse_ids(value: str, *, where: str, key: str = NODE_SOURCES_KEY) -> list[str]:
    """Parses a node-level list of source ids: ``key`` (``modelprov.sources``, or another
    key holding ids such as ``modelprov.kept_for_recall``), named in the error."""
    compact = compact_ids(value)
    if compact is not None:
        return compact
    try:
        parsed = json.loads(value) if isinstance(value, str) else None
    except (ValueError, RecursionError):
        parsed = None
    if not isinstance(parsed, list) or not all(isinstance(item, str) for item in parsed):
        raise MetadataError(f"{where}: {key!r} must be a JSON array of source ids")
    return parsed


def shared_id_list(value: str) -> list[str]:
    """The ids a ``source_node`` value names: one id, or a JSON array of ids when a merge
    united several (anything else is taken as one id, never evaluated)."""
    if not value:
        return []
    if value.startswith("["):
        try:
            parsed = json.loads(value)
        except ValueError:
            return [value]
        if isinstance(parsed, list) and all(isinstance(item, str) for item in parsed):
            return parsed
    return [value]
