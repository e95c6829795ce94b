"""``modelprov export --calibrate`` with the Hugging Face factory form (issue 16, item 4)."""

from __future__ import annotations

from pathlib import Path

import onnx
import pytest

from tests._cli import cli

pytest.importorskip("transformers")

FACTORY = "tests._factories:tiny_gpt2"  # returns (model, (ids,), {"use_cache": False})


def _ranges(path: Path) -> dict[str, str]:
    model = onnx.load(path, load_external_data=False)
    found: dict[str, str] = {}
    for node in model.graph.node:
        props = {p.key: p.value for p in node.metadata_props}
        if "custom.max" in props:
            found[node.name] = props["custom.max"]
    return found


def test_hugging_face_factory_calibrates_on_random_batches(tmp_path: Path) -> None:
    out = tmp_path / "random.onnx"
    run = cli("export", FACTORY, "--onnx", str(out), "--calibrate", "2")
    assert run.returncode == 0, run.stderr
    assert len(_ranges(out)) >= 4


@pytest.mark.slow
def test_hugging_face_factory_calibrates_on_user_batches(tmp_path: Path) -> None:
    random_out, user_out = tmp_path / "random.onnx", tmp_path / "user.onnx"
    batches = "tests._factories:tiny_gpt2_batches"
    for args in (
        ("--onnx", str(random_out), "--calibrate", "2"),
        ("--onnx", str(user_out), "--batches", batches),
    ):
        run = cli("export", FACTORY, *args)
        assert run.returncode == 0, run.stderr
    user_ranges = _ranges(user_out)
    assert len(user_ranges) >= 4 and user_ranges != _ranges(random_out)
