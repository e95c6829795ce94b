"""The header of modelprov's versioned JSON documents (``{"format": ..., "version": N}``):
read in one place, so every reader applies the same rule (a JSON object, the format's name,
a version that is an int, not a bool or a float, among the versions it reads). Each reader
still words its own error, naming its file, key or node."""

from __future__ import annotations

import dataclasses
from collections.abc import Container, Mapping
from typing import Any, Literal

__all__ = ["HeaderProblem", "header_problem"]


@dataclasses.dataclass(frozen=True)
class HeaderProblem:
    """What is wrong with a document's header: it is no JSON object (``field="document"``),
    names another format, or has another version; ``found`` is what it holds instead."""

    field: Literal["document", "format", "version"]
    found: Any


def header_problem(
    document: object, *, format: str | None, versions: Container[int]
) -> HeaderProblem | None:
    """None when ``document`` is a JSON object (a Mapping) whose ``format`` is ``format``
    (not checked when None: a record without one) and whose ``version`` is an int in
    ``versions``."""
    if not isinstance(document, Mapping):
        return HeaderProblem("document", document)
    if format is not None and document.get("format") != format:
        return HeaderProblem("format", document.get("format"))
    version = document.get("version")
    if type(version) is not int or version not in versions:
        return HeaderProblem("version", version)
    return None
