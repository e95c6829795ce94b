"""The one-walk check agrees with the full checks on every bad-input corpus file."""

from __future__ import annotations

from pathlib import Path

import onnx
from google.protobuf.message import DecodeError

from modelprov._model_io._duplicate_keys import has_duplicate_keys
from modelprov._model_io._proto_check import _dataflow_problem, is_plain_and_valid, text_problems
from tests.bad_inputs.corpus import Case
from tests.bad_inputs.test_corpus import corpus  # noqa: F401 - the shared corpus fixture


def _full_checks_pass(proto: onnx.ModelProto) -> bool:
    """The described walks (check_proto itself takes the one walk first)."""
    if has_duplicate_keys(proto) or any(text_problems(proto)):
        return False
    return not _dataflow_problem(proto.graph, "")


def test_one_walk_never_passes_what_the_full_checks_refuse(
    corpus: tuple[Path, list[Case]],  # noqa: F811 - the fixture imported above
) -> None:
    folder, cases = corpus
    passed = refused = 0
    for path in sorted(folder.glob("*.onnx")):
        proto = onnx.ModelProto()
        try:
            proto.ParseFromString(path.read_bytes())
        except DecodeError:  # files that are no protobuf are not this check's
            continue
        if is_plain_and_valid(proto):
            assert _full_checks_pass(proto), path.name
            passed += 1
        else:
            refused += 1
    assert len(cases) >= 80 and passed > 0 and refused > 0
