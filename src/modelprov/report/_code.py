"""Source code around a stack frame's line, read when the report is written.

The report shows each source line with a few lines of context. Paths come from model
metadata, which may be untrusted, so only Python files (``.py``) that are regular files of
at most ``MAX_FILE_BYTES`` are read, at most ``MAX_FILES`` of them, and only
``AROUND`` lines either side of a line named by a frame are kept (each cut to
``MAX_LINE_CHARS``). Files that cannot be read are simply left out.
"""

from __future__ import annotations

import os
from typing import Any

__all__ = ["AROUND", "CodeContext"]

AROUND = 3
MAX_FILE_BYTES = 2 << 20
MAX_FILES = 500
MAX_LINE_CHARS = 240


class CodeContext:
    """Reads files once each and returns the lines around a line, within the bounds."""

    def __init__(self) -> None:
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

    def _lines(self, path: str) -> list[str] | None:
        if path in self._files:
            return self._files[path]
        lines: list[str] | None = None
        if len(self._files) < MAX_FILES and path.endswith(".py"):
            try:
                if os.path.isfile(path) and os.path.getsize(path) <= MAX_FILE_BYTES:
                    with open(path, encoding="utf-8", errors="replace") as stream:
                        lines = stream.read().splitlines()
            except OSError:
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
