"""Globs indexed by their literal prefix: which glob decides a key, in time linear in the
globs that could match it.

``fnmatch.fnmatchcase`` compiles each pattern into a regex and keeps 32,768 of them; a
policies file with more globs than that recompiles every glob for every key. Here a key
is tried only against the globs whose literal prefix (the text before the first ``*``,
``?`` or ``[``) it starts with, or, for globs starting with a wildcard, whose literal
suffix it ends with; each is compiled once, when first tried, and a glob that is its prefix
plus one trailing ``*`` needs no regex at all. Only globs with neither (``*a*``) are tried
for every key.
"""

from __future__ import annotations

import bisect
import dataclasses
import fnmatch
import re
from collections.abc import Callable, Iterable

__all__ = ["GlobIndex", "is_glob", "specificity"]

_WILDCARD = re.compile(r"[*?\[]")
_LAST_SPECIAL = re.compile(r"[*?\[\]][^*?\[\]]*\Z")


def is_glob(key: str) -> bool:
    """True when ``key`` holds a wildcard (``*``, ``?`` or ``[``)."""
    return _WILDCARD.search(key) is not None


def specificity(pattern: str) -> int:
    """The number of literal characters of a glob: the more, the more specific."""
    return len(pattern) - sum(pattern.count(char) for char in "*?[]")


def _literal_suffix(pattern: str) -> str:
    """Text after the last ``*``, ``?``, ``[`` or ``]``: a key the glob matches ends with it
    (a literal ``]`` only makes it shorter)."""
    found = _LAST_SPECIAL.search(pattern)
    return pattern[found.start() + 1 :] if found is not None else pattern


@dataclasses.dataclass
class _Glob:
    pattern: str
    rank: tuple[int, int]
    """(specificity, order): the higher decides (a later glob wins a tie)."""
    prefix_only: bool
    """The pattern is its literal prefix plus one ``*``: every key of its bucket matches."""
    matcher: Callable[[str], object] | None = None

    def matches(self, key: str) -> bool:
        if self.prefix_only:
            return True
        if self.matcher is None:
            self.matcher = re.compile(fnmatch.translate(self.pattern)).match
        return self.matcher(key) is not None


class _Buckets:
    """Globs by a literal text (prefix or suffix); a bucket's globs are ranked and made
    into matchers only when a key first reaches it (most are never reached)."""

    __slots__ = ("_ranked", "_raw", "lengths")

    def __init__(self) -> None:
        self._raw: dict[str, list[tuple[int, str]]] = {}
        self._ranked: dict[str, list[_Glob]] = {}
        self.lengths: list[int] = []

    def add(self, text: str, order: int, pattern: str) -> None:
        self._raw.setdefault(text, []).append((order, pattern))

    def freeze(self) -> None:
        self.lengths = sorted({len(text) for text in self._raw})

    def get(self, text: str) -> list[_Glob] | None:
        ranked = self._ranked.get(text)
        if ranked is None:
            raw = self._raw.get(text)
            if raw is None:
                return None
            ranked = sorted(
                (
                    _Glob(pattern, (specificity(pattern), order), pattern == text + "*")
                    for order, pattern in raw
                ),
                key=lambda glob: glob.rank,
                reverse=True,
            )
            self._ranked[text] = ranked
        return ranked


class GlobIndex:
    """The globs of a Policies mapping, for :meth:`best`: the most specific glob matching a
    key (the latest among equally specific ones), as ``fnmatch.fnmatchcase`` decides.
    ``patterns`` may hold exact keys too; they are skipped."""

    __slots__ = ("_prefixes", "_suffixes")

    def __init__(self, patterns: Iterable[str]) -> None:
        self._prefixes = _Buckets()
        self._suffixes = _Buckets()
        for order, pattern in enumerate(patterns):
            wildcard = _WILDCARD.search(pattern)
            if wildcard is None:  # an exact key: not this index's
                continue
            prefix = pattern[: wildcard.start()]
            suffix = _literal_suffix(pattern) if not prefix else ""
            if suffix:  # "*.max": indexed by what keys end with
                self._suffixes.add(suffix, order, pattern)
            else:  # by the prefix ("" holds the globs with neither, tried for every key)
                self._prefixes.add(prefix, order, pattern)
        self._prefixes.freeze()
        self._suffixes.freeze()

    def best(self, key: str) -> str | None:
        """The deciding glob for ``key``, or None when no glob matches it."""
        best: _Glob | None = None
        lengths = self._prefixes.lengths
        for length in lengths[: bisect.bisect_right(lengths, len(key))]:
            best = _best_of(self._prefixes.get(key[:length]), key, best)
        lengths = self._suffixes.lengths
        for length in lengths[: bisect.bisect_right(lengths, len(key))]:
            best = _best_of(self._suffixes.get(key[len(key) - length :]), key, best)
        return best.pattern if best is not None else None


def _best_of(bucket: list[_Glob] | None, key: str, best: _Glob | None) -> _Glob | None:
    """``best``, or the bucket's best glob matching ``key`` when that ranks higher."""
    for glob in bucket or ():  # best rank first: the first match is the bucket's best
        if best is not None and glob.rank <= best.rank:
            break
        if glob.matches(key):
            return glob
    return best
