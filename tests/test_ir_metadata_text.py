"""An onnx_ir.Model whose metadata is not text (onnx_ir's dicts take any object) is refused
by every entry point with a MetadataError naming the holder and saying what to do, and the
model is left as it was; recover repairs it instead and says where.

The models are generated (random sourced graphs, some functionized so function bodies hold
metadata too); the holder (model, graph, node, graph input, initializer, output, a node's
output, in the main graph or a function), the kind of bad entry and the entry point are
drawn."""

from __future__ import annotations

from collections.abc import Callable

import onnx_ir as ir
import pytest
from hypothesis import given
from hypothesis import strategies as st

import modelprov
from modelprov._model_io._ir_check import metadata_holders
from modelprov.errors import MetadataError
from tests._seeded import seeded
from tests._sourced_graphs import sourced_graphs

ENTRY_POINTS: dict[str, Callable[[ir.Model], object]] = {
    "optimize": modelprov.optimize,
    "functionize": modelprov.functionize,
    "inline": modelprov.inline,
    "report": modelprov.report,
    "overlay": modelprov.overlay,
    "SourceIndex": modelprov.SourceIndex,
    "structural_hash": modelprov.structural_hash,
    "diff": lambda model: modelprov.diff(model, model),
}

BAD_ENTRIES: dict[str, tuple[object, object]] = {
    "invalid UTF-8 bytes value": ("custom.note", b"bad \xff"),
    "bytes value": ("custom.note", b"plain"),
    "int value": ("custom.note", 7),
    "None value": ("custom.note", None),
    "bytes key": (b"custom.note", "text"),
}


def _spoiled(draw: st.DrawFn) -> tuple[ir.Model, ir.Model, str, tuple[object, object]]:
    """(clean model, a copy with one bad entry, where the entry is, the entry)."""
    clean = draw(sourced_graphs(max_blocks=3)).model
    if draw(st.booleans()):
        clean = modelprov.functionize(clean)
    spoiled = clean.clone()
    holders = list(metadata_holders(spoiled))
    where, props = holders[draw(st.integers(0, len(holders) - 1))]
    key, value = BAD_ENTRIES[draw(st.sampled_from(sorted(BAD_ENTRIES)))]
    props[key] = value  # type: ignore[index]
    return clean, spoiled, where, (key, value)


def _entry_of(model: ir.Model, key: object) -> object:
    for _, props in metadata_holders(model):
        if key in props:
            return props[key]  # type: ignore[index]
    return None


@seeded(60)
@given(data=st.data(), entry_point=st.sampled_from(sorted(ENTRY_POINTS)))
def test_every_entry_point_refuses_metadata_that_is_not_text_and_names_where(
    data: st.DataObject, entry_point: str
) -> None:
    _, spoiled, where, (key, value) = data.draw(st.composite(_spoiled)())
    with pytest.raises(MetadataError) as refused:
        ENTRY_POINTS[entry_point](spoiled)
    message = str(refused.value)
    assert f"{where}: " in message and "not text" in message and "modelprov recover" in message
    assert _entry_of(spoiled, key) == value  # the input is left as it was


@seeded(40)
@given(data=st.data())
def test_recover_repairs_metadata_that_is_not_text_and_reports_where(data: st.DataObject) -> None:
    clean, spoiled, where, (key, value) = data.draw(st.composite(_spoiled)())
    recovered, report = modelprov.recover_with_report(clean, spoiled)
    assert where in report.repaired
    assert not [
        (w, k)
        for w, props in metadata_holders(recovered)
        for k, v in props.items()
        if type(k) is not str or type(v) is not str
    ]
    assert _entry_of(spoiled, key) == value  # the tool's model is left as it was
