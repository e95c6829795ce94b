"""The correspondence engine against the truth of random graphs (tests._generated_checks).

Random sourced graphs (tests._sourced_graphs) go through random sequences of
modelprov.optimize and simulated black-box tools followed by modelprov.recover
(tests._black_box); every claim must lie in its node's value region, recall must stay 1.00,
untouched nodes must keep exactly their sources and the numerics must not change. One case
in four has a ``duplicate`` block (two copies of one expression, each reading a literal of
its own) and draws its tools from those that rename, merge, re-lay out or fuse (a family
where a node is told from its twin only by what it reads).

The default suite runs 300 cases; ``pytest -m slow tests/test_generated_claims.py`` (or
``MODELPROV_GENERATED=thorough``) runs 5,000. Both are derandomized: the same cases every
run. A failure hypothesis shrinks is kept below as an explicit regression test.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests._black_box import REWRITES
from tests._generated_checks import Step, check_case
from tests._sourced_graphs import build, sourced_graphs
from tests._thorough import passing_counts

DEFAULT_CASES = 300
THOROUGH_CASES = 5_000
_COMMON = {
    "deadline": None,
    "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large],
    "derandomize": True,
    "database": None,
}
settings.register_profile("generated-ci", max_examples=DEFAULT_CASES, **_COMMON)
settings.register_profile("generated-thorough", max_examples=THOROUGH_CASES, **_COMMON)
_PROFILE = settings.get_profile(f"generated-{os.environ.get('MODELPROV_GENERATED', 'ci')}")


def _steps(rewrites: list[str]) -> st.SearchStrategy[list[Step]]:
    """optimize then up to two tools, or one or two tools; each tool of 1..4 ``rewrites``."""
    tool = st.builds(
        Step,
        kind=st.just("tool"),
        rewrites=st.lists(st.sampled_from(rewrites), min_size=1, max_size=4).map(tuple),
        seed=st.integers(0, 999),
        keep_model_metadata=st.booleans(),
    )
    return st.one_of(
        st.lists(tool, max_size=2).map(lambda tools: [Step("optimize"), *tools]),
        st.lists(tool, min_size=1, max_size=2),
    )


# The duplicate family of the module docstring: its tools rename, merge, move or re-lay out
# values, or make fresh inputs (fusions).
_DUPLICATE_TOOLS = [
    "block_layout",
    "constants_to_initializers",
    "fuse_conv_bn",
    "fuse_gemm",
    "insert_layout",
    "merge_duplicates",
    "merge_equal_constants",
    "rename_nodes",
    "rename_values",
    "reorder",
]
_GENERAL = st.tuples(sourced_graphs(max_blocks=4), _steps(sorted(REWRITES)))
_DUPLICATES = st.tuples(
    sourced_graphs(max_blocks=4, required=("duplicate",)), _steps(_DUPLICATE_TOOLS)
)
_CASES = st.integers(0, 3).flatmap(lambda draw: _DUPLICATES if draw == 0 else _GENERAL)


@settings(_PROFILE)
@given(case=_CASES)
def test_claims_stay_in_their_regions_through_optimize_and_tools(case) -> None:
    graph, steps = case
    check_case(graph, steps)


@pytest.mark.slow
def test_five_thousand_generated_cases() -> None:
    """The property above with the thorough profile, in a fresh process (hypothesis binds a
    test's settings when it is defined), reporting at least 5,000 cases."""
    counts = passing_counts(
        f"{__file__}::test_claims_stay_in_their_regions_through_optimize_and_tools",
        "MODELPROV_GENERATED",
    )
    assert counts and min(counts) >= THOROUGH_CASES, counts


# --- regressions: cases the generator found, each failing before its fix ------------------


def _tool(*rewrites: str, seed: int = 0, keep: bool = True) -> Step:
    return Step("tool", rewrites, seed, keep)


@pytest.mark.parametrize(
    ("recipe", "steps"),
    [
        pytest.param(
            ("image", ("conv", "act", "duplicate", "residual"), 940),
            [_tool("merge_duplicates", seed=414)],
            id="merged-duplicate-goes-to-its-twin",
        ),
        pytest.param(
            ("sequence", ("attention", "linear", "linear", "residual"), 600),
            [_tool("rename_values", seed=678)],
            id="renamed-outputs-anchor-by-structure",
        ),
        pytest.param(
            ("sequence", ("attention",), 228),
            [_tool("rename_values", seed=250)],
            id="renamed-constants-anchor-from-their-readers",
        ),
        pytest.param(
            ("image", ("act", "bn", "conv"), 260),
            [_tool("insert_layout", seed=66)],
            id="layout-pairs-and-re-laid-weights",
        ),
        pytest.param(
            ("sequence", ("noop", "norm", "view"), 626),
            [_tool("split_batch_norm", "insert_layout", "eliminate_no_ops", seed=269)],
            id="removed-identity-behind-a-layout-pair",
        ),
        pytest.param(
            ("sequence", ("act", "linear", "linear", "attention", "view"), 722),
            [Step("optimize"), _tool("fuse_conv_bn", "rename_values", "fuse_gemm", seed=300)],
            id="fused-gemm-with-a-fresh-output",
        ),
        pytest.param(
            ("image", ("duplicate", "residual", "bn", "act", "noop"), 979),
            [_tool("split_batch_norm", "reorder", "rename_values", seed=569)],
            id="split-batch-norm-then-renamed",
        ),
        pytest.param(
            ("image", ("bn", "residual", "bn", "residual", "noop"), 948),
            [_tool("rename_values", "constants_to_initializers", "split_batch_norm", seed=430)],
            id="anchors-found-backward-let-the-forward-walk-go-on",
        ),
        pytest.param(
            ("image", ("bn", "conv", "noop"), 467),
            [
                _tool(
                    "insert_layout",
                    "eliminate_no_ops",
                    "rename_nodes",
                    "split_batch_norm",
                    seed=489,
                )
            ],
            id="split-batch-norm-behind-a-layout-pair",
        ),
        pytest.param(
            ("sequence", ("attention",), 3),
            [Step("optimize")],
            id="a-shared-literal-goes-with-the-mask-not-the-reshape",
        ),
        pytest.param(
            ("sequence", ("attention", "act", "noop"), 1),
            [_tool("merge_equal_constants")],
            id="a-kept-literal-takes-no-merged-literals-source",
        ),
        pytest.param(
            ("sequence", ("act", "windows"), 0),
            [_tool("fuse_consecutive", seed=0)],
            id="two-slices-made-one-are-not-the-second",
        ),
        pytest.param(
            ("sequence", ("act", "windows", "windows"), 0),
            [_tool("rename_values", "fuse_consecutive", seed=2)],
            id="a-fused-slice-that-kept-a-name-reads-other-constants",
        ),
        pytest.param(
            ("sequence", ("noop", "act", "noop", "windows"), 0),
            [_tool("fuse_consecutive", seed=1)],
            id="a-reshape-of-a-reshape-made-one-computes-the-second",
        ),
        pytest.param(
            ("image", ("act", "noop", "duplicate", "bn"), 1),
            [_tool("merge_duplicates", seed=1)],
            id="merged-copies-reading-equal-literals-go-to-their-twins",
        ),
        pytest.param(
            ("image", ("act", "noop", "duplicate", "bn"), 0),
            [_tool("reorder", "merge_duplicates", seed=0)],
            id="the-tool-keeps-the-second-copy",
        ),
        pytest.param(
            ("sequence", ("duplicate",), 0),
            [Step("optimize")],
            id="common-subexpressions-go-to-their-twins-one-by-one",
        ),
        pytest.param(
            ("sequence", ("attention", "attention"), 0),
            [_tool("merge_equal_constants", seed=0, keep=False)],
            id="a-node-reading-a-merged-equal-literal-is-unchanged",
        ),
        pytest.param(
            ("sequence", ("windows",), 0),
            [Step("optimize"), _tool("fuse_consecutive", "insert_layout", seed=0, keep=False)],
            id="a-layout-conversion-skips-the-readers-of-fused-nodes",
        ),
        pytest.param(
            ("sequence", ("windows",), 0),
            [Step("optimize"), _tool("fuse_consecutive", "merge_duplicates", seed=0, keep=False)],
            id="a-constant-a-fused-slice-reads-works-for-that-slice-only",
        ),
        pytest.param(
            ("sequence", ("act", "act", "duplicate"), 0),
            [_tool("merge_equal_constants", "rename_values", seed=0, keep=False)],
            id="a-renamed-merged-literal-is-the-first-of-its-equals",
        ),
        pytest.param(
            ("image", ("conv", "conv", "conv", "conv", "residual"), 0),
            [_tool("block_layout", seed=0)],
            id="each-blocked-conv-claims-its-own-block",
        ),
        pytest.param(
            ("image", ("conv", "conv", "conv", "residual", "conv", "conv", "conv"), 1),
            [_tool("block_layout", seed=1)],
            id="a-reorder-carries-only-the-block-it-converts",
        ),
        pytest.param(
            ("sequence", ("duplicate", "linear"), 0),
            [_tool("rename_values", seed=609)],
            id="a-copy-reading-renamed-equal-literals-is-the-copy-reading-its-inputs",
        ),
        pytest.param(
            ("sequence", ("linear", "linear", "linear", "duplicate"), 0),
            [_tool("fuse_gemm", "rename_values", seed=235, keep=False)],
            id="a-renamed-node-behind-a-fresh-input-is-no-fusion",
        ),
        pytest.param(
            ("sequence", ("windows",), 0),
            [Step("optimize"), _tool("insert_layout", "fuse_consecutive", seed=0, keep=False)],
            id="a-fresh-input-read-through-a-layout-pair-is-the-value-converted",
        ),
        pytest.param(
            ("image", ("duplicate", "conv"), 0),
            [_tool("block_layout", "merge_equal_constants", "rename_values", seed=232, keep=False)],
            id="of-twins-reading-one-merged-literal-each-is-the-copy-reading-its-inputs",
        ),
        pytest.param(
            ("image", ("duplicate", "conv"), 0),
            [_tool("insert_layout", "merge_duplicates", "rename_values", seed=12)],
            id="twins-behind-a-layout-conversion-and-a-merge-each-go-to-their-copy",
        ),
        pytest.param(
            ("sequence", ("duplicate", "duplicate"), 0),
            [_tool("merge_equal_constants", "rename_values", seed=232, keep=False)],
            id="a-merged-literal-is-the-first-its-readers-read-once-all-are-known",
        ),
        pytest.param(
            ("sequence", ("linear", "duplicate"), 0),
            [
                _tool("reorder", seed=0, keep=False),
                _tool("merge_duplicates", "rename_values", seed=511, keep=False),
            ],
            id="a-merged-literal-counts-the-literals-of-copies-merged-into-its-reader",
        ),
    ],
)
def test_generated_regression(recipe, steps) -> None:
    check_case(build(*recipe), steps)
