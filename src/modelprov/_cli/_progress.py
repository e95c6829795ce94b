"""What the command line says while it works and when it is done.

Progress goes to stderr: a spinner on a terminal; otherwise plain lines, rate-limited (a
step says it started only once it has run for ``first_after`` seconds, then repeats at
most every ``every`` seconds, and says when it finished) so logs of long runs in CI show
progress without noise. The one summary line per command also goes to stderr, so stdout
holds only reports. ``quiet`` silences both; errors are never silenced.
"""

from __future__ import annotations

import contextlib
import contextvars
import sys
import threading
import time
from collections.abc import Iterator
from typing import TextIO

from modelprov.core._printable import printable

__all__ = ["QUIET", "status", "summary"]

QUIET: contextvars.ContextVar[bool] = contextvars.ContextVar("modelprov_quiet", default=False)
"""Set by the command line's ``-q``."""


def summary(text: str, *, stream: TextIO | None = None) -> None:
    """The one line a command prints when it succeeded (unless quiet)."""
    if QUIET.get():
        return
    shown = printable(f"modelprov: {text}")
    print(shown, file=stream if stream is not None else sys.stderr, flush=True)


@contextlib.contextmanager
def status(
    message: str,
    *,
    stream: TextIO | None = None,
    first_after: float = 2.0,
    every: float = 15.0,
) -> Iterator[None]:
    """Progress while a step runs: a spinner on a terminal, rate-limited lines otherwise."""
    out = stream if stream is not None else sys.stderr
    message = printable(message)
    if QUIET.get():
        yield
        return
    if out.isatty():
        from rich.console import Console

        with Console(file=out).status(message):
            yield
        return
    start = time.monotonic()
    done = threading.Event()
    said = threading.Event()

    def report() -> None:
        wait = first_after
        while not done.wait(wait):
            elapsed = time.monotonic() - start
            suffix = "..." if not said.is_set() else f"... ({elapsed:.0f} s)"
            print(f"modelprov: {message}{suffix}", file=out, flush=True)
            said.set()
            wait = every

    thread = threading.Thread(target=report, name="modelprov-progress", daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()
        if said.is_set():
            elapsed = time.monotonic() - start
            print(f"modelprov: {message}: done in {elapsed:.1f} s", file=out, flush=True)
