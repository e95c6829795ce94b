"""Blocked layouts at a 1x1 spatial size, where onnxruntime's NCHWc holds a value's
elements in the plain order, so the value region of every blocked node is exact.

Random image graphs of one pixel (tests._sourced_graphs, family ``pixel``) go through
tests._black_box's ``block_layout_whole_channels`` (blocked Convs with the activations and
Adds reading them left beside them, in the blocked layout, as onnxruntime leaves a
QuickGelu or a Concat next to its NCHWc Convs), alone or with other rewrites of the same
tool, then modelprov.recover; the properties of tests._generated_checks must hold (every
claim in its node's region, recall 1.00, untouched nodes unchanged, the same numerics).
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests._generated_checks import Step, check_case
from tests._seeded import seeded
from tests._sourced_graphs import IMAGE_BLOCKS, build

_OTHER_REWRITES = ("rename_values", "rename_nodes", "reorder", "constants_to_initializers")


@st.composite
def _cases(draw: st.DrawFn) -> tuple[tuple[str, ...], int, list[Step]]:
    blocks = draw(st.lists(st.sampled_from(IMAGE_BLOCKS), min_size=1, max_size=6))
    before = draw(st.lists(st.sampled_from(_OTHER_REWRITES), max_size=1))
    after = draw(st.lists(st.sampled_from(_OTHER_REWRITES), max_size=1))
    tool = Step(
        "tool",
        (*before, "block_layout_whole_channels", *after),
        draw(st.integers(0, 999)),
        draw(st.booleans()),
    )
    steps = [Step("optimize"), tool] if draw(st.booleans()) else [tool]
    return tuple(blocks), draw(st.integers(0, 2**16)), steps


@seeded(60)
@given(case=_cases())
def test_blocked_nodes_claim_their_own_region_at_one_pixel(case) -> None:
    blocks, seed, steps = case
    check_case(build("pixel", blocks, seed), steps)


@pytest.mark.parametrize(
    "blocks",
    [
        pytest.param(("conv", "act", "conv", "act"), id="activation-beside-a-blocked-conv"),
        pytest.param(("conv", "act", "conv", "residual"), id="plain-add-of-blocked-values"),
        pytest.param(("conv", "act", "duplicate", "conv"), id="activations-reading-one-another"),
    ],
)
def test_blocked_regression(blocks) -> None:
    check_case(build("pixel", blocks, 0), [Step("tool", ("block_layout_whole_channels",))])


@pytest.mark.parametrize(
    ("blocks", "seed", "rewrites", "tool_seed", "keep"),
    [
        pytest.param(
            ("noop", "conv", "conv", "bn", "conv", "noop"),
            7097,
            ("block_layout_whole_channels", "merge_equal_constants"),
            356,
            False,
            id="a-reorder-of-the-input-an-identity-read-moves-nothing",
        ),
        pytest.param(
            ("noop", "conv", "noop"),
            6429,
            ("block_layout_whole_channels", "reorder", "fuse_conv_bn"),
            341,
            True,
            id="a-reorder-of-the-input-carries-the-conv-it-converts-for",
        ),
    ],
)
def test_blocked_after_optimize_regression(blocks, seed, rewrites, tool_seed, keep) -> None:
    """Found by a wider sweep: after optimize removed the Identity reading the input, the
    ReorderInput of the input moves nothing and equals the Identity's output too."""
    check_case(
        build("pixel", blocks, seed), [Step("optimize"), Step("tool", rewrites, tool_seed, keep)]
    )
