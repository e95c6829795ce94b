"""Model files: saved atomically and read back equal, external data checked before any
weight is read, and no output may overwrite an input."""

from __future__ import annotations

import os
import pathlib
import tempfile

import numpy as np
import onnx
import onnx_ir as ir
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from modelprov._model_io._files import (
    check_output,
    external_data_of,
    load_model,
    load_model_proto,
    save_model,
)
from modelprov.errors import InvalidModelError, UsageError


def _model(weights: np.ndarray, key: str = "custom.note", value: str = "x") -> ir.Model:
    x = ir.Value(name="x", type=ir.TensorType(ir.DataType.FLOAT), shape=ir.Shape([2]))
    w = ir.Value(name="w", const_value=ir.tensor(weights))
    add = ir.node("Add", [x, w], name="add")
    add.metadata_props[key] = value
    add.outputs[0].name = "y"
    graph = ir.Graph(
        [x], add.outputs, nodes=[add], initializers=[w], name="g", opset_imports={"": 18}
    )
    return ir.Model(graph, ir_version=10)


@settings(max_examples=20, deadline=None)
@given(
    st.lists(st.floats(-1e6, 1e6, width=32), min_size=2, max_size=2),
    st.text(min_size=1, max_size=30).filter(lambda t: t.isprintable()),
)
def test_saved_model_reads_back_with_its_metadata(weights: list[float], note: str) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = pathlib.Path(folder) / "m.onnx"
        save_model(_model(np.array(weights, np.float32), value=note), path)
        loaded = load_model(path, load_weights=True)
        node = next(iter(loaded.graph))
        assert node.metadata_props["custom.note"] == note
        tensor = loaded.graph.initializers["w"].const_value
        assert tensor is not None
        np.testing.assert_array_equal(tensor.numpy(), np.array(weights, np.float32))
        assert sorted(os.listdir(folder)) == ["m.onnx"]  # no temporary left beside it


def _external(**entries: str) -> onnx.ModelProto:
    """The model with its weight ``w`` stored as external data described by ``entries``."""
    proto = ir.to_proto(_model(np.ones(2, np.float32)))
    tensor = proto.graph.initializer[0]
    tensor.data_location = onnx.TensorProto.EXTERNAL
    tensor.ClearField("raw_data")
    tensor.ClearField("float_data")
    for key, value in entries.items():
        tensor.external_data.add(key=key, value=value)
    return proto


def test_external_data_outside_the_folder_is_refused_before_reading(tmp_path: pathlib.Path) -> None:
    proto = _external(location="../secret.bin")
    tensor = proto.graph.initializer[0]
    path = tmp_path / "inner" / "m.onnx"
    path.parent.mkdir()
    path.write_bytes(proto.SerializeToString())
    with pytest.raises(InvalidModelError, match=r"tensor 'w' .*leads outside the model's folder"):
        load_model_proto(path, load_weights=False)
    tensor.external_data[0].value = "missing.bin"
    with pytest.raises(InvalidModelError, match=r"'missing.bin', which does not exist"):
        external_data_of(proto, str(path))


def test_external_data_shorter_than_its_length_is_refused(tmp_path: pathlib.Path) -> None:
    proto = _external(location="w.bin", length="8")
    (tmp_path / "w.bin").write_bytes(b"\0" * 4)
    with pytest.raises(InvalidModelError, match=r"bytes 0..8, but the file holds only 4 bytes"):
        external_data_of(proto, str(tmp_path / "m.onnx"))
    (tmp_path / "w.bin").write_bytes(b"\0" * 8)
    found = external_data_of(proto, str(tmp_path / "m.onnx"))
    assert [(item.tensor, item.length) for item in found] == [("w", 8)]


@pytest.mark.parametrize("data", [b"", b"not a model at all", b"\x08\x07"])
def test_a_file_that_is_no_model_is_one_clear_error(tmp_path: pathlib.Path, data: bytes) -> None:
    path = tmp_path / "bad.onnx"
    path.write_bytes(data)
    with pytest.raises(InvalidModelError, match=str(path)):
        load_model_proto(path)


def test_an_output_may_not_overwrite_an_input(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "m.onnx"
    save_model(_model(np.ones(2, np.float32)), path)
    with pytest.raises(UsageError, match="would overwrite the input .*--force to allow it"):
        check_output(path, [path], allow_with="--force")
    assert check_output(path, [path], in_place=True) == str(path)
    assert check_output(tmp_path / "other.onnx", [path]) == str(tmp_path / "other.onnx")
    before = path.read_bytes()
    with pytest.raises(UsageError):
        check_output(path, [path])
    assert path.read_bytes() == before  # checked before any work: nothing written
