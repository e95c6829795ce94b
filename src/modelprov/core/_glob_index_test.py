"""GlobIndex decides exactly what a scan of every glob with fnmatchcase decides."""

from __future__ import annotations

import fnmatch

from hypothesis import given, settings
from hypothesis import strategies as st

from modelprov.core._glob_index import GlobIndex, is_glob, specificity


def _scan(patterns: list[str], key: str) -> str | None:
    """The reference: every glob tried, the most specific (then the latest) wins."""
    best: tuple[int, int, str] | None = None
    for order, pattern in enumerate(patterns):
        if is_glob(pattern) and fnmatch.fnmatchcase(key, pattern):
            rank = (specificity(pattern), order, pattern)
            if best is None or rank[:2] > best[:2]:
                best = rank
    return best[2] if best is not None else None


_TEXT = st.text(alphabet="ab.*?[]!-", max_size=7)


@settings(max_examples=400, deadline=None)
@given(st.lists(_TEXT, max_size=12), st.lists(st.text(alphabet="ab.[]!-", max_size=6), max_size=8))
def test_best_is_the_scan(patterns: list[str], keys: list[str]) -> None:
    index = GlobIndex(pattern for pattern in patterns if is_glob(pattern))
    for key in keys:
        assert index.best(key) == _scan(patterns, key), (patterns, key)


def test_many_globs_try_only_their_prefix() -> None:
    globs = [f"team{i}.*" for i in range(50_000)] + ["team7.x*y"]
    index = GlobIndex(globs)
    assert index.best("team7.xay") == "team7.x*y"
    assert index.best("team7.other") == "team7.*"
    assert index.best("team49999.k") == "team49999.*"
    assert index.best("custom.max") is None
    ranked = index._prefixes._ranked
    compiled = sum(g.matcher is not None for bucket in ranked.values() for g in bucket)
    assert compiled == 1  # only the one glob that is more than a prefix and a star


def test_globs_starting_with_a_wildcard_try_only_their_suffix() -> None:
    index = GlobIndex([f"*.stat{i}" for i in range(50_000)] + ["*x*"])
    assert index.best("custom.stat123") == "*.stat123"
    assert index.best("a.x.b") == "*x*"
    assert index.best("custom.min") is None
    ranked = index._suffixes._ranked
    tried = [g for b in ranked.values() for g in b if g.matcher is not None]
    assert [g.pattern for g in tried] == ["*.stat123"]
