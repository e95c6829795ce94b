"""The report's packed data: exact round trip, each distinct string once, bounded size."""

from __future__ import annotations

import base64
import json
import re
import warnings
import zlib

import onnx_ir as ir
import pytest

import modelprov
from modelprov._cli import _examples
from modelprov.errors import MetadataError
from modelprov.report import report
from modelprov.report._data import report_data
from modelprov.report._embed import decode_data, encode_data, read_report_data
from modelprov.report._pack import REPORT_VERSION, pack, unpack
from tests._synthetic import synthetic_model
from tests.conftest import plain_export


def _with_user_keys(model: ir.Model) -> ir.Model:
    """User metadata on some nodes: the same map twice, another once, one key on a source."""
    nodes = list(model.graph)
    nodes[0].metadata_props["custom.note"] = "same"
    nodes[1].metadata_props["custom.note"] = "same"
    nodes[2].metadata_props.update({"custom.note": "other", "custom.more": "x" * 300})
    return model


def test_round_trip_on_synthetic_graph_with_every_state() -> None:
    model = _with_user_keys(synthetic_model(400))
    before = synthetic_model(420)
    document = report_data(model, before=before)
    states = {node["state"] for node in document["nodes"]}
    assert states == {"exact", "merged", "recovered", "none"}
    assert document["lost"] and any(node["keys"] for node in document["nodes"])
    packed = pack(document)
    assert unpack(json.loads(json.dumps(packed))) == document
    assert decode_data(encode_data(document)) == document


def test_round_trip_on_optimized_gpt2() -> None:
    module, args = _examples.gpt2(2, 64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        exported = modelprov.export(module, args, verbose=False).model
    optimized = modelprov.optimize(exported)
    document = report_data(optimized, before=plain_export("gpt2"))
    assert any(node["state"] == "merged" for node in document["nodes"])
    assert read_report_data(report(optimized, before=plain_export("gpt2"))) == document


def test_each_distinct_string_is_stored_once() -> None:
    document = report_data(synthetic_model(2000))
    packed = pack(document)
    strings = packed["strings"]
    assert len(strings) == len(set(strings))
    traces = {source["trace"] for source in document["sources"]}
    assert traces <= set(strings)
    # Nothing per node repeats a source's text: nodes and sources hold numbers only.
    for columns in (packed["nodes"], packed["sources"]):
        for values in columns.values():
            assert all(not isinstance(v, str) for v in values)


def test_embedded_data_is_a_small_fraction_of_the_records() -> None:
    """The records as plain JSON grow with nodes times fields; the embedded data with what
    is distinct (here up to 600 different stack traces and a unique name per node)."""
    for nodes in (1000, 2000):
        document = report_data(synthetic_model(nodes))
        plain = len(json.dumps(document, separators=(",", ":")).encode())
        embedded = len(base64.b64decode(encode_data(document)))
        assert embedded < plain / 12
        assert embedded < 32 * nodes


def test_the_page_holds_only_base64_data() -> None:
    html = report(synthetic_model(50))
    match = re.search(r'id="report-data"[^>]*>([^<]*)</script>', html)
    assert match is not None and re.fullmatch(r"[A-Za-z0-9+/=]+", match.group(1))
    packed = json.loads(zlib.decompress(base64.b64decode(match.group(1))))
    assert packed["format"] == "modelprov.report" and packed["version"] == REPORT_VERSION


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("not base64 at all!", "cannot decode"),
        (base64.b64encode(b"plain, not deflated").decode(), "cannot decode"),
        (base64.b64encode(zlib.compress(b"[1, 2]")).decode(), "not a JSON object"),
        (base64.b64encode(zlib.compress(b'{"format": "x"}')).decode(), "expected format"),
        (
            base64.b64encode(
                zlib.compress(b'{"format": "modelprov.report", "version": 2}')
            ).decode(),
            "malformed",
        ),
    ],
)
def test_bad_data_is_a_clear_error(text: str, message: str) -> None:
    with pytest.raises(MetadataError, match=message):
        decode_data(text)


def test_a_page_without_data_is_a_clear_error() -> None:
    with pytest.raises(MetadataError, match="no modelprov report data"):
        read_report_data("<html><body>hello</body></html>")
