"""Policies files on real exports: the merged metadata follows the file, through the API and
through every command that merges (export, optimize, recover, functionize, quantize)."""

from __future__ import annotations

import json
import pathlib
from typing import Any

import numpy as np
import onnx
import onnx_ir as ir
import onnxscript.optimizer
import pytest

import modelprov
from modelprov.core import _policy as policy
from modelprov.keys import (
    FX_NODE_KEY,
    MODULE_DOMAIN,
    NAMESPACE_KEY,
    POLICIES_FORMAT,
    STACK_TRACE_KEY,
)
from modelprov.policy import load_policies
from tests._checks import run
from tests._cli import cli, cli_many
from tests.conftest import example_inputs, fresh_export

TEAM_RULES = {
    "format": POLICIES_FORMAT,
    "version": 1,
    "keys": {
        "custom.max": "max",
        "custom.note": {"policy": "join", "sep": "; "},
        "team": "drop",
    },
}
"""custom.max by max (not the output's), notes joined by "; ", the team key dropped."""

FIRST_FX_NODE = {
    "format": POLICIES_FORMAT,
    "version": 1,
    "keys": {FX_NODE_KEY: "first", NAMESPACE_KEY: "common_prefix"},
}
"""torch.onnx's own keys merged otherwise: the first FX node only, the namespaces' stem."""


def _write(folder: pathlib.Path, name: str, document: dict[str, Any]) -> str:
    path = folder / name
    path.write_text(json.dumps(document), encoding="utf-8")
    return str(path)


def _transposes(model: ir.Model) -> list[ir.Node]:
    return [node for node in model.graph if node.op_type == "Transpose"]


def _annotated() -> ir.Model:
    """The double transpose with user keys on its two transposes (first, then second)."""
    model = fresh_export("double_transpose")
    first, second = _transposes(model)
    first.metadata_props.update({"custom.max": "9", "custom.note": "a", "team": "x"})
    second.metadata_props.update({"custom.max": "7", "custom.note": "b", "team": "y"})
    return model


def _merged(model: ir.Model) -> list[tuple[ir.Node, list[modelprov.Source]]]:
    """The nodes of ``model`` with several sources, and their sources."""
    found = []
    for node in model.graph:
        sources = modelprov.sources(model, node)
        if len(sources) > 1:
            found.append((node, sources))
    return found


# --- the API --------------------------------------------------------------------------------


def test_optimize_merges_user_keys_as_the_file_says(tmp_path: pathlib.Path) -> None:
    rules = load_policies(_write(tmp_path, "team.json", TEAM_RULES))
    by_default = modelprov.optimize(_annotated())
    by_file = modelprov.optimize(_annotated(), policies=rules)
    ((default_node,), (file_node,)) = _transposes(by_default), _transposes(by_file)
    assert default_node.metadata_props["custom.max"] == "7"  # from_output: the second's
    assert json.loads(default_node.metadata_props["team"]) == ["x", "y"]
    assert json.loads(default_node.metadata_props["custom.note"]) == ["a", "b"]
    assert file_node.metadata_props["custom.max"] == "9"
    assert file_node.metadata_props["custom.note"] == "a; b"
    assert "team" not in file_node.metadata_props
    # Keys the file does not name keep their default policy; the sources keep every value.
    for key in (FX_NODE_KEY, NAMESPACE_KEY, STACK_TRACE_KEY):
        assert file_node.metadata_props[key] == default_node.metadata_props[key]
    assert [s.metadata["team"] for s in modelprov.sources(by_file, file_node)] == ["x", "y"]
    inputs = [t.numpy() for t in example_inputs("double_transpose")]
    np.testing.assert_allclose(run(by_file, inputs)[0], run(by_default, inputs)[0], rtol=1e-6)


def test_transformer_encoder_fused_nodes_follow_the_file(tmp_path: pathlib.Path) -> None:
    rules = load_policies(_write(tmp_path, "first.json", FIRST_FX_NODE))
    by_default = modelprov.optimize(fresh_export("transformer_encoder"))
    by_file = modelprov.optimize(fresh_export("transformer_encoder"), policies=rules)
    assert [n.op_type for n in by_file.graph] == [n.op_type for n in by_default.graph]
    merged = _merged(by_file)
    assert len(merged) >= 5
    changed = 0
    for (node, sources), default_node in zip(
        merged,
        (n for n in by_default.graph if len(modelprov.sources(by_default, n)) > 1),
        strict=True,
    ):
        fx_nodes = [s.metadata[FX_NODE_KEY] for s in sources if FX_NODE_KEY in s.metadata]
        assert node.metadata_props[FX_NODE_KEY] == fx_nodes[0], node.name
        spaces = [s.metadata[NAMESPACE_KEY] for s in sources if NAMESPACE_KEY in s.metadata]
        assert node.metadata_props[NAMESPACE_KEY] == policy.common_prefix(
            spaces, policy.MergeContext(NAMESPACE_KEY)
        )
        changed += dict(node.metadata_props) != dict(default_node.metadata_props)
    assert changed >= 5
    inputs = [t.numpy() for t in example_inputs("transformer_encoder")]
    np.testing.assert_allclose(run(by_file, inputs)[0], run(by_default, inputs)[0], rtol=1e-5)


