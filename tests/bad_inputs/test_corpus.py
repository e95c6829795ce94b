"""Every bad input x every command and API call: a one-line error or a right answer.

Per run: no traceback (no exit 70, no "Traceback"), a failing run prints exactly one line
``modelprov: error: ...`` and leaves nothing in the output folder, a successful run leaves
exactly its output, inputs keep their bytes and mtime, models whose provenance cannot be
read are refused (exit 2), and case checks catch silent wrong answers. The default suite
runs every case with one command (rotating) and every API call; ``pytest -m slow`` runs the
full cross product.
"""

from __future__ import annotations

import contextlib
import io
import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import onnx
import pytest

import modelprov
from modelprov.cli import main
from modelprov.errors import ModelprovError
from tests.bad_inputs.corpus import GOOD, PLAIN, Case, write_corpus

Command = Callable[[str, Path], tuple[list[str], list[str]]]
"""(input path, output folder) -> (argv, names of the outputs a success writes)."""


def _writes(name: str, *argv: str, out: str = "out.onnx") -> Command:
    def command(model: str, folder: Path) -> tuple[list[str], list[str]]:
        args = [a.replace("{m}", model).replace("{o}", str(folder / out)) for a in argv]
        return [name, *args], [out]

    return command


def _prints(name: str, *argv: str) -> Command:
    return lambda model, folder: ([name, *(a.replace("{m}", model) for a in argv)], [])


COMMANDS: dict[str, Command] = {
    "audit": _prints("audit", "{m}"),
    "audit --json": _prints("audit", "{m}", "--json"),
    "diff PLAIN M": _prints("diff", PLAIN, "{m}", "--json"),
    "diff M GOOD": _prints("diff", "{m}", GOOD),
    "report": _writes("report", "{m}", "-o", "{o}", out="report.html"),
    "report --before M": _writes("report", GOOD, "--before", "{m}", "-o", "{o}", out="r.html"),
    "overlay": _writes("overlay", "{m}", "-o", "{o}", out="overlay.json"),
    "optimize": _writes("optimize", "{m}", "-o", "{o}"),
    "functionize": _writes("functionize", "{m}", "-o", "{o}"),
    "inline": _writes("inline", "{m}", "-o", "{o}"),
    "recover M GOOD": _writes("recover", "{m}", GOOD, "-o", "{o}"),
    # A case is PLAIN changed (some compute more, e.g. + an external constant): not a
    # tool's output of PLAIN, so recover refuses it by running both unless forced.
    "recover PLAIN M": _writes("recover", PLAIN, "{m}", "-o", "{o}", "--force"),
}
READS_OLD_PROVENANCE = set(COMMANDS) - {"recover PLAIN M"}
"""Commands that read the case's own provenance (recover replaces an optimized model's)."""

_CORPUS: dict[str, Any] = {}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Case]]:
    if "cases" not in _CORPUS:
        folder = tmp_path_factory.mktemp("corpus")
        _CORPUS.update(folder=folder, cases=write_corpus(str(folder)))
    return _CORPUS["folder"], _CORPUS["cases"]


def _state(folder: Path) -> dict[str, tuple[bytes, int]]:
    """Each entry's bytes and mtime (folders: their listing)."""
    return {
        p.name: (p.read_bytes(), p.stat().st_mtime_ns)
        if p.is_file()
        else ("\n".join(sorted(c.name for c in p.iterdir())).encode(), 0)
        for p in folder.iterdir()
    }


@contextlib.contextmanager
def _captured() -> Iterator[dict[str, bytes]]:
    """stdout/stderr as strict UTF-8 streams, like a terminal's (what they print must
    encode); their bytes land in the yielded dict on exit."""
    out, err = io.BytesIO(), io.BytesIO()
    stdout = io.TextIOWrapper(out, encoding="utf-8", errors="strict")
    stderr = io.TextIOWrapper(err, encoding="utf-8", errors="strict")
    captured: dict[str, bytes] = {}
    try:
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
            yield captured
    finally:
        for name, wrapper, buffer in (("out", stdout, out), ("err", stderr, err)):
            with contextlib.suppress(ValueError):
                wrapper.flush()
            captured[name] = buffer.getvalue()
            wrapper.detach()


