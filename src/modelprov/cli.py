"""The ``modelprov`` command line: thin over the Python API.

Exit codes: :class:`modelprov.errors.ExitCode` (``modelprov --help`` lists them all). Errors
are one line on stderr, ``modelprov: error: ...`` (``--debug`` adds the traceback). Reports go
to stdout; errors, progress and one summary line per written file go to stderr (a spinner on
a terminal, rate-limited lines otherwise; ``-q`` silences progress and summaries). The
libraries' own log lines and warnings (torch.onnx, onnxscript) show only with ``-v``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import traceback
from collections.abc import Sequence

from modelprov._base._gc import gc_paused
from modelprov._cli import _progress
from modelprov._cli._commands import COMMANDS, one_line
from modelprov._cli._library_warnings import collected
from modelprov._cli._quiet_libraries import libraries_quieted
from modelprov._cli._spec import ArgumentParser, add_commands, command_line_keywords
from modelprov.core._printable import printable
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
        description="Keep every operation's provenance through ONNX export and optimization.",
        epilog=_exit_codes(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
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


_COMMANDS_BY_NAME = {command.name: command for command in COMMANDS}


def _exit_codes() -> str:
    """The exit codes, one per line, from :class:`ExitCode` (for ``--help``)."""
    return "exit codes:\n" + "\n".join(f"  {int(code):<4} {code.meaning}" for code in ExitCode)


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
    flags: dict[str, str] = {}
    try:
        return _run(argv, flags)
    except ModelprovError as error:
        if debug:
            traceback.print_exc()
        _say(f"modelprov: error: {one_line(error, flags)}")
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


def _run(argv: Sequence[str] | None, flags: dict[str, str]) -> int:
    """Parses and runs the command; ``flags`` gets how its errors name API keywords."""
    parser = build_parser()
    args = parser.parse_args(argv)
    flags.update(command_line_keywords(_COMMANDS_BY_NAME[args.command], args))
    quiet = _progress.QUIET.set(bool(args.quiet))
    try:
        # A short-lived process: collecting cycles would walk every node. Run as the program
        # (no argv given), the process exits next, so nothing is collected at the end either.
        with (
            collected(verbose=args.verbose, debug=args.debug) as library_warnings,
            libraries_quieted(enabled=not args.verbose),
            gc_paused(freeze_after=argv is None),
        ):
            code: int = args.run(args)
        if library_warnings.summary():
            _progress.summary(library_warnings.summary())
    except ImportError as error:
        if isinstance(error, ModelprovError):
            raise
        if getattr(error, "name", "") and str(error.name).startswith("modelprov."):
            raise UsageError(
                f"{args.command} is not available in this installation ({error})"
            ) from error
        raise
    finally:
        _progress.QUIET.reset(quiet)
    sys.stdout.flush()
    return code


if __name__ == "__main__":
    sys.exit(main())
