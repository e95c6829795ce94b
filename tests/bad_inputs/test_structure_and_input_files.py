"""Issue 23's bad-input classes: broken structure, special and malformed input files, advice.

The models of ``structure_cases`` x every command (exit 2 with one line, never 70), the same
through the API (a ModelprovError, also for an onnx_ir.Model), input files that are FIFOs,
folders or of the wrong kind on every command reading them, and messages whose advice fits
the command.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnx_ir as ir
import pytest

import modelprov
from modelprov.cli import main
from modelprov.errors import InvalidModelError, ModelprovError
from tests.bad_inputs.corpus import GOOD, PLAIN, Case
from tests.bad_inputs.test_corpus import COMMANDS, _captured, _state, corpus, run_case

__all__ = ["corpus"]  # the shared corpus fixture

_KINDS = ("external location", "functions", "subgraphs", "file name")


def _ours(cases: list[Case]) -> list[Case]:
    return [case for case in cases if case.kind in _KINDS]


def test_every_class_is_in_the_corpus(corpus: tuple[Path, list[Case]]) -> None:
    found = {case.kind for case in _ours(corpus[1])}
    assert found == set(_KINDS)
    assert len(_ours(corpus[1])) >= 20


def test_structure_cases_with_every_command(corpus: tuple[Path, list[Case]], tmp_path) -> None:  # type: ignore[no-untyped-def]
    folder, cases = corpus
    problems = [
        problem
        for case in _ours(cases)
        for name in COMMANDS
        for problem in run_case(folder, case, name, tmp_path)
    ]
    assert problems == []


def _api(model: Any) -> dict[str, Callable[[], object]]:
    return {
        "optimize": lambda: modelprov.optimize(model),
        "functionize": lambda: modelprov.functionize(model),
        "inline": lambda: modelprov.inline(model),
        "overlay": lambda: modelprov.overlay(model),
        "report": lambda: modelprov.report(model),
        "diff": lambda: modelprov.diff(model, model),
        "recover": lambda: modelprov.recover(model, model),
        "quantize": lambda: modelprov.quantize(model, ranges={}),
    }


_RUNS_THE_GRAPH = ("optimize", "functionize", "inline", "recover", "quantize", "overlay")


def test_broken_structure_through_the_api(corpus: tuple[Path, list[Case]]) -> None:
    """A ModelprovError of one line for the proto and for the onnx_ir.Model made from it."""
    folder, cases = corpus
    problems = []
    for case in _ours(cases):
        if not case.refused_by:
            continue
        proto = onnx.load(str(folder / case.path), load_external_data=False)
        kinds: dict[str, Any] = {"proto": proto}
        # No ir.Model holds two functions of one name, and some protos onnx_ir cannot read.
        if not case.name.startswith("duplicate_"):
            with contextlib.suppress(Exception):
                kinds["ir"] = ir.from_proto(proto)
        for kind, model in kinds.items():
            for name, call in _api(model).items():
                label = f"{case.name} x {name}({kind})"
                try:
                    call()
                except ModelprovError as error:
                    if "\n" in str(error):
                        problems.append(f"{label}: message spans lines")
                except Exception as error:
                    problems.append(f"{label}: {type(error).__name__}: {error}"[:300])
                else:
                    # An onnx_ir.Model's graph is the caller's: only what runs or copies it
                    # must refuse it (report and diff read metadata).
                    if kind == "proto" or name in _RUNS_THE_GRAPH:
                        problems.append(f"{label}: a broken model accepted")
    assert problems == []


def test_duplicate_functions_are_refused_naming_both(corpus: tuple[Path, list[Case]]) -> None:
    folder, _ = corpus
    proto = onnx.load(str(folder / "duplicate_function.onnx"))
    with pytest.raises(InvalidModelError, match=r"'pkg.test.local::f' is defined twice") as info:
        modelprov.optimize(proto)
    assert "#0" in str(info.value) and "#1" in str(info.value)


def test_recursion_names_the_cycle(corpus: tuple[Path, list[Case]]) -> None:
    folder, _ = corpus
    proto = onnx.load(str(folder / "recursive_three.onnx"))
    with pytest.raises(InvalidModelError, match=r"local::f -> .*::g -> .*::h -> .*::f"):
        modelprov.inline(proto)
    with pytest.raises(InvalidModelError, match=r"call themselves"):  # in a PassManager
        modelprov.OptimizeProvenancePass()(ir.from_proto(proto))


# --- input files -----------------------------------------------------------------------------


def _run(argv: list[str], cwd: Path, *, unblock: Path | None = None) -> tuple[int, str]:
    """``main(argv)`` in ``cwd``; a run still blocked after 60 s (reading the FIFO
    ``unblock``) is released by opening the FIFO's other end, and fails the test."""
    result: dict[str, Any] = {}

    def target() -> None:
        previous = os.getcwd()
        os.chdir(cwd)
        try:
            with _captured() as captured:
                result["code"] = main(argv)
        finally:
            os.chdir(previous)
        result["err"] = captured["err"].decode("utf-8", "replace")

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(60)
    if thread.is_alive():
        for _ in range(20):  # each open of the FIFO blocks until a writer comes and goes
            if unblock is not None:
                with contextlib.suppress(OSError):
                    os.close(os.open(unblock, os.O_WRONLY | os.O_NONBLOCK))
            thread.join(1)
        pytest.fail(f"{argv} blocked on {unblock}")
    return result["code"], result["err"]