def test_export_takes_policies_from_a_file(tmp_path: pathlib.Path) -> None:
    from modelprov._cli import _examples

    rules = load_policies(_write(tmp_path, "first.json", FIRST_FX_NODE))
    model, args = _examples.double_transpose()
    program = modelprov.export(model, args, policies=rules)
    ((node,),) = [_transposes(program.model)]
    sources = modelprov.sources(program.model, node)
    assert len(sources) == 2
    assert node.metadata_props[FX_NODE_KEY] == sources[0].metadata[FX_NODE_KEY]


# --- the command line -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def ran(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Every merging command run with a policies file; the outputs by name."""
    folder = tmp_path_factory.mktemp("policies")
    team = _write(folder, "team.json", TEAM_RULES)
    first = _write(folder, "first.json", FIRST_FX_NODE)
    annotated = folder / "annotated.onnx"
    onnx.save(ir.to_proto(_annotated()), annotated)
    stripped = onnxscript.optimizer.optimize(_annotated())
    for node in stripped.graph:
        node.metadata_props.clear()
    onnx.save(ir.to_proto(stripped), folder / "stripped.onnx")
    onnx.save(ir.to_proto(fresh_export("cnn")), folder / "cnn.onnx")
    out = {name: str(folder / f"{name}.onnx") for name in ("opt", "rec", "fn", "dt", "quant")}
    out["dt_quant"] = str(folder / "dt.quant.onnx")
    runs = {
        "optimize": ["optimize", str(annotated), "-o", out["opt"], "--policies", team],
        "recover": [
            *("recover", str(annotated), str(folder / "stripped.onnx")),
            *("-o", out["rec"], "--policies", team),
        ],
        "functionize": [
            *("functionize", str(folder / "cnn.onnx"), "-o", out["fn"]),
            *("--level", "module", "--policies", first),
        ],
        "export --quantize": [
            *("export", "tests._factories:double_transpose", "--onnx", out["dt"]),
            *("--calibrate", "2", "--quantize", "--policies", first),
        ],
    }
    results = dict(zip(runs, cli_many(list(runs.values())), strict=True))
    ranges = _write(folder, "ranges.json", {"k": [-6.0, 6.0]})  # the graph input's range
    results["quantize"] = cli(
        "quantize", out["dt"], "-o", out["quant"], "--ranges", ranges, "--policies", first
    )
    for name, result in results.items():
        assert result.returncode == 0, (name, result.stderr)
    return out


def test_cli_optimize_follows_the_file(ran: dict[str, str]) -> None:
    ((node,),) = [_transposes(ir.load(ran["opt"]))]
    ((default_node,),) = [_transposes(modelprov.optimize(_annotated()))]
    assert node.metadata_props["custom.max"] == "9"
    assert node.metadata_props["custom.note"] == "a; b"
    assert "team" not in node.metadata_props
    assert default_node.metadata_props["custom.max"] == "7"
    assert "team" in default_node.metadata_props


def test_cli_recover_follows_the_file(ran: dict[str, str]) -> None:
    recovered = ir.load(ran["rec"])
    ((node,),) = [_transposes(recovered)]
    assert len(modelprov.sources(recovered, node)) == 2
    assert node.metadata_props["custom.max"] == "9"
    assert node.metadata_props["custom.note"] == "a; b"
    assert "team" not in node.metadata_props


def _check_first_fx_node(model: ir.Model, at_least: int) -> None:
    merged = _merged(model)
    assert len(merged) >= at_least, [n.name for n, _ in merged]
    for node, sources in merged:
        fx_nodes = [s.metadata[FX_NODE_KEY] for s in sources if FX_NODE_KEY in s.metadata]
        assert node.metadata_props.get(FX_NODE_KEY) == fx_nodes[0], node.name
        assert "\n" not in fx_nodes[0]


