"""``modelprov export``'s torch.onnx flags, on real exports (issue 22, item 7): each flag's
effect is read back from the written file, and every file written is named on stderr."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from modelprov.cli import main


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def reported_files(err: str) -> set[str]:
    """The files the ``modelprov: wrote PATH: ...`` lines name."""
    return {match for match in re.findall(r"^modelprov: wrote (.+?): ", err, re.M)}


def files_in(folder: Path) -> set[str]:
    return {str(path) for path in folder.iterdir() if path.is_file()}


def test_opset_names_dynamic_batch_external_data_and_report(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    out = tmp_path / "mlp.onnx"
    code, stdout, err = _run(
        capsys,
        "export",
        "tests._factories:mlp",
        "--onnx",
        str(out),
        "--opset",
        "19",
        "--dynamic-batch",
        "--input-names",
        "pixels",
        "--output-names",
        "logits",
        "--external-data",
        "--report",
        "--artifacts-dir",
        str(tmp_path),
    )
    assert code == 0, err
    assert stdout == ""
    header = onnx.load(str(out), load_external_data=False)
    assert {o.domain: o.version for o in header.opset_import}[""] == 19
    assert [value.name for value in header.graph.input] == ["pixels"]
    assert [value.name for value in header.graph.output] == ["logits"]
    batch = header.graph.input[0].type.tensor_type.shape.dim[0]
    assert batch.dim_param == "batch" and not batch.HasField("dim_value")
    data = tmp_path / "mlp.onnx.data"
    assert data.stat().st_size > 784 * 512 * 4  # the weights live beside the model
    large = [t for t in header.graph.initializer if np.prod(t.dims) >= 1024]
    assert large and all(t.data_location == onnx.TensorProto.EXTERNAL for t in large)
    session = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])
    for rows in (1, 7):  # the symbolic batch runs at any size
        (logits,) = session.run(None, {"pixels": np.zeros((rows, 784), np.float32)})
        assert logits.shape == (rows, 10)
    (report,) = tmp_path.glob("modelprov_export_*.md")
    assert "mlp.onnx" in report.read_text()
    assert reported_files(err) == files_in(tmp_path) == {str(out), str(data), str(report)}


def test_dynamic_shapes_file_names_the_dims_and_weights_stay_inside(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    shapes = tmp_path / "shapes.json"
    shapes.write_text(json.dumps({"input": {"0": "rows"}}))
    out = tmp_path / "mlp.onnx"
    code, _, err = _run(
        capsys,
        "export",
        "tests._factories:mlp",
        "--onnx",
        str(out),
        "--dynamic-shapes",
        str(shapes),
        "--no-external-data",
        "--verify",
    )
    assert code == 0, err
    model = onnx.load(str(out))
    assert model.graph.input[0].type.tensor_type.shape.dim[0].dim_param == "rows"
    assert model.graph.input[0].type.tensor_type.shape.dim[1].dim_value == 784
    assert "verified against torch" in err
    assert reported_files(err) == files_in(tmp_path) - {str(shapes)} == {str(out)}


def test_verify_failure_exits_1_and_writes_nothing(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    out = tmp_path / "noisy.onnx"
    code, _, err = _run(capsys, "export", "tests._factories:noisy", "--onnx", str(out), "--verify")
    assert code == 1
    assert not out.exists() and files_in(tmp_path) == set()
    (line,) = [line for line in err.splitlines() if "error" in line]
    assert line.startswith("modelprov: error: --verify: the optimized model's outputs differ")
    assert "--no-optimize" in line and "verify=True" not in line and "optimize=False" not in line


def test_quantize_writes_and_reports_both_models(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    out = tmp_path / "mlp.onnx"
    code, _, err = _run(
        capsys,
        "export",
        "tests._factories:mlp",
        "--onnx",
        str(out),
        "--calibrate",
        "2",
        "--quantize",
    )
    assert code == 0, err
    quantized = tmp_path / "mlp.quant.onnx"
    assert reported_files(err) == files_in(tmp_path) == {str(out), str(quantized)}
    assert re.search(
        rf"wrote {re.escape(str(quantized))}: quantized from .* quantized tensors", err
    )


def test_onnx_flags_need_an_onnx_output(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, err = _run(
        capsys,
        "export",
        "tests._factories:mlp",
        "--stablehlo",
        str(tmp_path / "m.mlir"),
        "--opset",
        "18",
    )
    assert code == 2 and "--opset: give --onnx OUT.onnx" in err


def test_dynamic_batch_marks_tensor_arguments_by_name_when_there_are_keywords() -> None:
    from modelprov._cli._torch_onnx import batch_dynamic_shapes
    from tests._factories import tiny_gpt2

    model, args, kwargs = tiny_gpt2()
    assert batch_dynamic_shapes(model, args, kwargs) == {
        "input_ids": {0: "batch"},
        "use_cache": None,
    }


def test_graph_commands_name_the_external_data_they_write(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    source = tmp_path / "in" / "mlp.onnx"
    source.parent.mkdir()
    code, _, err = _run(
        capsys, "export", "tests._factories:mlp", "--onnx", str(source), "--external-data"
    )
    assert code == 0, err
    # optimize loads the small weights into the model; the graph-only commands copy the
    # weights still on disk into OUT.onnx.data
    runs = {
        "optimize": (["optimize", str(source)], False),
        "functionize": (["functionize", str(source)], True),
        "recover": (["recover", str(source), str(source)], True),
    }
    for name, (argv, with_data) in runs.items():
        folder = tmp_path / name
        folder.mkdir()
        out = folder / "out.onnx"
        code, _, err = _run(capsys, *argv, "-o", str(out))
        assert code == 0, (name, err)
        assert reported_files(err) == files_in(folder), (name, err)
        data_line = f"wrote {out}.data: external data of out.onnx" in err
        assert data_line == with_data == (folder / "out.onnx.data").exists(), (name, err)


def test_dynamic_shapes_from_a_factory_keep_torch_dims(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    out = tmp_path / "mlp.onnx"
    code, _, err = _run(
        capsys,
        "export",
        "tests._factories:mlp",
        "--onnx",
        str(out),
        "--dynamic-shapes",
        "tests._factories:mlp_dynamic_shapes",
    )
    assert code == 0, err
    dim = onnx.load(str(out)).graph.input[0].type.tensor_type.shape.dim[0]
    assert dim.dim_param == "rows" and not dim.HasField("dim_value")
    session = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])
    (logits,) = session.run(None, {"input": np.zeros((9, 784), np.float32)})
    assert logits.shape == (9, 10)
