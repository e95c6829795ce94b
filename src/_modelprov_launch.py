"""The ``modelprov`` console script: the package is imported under a Ctrl-C guard.

Importing the command line loads no onnx or torch (``--version`` and ``--help`` answer at
once), but a command imports them as it starts, and on a busy machine that takes seconds. An
interrupt during an import before ``modelprov.cli.main`` runs would print a traceback; this
module, outside the package, catches it and exits like the command line does when
interrupted.
"""

from __future__ import annotations

import sys

__all__ = ["main"]

_INTERRUPTED = 130
"""``modelprov.errors.ExitCode.INTERRUPTED``, known here without importing the package."""


def main() -> int:
    """Imports the command line and runs it; an interrupt while importing exits quietly."""
    try:
        from modelprov.cli import main as run
    except KeyboardInterrupt:
        print("modelprov: interrupted while starting; nothing was written", file=sys.stderr)
        return _INTERRUPTED
    return run()
