"""The subcommands, run in process: optimize writes a model whose every node has sources,
audit reads it back, policies prints a file that reads back equal; each command once."""

from __future__ import annotations

import json
import pathlib

import onnx_ir as ir
import pytest

from modelprov._cli._commands import COMMANDS
from modelprov._cli._examples import plain_export_bytes
from modelprov.cli import build_parser, main
from modelprov.core._policy import DEFAULT_POLICIES, parse_policies


def _export(path: pathlib.Path) -> None:
    path.write_bytes(plain_export_bytes("mlp"))


def test_optimize_writes_sources_audit_reads_them(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plain, optimized = tmp_path / "plain.onnx", tmp_path / "optimized.onnx"
    _export(plain)
    before = plain.read_bytes()
    assert main(["-q", "optimize", str(plain), "-o", str(optimized)]) == 0
    assert plain.read_bytes() == before
    capsys.readouterr()
    assert main(["audit", str(optimized), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["nodes"] == len(ir.load(str(optimized)).graph)
    assert report["nodes_without_sources"] == []
    assert main(["-q", "optimize", str(plain), "-o", str(plain)]) != 0  # never over its input
    assert plain.read_bytes() == before


def test_policies_prints_the_defaults_as_a_file_that_reads_back(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["policies", "--full"]) == 0
    assert parse_policies(capsys.readouterr().out) == DEFAULT_POLICIES


def test_every_command_is_declared_once_and_parses() -> None:
    names = [command.name for command in COMMANDS]
    assert len(names) == len(set(names))
    parser = build_parser(complete=True)
    for command in COMMANDS:
        assert command.help and callable(command.handler)
        with pytest.raises(SystemExit) as stopped:
            parser.parse_args([command.name, "--help"])
        assert stopped.value.code == 0
