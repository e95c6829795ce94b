"""Untrusted MLIR never kills the caller: deep, wide, self-referring and non-UTF-8 inputs
give a StableHLOError (or their sources), in bounded work.

Every hostile input runs in a child Python (``_hostile_mlir.run_isolated``): on a reader
without the checks, MLIR's C++ dies with SIGSEGV or SIGABRT, which fails the test instead
of ending pytest.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from modelprov.errors import StableHLOError
from modelprov.stablehlo import read_mlir_sources
from modelprov.stablehlo.read import _locations
from modelprov.stablehlo.untrusted._mlir_limits import MAX_NESTING
from tests.stablehlo import _hostile_mlir

pytest.importorskip("jax")

CALLS = ("read", "restore")


def _write(folder: Path, name: str, data: str | bytes) -> str:
    path = folder / name
    if isinstance(data, str):
        path.write_text(data, encoding="utf-8")
    else:
        path.write_bytes(data)
    return str(path)


def _results(folder: Path, cases: list[tuple[str, str | bytes, str]]) -> dict[str, list[object]]:
    """Runs ``(name, input, call)`` cases in one child; the child must survive them all."""
    runs = [(_write(folder, name, data), call) for name, data, call in cases]
    done, results = _hostile_mlir.run_isolated(runs)
    assert done.returncode == 0, f"the reader died: exit {done.returncode}; {done.stderr[-500:]}"
    return {
        f"{name}:{call}": result for (name, _, call), result in zip(cases, results, strict=True)
    }


def test_hostile_text_never_kills_the_reader(tmp_path: Path) -> None:
    """The inputs that killed the reader before (SIGSEGV, SIGABRT) or took minutes."""
    deep = [
        (f"{kind}.mlir", make(200_000 if kind == "alias_chain" else 50_000), call)
        for kind, make in _hostile_mlir.DEEP.items()
        for call in CALLS
    ]
    bad = [("ff.mlir", _hostile_mlir.module('"a\\FFb"'), call) for call in CALLS]  # 169 bytes
    results = _results(tmp_path, deep + bad)
    for name, _, call in deep:
        kind, message = results[f"{name}:{call}"]
        assert kind == "StableHLOError" and "levels deep" in str(message), (name, message)
        assert f"more than the {MAX_NESTING:,}" in str(message)
    for name, _, call in bad:
        kind, message = results[f"{name}:{call}"]
        assert kind == "StableHLOError" and "not UTF-8" in str(message), message


@pytest.mark.slow
def test_a_20000_name_fused_location_is_read_in_seconds(tmp_path: Path) -> None:
    # Quadratic before: 5,000 names took 40-58 s, 20,000 over 300 s (the child's timeout).
    cases = [("wide.mlir", _hostile_mlir.fused_wide(20_000), call) for call in CALLS]
    results = _results(tmp_path, cases)
    assert results["wide.mlir:read"] == ["ok", 1] and results["wide.mlir:restore"][0] == "ok"


@pytest.mark.slow
def test_every_kind_just_over_the_limit_is_refused_and_under_it_read(tmp_path: Path) -> None:
    cases = [
        (f"{kind}-{depth}.mlir", make(depth), call)
        for kind, make in _hostile_mlir.DEEP.items()
        for depth in (MAX_NESTING + 10, MAX_NESTING // 4)
        for call in CALLS
    ]
    for (name, _, call), (kind, detail) in zip(
        cases, _results(tmp_path, cases).values(), strict=True
    ):
        over = name.endswith(f"-{MAX_NESTING + 10}.mlir")
        assert kind == ("StableHLOError" if over else "ok"), (name, call, detail)


def _non_utf8_cases(count: int, seed: int) -> list[tuple[str, str | bytes, str]]:
    """Random byte runs that are not UTF-8, escaped (\\XX) and raw, in four places."""
    generator = random.Random(seed)
    cases: list[tuple[str, str | bytes, str]] = []
    while len(cases) < 2 * count:
        bad = bytes(generator.randrange(0x80, 0x100) for _ in range(generator.randint(1, 4)))
        if _is_utf8(bad):
            continue
        escaped = "".join(f"\\{byte:02X}" for byte in bad)
        place = generator.choice(["location", "attribute", "op name", "symbol"])
        text = {
            "location": _hostile_mlir.module(f'"a{escaped}b"'),
            "attribute": f'module attributes {{t.a = "{escaped}"}} {{\n}}\n',
            "op name": f'module {{\n  "t.{escaped}"() : () -> ()\n}}\n',
            "symbol": f'module {{\n  func.func private @"f{escaped}"()\n}}\n',
        }[place]
        raw = text.encode().replace(escaped.encode(), bad)
        call = generator.choice(CALLS)
        cases += [(f"{len(cases)}-escaped.mlir", text, call), (f"{len(cases)}-raw.mlir", raw, call)]
    return cases


@pytest.mark.slow
def test_random_strings_that_are_not_utf8_are_refused(tmp_path: Path) -> None:
    cases = _non_utf8_cases(20, seed=23)
    for (name, _, _), (kind, message) in zip(
        cases, _results(tmp_path, cases).values(), strict=True
    ):
        assert kind == "StableHLOError", (name, message)
        # raw bytes: not text, not bytecode, not a JAX export (the message lists all three)
        expected = "not UTF-8" if "escaped" in name else "not MLIR text (not UTF-8)"
        assert expected in str(message), (name, message)


def _is_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


@pytest.mark.slow
def test_hostile_bytecode_is_read_in_a_child_and_refused(tmp_path: Path) -> None:
    inputs: dict[str, bytes] = {}
    for name, text in (
        ("bad-utf8", _hostile_mlir.module('"a\\FFb"')),  # aborted the reader before
        ("deep", _hostile_mlir.DEEP["alias_chain"](30_000)),
    ):
        text_path = _write(tmp_path, f"{name}.mlir", text)
        _hostile_mlir.bytecode_of(text_path, str(tmp_path / f"{name}.mlirbc"))
        inputs[f"{name}.mlirbc"] = (tmp_path / f"{name}.mlirbc").read_bytes()
    inputs["truncated.mlirbc"] = inputs["bad-utf8.mlirbc"][:40]
    cases = [(name, data, call) for name, data in inputs.items() for call in CALLS]
    results = _results(tmp_path, cases)  # type: ignore[arg-type]
    assert all(kind == "StableHLOError" for kind, _ in results.values()), results
    assert "not UTF-8" in str(results["bad-utf8.mlirbc:read"][1])
    assert "levels deep" in str(results["deep.mlirbc:restore"][1])
    assert "cannot" in str(results["truncated.mlirbc:read"][1])


def test_callsite_chains_under_the_limit_keep_every_frame() -> None:
    depth = MAX_NESTING // 4
    (op,) = read_mlir_sources(_hostile_mlir.DEEP["callsite"](depth))
    (source,) = op.sources
    assert (source.module_path, source.id, len(source.call_stack)) == ("block", "linear", depth)
    assert source.line == 1 and source.call_stack[0].line == depth


def test_lone_surrogates_and_self_referring_aliases_are_refused() -> None:
    with pytest.raises(StableHLOError, match="lone surrogate"):
        read_mlir_sources(_hostile_mlir.module('"a\ud800b"'))
    with pytest.raises(StableHLOError, match="refers to itself"):
        read_mlir_sources(_hostile_mlir.module("#l0", '#l0 = loc("a"(#l1))\n#l1 = loc("b"(#l0))\n'))


def _walk_steps(text: str, monkeypatch: pytest.MonkeyPatch) -> tuple[int, int]:
    """(locations the walker visited, sources found) reading ``text``."""
    steps = 0
    identity = _locations._identity

    def counted(location: object) -> object:
        nonlocal steps
        steps += 1
        return identity(location)

    monkeypatch.setattr(_locations, "_identity", counted)
    (op,) = read_mlir_sources(text)
    return steps, len(op.sources)


@pytest.mark.parametrize("width", [500, 2000, 8000])
def test_location_walks_are_linear_in_the_location(
    width: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    steps, found = _walk_steps(_hostile_mlir.fused_wide(width), monkeypatch)
    assert found == width
    assert steps <= width + 2  # each part once


def test_shared_parts_are_walked_once(monkeypatch: pytest.MonkeyPatch) -> None:
    # 2**60 paths through 3 * 60 distinct locations: a walk of paths would never end.
    steps, found = _walk_steps(_hostile_mlir.alias_dag(60), monkeypatch)
    assert found == 1 and steps <= 4 * 60
    with pytest.raises(StableHLOError, match="more than"):
        monkeypatch.setattr(_locations, "MAX_LOCATION_PARTS", 100)
        read_mlir_sources(_hostile_mlir.fused_wide(500))
