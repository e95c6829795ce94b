"""Sources and the sources table format."""

from __future__ import annotations

import base64
import json
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from modelprov.core._sources import (
    Source,
    SourceTable,
    collect_sources,
    dump_ids,
    own_source_id,
    parse_ids,
)
from modelprov.errors import MetadataError

TRACE = 'File "/m.py", line 4, in forward\n    k = k.transpose(1, 2)'


def _meta(name: str, line: int = 4) -> dict[str, str]:
    return {
        "namespace": f": M/{name}: aten.transpose.int",
        "pkg.torch.onnx.name_scopes": f"['', 'blk', '{name}']",
        "pkg.torch.onnx.class_hierarchy": "['M', 'B', 'aten.transpose.int']",
        "pkg.torch.onnx.fx_node": f"%{name} : [num_users=1] = call_function"
        f"[target=torch.ops.aten.transpose.int](args = (%k, 1, 2), kwargs = {{}})",
        "pkg.torch.onnx.stack_trace": TRACE.replace("line 4", f"line {line}"),
    }


def test_source_fields_from_torch_metadata() -> None:
    source = Source.from_metadata("transpose", _meta("transpose"))
    assert source.fx_node == "transpose"
    assert source.module_path == "blk"
    assert source.module_type == "B"
    assert source.target == "aten.transpose.int"
    assert (source.file, source.line) == ("/m.py", 4)


@pytest.mark.parametrize("count", [1, 40])
def test_table_round_trip_plain_and_compressed(count: int) -> None:
    table = SourceTable(
        Source.from_metadata(f"t{i}", _meta(f"t{i}", line=i + 1)) for i in range(count)
    )
    text = table.dumps(carried={"t0"})
    document = json.loads(text)
    assert document["format"] == "modelprov.sources" and document["version"] == 1
    assert document["encoding"] == ("json" if count == 1 else "zlib+base64")
    loaded, order = SourceTable.loads(text)
    assert order == [f"t{i}" for i in range(count)]
    assert [s.id for s in loaded] == [f"t{i}" for i in range(1, count)]
    for source in loaded:
        assert dict(source.metadata) == dict(table.by_id(source.id).metadata)


def test_collect_sources_reads_plain_nodes_and_table() -> None:
    table = SourceTable(
        [Source.from_metadata("a", _meta("a")), Source.from_metadata("b", _meta("b"))]
    )
    model_metadata = {"modelprov.sources": table.dumps(carried={"b"})}
    nodes = [("n0", {"modelprov.sources": dump_ids(["a", "b"])}), ("n1", _meta("b"))]
    collected, ids = collect_sources(model_metadata, nodes)
    assert ids == [["a", "b"], ["b"]]
    assert [s.id for s in collected] == ["a", "b"]


def test_same_fx_name_with_different_metadata_gets_variants() -> None:
    other = {**_meta("a"), "team": "x"}
    _collected, ids = collect_sources({}, [("n0", _meta("a")), ("n1", other), ("n2", _meta("a"))])
    assert ids == [["a"], ["a#2"], ["a"]]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("not json", "not valid JSON"),
        ('{"format": "other"}', "not a modelprov sources table"),
        ('{"format": "modelprov.sources", "version": 99}', "version 99 is not supported"),
        (
            '{"format": "modelprov.sources", "version": 1, '
            '"encoding": "zlib+base64", "payload": "!!"}',
            "payload is corrupt",
        ),
    ],
)
def test_bad_tables_are_named(text: str, message: str) -> None:
    with pytest.raises(MetadataError, match=message):
        SourceTable.loads(text)


def test_unknown_source_id_is_an_error() -> None:
    with pytest.raises(MetadataError, match="'zzz'"):
        collect_sources({}, [("n0", {"modelprov.sources": '["zzz"]'})])


def test_invalid_utf8_and_oversized_values_are_named() -> None:
    with pytest.raises(MetadataError, match="node 'n0'.*'k' is not valid UTF-8"):
        collect_sources({}, [("n0", {"k": b"\xff\xfe"})])  # type: ignore[dict-item]
    with pytest.raises(MetadataError, match="node 'n0'.*'big' holds 10485760 bytes"):
        collect_sources({}, [("n0", {"big": "x" * (10 << 20)})])


def _table(**fields: object) -> str:
    return json.dumps({"format": "modelprov.sources", "version": 1, "encoding": "json", **fields})


