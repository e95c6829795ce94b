"""The command line's errors (issue 22, item 7): one ``modelprov: error:`` prefix on every
path, flags named where the Python API would name keywords, and the libraries' chatter kept
off stderr unless ``-v``, for the call only."""

from __future__ import annotations

import argparse
import logging
import pathlib
import re
import warnings

import onnx
import onnx_ir as ir
import pytest

import modelprov
from modelprov._cli import _examples
from modelprov._cli._commands import COMMANDS
from modelprov._cli._spec import command_line_keywords
from modelprov.cli import main
from modelprov.errors import AnnotationError, QuantizationError
from tests._cli import cli_many
from tests.conftest import fresh_export

_SRC = pathlib.Path(modelprov.__file__).parent


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    folder = tmp_path_factory.mktemp("errors")
    paths = {
        "mlp": folder / "mlp.onnx",
        "dt": folder / "dt.onnx",
        "bad_json": folder / "bad.json",
        "not_object": folder / "list.json",
        "ranges": folder / "ranges.json",
    }
    onnx.save(ir.to_proto(fresh_export("mlp")), paths["mlp"])
    onnx.save(ir.to_proto(fresh_export("double_transpose")), paths["dt"])
    paths["bad_json"].write_text("{not json")
    paths["not_object"].write_text("[1, 2]")
    paths["ranges"].write_text('{"no_such_tensor": [0, 1]}')
    return {name: str(path) for name, path in paths.items()} | {"folder": str(folder)}


_NO_ARGUMENTS = {"demo", "policies"}
"""The commands that run without arguments."""


def _error_paths(files: dict[str, str]) -> list[list[str]]:
    """Command lines that fail: each command without arguments, missing and unreadable
    files, bad JSON of every JSON-reading flag, bad values, unknown names."""
    out = f"{files['folder']}/out.onnx"
    missing = f"{files['folder']}/missing.onnx"
    mlp, bad = files["mlp"], files["bad_json"]
    factory = "tests._factories:mlp"
    needs_arguments = [command.name for command in COMMANDS if command.name not in _NO_ARGUMENTS]
    runs = [[], ["bogus"], ["--bogus"], *([name] for name in needs_arguments)]
    runs += [
        ["audit", missing],
        ["audit", bad],
        ["diff", mlp, missing],
        ["optimize", missing, "-o", out],
        ["optimize", mlp, "-o", out, "--policies", bad],
        ["recover", mlp, missing, "-o", out],
        ["recover", mlp, files["dt"], "-o", out],
        ["functionize", mlp, "-o", out, "--level", "nope"],
        ["inline", missing, "-o", out],
        ["report", missing, "-o", f"{files['folder']}/r.html"],
        ["overlay", mlp, "-o", f"{files['folder']}/o.json", "--key", "a", "--coverage"],
        ["quantize", mlp, "-o", out],
        ["quantize", mlp, "-o", out, "--ranges", bad],
        ["quantize", mlp, "-o", out, "--ranges", files["not_object"]],
        ["quantize", mlp, "-o", out, "--ranges", files["ranges"]],
        ["quantize", mlp, "-o", out, "--calibrate-from", bad],
        ["policies", bad],
        ["policies", files["not_object"]],
        ["diff", mlp, mlp, "--fail-under", "2"],
        ["export", factory],
        ["export", "nope", "--onnx", out],
        ["export", "tests._factories:raises", "--onnx", out],
        ["export", factory, "--onnx", out, "--annotations", bad],
        ["export", factory, "--onnx", out, "--dynamic-shapes", bad],
        ["export", factory, "--onnx", out, "--dynamic-shapes", files["not_object"]],
        ["export", factory, "--onnx", out, "--opset", "0"],
        ["export", factory, "--onnx", out, "--dynamic-batch", "--dynamic-shapes", bad],
        ["export", factory, "--onnx", f"{files['folder']}/no/such/folder.onnx"],
    ]
    return runs


def test_every_error_is_one_line_with_one_prefix(
    capsys: pytest.CaptureFixture[str], files: dict[str, str]
) -> None:
    for argv in _error_paths(files):
        code, stdout, err = _run(capsys, "-q", *argv)
        assert code != 0, argv
        assert stdout == "", argv
        lines = err.splitlines()
        assert len(lines) == 1, (argv, err)
        assert lines[0].startswith("modelprov: error: "), (argv, err)
        assert lines[0].count("modelprov:") == 1 and "error: error" not in lines[0], (argv, err)
        assert "Traceback" not in err


