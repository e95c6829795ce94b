"""The constant-chain rule on index graphs: the nodes of every consumer name them."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from modelprov.stablehlo.attach._constant_chains import ChainOp, adopted_nodes, constant_only

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


def test_a_constant_several_nodes_use_names_all_of_them_in_graph_order() -> None:
    ops = [
        ChainOp(0, None, (), (), (1, 2, 3)),
        ChainOp(1, None, ("b",), (0,), ()),
        ChainOp(2, None, ("a",), (0,), ()),
        ChainOp(3, None, ("a", "b"), (0,), ()),
    ]
    assert adopted_nodes(ops, _ORDER) == {0: ("a", "b")}
    assert constant_only(ops) == {0, 1, 2, 3}  # fed only by the constant


def test_unused_returned_and_argument_fed_ops_are_left_alone() -> None:
    ops = [
        ChainOp(0, None, (), (), (2, 6)),  # used by a node and by an op no node owns
        ChainOp(1, None, (), (), ()),  # unused
        ChainOp(2, None, ("a",), (0,), ()),
        ChainOp(3, None, ("b",), (0,), ()),
        ChainOp(4, None, (), (None,), (5,)),  # fed by an argument: computes model data
        ChainOp(5, None, ("b",), (4,), ()),
        ChainOp(6, None, (), (0,), (7,)),  # only a return uses it
        ChainOp(7, None, (), (6,), (), labellable=False),
    ]
    assert adopted_nodes(ops, _ORDER) == {}
    assert 4 not in constant_only(ops) and 5 not in constant_only(ops)


@given(st.lists(st.sampled_from(["a", "b", None]), min_size=1, max_size=6))
def test_adopted_exactly_when_some_node_owns_every_use(users: list[str | None]) -> None:
    consumers = [
        ChainOp(1 + i, None, (name,) if name else (), (None,), ()) for i, name in enumerate(users)
    ]
    constant = ChainOp(0, None, (), (), tuple(op.index for op in consumers))
    found = adopted_nodes([constant, *consumers], _ORDER)
    if None in users:
        assert found == {}
    else:
        named = {name for name in users if name is not None}
        assert found == {0: tuple(sorted(named, key=_ORDER.__getitem__))}
