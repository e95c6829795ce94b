"""Running the real ``modelprov`` command line in subprocesses, several at once."""

from __future__ import annotations

import concurrent.futures
import json
import os
import subprocess
import sys
from collections.abc import Sequence
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def cli(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """``python -m modelprov.cli ARGS`` from the repository root (so ``tests._factories``
    imports), stdout and stderr captured."""
    return subprocess.run(
        [sys.executable, "-m", "modelprov.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        cwd=ROOT,
    )


def cli_many(runs: Sequence[Sequence[str]]) -> list[subprocess.CompletedProcess[str]]:
    """Runs several command lines concurrently (startup dominates), results in order."""
    workers = max(2, os.cpu_count() or 2)
    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
        return list(pool.map(lambda args: cli(*args), runs))


def ok_json(result: subprocess.CompletedProcess[str]) -> Any:
    """The JSON a successful run printed."""
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)
