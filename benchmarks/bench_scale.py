"""Every graph-only command on a Llama-config graph of ~48,000 nodes, beside the floor.

The floor is ``onnx_ir.load`` of the same file(s) (both files for two-model commands),
each command runs in its own process, and its CPU time (user + system, steadier than wall
time on a shared machine) and peak RSS (``ru_maxrss``) are printed
side by side with their ratios to the floor, in one run. Also timed: the README loop
(``for node in graph: modelprov.sources(model, node)``) against the floor.

Usage (from the repository root)::

    python -m benchmarks.bench_scale                 # 260 layers, ~48,000 nodes
    python -m benchmarks.bench_scale --layers 8      # a quick run
    python -m benchmarks.bench_scale --no-browser    # skip opening the report in Chromium

Generated files (the export, onnxruntime's basic optimization of it, the functionized
model) are cached in ``--out`` (default /tmp/modelprov-scale), so reruns are cheap.
Targets (issue 12): every command <= 3x the floor's time and peak RSS; the README loop
<= 1x the floor; the report's first render in headless Chromium <= 5 s, with a search
and a click that work (timed when chromium is installed); the report's file <= 0.02x the
ONNX file without weights and its data <= 24 bytes per node (packed and deflated).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys

from benchmarks._scale_model import build_scale_model

__all__ = ["main"]

_LOAD = "import onnx_ir as ir, sys\nfor path in sys.argv[1:]: ir.load(path)\n"

_LOOP = """
import sys, time, onnx_ir as ir, modelprov
model = ir.load(sys.argv[1])
started = time.process_time()
count = 0
for node in model.graph:
    count += len(modelprov.sources(model, node))
