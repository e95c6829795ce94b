"""--dynamic-shapes FILE.json read as torch.onnx.export's dynamic_shapes."""

from __future__ import annotations

import json
import pathlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from modelprov._cli._torch_onnx import read_dynamic_shapes
from modelprov.errors import UsageError

_NAMES = st.one_of(st.none(), st.text("abcdefgh_", min_size=1, max_size=6))
_DIMS = st.dictionaries(st.integers(0, 5), _NAMES, max_size=4)


@given(st.dictionaries(st.text("xyz_", min_size=1, max_size=5), _DIMS, max_size=4))
def test_dim_indices_become_ints_and_names_stay(shapes: dict[str, dict[int, str | None]]) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        path = pathlib.Path(folder) / "shapes.json"
        path.write_text(json.dumps(shapes))  # JSON keys are strings
        assert read_dynamic_shapes(str(path)) == shapes


def test_nested_and_listed_dims(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "shapes.json"
    path.write_text(json.dumps({"pair": [{"0": "batch"}, None], "x": ["batch", None]}))
    assert read_dynamic_shapes(str(path)) == {"pair": [{0: "batch"}, None], "x": ["batch", None]}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{nope", "cannot read dynamic shapes"),
        ("[1]", "must be a JSON object"),
        ('{"x": 3}', "'x': give dims as"),
        ('{"x": {"0": 1}}', "'x'['0']: give dims as"),
    ],
)
def test_a_bad_file_is_a_usage_error_naming_it(
    tmp_path: pathlib.Path, text: str, message: str
) -> None:
    path = tmp_path / "shapes.json"
    path.write_text(text)
    with pytest.raises(UsageError, match=f"^{path}") as caught:
        read_dynamic_shapes(str(path))
    assert message in str(caught.value)
