"""Properties of the built-in policies (hypothesis) and Policies lookup."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from modelprov.core import _policy as policy
from modelprov.core._policy import MergeContext, Policies
from modelprov.errors import PolicyError

text = st.text(alphabet=st.characters(exclude_categories=["Cs"]), min_size=1, max_size=12)
values_lists = st.lists(text, min_size=1, max_size=6)
numbers = st.lists(
    st.floats(allow_nan=False, allow_infinity=False, width=32).map(repr), min_size=1, max_size=6
)
segments = st.text(alphabet="abc_", min_size=1, max_size=3)
namespaces = st.lists(
    st.lists(segments, min_size=1, max_size=4).map(lambda parts: ": root/" + "/".join(parts)),
    min_size=1,
    max_size=5,
)
frames = st.sampled_from(
    [
        'File "/a.py", line 1, in forward\n    x = f(x)',
        '  File "/b.py", line 22, in forward\n    y = g(x)',
        '  File "/c.py", line 3, in helper\n    return h(y)',
        '  File "/d.py", line 40, in forward\n    z = k(y)',
    ]
)
traces = st.lists(st.lists(frames, min_size=1, max_size=4).map("\n".join), min_size=1, max_size=5)

ASSOCIATIVE = {
    "union": (policy.union, values_lists),
    # join is associative for values that do not end in its separator (documented law;
    # "0" then "\n" joins to "0\n\n", which reads back as one piece with a trailing break)
    "join": (
        policy.join("\n"),
        values_lists.map(lambda values: [v for v in values if not v.endswith("\n")] or ["a"]),
    ),
    "common_prefix": (policy.common_prefix, namespaces),
    "stack_traces": (policy.stack_traces, traces),
    "min": (policy.min, numbers),
    "max": (policy.max, numbers),
}


def ctx(values: Sequence[str]) -> MergeContext:
    return MergeContext("k", "n", (True,) * len(values), tuple(map(str, range(len(values)))))


def merge(p: policy.Policy, values: Sequence[str]) -> str | None:
    return p(list(values), ctx(values))


@pytest.mark.parametrize("name", sorted(ASSOCIATIVE))
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_deterministic_idempotent_and_associative(name: str, data: st.DataObject) -> None:
    p, strategy = ASSOCIATIVE[name]
    first = data.draw(strategy)
    second = data.draw(strategy)
    merged = merge(p, first)
    assert merged == merge(p, list(first))
    assert merged is not None
    # Idempotent: merging a merged value, or the same values twice, changes nothing.
    assert merge(p, [merged]) == merged
    assert merge(p, first + first) == merged
    # Merging merged values equals merging all sources at once (repeated fusion).
    partial = [merge(p, first), merge(p, second)]
    assert merge(p, [v for v in partial if v is not None]) == merge(p, first + second)


@pytest.mark.parametrize("name", ["union", "common_prefix", "min", "max"])
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_order_independent_where_documented(name: str, data: st.DataObject) -> None:
    p, strategy = ASSOCIATIVE[name]
    values = data.draw(strategy)
    shuffled = data.draw(st.permutations(values))
    result, other = merge(p, values), merge(p, shuffled)
    if name in ("min", "max") and result is not None and other is not None:
        assert float(result) == float(other)
    else:
        assert result == other


@settings(max_examples=60, deadline=None)
@given(traces)
def test_stack_traces_keep_every_distinct_trace(values: list[str]) -> None:
    from modelprov.core._stack_trace import split_merged_traces

    merged = policy.stack_traces(values, ctx(values))
    assert merged is not None
    assert split_merged_traces(merged) == list(dict.fromkeys(values))


def test_from_output_picks_the_most_downstream_output_source() -> None:
    context = MergeContext("custom.min", "n", (False, True, True), ("a", "b", "c"))
    assert policy.from_output(["1", "2", "3"], context) == "3"
    assert policy.from_output(["1"], MergeContext("custom.min", "n", (False,), ("a",))) is None


def test_value_scoped_wrapper_sees_only_output_values() -> None:
    seen: list[list[str]] = []

    def spy(values: Sequence[str], context: MergeContext) -> str:
        seen.append(list(values))
        return values[0]

    wrapped = policy.value_scoped(spy)
    assert wrapped(["x", "y"], MergeContext("k", "n", (False, True), ("a", "b"))) == "y"
    assert seen == [["y"]]
    assert Policies({"k": wrapped}).is_value_scoped("k")


def test_common_prefix_formats() -> None:
    c = ctx(["", ""])
    assert policy.common_prefix(["['', 'h.0', 'a']", "['', 'h.0', 'b']"], c) == "['', 'h.0']"
    assert policy.common_prefix([": M/h.0: B/x: aten", ": M/h.0: B/y: aten"], c) == ": M/h.0: B"
    assert policy.common_prefix(["h.0.attn", "h.0.mlp"], c) == "h.0"
    assert policy.common_prefix(["h.10", "h.1"], c) == "h"


def test_numeric_policy_rejects_text() -> None:
    with pytest.raises(PolicyError, match="'k'.*not a number"):
        policy.max(["1", "abc"], ctx(["1", "abc"]))


def test_lookup_exact_beats_glob_and_specific_glob_wins() -> None:
    policies = Policies(
        {"custom.*": policy.union, "custom.m*": policy.max, "custom.min": policy.min}
    )
    assert policies.resolve("custom.min") is policy.min
    assert policies.resolve("custom.max") is policy.max
    assert policies.resolve("custom.other") is policy.union
    assert policies.resolve("unrelated") is policy.union


def test_or_right_side_wins_and_is_immutable() -> None:
    left = Policies({"a": policy.first})
    right = left | {"a": policy.drop, "b": policy.max}
    assert right.resolve("a") is policy.drop and right.resolve("b") is policy.max
    assert left.resolve("a") is policy.first
    with pytest.raises(TypeError):
        left["a"] = policy.max  # type: ignore[index]


def test_policies_reject_non_callables() -> None:
    with pytest.raises(TypeError, match="'a' must be callable"):
        Policies({"a": "union"})  # type: ignore[dict-item]


def test_default_policies_cover_torch_keys() -> None:
    for key in (
        "namespace",
        "pkg.torch.onnx.class_hierarchy",
        "pkg.torch.onnx.name_scopes",
        "pkg.torch.onnx.fx_node",
        "pkg.torch.onnx.stack_trace",
    ):
        assert key in policy.DEFAULT_POLICIES
    assert policy.DEFAULT_POLICIES.is_value_scoped("custom.p99.9")
    assert not policy.DEFAULT_POLICIES.is_value_scoped("custom.bits")


def test_follow_output_takes_the_output_sources_value_else_the_last() -> None:
    values = [": M/mask: aten", ": M/h.0: B/attn: A"]
    produced = MergeContext("namespace", "n", (False, True), ("a", "b"))
    assert policy.follow_output(values, produced) == ": M/h.0: B/attn: A"
    first_is_output = MergeContext("namespace", "n", (True, False), ("a", "b"))
    assert policy.follow_output(values, first_is_output) == ": M/mask: aten"
    absorbed_only = MergeContext("namespace", "n", (False, False), ("a", "b"))
    assert policy.follow_output(values, absorbed_only) == ": M/h.0: B/attn: A"
    assert policy.DEFAULT_POLICIES.resolve("namespace") is policy.follow_output


def test_follow_output_takes_the_producer_when_aliases_of_its_output_meet() -> None:
    """A Gelu that absorbed the eliminated clone after it produces both outputs: it stays
    where the Gelu is computed (onnxscript keeps the Gelu's metadata there too)."""
    values = [": M/h.0: L/act: G/gelu: aten.gelu", ": M/h.0: L/clone: aten.clone"]
    both = MergeContext("namespace", "n", (True, True), ("gelu", "clone"))
    assert policy.follow_output(values, both) == values[0]


scope_values = st.lists(
    st.lists(st.sampled_from(["", "h", "h.0", "h.0.attn", "add", "mul_1"]), min_size=1).map(repr),
    min_size=1,
    max_size=6,
)


@settings(max_examples=80, deadline=None)
@given(data=st.data())
def test_scope_lists_parse_as_the_layout_value_and_keep_every_value(
    data: st.DataObject,
) -> None:
    import ast

    values = data.draw(scope_values)
    outputs = tuple(data.draw(st.lists(st.booleans(), min_size=len(values), max_size=len(values))))
    context = MergeContext("pkg.torch.onnx.name_scopes", "n", outputs, ("s",) * len(values))
    merged = policy.scope_lists(values, context)
    assert merged is not None
    # A reader parsing the Python literal gets follow_output's list (the layout value) ...
    layout = policy.follow_output(values, context)
    assert layout is not None
    assert ast.literal_eval(merged) == ast.literal_eval(layout)
    # ... and every distinct value is on a line of its own.
    lines = [line.removeprefix("# ") for line in merged.split("\n")]
    assert lines == list(dict.fromkeys([lines[0], *values]))
    # Merging merged values loses nothing and is idempotent.
    assert policy.scope_lists([merged], MergeContext("k", "n", (True,), ("m",))) == merged
    again = policy.scope_lists([merged, *values], MergeContext("k", "n", (True, *outputs)))
    assert again == merged
    assert policy.DEFAULT_POLICIES.resolve("pkg.torch.onnx.name_scopes") is policy.scope_lists
    assert policy.DEFAULT_POLICIES.resolve("pkg.torch.onnx.class_hierarchy") is policy.scope_lists


def test_scope_lists_keep_a_multi_line_value_alone() -> None:
    context = MergeContext("k", "n", (True, False), ("a", "b"))
    assert policy.scope_lists(["a\nb", "['c']"], context) == "a\nb"
    assert policy.scope_lists(["['a']", "['a']"], context) == "['a']"