def _packed(body: bytes) -> str:
    import base64
    import zlib

    payload = base64.b64encode(zlib.compress(body, 9)).decode()
    return json.dumps(
        {"format": "modelprov.sources", "version": 1, "encoding": "zlib+base64", "payload": payload}
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"format": "modelprov.sources", "version": true}', "version True"),
        ('{"format": "modelprov.sources", "version": 1.0}', "version 1.0"),
        ('{"format": "modelprov.sources", "version": "1"}', "version '1'"),
        (
            '{"format": "modelprov.sources", "version": 1, "encoding": "zlib+base64", '
            '"payload": 7}',
            "payload is missing or not a string",
        ),
        (_packed(b"[1, 2]"), "payload is not a JSON object"),
        (_packed(b"[" * 100_000 + b"]" * 100_000), "nested too deeply"),
        (_packed(b" " * (20 << 20)), "inflates to more than"),
        ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
        (_table(order=[], strings=["k", 5], sources=[]), "'strings' holds a non-string"),
        (_table(order=[1], strings=[], sources=[]), "'order' must be a list"),
        (_table(strings=[], sources=[]), "'order' must be a list"),
        (_table(order=[], strings=["k"], sources=[7]), "entry 0: must be an object"),
        (_table(order=[], strings=["k"], sources=[{"id": 3, "metadata": []}]), "string 'id'"),
        (
            _table(order=["a"], strings=["k", "v"], sources=[{"id": "a", "metadata": [[0, -1]]}]),
            "indices in 0..1",
        ),
        (
            _table(order=["a"], strings=["k", "v"], sources=[{"id": "a", "metadata": [[0, 2]]}]),
            "indices in 0..1",
        ),
        (
            _table(order=["a"], strings=["k", "v"], sources=[{"id": "a", "metadata": [[0, True]]}]),
            "indices in 0..1",
        ),
        (
            _table(order=["a"], strings=["k"], sources=[{"id": "a", "metadata": [[]]}]),
            "indices in 0..0",
        ),
        (
            _table(order=["a"], strings=["k", "v"], sources=[{"id": "a", "metadata": "x"}]),
            "'metadata' must be a list",
        ),
        (
            _table(
                order=["a"],
                strings=["k", "v"],
                sources=[{"id": "a", "metadata": [[0, 1], [0, 1]]}],
            ),
            "'k' appears twice",
        ),
        (
            _table(
                order=["a"],
                strings=["k", "v"],
                sources=[{"id": "a", "metadata": []}, {"id": "a", "metadata": []}],
            ),
            "source 'a' twice",
        ),
    ],
)
def test_malformed_tables_are_rejected_with_a_reason(text: str, message: str) -> None:
    with pytest.raises(MetadataError, match=message):
        SourceTable.loads(text, where="m.onnx")


def test_table_text_that_is_not_utf8_is_rejected() -> None:
    with pytest.raises(MetadataError, match="not valid UTF-8"):
        SourceTable.loads(b"\xff{}", where="m.onnx")  # type: ignore[arg-type]


def test_invalid_utf8_is_named_on_every_path_through_collect() -> None:
    """Text checks hold for a node sharing a known source's id, for a reserved key's value
    and for a key that is not text, not only for a node making a new source."""
    good = _meta("t")
    shared = {**good, "namespace": b"\xff"}  # same FX node: a variant of source 't'
    with pytest.raises(MetadataError, match="node 'n1'.*'namespace' is not valid UTF-8"):
        collect_sources({}, [("n0", good), ("n1", shared)])  # type: ignore[list-item]
    reserved = {**good, "modelprov.kept_for_recall": b"\xff"}
    with pytest.raises(MetadataError, match="node 'n0'.*'modelprov.kept_for_recall'"):
        collect_sources({}, [("n0", reserved)])  # type: ignore[list-item]
    with pytest.raises(MetadataError, match="node 'n0'.*metadata key b'k' is not valid UTF-8"):
        collect_sources({}, [("n0", {b"k": "v"})])  # type: ignore[dict-item]


def test_table_builds_each_source_once_and_on_demand() -> None:
    text = SourceTable(
        Source.from_metadata(f"t{i}", _meta(f"t{i}", line=i + 1)) for i in range(3)
    ).dumps()
    loaded, _ = SourceTable.loads(text)
    assert [loaded.id_of(i) for i in range(3)] == ["t0", "t1", "t2"]
    assert dict(loaded.metadata_of(1)) == _meta("t1", line=2)
    assert not any(loaded._sources)  # ids and metadata only, until a Source is asked for
    source = loaded[1]
    assert source == Source.from_metadata("t1", _meta("t1", line=2))
    assert loaded[1] is source and loaded.by_id("t1") is source
    assert (source.file, source.line) == ("/m.py", 2)


def test_collect_sources_keeps_sources_of_a_stored_table() -> None:
    built = Source.from_metadata("t0", _meta("t0"))
    table, ids = collect_sources(
        {}, [("n0", {"modelprov.sources": '["t0"]'})], stored_table=SourceTable([built])
    )
    assert ids == [["t0"]] and table[0] is built


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text()))
def test_dump_ids_writes_what_json_writes(ids: list[str]) -> None:
    # The fast path (ids with nothing to escape) must give json.dumps' exact text.
    assert dump_ids(ids) == json.dumps(ids, ensure_ascii=False, separators=(",", ":"))
    assert json.loads(dump_ids(ids)) == ids


