"""One header rule for every versioned document: an object, its format, an int version."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from modelprov._base._versioned import HeaderProblem, header_problem

_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=6,
)


def test_the_header_rule() -> None:
    ok = {"format": "modelprov.x", "version": 1, "rest": []}
    assert header_problem(ok, format="modelprov.x", versions=(1,)) is None
    assert header_problem(ok, format=None, versions=(1, 2)) is None
    assert header_problem([ok], format="modelprov.x", versions=(1,)) == HeaderProblem(
        "document", [ok]
    )
    assert header_problem({**ok, "format": "other"}, format="modelprov.x", versions=(1,)) == (
        HeaderProblem("format", "other")
    )
    for version in (True, 1.0, "1", None, 2):
        found = header_problem({**ok, "version": version}, format="modelprov.x", versions=(1,))
        assert found == HeaderProblem("version", version)


@given(_JSON)
def test_anything_but_a_good_header_is_one_problem(document: object) -> None:
    problem = header_problem(document, format="modelprov.x", versions=(1,))
    good = (
        isinstance(document, dict)
        and document.get("format") == "modelprov.x"
        and type(document.get("version")) is int
        and document.get("version") == 1
    )
    assert (problem is None) == good
