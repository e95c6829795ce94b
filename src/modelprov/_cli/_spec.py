"""The command line declared as data: commands, their arguments, and flags derived from options.

A :class:`Command` lists its arguments as :class:`Argument` (one ``add_argument`` call),
:class:`Exclusive` (a mutually exclusive group) and :class:`OptionsOf` (the flags of an
options dataclass, e.g. a pass: each ``init`` field of a type a command line can give
becomes ``--field-name``). :func:`add_commands` turns a table of commands into argparse
subcommands; a command's :class:`OptionsOf` classes are imported only when that command is
parsed or its help is shown, so ``modelprov audit`` imports no optimizer.

Deriving a flag from a field (``option_arguments``):

- ``bool``: ``store_true`` when the default is False, else ``--x/--no-x``
  (``argparse.BooleanOptionalAction``);
- ``Literal["a", "b"]``: ``choices``; ``int``, ``float``, ``str`` (or ``X | None``): ``type``;
- anything else (rewrite rules, trace options) stays Python-only; ``policies`` is the
  ``--policies FILE.json`` argument every merging command lists (``_cli_commands``);
- ``field(metadata={"help": ...})`` gives the help (required for a flag), ``"metavar"``
  optionally its metavar, ``"cli": False`` keeps a field off the command line.

Errors name flags: a message names API keywords with ``errors.keyword``; a flag gives the
keyword of its ``dest`` or those of ``Argument.keywords``, and ``Command.keywords`` spells
the rest, so :func:`command_line_keywords` tells the command line how to say each one.
"""

from __future__ import annotations

import argparse
import dataclasses
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from modelprov.errors import UsageError

__all__ = [
    "Argument",
    "ArgumentParser",
    "Command",
    "Exclusive",
    "OptionsOf",
    "add_commands",
    "argument",
    "command_line_keywords",
    "option_arguments",
    "option_values",
]


class ArgumentParser(argparse.ArgumentParser):
    """argparse with one-line errors, ``modelprov: error: optimize: ...`` (the prefix is the
    command line's, once), and exit code 2."""

    def error(self, message: str) -> Any:  # type: ignore[override]
        _, _, command = self.prog.partition(" ")
        where = f"{command}: " if command else ""
        raise UsageError(f"{where}{message} (see {self.prog} --help)")


@dataclasses.dataclass(frozen=True)
class Argument:
    """One ``add_argument(*flags, **options)`` call.

    ``keywords`` are the API keywords the flag gives when they are not its ``dest``
    (``--calibrate-from`` gives ``calibration_batches``): an error naming such a keyword
    (``errors.keyword``) names the flag on the command line.
    """

    flags: tuple[str, ...]
    options: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    keywords: tuple[str, ...] = ()

    @property
    def dest(self) -> str:
        """The argparse destination: ``dest=``, else the first long flag, else the name."""
        if "dest" in self.options:
            return str(self.options["dest"])
        long = [flag for flag in self.flags if flag.startswith("--")]
        return (long[0] if long else self.flags[0]).lstrip("-").replace("-", "_")


def argument(*flags: str, keywords: Sequence[str] = (), **options: Any) -> Argument:
    """An :class:`Argument`, written like the ``add_argument`` call it stands for."""
    return Argument(flags, options, tuple(keywords))


@dataclasses.dataclass(frozen=True)
class Exclusive:
    """Arguments of which at most one may be given."""

    arguments: tuple[Argument, ...]


@dataclasses.dataclass(frozen=True)
class OptionsOf:
    """The flags derived from an options dataclass's fields (see :func:`option_arguments`).

    ``load`` returns the class (importing it late); ``skip`` names fields the command sets
    itself (e.g. ``per_pass``, chosen by ``optimize --report``).
    """

    load: Callable[[], type]
    skip: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class Command:
    """One subcommand: its name, one-line help, handler and arguments in help order."""

    name: str
    help: str
    handler: Callable[[argparse.Namespace], int]
    arguments: tuple[Argument | Exclusive | OptionsOf, ...] = ()
    description: str | None = None
    keywords: Mapping[str, str] = dataclasses.field(default_factory=dict)
    """How the command's errors name API keywords no flag of its own gives (e.g. quantize:
    ``annotations`` is ``modelprov export --calibrate N``)."""


def option_arguments(options: type, skip: Sequence[str] = ()) -> list[Argument]:
    """The flags of the fields of the dataclass ``options`` a command line can give.

    Raises TypeError for such a field without ``metadata={"help": ...}`` (the test suite
    builds every command, so a pass option added without help fails there).
    """
    hints = typing.get_type_hints(options)
    found: list[Argument] = []
    for field in dataclasses.fields(options):
        if not field.init or field.name in skip or field.metadata.get("cli", True) is False:
            continue
        kind = _argparse_kind(hints[field.name], field.default)
        if kind is None:
            continue
        help_text = field.metadata.get("help")
        if not help_text:
            raise TypeError(
                f"{options.__name__}.{field.name}: give the field metadata={{'help': ...}} "
                "(its command-line flag's help) or metadata={'cli': False}"
            )
        if "metavar" in field.metadata:
            kind["metavar"] = field.metadata["metavar"]
        flag = "--" + field.name.replace("_", "-")
        found.append(Argument((flag,), {**kind, "dest": field.name, "help": help_text}))
    return found


