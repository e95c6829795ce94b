"""User frames: the user's own code wins over library and tool frames; paths rewritten after."""

from __future__ import annotations

from modelprov.core._stack_trace import TraceOptions
from modelprov.stablehlo.lower._frames import call_stack, is_tool_file

_SITE = "/venv/lib/python3.11/site-packages"
_TRACE = f'''File "/home/me/proj/model.py", line 30, in forward
    y = self.block(x)
  File "/home/me/proj/block.py", line 12, in forward
    h = self.fc(y)
  File "{_SITE}/torch/nn/modules/linear.py", line 134, in forward
    return F.linear(input, self.weight, self.bias)'''


def test_user_frame_is_the_innermost_frame_of_the_users_code() -> None:
    frames = call_stack(_TRACE)
    assert [(f.file, f.line) for f in frames] == [
        ("/home/me/proj/model.py", 30),
        ("/home/me/proj/block.py", 12),
    ]


def test_library_only_trace_falls_back_to_the_innermost_library_frame() -> None:
    trace = f'''File "{_SITE}/torch/nn/modules/container.py", line 250, in forward
    input = module(input)
  File "{_SITE}/torch/nn/modules/linear.py", line 134, in forward
    return F.linear(input, self.weight, self.bias)
  File "{_SITE}/torchax/ops/jaten.py", line 1069, in _aten_addmm
    x'''
    frames = call_stack(trace)
    assert frames[-1].file.endswith("torch/nn/modules/linear.py")
    assert not any("torchax" in frame.file for frame in frames)


def test_paths_are_rewritten_after_the_choice() -> None:
    frames = call_stack(_TRACE, TraceOptions(root="/home/me/proj"))
    assert [f.file for f in frames] == ["model.py", "block.py"]
    stripped = call_stack(
        _TRACE.replace("/home/me/proj", f"{_SITE}/pkg"), TraceOptions(strip_paths=True)
    )
    assert stripped[-1].file == "linear.py"


def test_classification() -> None:
    assert is_tool_file("/x/site-packages/torchax/export.py")
    assert is_tool_file("/src/modelprov/stablehlo/lower/_lower.py")
    assert is_tool_file("/src/modelprov/onnx/export/_capture.py")  # a stage folder
    assert not is_tool_file("/src/modelprov/onnx/export/_capture_test.py")
    assert is_tool_file(f"{_SITE}/torch/fx/interpreter.py")
    assert not is_tool_file(f"{_SITE}/torch/nn/modules/linear.py")
    assert call_stack("") == ()


def test_user_code_option_chooses_the_user_frame() -> None:
    only_model = TraceOptions(user_code=lambda path: path.endswith("model.py"))
    frames = call_stack(_TRACE, only_model)
    assert [(f.file, f.line) for f in frames] == [("/home/me/proj/model.py", 30)]