def run_case(folder: Path, case: Case, command_name: str, workdir: Path) -> list[str]:
    """Runs one case through one command; returns the problems found (empty: fine)."""
    problems: list[str] = []
    out_folder = workdir / "out"
    shutil.rmtree(out_folder, ignore_errors=True)
    out_folder.mkdir()
    argv, outputs = COMMANDS[command_name](case.path, out_folder)
    before = _state(folder)
    cwd = os.getcwd()
    os.chdir(folder)
    try:
        with _captured() as captured:
            try:
                code = main(argv)
            except BaseException as error:
                code = -1
                problems.append(f"main raised {type(error).__name__}: {error}")
    finally:
        os.chdir(cwd)
    stderr = captured["err"].decode("utf-8", "replace")
    label = f"{case.name} x {command_name}"
    if code == 70 or "Traceback" in stderr:
        problems.append(f"{label}: traceback / internal error: {stderr.strip()[:300]}")
    elif code not in (0, 2):
        problems.append(f"{label}: exit {code}: {stderr.strip()[:200]}")
    left = sorted(p.name for p in out_folder.iterdir())
    if code != 0:
        lines = stderr.strip().splitlines()
        if len(lines) != 1 or not lines[0].startswith("modelprov: error: "):
            problems.append(f"{label}: error is not one line: {stderr.strip()[:300]!r}")
        if left:
            problems.append(f"{label}: failed but left {left}")
    else:
        expected = set(outputs) | {f"{o}.data" for o in outputs}
        if (not left and outputs) or set(left) - expected:
            problems.append(f"{label}: succeeded but left {left} (expected {outputs})")
        if case.corrupt and command_name in READS_OLD_PROVENANCE:
            problems.append(f"{label}: unreadable provenance accepted (silent wrong answer)")
        if command_name in case.refused_by:
            problems.append(f"{label}: a broken model accepted (exit 0)")
        applies = command_name in (case.check_on or READS_OLD_PROVENANCE)
        if case.check and applies and outputs and outputs[0].endswith(".onnx") and left:
            try:
                case.check(str(out_folder / outputs[0]))
            except AssertionError as error:
                problems.append(f"{label}: silent wrong answer: {error}")
    if _state(folder) != before:
        problems.append(f"{label}: an input was modified or a file was left beside it")
    return problems


def _rotation(cases: list[Case]) -> list[tuple[Case, str]]:
    names = list(COMMANDS)
    return [(case, names[index % len(names)]) for index, case in enumerate(cases)]


def test_corpus_has_every_class_and_at_least_80_cases(corpus) -> None:  # type: ignore[no-untyped-def]
    _, cases = corpus
    assert len(cases) >= 80
    kinds = {case.kind for case in cases}
    assert {
        "file",
        "sources table",
        "node ids",
        "invalid UTF-8",
        "duplicate keys",
        "size",
        "stack trace",
        "inline record",
        "aten_call record",
        "external data",
        "graph",
    } <= kinds


def test_every_case_with_one_command(corpus, tmp_path) -> None:  # type: ignore[no-untyped-def]
    folder, cases = corpus
    problems = [
        p for case, name in _rotation(cases) for p in run_case(folder, case, name, tmp_path)
    ]
    assert problems == []


@pytest.mark.parametrize("command_name", ["optimize", "inline", "report", "audit --json"])
def test_silent_wrong_answer_cases_on_their_commands(corpus, tmp_path, command_name) -> None:  # type: ignore[no-untyped-def]
    folder, cases = corpus
    checked = [case for case in cases if case.check or case.corrupt]
    problems = [p for case in checked for p in run_case(folder, case, command_name, tmp_path)]
    assert problems == []


@pytest.mark.slow
@pytest.mark.parametrize("command_name", list(COMMANDS))
def test_every_case_with_every_command(corpus, tmp_path, command_name) -> None:  # type: ignore[no-untyped-def]
    folder, cases = corpus
    problems = [p for case in cases for p in run_case(folder, case, command_name, tmp_path)]
    assert problems == []


