"""Printable names: controls, bidi controls and lone surrogates escaped, everything else kept."""

from __future__ import annotations

import json
import unicodedata

from hypothesis import given
from hypothesis import strategies as st

from modelprov.core._printable import printable, printable_json, printable_lines

_BIDI = "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"


def _unsafe(char: str) -> bool:
    return unicodedata.category(char) in ("Cc", "Cs", "Zl", "Zp") or char in _BIDI


@given(st.text(alphabet=st.characters(exclude_categories=())))
def test_no_unsafe_character_is_left_and_safe_text_is_kept(text: str) -> None:
    shown = printable(text)
    assert not any(_unsafe(char) for char in shown)
    if not any(_unsafe(char) for char in text):
        assert shown == text
    for indent in (None, 2):
        document = printable_json({"name": [text]}, indent=indent)
        assert json.loads(document) == {"name": [text]}
        assert not any(_unsafe(char) for char in document.replace("\n", ""))


def test_escapes_are_visible() -> None:
    assert printable("a\x1b]0;owned\x07b") == "a\\x1b]0;owned\\x07b"
    assert printable("x\u202eyz\x9b2K") == "x\\u202eyz\\x9b2K"
    assert printable("é 名前 \u05d0") == "é 名前 \u05d0"  # letters of any script stay
    assert printable_lines(["one\nname", "two"]) == "one\\x0aname\ntwo"
