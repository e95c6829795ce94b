"""Corpus cases of issue 23's bad-input classes: broken structure and external locations.

Generated families, each applied to the plain double-transpose export:

- external-data locations that are no file name (a NUL byte anywhere, invalid UTF-8);
- model-local functions that call themselves (directly, through others, from a subgraph
  of their body), are defined twice (same domain, name and overload), or whose body reads
  a value nothing defines (first node, a later node, an If inside the body, an output);
- subgraphs (If branches, a Loop body, nested Ifs) reading a value of the enclosing graph
  produced only after the node holding them;
- a model whose file name is not UTF-8.

Every command that loads the model's graph refuses the broken ones with exit 2 (``audit``
reports metadata and reads no graph: it may succeed). ``structure_cases()`` returns them in
the form of ``corpus._cases``.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import onnx
from onnx import TensorProto, helper

__all__ = ["REFUSED_BY", "structure_cases"]

Mutation = Callable[[onnx.ModelProto], None]

REFUSED_BY = (
    "diff PLAIN M",
    "diff M GOOD",
    "report",
    "report --before M",
    "overlay",
    "optimize",
    "functionize",
    "inline",
    "recover M GOOD",
    "recover PLAIN M",
)
"""Every corpus command but audit (which reads metadata, not the graph)."""

_LOCAL = "pkg.test.local"
_OPSETS = [helper.make_opsetid("", 20), helper.make_opsetid(_LOCAL, 1)]


def _external_at(location: str) -> Mutation:
    def mutate(proto: onnx.ModelProto) -> None:
        tensor = proto.graph.initializer.add()
        tensor.name = "external_weight"
        tensor.data_type = TensorProto.FLOAT
        tensor.dims.extend([4])
        tensor.data_location = TensorProto.EXTERNAL
        tensor.external_data.add(key="location", value=location)
        tensor.external_data.add(key="offset", value="0")

    return mutate


def _append(make: Callable[[str, str], list[onnx.NodeProto]]) -> Callable[[onnx.ModelProto], None]:
    """Puts the nodes ``make(input, output)`` after the graph: the old output feeds them,
    they produce the graph output under its old name."""

    def mutate(proto: onnx.ModelProto) -> None:
        out = proto.graph.output[0].name
        last = next(n for n in proto.graph.node if out in n.output)
        last.output[list(last.output).index(out)] = "before_tail"
        proto.graph.node.extend(make("before_tail", out))

    return mutate


def _function(name: str, body: list[onnx.NodeProto], overload: str = "") -> onnx.FunctionProto:
    function = helper.make_function(_LOCAL, name, ["a"], ["b"], body, _OPSETS)
    function.overload = overload
    return function


def _call(name: str, a: str, b: str, overload: str = "") -> onnx.NodeProto:
    node = helper.make_node(name, [a], [b], domain=_LOCAL, name=f"call_{name}")
    node.overload = overload
    return node


def _with_functions(*functions: onnx.FunctionProto, calls: str = "f") -> Mutation:
    def mutate(proto: onnx.ModelProto) -> None:
        proto.opset_import.append(helper.make_opsetid(_LOCAL, 1))
        proto.functions.extend(functions)
        _append(lambda a, b: [_call(calls, a, b)])(proto)

    return mutate


def _branch(nodes: list[onnx.NodeProto], output: str) -> onnx.GraphProto:
    return helper.make_graph(nodes, "branch", [], [helper.make_tensor_value_info(output, 0, None)])


def _if(
    condition: str, then: onnx.GraphProto, otherwise: onnx.GraphProto, out: str
) -> onnx.NodeProto:
    return helper.make_node(
        "If", [condition], [out], then_branch=then, else_branch=otherwise, name=f"if_{out}"
    )


def _if_reading_later(where: str, depth: int = 1) -> Mutation:
    """An If (nested ``depth`` deep) whose ``where`` branch reads ``late``, which the graph
    produces only after the If."""

    def make(a: str, b: str) -> list[onnx.NodeProto]:
        reads = _branch([helper.make_node("Identity", ["late"], ["t0"])], "t0")
        for level in range(1, depth):
            fine = _branch([helper.make_node("Identity", [a], [f"e{level}"])], f"e{level}")
            reads = _branch([_if("cond", reads, fine, f"t{level}")], f"t{level}")
        fine = _branch([helper.make_node("Identity", [a], ["e0"])], "e0")
        then, otherwise = (reads, fine) if where == "then" else (fine, reads)
        return [
            helper.make_node("ReduceMax", [a], ["peak"], keepdims=0, name="peak"),
            helper.make_node("Greater", ["peak", "peak"], ["cond"], name="cond"),
            _if("cond", then, otherwise, "chosen"),
            helper.make_node("Neg", [a], ["late"], name="late"),
            helper.make_node("Add", ["chosen", "late"], [b], name="sum"),
        ]

    return _append(make)


def _loop_reading_later(proto: onnx.ModelProto) -> None:
    body = helper.make_graph(
        [
            helper.make_node("Identity", ["cond_in"], ["cond_out"]),
            helper.make_node("Add", ["carried", "late"], ["carried_out"]),
        ],
        "body",
        [
            helper.make_tensor_value_info("i", TensorProto.INT64, []),
            helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
            helper.make_tensor_value_info("carried", 0, None),
        ],
        [
            helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
            helper.make_tensor_value_info("carried_out", 0, None),
        ],
    )
    proto.graph.initializer.extend([helper.make_tensor("trips", TensorProto.INT64, [], [2])])

    def make(a: str, b: str) -> list[onnx.NodeProto]:
        return [
            helper.make_node("Loop", ["trips", "", a], ["looped"], body=body, name="loop"),
            helper.make_node("Neg", [a], ["late"], name="late"),
            helper.make_node("Add", ["looped", "late"], [b], name="sum"),
        ]

    _append(make)(proto)


def _recursive_through_if() -> onnx.FunctionProto:
    then = _branch([_call("f", "a", "t")], "t")
    otherwise = _branch([helper.make_node("Identity", ["a"], ["e"])], "e")
    return _function(
        "f",
        [
            helper.make_node("ReduceMax", ["a"], ["m"], keepdims=0),
            helper.make_node("Greater", ["m", "m"], ["c"]),
            _if("c", then, otherwise, "b"),
        ],
    )


def _undefined_in_if() -> onnx.FunctionProto:
    then = _branch([helper.make_node("Identity", ["ghost"], ["t"])], "t")
    otherwise = _branch([helper.make_node("Identity", ["a"], ["e"])], "e")
    return _function(
        "f",
        [
            helper.make_node("ReduceMax", ["a"], ["m"], keepdims=0),
            helper.make_node("Greater", ["m", "m"], ["c"]),
            _if("c", then, otherwise, "b"),
        ],
    )


def _relu(name: str = "f", overload: str = "") -> onnx.FunctionProto:
    return _function(name, [helper.make_node("Relu", ["a"], ["b"])], overload)


def _neg(name: str = "f", overload: str = "") -> onnx.FunctionProto:
    return _function(name, [helper.make_node("Neg", ["a"], ["b"])], overload)


NON_UTF8_NAME = os.fsdecode(b"non_utf8_\xff\xfe.onnx")
"""A file name that is not UTF-8 (``os.fsdecode``'s surrogate escapes)."""


def structure_cases() -> list[tuple[str, str, str, Mutation | None, dict[str, Any]]]:
    """(name, kind, base, mutation, Case fields) for ``corpus._cases``."""
    plain = "plain.onnx"
    refused: dict[str, Any] = {"refused_by": REFUSED_BY}
    cases: list[tuple[str, str, str, Mutation | None, dict[str, Any]]] = []
    for name, location in [
        ("nul_location", "w\0.bin"),
        ("nul_only_location", "\0"),
        ("nul_folder_location", "data/\0/w.bin"),
        ("nul_last_location", "w.bin\0"),
        ("utf8_location", "BADUTF8MARK"),  # the corpus writes it as bytes that are no UTF-8
    ]:
        cases.append((name, "external location", plain, _external_at(location), {}))
    functions: list[tuple[str, tuple[onnx.FunctionProto, ...]]] = [
        ("recursive_self", (_function("f", [_call("f", "a", "b")]),)),
        (
            "recursive_pair",
            (_function("f", [_call("g", "a", "b")]), _function("g", [_call("f", "a", "b")])),
        ),
        (
            "recursive_three",
            (
                _function("f", [_call("g", "a", "b")]),
                _function("g", [_call("h", "a", "b")]),
                _function("h", [_call("f", "a", "b")]),
            ),
        ),
        ("recursive_in_if", (_recursive_through_if(),)),
        ("duplicate_function", (_relu(), _neg())),
        ("duplicate_function_overload", (_relu(overload="v1"), _neg(overload="v1"), _relu())),
        ("duplicate_function_same_body", (_relu(), _relu())),
        (
            "body_undefined_first",
            (_function("f", [helper.make_node("Add", ["a", "ghost"], ["b"])]),),
        ),
        (
            "body_undefined_later",
            (
                _function(
                    "f",
                    [
                        helper.make_node("Relu", ["a"], ["r"]),
                        helper.make_node("Add", ["r", "ghost"], ["b"]),
                    ],
                ),
            ),
        ),
        (
            "body_reads_later",
            (
                _function(
                    "f",
                    [
                        helper.make_node("Add", ["a", "r"], ["b"]),
                        helper.make_node("Relu", ["a"], ["r"]),
                    ],
                ),
            ),
        ),
        ("body_undefined_in_if", (_undefined_in_if(),)),
        ("body_output_undefined", (_function("f", [helper.make_node("Relu", ["a"], ["r"])]),)),
    ]
    for name, defined in functions:
        cases.append((name, "functions", plain, _with_functions(*defined), refused))
    cases += [
        ("if_then_reads_later", "subgraphs", plain, _if_reading_later("then"), refused),
        ("if_else_reads_later", "subgraphs", plain, _if_reading_later("else"), refused),
        ("if_nested_reads_later", "subgraphs", plain, _if_reading_later("then", 3), refused),
        ("loop_reads_later", "subgraphs", plain, _loop_reading_later, refused),
        ("non_utf8_file_name", "file name", plain, None, {"path": NON_UTF8_NAME}),
    ]
    return cases
