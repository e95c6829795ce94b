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
