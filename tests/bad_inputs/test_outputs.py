"""Hostile outputs and faults while writing (issue 23), through the commands of the corpus.

- Outputs onto a FIFO, a socket, a device or a symlink to one are refused with exit 3 in one
  line naming the path; the special file stays. A symlink to a regular file: the target is
  written, the link stays.
- Overwritten files (data files too) keep their mode and owner.
- A model and its data file are replaced as a pair: a failure or a kill at any step leaves a
  model that loads and computes what the old or the new one does.
- Temporaries of a writer in another PID namespace are not removed as stale.
- A 240-character output name is written.
- The "external tensors" class with a decoy ``w.bin`` beside the output.
"""

from __future__ import annotations

import os
import shutil
import socket
import stat
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
import onnx_ir as ir
import pytest
from onnx import TensorProto, helper

from modelprov._model_io._files import save_model
from modelprov.cli import main
from modelprov.errors import OutputError
from tests._cli import ROOT
from tests.bad_inputs.corpus import GOOD, Case, write_corpus
from tests.bad_inputs.external_tensors import KIND, decoy_data
from tests.bad_inputs.test_corpus import _CORPUS, COMMANDS, _captured, _state

WRITERS = ["report", "overlay", "optimize", "functionize", "inline", "recover M GOOD"]
"""The corpus's writing commands (one per kind of output: HTML, JSON, ONNX)."""
IS_ROOT = os.geteuid() == 0


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Case]]:
    """The corpus test_corpus.py writes (shared with it when both run)."""
    if "cases" not in _CORPUS:
        folder = tmp_path_factory.mktemp("corpus")
        _CORPUS.update(folder=folder, cases=write_corpus(str(folder)))
    return _CORPUS["folder"], _CORPUS["cases"]


def _child_env() -> dict[str, str]:
    """The environment for a child Python importing this modelprov and these tests."""
    import modelprov

    source = os.path.dirname(os.path.dirname(os.path.abspath(modelprov.__file__)))
    return {**os.environ, "PYTHONPATH": os.pathsep.join([ROOT, source])}


def _run(argv: list[str], cwd: Path | None = None) -> tuple[int, str]:
    old = os.getcwd()
    os.chdir(cwd or old)
    try:
        with _captured() as captured:
            code = main(argv)
    finally:
        os.chdir(old)
    return code, captured["err"].decode("utf-8", "replace")


def _argv(command: str, model: str, folder: Path) -> tuple[list[str], Path]:
    argv, outputs = COMMANDS[command](model, folder)
    return argv, folder / outputs[0]


# --- special files --------------------------------------------------------------------------


def _fifo(path: Path) -> Callable[[], object]:
    os.mkfifo(path)
    return lambda: None


def _socket(path: Path) -> Callable[[], object]:
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    return server.close


def _device(path: Path) -> Callable[[], object]:
    os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(1, 3))  # another /dev/null
    return lambda: None


def _link_to_fifo(path: Path) -> Callable[[], object]:
    os.mkfifo(path.parent / "real-fifo")
    path.symlink_to(path.parent / "real-fifo")
    return lambda: None


def _link_to_dev_null(path: Path) -> Callable[[], object]:
    path.symlink_to("/dev/null")
    return lambda: None


SPECIAL = {
    "fifo": _fifo,
    "socket": _socket,
    "link to a fifo": _link_to_fifo,
    "link to /dev/null": _link_to_dev_null,
    **({"device": _device} if IS_ROOT else {}),
}


def _kinds(folder: Path) -> dict[str, int]:
    return {p.name: stat.S_IFMT(os.lstat(p).st_mode) for p in folder.iterdir()}


@pytest.mark.parametrize("special", list(SPECIAL))
def test_outputs_onto_special_files_are_refused(corpus, tmp_path, special) -> None:  # type: ignore[no-untyped-def]
    folder, _ = corpus
    problems = []
    for command in WRITERS:
        out_folder = tmp_path / command.replace(" ", "_")
        out_folder.mkdir()
        argv, output = _argv(command, GOOD, out_folder)
        close = SPECIAL[special](output)
        before, inputs = _kinds(out_folder), _state(folder)
        try:
            code, err = _run(argv, folder)
        finally:
            close()
        lines = err.strip().splitlines()
        if code != 3 or len(lines) != 1 or str(output) not in lines[0]:
            problems.append(f"{special} x {command}: exit {code}: {err.strip()[:200]}")
        if _kinds(out_folder) != before:
            problems.append(f"{special} x {command}: replaced: {_kinds(out_folder)}")
        assert _state(folder) == inputs
    assert problems == []


