"""Bad input gets a clear error that names the file, node or key; inputs stay unchanged."""

from __future__ import annotations

import os
import subprocess
import sys

import onnx
import onnx_ir as ir
import pytest

import modelprov
from modelprov.errors import MetadataError, UsageError


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "modelprov.cli", *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@pytest.fixture
def saved(export_of, tmp_path):
    path = tmp_path / "model.onnx"
    onnx.save(ir.to_proto(export_of("double_transpose")), path)
    return path


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", "the file is empty"),
        (os.urandom(4096), "not a readable ONNX model"),
        (b"name: 'x'\n", "not a readable ONNX model"),
    ],
)
def test_cli_rejects_files_that_are_not_onnx(tmp_path, content, message):
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(content)
    out = tmp_path / "out.onnx"
    result = _cli("optimize", str(bad), "-o", str(out))
    assert result.returncode == 2
    assert str(bad) in result.stderr and message in result.stderr
    assert not out.exists()


def test_cli_rejects_truncated_model(saved, tmp_path):
    truncated = tmp_path / "truncated.onnx"
    truncated.write_bytes(saved.read_bytes()[: saved.stat().st_size // 2])
    out = tmp_path / "out.onnx"
    result = _cli("optimize", str(truncated), "-o", str(out))
    assert result.returncode == 2, result.stderr
    assert str(truncated) in result.stderr
    assert not out.exists()


def test_cli_missing_file_and_directory(tmp_path):
    result = _cli("optimize", str(tmp_path / "nope.onnx"), "-o", str(tmp_path / "o.onnx"))
    assert result.returncode == 2 and "no such file" in result.stderr
    result = _cli("optimize", str(tmp_path), "-o", str(tmp_path / "o.onnx"))
    assert result.returncode == 2 and "is a directory" in result.stderr


def test_cli_output_equal_to_input_needs_in_place(saved):
    before = saved.read_bytes()
    result = _cli("optimize", str(saved), "-o", str(saved))
    assert result.returncode == 2 and "--in-place" in result.stderr
    assert saved.read_bytes() == before
    result = _cli("optimize", str(saved), "-o", str(saved), "--in-place")
    assert result.returncode == 0, result.stderr
    assert "modelprov.sources" in {p.key for p in onnx.load(str(saved)).metadata_props}


def _with_invalid_utf8(model: ir.Model) -> onnx.ModelProto:
    proto = ir.to_proto(model)
    entry = proto.graph.node[0].metadata_props.add()
    entry.key, entry.value = "user.note", "PLACEHOLDER"
    data = proto.SerializeToString().replace(b"PLACEHOLDER", b"\xff\xfe\xfdPLACEHOL")
    bad = onnx.ModelProto()
    bad.ParseFromString(data)
    return bad


def test_invalid_utf8_metadata_names_node_and_key(export_of):
    proto = _with_invalid_utf8(export_of("double_transpose"))
    before = proto.SerializeToString()
    node_name = proto.graph.node[0].name
    with pytest.raises(MetadataError, match=rf"node '{node_name}'.*'user.note' is not valid UTF-8"):
        modelprov.optimize(proto)
    assert proto.SerializeToString() == before


def test_oversized_metadata_value_names_key(export_of):
    model = export_of("double_transpose")
    first = next(iter(model.graph))
    first.metadata_props["user.blob"] = "x" * (10 * 1024 * 1024)
    proto = ir.to_proto(model)
    before = proto.SerializeToString()
    with pytest.raises(MetadataError, match=r"'user.blob' holds 10485760 bytes"):
        modelprov.optimize(proto)
    assert proto.SerializeToString() == before


def test_optimize_rejects_other_types():
    with pytest.raises(UsageError, match=r"optimize: got builtins.bytes; pass an onnx_ir.Model"):
        modelprov.optimize(b"model.onnx")  # type: ignore[call-overload]


def test_sources_rejects_mismatched_kinds(export_of):
    model = export_of("double_transpose")
    with pytest.raises(UsageError, match="onnx.ModelProto with one of its onnx.NodeProto"):
        modelprov.sources(ir.to_proto(model), next(iter(model.graph)))  # type: ignore[arg-type]


def _with_duplicate_trace(model: ir.Model) -> tuple[onnx.ModelProto, str]:
    proto = ir.to_proto(model)
    node = proto.graph.node[0]
    trace = 'File "/elsewhere.py", line 99, in forward\n    k = second_writer(k)'
    entry = node.metadata_props.add()
    entry.key, entry.value = "pkg.torch.onnx.stack_trace", trace
    return proto, trace


def test_duplicate_keys_are_merged_by_policy_not_last_wins(export_of):
    proto, extra = _with_duplicate_trace(export_of("double_transpose"))
    node = proto.graph.node[0]
    first = next(e.value for e in node.metadata_props if e.key == "pkg.torch.onnx.stack_trace")
    before = proto.SerializeToString()
    traces = [s.stack_trace for s in modelprov.sources(proto, node)]
    assert len(traces) == 1 and first in traces[0] and extra in traces[0]
    optimized = modelprov.optimize(proto)
    kept = "\n".join(
        e.value for n in optimized.graph.node for e in n.metadata_props if "stack_trace" in e.key
    )
    table = "".join(e.value for e in optimized.metadata_props)
    assert "second_writer" in kept or "second_writer" in _inflated(table)
    assert proto.SerializeToString() == before


def _inflated(table: str) -> str:
    from modelprov.core._sources import SourceTable

    if not table:
        return ""
    loaded, _ = SourceTable.loads(table)
    return "\n".join(s.stack_trace for s in loaded)
