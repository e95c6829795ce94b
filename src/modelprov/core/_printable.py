"""Names from a model, made safe to print: no terminal escapes, no reordered text.

Node, value, key and file names come from untrusted models. Printed raw, a name with ESC or
C1 control characters can set a terminal's title, clear lines or move the cursor, and one
with a bidirectional override (U+202E) reverses the text printed after it. Every text
output (``to_text`` reports, the command line's summary, status and error lines, printed
policies) passes its lines through :func:`printable`, which shows such characters as
visible escapes (``\\x1b``, ``\\u202e``). JSON output escapes them the JSON way
(:func:`printable_json`), which readers decode back to the same strings.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

__all__ = ["printable", "printable_json", "printable_json_text", "printable_lines"]

# C0 and C1 controls and DEL; bidi marks, embeddings, overrides and isolates (U+061C,
# U+200E-F, U+202A-E, U+2066-9); line and paragraph separators; lone surrogates.
_UNSAFE = re.compile(
    "[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069\ud800-\udfff]"
)
# The same but C0 controls: JSON text holds them only as layout (its strings escape them).
_UNSAFE_IN_JSON = re.compile("[\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069\ud800-\udfff]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str) -> str:
    """``text`` with control characters, bidi controls and lone surrogates escaped."""
    return _UNSAFE.sub(_escape, text)


def printable_lines(lines: Iterable[str]) -> str:
    """The lines, each :func:`printable`, joined by newlines (the only line breaks left)."""
    return "\n".join(printable(line) for line in lines)


def printable_json_text(text: str) -> str:
    """JSON text (as ``json.dumps`` writes it) with the characters :func:`printable` escapes
    written as ``\\uXXXX``: the same JSON, safe on a terminal."""
    return _UNSAFE_IN_JSON.sub(lambda match: f"\\u{ord(match.group()):04x}", text)


def printable_json(value: Any, **options: Any) -> str:
    """``json.dumps(value, ensure_ascii=False, **options)``, :func:`printable_json_text`."""
    return printable_json_text(json.dumps(value, ensure_ascii=False, **options))
