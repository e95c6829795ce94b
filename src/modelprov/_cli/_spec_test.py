"""The command line as data: flags derived from options dataclasses, commands built lazily."""

from __future__ import annotations

import argparse
import dataclasses
import subprocess
import sys
from typing import Literal

import pytest

from modelprov._cli._spec import (
    ArgumentParser,
    Command,
    OptionsOf,
    add_commands,
    option_arguments,
    option_values,
)
from modelprov.core._policy import Policies
from modelprov.errors import UsageError


@dataclasses.dataclass(frozen=True, kw_only=True)
class _Options:
    policies: Policies | None = None
    mode: Literal["fast", "exact"] = dataclasses.field(
        default="exact", metadata={"help": "how to run"}
    )
    force: bool = dataclasses.field(default=False, metadata={"help": "do it anyway"})
    check: bool = dataclasses.field(default=True, metadata={"help": "check the result"})
    limit: int | None = dataclasses.field(
        default=None, metadata={"help": "at most this many", "metavar": "N"}
    )
    hidden: float = dataclasses.field(default=0.5, metadata={"cli": False})


def _parse(argv: list[str], options: type = _Options) -> argparse.Namespace:
    parser = ArgumentParser(prog="tool")
    add_commands(parser, [Command("run", "run it", lambda args: 0, (OptionsOf(lambda: options),))])
    return parser.parse_args(argv)


def test_each_field_a_command_line_can_give_becomes_a_flag() -> None:
    flags = {arg.flags[0]: dict(arg.options) for arg in option_arguments(_Options)}
    assert list(flags) == ["--mode", "--force", "--check", "--limit"]  # no policies, no hidden
    assert flags["--mode"]["choices"] == ("fast", "exact")
    assert flags["--force"]["action"] == "store_true"
    assert flags["--check"]["action"] is argparse.BooleanOptionalAction
    assert (flags["--limit"]["type"], flags["--limit"]["metavar"]) == (int, "N")


def test_parsed_flags_build_the_options() -> None:
    args = _parse(["run", "--mode", "fast", "--force", "--no-check", "--limit", "3"])
    values = option_values(args, _Options)
    assert values == {"mode": "fast", "force": True, "check": False, "limit": 3}
    assert _Options(**values).mode == "fast"
    assert option_values(_parse(["run"]), _Options) == {
        "mode": "exact",
        "force": False,
        "check": True,
        "limit": None,
    }
    with pytest.raises(UsageError, match="invalid choice"):
        _parse(["run", "--mode", "slow"])


def test_a_new_pass_option_is_a_new_flag() -> None:
    from modelprov.onnx.functions._functionize import FunctionizePass

    @dataclasses.dataclass(frozen=True, kw_only=True)
    class _Extended(FunctionizePass):
        depth: int = dataclasses.field(default=2, metadata={"help": "how deep"})

    args = _parse(["run", "--level", "module", "--depth", "5"], _Extended)
    assert option_values(args, _Extended) == {"level": "module", "depth": 5}


def test_a_flag_without_help_is_refused() -> None:
    @dataclasses.dataclass(frozen=True)
    class _Bare:
        verbose: bool = False

    with pytest.raises(TypeError, match="_Bare.verbose"):
        option_arguments(_Bare)


def test_the_pass_backed_commands_derive_their_flags() -> None:
    from modelprov.cli import build_parser

    parser = build_parser(complete=True)
    args = parser.parse_args(["functionize", "m.onnx", "-o", "f.onnx", "--level", "module"])
    assert args.level == "module"
    args = parser.parse_args(["recover", "a.onnx", "b.onnx", "-o", "c.onnx", "--force"])
    assert args.force is True
    args = parser.parse_args(["optimize", "m.onnx", "-o", "o.onnx"])
    assert not hasattr(args, "per_pass")  # chosen by --report, not a flag


def test_a_command_imports_only_the_options_it_uses() -> None:
    code = (
        "import sys; from modelprov.cli import build_parser; "
        "build_parser().parse_args(['audit', 'm.onnx']); "
        "print(sorted(m for m in sys.modules if m.startswith('modelprov.onnx._')))"
    )
    output = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True
    ).stdout
    assert "_optimize" not in output and "_functionize" not in output, output


def test_the_readme_synopsis_lists_every_flag_of_every_command() -> None:
    import pathlib
    import re

    import modelprov
    from modelprov._cli._commands import COMMANDS
    from modelprov.cli import build_parser

    # the checkout's root: two folders above the package (wherever this test lives in it)
    readme = pathlib.Path(modelprov.__file__).resolve().parents[2] / "README.md"
    synopsis = readme.read_text(encoding="utf-8").split("## Command line", 1)[1].split("```")[1]
    lines = {line.split()[1]: line for line in synopsis.strip().splitlines()}
    parser = build_parser(complete=True)
    subparsers = next(
        action for action in parser._actions if isinstance(action, argparse._SubParsersAction)
    )
    for command in COMMANDS:
        for action in subparsers.choices[command.name]._actions:
            if action.option_strings and action.dest != "help":
                assert any(
                    re.search(rf"(?<![\w-]){flag}(?![\w-])", lines[command.name])
                    for flag in action.option_strings
                ), (command.name, action.option_strings)


def test_errors_name_the_flag_that_gives_a_keyword() -> None:
    from modelprov._cli._spec import argument, command_line_keywords
    from modelprov.errors import UsageError, keyword

    command = Command(
        "run",
        "run it",
        lambda args: 0,
        (
            argument("--ranges", metavar="FILE.json"),
            argument("--annotations", metavar="FILE.json"),
            argument("--calibrate", metavar="N", keywords=("annotations",)),
            argument("--force", action="store_true"),
        ),
        keywords={"rules": "a rules file"},
    )
    args = argparse.Namespace(ranges="r.json", annotations=None, calibrate=None, force=False)
    flags = command_line_keywords(command, args)
    # the value given, else the metavar; a declared keyword wins over a flag's own name
    assert flags == {
        "annotations": "--calibrate N",
        "ranges": "--ranges r.json",
        "force": "--force",
        "rules": "a rules file",
    }
    error = UsageError(
        f"{keyword('ranges', 'ranges[0]', command_line_suffix=', key 0')} is bad; pass "
        f"{keyword('force', 'force=True')} or {keyword('trace_options')}"
    )
    assert str(error) == "ranges[0] is bad; pass force=True or trace_options="
    assert error.said_with(flags) == "--ranges r.json, key 0 is bad; pass --force or trace_options="
