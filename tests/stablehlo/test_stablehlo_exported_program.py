"""torch_xla's entry point: exported_program_to_stablehlo(ExportedProgram) with provenance."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

import modelprov
from modelprov._cli import _examples
from modelprov.stablehlo import (
    StableHLOExportOptions,
    export_stablehlo,
    exported_program_to_stablehlo,
    load_exported,
)

pytest.importorskip("jax")


def test_same_text_as_export_stablehlo_of_the_module() -> None:
    model, args = _examples.transformer_encoder()
    exported = torch.export.export(model, args)
    code_before = exported.graph_module.code
    from_program = exported_program_to_stablehlo(exported)
    from_module = export_stablehlo(model, args)
    assert from_program.get_stablehlo_text() == from_module.text
    assert from_program.get_stablehlo_text_with_locations() == from_module.text_with_locations
    assert export_stablehlo(exported).text == from_module.text  # export_stablehlo takes it too
    assert exported.graph_module.code == code_before  # the input is not modified


def test_seed003_code_with_one_import_changed(tmp_path: Path) -> None:
    # The seed's code, torch_xla's import replaced by modelprov's:
    from modelprov.stablehlo import exported_program_to_stablehlo as to_stablehlo

    model, sample_input = _examples.mlp()
    output = model(*sample_input)
    exported = torch.export.export(model, sample_input)
    stablehlo_program = to_stablehlo(exported)
    text = stablehlo_program.get_stablehlo_text("forward")
    assert 'modelprov.module = "0"' in text and "stablehlo.dot_general" in text
    assert stablehlo_program.get_stablehlo_bytecode("forward").startswith(b"ML\xefR")
    output2 = stablehlo_program(*sample_input)
    assert torch.allclose(output, output2, atol=1e-5)
    written = stablehlo_program.save(tmp_path / "stablehlo_dir")
    assert sorted(Path(p).name for p in written) == [
        "forward.mlir",
        "forward.mlir.jaxexport",
        "forward.mlir.weights.npz",
    ]
    loaded, weights = load_exported(tmp_path / "stablehlo_dir" / "forward.mlir")
    assert 'modelprov.source_node = "linear"' in loaded.mlir_module()
    (reloaded,) = loaded.call(weights, (sample_input[0].numpy(),))
    assert torch.allclose(output, torch.from_numpy(reloaded.__array__().copy()), atol=1e-5)
    with pytest.raises(ValueError, match="one method"):
        stablehlo_program.get_stablehlo_text("backward")


def test_options_carry_annotations_onto_the_layer_outputs() -> None:
    model, args = _examples.mlp()
    options = StableHLOExportOptions(
        annotations={"1": {"custom.min": 0.0, "custom.max": 18.9}},
        include_human_readable_text=False,
    )
    program = exported_program_to_stablehlo(torch.export.export(model, args), options).program
    ranged = [op for op in program.ops if "custom.max" in op.attributes]
    assert [(op.op_name, op.module) for op in ranged] == [("stablehlo.maximum", "1")]
    with pytest.raises(modelprov.errors.AnnotationError):
        exported_program_to_stablehlo(
            torch.export.export(model, args),
            StableHLOExportOptions(annotations={"no.such.layer": {"custom.max": 1.0}}),
        )


def test_wrong_inputs_are_refused_clearly() -> None:
    model, args = _examples.mlp()
    with pytest.raises(TypeError, match="ExportedProgram"):
        exported_program_to_stablehlo(model)  # type: ignore[arg-type]
    exported = torch.export.export(model, args)
    with pytest.raises(ValueError, match="dynamic_shapes"):
        export_stablehlo(exported, dynamic_shapes=({0: torch.export.Dim("b")},))
