"""The command line's startup: CPU time of ``modelprov --version`` and ``--help`` answers.

Usage: python -m benchmarks.bench_cli_startup [--repeat 5]
Runs each command line in fresh interpreters, interleaved with ``python -c pass``, and prints
the median CPU time (user + system, the children's rusage) of each and its ratio to the bare
interpreter (target: at most 0.3 s CPU).
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys

_COMMANDS: dict[str, list[str]] = {
    "python -c pass": ["-c", "pass"],
    "modelprov --version": ["-m", "modelprov.cli", "--version"],
    "modelprov --help": ["-m", "modelprov.cli", "--help"],
    "modelprov optimize --help": ["-m", "modelprov.cli", "optimize", "--help"],
    "modelprov export --help": ["-m", "modelprov.cli", "export", "--help"],
}


def _cpu_seconds(arguments: list[str]) -> float:
    """CPU time (user + system) of one fresh interpreter running ``arguments``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, *arguments], check=True, capture_output=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=5)
    options = parser.parse_args()
    times: dict[str, list[float]] = {name: [] for name in _COMMANDS}
    for _ in range(options.repeat):
        for name, arguments in _COMMANDS.items():
            times[name].append(_cpu_seconds(arguments))
    baseline = statistics.median(times["python -c pass"])
    for name, measured in times.items():
        median = statistics.median(measured)
        print(f"{name:28} {median:6.3f} s CPU  {median / baseline:5.1f}x python -c pass")


if __name__ == "__main__":
    main()
