"""The README's Python code blocks run as written (issue 16, item 7)."""

from __future__ import annotations

import contextlib
import io
import os
import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parent.parent / "README.md"


def python_blocks(text: str) -> list[str]:
    """The contents of the ```python fenced blocks, in order."""
    return re.findall(r"^```python\n(.*?)^```", text, flags=re.S | re.M)


def test_readme_has_python_blocks() -> None:
    assert len(python_blocks(README.read_text(encoding="utf-8"))) >= 4


def test_readme_python_blocks_run_in_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("jax")  # the seed-003 block lowers to StableHLO
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {"__name__": "readme"}
    printed = io.StringIO()
    for index, block in enumerate(python_blocks(README.read_text(encoding="utf-8"))):
        code = compile(block, f"README.md block {index + 1}", "exec")
        with contextlib.redirect_stdout(printed):
            exec(code, namespace)  # our own README: running it is the point
    assert os.path.exists("model.onnx") and os.path.exists("mlp.onnx")
    output = printed.getvalue()
    assert "Gemm" in output and "custom.max" in output
    assert "pkg.torch.aten aten_linear_default" in output


def test_first_example_prints_the_users_own_lines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first example, saved as a script of the user's: every printed source is a line of
    that script (the line calling the module or function), not one of torch's files."""
    monkeypatch.chdir(tmp_path)
    first = python_blocks(README.read_text(encoding="utf-8"))[0]
    script = tmp_path / "my_model.py"
    script.write_text(first, encoding="utf-8")
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(first, str(script), "exec"), {"__name__": "my_model"})
    lines = printed.getvalue().splitlines()
    rows = [line.split(" ") for line in lines if line.strip() and not line.startswith("[torch")]
    assert rows and {row[0] for row in rows} == {"Gemm", "Gelu"}
    code = first.splitlines()
    for row in rows:
        op_type, file, line = row[0], row[-2], int(row[-1])
        assert file == str(script), row
        called = "self.down(" if row[1] == "linear_1" else "self.up(x)"
        assert called in code[line - 1], (op_type, code[line - 1])
