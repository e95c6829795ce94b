"""The bad-input corpus: models broken in every way issue 13 found, and more.

``write_corpus(folder)`` writes one file per case (plus good models and data files the cases
need) and returns the cases. Each case says whether every command reading provenance must
refuse it (``corrupt``) and may carry a check of a successful output (``check``) that catches
silent wrong answers. ``python -m tests.bad_inputs.corpus DIR`` writes the corpus to DIR.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import os
import sys
import zlib
from collections.abc import Callable

import onnx
import onnx_ir as ir

from tests.bad_inputs.structure_cases import structure_cases

__all__ = ["Case", "write_corpus"]

GOOD = "good.onnx"
"""The optimized double-transpose export (provenance in a sources table)."""
PLAIN = "plain.onnx"
"""The plain double-transpose export (one source per node)."""
FUNCTIONS = "functions.onnx"
"""The CNN example, functionized (calls with ``modelprov.inline`` records)."""


@dataclasses.dataclass(frozen=True)
class Case:
    """One bad input: ``path`` (relative to the corpus folder) and what is wrong with it.

    ``corrupt``: its provenance cannot be read, so every command that reads it must exit 2.
    ``check``: called with a successful command's output model (a path) and must raise
    AssertionError when the output is silently wrong.
    """

    name: str
    kind: str
    path: str
    corrupt: bool = False
    check: Callable[[str], None] | None = None
    check_on: tuple[str, ...] = ()
    """Commands whose output ``check`` applies to (all writing commands when empty)."""
    refused_by: tuple[str, ...] = ()
    """Commands that must refuse the case (exit 2) although its provenance may be fine."""


Mutation = Callable[[onnx.ModelProto], None]


def _copy(proto: onnx.ModelProto) -> onnx.ModelProto:
    copy = onnx.ModelProto()
    copy.CopyFrom(proto)
    return copy


def _set(entries: object, key: str, value: str) -> None:
    for entry in list(entries):  # type: ignore[call-overload]
        if entry.key == key:
            entry.value = value
            return
    added = entries.add()  # type: ignore[attr-defined]
    added.key, added.value = key, value


def _table(body: object, *, version: object = 1, encoding: str = "json") -> str:
    header = {"format": "modelprov.sources", "version": version, "encoding": encoding}
    if encoding == "zlib+base64":
        return json.dumps({**header, "payload": body})
    assert isinstance(body, dict)
    return json.dumps({**header, **body})


def _packed(raw: bytes) -> str:
    return base64.b64encode(zlib.compress(raw, 9)).decode()


def _good_table(proto: onnx.ModelProto) -> dict[str, object]:
    from modelprov.core._sources import SourceTable

    text = next(e.value for e in proto.metadata_props if e.key == "modelprov.sources")
    table, order = SourceTable.loads(text)
    strings: list[str] = []
    entries = []
    for source in table:
        metadata = []
        for key, value in source.metadata.items():
            strings.extend([key, value])
            metadata.append([len(strings) - 2, len(strings) - 1])
        entries.append({"id": source.id, "metadata": metadata})
    return {"order": order, "strings": strings, "sources": entries}


def _table_case(edit: Callable[[dict[str, object]], object], **header: object) -> Mutation:
    def mutate(proto: onnx.ModelProto) -> None:
        body = _good_table(proto)
        edited = edit(body)
        _set(proto.metadata_props, "modelprov.sources", _table(edited, **header))  # type: ignore[arg-type]

    return mutate


def _raw_table(text: str) -> Mutation:
    return lambda proto: _set(proto.metadata_props, "modelprov.sources", text)


def _with(field: str, value: object) -> Callable[[dict[str, object]], object]:
    return lambda body: {**body, field: value}


def _first_entry(
    edit: Callable[[dict[str, object]], object],
) -> Callable[[dict[str, object]], object]:
    def apply(body: dict[str, object]) -> object:
        sources = list(body["sources"])  # type: ignore[call-overload]
        sources[0] = edit(sources[0])
        return {**body, "sources": sources}

    return apply


def _node_key(key: str, value: str, index: int = 0) -> Mutation:
    return lambda proto: _set(proto.graph.node[index].metadata_props, key, value)


def _node_dup(key: str, value: str, index: int = 0) -> Mutation:
    def mutate(proto: onnx.ModelProto) -> None:
        entry = proto.graph.node[index].metadata_props.add()
        entry.key, entry.value = key, value

    return mutate


_MARK = "BADUTF8MARK"
_BAD = b"\xff\xfe\xfd\xc3(ABCDEF"  # same length as the mark, not UTF-8


def _serialized(proto: onnx.ModelProto) -> bytes:
    data = proto.SerializeToString()
    assert len(_BAD) == len(_MARK)
    return data.replace(_MARK.encode(), _BAD)


def _checks_trace_kept(text: str) -> Callable[[str], None]:
    """The output still holds ``text`` in some node's stack trace or in its table."""

    def check(path: str) -> None:
        import modelprov

        proto = onnx.load(path, load_external_data=False)
        traces = [
            source.stack_trace
            for node in proto.graph.node
            for source in modelprov.sources(proto, node)
        ]
        assert any(text in trace for trace in traces), f"{path}: the trace {text!r} was dropped"
        modelprov.audit(path)

    return check


