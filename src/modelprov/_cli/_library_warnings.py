"""What the libraries modelprov runs warn about, as the command line shows it: one line.

onnx_ir, onnxscript, onnx and torch log warnings (some with a whole traceback attached,
such as onnx_ir's "Shape inference failed") and raise Python warnings. A command collects
them while it runs: when it succeeds, one line says how many there were and what the first
said; when it fails, its one error line is all it prints. ``-v`` prints each warning on a
line of its own, ``--debug`` with its traceback. modelprov's own log lines print as they
come, one line each.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import sys
import warnings
from collections.abc import Iterator

__all__ = ["LibraryWarnings", "collected", "one_line_record"]

_OWN = "modelprov"
_SHOWN = 300
"""Characters of a warning's text shown in the summary."""


def _flat(text: str) -> str:
    return " ".join(text.split())


def one_line_record(record: logging.LogRecord) -> str:
    """A log record as one line: its message, then its exception's type and first words
    (never the traceback)."""
    try:
        text = record.getMessage()
    except (TypeError, ValueError):  # arguments that do not fit the format
        text = str(record.msg)
    exc_info = record.exc_info
    if exc_info and exc_info[1] is not None:
        error = exc_info[1]
        shown = f"{type(error).__name__}: {_flat(str(error))[:_SHOWN]}"
        if not record.args and "%s" in text:  # a format the library left without its argument
            text = text.replace("%s", shown, 1)
        else:
            text += f" [{shown}]"
    return _flat(text)


@dataclasses.dataclass
class LibraryWarnings:
    """The warnings collected while a command ran (``source: text``)."""

    found: list[str] = dataclasses.field(default_factory=list)

    def summary(self) -> str:
        """One line about them; empty when there were none."""
        if not self.found:
            return ""
        first = self.found[0][:_SHOWN]
        more = f" (and {len(self.found) - 1} more)" if len(self.found) > 1 else ""
        return (
            f"note: {len(self.found)} warning(s) from the libraries modelprov ran: {first}"
            f"{more}; -v shows each"
        )


class _Handler(logging.Handler):
    def __init__(self, found: LibraryWarnings, *, each: bool, traceback: bool) -> None:
        super().__init__(logging.WARNING)
        self._found = found
        self._each = each
        self._traceback = traceback
        if traceback:
            self.setFormatter(logging.Formatter("%(name)s: %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        own = record.name == _OWN or record.name.startswith(_OWN + ".")
        if self._traceback:
            text = self.format(record)
        else:
            text = one_line_record(record) if own else f"{record.name}: {one_line_record(record)}"
        if own or self._each or self._traceback:
            _write(text if own else f"warning: {text}")
        else:
            self._found.found.append(text)


def _write(text: str) -> None:
    from modelprov.core._printable import printable_lines

    text = printable_lines(text.split("\n"))  # names a model spells stay inert text
    stream = sys.stderr
    encoding = getattr(stream, "encoding", None) or "utf-8"
    stream.write(text.encode(encoding, "backslashreplace").decode(encoding) + "\n")
    stream.flush()


@contextlib.contextmanager
def collected(*, verbose: bool, debug: bool) -> Iterator[LibraryWarnings]:
    """Routes log records (root logger, WARNING and up; INFO too when ``verbose``) and
    Python warnings into the returned collection while the block runs; restores the
    previous handlers and ``warnings.showwarning`` after it."""
    found = LibraryWarnings()
    root = logging.getLogger()
    saved_handlers, saved_level = root.handlers[:], root.level
    handler = _Handler(found, each=verbose, traceback=debug)
    if verbose:
        handler.setLevel(logging.INFO)
    root.handlers[:] = [handler]
    root.setLevel(logging.INFO if verbose else logging.WARNING)
    saved_show = warnings.showwarning

    def show(
        message: Warning | str,
        category: type[Warning],
        filename: str,
        lineno: int,
        file: object = None,
        line: str | None = None,
    ) -> None:
        text = f"{category.__name__}: {_flat(str(message))}"
        if verbose or debug:
            _write(f"warning: {text} ({filename}:{lineno})")
        else:
            found.found.append(text)

    warnings.showwarning = show
    try:
        yield found
    finally:
        warnings.showwarning = saved_show
        root.handlers[:] = saved_handlers
        root.setLevel(saved_level)