def _one_line_error(code: int, stderr: str, path: object) -> None:
    assert code == 2, stderr
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("modelprov: error: "), stderr
    assert str(path) in lines[0], stderr


@pytest.fixture
def fifo(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "pipe.json"
    os.mkfifo(path)
    yield path


_MERGING = {
    "optimize": ["optimize", "{g}", "-o", "{o}"],
    "recover": ["recover", "{p}", "{g}", "-o", "{o}"],
    "functionize": ["functionize", "{g}", "-o", "{o}"],
    "quantize": ["quantize", "{g}", "-o", "{o}"],
    "export": ["export", "tests._factories:double_transpose", "--onnx", "{o}"],
    "policies": ["policies", "{policies}"],
}


def _args(argv: list[str], folder: Path, out: Path, policies: Path) -> list[str]:
    values = {"{g}": folder / GOOD, "{p}": folder / PLAIN, "{o}": out, "{policies}": policies}
    return [str(values.get(a, a)) for a in argv]


@pytest.mark.parametrize("command", list(_MERGING))
def test_policies_fifo_is_refused_without_blocking(  # type: ignore[no-untyped-def]
    corpus, tmp_path, fifo, command
) -> None:
    folder, _ = corpus
    (tmp_path / "out").mkdir()
    argv = _args(_MERGING[command], folder, tmp_path / "out" / "m.onnx", fifo)
    if command != "policies":
        argv += ["--policies", str(fifo)]
    root = Path(__file__).resolve().parents[2]
    code, stderr = _run(argv, root, unblock=fifo)
    _one_line_error(code, stderr, fifo)
    assert "FIFO" in stderr
    assert list((tmp_path / "out").iterdir()) == []


_SURROGATE = b'{"format": "modelprov.policies", "version": 1, "keys": {"\\ud800x": "max"}}'
_SURROGATE_SEP = (
    b'{"format": "modelprov.policies", "version": 1, '
    b'"keys": {"k": {"policy": "join", "sep": "\\udfff"}}}'
)


@pytest.mark.parametrize("content", [_SURROGATE, _SURROGATE_SEP])
@pytest.mark.parametrize("command", list(_MERGING))
def test_policies_with_a_lone_surrogate(corpus, tmp_path, command, content) -> None:  # type: ignore[no-untyped-def]
    folder, _ = corpus
    policies = tmp_path / "surrogate.json"
    policies.write_bytes(content)
    (tmp_path / "out").mkdir()
    argv = _args(_MERGING[command], folder, tmp_path / "out" / "m.onnx", policies)
    if command != "policies":
        argv += ["--policies", str(policies)]
    code, stderr = _run(argv, Path(__file__).resolve().parents[2])
    _one_line_error(code, stderr, policies)
    assert list((tmp_path / "out").iterdir()) == []


def _npy(path: Path) -> None:
    with open(path, "wb") as stream:  # np.save(path) would append .npy to the name
        np.save(stream, np.zeros((1, 12, 32, 128), np.float32))


def _zip_header_only(path: Path) -> None:
    path.write_bytes(b"PK\x03\x04" + bytes(60))


def _truncated_npz(path: Path) -> None:
    np.savez(path, k=np.zeros((1, 12, 32, 128), np.float32))
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def _pickled_npz(path: Path) -> None:
    np.savez(path, k=np.array([{"a": 1}], dtype=object))


_BATCHES: dict[str, Callable[[Path], None]] = {
    "npy": _npy,
    "corrupt_zip": _zip_header_only,
    "truncated_npz": _truncated_npz,
    "pickled_npz": _pickled_npz,
    "text": lambda path: path.write_text("k = 1\n"),
    "empty": lambda path: path.write_bytes(b""),
    "folder": lambda path: path.mkdir(),
    "fifo": lambda path: os.mkfifo(path),
}


@pytest.mark.parametrize("kind", list(_BATCHES))
def test_quantize_calibrate_from_bad_files(corpus, tmp_path, kind) -> None:  # type: ignore[no-untyped-def]
    folder, _ = corpus
    batch = tmp_path / f"batch_{kind}.npz"
    _BATCHES[kind](batch)
    (tmp_path / "out").mkdir()
    before = _state(folder)
    argv = ["quantize", str(folder / PLAIN), "-o", str(tmp_path / "out" / "q.onnx")]
    code, stderr = _run([*argv, "--calibrate-from", str(batch)], tmp_path, unblock=batch)
    _one_line_error(code, stderr, batch)
    assert list((tmp_path / "out").iterdir()) == [] and _state(folder) == before


_JSON_FILES: dict[str, Callable[[Path], None]] = {
    "deep": lambda path: path.write_text("[" * 100_000 + "]" * 100_000),
    "deep_object": lambda path: path.write_text('{"a":' * 100_000 + "1" + "}" * 100_000),
    "bad_utf8": lambda path: path.write_bytes(b'{"k": "\xff"}'),
    "folder": lambda path: path.mkdir(),
    "fifo": lambda path: os.mkfifo(path),
}


@pytest.mark.parametrize("kind", list(_JSON_FILES))
def test_quantize_ranges_bad_files(corpus, tmp_path, kind) -> None:  # type: ignore[no-untyped-def]
    folder, _ = corpus
    ranges = tmp_path / f"ranges_{kind}.json"
    _JSON_FILES[kind](ranges)
    (tmp_path / "out").mkdir()
    argv = ["quantize", str(folder / PLAIN), "-o", str(tmp_path / "out" / "q.onnx")]
    code, stderr = _run([*argv, "--ranges", str(ranges)], tmp_path, unblock=ranges)
    _one_line_error(code, stderr, ranges)
    assert list((tmp_path / "out").iterdir()) == []


@pytest.mark.parametrize("kind", ["fifo", "folder"])
def test_export_annotations_special_files(tmp_path, kind) -> None:  # type: ignore[no-untyped-def]
    annotations = tmp_path / f"annotations_{kind}.json"
    _JSON_FILES[kind](annotations)
    (tmp_path / "out").mkdir()
    argv = ["export", "tests._factories:mlp", "--annotations", str(annotations)]
    argv += ["--onnx", str(tmp_path / "out" / "m.onnx")]
    code, stderr = _run(argv, Path(__file__).resolve().parents[2], unblock=annotations)
    _one_line_error(code, stderr, annotations)
    assert list((tmp_path / "out").iterdir()) == []


@pytest.mark.parametrize("command", ["optimize", "audit", "report"])
def test_a_fifo_as_the_model(tmp_path, fifo, command) -> None:  # type: ignore[no-untyped-def]
    argv = [command, str(fifo)]
    if command != "audit":
        argv += ["-o", str(tmp_path / "out.x")]
    code, stderr = _run(argv, tmp_path, unblock=fifo)
    _one_line_error(code, stderr, fifo)


# --- advice that fits the command ------------------------------------------------------------


_OVERWRITING = {
    "optimize": (["optimize", "{m}", "-o", "{m}"], True),
    "functionize": (["functionize", "{m}", "-o", "{m}"], True),
    "recover": (["recover", "{p}", "{m}", "-o", "{m}"], True),
    "report": (["report", "{m}", "-o", "{m}"], False),
    "report --before": (["report", "{p}", "--before", "{m}", "-o", "{m}"], False),
    "overlay": (["overlay", "{m}", "-o", "{m}"], False),
    "export": (["export", "tests._factories:mlp", "--annotations", "{m}", "--onnx", "{m}"], False),
}


@pytest.mark.parametrize("command", list(_OVERWRITING))
def test_overwriting_an_input_advises_only_flags_the_command_has(  # type: ignore[no-untyped-def]
    corpus, tmp_path, command
) -> None:
    folder, _ = corpus
    model = tmp_path / "model.onnx"
    model.write_bytes((folder / GOOD).read_bytes())
    argv_template, has_in_place = _OVERWRITING[command]
    values = {"{m}": str(model), "{p}": str(folder / PLAIN)}
    argv = [values.get(a, a) for a in argv_template]
    before = model.read_bytes()
    code, stderr = _run(argv, Path(__file__).resolve().parents[2])
    _one_line_error(code, stderr, model)
    assert ("--in-place" in stderr) == has_in_place, stderr
    assert "choose another output" in stderr
    assert model.read_bytes() == before


def test_bad_kept_for_recall_names_its_own_key(corpus) -> None:  # type: ignore[no-untyped-def]
    folder, _ = corpus
    proto = onnx.load(str(folder / GOOD))
    node = next(
        n for n in proto.graph.node if any(e.key == "modelprov.sources" for e in n.metadata_props)
    )
    node.metadata_props.add(key="modelprov.kept_for_recall", value="{not ids")
    with pytest.raises(ModelprovError, match="'modelprov.kept_for_recall' must be") as info:
        modelprov.optimize(proto)
    assert "'modelprov.sources'" not in str(info.value)


# --- library warnings ------------------------------------------------------------------------


def _wrong_value_type(folder: Path, tmp_path: Path) -> Path:
    """The plain export with an intermediate value declared INT64: onnx's strict shape
    inference fails on it (onnx_ir logs that with a traceback); modelprov can still use it."""
    proto = onnx.load(str(folder / PLAIN))
    info = proto.graph.value_info.add()
    info.CopyFrom(
        onnx.helper.make_tensor_value_info(
            proto.graph.node[0].output[0], onnx.TensorProto.INT64, None
        )
    )
    path = tmp_path / "declared_int64.onnx"
    onnx.save(proto, path)
    return path


def test_recover_summarizes_library_warnings_in_one_line(corpus, tmp_path) -> None:  # type: ignore[no-untyped-def]
    folder, _ = corpus
    original = _wrong_value_type(folder, tmp_path)
    code, stderr = _run(
        ["recover", str(original), str(folder / PLAIN), "-o", str(tmp_path / "r.onnx")], tmp_path
    )
    assert code == 0, stderr
    assert "Traceback" not in stderr
    notes = [line for line in stderr.splitlines() if "warning" in line]
    assert len(notes) == 1 and "Shape inference failed" in notes[0], stderr
    assert "%s" not in notes[0]
    assert len(stderr.strip().splitlines()) == 2  # the summary of the run, then the note
    code, stderr = _run(
        ["recover", str(original), str(folder / GOOD), "-o", str(tmp_path / "r2.onnx")],
        tmp_path,
    )
    assert code in (0, 2) and "Traceback" not in stderr, stderr
    if code == 2:
        assert len(stderr.strip().splitlines()) == 1, stderr


# --- onnxscript's quadratic rewriter ---------------------------------------------------------


def test_optimize_says_when_onnxscripts_rewriter_will_take_long(
    corpus: tuple[Path, list[Case]],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    from modelprov.onnx.optimize import _optimize

    folder, _ = corpus
    proto = onnx.load(str(folder / PLAIN))
    with caplog.at_level("WARNING", logger="modelprov"):
        modelprov.optimize(proto)
    assert not [r for r in caplog.records if "quadratic" in r.getMessage()]
    monkeypatch.setattr(_optimize, "QUADRATIC_FROM_NODES", len(proto.graph.node))
    with caplog.at_level("WARNING", logger="modelprov"):
        modelprov.optimize(proto)
    said = [r.getMessage() for r in caplog.records if "quadratic" in r.getMessage()]
    assert said == [f"optimizing {len(proto.graph.node)} nodes: " + said[0].split(": ", 1)[1]]


def test_bad_options_of_the_api_are_usage_errors(corpus: tuple[Path, list[Case]]) -> None:
    from modelprov.errors import UsageError

    folder, _ = corpus
    proto = onnx.load(str(folder / PLAIN))
    with pytest.raises(UsageError, match="level must be 'aten' or 'module'"):
        modelprov.functionize(proto, level="layer")  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="unknown tool 'nope'"):
        modelprov.optimize_with("nope", proto)  # type: ignore[arg-type]