FAKE_TRACE = (
    "[modelprov: 2 stack traces; 0 shared lines]\n"
    'File "/user/model.py", line 7, in forward\n'
    "    k = k.transpose(1, 2)"
)
FAKE_SECTION = (
    'File "/user/model.py", line 8, in forward\n'
    "[modelprov: trace 1 of 2]\n"
    "    k = k.transpose(1, 2)"
)


def _cases() -> list[tuple[str, str, str, Mutation | bytes | None, dict[str, object]]]:
    """(name, kind, base, mutation or raw bytes, Case fields)."""
    t = "sources table"
    cases: list[tuple[str, str, str, Mutation | bytes | None, dict[str, object]]] = [
        # --- files that are no ONNX model
        ("empty", "file", GOOD, b"", {}),
        ("random_bytes", "file", GOOD, bytes(range(256)) * 8, {}),
        ("text_file", "file", GOOD, b"ir_version: 10\ngraph { }\n", {}),
        ("tensor_proto", "file", GOOD, onnx.TensorProto(name="t").SerializeToString(), {}),
        ("no_graph", "file", GOOD, lambda p: p.ClearField("graph"), {}),
        ("ir_version_0", "file", GOOD, lambda p: setattr(p, "ir_version", 0), {}),
        # --- the sources table: wrong document
        ("table_not_json", t, GOOD, _raw_table("{not json"), {"corrupt": True}),
        ("table_int", t, GOOD, _raw_table("7"), {"corrupt": True}),
        ("table_list", t, GOOD, _raw_table("[1, 2]"), {"corrupt": True}),
        ("table_other_format", t, GOOD, _raw_table('{"format": "x"}'), {"corrupt": True}),
        ("table_version_true", t, GOOD, _table_case(lambda b: b, version=True), {"corrupt": True}),
        ("table_version_float", t, GOOD, _table_case(lambda b: b, version=1.0), {"corrupt": True}),
        ("table_version_str", t, GOOD, _table_case(lambda b: b, version="1"), {"corrupt": True}),
        ("table_version_2", t, GOOD, _table_case(lambda b: b, version=2), {"corrupt": True}),
        ("table_version_none", t, GOOD, _table_case(lambda b: b, version=None), {"corrupt": True}),
        ("table_encoding", t, GOOD, _table_case(lambda b: b, encoding="gzip"), {"corrupt": True}),
        ("table_deep_json", t, GOOD, _raw_table("[" * 100_000 + "]" * 100_000), {"corrupt": True}),
        # --- the sources table: compressed payloads
        *[
            (
                name,
                t,
                GOOD,
                _table_case(lambda b, v=value: v, encoding="zlib+base64"),
                {"corrupt": True},
            )
            for name, value in [
                ("payload_int", 12),
                ("payload_null", None),
                ("payload_not_base64", "!!!"),
                ("payload_not_zlib", base64.b64encode(b"plain text").decode()),
                ("payload_list", _packed(b"[1, 2, 3]")),
                ("payload_nested", _packed(b"[" * 100_000 + b"]" * 100_000)),
                ("payload_bomb", _packed(b" " * (40 << 20))),
                ("payload_bad_utf8", _packed(b'{"order": ["\xff"]}')),
                ("payload_truncated", _packed(b'{"order": []}')[:-8]),
            ]
        ],
        # --- the sources table: fields
        ("strings_int", t, GOOD, _table_case(_with("strings", [1, 2])), {"corrupt": True}),
        ("strings_missing", t, GOOD, _table_case(_with("strings", None)), {"corrupt": True}),
        ("strings_dict", t, GOOD, _table_case(_with("strings", {"a": 1})), {"corrupt": True}),
        ("sources_dict", t, GOOD, _table_case(_with("sources", {})), {"corrupt": True}),
        ("order_ints", t, GOOD, _table_case(_with("order", [1, 2])), {"corrupt": True}),
        ("order_missing", t, GOOD, _table_case(_with("order", None)), {"corrupt": True}),
        (
            "index_negative",
            t,
            GOOD,
            _table_case(_first_entry(lambda e: {**e, "metadata": [[0, -1]]})),  # type: ignore[dict-item]
            {"corrupt": True},
        ),
        (
            "index_too_big",
            t,
            GOOD,
            _table_case(_first_entry(lambda e: {**e, "metadata": [[0, 10**9]]})),  # type: ignore[dict-item]
            {"corrupt": True},
        ),
        (
            "index_bool",
            t,
            GOOD,
            _table_case(_first_entry(lambda e: {**e, "metadata": [[False, True]]})),  # type: ignore[dict-item]
            {"corrupt": True},
        ),
        (
            "index_string",
            t,
            GOOD,
            _table_case(_first_entry(lambda e: {**e, "metadata": [["0", "1"]]})),  # type: ignore[dict-item]
            {"corrupt": True},
        ),
        (
            "index_float",
            t,
            GOOD,
            _table_case(_first_entry(lambda e: {**e, "metadata": [[0.0, 1.0]]})),  # type: ignore[dict-item]
            {"corrupt": True},
        ),
        (
            "entry_empty",
            t,
            GOOD,
            _table_case(_first_entry(lambda e: {**e, "metadata": [[]]})),  # type: ignore[dict-item]
            {"corrupt": True},
        ),
        ("entry_not_object", t, GOOD, _table_case(_first_entry(lambda e: 5)), {"corrupt": True}),
        (
            "entry_id_int",
            t,
            GOOD,
            _table_case(_first_entry(lambda e: {**e, "id": 3})),  # type: ignore[dict-item]
            {"corrupt": True},
        ),
        (
            "entry_no_metadata",
            t,
            GOOD,
            _table_case(_first_entry(lambda e: {"id": e["id"]})),  # type: ignore[index]
            {"corrupt": True},
        ),
        (
            "entry_duplicate_id",
            t,
            GOOD,
            _table_case(lambda b: {**b, "sources": [*b["sources"], b["sources"][0]]}),  # type: ignore[index, misc]
            {"corrupt": True},
        ),
        (
            "entry_duplicate_key",
            t,
            GOOD,
            _table_case(
                _first_entry(lambda e: {**e, "metadata": [*e["metadata"], e["metadata"][0]]})  # type: ignore[index, misc]
            ),
            {"corrupt": True},
        ),
        # --- node-level source ids
        (
            "ids_not_json",
            "node ids",
            GOOD,
            _node_key("modelprov.sources", "[oops"),
            {"corrupt": True},
        ),
        (
            "ids_object",
            "node ids",
            GOOD,
            _node_key("modelprov.sources", '{"a": 1}'),
            {"corrupt": True},
        ),
        ("ids_ints", "node ids", GOOD, _node_key("modelprov.sources", "[1, 2]"), {"corrupt": True}),
        (
            "ids_unknown",
            "node ids",
            GOOD,
            _node_key("modelprov.sources", '["nope"]'),
            {"corrupt": True},
        ),
        (
            "ids_deep",
            "node ids",
            GOOD,
            _node_key("modelprov.sources", "[" * 50_000),
            {"corrupt": True},
        ),
        # --- invalid UTF-8 (written as bytes into the protobuf)
        ("utf8_node_value", "invalid UTF-8", PLAIN, _node_key("user.note", _MARK), {}),
        ("utf8_node_key", "invalid UTF-8", PLAIN, _node_key(_MARK, "x"), {}),
        (
            "utf8_model_value",
            "invalid UTF-8",
            GOOD,
            lambda p: _set(p.metadata_props, "user.note", _MARK),
            {},
        ),
        ("utf8_model_key", "invalid UTF-8", GOOD, lambda p: _set(p.metadata_props, _MARK, "x"), {}),
        (
            "utf8_table",
            "invalid UTF-8",
            GOOD,
            lambda p: _set(p.metadata_props, "modelprov.sources", _MARK),
            {"corrupt": True},
        ),
        (
            "utf8_node_name",
            "invalid UTF-8",
            PLAIN,
            lambda p: setattr(p.graph.node[0], "name", _MARK),
            {},
        ),
        (
            "utf8_node_name_good",
            "invalid UTF-8",
            GOOD,
            lambda p: setattr(p.graph.node[0], "name", _MARK),
            {},
        ),
        ("utf8_value_name", "invalid UTF-8", PLAIN, lambda p: _rename_value(p, _MARK), {}),
        ("utf8_graph_name", "invalid UTF-8", PLAIN, lambda p: setattr(p.graph, "name", _MARK), {}),
        (
            "utf8_doc_string",
            "invalid UTF-8",
            PLAIN,
            lambda p: setattr(p.graph.node[0], "doc_string", _MARK),
            {},
        ),
        (
            "utf8_value_meta",
            "invalid UTF-8",
            PLAIN,
            lambda p: _value_meta(p, "custom.max", _MARK),
            {},
        ),
        ("utf8_trace", "invalid UTF-8", PLAIN, _node_key("pkg.torch.onnx.stack_trace", _MARK), {}),
        # --- duplicate keys
        (
            "dup_trace",
            "duplicate keys",
            PLAIN,
            _node_dup("pkg.torch.onnx.stack_trace", 'File "/dup.py", line 1, in f\n    dup()'),
            {"check": _checks_trace_kept('File "/dup.py", line 1, in f')},
        ),
        ("dup_user_key", "duplicate keys", PLAIN, _node_dup("user.team", "b"), {}),
        (
            "dup_model_key",
            "duplicate keys",
            GOOD,
            lambda p: [
                _set(p.metadata_props, "user.a", "1"),
                p.metadata_props.add(key="user.a", value="2"),
            ],
            {},
        ),
        ("dup_ids", "duplicate keys", GOOD, _dup_ids, {}),
        # --- oversized values
        ("big_node_value", "size", PLAIN, _node_key("user.blob", "x" * (2 << 20)), {}),
        (
            "big_trace",
            "size",
            PLAIN,
            _node_key("pkg.torch.onnx.stack_trace", 'File "/a.py", line 1, in f\n' * 60_000),
            {},
        ),
        # --- merged stack-trace headers in a user's trace
        (
            "fake_merged_header",
            "stack trace",
            PLAIN,
            _node_key("pkg.torch.onnx.stack_trace", FAKE_TRACE),
            {"check": _checks_trace_kept('File "/user/model.py", line 7')},
        ),
        (
            "fake_section_header",
            "stack trace",
            PLAIN,
            _node_key("pkg.torch.onnx.stack_trace", FAKE_SECTION),
            {"check": _checks_trace_kept('File "/user/model.py", line 8')},
        ),
        (
            "fake_elided_marker",
            "stack trace",
            PLAIN,
            _node_key(
                "pkg.torch.onnx.stack_trace",
                "[modelprov: 1 of 2 stack traces elided to fit 9 bytes; x]",
            ),
            {"check": _checks_trace_kept("elided to fit 9 bytes")},
        ),
        (
            "header_only_trace",
            "stack trace",
            PLAIN,
            _node_key("pkg.torch.onnx.stack_trace", "[modelprov: 2 stack traces; 99 shared lines]"),
            {"check": _checks_trace_kept("99 shared lines")},
        ),
        # --- torch.onnx keys with junk values
        (
            "scopes_not_list",
            "torch keys",
            PLAIN,
            _node_key("pkg.torch.onnx.name_scopes", "not a list"),
            {},
        ),
        (
            "scopes_deep",
            "torch keys",
            PLAIN,
            _node_key("pkg.torch.onnx.name_scopes", "[" * 5000 + "]" * 5000),
            {},
        ),
        (
            "scopes_code",
            "torch keys",
            PLAIN,
            _node_key("pkg.torch.onnx.name_scopes", "[__import__('os').system('false')]"),
            {},
        ),
        (
            "classes_ints",
            "torch keys",
            PLAIN,
            _node_key("pkg.torch.onnx.class_hierarchy", "[1, 2, 3]"),
            {},
        ),
        (
            "fx_node_junk",
            "torch keys",
            PLAIN,
            _node_key("pkg.torch.onnx.fx_node", "%" + "x" * 50 + " : junk"),
            {},
        ),
        (
            "fx_node_empty_name",
            "torch keys",
            PLAIN,
            _node_key("pkg.torch.onnx.fx_node", "% : [num_users=1]"),
            {},
        ),
        (
            "namespace_huge",
            "torch keys",
            PLAIN,
            _node_key("namespace", "/".join(["a: b"] * 20_000)),
            {},
        ),
        (
            "output_of_junk",
            "value keys",
            PLAIN,
            lambda p: _value_meta(p, "modelprov.output_of", "{bad"),
            {},
        ),
        ("custom_max_underscore", "numbers", PLAIN, _node_key("custom.max", "1_000"), {}),
        ("custom_max_nan", "numbers", PLAIN, _node_key("custom.max", "nan"), {}),
        # --- aten_call records (functionize falls back to the FX text)
        (
            "aten_version_true",
            "aten_call record",
            PLAIN,
            _node_key(
                "pkg.modelprov.aten_call", '{"version": true, "target": "aten::x.y", "args": []}'
            ),
            {},
        ),
        (
            "aten_not_json",
            "aten_call record",
            PLAIN,
            _node_key("pkg.modelprov.aten_call", "{oops"),
            {},
        ),
        (
            "aten_bad_args",
            "aten_call record",
            PLAIN,
            _node_key(
                "pkg.modelprov.aten_call", '{"version": 1, "target": "aten::x.y", "args": [1]}'
            ),
            {},
        ),
        # --- inline records of functionize's calls
        ("inline_not_json", "inline record", FUNCTIONS, _second_call("{nope"), {}),
        (
            "inline_version_true",
            "inline record",
            FUNCTIONS,
            _second_call_edit(lambda d: {**d, "version": True}),
            {},
        ),
        (
            "inline_version_float",
            "inline record",
            FUNCTIONS,
            _second_call_edit(lambda d: {**d, "version": 1.0}),
            {},
        ),
        (
            "inline_short",
            "inline record",
            FUNCTIONS,
            _second_call_edit(lambda d: {**d, "nodes": []}),
            {},
        ),
        (
            "inline_name_int",
            "inline record",
            FUNCTIONS,
            _second_call_edit(lambda d: {**d, "nodes": [{**n, "name": 5} for n in d["nodes"]]}),
            {},
        ),
        (
            "inline_types_junk",
            "inline record",
            FUNCTIONS,
            _second_call_edit(
                lambda d: {**d, "nodes": [{**n, "types": [[999, "x"]]} for n in d["nodes"]]}
            ),
            {},
        ),
        (
            "inline_missing",
            "inline record",
            FUNCTIONS,
            _drop_second_record,
            {"check": _second_relu_keeps_its_own_source, "check_on": ("inline",)},
        ),
        # --- graphs
        (
            "dangling_input",
            "graph",
            PLAIN,
            lambda p: p.graph.node[-1].input.__setitem__(0, "nowhere"),
            {},
        ),
        (
            "duplicate_node_names",
            "graph",
            PLAIN,
            lambda p: [setattr(n, "name", "same") for n in p.graph.node],
            {},
        ),
        (
            "duplicate_outputs",
            "graph",
            PLAIN,
            lambda p: p.graph.node[1].output.__setitem__(0, p.graph.node[0].output[0]),
            {},
        ),
        (
            "unknown_op",
            "graph",
            PLAIN,
            lambda p: setattr(p.graph.node[0], "op_type", "NoSuchOp"),
            {},
        ),
        ("no_nodes", "graph", PLAIN, lambda p: p.graph.ClearField("node"), {}),
        # --- external data
        ("external_absolute", "external data", PLAIN, _external("/etc/passwd"), {}),
        ("external_parent", "external data", PLAIN, _external("../outside.bin"), {}),
        ("external_missing", "external data", PLAIN, _external("missing.bin"), {}),
        ("external_short", "external data", PLAIN, _external("short.bin", length=10_000), {}),
        ("external_negative", "external data", PLAIN, _external("short.bin", offset=-4), {}),
        ("external_offset_text", "external data", PLAIN, _external("short.bin", offset="abc"), {}),
        # --- issue 23: structure and external locations (tests/bad_inputs/structure_cases.py)
        *structure_cases(),
    ]
    return cases


