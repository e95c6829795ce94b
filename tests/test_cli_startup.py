"""``modelprov --version`` and every ``--help`` answer without loading onnx, torch or numpy
(issue 22, item 7): each runs the console script's entry point in a fresh interpreter and
looks at what it imported."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from modelprov._cli._commands import COMMANDS

_HEAVY = ("onnx", "onnx_ir", "onnxscript", "torch", "numpy", "ml_dtypes", "jax")

_PROBE = """
import json, sys
argv, watched = json.loads(sys.argv[1]), json.loads(sys.argv[2])
sys.argv = ["modelprov", *argv]
from _modelprov_launch import main
code = main()
heavy = sorted(m for m in watched if m in sys.modules)
sys.stderr.write("\\nHEAVY " + json.dumps([code, heavy]) + "\\n")
"""
"""Runs the console script's ``main`` as ``modelprov ARGV``, then reports on stderr its exit
code and which of the watched modules were imported."""


def _loaded_by(*argv: str) -> tuple[int, list[str], str]:
    run = subprocess.run(
        [sys.executable, "-c", _PROBE, json.dumps(argv), json.dumps(_HEAVY)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    marker = run.stderr.rsplit("HEAVY ", 1)
    assert len(marker) == 2, run.stderr
    exit_code, heavy = json.loads(marker[1])
    return exit_code, heavy, run.stdout


@pytest.mark.parametrize(
    "argv",
    [("--version",), ("--help",), *((command.name, "--help") for command in COMMANDS)],
    ids=lambda argv: " ".join(argv),
)
def test_version_and_help_load_no_heavy_library(argv: tuple[str, ...]) -> None:
    exit_code, heavy, out = _loaded_by(*argv)
    assert exit_code == 0
    assert out.strip(), "printed nothing"
    assert heavy == [], f"modelprov {' '.join(argv)} imported {heavy}"


def test_the_probe_sees_a_command_that_loads_onnx() -> None:
    exit_code, heavy, _ = _loaded_by("audit", "/nonexistent/model.onnx")
    assert exit_code == 2
    assert "onnx" in heavy  # the probe can fail: a real command does load onnx