def test_a_symlink_to_a_file_writes_the_target_and_keeps_the_link(corpus, tmp_path) -> None:  # type: ignore[no-untyped-def]
    folder, _ = corpus
    real = tmp_path / "real"
    real.mkdir()
    for command in ("optimize", "report"):
        out_folder = tmp_path / command
        out_folder.mkdir()
        argv, output = _argv(command, GOOD, out_folder)
        target = real / f"target-of-{command}"
        target.write_bytes(b"old")
        os.chmod(target, 0o640)
        output.symlink_to(os.path.relpath(target, out_folder))
        code, err = _run(argv, folder)
        assert code == 0, err
        assert output.is_symlink() and output.resolve() == target
        assert target.read_bytes() != b"old" and stat.S_IMODE(target.stat().st_mode) == 0o640
        assert [p.name for p in out_folder.iterdir()] == [output.name]
    if (real / "target-of-optimize").exists():
        onnx.load(str(real / "target-of-optimize"))
    assert sorted(p.name for p in real.iterdir()) == ["target-of-optimize", "target-of-report"]


# --- permissions ----------------------------------------------------------------------------


def _model_with_data(folder: Path, name: str = "model.onnx") -> Path:
    from tests.conftest import fresh_export

    path = folder / name
    save_model(fresh_export("cnn"), path, external_data=True)
    return path


def _data_files(model: Path) -> list[Path]:
    proto = onnx.load(str(model), load_external_data=False)
    locations = {
        entry.value
        for tensor in proto.graph.initializer
        for entry in tensor.external_data
        if entry.key == "location"
    }
    return [model.parent / location for location in sorted(locations)]


def _owner_mode(path: Path) -> tuple[int, int, int]:
    info = path.stat()
    return info.st_uid, info.st_gid, stat.S_IMODE(info.st_mode)


def test_overwrites_and_in_place_keep_mode_and_owner(tmp_path) -> None:  # type: ignore[no-untyped-def]
    model = _model_with_data(tmp_path)
    owner = (65534, 65534) if IS_ROOT else (os.getuid(), os.getgid())
    for path in (model, *_data_files(model)):
        os.chown(path, *owner)
        os.chmod(path, 0o600)
    code, err = _run(["inline", str(model), "-o", str(model), "--in-place"])
    assert code == 0, err
    (data,) = _data_files(model)
    assert _owner_mode(model) == _owner_mode(data) == (*owner, 0o600)
    assert data.name != "model.onnx.data"  # the old data was read while the new was written
    code, err = _run(["optimize", str(model), "-o", str(model), "--in-place"])
    assert code == 0, err
    assert _owner_mode(model) == (*owner, 0o600)
    assert [p.name for p in tmp_path.iterdir()] == ["model.onnx"]  # weights now embedded
    other = tmp_path / "other.onnx"
    other.write_bytes(b"old")
    os.chown(other, *owner)
    os.chmod(other, 0o640)
    code, err = _run(["functionize", str(model), "-o", str(other)])
    assert code == 0, err
    assert _owner_mode(other) == (*owner, 0o640)


# --- a model and its data file replaced as a pair -------------------------------------------


def _weights_model(values: list[np.ndarray]) -> ir.Model:
    """y = x + (sum of the weights), each weight 1 KiB: other weights, other data layout."""
    inits = [
        onnx.numpy_helper.from_array(v.astype(np.float32), f"w{i}") for i, v in enumerate(values)
    ]
    nodes, last = [], "x"
    for index, init in enumerate(inits):
        nodes.append(helper.make_node("Add", [last, init.name], [f"s{index}"], name=f"add{index}"))
        last = f"s{index}"
    nodes.append(helper.make_node("Identity", [last], ["y"], name="out"))
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [256])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [256])],
        initializer=inits,
    )
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    proto.ir_version = 10
    return ir.from_proto(proto)


def _computes(path: Path) -> np.ndarray:
    import onnxruntime as ort

    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return np.asarray(session.run(None, {"x": np.zeros(256, np.float32)})[0])


OLD = [np.full(256, 1.0)]
NEW = [np.full(256, 5.0), np.arange(256.0)]
"""The model being replaced and the new one: a mismatched pair computes neither."""


def _old_or_new(path: Path) -> str:
    try:
        got = _computes(path)
    except Exception as error:
        return f"does not load: {str(error)[:200]}"
    if np.array_equal(got, sum(OLD)):
        return "old"
    if np.array_equal(got, sum(NEW)):
        return "new"
    return f"computes neither the old nor the new model: {got[:4]}"


def _tidy(folder: Path, model: Path) -> bool:
    """Only the model and the data files it reads are there."""
    return sorted(p.name for p in folder.iterdir()) == sorted(
        [model.name, *(p.name for p in _data_files(model))]
    )


