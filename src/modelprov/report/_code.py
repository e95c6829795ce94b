"""Source code around a stack frame's line, read when the report is written.

The report shows each source line with a few lines of context. Paths come from model
metadata, which may be untrusted (a model can name any file, ``/etc/app/settings.py`` or
``../../secrets.py``), and a report is made to be shared, so a file is read only when:

- its real path (symlinks and ``..`` resolved) lies under an allowed root: the working
  folder (unless it is the file system's root), the caller's ``source_roots``, or the
  folders of installed packages (the standard library, site-packages);
- it is a Python file (``.py``, by its name and its real path's), a regular file of at most
  ``MAX_FILE_BYTES``, among the first ``MAX_FILES`` asked for.

Only ``AROUND`` lines either side of a line named by a frame are kept (each cut to
``MAX_LINE_CHARS``). Files that cannot or may not be read are simply left out.
"""

from __future__ import annotations

import os
import site
import sysconfig
from collections.abc import Iterable
from typing import Any

__all__ = ["AROUND", "CodeContext", "allowed_roots"]

AROUND = 3
MAX_FILE_BYTES = 2 << 20
MAX_FILES = 500
MAX_LINE_CHARS = 240


def _package_folders() -> list[str]:
    """The folders installed Python code lives in: the standard library and site-packages."""
    folders = [
        folder
        for name in ("stdlib", "platstdlib", "purelib", "platlib")
        if (folder := sysconfig.get_paths().get(name))
    ]
    folders.extend(site.getsitepackages())
    if site.ENABLE_USER_SITE:
        folders.append(site.getusersitepackages())
    return folders


def allowed_roots(source_roots: Iterable[str | os.PathLike[str]] = ()) -> tuple[str, ...]:
    """The real paths of the folders source files may be read from (see the module doc)."""
    roots: list[str] = []
    working = os.path.realpath(os.getcwd())
    if os.path.dirname(working) != working:  # not the file system's root
        roots.append(working)
    roots.extend(os.path.realpath(os.fspath(root)) for root in source_roots)
    roots.extend(os.path.realpath(folder) for folder in _package_folders())
    return tuple(dict.fromkeys(roots))


def _within(path: str, root: str) -> bool:
    try:
        return os.path.commonpath([path, root]) == root
    except ValueError:  # different drives
        return False


class CodeContext:
    """Reads files once each and returns the lines around a line, within the bounds.

    ``source_roots``: folders besides the working folder and the installed packages' that
    source files may be read from.
    """

    def __init__(self, source_roots: Iterable[str | os.PathLike[str]] = ()) -> None:
        self._roots = allowed_roots(source_roots)
        self._files: dict[str, list[str] | None] = {}
        self._table: dict[str, dict[str, Any]] = {}
        self._asked: set[str] = set()

    def add(self, path: str, key: str, line: int) -> None:
        """Records the code around ``line`` of ``path`` under ``key`` (once per key)."""
        if key in self._asked:
            return
        self._asked.add(key)
        found = self.around(path, line)
        if found is not None:
            self._table[key] = found

    def table(self) -> dict[str, dict[str, Any]]:
        """Everything recorded: ``{key: {"first": n, "lines": [...]}}``."""
        return dict(self._table)

    def allows(self, path: str) -> bool:
        """True when ``path`` (resolved) is a ``.py`` file name under an allowed root."""
        if not path.endswith(".py") or "\0" in path:
            return False
        real = os.path.realpath(path)
        return real.endswith(".py") and any(_within(real, root) for root in self._roots)

    def _lines(self, path: str) -> list[str] | None:
        if path in self._files:
            return self._files[path]
        lines: list[str] | None = None
        if len(self._files) < MAX_FILES and self.allows(path):
            real = os.path.realpath(path)
            try:
                if os.path.isfile(real) and os.path.getsize(real) <= MAX_FILE_BYTES:
                    with open(real, encoding="utf-8", errors="replace") as stream:
                        lines = stream.read().splitlines()
            except (OSError, ValueError):
                lines = None
        self._files[path] = lines
        return lines

    def around(self, path: str, line: int) -> dict[str, Any] | None:
        """``{"first": n, "lines": [...]}``: lines ``n``.. around ``line`` (1-based), or None."""
        lines = self._lines(path)
        if lines is None or not 1 <= line <= len(lines):
            return None
        first = max(1, line - AROUND)
        last = min(len(lines), line + AROUND)
        return {
            "first": first,
            "lines": [text[:MAX_LINE_CHARS] for text in lines[first - 1 : last]],
        }
