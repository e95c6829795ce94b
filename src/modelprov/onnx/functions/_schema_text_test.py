"""The schema-text reader agrees with torch's parser on every schema torch registers."""

from __future__ import annotations

import torch

from modelprov._torch._compat import tensor_argument_kind
from modelprov.onnx.functions._schema_text import SchemaArgument, read_arguments


def test_reads_every_registered_schema_as_torch_does() -> None:
    read = 0
    schemas = torch._C._jit_get_all_schemas()
    for schema in schemas:
        arguments = read_arguments(str(schema))
        if arguments is None:  # a type the reader leaves to torch (TorchScript generics)
            continue
        expected = tuple(
            SchemaArgument(argument.name, str(argument.type), *tensor_argument_kind(argument.type))
            for argument in schema.arguments
        )
        assert arguments == expected, str(schema)
        read += 1
    aten = sum(1 for schema in schemas if str(schema).startswith("aten::"))
    assert read > 0.9 * aten  # the ATen ops exports hold are read without torch


def test_types_print_as_torch_prints_them() -> None:
    text = (
        "aten::sum.dim_IntList(Tensor(a!) self, int[1]? dim, Tensor?[] indices, *, "
        'Scalar alpha=1, ScalarType? dtype=None, str mode="a,b") -> Tensor(a!)'
    )
    assert read_arguments(text) == (
        SchemaArgument("self", "Tensor", True, False),
        SchemaArgument("dim", "Optional[List[int]]", False, True),
        SchemaArgument("indices", "List[Optional[Tensor]]", True, True),
        SchemaArgument("alpha", "number", False, False),
        SchemaArgument("dtype", "Optional[int]", False, False),
        SchemaArgument("mode", "str", False, False),
    )


def test_unknown_types_and_broken_text_are_left_to_torch() -> None:
    assert read_arguments("aten::wait(Future(t) self) -> t") is None
    assert read_arguments("aten::f(Tensor self") is None
    assert read_arguments("no schema") is None
