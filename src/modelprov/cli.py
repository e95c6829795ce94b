"""The ``modelprov`` command line: thin over the Python API.

Exit codes (:class:`modelprov.errors.ExitCode`): 0 ok, 1 a check failed (``--fail-under``),
2 usage or input error, 3 an output cannot be written, 4 StableHLO lowering failed, 5 an
optional dependency is missing, 70 internal error, 130 interrupted (Ctrl-C, SIGTERM), 141
stdout closed early. Errors are one line on stderr (``--debug`` adds the traceback). Reports
go to stdout; errors, progress and each command's one summary line go to stderr (a spinner on
a terminal, rate-limited lines otherwise; ``-q`` silences progress and summaries).
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import signal
import sys
import traceback
import warnings
from collections.abc import Sequence

from modelprov import _progress
from modelprov._cli_commands import COMMANDS, one_line
from modelprov._cli_spec import ArgumentParser, add_commands
from modelprov._gc import gc_paused
from modelprov.core._printable import printable, printable_lines
from modelprov.errors import ExitCode, ModelprovError, UsageError

__all__ = ["ExitCode", "UsageError", "build_parser", "main"]

EXIT_OK = ExitCode.OK
EXIT_CHECK_FAILED = ExitCode.CHECK_FAILED
EXIT_USAGE = ExitCode.BAD_INPUT


def build_parser(*, complete: bool = False) -> argparse.ArgumentParser:
    """The argument parser of the ``modelprov`` command: the global flags, then the
    subcommands of ``_cli_commands.COMMANDS``. A subcommand's arguments are added when it is
    parsed or its help is shown; ``complete=True`` adds them all at once."""
    parser = ArgumentParser(
        prog="modelprov",
        description="Keep every operation's provenance through ONNX export and optimization. "
        "Exit codes: 0 ok, 1 a check failed, 2 usage or input error.",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress details")
    parser.add_argument(
        "--debug", action="store_true", help="print the traceback of an error (for bug reports)"
    )
    parser.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        help="print no progress and no summary line (reports and errors still print)",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    add_commands(parser, COMMANDS, complete=complete)
    return parser


def _version() -> str:
    from importlib import metadata

    try:
        return metadata.version("modelprov")
    except metadata.PackageNotFoundError:
        import modelprov

        return str(modelprov.__version__)


def _say(text: str) -> None:
    """One line on stderr, whatever characters it holds (escaped: ``core._printable``)."""
    encoding = getattr(sys.stderr, "encoding", None) or "utf-8"
    shown = printable(text)
    sys.stderr.write(shown.encode(encoding, "backslashreplace").decode(encoding) + "\n")
    sys.stderr.flush()


class _PrintableFormatter(logging.Formatter):
    """Log lines with the names they quote escaped (``core._printable``), line breaks kept."""

    def format(self, record: logging.LogRecord) -> str:
        return printable_lines(super().format(record).split("\n"))


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _silence_stdout() -> None:
    """After the reader of stdout left: no more writes, and no error at exit's flush."""
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the command line; returns the exit code (:class:`ExitCode`).

    Every error modelprov raises on purpose is one line on stderr and its class's exit
    code; any other exception is an internal error (exit 70) shown as one line, with the
    traceback only under ``--debug``. Ctrl-C and SIGTERM stop quietly (exit 130; partial
    outputs are removed); a closed stdout (``| head``) ends quietly (exit 141).
    """
    debug = "--debug" in (sys.argv[1:] if argv is None else argv)
    previous = None
    with contextlib.suppress(ValueError):  # not the main thread: leave SIGTERM alone
        previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        return _run(argv)
    except ModelprovError as error:
        if debug:
            traceback.print_exc()
        _say(f"modelprov: error: {one_line(error)}")
        return error.exit_code
    except KeyboardInterrupt:
        _say("modelprov: interrupted; nothing was left half-written")
        return ExitCode.INTERRUPTED
    except BrokenPipeError:
        _silence_stdout()
        return ExitCode.BROKEN_PIPE
    except SystemExit as exit_:
        return exit_.code if isinstance(exit_.code, int) else ExitCode.BAD_INPUT
    except Exception as error:
        if debug:
            traceback.print_exc()
        _say(
            f"modelprov: internal error: {one_line(error)} (a bug: rerun with --debug and "
            "report the traceback)"
        )
        return ExitCode.INTERNAL_ERROR
    finally:
        if previous is not None:
            with contextlib.suppress(ValueError):
                signal.signal(signal.SIGTERM, previous)


def _run(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING, format="%(message)s", force=True
    )
    for handler in logging.getLogger().handlers:
        handler.setFormatter(_PrintableFormatter("%(message)s"))
    _progress.QUIET.set(bool(args.quiet))
    if not args.verbose:
        logging.getLogger("torch").setLevel(logging.ERROR)
        for category in (DeprecationWarning, FutureWarning, UserWarning):
            warnings.simplefilter("ignore", category)
    try:
        # A short-lived process: collecting cycles would walk every node. Run as the program
        # (no argv given), the process exits next, so nothing is collected at the end either.
        with gc_paused(freeze_after=argv is None):
            code: int = args.run(args)
    except ImportError as error:
        if isinstance(error, ModelprovError):
            raise
        if getattr(error, "name", "") and str(error.name).startswith("modelprov."):
            raise UsageError(
                f"{args.command} is not available in this installation ({error})"
            ) from error
        raise
    sys.stdout.flush()
    return code


if __name__ == "__main__":
    sys.exit(main())
