"""The error hierarchy: one class per meaning, each with its exit code, all documented."""

from __future__ import annotations

import pathlib
import re

from modelprov import errors

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_every_error_class_has_an_exit_code_and_is_defined_here_only() -> None:
    classes = [
        getattr(errors, name)
        for name in errors.__all__
        if isinstance(getattr(errors, name), type)
        and issubclass(getattr(errors, name), errors.ModelprovError)
    ]
    assert len(classes) >= 9
    for cls in classes:
        assert isinstance(cls.exit_code, errors.ExitCode), cls
    sources = (ROOT / "src" / "modelprov").rglob("*.py")
    defined = [
        path.name
        for path in sources
        if re.search(r"^class \w+\((?:[\w.]*Error|ModelprovError)", path.read_text(), re.M)
        and path.name not in ("errors.py",)
        and "_test" not in path.name
    ]
    assert defined == []


def test_exit_codes_are_documented_in_the_readme() -> None:
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("Exit codes (`modelprov.errors.ExitCode`)") :][:900]
    for code in errors.ExitCode:
        assert re.search(rf"\b{int(code)}\b", section), code