def _rename_value(proto: onnx.ModelProto, name: str) -> None:
    old = proto.graph.node[0].output[0]
    for node in proto.graph.node:
        for index, item in enumerate(node.input):
            if item == old:
                node.input[index] = name
    proto.graph.node[0].output[0] = name


def _value_meta(proto: onnx.ModelProto, key: str, value: str) -> None:
    info = proto.graph.value_info.add()
    info.name = proto.graph.node[0].output[0]
    _set(info.metadata_props, key, value)


def _dup_ids(proto: onnx.ModelProto) -> None:
    node = next(
        n for n in proto.graph.node if any(e.key == "modelprov.sources" for e in n.metadata_props)
    )
    value = next(e.value for e in node.metadata_props if e.key == "modelprov.sources")
    entry = node.metadata_props.add()
    entry.key, entry.value = "modelprov.sources", value


def _calls(proto: onnx.ModelProto) -> list[onnx.NodeProto]:
    relus = [n for n in proto.graph.node if n.op_type == "aten_relu_default"]
    assert len(relus) == 2
    return relus


def _second_call(text: str) -> Mutation:
    return lambda proto: _set(_calls(proto)[1].metadata_props, "modelprov.inline", text)


def _second_call_edit(edit: Callable[[dict[str, object]], object]) -> Mutation:
    def mutate(proto: onnx.ModelProto) -> None:
        node = _calls(proto)[1]
        record = json.loads(
            next(e.value for e in node.metadata_props if e.key == "modelprov.inline")
        )
        _set(node.metadata_props, "modelprov.inline", json.dumps(edit(record)))

    return mutate