# --- the matching API calls -----------------------------------------------------------------


def _api_calls(path: str, proto: onnx.ModelProto | None) -> dict[str, Callable[[], Any]]:
    calls: dict[str, Callable[[], Any]] = {
        "audit": lambda: modelprov.audit(path),
        "diff(plain, m)": lambda: modelprov.diff(PLAIN, path),
        "diff(m, good)": lambda: modelprov.diff(path, GOOD),
        "recover(m, good)": lambda: modelprov.recover(path, GOOD),
        "recover(plain, m)": lambda: modelprov.recover(PLAIN, path),
        "report": lambda: modelprov.report(path),
        "overlay": lambda: modelprov.overlay(path),
    }
    if proto is not None:
        calls.update(
            {
                "sources": lambda: [modelprov.sources(proto, n) for n in proto.graph.node],
                "optimize": lambda: modelprov.optimize(proto),
                "functionize": lambda: modelprov.functionize(proto),
                "inline": lambda: modelprov.inline(proto),
                "structural_hash": lambda: modelprov.structural_hash(proto),
            }
        )
    return calls


def run_api(folder: Path, case: Case) -> list[str]:
    """Every API call on one case: a result or a ModelprovError; the proto unchanged."""
    from modelprov._model_io._files import load_model_proto

    problems: list[str] = []
    cwd = os.getcwd()
    os.chdir(folder)
    try:
        before = _state(folder)
        try:
            proto: onnx.ModelProto | None = load_model_proto(case.path, load_weights=False)
        except ModelprovError:
            proto = None
        serialized = proto.SerializeToString() if proto is not None else b""
        for name, call in _api_calls(case.path, proto).items():
            try:
                call()
            except ModelprovError as error:
                if "\n" in str(error):
                    problems.append(f"{case.name} x {name}: message spans lines")
            except Exception as error:
                problems.append(f"{case.name} x {name}: {type(error).__name__}: {error}"[:300])
            else:
                if case.corrupt and name not in ("recover(plain, m)", "structural_hash"):
                    problems.append(f"{case.name} x {name}: unreadable provenance accepted")
            if proto is not None and proto.SerializeToString() != serialized:
                problems.append(f"{case.name} x {name}: modified the ModelProto it was given")
        if _state(folder) != before:
            problems.append(f"{case.name}: a file changed")
    finally:
        os.chdir(cwd)
    return problems


def test_every_case_through_the_api(corpus) -> None:  # type: ignore[no-untyped-def]
    folder, cases = corpus
    problems = [p for case in cases for p in run_api(folder, case)]
    assert problems == []


# --- export: bad factories and annotation files ---------------------------------------------

EXPORT_CASES = {
    "factory_raises": (["tests._factories:raises"], None),
    "factory_not_a_model": (["tests._factories:not_a_model"], None),
    "factory_missing": (["tests._factories:nope"], None),
    "factory_module_missing": (["no_such_module_xyz:f"], None),
    "factory_no_colon": (["tests._factories"], None),
    "annotations_not_json": (["tests._factories:mlp", "--annotations", "{a}"], b"{nope"),
    "annotations_list": (["tests._factories:mlp", "--annotations", "{a}"], b"[1, 2]"),
    "annotations_bad_utf8": (
        ["tests._factories:mlp", "--annotations", "{a}"],
        b'{"0": {"k": "\xff"}}',
    ),
    "annotations_deep": (["tests._factories:mlp", "--annotations", "{a}"], b"[" * 100_000),
    "annotations_value_list": (
        ["tests._factories:mlp", "--annotations", "{a}"],
        b'{"0": {"custom.k": [1, 2]}}',
    ),
    "annotations_reserved_key": (
        ["tests._factories:mlp", "--annotations", "{a}"],
        b'{"0": {"modelprov.sources": "x"}}',
    ),
    "annotations_missing": (["tests._factories:mlp", "--annotations", "{tmp}/none.json"], None),
    "calibrate_negative": (["tests._factories:mlp", "--calibrate", "-3"], None),
    "output_is_annotations": (
        ["tests._factories:mlp", "--annotations", "{a}", "--onnx", "{a}"],
        b"{}",
    ),
}


