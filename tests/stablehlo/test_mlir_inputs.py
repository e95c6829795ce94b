"""read_mlir_sources and restore_attributes take every form the README lists: MLIR text,
bytes of text, MLIR bytecode, the .jaxexport artifact StableHLOProgram.save writes, and
paths (str or Path) to each; anything else is a StableHLOError naming the file or type."""

from __future__ import annotations

import io
import pathlib
from collections.abc import Callable
from typing import Any

import pytest
import torch

import modelprov
from modelprov.errors import StableHLOError
from modelprov.stablehlo import read_mlir_sources, restore_attributes

pytest.importorskip("jax")


class _Block(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = torch.nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.proj(x)) * 2


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Every accepted form of one export, and what reading its text gives."""
    from jaxlib.mlir import ir

    from modelprov.stablehlo.lower._jax_compat import ir_context

    torch.manual_seed(0)
    program = modelprov.export_stablehlo(_Block().eval(), (torch.randn(2, 4),))
    folder = tmp_path_factory.mktemp("mlir")
    text_path, export_path, _ = program.save(folder / "block.mlir")
    with ir_context():
        module = ir.Module.parse(program.text_with_locations)
        buffer = io.BytesIO()
        module.operation.write_bytecode(buffer)
    bytecode = buffer.getvalue()
    (folder / "block.mlirbc").write_bytes(bytecode)
    (folder / "located.mlir").write_text(program.text_with_locations, encoding="utf-8")
    export_bytes = pathlib.Path(export_path).read_bytes()
    forms: dict[str, object] = {
        "text": program.text_with_locations,
        "text bytes": program.text_with_locations.encode("utf-8"),
        "str path to text": str(folder / "located.mlir"),
        "Path to text": folder / "located.mlir",
        "bytecode": bytecode,
        "str path to bytecode": str(folder / "block.mlirbc"),
        "portable artifact": bytes(program.exported.mlir_module_serialized),
        ".jaxexport bytes": export_bytes,
        ".jaxexport bytearray": bytearray(export_bytes),
        "str path to .jaxexport": export_path,
        "Path to .jaxexport": pathlib.Path(export_path),
    }
    return {
        "forms": forms,
        "expected": _summary(read_mlir_sources(program.text_with_locations)),
        "saved text": text_path,
        "folder": folder,
    }


def _summary(ops: Any) -> list[tuple[str, tuple[str, ...]]]:
    return [(op.op_name, tuple(s.id for s in op.sources)) for op in ops if op.sources]


_FORMS = [
    "text",
    "text bytes",
    "str path to text",
    "Path to text",
    "bytecode",
    "str path to bytecode",
    "portable artifact",
    ".jaxexport bytes",
    ".jaxexport bytearray",
    "str path to .jaxexport",
    "Path to .jaxexport",
]


@pytest.mark.parametrize("form", _FORMS)
def test_every_form_reads_like_the_text(saved: dict[str, Any], form: str) -> None:
    found = _summary(read_mlir_sources(saved["forms"][form]))
    assert found == saved["expected"]
    assert any(ids == ("linear",) for _, ids in found)


@pytest.mark.parametrize("form", _FORMS)
def test_every_form_restores(saved: dict[str, Any], form: str) -> None:
    restored = restore_attributes(saved["forms"][form])
    assert isinstance(restored, str)
    assert _summary(read_mlir_sources(restored)) == saved["expected"]


def test_the_saved_text_is_read_from_a_str_path(saved: dict[str, Any]) -> None:
    text = pathlib.Path(saved["saved text"]).read_text(encoding="utf-8")
    assert _summary(read_mlir_sources(saved["saved text"])) == _summary(read_mlir_sources(text))


_READERS: list[Callable[[Any], Any]] = [read_mlir_sources, restore_attributes]


@pytest.mark.parametrize("read", _READERS, ids=lambda f: f.__name__)
def test_a_missing_file_is_named(read: Callable[[Any], Any], tmp_path: pathlib.Path) -> None:
    missing = str(tmp_path / "missing.mlir")
    with pytest.raises(StableHLOError, match=rf"{read.__name__}: {missing}: no such file"):
        read(missing)
    with pytest.raises(StableHLOError, match="missing.mlir: cannot be read"):
        read(pathlib.Path(missing))


@pytest.mark.parametrize("read", _READERS, ids=lambda f: f.__name__)
def test_a_file_of_another_kind_is_named_and_told(
    read: Callable[[Any], Any], tmp_path: pathlib.Path
) -> None:
    onnx_file = tmp_path / "model.onnx"
    onnx_file.write_bytes(b"\x08\x08\x12\x07pytorch\xff\xfe\x00" * 10)
    for given in (str(onnx_file), onnx_file):
        with pytest.raises(StableHLOError, match=r"model\.onnx: 140 bytes that are not MLIR"):
            read(given)
    with pytest.raises(StableHLOError, match="the given bytes: 4 bytes .* not a JAX export"):
        read(b"\xff\xfe\xfd\xfc")


@pytest.mark.parametrize("read", _READERS, ids=lambda f: f.__name__)
@pytest.mark.parametrize("bad", [42, {"module": "{}"}, ["module {}"]], ids=["int", "dict", "list"])
def test_other_types_are_named(read: Callable[[Any], Any], bad: object) -> None:
    kind = type(bad).__name__
    with pytest.raises(StableHLOError, match=rf"got builtins\.{kind}; pass MLIR text, MLIR"):
        read(bad)


@pytest.mark.parametrize("read", _READERS, ids=lambda f: f.__name__)
def test_text_that_is_no_mlir_still_says_it_cannot_parse(read: Callable[[Any], Any]) -> None:
    with pytest.raises(StableHLOError, match="cannot parse the given MLIR text"):
        read("this is not MLIR")
