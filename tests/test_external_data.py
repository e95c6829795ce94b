"""External data: never loaded for graph-only work, never outside the model's folder, written
atomically; a 4 GiB model is audited and diffed in far less memory than its weights.

Unwritable output folders: tests run as root, for whom chmod does not stop writes, so an
output folder that does not exist and a path under /proc stand in for them.
"""

from __future__ import annotations

import os
import sys

import numpy as np
import onnx
import onnx_ir as ir
import pytest

from modelprov._model_io import _files as _io
from modelprov._model_io._files import external_data_of, load_model, load_model_proto, save_model
from modelprov.cli import main
from modelprov.errors import InvalidModelError
from tests._cli import cli
from tests._large_model import LAYER_BYTES, LAYERS, build_large_model, measure
from tests.conftest import fresh_export

RSS_LIMIT = 1 << 30


def _main(capsys, *args: str) -> tuple[int, str]:
    code = main(list(args))
    return code, capsys.readouterr().err


@pytest.fixture
def with_data(tmp_path):
    """The CNN export saved with its weights in model.onnx.data, inside tmp_path/model/."""
    folder = tmp_path / "model"
    folder.mkdir()
    path = folder / "model.onnx"
    save_model(fresh_export("cnn"), path, external_data=True)
    return path


def _point_first_tensor_at(path, location: str) -> str:
    proto = onnx.load(str(path), load_external_data=False)
    tensor = next(
        t for t in proto.graph.initializer if t.data_location == onnx.TensorProto.EXTERNAL
    )
    for entry in tensor.external_data:
        if entry.key == "location":
            entry.value = location
    path.write_bytes(proto.SerializeToString())
    return tensor.name


def test_external_data_is_listed_without_reading_it(with_data):
    proto = load_model_proto(with_data, load_weights=False)
    listed = external_data_of(proto, str(with_data))
    assert listed and {item.location for item in listed} == {"model.onnx.data"}
    external = [t for t in proto.graph.initializer if t.data_location == onnx.TensorProto.EXTERNAL]
    assert len(external) == len(listed) and not any(t.raw_data for t in external)
    loaded = load_model_proto(with_data)
    assert all(t.data_location != onnx.TensorProto.EXTERNAL for t in loaded.graph.initializer)


@pytest.mark.parametrize(
    ("location", "message"),
    [
        ("/etc/passwd", "an absolute path"),
        ("../outside.data", "leads outside the model's folder"),
        ("link.data", "leads outside the model's folder"),
        ("missing.data", "does not exist"),
    ],
)
def test_unsafe_or_missing_external_data_is_refused(capsys, with_data, location, message):
    outside = with_data.parent.parent / "outside.data"
    outside.write_bytes(b"\0" * 1_000_000)
    os.symlink(outside, with_data.parent / "link.data")
    name = _point_first_tensor_at(with_data, location)
    out = with_data.parent / "out.onnx"
    for args in (
        ["audit", str(with_data)],
        ["diff", str(with_data), str(with_data)],
        ["optimize", str(with_data), "-o", str(out)],
        ["inline", str(with_data), "-o", str(out)],
    ):
        code, err = _main(capsys, *args)
        assert code == 2, args
        assert f"tensor {name!r} stores its data in {location!r}" in err and message in err
        assert not out.exists()


