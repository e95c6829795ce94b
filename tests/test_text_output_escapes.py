"""Text output never prints a name raw: terminal escapes and bidi overrides are escaped.

Names come from untrusted models (node names, FX nodes, metadata keys, function names);
audit, diff, the recover and optimize reports, printed policies and the command line's
summary and error lines show them through ``core._printable``.
"""

from __future__ import annotations

import logging
import os
import unicodedata

import onnx_ir as ir
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import modelprov
from modelprov.onnx.recover._recover import RecoveryReport, recover_model
from tests._cli import cli
from tests._synthetic import synthetic_model

# Title setting, line clearing, a C1 CSI, a bidi override and isolate, a line break.
HOSTILE = ("\x1b]0;owned\x07", "\x1b[2K\r", "\x9b2J", "\u202eevil", "\u2067x", "a\nb")
_BIDI = set("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def _unsafe(text: str) -> list[str]:
    """The characters of ``text`` a terminal would act on (line breaks between lines aside)."""
    return [
        char
        for line in text.split("\n")
        for char in line
        if unicodedata.category(char) in ("Cc", "Zl", "Zp") or char in _BIDI
    ]


def _hostile_model(names: tuple[str, ...]) -> ir.Model:
    """A synthetic model whose unnamed-source nodes, FX nodes and keys carry ``names``."""
    model = synthetic_model(60)
    nodes = list(model.graph)
    for i, name in enumerate(names):
        bare = nodes[5 + 23 * (i % 2)]  # nodes without metadata: listed by name
        bare.name = f"{bare.name or 'n'}{i}{name}"
        node = nodes[10 + i]
        node.name = f"node{i}{name}"
        fx = node.metadata_props.get("pkg.torch.onnx.fx_node")
        if fx is not None:
            node.metadata_props["pkg.torch.onnx.fx_node"] = fx.replace("%", f"%fx{i}{name}", 1)
        node.metadata_props[f"custom.k{i}{name}"] = "1"
    return model


def _changed(model: ir.Model) -> ir.Model:
    """``model`` after a tool: the first hostile FX nodes removed, the next ones' metadata
    dropped (lost sources and nodes without sources, listed by name)."""
    after = model.clone()
    nodes = list(after.graph)
    for node in nodes[10:12]:
        ir.convenience.replace_all_uses_with(node.outputs[0], node.inputs[0])
        after.graph.remove(node, safe=True)
    for node in nodes[12:16]:
        node.metadata_props.clear()
    return after


def _all_text(model: ir.Model) -> dict[str, str]:
    """Every text report of the API on ``model`` and on it changed by a tool."""
    after = _changed(model)
    recovery = recover_model(model, after.clone()).report
    return {
        "audit": modelprov.audit(model).to_text(),
        "diff": modelprov.diff(model, after).to_text(),
        "recover": recovery.to_text(),
    }


def test_reports_escape_every_hostile_name() -> None:
    texts = _all_text(_hostile_model(HOSTILE))
    for kind, text in texts.items():
        assert _unsafe(text) == [], kind
    assert "\\x1b]0;owned\\x07" in texts["audit"] and "\\u202eevil" in texts["audit"]
    assert "\\u202eevil" in texts["diff"]
    listed = RecoveryReport(3, 1, 1, 0, HOSTILE[:2], HOSTILE[2:4], HOSTILE[4:]).to_text()
    assert _unsafe(listed) == [] and listed.count("\n") == 6


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.text(alphabet=st.characters(categories=("Cc", "Cf", "Zl", "Zp", "Ll")), min_size=1),
        min_size=1,
        max_size=4,
    )
)
def test_reports_escape_generated_names(names: list[str]) -> None:
    for kind, text in _all_text(_hostile_model(tuple(names))).items():
        assert _unsafe(text) == [], kind


@pytest.fixture(scope="module")
def hostile_files(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    folder = tmp_path_factory.mktemp("hostile")
    model = _hostile_model(HOSTILE)
    after = _changed(model)
    paths = (os.path.join(folder, "model.onnx"), os.path.join(folder, "after.onnx"))
    ir.save(model, paths[0])
    ir.save(after, paths[1])
    return paths


def test_command_line_escapes_names(hostile_files: tuple[str, str], tmp_path: str) -> None:
    model, after = hostile_files
    key = "custom.\x1b]0;owned\x07\u202e"
    runs = [
        ("audit", model),
        ("diff", model, after),
        ("policies", "--key", key),
        ("audit", os.path.join(tmp_path, "missing\x1b[2K\u202e.onnx")),  # the error line
    ]
    recovered = cli("recover", model, after, "--report", "-o", os.path.join(tmp_path, "r.onnx"))
    assert recovered.returncode == 0, recovered.stderr
    assert _unsafe(recovered.stdout + recovered.stderr) == []
    for args in runs:
        result = cli(*args)
        assert result.returncode in (0, 2), result.stderr
        assert _unsafe(result.stdout) == [], args
        assert _unsafe(result.stderr) == [], args
        assert "\\x1b" in result.stdout + result.stderr, args


def test_log_lines_escape_the_names_they_quote(capsys: pytest.CaptureFixture[str]) -> None:
    from modelprov._cli._library_warnings import collected

    with collected(verbose=False, debug=False):
        logging.getLogger("modelprov").warning("module %s: %s", HOSTILE[0], HOSTILE[3])
    line = capsys.readouterr().err.rstrip("\n")
    assert line == "module \\x1b]0;owned\\x07: \\u202eevil" and _unsafe(line) == []
