"""Globs indexed by their literal prefix: which glob decides a key, in time linear in the
globs that could match it.

``fnmatch.fnmatchcase`` compiles each pattern into a regex and keeps 32,768 of them; a
policies file with more globs than that recompiles every glob for every key. Here a key
is tried only against the globs whose literal prefix (the text before the first ``*``,
``?`` or ``[``) it starts with, each compiled once, when first tried; a glob that is its
prefix plus one trailing ``*`` needs no regex at all.
"""

from __future__ import annotations

import bisect
import dataclasses
import fnmatch
import re
from collections.abc import Callable, Iterable

__all__ = ["GlobIndex", "is_glob", "specificity"]

_WILDCARDS = "*?["


def is_glob(key: str) -> bool:
    """True when ``key`` holds a wildcard (``*``, ``?`` or ``[``)."""
    return any(char in key for char in _WILDCARDS)


def specificity(pattern: str) -> int:
    """The number of literal characters of a glob: the more, the more specific."""
    return sum(1 for char in pattern if char not in "*?[]")


def _literal_prefix(pattern: str) -> str:
    cut = min((i for i in (pattern.find(c) for c in _WILDCARDS) if i >= 0), default=len(pattern))
    return pattern[:cut]


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


class GlobIndex:
    """The globs of a Policies mapping, for :meth:`best`: the most specific glob matching a
    key (the latest among equally specific ones), as ``fnmatch.fnmatchcase`` decides."""

    __slots__ = ("_buckets", "_lengths")

    def __init__(self, patterns: Iterable[str]) -> None:
        buckets: dict[str, list[_Glob]] = {}
        for order, pattern in enumerate(patterns):
            prefix = _literal_prefix(pattern)
            glob = _Glob(pattern, (specificity(pattern), order), pattern == prefix + "*")
            buckets.setdefault(prefix, []).append(glob)
        for bucket in buckets.values():
            bucket.sort(key=lambda glob: glob.rank, reverse=True)
        self._buckets = buckets
        self._lengths = sorted({len(prefix) for prefix in buckets})

    def best(self, key: str) -> str | None:
        """The deciding glob for ``key``, or None when no glob matches it."""
        best: _Glob | None = None
        buckets = self._buckets
        for length in self._lengths[: bisect.bisect_right(self._lengths, len(key))]:
            bucket = buckets.get(key[:length])
            if bucket is None:
                continue
            for glob in bucket:  # best rank first: the first match is the bucket's best
                if best is not None and glob.rank <= best.rank:
                    break
                if glob.matches(key):
                    best = glob
                    break
        return best.pattern if best is not None else None
