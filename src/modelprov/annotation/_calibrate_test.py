import json
import logging
import math
from typing import Any

import numpy as np
import pytest
import torch
from torch import nn

from modelprov.annotation._calibrate import calibrate
from modelprov.annotation._module_annotations import module_paths, normalize_annotations
from modelprov.errors import AnnotationError

ALL_STATS = ("min", "max", "mean", "std", "p1", "p50", "p99.9", "histogram")


def _seed_model() -> nn.Sequential:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 10)).eval()


def _batches(count: int = 4, rows: int = 16, features: int = 784) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(1)
    return [torch.randn(rows, features, generator=generator) for _ in range(count)]


def _outputs_by_hook(model: nn.Module, batches: list[torch.Tensor]) -> dict[str, np.ndarray]:
    """All output elements of every leaf module, measured independently of calibrate."""
    seen: dict[str, list[np.ndarray]] = {}
    handles = []
    for path, module in model.named_modules():
        if next(module.children(), None) is None:

            def hook(m: nn.Module, a: Any, out: torch.Tensor, path: str = path) -> None:
                seen.setdefault(path, []).append(out.detach().reshape(-1).numpy().copy())

            handles.append(module.register_forward_hook(hook))
    with torch.no_grad():
        for batch in batches:
            model(batch)
    for handle in handles:
        handle.remove()
    return {path: np.concatenate(chunks) for path, chunks in seen.items()}


def _state(model: nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def _assert_same_state(model: nn.Module, before: dict[str, torch.Tensor]) -> None:
    after = model.state_dict()
    assert list(after) == list(before)
    for key, value in before.items():
        assert torch.equal(after[key], value), key


def test_seed_model_min_max_match_independent_hooks() -> None:
    model, batches = _seed_model(), _batches()
    before, modes = _state(model), [m.training for m in model.modules()]
    result = calibrate(model, batches)

    assert set(result) == {"0", "1", "2"}
    assert result["1"]["custom.min"] == 0.0 and type(result["1"]["custom.min"]) is float
    measured = _outputs_by_hook(model, batches)
    for path, values in measured.items():
        assert set(result[path]) == {"custom.min", "custom.max"}
        for stat, expected in (("min", values.min()), ("max", values.max())):
            number = result[path][f"custom.{stat}"]
            assert type(number) is float and number == float(expected)
            assert np.float32(number) == expected  # exact float32 round trip
    _assert_same_state(model, before)
    assert [m.training for m in model.modules()] == modes
    assert all(not m._forward_hooks for m in model.modules())
    # Written as metadata: the shortest string that reads back to the same float.
    written = normalize_annotations(result, module_paths(model))
    assert written == {p: {k: repr(v) for k, v in keys.items()} for p, keys in result.items()}
    for path, keys in written.items():
        assert all(float(text) == result[path][key] for key, text in keys.items())


def test_all_stats_are_exact_for_small_runs() -> None:
    model, batches = _seed_model(), _batches()
    result = calibrate(model, batches, stats=ALL_STATS, prefix="q.")
    for path, values in _outputs_by_hook(model, batches).items():
        entries = result[path]
        wide = values.astype(np.float64)
        assert math.isclose(float(entries["q.mean"]), wide.mean(), rel_tol=1e-12, abs_tol=1e-15)
        assert math.isclose(float(entries["q.std"]), wide.std(), rel_tol=1e-12)
        for q in ("1", "50", "99.9"):
            assert float(entries[f"q.p{q}"]) == pytest.approx(np.percentile(wide, float(q)))
        histogram = json.loads(str(entries["q.histogram"]))
        assert all(type(entries[f"q.{stat}"]) is float for stat in ("mean", "std", "p1", "min"))
        assert histogram["format"] == "modelprov.histogram"
        assert histogram["version"] == 1
        assert len(histogram["edges"]) == 65
        assert len(histogram["counts"]) == 64
        assert histogram["edges"][0] == float(entries["q.min"])
        assert histogram["edges"][-1] == float(entries["q.max"])
        assert histogram["total"] == histogram["sampled"] == values.size == sum(histogram["counts"])
        expected_counts, _ = np.histogram(wide, bins=np.array(histogram["edges"]))
        assert histogram["counts"] == expected_counts.tolist()
    assert float(result["1"]["q.p1"]) == 0.0  # more than 1% of ReLU outputs are zero


def test_percentiles_are_sampled_beyond_sample_size() -> None:
    model = nn.Identity().eval()
    generator = torch.Generator().manual_seed(2)
    batches = [torch.rand(10_000, generator=generator) for _ in range(10)]
    first = calibrate(model, batches, stats=("p10", "p50", "p90", "histogram"), sample_size=4096)
    again = calibrate(model, batches, stats=("p10", "p50", "p90", "histogram"), sample_size=4096)
    assert first == again  # seeded
    entries = first[""]
    for q in (10, 50, 90):
        # uniform data: pQ ~ Q/100; 4096 samples give a rank error of < 0.01 (> 4 sigma)
        assert abs(float(entries[f"custom.p{q}"]) - q / 100) < 0.03
    histogram = json.loads(str(entries["custom.histogram"]))
    assert histogram["total"] == 100_000
    assert histogram["sampled"] == sum(histogram["counts"]) == 4096
    assert max(histogram["counts"]) < 2 * min(histogram["counts"]) + 40


def test_conv_bn_relu_in_eval_mode_keeps_running_stats() -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU())
    with torch.no_grad():  # give BN non-trivial running statistics
        model(torch.randn(4, 3, 8, 8) * 3 + 1)
    model.eval()
    before = _state(model)
    result = calibrate(model, [torch.randn(2, 3, 8, 8) for _ in range(3)])
    assert set(result) == {"0", "1", "2"}
    _assert_same_state(model, before)
    assert not any(m.training for m in model.modules())