def test_dump_ids_escapes_quotes_backslashes_and_control_characters() -> None:
    ids = ['a"b', "c\\d", "e\nf", "g\x00", "plain", "ünï"]
    for source_id in ids:
        assert json.loads(dump_ids([source_id, "x"])) == [source_id, "x"]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text()))
def test_parse_ids_reads_what_dump_ids_writes(ids: list[str]) -> None:
    assert parse_ids(dump_ids(ids), where="n") == ids


@pytest.mark.parametrize(
    "text",
    ['["a", "b"]', ' ["a"]', '["a\\u0041"]', '["a\\"b"]', '["é"]', '["a","b"]', "[]", '[""]'],
)
def test_parse_ids_agrees_with_json_on_every_form(text: str) -> None:
    # The compact fast path and the JSON parser give the same ids.
    assert parse_ids(text, where="n") == json.loads(text)


@pytest.mark.parametrize("text", ['["a"b"]', '["a",]', '["a\\x01"]', "[1]", '{"a":1}', '["a"'])
def test_parse_ids_rejects_what_json_rejects(text: str) -> None:
    text = text.replace("\\x01", "\x01")
    with pytest.raises(MetadataError, match="JSON array of source ids"):
        parse_ids(text, where="n")


_FX_NAMES = ["mm", "add", "add_1", ""]


@st.composite
def _plain_nodes(draw: st.DrawFn) -> list[tuple[str, dict[str, str]]]:
    """Plain-export nodes: FX node texts from a small pool (the nodes one FX node lowers to
    repeat its text), some with other keys too, some without an FX node."""
    nodes = []
    for position in range(draw(st.integers(1, 12))):
        name = draw(st.sampled_from(_FX_NAMES))
        metadata = _meta(name) if name else {"namespace": "root"}
        if draw(st.booleans()):
            metadata["team"] = draw(st.sampled_from(["x", "y"]))
        label = draw(st.sampled_from([f"n{position}", f"n{position % 3}"]))
        nodes.append((label, metadata))
    return nodes


@given(_plain_nodes())
@settings(max_examples=200, derandomize=True, deadline=None)
def test_collect_sources_ids_follow_the_own_source_id_rule(
    nodes: list[tuple[str, dict[str, str]]],
) -> None:
    """Each node's id is its own source id (variants numbered), equal metadata under one id
    shares it, and the table holds each node's metadata under its id."""
    table, ids = collect_sources({}, nodes)
    by_id: dict[str, dict[str, str]] = {}
    for (label, metadata), (source_id,) in zip(nodes, ids, strict=True):
        base = own_source_id(label, metadata)
        assert source_id == base or source_id.startswith(f"{base}#")
        assert dict(table.by_id(source_id).metadata) == metadata
        assert by_id.setdefault(source_id, metadata) == metadata
    same = {
        (own_source_id(label, metadata), tuple(metadata.items())): source_id
        for (label, metadata), (source_id,) in zip(nodes, ids, strict=True)
    }
    assert len(set(same.values())) == len(same)  # distinct metadata, distinct ids


_TEXTS = st.text(st.characters(codec="utf-8"), max_size=40)  # no lone surrogates


@settings(max_examples=150, derandomize=True, deadline=None)
@given(
    st.lists(st.dictionaries(_TEXTS, _TEXTS, max_size=4), max_size=30),
    st.integers(0, 400),
)
def test_a_table_is_written_as_json_itself_writes_the_document(
    metadatas: list[dict[str, str]], repeat: int
) -> None:
    # The document is assembled as text: it must be json.dumps' own text of the document
    # (compact separators, no ASCII escaping), and read back as it was.
    table = SourceTable(
        Source.from_metadata(f"s{i}", {**metadata, "k": "v" * repeat * i})
        for i, metadata in enumerate(metadatas)
    )
    text = table.dumps(carried={"s0"})
    document = json.loads(text)
    assert text == json.dumps(document, ensure_ascii=False, separators=(",", ":"))
    assert list(document)[:3] == ["format", "version", "encoding"]
    loaded, order = SourceTable.loads(text)
    assert order == [f"s{i}" for i in range(len(metadatas))]
    assert {s.id: dict(s.metadata) for s in loaded} == {
        s.id: dict(s.metadata) for s in table if s.id != "s0"
    }
    # Compressed exactly when that makes the document smaller.
    if document["encoding"] == "zlib+base64":
        body = zlib.decompress(base64.b64decode(document["payload"])).decode()
        assert len(document["payload"]) < len(body)
    else:
        body = json.dumps(
            {k: v for k, v in document.items() if k not in ("format", "version", "encoding")},
            ensure_ascii=False,
            separators=(",", ":"),
        )
        assert len(base64.b64encode(zlib.compress(body.encode(), 3))) >= len(body)
