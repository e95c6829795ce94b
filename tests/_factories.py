"""Model factories for ``modelprov export MODULE:FACTORY`` in the command-line tests."""

from __future__ import annotations

from typing import Any


def mlp() -> tuple[Any, ...]:
    """Seed 003's MLP and its example input."""
    from modelprov import _examples

    return _examples.mlp()


def double_transpose() -> tuple[Any, ...]:
    """The double-transpose module of seed 000."""
    from modelprov import _examples

    return _examples.double_transpose()


def not_a_model() -> tuple[Any, ...]:
    """Returns something that is not a model, to test the error."""
    return ("model", ())


def raises() -> tuple[Any, ...]:
    """A factory that fails, to test that the command line reports it in one line."""
    raise ValueError("no weights here")
