"""The pre-parse scan of MLIR text: nesting through aliases, strings, comments, arrows."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from modelprov.errors import StableHLOError
from modelprov.stablehlo.untrusted._mlir_limits import MAX_NESTING, check_mlir_text, nesting

_PAIRS = (("(", ")"), ("[", "]"), ("{", "}"), ("<", ">"))


@st.composite
def _nested(draw: st.DrawFn, depth: int = 6) -> tuple[str, int]:
    """Bracketed text with strings, comments and arrows mixed in, and its true depth."""
    if depth == 0 or draw(st.booleans()):
        noise = draw(st.sampled_from(["x", '"a)]}>"', "-> y", "%0 >= 1", '"\\"("', "1"]))
        return noise, 0
    opener, closer = draw(st.sampled_from(_PAIRS))
    parts = draw(st.lists(_nested(depth - 1), min_size=1, max_size=3))
    comment = "// ((((( unclosed\n" if draw(st.booleans()) else ""
    body = ", ".join(text for text, _ in parts)
    return f"{opener}{comment}{body}{closer}", 1 + max(level for _, level in parts)


@given(_nested())
def test_nesting_counts_brackets_outside_strings_and_comments(case: tuple[str, int]) -> None:
    text, depth = case
    assert nesting(text) == depth


@given(st.integers(1, 60), st.integers(0, 3), st.booleans())
def test_nesting_follows_alias_chains_in_any_order(links: int, level: int, reverse: bool) -> None:
    lines = [f'#a{i} = loc("f"(#a{i - 1}))' for i in range(1, links)] + ['#a0 = loc("x")']
    if reverse:
        lines.reverse()
    use = "(" * level + f"loc(#a{links - 1})" + ")" * level
    text = f'"builtin.module"() ({{\n  %0 = t.op {use}\n}})\n' + "\n".join(lines) + "\n"
    # loc( and "f"( per link, loc( for the last, the brackets around the use, module's ({.
    assert nesting(text) == 2 * (links - 1) + 1 + (level + 1) + 2
    if not reverse:  # aliases first, then the module (generic form starts with a string)
        assert nesting("\n".join(lines[::-1]) + "\n" + text.split("\n#")[0]) == nesting(text)


def test_limits_are_refused_with_what_to_do() -> None:
    deep = "module attributes {t.a = " + "[" * (MAX_NESTING + 1) + "]" * (MAX_NESTING + 1) + "}"
    with pytest.raises(StableHLOError, match=r"^x\.mlir nests 1,002 levels deep"):
        check_mlir_text(deep, "x.mlir")
    with pytest.raises(StableHLOError, match="the alias #a refers to itself .through 1 "):
        check_mlir_text('#a = loc("f"(#a))\n', "x.mlir")
    with pytest.raises(StableHLOError, match="the alias #a refers to itself .through 2 "):
        check_mlir_text('#a = loc("f"(#b))\n#b = loc("g"(#a))\nmodule {}', "x.mlir")
    with pytest.raises(StableHLOError, match=r'line 2: the string "\\C3\\28"'):
        check_mlir_text('module {\n "\\C3\\28" }', "x.mlir")
    check_mlir_text('module {\n "caf\\C3\\A9 \\\\FF \\"" }', "x.mlir")  # é, then text \\FF
    with pytest.raises(StableHLOError, match=r'"\\"\\FF"'):
        check_mlir_text('module {\n "\\"\\FF" }', "x.mlir")
