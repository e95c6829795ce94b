"""Provenance state of a node: exact, merged, recovered or none."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final, Literal

from modelprov.core._sources import Source
from modelprov.keys import CONFIDENCE_KEY

__all__ = ["CONFIDENCE_KEY", "STATES", "STATE_COLORS", "State", "known_sources", "node_state"]

State = Literal["exact", "merged", "recovered", "none"]

STATES: Final[tuple[State, ...]] = ("exact", "merged", "recovered", "none")


STATE_COLORS: Final[Mapping[State, str]] = {
    "exact": "#2f9e5b",
    "merged": "#3b6fd4",
    "recovered": "#d98c1a",
    "none": "#cf3c35",
}
"""One colour per state, shared by the HTML report and the Model Explorer overlay."""


def known_sources(sources: Sequence[Source]) -> list[Source]:
    """Sources that say something: a node without any metadata stands for itself with an
    empty source (``node:<name>``), which is no provenance at all."""
    return [source for source in sources if source.metadata]


def node_state(metadata: Mapping[str, str], sources: Sequence[Source]) -> State:
    """The state of a node from its metadata and its sources.

    recovered: ``modelprov.recover`` attributed it by names or structure (its
    ``modelprov.confidence`` is ``named`` or ``inferred``; a node recover found unchanged,
    ``exact``, is shown like any other); none: no source with any metadata; merged: several
    sources; exact: one source, unchanged.
    """
    if metadata.get(CONFIDENCE_KEY) in ("named", "inferred"):
        return "recovered"
    known = known_sources(sources)
    if not known:
        return "none"
    return "merged" if len(known) > 1 else "exact"
