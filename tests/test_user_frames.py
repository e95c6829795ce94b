"""Source.file/line name the user's own line, not torch's (issue 16, item 1)."""

from __future__ import annotations

import importlib.util
import sys
import sysconfig
import textwrap
from pathlib import Path
from types import ModuleType

import onnx_ir as ir
import pytest
import torch

import modelprov
from modelprov.core import _stack_trace
from modelprov.onnx._lookup import node_sources

USER_MODEL = textwrap.dedent(
    """
    import torch
    from torch import nn


    class Block(nn.Module):
        def __init__(self, width):
            super().__init__()
            self.norm = nn.LayerNorm(width)
            self.fc = nn.Linear(width, width)
            self.act = nn.GELU()

        def forward(self, x):
            h = self.norm(x)
            h = self.fc(h)
            h = self.act(h)
            return x + h


    class Net(nn.Module):
        def __init__(self, width=16):
            super().__init__()
            self.blocks = nn.Sequential(Block(width), Block(width))
            self.head = nn.Linear(width, 4)

        def forward(self, x):
            y = self.blocks(x).relu()
            return self.head(y)
    """
)


def _import_user_model(tmp_path: Path) -> ModuleType:
    path = tmp_path / "user_net.py"
    path.write_text(USER_MODEL)
    spec = importlib.util.spec_from_file_location("user_net_for_frames", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _user_sources(model: ir.Model, path: Path) -> list[modelprov.Source]:
    """Sources of FX nodes whose stack passes through the user's file, one per source id."""
    found: dict[str, modelprov.Source] = {}
    for _, sources in node_sources(model):
        for source in sources:
            if any(frame.file == str(path) for frame in source.frames()):
                found[source.id] = source
    return list(found.values())


@pytest.fixture(scope="module")
def user_export(tmp_path_factory: pytest.TempPathFactory) -> tuple[ir.Model, Path]:
    folder = tmp_path_factory.mktemp("user_code")
    module = _import_user_model(folder)
    net = module.Net().eval()
    program = modelprov.export(net, (torch.randn(2, 16),), optimize=False)
    return program.model, folder / "user_net.py"


def test_95_percent_of_user_fx_nodes_point_into_the_user_file(
    user_export: tuple[ir.Model, Path],
) -> None:
    model, path = user_export
    sources = _user_sources(model, path)
    targets = {source.target for source in sources}
    assert any("linear" in t or "addmm" in t for t in targets)
    assert any("layer_norm" in t for t in targets) and any("gelu" in t for t in targets)
    inside = [source for source in sources if source.file == str(path)]
    assert len(inside) / len(sources) >= 0.95, [(s.id, s.file) for s in sources]
    lines = {source.line for source in inside}
    # each Linear/LayerNorm/GELU call names the line calling it in the user's forward
    source_text = path.read_text().splitlines()
    called = {source_text[line - 1].strip() for line in lines if line is not None}
    assert {"h = self.norm(x)", "h = self.fc(h)", "h = self.act(h)"} <= called
    assert "return self.head(y)" in called
    # the whole stack is still there, torch's frames included
    linear = next(s for s in inside if "linear" in s.target or "addmm" in s.target)
    torch_folder = Path(torch.__file__).resolve().parent
    assert any(Path(frame.file).resolve().is_relative_to(torch_folder) for frame in linear.frames())


def test_user_code_roots_and_predicates_choose_the_frame(
    user_export: tuple[ir.Model, Path],
) -> None:
    model, path = user_export
    source = next(s for s in _user_sources(model, path) if "layer_norm" in s.target)
    torch_only = _stack_trace.user_frame(
        source.stack_trace, lambda file: "torch" in Path(file).parts
    )
    assert torch_only is not None and torch_only.file.endswith("normalization.py")
    rooted = _stack_trace.user_frame(source.stack_trace, [str(path.parent)])
    assert rooted is not None and rooted.file == str(path) and rooted.code == "h = self.norm(x)"
    with pytest.raises(TypeError):
        _stack_trace.user_frame(source.stack_trace, str(path.parent))


def test_trace_options_user_code_reaches_the_sources(
    user_export: tuple[ir.Model, Path],
) -> None:
    model, _ = user_export
    options = modelprov.TraceOptions(user_code=lambda file: file.endswith("linear.py"))
    optimized = modelprov.optimize(model, trace_options=options)
    from modelprov.core._provenance import Provenance

    table = Provenance.read(optimized, trace_options=options).table
    linear = [s for s in table if s.target and "linear" in s.target]
    assert linear and all(s.file is not None and s.file.endswith("linear.py") for s in linear)


def test_fallback_when_no_frame_is_the_users() -> None:
    site = "/venv/lib/python3.11/site-packages"
    trace = (
        f'File "{site}/transformers/models/bert/modeling_bert.py", line 10, in forward\n'
        "    x = self.dense(x)\n"
        f'  File "{_stack_trace._library_folders()[0][0]}/nn/modules/linear.py", line 134, '
        "in forward\n    return F.linear(input, self.weight, self.bias)"
    )
    frame = _stack_trace.user_frame(trace)
    assert frame is not None and frame.file.endswith("modeling_bert.py")
    # the same with this interpreter's own site-packages (inside a virtualenv's lib folder)
    installed = sysconfig.get_paths()["purelib"] + "/transformers/models/gpt2/modeling_gpt2.py"
    frame = _stack_trace.user_frame(
        trace.replace(f"{site}/transformers/models/bert/modeling_bert.py", installed)
    )
    assert frame is not None and frame.file == installed


def test_display_paths_are_short() -> None:
    assert _stack_trace.display_path("/p/proj/model.py", "/p/proj") == "model.py"
    assert (
        _stack_trace.display_path("/v/lib/python3.11/site-packages/torch/nn/linear.py", "/p")
        == "<site-packages>/torch/nn/linear.py"
    )
    assert _stack_trace.display_path("/elsewhere/x.py", "/p/proj") == "/elsewhere/x.py"
    assert _stack_trace.display_path("relative.py", "/p") == "relative.py"
