"""Property tests: the policies' laws and the parsers of modelprov's formats.

The default suite runs each property on 100 examples; ``pytest -m slow
tests/test_laws.py`` (or ``MODELPROV_HYPOTHESIS=thorough pytest tests/test_laws.py``) runs
each on 10,000.
"""

from __future__ import annotations

import base64
import json
import os
import zlib
from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from modelprov.core import _builtin_policies, _stack_trace
from modelprov.core import _policy as policy
from modelprov.core._policy import MergeContext
from modelprov.core._sources import Source, SourceTable
from modelprov.errors import MetadataError, PolicyError
from tests._thorough import passing_counts

THOROUGH_EXAMPLES = 10_000
_COMMON = {"deadline": None, "suppress_health_check": [HealthCheck.too_slow], "derandomize": True}
settings.register_profile("modelprov-ci", max_examples=100, **_COMMON)
settings.register_profile("modelprov-thorough", max_examples=THOROUGH_EXAMPLES, **_COMMON)
_PROFILE = f"modelprov-{os.environ.get('MODELPROV_HYPOTHESIS', 'ci')}"
settings.load_profile(_PROFILE)

CTX = MergeContext("k", "n")

# Text that looks like what modelprov reads: frames, modelprov's own header lines, JSON
# arrays, separators, blank lines, non-ASCII.
_PIECES = st.sampled_from(
    [
        'File "/m.py", line 3, in f',
        '  File "/b.py", line 12, in forward',
        "    k = k.transpose(1, 2)",
        "[modelprov: 2 stack traces; 0 shared lines]",
        "[modelprov: 3 stack traces; 1 shared lines]",
        "[modelprov: trace 1 of 2]",
        "[modelprov: trace 2 of 2]",
        "\\[modelprov: trace 1 of 2]",
        "[modelprov: 1 of 2 stack traces elided to fit 300 bytes; x]",
        "[]",
        '["a"]',
        '["a", "b"]',
        ", ",
        "",
        "x",
        "é",
    ]
)
_LINES = st.lists(st.one_of(_PIECES, st.text(max_size=8)), max_size=6).map("\n".join)
_VALUE = st.one_of(_LINES, st.text(max_size=12)).filter(bool)
_VALUES = st.lists(_VALUE, min_size=1, max_size=5)


def _flatten_traces(values: list[str]) -> list[str]:
    distinct: list[str] = []
    for value in values:
        for trace in _stack_trace.split_merged_traces(value):
            if trace not in distinct:
                distinct.append(trace)
    return distinct


# --- union ---------------------------------------------------------------------------------


def _atoms(values: list[str]) -> set[str]:
    return {atom for value in values for atom in _builtin_policies._union_elements(value)}


@given(_VALUES)
def test_union_is_lossless(values: list[str]) -> None:
    merged = policy.union(values, CTX)
    assert merged is not None
    assert _atoms([merged]) == _atoms(values)
    if len(set(values)) == 1:
        assert merged == values[0]


@given(_VALUES, _VALUES)
def test_union_is_order_independent_associative_idempotent(a: list[str], b: list[str]) -> None:
    whole = policy.union(a + b, CTX)
    assert policy.union(list(reversed(b + a)), CTX) == whole
    parts = [policy.union(a, CTX), policy.union(b, CTX)]
    assert policy.union([p for p in parts if p], CTX) == whole
    assert policy.union([whole] if whole else [], CTX) == whole


# --- join ----------------------------------------------------------------------------------


@given(_VALUE, st.sampled_from(["\n", ", "]))
def test_join_returns_a_single_value_unchanged(value: str, sep: str) -> None:
    assert policy.join(sep)([value], CTX) == value


@given(_VALUES, st.sampled_from(["\n", ", "]))
def test_join_is_idempotent_and_keeps_every_piece(values: list[str], sep: str) -> None:
    join = policy.join(sep)
    merged = join(values, CTX)
    assert merged is not None
    assert join([merged], CTX) == merged
    assert join(values + values, CTX) == merged
    kept = merged.split(sep)
    for value in values:
        assert all(piece in kept for piece in value.split(sep) if piece)


@given(_VALUES, _VALUES)
def test_join_is_associative_for_values_not_ending_in_the_separator(
    a: list[str], b: list[str]
) -> None:
    join = policy.join("\n")
    a = [v for v in a if not v.endswith("\n")] or ["a"]
    b = [v for v in b if not v.endswith("\n")] or ["b"]
    parts = [join(a, CTX), join(b, CTX)]
    assert join([p for p in parts if p], CTX) == join(a + b, CTX)


# --- stack traces --------------------------------------------------------------------------


@given(_VALUES)
def test_stack_traces_merge_then_parse_round_trips(values: list[str]) -> None:
    merged = policy.stack_traces(values, CTX)
    distinct = _flatten_traces(values)
    if merged is None:
        assert distinct in ([], [""])
        return
    assert _stack_trace.split_merged_traces(merged) == distinct


@given(_VALUES, _VALUES)
def test_stack_traces_associative_idempotent(a: list[str], b: list[str]) -> None:
    whole = policy.stack_traces(a + b, CTX)
    parts = [policy.stack_traces(a, CTX), policy.stack_traces(b, CTX)]
    assert policy.stack_traces([p for p in parts if p], CTX) == whole
    if whole is not None:
        assert policy.stack_traces([whole], CTX) == whole


@given(_LINES.filter(bool))
def test_a_users_trace_that_mimics_modelprov_headers_is_kept_whole(trace: str) -> None:
    merged = policy.stack_traces([trace, 'File "/z.py", line 1, in g\n    y()'], CTX)
    assert merged is not None
    parsed = _stack_trace.split_merged_traces(merged)
    assert parsed[-1] == 'File "/z.py", line 1, in g\n    y()'
    assert "\n".join(parsed[:-1]) and all(t in trace or trace in t for t in parsed[:-1])