def option_values(
    args: argparse.Namespace, options: type, skip: Sequence[str] = ()
) -> dict[str, Any]:
    """The parsed values of ``options``' flags, by field name (for ``options(**values)``)."""
    return {
        argument.options["dest"]: getattr(args, argument.options["dest"])
        for argument in option_arguments(options, skip)
    }


_SCALARS: tuple[type, ...] = (int, float, str)


def _argparse_kind(hint: Any, default: Any) -> dict[str, Any] | None:
    """``add_argument`` options for a field type, or None when no flag can give it."""
    has_default = default is not dataclasses.MISSING
    base = {"default": default} if has_default else {"required": True}
    if hint is bool:
        if has_default and default is False:
            return {"action": "store_true"}
        return {**base, "action": argparse.BooleanOptionalAction}
    origin, members = typing.get_origin(hint), typing.get_args(hint)
    if origin is typing.Literal and members and all(isinstance(m, str) for m in members):
        return {**base, "choices": members}
    if origin in (typing.Union, types.UnionType):
        present = [member for member in members if member is not type(None)]
        if len(present) == 1 and present[0] in _SCALARS and len(members) == 2:
            return {**base, "type": present[0]}
        return None
    if hint in _SCALARS:
        return {**base, "type": hint}
    return None


class _CommandParser(ArgumentParser):
    """A subcommand's parser whose arguments are added when it is first used."""

    def __init__(self, *args: Any, command: Command | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._pending = command

    def complete(self) -> None:
        """Adds the command's arguments (once)."""
        command, self._pending = self._pending, None
        if command is None:
            return
        for item in command.arguments:
            if isinstance(item, Argument):
                self.add_argument(*item.flags, **item.options)
            elif isinstance(item, Exclusive):
                group = self.add_mutually_exclusive_group()
                for member in item.arguments:
                    group.add_argument(*member.flags, **member.options)
            else:
                for derived in option_arguments(item.load(), item.skip):
                    self.add_argument(*derived.flags, **derived.options)
        self.set_defaults(run=command.handler)

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        self.complete()
        return super().parse_known_args(args, namespace)

    def format_usage(self) -> str:
        self.complete()
        return super().format_usage()

    def format_help(self) -> str:
        self.complete()
        return super().format_help()


def command_line_keywords(command: Command, args: argparse.Namespace) -> dict[str, str]:
    """How ``command``'s errors name API keywords: each keyword its flags give, as the
    flag and the value given (``--ranges r.json``) or its metavar (``--calibrate N``)."""
    flags: list[Argument] = []
    for item in command.arguments:
        if isinstance(item, OptionsOf):
            flags += option_arguments(item.load(), item.skip)
        else:
            members = item.arguments if isinstance(item, Exclusive) else (item,)
            flags += [member for member in members if member.flags[0].startswith("-")]
    spelled = dict(command.keywords)
    # A flag declared to give a keyword wins over a flag that merely has its name.
    for member in sorted(flags, key=lambda member: not member.keywords):
        phrase = _phrase(member, getattr(args, member.dest, None))
        for name in member.keywords or (member.dest,):
            spelled.setdefault(name, phrase)
    return spelled


def _phrase(member: Argument, value: Any) -> str:
    flag = next((flag for flag in member.flags if flag.startswith("--")), member.flags[0])
    if member.options.get("action") in ("store_true", argparse.BooleanOptionalAction):
        return flag
    if isinstance(value, str):
        return f"{flag} {value}"
    metavar = member.options.get("metavar") or member.dest.upper()
    return f"{flag} {metavar}" + (" ..." if member.options.get("nargs") in ("+", "*") else "")


def add_commands(
    parser: argparse.ArgumentParser, commands: Sequence[Command], *, complete: bool = False
) -> None:
    """Adds ``commands`` as the subcommands of ``parser`` (``args.command``, ``args.run``).

    With ``complete`` every command's arguments are added at once (to list them all).
    """
    subparsers = parser.add_subparsers(
        dest="command", required=True, metavar="COMMAND", parser_class=_CommandParser
    )
    for command in commands:
        sub = subparsers.add_parser(
            command.name, help=command.help, description=command.description, command=command
        )
        if complete:
            sub.complete()


def whole_number_at_least_one(text: str, *, hint: str = "positive") -> int:
    """A flag's value as an int >= 1; argparse reports anything else, saying ``hint``."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is not {hint}; give 1 or more")
    return value