def test_truncated_data_file_is_refused(with_data):
    data = with_data.parent / "model.onnx.data"
    os.truncate(data, data.stat().st_size // 2)
    with pytest.raises(InvalidModelError, match="the data file is truncated"):
        load_model_proto(with_data, load_weights=False)


def test_escape_refused_through_the_real_command_line(with_data):
    name = _point_first_tensor_at(with_data, "../../x.data")
    result = cli("audit", str(with_data))
    assert result.returncode == 2 and result.stdout == ""
    assert f"tensor {name!r} stores its data in '../../x.data'" in result.stderr


def test_graph_only_save_elsewhere_copies_weights(with_data, tmp_path):
    model = load_model(with_data)
    assert any(
        isinstance(v.const_value, ir.ExternalTensor) for v in model.graph.initializers.values()
    )
    other = tmp_path / "elsewhere" / "copy.onnx"
    other.parent.mkdir()
    save_model(model, other)
    assert (other.parent / "copy.onnx.data").exists()
    assert sorted(p.name for p in other.parent.iterdir()) == ["copy.onnx", "copy.onnx.data"]
    original = {
        t.name: onnx.numpy_helper.to_array(t) for t in onnx.load(str(with_data)).graph.initializer
    }
    copied = {
        t.name: onnx.numpy_helper.to_array(t) for t in onnx.load(str(other)).graph.initializer
    }
    assert original.keys() == copied.keys()
    for key, value in original.items():
        np.testing.assert_array_equal(value, copied[key])


def test_large_models_get_external_data_automatically(monkeypatch, tmp_path):
    monkeypatch.setattr(_io, "PROTOBUF_LIMIT", 2 * 1024)
    model = fresh_export("mlp")
    save_model(model, tmp_path / "big.onnx")
    assert (tmp_path / "big.onnx.data").exists()
    assert external_data_of(
        onnx.load(str(tmp_path / "big.onnx"), load_external_data=False), str(tmp_path / "big.onnx")
    )
    monkeypatch.undo()
    save_model(model, tmp_path / "small.onnx")
    assert not (tmp_path / "small.onnx.data").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["big.onnx", "big.onnx.data", "small.onnx"]


@pytest.mark.parametrize("command", ["optimize", "recover", "functionize", "inline"])
def test_output_equal_to_input_needs_in_place(capsys, with_data, command):
    before = with_data.read_bytes(), (with_data.parent / "model.onnx.data").read_bytes()
    inputs = [str(with_data), str(with_data)] if command == "recover" else [str(with_data)]
    code, err = _main(capsys, command, *inputs, "-o", str(with_data))
    assert code == 2 and "pass --in-place" in err
    # the output's .data file would replace the input's external data
    other = with_data.parent / "model.onnx.data.onnx"
    os.symlink(with_data.parent / "model.onnx.data", str(other) + ".data")
    code, err = _main(capsys, command, *inputs, "-o", str(other))
    assert code == 2 and "model.onnx.data; pass --in-place" in err
    assert (with_data.read_bytes(), (with_data.parent / "model.onnx.data").read_bytes()) == before


@pytest.mark.parametrize("output", ["{tmp}/no/such/folder/out.onnx", "/proc/modelprov-out.onnx"])
def test_unwritable_output_is_refused_before_any_work(capsys, with_data, tmp_path, output):
    out = output.format(tmp=tmp_path)
    code, err = _main(capsys, "optimize", str(with_data), "-o", out)
    assert code == 3 and out in err  # ExitCode.CANNOT_WRITE
    assert "does not exist" in err or "cannot write" in err
    assert not os.path.exists(out)


def test_in_place_rewrites_model_and_data(with_data):
    result = cli("optimize", str(with_data), "-o", str(with_data), "--in-place")
    assert result.returncode == 0, result.stderr
    # optimize loads the weights and embeds them: the data file no model reads is removed
    assert sorted(p.name for p in with_data.parent.iterdir()) == ["model.onnx"]
    proto = load_model_proto(with_data)
    assert "modelprov.sources" in {p.key for p in proto.metadata_props}


def test_four_gib_model_audit_and_diff_stay_under_one_gib(tmp_path):
    before, after = build_large_model(str(tmp_path), drop_layer=3)
    data = tmp_path / "large.onnx.data"
    assert data.stat().st_size == LAYERS * LAYER_BYTES >= 4 << 30
    assert data.stat().st_blocks * 512 < 1 << 20  # sparse: nothing on disk
    audit_code, audit_peak, _, audit_out, audit_err = measure(
        [sys.executable, "-m", "modelprov.cli", "audit", before]
    )
    assert audit_code == 0, audit_err
    assert audit_peak < RSS_LIMIT
    assert audit_out.startswith(f"nodes: {2 * LAYERS} (0 without sources)")
    diff_code, diff_peak, _, diff_out, diff_err = measure(
        [sys.executable, "-m", "modelprov.cli", "diff", before, after, "--fail-under", "1"]
    )
    assert diff_code == 1, diff_err
    assert diff_peak < RSS_LIMIT
    assert "  lost add_3 [dyn]  (/home/user/project/model.py:11)" in diff_out
    assert f"FX nodes recall 0.94 ({2 * LAYERS - 1}/{2 * LAYERS})" in diff_out
    assert data.stat().st_blocks * 512 < 1 << 20  # and nothing was written to it
