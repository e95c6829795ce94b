import copy
import pickle
from typing import Any

import numpy as np
import pytest
import torch
from torch import nn

from modelprov.annotation._module_annotations import (
    annotate,
    annotations,
    effective_annotations,
    module_paths,
    normalize_annotations,
)
from modelprov.errors import AnnotationError


def _model() -> nn.Sequential:
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Linear(8, 16), nn.ReLU(), nn.Sequential(nn.Linear(16, 4), nn.Sigmoid())
    ).eval()


def test_annotate_stores_typed_values_and_returns_module() -> None:
    model = _model()
    given: dict[str, Any] = {"bits": 8, "scale": 0.5, "signed": True, "name": "fc1"}
    given["zero"] = np.float32(-0.25)
    returned = annotate(model[0], given)
    assert returned is model[0]
    stored = annotations(model)
    assert stored == {"0": {"bits": 8, "scale": 0.5, "signed": True, "name": "fc1", "zero": -0.25}}
    # Plain Python types, numpy and torch scalars unwrapped: numbers stay numbers.
    assert [type(v) for v in stored["0"].values()] == [int, float, bool, str, float]
    scalars = {"t": torch.tensor(3), "f": torch.tensor(1.5, dtype=torch.float64)}
    assert annotations(annotate(_model(), scalars))[""] == {"t": 3, "f": 1.5}
    # What ONNX metadata holds: their string forms.
    assert normalize_annotations(stored, module_paths(model)) == {
        "0": {"bits": "8", "scale": "0.5", "signed": "true", "name": "fc1", "zero": "-0.25"}
    }


def test_annotate_merges_later_keys_win() -> None:
    model = _model()
    annotate(annotate(model, {"a": 1, "b": 2}), {"b": 3, "c": "x"})
    assert annotations(model) == {"": {"a": 1, "b": 3, "c": "x"}}


def test_annotate_keeps_state_dict_parameters_and_forward() -> None:
    model = _model()
    x = torch.randn(3, 8)
    before_state = {k: v.clone() for k, v in model.state_dict().items()}
    before_out = model(x)
    before_params = [p.data_ptr() for p in model.parameters()]
    annotate(model, {"root": 1})
    annotate(model[2][0], {"bits": 4})
    after_state = model.state_dict()
    assert list(after_state) == list(before_state)
    assert all(torch.equal(after_state[k], v) for k, v in before_state.items())
    assert [p.data_ptr() for p in model.parameters()] == before_params
    assert list(model.buffers()) == []
    assert torch.equal(model(x), before_out)


def test_annotations_travel_with_deepcopy_and_pickle() -> None:
    model = _model()
    annotate(model[1], {"bits": 8})
    assert annotations(copy.deepcopy(model)) == {"1": {"bits": 8}}
    assert annotations(pickle.loads(pickle.dumps(model))) == {"1": {"bits": 8}}


def test_annotated_model_still_exports() -> None:
    model = annotate(_model(), {"bits": 8})
    x = torch.randn(2, 8)
    exported = torch.export.export(model, (x,))
    assert torch.allclose(exported.module()(x), model(x))


def test_annotate_rejects_non_module() -> None:
    with pytest.raises(AnnotationError, match=r"torch\.nn\.Module, got str"):
        annotate("fc1", {"bits": 8})
    with pytest.raises(AnnotationError, match="got Tensor"):
        annotate(torch.zeros(1), {"bits": 8})


@pytest.mark.parametrize(
    ("metadata", "fragment"),
    [
        ({"ok": 1, "bad": [1, 2]}, "'bad'.*list"),
        ({"ok": 1, "scale": float("nan")}, "'scale'.*nan"),
        ({"ok": 1, "modelprov.x": 1}, "reserved"),
    ],
)
def test_annotate_is_atomic_on_bad_input(metadata: dict[str, object], fragment: str) -> None:
    model = _model()
    annotate(model, {"keep": "me"})
    with pytest.raises(AnnotationError, match=fragment):
        annotate(model, metadata)  # type: ignore[arg-type]
    assert annotations(model) == {"": {"keep": "me"}}


def test_module_paths_and_shared_modules() -> None:
    shared = nn.Linear(2, 2)
    model = nn.Sequential(shared, nn.ReLU(), shared)
    annotate(shared, {"bits": 8})
    assert module_paths(model) == ["", "0", "1", "2"]
    assert annotations(model) == {"0": {"bits": 8}, "2": {"bits": 8}}
    assert module_paths(_model()) == ["", "0", "1", "2", "2.0", "2.1"]


def test_normalize_formats_and_drops_empty() -> None:
    paths = module_paths(_model())
    normalized = normalize_annotations({"2.0": {"bits": 4, "range": 1.5}, "1": {}}, paths)
    assert normalized == {"2.0": {"bits": "4", "range": "1.5"}}


def test_normalize_unknown_path_names_close_matches() -> None:
    paths = module_paths(_model())
    with pytest.raises(AnnotationError) as info:
        normalize_annotations({"2.O": {"bits": 4}}, paths)
    message = str(info.value)
    assert "'2.O'" in message
    assert "'2.0'" in message
    assert "6 module paths" in message


def test_normalize_bad_value_names_module_and_key() -> None:
    with pytest.raises(AnnotationError, match=r"module '1'.*'bits'.*NoneType"):
        normalize_annotations({"1": {"bits": None}}, ["", "1"])
    with pytest.raises(AnnotationError, match=r"module '1'.*mapping"):
        normalize_annotations({"1": 4}, ["", "1"])  # type: ignore[dict-item]


def test_effective_annotations_inherit_and_override() -> None:
    normalized = {
        "": {"owner": "team", "bits": "8"},
        "encoder": {"bits": "4", "stage": "enc"},
        "encoder.layer.0": {"bits": "2"},
    }
    assert effective_annotations(normalized, "") == {"owner": "team", "bits": "8"}
    assert effective_annotations(normalized, "decoder.fc") == {"owner": "team", "bits": "8"}
    assert effective_annotations(normalized, "encoder.layer") == {
        "owner": "team",
        "bits": "4",
        "stage": "enc",
    }
    assert effective_annotations(normalized, "encoder.layer.0.fc") == {
        "owner": "team",
        "bits": "2",
        "stage": "enc",
    }
    # 'encoder2' is not a child of 'encoder': paths inherit by dotted components only.
    assert effective_annotations(normalized, "encoder2") == {"owner": "team", "bits": "8"}