def test_training_mode_is_refused_and_nothing_changes() -> None:
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.Dropout())
    before = _state(model)
    with pytest.raises(AnnotationError, match=r"eval mode.*BatchNorm.*model\.eval\(\)"):
        calibrate(model, [torch.randn(2, 3, 8, 8)])
    _assert_same_state(model, before)
    assert all(m.training for m in model.modules())


def test_lstm_tuple_outputs_get_per_output_keys() -> None:
    torch.manual_seed(0)
    model = nn.LSTM(8, 16).eval()
    batches = [torch.randn(5, 3, 8) for _ in range(2)]
    entries = calibrate(model, batches)[""]
    assert set(entries) == {
        "custom.min",
        "custom.max",
        *(f"custom.output{i}.{s}" for i in range(3) for s in ("min", "max")),
    }
    with torch.no_grad():
        outs = [model(b) for b in batches]
    output, hidden, cell = (
        torch.stack(x) for x in zip(*[(o, h, c) for o, (h, c) in outs], strict=True)
    )
    assert float(entries["custom.output0.min"]) == output.min().item()
    assert float(entries["custom.output1.max"]) == hidden.max().item()
    assert float(entries["custom.output2.min"]) == cell.min().item()
    assert float(entries["custom.min"]) == min(t.min().item() for t in (output, hidden, cell))
    assert float(entries["custom.max"]) == max(t.max().item() for t in (output, hidden, cell))


class _ValuesAndIndices(nn.Module):  # type: ignore[misc]
    def forward(self, x: torch.Tensor) -> dict[str, Any]:
        return {"values": x * 2, "indices": x.argmax(-1), "note": "not a tensor"}


class _TwoInputs(nn.Module):  # type: ignore[misc]
    def __init__(self) -> None:
        super().__init__()
        self.left = nn.Linear(4, 3)
        self.right = nn.Linear(5, 3)
        self.pick = _ValuesAndIndices()

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> Any:
        return self.pick(self.left(x) + self.right(y))