def test_errors_name_flags_on_the_command_line_and_keywords_in_python(
    capsys: pytest.CaptureFixture[str], files: dict[str, str]
) -> None:
    out = f"{files['folder']}/q.onnx"
    _, _, err = _run(capsys, "quantize", files["mlp"], "-o", out)
    assert "--ranges FILE.json" in err and "--calibrate-from BATCH.npz" in err, err
    assert "modelprov export --calibrate N" in err
    assert not re.search(r"\b(ranges|annotations|calibration_batches)=", err), err
    with pytest.raises(QuantizationError) as caught:
        modelprov.quantize(onnx.load(files["mlp"]))
    python = str(caught.value)
    assert "ranges={name: (min, max)}" in python and "calibration_batches=" in python
    assert "annotations=modelprov.calibrate(...)" in python and "--" not in python

    _, _, err = _run(capsys, "quantize", files["mlp"], "-o", out, "--ranges", files["ranges"])
    assert f"error: --ranges {files['ranges']}, key 'no_such_tensor': no tensor" in err, err
    with pytest.raises(QuantizationError, match=r"^ranges\['no_such_tensor'\]: no tensor"):
        modelprov.quantize(onnx.load(files["mlp"]), ranges={"no_such_tensor": (0, 1)})

    _, _, err = _run(capsys, "recover", files["mlp"], files["dt"], "-o", out)
    assert "or --force to recover anyway" in err and "force=True" not in err, err

    annotations = pathlib.Path(files["folder"]) / "annotations.json"
    annotations.write_text('{"nope": {"team": "a"}}')
    _, _, err = _run(
        capsys, "export", "tests._factories:mlp", "--onnx", out, "--annotations", str(annotations)
    )
    assert f"error: --annotations {annotations}: no module at path 'nope'" in err, err
    model, example = _examples.mlp()
    with pytest.raises(AnnotationError, match=r"^annotations: no module at path 'nope'"):
        modelprov.export(model, example, annotations={"nope": {"team": "a"}})

    _, _, err = _run(capsys, "export", "tests._factories:mlp", "--onnx", out, "--quantize")
    assert "calibrate the export (--calibrate N)" in err, err
    assert "--batches MODULE:FACTORY" in err and "calibration_batches" not in err


def test_every_keyword_an_error_names_has_a_flag() -> None:
    """Each API keyword a message names (``errors.keyword``) is given by a flag of some
    command, so the command line never falls back to the Python spelling where it has one."""
    named = set()
    for path in _SRC.rglob("*.py"):
        if not path.name.endswith("_test.py"):
            named |= set(re.findall(r"""keyword\(\s*["'](\w+)["']""", path.read_text("utf-8")))
    assert {"ranges", "calibration_batches", "annotations", "calibrate", "force", "verify"} <= named
    spelled: set[str] = set()
    for command in COMMANDS:
        spelled |= set(command_line_keywords(command, argparse.Namespace()))
    assert named <= spelled, named - spelled


def test_the_libraries_chatter_shows_only_with_verbose(
    capsys: pytest.CaptureFixture[str], tmp_path: pathlib.Path
) -> None:
    # Without -v, in a fresh process (torch configures its loggers as it is imported).
    (quiet,) = cli_many([["export", "tests._factories:mlp", "--onnx", str(tmp_path / "q.onnx")]])
    assert quiet.returncode == 0, quiet.stderr
    lines = quiet.stderr.splitlines()
    assert lines and all(line.startswith("modelprov: ") for line in lines), quiet.stderr
    assert quiet.stdout == ""
    # With -v, torch.onnx's own steps show, on stderr (stdout holds reports only).
    code, stdout, err = _run(
        capsys, "-v", "export", "tests._factories:mlp", "--onnx", str(tmp_path / "v.onnx")
    )
    assert code == 0, err
    assert stdout == ""
    assert any(line.startswith("[torch.onnx]") for line in err.splitlines()), err
    assert any(line.startswith("modelprov: wrote ") for line in err.splitlines())


def test_quieting_lasts_for_the_call_only(
    capsys: pytest.CaptureFixture[str], tmp_path: pathlib.Path
) -> None:
    import torch  # noqa: F401  (torch's loggers exist, as after any export)

    names = ("torch", "torch.onnx", "onnxscript", "onnx_ir")
    levels = {name: logging.getLogger(name).level for name in names}
    filters = list(warnings.filters)
    root = logging.getLogger()
    handlers, root_level = list(root.handlers), root.level
    code, _, err = _run(
        capsys, "export", "tests._factories:mlp", "--onnx", str(tmp_path / "m.onnx")
    )
    assert code == 0, err
    assert {name: logging.getLogger(name).level for name in names} == levels
    assert warnings.filters == filters
    assert root.handlers == handlers and root.level == root_level
