"""The ``modelprov`` command end to end: real exports, real subprocesses, every field checked."""

from __future__ import annotations

import argparse
import inspect
import json
import os
import re

import onnx
import onnx_ir as ir
import onnxscript.optimizer
import pytest

import modelprov
from modelprov._cli import _examples
from modelprov.audit import audit
from modelprov.cli import build_parser, main
from modelprov.core._stack_trace import display_location
from modelprov.errors import ExitCode
from modelprov.report._embed import read_report_data
from tests._cli import cli, cli_many, ok_json
from tests.conftest import fresh_export

SUBCOMMANDS = (
    "export",
    "optimize",
    "recover",
    "functionize",
    "inline",
    "audit",
    "diff",
    "demo",
    "policies",
    "report",
    "overlay",
    "compare",
    "quantize",
)


def _line_of(text: str) -> str:
    """``file:line`` of a line of DoubleTranspose.forward, as stack traces name it."""
    lines, start = inspect.getsourcelines(_examples.DoubleTranspose.forward)
    offset = next(i for i, line in enumerate(lines) if text in line)
    return f"{inspect.getsourcefile(_examples.DoubleTranspose)}:{start + offset}"


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """The double transpose: plain export, onnxscript-optimized, modelprov-optimized (CLI)."""
    folder = tmp_path_factory.mktemp("cli")
    plain = fresh_export("double_transpose")
    onnx.save(ir.to_proto(plain), folder / "dt.onnx")
    onnx.save(ir.to_proto(onnxscript.optimizer.optimize(plain.clone())), folder / "dt.os.onnx")
    optimized = folder / "dt.opt.onnx"
    json_report = cli("optimize", str(folder / "dt.onnx"), "-o", str(optimized), "--json")
    assert json_report.returncode == 0, json_report.stderr
    return folder, json.loads(json_report.stdout)


def test_help_lists_every_subcommand_and_every_option_has_help():
    parser = build_parser()
    subparsers = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    assert tuple(subparsers.choices) == SUBCOMMANDS
    for name, sub in subparsers.choices.items():
        for action in sub._actions:
            assert action.help, f"{name} {action.dest} has no help text"
    result = cli("--help")
    assert result.returncode == 0
    for name in SUBCOMMANDS:
        assert name in result.stdout
    listed = result.stdout.split("exit codes:", 1)[1]
    for code in ExitCode:  # every exit code, each with its meaning
        assert re.search(rf"^  {int(code)} +{re.escape(code.meaning)}$", listed, re.M), code


def _main(capsys, *args: str) -> tuple[int, str, str]:
    """The command line in this process (for error paths; startup dominates subprocesses)."""
    try:
        code = main(list(args))
    except SystemExit as exit_:
        code = int(exit_.code or 0)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.parametrize(
    "args",
    [(), ("audit", "x.onnx", "--bogus"), ("functionize", "x", "-o", "y", "--level", "z")],
)
def test_usage_errors_exit_2(capsys, args):
    code, _, err = _main(capsys, *args)
    assert code == 2 and "modelprov" in err and "--help" in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_diff_of_onnxscript_output_lists_the_first_transpose(models):
    folder, _ = models
    as_json, text = cli_many(
        [
            ["diff", str(folder / "dt.onnx"), str(folder / "dt.os.onnx"), "--json"],
            ["diff", str(folder / "dt.onnx"), str(folder / "dt.os.onnx"), "--fail-under", "0.9"],
        ]
    )
    report = ok_json(as_json)
    assert report["format"] == "modelprov.diff" and report["version"] == 1
    assert (report["nodes_before"], report["nodes_after"]) == (5, 2)
    assert report["fx_nodes_dyn"]["lost"] == ["transpose"]
    assert report["fx_nodes_dyn"]["total"] == 3 and report["fx_nodes_dyn"]["kept"] == 2
    assert report["fx_nodes"]["recall"] == 0.5
    assert report["source_lines_dyn"]["lost"] == [_line_of("k.transpose(1, 2)")]
    assert report["lost_sources"]["transpose"] == _line_of("k.transpose(1, 2)")
    assert report["nodes_without_sources"] == []

    assert text.returncode == 1
    assert "FX-node recall (dyn) 0.667 is under 0.9" in text.stderr
    assert "FX nodes recall 0.50 (2/4), dyn 0.67 (2/3)" in text.stdout
    # text for people: the file relative to the current folder; JSON keeps it whole
    shown = display_location(_line_of("k.transpose(1, 2)"))
    assert not os.path.isabs(shown)
    assert f"  lost transpose [dyn]  ({shown})" in text.stdout
    assert "nodes without sources: 0" in text.stdout