def test_tuple_and_dict_batches_and_integer_outputs() -> None:
    model = _TwoInputs().eval()
    x, y = torch.randn(2, 4), torch.randn(2, 5)
    by_tuple = calibrate(model, [(x, y)])
    by_dict = calibrate(model, [{"x": x, "y": y}])
    assert by_tuple == by_dict
    # The argmax output is int64: no stats, but it counts as output 1.
    assert set(by_tuple["pick"]) == {
        "custom.min",
        "custom.max",
        "custom.output0.min",
        "custom.output0.max",
    }
    assert by_tuple["pick"]["custom.min"] == by_tuple["pick"]["custom.output0.min"]


class _Counter(nn.Module):  # type: ignore[misc]
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("calls", torch.zeros(()))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        return x


def test_buffers_changed_in_eval_mode_are_restored(caplog: pytest.LogCaptureFixture) -> None:
    model = _Counter().eval()
    with caplog.at_level(logging.WARNING):
        calibrate(model, [torch.ones(2)] * 3)
    assert model.calls.item() == 0
    assert "'calls'" in caplog.text


def test_wrong_shape_batch_names_index_and_torch_error() -> None:
    model = _seed_model()
    batches = [*_batches(2), torch.randn(4, 100)]
    with pytest.raises(AnnotationError) as info:
        calibrate(model, batches)
    assert "batch 2" in str(info.value)
    assert "mat1 and mat2" in str(info.value)
    assert all(not m._forward_hooks for m in model.modules())


def test_nan_output_names_module_and_batch() -> None:
    model = _seed_model()
    batches = _batches(3)
    batches[1][0, 0] = math.nan
    with pytest.raises(AnnotationError, match=r"module '0' \(Linear\).*batch 1"):
        calibrate(model, batches)
    assert all(not m._forward_hooks for m in model.modules())


@pytest.mark.parametrize(
    ("kwargs", "batches", "fragment"),
    [
        ({"stats": ("min", "p99.9", "median")}, None, r"'median'.*'min'.*p99\.9"),
        ({"stats": ("p101",)}, None, "'p101'"),
        ({"prefix": "modelprov."}, None, "reserved prefix"),
        ({}, [], "batches is empty"),
        ({}, torch.randn(2, 784), "single Tensor"),
        ({}, [object()], "batch 0 is a object"),
    ],
)
def test_bad_arguments(kwargs: dict[str, Any], batches: Any, fragment: str) -> None:
    batches = _batches(1) if batches is None else batches
    with pytest.raises(AnnotationError, match=fragment):
        calibrate(_seed_model(), batches, **kwargs)


def test_non_module_is_rejected() -> None:
    with pytest.raises(AnnotationError, match="got function"):
        calibrate(lambda x: x, _batches(1))


def test_progress_bar_runs(capsys: pytest.CaptureFixture[str]) -> None:
    result = calibrate(_seed_model(), _batches(2), progress=True)
    assert set(result) == {"0", "1", "2"}
    assert capsys.readouterr().out == ""


def test_large_outputs_are_summarized_in_slices(monkeypatch: pytest.MonkeyPatch) -> None:
    import modelprov.annotation._calibrate as calibrate_module

    batches = [torch.randn(1000, generator=torch.Generator().manual_seed(3)), torch.zeros(0)]
    whole = calibrate(nn.Identity().eval(), batches, stats=ALL_STATS)
    monkeypatch.setattr(calibrate_module, "_SLICE_ELEMENTS", 64)
    sliced = calibrate(nn.Identity().eval(), batches, stats=ALL_STATS)
    for stat in ("min", "max", "p1", "p50", "p99.9", "histogram"):
        assert sliced[""][f"custom.{stat}"] == whole[""][f"custom.{stat}"]
    for stat in ("mean", "std"):
        assert float(sliced[""][f"custom.{stat}"]) == pytest.approx(
            float(whole[""][f"custom.{stat}"]), rel=1e-12, abs=1e-15
        )