print(time.process_time() - started, len(model.graph), count)
"""

_ORT_BASIC = """
import sys, onnxruntime as ort
options = ort.SessionOptions()
options.log_severity_level = 3
options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
options.optimized_model_filepath = sys.argv[2]
ort.InferenceSession(sys.argv[1], options, providers=["CPUExecutionProvider"])
"""


_REPORT_TO_GRAPH = 0.02
_DATA_BYTES_PER_NODE = 24
"""Report size targets: the page's size over the ONNX file's without weights, and its
embedded data's bytes per node (the page's script and style are a fixed ~25 KB)."""
_DATA = re.compile(r'id="report-data"[^>]*>([^<]*)</script>')


def _cli(*arguments: str) -> list[str]:
    return [sys.executable, "-m", "modelprov.cli", *arguments]


def _prepare(path: str, folder: str) -> dict[str, str]:
    """The derived files the commands read, made once."""
    stem = os.path.splitext(path)[0]
    files = {
        "plain": path,
        "ort": stem + ".ort-basic.onnx",
        "recovered": stem + ".recovered.onnx",
        "functionized": stem + ".functionized.onnx",
    }
    if not os.path.exists(files["ort"]):
        subprocess.run([sys.executable, "-c", _ORT_BASIC, path, files["ort"]], check=True)
    for name, command in (
        ("recovered", _cli("recover", path, files["ort"], "-o", files["recovered"])),
        ("functionized", _cli("functionize", path, "-o", files["functionized"])),
    ):
        if not os.path.exists(files[name]):
            subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    return files


def _row(name: str, seconds: float, peak: int, floor: tuple[float, int]) -> dict[str, float]:
    time_ratio, rss_ratio = seconds / floor[0], peak / floor[1]
    print(
        f"{name:28s} {seconds:8.2f} s  x{time_ratio:5.2f}   {peak / 2**20:8.0f} MiB  "
        f"x{rss_ratio:5.2f}"
    )
    return {
        "seconds": round(seconds, 3),
        "peak_rss_mib": round(peak / 2**20, 1),
        "time_ratio": round(time_ratio, 2),
        "rss_ratio": round(rss_ratio, 2),
    }


_MEASURE = """
import resource, subprocess, sys
result = subprocess.run(sys.argv[1:], capture_output=True, text=True)
usage = resource.getrusage(resource.RUSAGE_CHILDREN)
print(result.returncode, usage.ru_maxrss * 1024, usage.ru_utime + usage.ru_stime)
sys.stdout.write(result.stdout)
sys.stderr.write(result.stderr)
"""


def _run(command: list[str]) -> tuple[float, int, str]:
    """CPU seconds (user + system: the machine may be shared), peak RSS bytes, stdout."""
    done = subprocess.run(
        [sys.executable, "-c", _MEASURE, *command], capture_output=True, text=True, check=True
    )
    first, _, out = done.stdout.partition("\n")
    code, peak, seconds = first.split()
    if int(code) != 0:
        raise SystemExit(f"{' '.join(command)} failed ({code}): {done.stderr[-2000:]}")
    return float(seconds), int(peak), out


def main() -> None:
    """Prints each command's time and peak RSS against the floor."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--layers", type=int, default=260)
    parser.add_argument("--out", default=os.path.join("/tmp", "modelprov-scale"))
    parser.add_argument(
        "--no-browser", action="store_true", help="skip opening the report in headless Chromium"
    )
    args = parser.parse_args()
    path = build_scale_model(args.layers, args.out)
    files = _prepare(path, args.out)
    work = os.path.join(args.out, f"work_{args.layers}")
    os.makedirs(work, exist_ok=True)

    floors: dict[tuple[str, ...], tuple[float, int]] = {}

    def floor(*names: str) -> tuple[float, int]:
        if names not in floors:
            elapsed, peak, _ = _run([sys.executable, "-c", _LOAD, *(files[n] for n in names)])
            floors[names] = (elapsed, peak)
        return floors[names]

    def out(name: str) -> str:
        return os.path.join(work, name)

    commands: list[tuple[str, list[str], tuple[str, ...]]] = [
        ("audit", _cli("audit", files["plain"]), ("plain",)),
        ("audit --json", _cli("audit", files["plain"], "--json"), ("plain",)),
        ("diff", _cli("diff", files["plain"], files["recovered"]), ("plain", "recovered")),
        ("inline", _cli("inline", files["functionized"], "-o", out("i.onnx")), ("functionized",)),
        ("functionize", _cli("functionize", files["plain"], "-o", out("f.onnx")), ("plain",)),
        ("overlay", _cli("overlay", files["plain"], "-o", out("o.json")), ("plain",)),
        ("report", _cli("report", files["plain"], "-o", out("r.html")), ("plain",)),
        (
            "recover (onnxruntime basic)",
            _cli("recover", files["plain"], files["ort"], "-o", out("r.onnx")),
            ("plain", "ort"),
        ),
    ]
    import onnx

    proto = onnx.load(path, load_external_data=False)
    nodes = len(proto.graph.node)
    for tensor in proto.graph.initializer:
        tensor.ClearField("raw_data")
    graph_bytes = proto.ByteSize()  # the ONNX file without its weights
    del proto
    print(f"Llama-config graph, {args.layers} layers: {nodes} nodes ({path})")
    floor_plain = floor("plain")
    print(f"{'command':28s} {'time':>10s}  ratio   {'peak RSS':>12s} ratio  (floor: onnx_ir.load)")
    results = {"floor": _row("floor: onnx_ir.load", *floor_plain, floor_plain)}
    for name, command, inputs in commands:
        base = floor(*inputs)
        elapsed, peak, _ = _run(command)
        results[name] = _row(name, elapsed, peak, base)
    elapsed, peak, printed = _run([sys.executable, "-c", _LOOP, files["plain"]])
    loop_seconds = float(printed.split()[0])
    loop_ratio = loop_seconds / floor_plain[0]
    print(
        f"{'README sources() loop':28s} {loop_seconds:8.2f} s  x{loop_ratio:5.2f}"
        f"   (loop only; whole process {elapsed:.2f} s, {peak / 2**20:.0f} MiB)"
    )
    results["readme_loop"] = {
        "seconds": round(loop_seconds, 3),
        "time_ratio": round(loop_seconds / floor_plain[0], 2),
    }
    report_bytes = os.path.getsize(out("r.html"))
    with open(out("r.html"), encoding="utf-8") as stream:
        data_bytes = len(_DATA.search(stream.read()).group(1))  # type: ignore[union-attr]
    results["report_size"] = {
        "bytes": report_bytes,
        "data_bytes": data_bytes,
        "data_bytes_per_node": round(data_bytes / nodes, 1),
        "ratio_to_onnx_without_weights": round(report_bytes / graph_bytes, 4),
    }
    print(
        f"report size: {report_bytes:,} bytes (x{report_bytes / graph_bytes:.4f} of the ONNX "
        f"file without weights, {graph_bytes:,} bytes), its data {data_bytes / nodes:.1f} "
        f"bytes/node; target <= x{_REPORT_TO_GRAPH} and <= {_DATA_BYTES_PER_NODE} bytes/node "
        "(at 260 layers)"
    )
    if not args.no_browser:
        from benchmarks._report_browser import time_report

        query = f"layers.{min(100, args.layers - 1)}."
        results["browser"] = time_report(out("r.html"), query)
        print(f"report in headless Chromium: {json.dumps(results['browser'])}")
    worst = max(
        (v["time_ratio"], k)
        for k, v in results.items()
        if k not in ("floor", "browser", "report_size")
    )
    print(f"worst time ratio: x{worst[0]:.2f} ({worst[1]}); target <= 3 (README loop <= 1)")
    print(json.dumps({"layers": args.layers, "nodes": nodes, "results": results}))


if __name__ == "__main__":
    main()
