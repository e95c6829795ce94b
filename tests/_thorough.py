"""Runs hypothesis properties with a thorough profile in a fresh process.

hypothesis binds a test's settings when the test is defined, so a slow-tier test that wants
more examples runs the default-tier properties again in a child pytest, with an environment
variable selecting the profile, and reads back how many examples each property passed.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys


def passing_counts(target: str, profile_variable: str) -> list[int]:
    """The examples each property of ``target`` (a test file or node id) passed with
    ``profile_variable=thorough``; fails the calling test with pytest's output if any failed."""
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-m",
            "not slow",
            "--hypothesis-show-statistics",
            target,
        ],
        env={**os.environ, profile_variable: "thorough"},
        capture_output=True,
        text=True,
        check=False,
    )
    lines = [line for line in result.stdout.splitlines() if "W:onnxruntime" not in line]
    assert result.returncode == 0, "\n".join(lines)[-6000:]
    return [int(n) for n in re.findall(r"(\d+) passing, ", result.stdout)]
