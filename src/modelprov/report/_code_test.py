"""Code context for the report: bounded, Python files only, under the allowed roots."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from modelprov.report._code import AROUND, CodeContext, allowed_roots


def test_lines_around_a_line_and_bounds(tmp_path: Path) -> None:
    source = tmp_path / "model.py"
    source.write_text("\n".join(f"line {i}" for i in range(1, 21)) + "\n")
    context = CodeContext(source_roots=[tmp_path])
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


SECRET = 'SECRET_KEY = "do-not-share"\n'


def _planted(tmp_path: Path) -> tuple[Path, Path]:
    """(the working folder with a model.py, a settings.py with a secret outside it)."""
    project = tmp_path / "project"
    outside = tmp_path / "elsewhere"
    project.mkdir()
    outside.mkdir()
    (project / "model.py").write_text("import torch\n")
    (outside / "settings.py").write_text(SECRET)
    return project, outside


@pytest.mark.parametrize(
    "named",
    [
        "{outside}/settings.py",  # an absolute path outside every root
        "{project}/../elsewhere/settings.py",  # `..` out of the working folder
        "../elsewhere/settings.py",  # the same, relative
        "{project}/link.py",  # a symlink in the working folder to the secret
        "{project}/linked/settings.py",  # a symlinked folder
        "{project}/alias.py",  # a .py symlink to a file that is not .py
    ],
)
def test_files_outside_the_allowed_roots_are_never_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, named: str
) -> None:
    project, outside = _planted(tmp_path)
    (project / "link.py").symlink_to(outside / "settings.py")
    (project / "linked").symlink_to(outside, target_is_directory=True)
    (project / "notes.txt").write_text(SECRET)
    (project / "alias.py").symlink_to(project / "notes.txt")
    monkeypatch.chdir(project)
    path = named.format(project=project, outside=outside)
    context = CodeContext()
    assert context.around(path, 1) is None
    assert context.around("model.py", 1) == {"first": 1, "lines": ["import torch"]}
    if "alias" not in named:  # the caller may allow the secret's folder by name
        allowed = CodeContext(source_roots=[outside]).around(path, 1)
        assert allowed == {"first": 1, "lines": [SECRET.strip()]}


def test_the_installed_packages_are_allowed_and_the_root_folder_is_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    context = CodeContext()
    assert context.around(pytest.__file__, 1) is not None  # site-packages
    assert context.around(os.__file__, 1) is not None  # the standard library
    monkeypatch.chdir("/")
    assert os.path.realpath("/") not in allowed_roots()
    assert CodeContext().around(str(_planted(tmp_path)[1] / "settings.py"), 1) is None