def test_diff_of_modelprov_optimize_output_has_recall_one(models):
    folder, _ = models
    text = cli("diff", str(folder / "dt.onnx"), str(folder / "dt.opt.onnx"), "--fail-under", "1")
    assert text.returncode == 0, text.stderr
    assert "FX nodes recall 1.00 (4/4), dyn 1.00 (3/3)" in text.stdout
    assert "source lines recall 1.00 (3/3), dyn 1.00 (3/3)" in text.stdout
    assert "lost FX nodes: 0" in text.stdout
    report = modelprov.diff(
        onnx.load(str(folder / "dt.onnx")), onnx.load(str(folder / "dt.opt.onnx"))
    )
    for key in ("fx_nodes", "fx_nodes_dyn", "source_lines", "source_lines_dyn", "module_paths"):
        recall = getattr(report, key)
        assert recall.value == 1.0 and recall.lost == (), key


def test_optimize_report_per_step(models):
    folder, report = models
    assert report["format"] == "modelprov.optimize-report" and report["version"] == 1
    steps = report["steps"]
    assert all(step["name"].startswith("onnxscript.optimizer: ") for step in steps)
    assert (steps[0]["nodes_before"], steps[-1]["nodes_after"]) == (5, 2)
    rewrite = next(step for step in steps if step["name"].endswith("default rewrite rules (1)"))
    assert rewrite["merged_nodes"] >= 2 and rewrite["new_nodes"] >= 1
    assert all(step["lost_sources"] == {} for step in steps)
    assert report["diff"]["fx_nodes_dyn"]["recall"] == 1.0
    proto = onnx.load(str(folder / "dt.opt.onnx"))
    transpose = next(node for node in proto.graph.node if node.op_type == "Transpose")
    assert {p.key: p.value for p in transpose.metadata_props}["modelprov.sources"] == (
        '["transpose","transpose_1"]'
    )

    text = cli("optimize", str(folder / "dt.onnx"), "-o", str(folder / "t.onnx"), "--report")
    assert text.returncode == 0, text.stderr
    lines = text.stdout.splitlines()
    assert lines[0].startswith("onnxscript.optimizer: inline functions: nodes 5 -> 5; ")
    rewrite_line = next(line for line in lines if "default rewrite rules (1)" in line)
    assert rewrite_line.endswith("0 sources lost")
    assert "overall:" in text.stdout and "FX nodes recall 1.00 (4/4)" in text.stdout


def test_audit_text_and_json(models):
    folder, _ = models
    plain_text, plain_json = cli_many(
        [["audit", str(folder / "dt.onnx")], ["audit", str(folder / "dt.onnx"), "--json"]]
    )
    report = ok_json(plain_json)
    assert report["format"] == "modelprov.audit" and report["version"] == 1
    assert report["nodes"] == 5 and report["nodes_without_sources"] == []
    assert report["sources"] == 4
    assert report["fx_nodes"] == {
        "count": 4,
        "names": ["mul", "scalar_tensor_default", "transpose", "transpose_1"],
    }
    assert report["source_lines"]["count"] == 3
    assert _line_of("k.transpose(1, 2)") in report["source_lines"]["lines"]
    assert report["module_paths"] == {"count": 1, "paths": [""]}
    keys = report["key_coverage"]
    assert set(keys) == {
        "namespace",
        "pkg.torch.onnx.class_hierarchy",
        "pkg.torch.onnx.fx_node",
        "pkg.torch.onnx.name_scopes",
        "pkg.torch.onnx.stack_trace",
    }
    assert all(entry["nodes"] == 5 and entry["fraction"] == 1.0 for entry in keys.values())
    sizes = report["metadata_bytes"]
    assert sizes["total"] == sum(v for k, v in sizes.items() if k != "total")
    assert sizes["nodes"] == sum(entry["bytes"] for entry in keys.values())
    largest = report["largest_values"]
    assert len(largest) == 10
    assert [item["bytes"] for item in largest] == sorted(
        (item["bytes"] for item in largest), reverse=True
    )
    assert largest[0]["key"] == "pkg.torch.onnx.fx_node"
    assert report["invalid_metadata"] == [] and report["functions"] == []

    assert plain_text.returncode == 0
    lines = plain_text.stdout.splitlines()
    assert lines[0] == "nodes: 5 (0 without sources)"
    assert lines[1] == "sources: 4 (4 FX nodes, 3 source lines, 1 module paths)"
    assert lines[2].startswith(f"metadata: {sizes['total']:,} bytes (nodes {sizes['nodes']:,}")
    assert "  1.00 pkg.torch.onnx.stack_trace (5/5 nodes, " in plain_text.stdout
    assert "invalid metadata: none" in lines and "functions: none" in lines

    optimized = audit(str(folder / "dt.opt.onnx")).to_dict()
    assert optimized["nodes"] == 2 and optimized["sources"] == 4
    assert optimized["fx_nodes"]["count"] == 4 and optimized["source_lines"]["count"] == 3
    assert optimized["key_coverage"]["modelprov.sources"]["nodes"] == 2
    assert optimized["metadata_bytes"]["model"] > 0  # the sources table


