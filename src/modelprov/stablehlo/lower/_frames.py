"""Pick the frames of an FX node's stack trace that say where the user's model made it.

torch.export records the Python frames of the model's ``forward`` calls (outermost first).
The user frame is ``modelprov.core._stack_trace.user_frame`` (the rule ``Source.file``/``line`` use,
``TraceOptions.user_code`` included) applied to the frames that are not the lowering tools'
(modelprov, torchax, jax, torch's tracing machinery): the innermost frame of the user's own
code, else of the library's model code (a bare ``nn.Sequential``, a transformers config).
The call stack is the frames from the outermost down to it, tools skipped.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence

from modelprov.core import _stack_trace
from modelprov.core._stack_trace import Frame, TraceOptions

__all__ = ["call_stack", "is_tool_file"]

_TOOLS = re.compile(
    r"(?:^|[/\\])(?:torchax|jax|jaxlib)[/\\]"
    r"|(?:^|[/\\])modelprov[/\\](?:stablehlo|onnx|annotation)[/\\]"  # or a stage folder of them
    r"(?:[a-z]\w*[/\\])?_(?!\w*_test\.py)\w+\.py$"
    r"|(?:^|[/\\])torch[/\\](?:fx|_\w+|export|utils|autograd)[/\\]"
    r"|(?:^|[/\\])torch[/\\]nn[/\\]modules[/\\]module\.py$"
)


def is_tool_file(path: str) -> bool:
    """True for files of the lowering tools and torch's tracing machinery."""
    return bool(_TOOLS.search(path))


def _user_index(parsed: Sequence[Frame], options: TraceOptions | None) -> int | None:
    candidates = [frame for frame in parsed if not is_tool_file(frame.file)]
    if not candidates:
        return None
    chosen = _stack_trace.user_frame(candidates, options.user_code if options else None)
    if chosen is None:
        return None
    return max(i for i, frame in enumerate(parsed) if frame is chosen)


def call_stack(trace: str, options: TraceOptions | None = None) -> tuple[Frame, ...]:
    """The frames from the outermost down to the user frame (the last one), tools skipped.

    Paths are rewritten by ``options`` (relative to a root, or stripped) after the frames
    are chosen, so the choice does not depend on how paths are displayed. Empty when the
    trace has no usable frame.
    """
    traces = _stack_trace.split_merged_traces(trace)
    if not traces:
        return ()
    parsed = _stack_trace.frames(traces[0])
    index = _user_index(parsed, options)
    if index is None:
        return ()
    kept = [frame for frame in parsed[: index + 1] if not is_tool_file(frame.file)]
    if options is None:
        return tuple(kept)
    return tuple(
        Frame(_rewrite(frame.file, options), frame.line, frame.function, frame.code)
        for frame in kept
    )


def _rewrite(path: str, options: TraceOptions) -> str:
    line = f'File "{path}", line 1'
    rewritten = _stack_trace.rewrite_paths(line, options)
    parsed = _stack_trace.frames(rewritten)
    return parsed[0].file if parsed else os.path.basename(path)
