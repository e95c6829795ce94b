"""Interrupted writes leave nothing behind; signals and closed pipes end quietly.

These run the real command line or a real save in subprocesses (signals need their own
process); the model is synthetic and large enough that a save takes a moment. The
command-line ones (Ctrl-C, SIGTERM, a closed stdout) are in the slow tier.
"""

from __future__ import annotations

import importlib.metadata
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import onnx
import onnx_ir as ir
import pytest

from modelprov._model_io._files import atomic_write_bytes, save_model
from modelprov._model_io._output import writer_tag
from tests._cli import ROOT
from tests._synthetic import synthetic_model

_SAVE_FOREVER = """
import sys, numpy as np, onnx_ir as ir
from modelprov._model_io._files import save_model
from tests._synthetic import synthetic_model
model = synthetic_model(200)
weights = ir.Value(name="w", const_value=ir.tensor(np.zeros((64, 1024, 1024), np.float32)))
model.graph.register_initializer(weights)
print("saving", flush=True)
while True:
    save_model(model, sys.argv[1], external_data=True)
"""


def _python(code: str, *args: str, **kwargs: object) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([ROOT, os.path.join(ROOT, "src")])}
    return subprocess.Popen(
        [sys.executable, "-c", code, *args],
        cwd=ROOT,
        env=env,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        **kwargs,  # type: ignore[call-overload]
    )


def _wait_for_temporaries(folder: Path, deadline: float = 120) -> None:
    start = time.monotonic()
    while time.monotonic() - start < deadline:
        if any("modelprov-" in p.name for p in folder.iterdir()):
            return
        time.sleep(0.05)
    raise AssertionError(f"no temporary files appeared in {folder}")


@pytest.mark.parametrize("kill", [signal.SIGKILL, signal.SIGTERM])
def test_a_save_killed_midway_leaves_only_the_real_output_after_the_next_write(
    tmp_path: Path, kill: signal.Signals
) -> None:
    out = tmp_path / "model.onnx"
    process = _python(_SAVE_FOREVER, str(out))
    assert process.stdout is not None and process.stdout.readline().strip() == "saving"
    _wait_for_temporaries(tmp_path)
    process.send_signal(kill)
    process.wait(timeout=60)
    leftovers = [p.name for p in tmp_path.iterdir() if "modelprov-" in p.name]
    if kill == signal.SIGKILL:
        assert leftovers, "the kill came too late to test anything"
    save_model(synthetic_model(20), out)
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names in (["model.onnx"], ["model.onnx", "model.onnx.data"])
    assert len(onnx.load(str(out), load_external_data=False).graph.node) == 20


def test_the_next_small_write_cleans_up_too_but_never_a_live_writers_files(tmp_path: Path) -> None:
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        check=True,
        capture_output=True,
        text=True,
    )
    gone, tag = int(dead.stdout), writer_tag()
    stale_file = tmp_path / f".report.html.modelprov-{gone}-{tag}-{'a' * 16}.tmp"
    stale_dir = tmp_path / f".modelprov-{gone}-{tag}-{'b' * 16}"
    live_file = tmp_path / f".x.modelprov-{os.getppid()}-{tag}-{'c' * 16}.tmp"
    someone_else = tmp_path / ".model.onnx.abc.tmp"
    stale_file.write_bytes(b"partial")
    stale_dir.mkdir()
    (stale_dir / "model.onnx.data").write_bytes(b"weights")
    live_file.write_bytes(b"in progress")
    someone_else.write_bytes(b"not ours")
    atomic_write_bytes(tmp_path / "report.html", b"<html></html>")
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == sorted(["report.html", live_file.name, someone_else.name])


def test_outputs_get_the_umask_permissions(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        atomic_write_bytes(tmp_path / "a.bin", b"x")
        save_model(synthetic_model(5), tmp_path / "m.onnx")
        save_model(synthetic_model(5), tmp_path / "e.onnx", external_data=True)
        os.umask(0o077)
        atomic_write_bytes(tmp_path / "private.bin", b"x")
    finally:
        os.umask(old)
    for name in ("a.bin", "m.onnx", "e.onnx"):
        assert (tmp_path / name).stat().st_mode & 0o777 == 0o644, name
    assert (tmp_path / "private.bin").stat().st_mode & 0o777 == 0o600


def _cli_process(*args: str) -> subprocess.Popen[str]:
    """The command line in a subprocess; it says "ready" on stderr once imported."""
    code = (
        "import sys; from modelprov.cli import main; "
        "print('ready', file=sys.stderr, flush=True); sys.exit(main())"
    )
    process = _python(code, *args)
    assert process.stderr is not None and process.stderr.readline().strip() == "ready"
    return process


@pytest.mark.slow
def test_stdout_closed_early_is_quiet(tmp_path: Path) -> None:
    model = tmp_path / "big.onnx"
    onnx.save(ir.to_proto(synthetic_model(3000)), model)
    process = _cli_process("audit", str(model), "--json")
    assert process.stdout is not None and process.stderr is not None
    process.stdout.readline()
    process.stdout.close()  # like `| head -1`
    stderr = process.stderr.read()
    code = process.wait(timeout=120)
    assert "Traceback" not in stderr and "Exception ignored" not in stderr, stderr
    assert code in (0, 141)


@pytest.mark.slow
@pytest.mark.parametrize("interrupt", [signal.SIGINT, signal.SIGTERM])
def test_ctrl_c_and_sigterm_are_quiet_and_leave_no_output(
    tmp_path: Path, interrupt: signal.Signals
) -> None:
    model = tmp_path / "big.onnx"
    # About 3 s of work once imported (0.5 s at 12,000 nodes: the report got faster than
    # the signal); the signal comes 0.8 s in.
    onnx.save(ir.to_proto(synthetic_model(40000)), model)
    out = tmp_path / "out.html"
    process = _cli_process("report", str(model), "-o", str(out))
    time.sleep(0.8)
    process.send_signal(interrupt)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode != 0, "the command finished before the signal: use a bigger model"
    assert process.returncode == 130, stderr
    assert "Traceback" not in stderr and stderr.strip().splitlines()[-1].startswith("modelprov:")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["big.onnx"]


# A timer raises a real SIGINT 50 ms after the launcher starts, well inside the import of
# modelprov (about a second): what Ctrl-C right after typing the command does.
_CTRL_C_WHILE_IMPORTING = """
import builtins, sys
real_import = builtins.__import__
def interrupted(name, *args, **kwargs):
    # Ctrl-C lands while the command line's modules load (deterministic, unlike a timer:
    # the lazy package loads in a few milliseconds)
    if name.startswith("modelprov.cli") or name.startswith("modelprov._cli"):
        raise KeyboardInterrupt
    return real_import(name, *args, **kwargs)
builtins.__import__ = interrupted
import _modelprov_launch
sys.exit(_modelprov_launch.main())
"""


def test_ctrl_c_while_the_command_line_starts_is_quiet() -> None:
    process = _python(_CTRL_C_WHILE_IMPORTING, "audit", "missing.onnx")
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 130, stderr
    assert "Traceback" not in stderr, stderr
    assert stderr.strip() == "modelprov: interrupted while starting; nothing was written"


def test_the_console_script_starts_through_the_launcher() -> None:
    (script,) = importlib.metadata.entry_points(group="console_scripts", name="modelprov")
    assert script.value == "_modelprov_launch:main"