def test_export_with_calibration_and_annotations(tmp_path):
    annotations = tmp_path / "annotations.json"
    annotations.write_text(json.dumps({"0": {"quant.bits": 8}}))
    out = tmp_path / "mlp.onnx"
    result = cli(
        "export",
        "tests._factories:mlp",
        "--onnx",
        str(out),
        "--calibrate",
        "3",
        "--annotations",
        str(annotations),
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == ""
    proto = onnx.load(str(out))
    gemm_or_matmul = [n for n in proto.graph.node if n.op_type in ("Gemm", "MatMul")]
    assert gemm_or_matmul
    by_key = [{p.key: p.value for p in node.metadata_props} for node in proto.graph.node]
    assert any(meta.get("quant.bits") == "8" for meta in by_key)
    relu = next(
        meta for node, meta in zip(proto.graph.node, by_key, strict=True) if node.op_type == "Relu"
    )
    assert relu["custom.min"] == "0.0" and float(relu["custom.max"]) > 0
    assert [p.name for p in tmp_path.iterdir()] != [] and not any(
        p.name.endswith(".tmp") for p in tmp_path.iterdir()
    )


def test_export_stablehlo_with_calibration(tmp_path):
    """Seed 003 through the command line: ranges as StableHLO op attributes."""
    out = tmp_path / "mlp.mlir"
    result = cli("export", "tests._factories:mlp", "--stablehlo", str(out), "--calibrate", "2")
    assert result.returncode == 0, result.stderr
    text = out.read_text()
    assert "stablehlo.maximum" in text
    ranged = [line for line in text.splitlines() if "custom.max" in line]
    assert len(ranged) == 3
    relu = next(line for line in ranged if "stablehlo.maximum" in line)
    assert "custom.min = 0.000000e+00 : f64" in relu and 'modelprov.module = "1"' in relu
    assert (tmp_path / "mlp.mlir.jaxexport").exists()
    # every file written is named on stderr, one line each
    reported = re.findall(r"^modelprov: wrote (.+?): ", result.stderr, re.M)
    assert sorted(reported) == sorted(str(path) for path in tmp_path.iterdir()), result.stderr
    assert len(reported) == 3
    strings = tmp_path / "strings.mlir"
    args = ("export", "tests._factories:mlp", "--stablehlo", str(strings), "--calibrate", "2")
    result = cli(*args, "--stablehlo-numbers", "string")
    assert result.returncode == 0, result.stderr
    relu = next(line for line in strings.read_text().splitlines() if "stablehlo.maximum" in line)
    assert 'custom.min = "0.0"' in relu  # seed 003's form


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["tests._factories:mlp"], "give --onnx"),
        (["tests._factories:nope", "--onnx", "{tmp}/a.onnx"], "has no attribute 'nope'"),
        (["no_such_module:f", "--onnx", "{tmp}/a.onnx"], "cannot import module"),
        (["tests._factories:not_a_model", "--onnx", "{tmp}/a.onnx"], "not a torch.nn.Module"),
        (["tests._factories:raises", "--onnx", "{tmp}/a.onnx"], "factory raised ValueError"),
        (["tests._factories:mlp", "--onnx", "{tmp}/a.onnx", "--calibrate", "0"], "positive"),
    ],
)
def test_export_errors_exit_2(capsys, tmp_path, args, message):
    code, _, err = _main(capsys, "export", *(a.format(tmp=tmp_path) for a in args))
    assert code == 2 and message in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert list(tmp_path.iterdir()) == []


def test_export_to_a_missing_folder_exits_3(capsys, tmp_path):
    code, _, err = _main(
        capsys, "export", "tests._factories:mlp", "--onnx", f"{tmp_path}/no/a.onnx"
    )
    assert code == ExitCode.CANNOT_WRITE and "does not exist" in err
    assert list(tmp_path.iterdir()) == []


