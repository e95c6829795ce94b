"""The ``modelprov`` console script: the package is imported under a Ctrl-C guard.

Importing modelprov takes about a second (onnx, onnx_ir, numpy). An interrupt during that
import happens before ``modelprov.cli.main`` can handle it, and Python would print a
traceback; this module, outside the package, catches it and exits like the command line
does when interrupted.
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
