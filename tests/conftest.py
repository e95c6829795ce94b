"""Shared fixtures: real torch exports of the example models, made once per session."""

from __future__ import annotations

import functools
import logging
import warnings

import onnx
import onnx_ir as ir
import pytest
import torch

from modelprov._cli import _examples

logging.getLogger("torch").setLevel(logging.ERROR)


@functools.cache
def plain_export(name: str) -> ir.Model:
    """torch.onnx.export(dynamo=True, optimize=False) of an example (cached; clone before use)."""
    model, args = _examples.EXAMPLES[name]()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        program = torch.onnx.export(model, args, dynamo=True, optimize=False, verbose=False)
    return program.model


@functools.cache
def _plain_export_bytes(name: str) -> bytes:
    return ir.to_proto(plain_export(name)).SerializeToString()


def fresh_export(name: str) -> ir.Model:
    """An example's plain export sharing nothing with the cache or other copies.

    ``ir.Model.clone`` shares tensors, and onnxscript names the tensors of a model it changes
    in place, so in-place passes in tests run on a fresh deserialized copy instead."""
    return ir.from_proto(onnx.load_from_string(_plain_export_bytes(name)))


@functools.cache
def example_inputs(name: str) -> tuple[torch.Tensor, ...]:
    """The example's inputs."""
    return _examples.EXAMPLES[name]()[1]


@pytest.fixture
def export_of():
    """Returns a fresh copy of an example's plain export."""

    def make(name: str) -> ir.Model:
        return fresh_export(name)

    return make
