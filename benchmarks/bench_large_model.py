"""Peak RSS and time of ``modelprov audit`` / ``diff`` on a model with 4 GiB of external
weights (a sparse file), against a plain ``onnx.load(path, load_external_data=False)``.

Run from the repository root: ``python -m benchmarks.bench_large_model [FOLDER]``. Each
measurement runs in its own process; peak RSS is that process's ``ru_maxrss``.
"""

from __future__ import annotations

import json
import sys
import tempfile

from tests._large_model import LAYER_BYTES, LAYERS, build_large_model, measure

__all__ = ["main"]


def main() -> None:
    """Prints peak RSS and time per command."""
    folder = sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp(prefix="modelprov-large-")
    before, after = build_large_model(folder, drop_layer=3)
    weights = LAYERS * LAYER_BYTES
    plain = (
        "import onnx, sys; m = onnx.load(sys.argv[1], load_external_data=False); "
        "print(len(m.graph.node))"
    )
    runs = {
        "onnx.load(load_external_data=False)": [sys.executable, "-c", plain, before],
        "python -c 'import modelprov'": [sys.executable, "-c", "import modelprov"],
        "modelprov audit": [sys.executable, "-m", "modelprov.cli", "audit", before, "--json"],
        "modelprov diff": [sys.executable, "-m", "modelprov.cli", "diff", before, after],
    }
    print(f"model: {LAYERS} x 512 MiB external weights ({weights / 2**30:.1f} GiB, sparse)")
    results = {}
    for name, command in runs.items():
        code, peak, elapsed, _, err = measure(command)
        if code != 0:
            raise SystemExit(f"{name} failed: {err}")
        results[name] = {"peak_rss_mib": round(peak / 2**20, 1), "seconds": round(elapsed, 2)}
        print(f"{name:40s} peak RSS {peak / 2**20:8.1f} MiB  time {elapsed:6.2f} s")
    base = results["onnx.load(load_external_data=False)"]
    for name in ("modelprov audit", "modelprov diff"):
        print(
            f"{name} / onnx.load: RSS x{results[name]['peak_rss_mib'] / base['peak_rss_mib']:.1f}, "
            f"time x{results[name]['seconds'] / base['seconds']:.1f}"
        )
    print(json.dumps(results))


if __name__ == "__main__":
    main()
