"""Path-sensitive tests pass from a checkout in a folder named ``modelprov`` (git's default).

A test that recognises modelprov's own frames by the folder name ``modelprov/`` passes in a
checkout called anything else and fails in a fresh clone, where the test files themselves sit
in ``modelprov/tests/``. This copies the checkout into ``<tmp>/modelprov`` and runs the tests
that look at file paths and user frames there, on that copy's sources.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

_ROOT = Path(__file__).resolve().parents[1]

# The tests that classify frames or files by their paths (user frames, tool frames, paths
# relative to a root), in both backends.
PATH_SENSITIVE = (
    "tests/stablehlo/test_stablehlo_downstream.py"
    "::test_locations_name_module_path_source_node_and_the_users_line",
    "tests/stablehlo/test_stablehlo_downstream.py"
    "::test_xla_hlo_metadata_names_module_paths_and_user_lines",
    "tests/stablehlo/test_stablehlo_user_frames.py",
    "tests/test_user_frames.py",
    "tests/test_trace_hygiene.py::test_paths_relative_to_root_in_nodes_and_table",
    "src/modelprov/stablehlo/lower/_frames_test.py",
)


def _copy_checkout(target: Path) -> None:
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", ".pytest_cache", "*.egg-info")
    for name in ("src", "tests"):
        shutil.copytree(_ROOT / name, target / name, ignore=ignore)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(_ROOT / name, target / name)


@pytest.mark.slow
def test_path_sensitive_tests_pass_in_a_checkout_named_modelprov(tmp_path: Path) -> None:
    checkout = tmp_path / "modelprov"
    _copy_checkout(checkout)
    env = {**os.environ, "PYTHONPATH": str(checkout / "src")}
    where = subprocess.run(
        [sys.executable, "-c", "import modelprov; print(modelprov.__file__)"],
        cwd=checkout,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert Path(where.stdout.strip()).is_relative_to(checkout / "src" / "modelprov")
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *PATH_SENSITIVE],
        cwd=checkout,
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert " passed" in done.stdout and " failed" not in done.stdout