def test_cli_functionize_calls_follow_the_file(ran: dict[str, str]) -> None:
    functionized = ir.load(ran["fn"])
    calls = [node for node in functionized.graph if node.domain == MODULE_DOMAIN]
    assert len(calls) >= 2
    _check_first_fx_node(functionized, at_least=2)


@pytest.mark.parametrize("output", ["dt", "dt_quant", "quant"])
def test_cli_export_and_quantize_follow_the_file(ran: dict[str, str], output: str) -> None:
    """export, export --quantize and quantize: merged nodes (Q/DQ nodes included) carry the
    first FX node only (by default all of them, one per line)."""
    model = ir.load(ran[output])
    quantized = any(node.op_type == "QuantizeLinear" for node in model.graph)
    assert quantized == (output != "dt")
    _check_first_fx_node(model, at_least=2)


def test_every_command_that_merges_takes_the_one_policies_flag() -> None:
    import inspect

    from modelprov._cli._commands import _POLICIES, COMMANDS

    # What each command runs (a pass's options are its constructor's keywords).
    api = {
        "export": modelprov.export,
        "quantize": modelprov.quantize,
        "optimize": modelprov.OptimizeProvenancePass,
        "recover": modelprov.recover,
        "functionize": modelprov.FunctionizePass,
        "inline": modelprov.InlineProvenancePass,
    }
    merging = set()
    for command in COMMANDS:
        called = api.get(command.name)
        if called is not None and "policies" in inspect.signature(called).parameters:
            merging.add(command.name)
        flags = [
            item for item in command.arguments if getattr(item, "flags", ()) == ("--policies",)
        ]
        assert flags == ([_POLICIES] if command.name in merging else []), command.name
    assert merging == {"export", "optimize", "recover", "functionize", "quantize"}


def test_export_stablehlo_scopes_keys_as_the_file_says(tmp_path: pathlib.Path) -> None:
    """custom.max is value-scoped by default (only ops making a module's output carry it);
    a file giving it ``max`` makes it module-scoped (every op of the module carries it)."""
    pytest.importorskip("jax")
    from modelprov._cli import _examples

    module_scoped = {"format": POLICIES_FORMAT, "version": 1, "keys": {"custom.max": "max"}}
    rules = load_policies(_write(tmp_path, "module.json", module_scoped))
    model, args = _examples.transformer_encoder()
    ranges = {"layers.0": {"custom.max": "3"}, "layers.1": {"custom.max": "5"}}
    by_default = modelprov.export_stablehlo(model, args, annotations=ranges)
    by_file = modelprov.export_stablehlo(model, args, annotations=ranges, policies=rules)
    carrying = [
        [op.attributes.get("custom.max") for op in program.ops if "custom.max" in op.attributes]
        for program in (by_default, by_file)
    ]
    assert sorted(carrying[0]) == ["3", "5"]  # the two layers' outputs
    assert len(carrying[1]) > 50 and set(carrying[1]) == {"3", "5"}
    assert len(by_file.ops) == len(by_default.ops)


def test_policies_command_writes_the_defaults_as_a_file_that_reads_back(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from modelprov.cli import main

    assert main(["policies"]) == 0
    assert policy.parse_policies(capsys.readouterr().out) == policy.DEFAULT_POLICIES
    assert main(["policies", "--full"]) == 0
    full = json.loads(capsys.readouterr().out)
    assert full["base"] == "none" and full["keys"]["custom.max"] == "from_output"
    assert policy.parse_policies(full) == policy.DEFAULT_POLICIES


def test_policies_command_says_which_entry_decides_a_key(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from modelprov.cli import main

    rules = _write(tmp_path, "team.json", TEAM_RULES)
    keys = ("custom.max", "team", "unknown.key")
    argv = ["policies", rules, "--json", *(part for key in keys for part in ("--key", key))]
    assert main(argv) == 0
    decided = json.loads(capsys.readouterr().out)
    file_policies = load_policies(rules)
    for key in keys:
        assert decided[key]["entry"] == file_policies.deciding_entry(key)
    assert decided["unknown.key"] == {"policy": "union", "entry": None, "value_scoped": False}
    assert decided["custom.max"]["value_scoped"] is False  # the file makes it max over sources
    assert main(["policies", rules, "--key", "custom.max"]) == 0
    assert capsys.readouterr().out.startswith("custom.max: max (module-scoped; from entry")


def test_policies_command_refuses_a_bad_file_in_one_line(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from modelprov.cli import main

    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "modelprov.policies", "version": 1, "keys": {"x": "maximum"}}')
    assert main(["policies", str(bad)]) == 2
    error = capsys.readouterr().err
    assert str(bad) in error and "maximum" in error and "Traceback" not in error
