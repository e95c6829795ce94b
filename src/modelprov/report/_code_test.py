"""Code context for the report: bounded, Python files only."""

from __future__ import annotations

from pathlib import Path

from modelprov.report._code import AROUND, CodeContext


def test_lines_around_a_line_and_bounds(tmp_path: Path) -> None:
    source = tmp_path / "model.py"
    source.write_text("\n".join(f"line {i}" for i in range(1, 21)) + "\n")
    context = CodeContext()
    found = context.around(str(source), 10)
    assert found == {"first": 10 - AROUND, "lines": [f"line {i}" for i in range(7, 14)]}
    assert context.around(str(source), 1) == {
        "first": 1,
        "lines": ["line 1", "line 2", "line 3", "line 4"],
    }
    assert context.around(str(source), 99) is None
    secret = tmp_path / "secret.txt"
    secret.write_text("password\n")
    assert context.around(str(secret), 1) is None  # only .py files are read
    assert context.around(str(tmp_path / "missing.py"), 1) is None