def _drop_second_record(proto: onnx.ModelProto) -> None:
    node = _calls(proto)[1]
    kept = [e for e in node.metadata_props if e.key != "modelprov.inline"]
    del node.metadata_props[:]
    node.metadata_props.extend(kept)


def _second_relu_keeps_its_own_source(path: str) -> None:
    import modelprov

    proto = onnx.load(path, load_external_data=False)
    relus = [n for n in proto.graph.node if n.op_type == "Relu"]
    if len(relus) != 2:  # not an inlined output (e.g. functionize's)
        return
    fx = [{s.fx_node for s in modelprov.sources(proto, n)} for n in relus]
    assert fx[0] != fx[1], f"{path}: the second ReLU got the first one's provenance {fx}"


def _external(location: str, *, offset: object = 0, length: int | None = None) -> Mutation:
    def mutate(proto: onnx.ModelProto) -> None:
        tensor = proto.graph.initializer.add()
        tensor.name = "external_weight"
        tensor.data_type = onnx.TensorProto.FLOAT
        tensor.dims.extend([4])
        tensor.data_location = onnx.TensorProto.EXTERNAL
        for key, value in (("location", location), ("offset", str(offset))):
            tensor.external_data.add(key=key, value=value)
        if length is not None:
            tensor.external_data.add(key="length", value=str(length))

    return mutate


