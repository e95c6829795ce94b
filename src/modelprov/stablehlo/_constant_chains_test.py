"""The constant-chain rule on index graphs: one consumer names them, several do not."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from modelprov.stablehlo._constant_chains import ChainOp, adopted_nodes

_ORDER = {"a": 0, "b": 1}


def test_a_chain_of_constants_takes_its_one_consumers_nodes_and_regions_follow() -> None:
    ops = [
        ChainOp(0, None, (), (), (1,)),  # constant
        ChainOp(1, None, (), (0,), (4,)),  # broadcast of it (a reduce_window, say)
        ChainOp(2, 1, (), (None,), ()),  # its body op: block arguments
        ChainOp(3, 1, (), (2,), (), labellable=False),  # the body's return
        ChainOp(4, None, ("a",), (1, None), (None,)),
    ]
    assert adopted_nodes(ops, _ORDER) == {0: ("a",), 1: ("a",), 2: ("a",)}


def test_shared_unused_and_argument_fed_ops_are_left_alone() -> None:
    ops = [
        ChainOp(0, None, (), (), (2, 3)),  # used by a and b: shared
        ChainOp(1, None, (), (), ()),  # unused
        ChainOp(2, None, ("a",), (0,), ()),
        ChainOp(3, None, ("b",), (0,), ()),
        ChainOp(4, None, (), (None,), (5,)),  # fed by an argument: computes model data
        ChainOp(5, None, ("b",), (4,), ()),
        ChainOp(6, None, (), (), (7,)),  # only a return uses it
        ChainOp(7, None, (), (6,), (), labellable=False),
    ]
    assert adopted_nodes(ops, _ORDER) == {}


@given(st.lists(st.sampled_from(["a", "b", None]), min_size=1, max_size=6))
def test_adopted_exactly_when_every_consumer_has_the_same_nodes(users: list[str | None]) -> None:
    consumers = [
        ChainOp(1 + i, None, (name,) if name else (), (0,), ()) for i, name in enumerate(users)
    ]
    constant = ChainOp(0, None, (), (), tuple(op.index for op in consumers))
    found = adopted_nodes([constant, *consumers], _ORDER)
    if len(set(users)) == 1 and users[0] is not None:
        assert found == {0: (users[0],)}
    else:
        assert 0 not in found
    assert set(found) <= {0}
