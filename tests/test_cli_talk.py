"""The command line says what it did (issue 16, item 5): summaries, -q, --version, ranges."""

from __future__ import annotations

from pathlib import Path

import onnx
import onnx_ir as ir
import pytest

import modelprov
from modelprov.cli import main
from tests.conftest import plain_export


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    try:
        code = main(list(argv))
    except SystemExit as stop:
        code = int(stop.code or 0)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture(scope="module")
def plain(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("talk") / "dt.onnx"
    onnx.save(ir.to_proto(plain_export("double_transpose").clone()), path)
    return path


def test_each_command_prints_one_summary_line_on_stderr(
    capsys: pytest.CaptureFixture[str], plain: Path, tmp_path: Path
) -> None:
    optimized, recovered = tmp_path / "opt.onnx", tmp_path / "rec.onnx"
    functions, inlined = tmp_path / "fn.onnx", tmp_path / "inl.onnx"
    runs = {
        "optimize": (["optimize", str(plain), "-o", str(optimized)], "FX-node recall 1.000"),
        "recover": (["recover", str(plain), str(optimized), "-o", str(recovered)], "nodes, "),
        "functionize": (["functionize", str(optimized), "-o", str(functions)], "functions"),
        "inline": (["inline", str(functions), "-o", str(inlined)], "-> 0 functions"),
        "report": (["report", str(optimized), "-o", str(tmp_path / "r.html")], "r.html"),
        "overlay": (["overlay", str(optimized), "-o", str(tmp_path / "o.json")], "o.json"),
    }
    for name, (argv, expected) in runs.items():
        code, out, err = _run(capsys, *argv)
        assert code == 0, (name, err)
        assert out == "", name  # stdout holds reports only
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("modelprov: wrote "), (name, err)
        assert expected in lines[0], (name, lines[0])
    nodes = len(list(ir.load(optimized).graph))
    _, _, err = _run(capsys, "optimize", str(plain), "-o", str(optimized))
    assert f"-> {nodes} nodes, 100% with sources" in err


def test_quiet_silences_summaries_but_not_reports_or_errors(
    capsys: pytest.CaptureFixture[str], plain: Path, tmp_path: Path
) -> None:
    out_path = tmp_path / "opt.onnx"
    code, out, err = _run(capsys, "-q", "optimize", str(plain), "-o", str(out_path), "--report")
    assert code == 0 and err == "" and "recall" in out
    code, _, err = _run(capsys, "-q", "audit", str(tmp_path / "missing.onnx"))
    assert code == 2 and "no such file" in err


def test_version_and_argument_ranges(capsys: pytest.CaptureFixture[str], plain: Path) -> None:
    code, out, _ = _run(capsys, "--version")
    assert code == 0 and out.strip() == f"modelprov {modelprov.__version__}"
    code, _, err = _run(capsys, "diff", str(plain), str(plain), "--fail-under", "2")
    assert code == 2 and "give a number in 0..1" in err
    code, _, err = _run(capsys, "export", "tests._factories:mlp", "--calibrate", "-3")
    assert code == 2 and "not positive" in err