def _base_models(folder: str) -> dict[str, onnx.ModelProto]:
    import modelprov
    from tests.conftest import plain_export

    plain = plain_export("double_transpose")
    cnn = plain_export("cnn")
    models = {
        PLAIN: ir.to_proto(plain),
        GOOD: modelprov.optimize(ir.to_proto(plain)),
        FUNCTIONS: modelprov.functionize(ir.to_proto(cnn)),
    }
    for name, proto in models.items():
        with open(os.path.join(folder, name), "wb") as stream:
            stream.write(proto.SerializeToString())
    with open(os.path.join(folder, "short.bin"), "wb") as stream:
        stream.write(b"\0" * 16)
    return models


CLASS_MODULES = ("tests.bad_inputs.external_tensors",)
"""Modules holding more classes of cases, each with ``cases(folder)`` returning them like
``_cases`` (and writing the files they need into ``folder``)."""


def write_corpus(folder: str) -> list[Case]:
    """Writes every case's file into ``folder`` (plus the good models); returns the cases."""
    import importlib

    os.makedirs(folder, exist_ok=True)
    bases = _base_models(folder)
    cases: list[Case] = []
    more = [c for m in CLASS_MODULES for c in importlib.import_module(m).cases(folder)]
    for name, kind, base, mutation, given in [*_cases(), *more]:
        fields = dict(given)
        path = fields.pop("path", f"{name}.onnx")
        if isinstance(mutation, bytes):
            data = mutation
        else:
            proto = _copy(bases[base])
            if mutation is not None:
                mutation(proto)
            data = _serialized(proto)
        with open(os.path.join(folder, path), "wb") as stream:
            stream.write(data)
        cases.append(Case(name, kind, path, **fields))  # type: ignore[arg-type]
    return cases


if __name__ == "__main__":
    written = write_corpus(sys.argv[1] if len(sys.argv) > 1 else "bad_inputs")
    print(f"{len(written)} cases written")
