"""StableHLOProgram: atomic save, portable round trip (region ops too), queries, run errors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from modelprov.errors import StableHLOError
from modelprov.stablehlo import StableHLOProgram, export_stablehlo, load_exported

pytest.importorskip("jax")


class _Pooled(torch.nn.Module):  # type: ignore[misc]
    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(4, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x).sum(dim=1)  # a reduce with a one-op body


@pytest.fixture(scope="module")
def program() -> StableHLOProgram:
    return export_stablehlo(_Pooled().eval(), (torch.randn(2, 4),), annotations={"fc": {"k": 1}})


def _attributed_region_ops(mlir_module: object) -> list[dict[str, str]]:
    from jax._src.interpreters import mlir
    from jaxlib.mlir import ir

    found: list[dict[str, str]] = []

    def visit(op: object) -> object:
        operation = op.operation  # type: ignore[attr-defined]
        parent = operation.parent
        if parent is not None and parent.name.startswith("stablehlo."):
            attributes = operation.attributes
            found.append(
                {
                    name: ir.StringAttr(attributes[name]).value
                    for name in attributes
                    if name.startswith("modelprov.")
                }
            )
        return ir.WalkResult.ADVANCE

    with mlir.make_ir_context():
        module = ir.Module.parse(str(mlir_module))
        module.operation.walk(visit)
    return found


def test_save_is_atomic_and_round_trips_region_attributes(
    program: StableHLOProgram, tmp_path: Path
) -> None:
    target = tmp_path / "model.mlir"
    target.write_text("old", encoding="utf-8")
    paths = program.save(target)
    assert target.read_text(encoding="utf-8") == program.text
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(Path(p).name for p in paths)

    exported, weights = load_exported(target)
    from jax._src.interpreters import mlir

    with mlir.make_ir_context():
        module = exported.mlir_module(serialized=False)
        generic = module.operation.get_asm(print_generic_op_form=True, enable_debug_info=False)
    region_ops = _attributed_region_ops(generic)
    assert region_ops and all(ops["modelprov.node"] == "sum_1" for ops in region_ops)
    x = torch.randn(2, 4)
    assert exported.call(weights, (x.numpy(),))[0].shape == (2,)


def test_queries(program: StableHLOProgram) -> None:
    fc_ops = program.ops_for("fc")
    assert fc_ops and all(op.module == "fc" and op.attributes["k"] == 1 for op in fc_ops)
    assert all(type(op.attributes["k"]) is int for op in fc_ops)  # an int annotation: i64
    assert [op.index for op in program.ops_for("")] == [op.index for op in program.ops if op.nodes]
    assert program.ops_for("nothing") == ()
    sources = program.sources(fc_ops[-1])
    assert [s.fx_node for s in sources] == list(fc_ops[-1].nodes)
    assert sources[0].metadata["k"] == "1"
    assert sources[0].module_type == "torch.nn.modules.linear.Linear"
    assert sources[0].file == __file__  # the line calling self.fc, not torch's linear.py
    for op in program.unattributed_ops:
        assert program.sources(op) == ()


def test_run_with_wrong_shape_says_what_it_expects(program: StableHLOProgram) -> None:
    with pytest.raises(StableHLOError, match="expects 1 inputs"):
        program.run(torch.randn(2, 5))


class _Masked(torch.nn.Module):  # type: ignore[misc]
    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(4, 4)

    def forward(
        self, x: torch.Tensor, mask: torch.Tensor | None = None, use_cache: bool = True
    ) -> torch.Tensor:
        y = self.fc(x)
        if mask is not None:
            y = y * mask
        return y + 1.0 if use_cache else y


def test_run_takes_the_models_own_calling_convention() -> None:
    model = _Masked().eval()
    x, mask = torch.randn(2, 4), (torch.rand(2, 4) > 0.5).float()
    program = export_stablehlo(model, (x,), {"mask": mask, "use_cache": False})
    expected = model(x, mask=mask, use_cache=False).detach().numpy()
    for result in (
        program.run(x, mask=mask),
        program.run(x, mask=mask, use_cache=False),
        program.run(x=x, mask=mask),
        program.run(mask=mask, x=x),
    ):
        np.testing.assert_allclose(result[0], expected, rtol=1e-5, atol=1e-6)
    with pytest.raises(StableHLOError, match="misses 'mask'"):
        program.run(x)
    with pytest.raises(StableHLOError, match="fixed it to False"):
        program.run(x, mask=mask, use_cache=True)
    with pytest.raises(StableHLOError, match="do not match the model's forward"):
        program.run(x, mask=mask, bogus=1)