# --- common_prefix, min/max ----------------------------------------------------------------


@given(_VALUES)
def test_common_prefix_idempotent_and_order_free_for_two(values: list[str]) -> None:
    merged = policy.common_prefix(values, CTX)
    if merged:
        assert policy.common_prefix([merged], CTX) == merged


@given(st.lists(st.floats(allow_nan=False), min_size=1, max_size=6))
def test_min_max_pick_a_value_as_written(numbers: list[float]) -> None:
    values = [repr(number) for number in numbers]
    assert float(policy.min(values, CTX) or "nan") == min(numbers)
    assert float(policy.max(values, CTX) or "nan") == max(numbers)
    assert policy.max(list(reversed(values)), CTX) in values


@given(st.text(max_size=8))
def test_min_max_accept_only_plain_decimal_numbers(text: str) -> None:
    try:
        result = policy.max([text], CTX)
    except PolicyError:
        return
    assert result == text and "_" not in text and text.strip() == text
    assert float(text) == float(text)  # a number, and not NaN


# --- the sources table ---------------------------------------------------------------------

_METADATA = st.dictionaries(st.text(min_size=1, max_size=6), _VALUE, max_size=4)


@given(st.lists(_METADATA, max_size=6), st.data())
def test_sources_table_round_trips(metadata: list[dict[str, str]], data: st.DataObject) -> None:
    table = SourceTable(Source.from_metadata(f"s{i}", m) for i, m in enumerate(metadata))
    carried = data.draw(st.sets(st.sampled_from([f"s{i}" for i in range(len(metadata))] or ["-"])))
    loaded, order = SourceTable.loads(table.dumps(carried=carried))
    assert order == [f"s{i}" for i in range(len(metadata))]
    kept = [source for source in table if source.id not in carried]
    assert [s.id for s in loaded] == [s.id for s in kept]
    assert [dict(s.metadata) for s in loaded] == [dict(s.metadata) for s in kept]


def _loads_or_metadata_error(text: str) -> None:
    try:
        table, order = SourceTable.loads(text, where="fuzz")
    except MetadataError as error:
        assert "fuzz" in str(error) and "\n" not in str(error)
        return
    assert all(isinstance(source_id, str) for source_id in order)
    assert all(isinstance(v, str) for source in table for v in source.metadata.values())


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | st.floats() | st.text(max_size=5),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)
_TABLE_LIKE = st.fixed_dictionaries(
    {"format": st.just("modelprov.sources"), "version": st.sampled_from([1, 1.0, True, "1", 2])},
    optional={
        "encoding": st.sampled_from(["json", "zlib+base64", "gzip"]),
        "order": st.one_of(_JSON, st.lists(st.text(max_size=3), max_size=3)),
        "strings": st.one_of(_JSON, st.lists(st.text(max_size=3), max_size=4)),
        "sources": st.one_of(
            _JSON,
            st.lists(
                st.fixed_dictionaries(
                    {
                        "id": st.one_of(st.text(max_size=3), _JSON),
                        "metadata": st.lists(st.lists(st.integers(-4, 4), max_size=3), max_size=3),
                    }
                ),
                max_size=3,
            ),
        ),
        "payload": st.one_of(st.text(max_size=8), _JSON),
    },
)


@given(st.one_of(_JSON, _TABLE_LIKE).map(json.dumps))
def test_sources_table_parser_on_fuzzed_json(text: str) -> None:
    _loads_or_metadata_error(text)


@given(st.one_of(_JSON, _TABLE_LIKE).map(lambda d: json.dumps(d).encode()))
def test_sources_table_parser_on_fuzzed_compressed_payloads(body: bytes) -> None:
    payload = base64.b64encode(zlib.compress(body)).decode()
    document = {"format": "modelprov.sources", "version": 1, "encoding": "zlib+base64"}
    _loads_or_metadata_error(json.dumps({**document, "payload": payload}))


@given(st.binary(max_size=64))
def test_sources_table_parser_on_fuzzed_bytes(data: bytes) -> None:
    _loads_or_metadata_error(data.decode("utf-8", "replace"))
    payload = base64.b64encode(data).decode()
    document = {"format": "modelprov.sources", "version": 1, "encoding": "zlib+base64"}
    _loads_or_metadata_error(json.dumps({**document, "payload": payload}))


LAWS: list[Callable[[], None]] = [
    test_union_is_lossless,
    test_union_is_order_independent_associative_idempotent,
    test_join_returns_a_single_value_unchanged,
    test_join_is_idempotent_and_keeps_every_piece,
    test_join_is_associative_for_values_not_ending_in_the_separator,
    test_stack_traces_merge_then_parse_round_trips,
    test_stack_traces_associative_idempotent,
    test_a_users_trace_that_mimics_modelprov_headers_is_kept_whole,
    test_common_prefix_idempotent_and_order_free_for_two,
    test_min_max_pick_a_value_as_written,
    test_min_max_accept_only_plain_decimal_numbers,
    test_sources_table_round_trips,
    test_sources_table_parser_on_fuzzed_json,
    test_sources_table_parser_on_fuzzed_compressed_payloads,
    test_sources_table_parser_on_fuzzed_bytes,
]


@pytest.mark.slow
def test_every_law_on_ten_thousand_examples() -> None:
    """The properties above with the thorough profile, in a fresh process (hypothesis binds
    a test's settings when it is defined), each reporting at least 10,000 examples."""
    counts = passing_counts(__file__, "MODELPROV_HYPOTHESIS")
    assert len(counts) == len(LAWS) and min(counts) >= THOROUGH_EXAMPLES, counts