def test_a_failed_rename_at_any_step_leaves_the_old_or_the_new_pair(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    model = tmp_path / "model.onnx"
    real_replace = os.replace
    results = []
    for fail_at in range(1, 20):
        shutil.rmtree(tmp_path)
        tmp_path.mkdir()
        save_model(_weights_model(OLD), model, external_data=True)
        calls = 0

        def failing_replace(src, dst, *args, fail_at=fail_at, **kwargs):  # type: ignore[no-untyped-def]
            nonlocal calls
            calls += 1
            if calls == fail_at:
                raise OSError(28, "No space left on device")
            return real_replace(src, dst, *args, **kwargs)

        monkeypatch.setattr(os, "replace", failing_replace)
        try:
            save_model(_weights_model(NEW), model, external_data=True)
        except OutputError:
            failed = True
        else:
            failed = False
        finally:
            monkeypatch.setattr(os, "replace", real_replace)
        results.append((fail_at, failed, _old_or_new(model), _tidy(tmp_path, model)))
        if not failed:
            break
    assert results[-1][1:] == (False, "new", True), results
    assert all(state == "old" and tidy for _, failed, state, tidy in results[:-1]), results


_KILLED_SAVE = textwrap.dedent(
    """
    import os, sys
    import numpy as np
    from modelprov._model_io._files import save_model
    from tests.bad_inputs.test_outputs import NEW, _weights_model
    kill_at, calls = int(sys.argv[2]), 0
    for name in ("replace", "unlink", "rename", "rmdir"):
        real = getattr(os, name)
        def wrapped(*args, _real=real, **kwargs):
            global calls
            calls += 1
            if calls == kill_at:
                os._exit(9)
            return _real(*args, **kwargs)
        setattr(os, name, wrapped)
    save_model(_weights_model(NEW), sys.argv[1], external_data=True)
    """
)


@pytest.mark.slow
def test_a_kill_at_any_step_leaves_the_old_or_the_new_pair(tmp_path) -> None:  # type: ignore[no-untyped-def]
    model = tmp_path / "model.onnx"
    env = _child_env()
    results = []
    for kill_at in range(1, 40):
        shutil.rmtree(tmp_path)
        tmp_path.mkdir()
        save_model(_weights_model(OLD), model, external_data=True)
        done = subprocess.run(
            [sys.executable, "-c", _KILLED_SAVE, str(model), str(kill_at)],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode in (0, 9), done.stderr
        results.append((kill_at, done.returncode, _old_or_new(model)))
        if done.returncode == 0:
            break
    assert results[-1][1:] == (0, "new"), results
    assert all(state in ("old", "new") for *_, state in results), results
    assert {state for *_, state in results[:-1]} == {"old", "new"}, results  # killed on both sides
    save_model(_weights_model(NEW), model, external_data=True)  # the next write cleans up
    assert _tidy(tmp_path, model) and _old_or_new(model) == "new"


def test_in_place_fails_at_any_rename_and_the_input_still_computes_the_same(
    tmp_path, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    from tests.conftest import fresh_export

    # written by another tool's layout (every tensor 64 KiB-aligned): modelprov's dense
    # data file does not fit the old model file, so the pair must switch at once
    model = tmp_path / "model.onnx"
    ir.save(
        fresh_export("cnn"),
        model,
        external_data="model.onnx.data",
        alignment=65536,
        align_threshold=0,
    )
    import onnxruntime as ort

    def run() -> np.ndarray:
        session = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
        x = np.random.default_rng(0).standard_normal((2, 3, 16, 16)).astype(np.float32)
        return np.asarray(session.run(None, {session.get_inputs()[0].name: x})[0])

    expected = run()
    real_replace = os.replace
    for fail_at in range(1, 20):
        calls = 0

        def failing_replace(src, dst, *args, fail_at=fail_at, **kwargs):  # type: ignore[no-untyped-def]
            nonlocal calls
            calls += 1
            if calls == fail_at:
                raise OSError(5, "Input/output error")
            return real_replace(src, dst, *args, **kwargs)

        monkeypatch.setattr(os, "replace", failing_replace)
        try:
            code, err = _run(["functionize", str(model), "-o", str(model), "--in-place"])
        finally:
            monkeypatch.setattr(os, "replace", real_replace)
        np.testing.assert_allclose(run(), expected, rtol=1e-5, atol=1e-6)
        assert _tidy(tmp_path, model)
        if calls < fail_at:
            assert code == 0, err
            break
        assert code == 3 and len(err.strip().splitlines()) == 1, err
    assert onnx.load(str(model), load_external_data=False).functions  # the last one committed


# --- PID namespaces -------------------------------------------------------------------------

_OTHER_NAMESPACE_WRITER = textwrap.dedent(
    """
    import os, sys, time
    import numpy as np
    import onnx_ir as ir
    from modelprov._model_io._files import save_model
    from tests.bad_inputs.test_outputs import NEW, _weights_model

    def slowly():  # materialized while the data file is written, in a temporary folder
        print(" ".join(sorted(os.listdir(os.path.dirname(sys.argv[1])))), flush=True)
        time.sleep(float(sys.argv[2]))
        return ir.tensor(NEW[0].astype(np.float32))

    model = _weights_model(NEW)
    value = model.graph.initializers["w0"]
    value.const_value = ir.LazyTensor(slowly, ir.DataType.FLOAT, ir.Shape([256]), name="w0")
    save_model(model, sys.argv[1], external_data=True)
    """
)


def _free_pid() -> int:
    """A PID no process has here (the other namespace's writer gets it)."""
    with open("/proc/sys/kernel/pid_max") as stream:
        pid_max = int(stream.read())
    for pid in range(pid_max - 1, 300, -1):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return pid
        except OSError:
            continue
    raise AssertionError("no free pid")


@pytest.mark.skipif(not IS_ROOT or shutil.which("unshare") is None, reason="needs root unshare")
def test_a_writer_in_another_pid_namespace_keeps_its_temporaries(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from modelprov._model_io._files import atomic_write_bytes

    pid = _free_pid()
    env = _child_env()
    script = (
        f"echo {pid - 1} > /proc/sys/kernel/ns_last_pid && "
        f'"{sys.executable}" -c "$0" "$1" 3 </dev/null'
    )
    process = subprocess.Popen(
        [
            "unshare",
            "--pid",
            "--fork",
            "--mount-proc",
            "sh",
            "-c",
            script,
            _OTHER_NAMESPACE_WRITER,
            str(tmp_path / "theirs.onnx"),
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    temporaries = process.stdout.readline().split()
    if not temporaries:
        process.wait(timeout=60)
        pytest.skip(f"unshare refused: {process.stderr.read()[:200] if process.stderr else ''}")
    assert all(f"modelprov-{pid}-" in name for name in temporaries), temporaries  # free here
    atomic_write_bytes(tmp_path / "ours.txt", b"written here")
    assert all((tmp_path / name).exists() for name in temporaries), "removed as stale"
    assert process.wait(timeout=120) == 0, process.stderr.read() if process.stderr else ""
    assert _old_or_new(tmp_path / "theirs.onnx") == "new"
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "ours.txt",
        "theirs.onnx",
        "theirs.onnx.data",
    ]


# --- long names -----------------------------------------------------------------------------


@pytest.mark.parametrize("length", [240, 255])
def test_a_long_output_name_is_written(corpus, tmp_path, length) -> None:  # type: ignore[no-untyped-def]
    folder, _ = corpus
    name = "n" * (length - 5) + ".onnx"
    code, err = _run(["optimize", GOOD, "-o", str(tmp_path / name)], folder)
    assert code == 0, err
    assert [p.name for p in tmp_path.iterdir()] == [name]
    model = _model_with_data(tmp_path, name)
    for _ in range(2):  # in place twice: the data file's name alternates, within the limit
        code, err = _run(["inline", str(model), "-o", str(model), "--in-place"])
        assert code == 0, err
        assert _tidy(tmp_path, model) and len(_data_files(model)) == 1
        onnx.load(str(model))


# --- external tensors with a decoy beside the output ----------------------------------------


def test_external_tensors_are_right_with_a_decoy_beside_the_output(corpus, tmp_path) -> None:  # type: ignore[no-untyped-def]
    folder, cases = corpus
    chosen = [case for case in cases if case.kind == KIND]
    assert len(chosen) >= 4
    problems = []
    for case in chosen:
        for command in case.check_on:
            out_folder = tmp_path / f"{case.name}-{command.replace(' ', '_')}"
            out_folder.mkdir()
            decoy_data(str(out_folder))
            decoy = (out_folder / "w.bin").read_bytes()
            argv, output = _argv(command, case.path, out_folder)
            code, err = _run(argv, folder)
            if code != 0:
                problems.append(f"{case.name} x {command}: exit {code}: {err.strip()[:200]}")
                continue
            assert case.check is not None
            try:
                case.check(str(output))
            except AssertionError as error:
                problems.append(f"{case.name} x {command}: {error}")
            left = sorted(p.name for p in out_folder.iterdir())
            if set(left) - {"w.bin", output.name, f"{output.name}.data"}:
                problems.append(f"{case.name} x {command}: left {left}")
            assert (out_folder / "w.bin").read_bytes() == decoy
    assert problems == []