@pytest.mark.parametrize("name", list(EXPORT_CASES))
def test_export_bad_inputs(tmp_path, name) -> None:  # type: ignore[no-untyped-def]
    argv, content = EXPORT_CASES[name]
    annotations = tmp_path / "annotations.json"
    if content is not None:
        annotations.write_bytes(content)
    args = [a.replace("{a}", str(annotations)).replace("{tmp}", str(tmp_path)) for a in argv]
    if "--onnx" not in args:
        args += ["--onnx", str(tmp_path / "out" / "m.onnx")]
    (tmp_path / "out").mkdir()
    before = _state(tmp_path)
    root = Path(__file__).resolve().parents[2]
    cwd = os.getcwd()
    os.chdir(root)
    try:
        with _captured() as captured:
            code = main(["export", *args])
    finally:
        os.chdir(cwd)
    stderr = captured["err"].decode("utf-8", "replace")
    assert code == 2, stderr
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("modelprov: error: "), stderr
    assert list((tmp_path / "out").iterdir()) == []
    assert _state(tmp_path) == before


# --- policies files: every command that merges refuses a bad one in one line ----------------

POLICIES_CASES: dict[str, bytes] = {
    "not_json": b'{"format": "modelprov.policies", "version": 1,',
    "wrong_format": b'{"format": "modelprov.sources", "version": 1, "keys": {}}',
    "newer_version": b'{"format": "modelprov.policies", "version": 2, "keys": {}}',
    "unknown_policy": b'{"format": "modelprov.policies", "version": 1, "keys": {"k": "eval"}}',
    "code_as_policy": (
        b'{"format": "modelprov.policies", "version": 1, '
        b'"keys": {"k": "__import__(\'os\').system(\'true\')"}}'
    ),
    "sep_not_text": (
        b'{"format": "modelprov.policies", "version": 1, '
        b'"keys": {"k": {"policy": "join", "sep": 5}}}'
    ),
    "unknown_field": b'{"format": "modelprov.policies", "version": 1, "policy": {}}',
    "huge": b'{"format": "modelprov.policies", "version": 1, "comment": "'
    + b"x" * (1 << 20)
    + b'"}',
    "bad_utf8": b'{"format": "modelprov.policies", "version": 1, "keys": {"\xff": "max"}}',
    "missing": b"",
}
"""Bad policies files (``missing``: no file at all)."""

_MERGING: dict[str, list[str]] = {
    "export": ["export", "tests._factories:double_transpose", "--onnx", "{o}"],
    "optimize": ["optimize", "{g}", "-o", "{o}"],
    "recover": ["recover", "{p}", "{g}", "-o", "{o}"],
    "functionize": ["functionize", "{g}", "-o", "{o}"],
    "quantize": ["quantize", "{g}", "-o", "{o}"],
}
"""Every command that merges by policies, with the good models of the corpus."""


@pytest.mark.parametrize("name", list(POLICIES_CASES))
def test_bad_policies_files(corpus, tmp_path, name) -> None:  # type: ignore[no-untyped-def]
    folder, _ = corpus
    policies = tmp_path / f"{name}.json"
    if name != "missing":
        policies.write_bytes(POLICIES_CASES[name])
    (tmp_path / "out").mkdir()
    before, models = _state(tmp_path), _state(folder)
    root = Path(__file__).resolve().parents[2]
    for command, argv in _MERGING.items():
        args = [
            a.replace("{o}", str(tmp_path / "out" / "m.onnx"))
            .replace("{g}", str(folder / GOOD))
            .replace("{p}", str(folder / PLAIN))
            for a in argv
        ]
        cwd = os.getcwd()
        os.chdir(root)
        try:
            with _captured() as captured:
                code = main([*args, "--policies", str(policies)])
        finally:
            os.chdir(cwd)
        stderr = captured["err"].decode("utf-8", "replace")
        assert code == 2, (command, stderr)
        lines = stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("modelprov: error: "), (command, stderr)
        assert str(policies) in lines[0], (command, stderr)
        assert list((tmp_path / "out").iterdir()) == []
    assert _state(tmp_path) == before and _state(folder) == models