def test_recover_on_onnxscript_output(models, tmp_path):
    folder, _ = models
    out = tmp_path / "recovered.onnx"
    result = cli("recover", str(folder / "dt.onnx"), str(folder / "dt.os.onnx"), "-o", str(out))
    assert result.returncode == 0, result.stderr
    assert result.stdout == ""
    report = modelprov.diff(onnx.load(str(folder / "dt.onnx")), onnx.load(str(out)))
    assert report.fx_nodes_dyn.value == 1.0


def test_recover_report_counts_every_node(models, tmp_path):
    folder, _ = models
    out = tmp_path / "recovered.onnx"
    args = ("recover", str(folder / "dt.onnx"), str(folder / "dt.os.onnx"), "-o", str(out))
    report = ok_json(cli(*args, "--json"))
    assert report["format"] == "modelprov.recover-report" and report["version"] == 1
    nodes = len(onnx.load(str(out)).graph.node)
    assert report["nodes"] == nodes
    assert (
        report["exact"] + report["named"] + report["inferred"] + len(report["unattributed"])
        == nodes
    )
    text = cli(*args, "--report")
    assert text.returncode == 0 and text.stdout.startswith(f"recovered {nodes} nodes:")


def test_functionize_then_inline(models, tmp_path):
    folder, _ = models
    functions = tmp_path / "functions.onnx"
    result = cli("functionize", str(folder / "dt.onnx"), "-o", str(functions))
    assert result.returncode == 0, result.stderr
    report = audit(str(functions))
    assert report.functions, report
    assert all(item.calls >= 1 and item.domain == "pkg.torch.aten" for item in report.functions)
    inlined = tmp_path / "inlined.onnx"
    result = cli("inline", str(functions), "-o", str(inlined))
    assert result.returncode == 0, result.stderr
    report = modelprov.diff(onnx.load(str(folder / "dt.onnx")), onnx.load(str(inlined)))
    assert report.fx_nodes.value == 1.0


@pytest.mark.parametrize("command", ["audit", "diff", "recover", "functionize", "inline"])
def test_bad_input_files_exit_2_with_a_clear_message(capsys, models, tmp_path, command):
    folder, _ = models
    good = (folder / "dt.onnx").read_bytes()
    cases = {
        "missing.onnx": (None, "no such file"),
        "folder.onnx": ("dir", "is a directory"),
        "empty.onnx": (b"", "the file is empty"),
        "random.onnx": (bytes(range(256)) * 16, "not a readable ONNX model"),
        "truncated.onnx": (good[: len(good) // 2], "not a readable ONNX model"),
    }
    out = tmp_path / "out.onnx"
    for name, (content, message) in cases.items():
        path = tmp_path / name
        if content == "dir":
            path.mkdir()
        elif isinstance(content, bytes):
            path.write_bytes(content)
        inputs = {
            "audit": [str(path)],
            "diff": [str(folder / "dt.onnx"), str(path)],
            "recover": [str(folder / "dt.onnx"), str(path), "-o", str(out)],
        }.get(command, [str(path), "-o", str(out)])
        code, stdout, err = _main(capsys, command, *inputs)
        assert code == 2, (name, err)
        assert f"modelprov: error: {path}: {message}" in err
        assert stdout == "" and not out.exists()


def test_report_and_overlay_through_the_command_line(models, tmp_path):
    folder, _ = models
    html = tmp_path / "report.html"
    result = cli(
        "report", str(folder / "dt.opt.onnx"), "--before", str(folder / "dt.onnx"), "-o", str(html)
    )
    assert result.returncode == 0, result.stderr
    page = html.read_text()
    assert page.startswith("<!DOCTYPE html>")
    assert "transpose_1" in {source["fx"] for source in read_report_data(page)["sources"]}
    assert "http://" not in page.replace("http://www.w3.org", "")
    overlay = tmp_path / "overlay.json"
    result = cli("overlay", str(folder / "dt.opt.onnx"), "-o", str(overlay))
    assert result.returncode == 0, result.stderr
    data = json.loads(overlay.read_text())
    (graph,) = data.values()
    assert len(graph["results"]) == 2
    missing = cli(
        "overlay",
        str(folder / "dt.opt.onnx"),
        "-o",
        str(tmp_path / "k.json"),
        "--key",
        "custom.nothing",
    )
    assert missing.returncode == 2 and "custom.nothing" in missing.stderr
    assert not (tmp_path / "k.json").exists()
