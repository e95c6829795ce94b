"""Stack traces as torch.onnx writes them: frames, merged form, path hygiene.

torch.onnx writes ``pkg.torch.onnx.stack_trace`` as Python-traceback frames, outermost
first, joined by newlines::

    File "/src/model.py", line 30, in forward
        y = self.block(x)
      File "/src/block.py", line 12, in forward
        k = k.transpose(1, 2)

Several distinct traces merge into one value that shows the frames all of them share once
and then each trace's own frames (see docs/metadata-format.md, "merged stack traces").
The merged form parses back into the exact original traces.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import re
from collections.abc import Iterable, Sequence

__all__ = [
    "Frame",
    "TraceOptions",
    "format_merged_traces",
    "frames",
    "innermost_frame",
    "rewrite_paths",
    "split_chunks",
    "split_merged_traces",
]

_FRAME_START = re.compile(r'^\s*File "(?P<file>[^"]*)", line (?P<line>\d+)(?:, in (?P<func>.*))?$')
_MERGED_HEADER = re.compile(
    r"^\[modelprov: (?P<count>\d+) stack traces; (?P<shared>\d+) shared lines\]$"
)
_TRACE_HEADER = re.compile(r"^\[modelprov: trace (?P<index>\d+) of (?P<count>\d+)\]$")
_ELIDED = re.compile(r"^\[modelprov: \d+ of \d+ stack traces elided .*\]$")


@dataclasses.dataclass(frozen=True)
class Frame:
    """One frame of a stack trace."""

    file: str
    line: int
    function: str
    code: str


@dataclasses.dataclass(frozen=True)
class TraceOptions:
    """Stack-trace hygiene applied when modelprov writes metadata.

    Attributes:
        root: rewrite file paths under this folder relative to it (``model.py``
            instead of ``/home/me/proj/model.py``).
        strip_paths: keep only each file's base name (wins over ``root``).
        max_bytes: per-node budget for a merged ``stack_trace`` value; beyond it whole
            traces are elided with a visible marker. The sources table stays complete.
    """

    root: str | None = None
    strip_paths: bool = False
    max_bytes: int | None = None

    def __post_init__(self) -> None:
        if self.max_bytes is not None and self.max_bytes < 256:
            raise ValueError(f"TraceOptions.max_bytes must be at least 256, got {self.max_bytes}")


def _frame_groups(lines: Sequence[str]) -> list[list[str]]:
    """Splits trace lines into groups, each starting at a ``File "..."`` line."""
    groups: list[list[str]] = []
    for line in lines:
        if _FRAME_START.match(line) or not groups:
            groups.append([line])
        else:
            groups[-1].append(line)
    return groups


def frames(trace: str) -> list[Frame]:
    """Parses a trace into frames, outermost first; text that is no frame is skipped."""
    result: list[Frame] = []
    for group in _frame_groups(trace.split("\n")):
        match = _FRAME_START.match(group[0])
        if match is None:
            continue
        code = "\n".join(line.strip() for line in group[1:]).strip()
        result.append(Frame(match["file"], int(match["line"]), (match["func"] or "").strip(), code))
    return result


@functools.lru_cache(maxsize=4096)
def innermost_frame(trace: str) -> Frame | None:
    """The frame that made the operation: the last one of the (first) trace (cached:
    the layers of a model share their traces)."""
    traces = split_merged_traces(trace)
    if not traces:
        return None
    parsed = frames(traces[0])
    return parsed[-1] if parsed else None


def split_chunks(trace: str) -> list[str]:
    """Splits a value into substrings at frame starts; ``"".join`` gives it back exactly."""
    return list(_chunks(trace))


@functools.lru_cache(maxsize=4096)
def _chunks(trace: str) -> tuple[str, ...]:
    # Cached: the layers of a model repeat the same traces.
    lines = trace.split("\n")
    chunks: list[str] = []
    for index, group in enumerate(_frame_groups(lines)):
        text = "\n".join(group)
        chunks.append(text if index == 0 else "\n" + text)
    return tuple(chunks) if chunks else (trace,)


def split_merged_traces(value: str) -> list[str]:
    """The distinct traces a value holds: one for a plain trace, all for a merged one."""
    lines = value.split("\n")
    header = _MERGED_HEADER.match(lines[0]) if lines else None
    if header is None:
        return [value] if value else []
    shared_count = int(header["shared"])
    shared = lines[1 : 1 + shared_count]
    traces: list[str] = []
    current: list[str] | None = None
    for line in lines[1 + shared_count :]:
        if _TRACE_HEADER.match(line):
            if current is not None:
                traces.append("\n".join(shared + current))
            current = []
        elif _ELIDED.match(line):
            continue
        elif current is not None:
            current.append(line)
    if current is not None:
        traces.append("\n".join(shared + current))
    return traces


def _shared_frame_lines(traces: Sequence[Sequence[list[str]]]) -> int:
    """Number of leading lines made of whole frames that every trace shares."""
    count = 0
    for groups in zip(*traces, strict=False):
        if all(group == groups[0] for group in groups):
            count += 1
        else:
            break
    # Every trace keeps at least one frame of its own, so each section says where it is.
    count = min(count, *(len(groups) - 1 for groups in traces))
    return sum(len(group) for group in traces[0][:count])


def format_merged_traces(traces: Iterable[str], *, max_bytes: int | None = None) -> str:
    """Merges traces: distinct ones in first-seen order, shared outer frames shown once.

    Already-merged values are flattened first, so merging is associative and idempotent.
    """
    distinct: list[str] = []
    seen: set[str] = set()
    for value in traces:
        for trace in split_merged_traces(value):
            if trace not in seen:
                seen.add(trace)
                distinct.append(trace)
    if len(distinct) <= 1:
        single = distinct[0] if distinct else ""
        if max_bytes is None or len(single.encode()) <= max_bytes:
            return single
        return _elide_frames(single, max_bytes)
    grouped = [_frame_groups(trace.split("\n")) for trace in distinct]
    shared_lines = _shared_frame_lines(grouped)
    all_lines = [trace.split("\n") for trace in distinct]
    out = [f"[modelprov: {len(distinct)} stack traces; {shared_lines} shared lines]"]
    out.extend(all_lines[0][:shared_lines])
    sections = [
        "\n".join([f"[modelprov: trace {i} of {len(distinct)}]", *lines[shared_lines:]])
        for i, lines in enumerate(all_lines, start=1)
    ]
    text = "\n".join([*out, *sections])
    if max_bytes is None or len(text.encode()) <= max_bytes:
        return text
    return _elide(out, sections, max_bytes)


def _elide(head: list[str], sections: list[str], max_bytes: int) -> str:
    """Keeps whole sections in order while they fit, then says how many were elided.

    When not even the shared frames and one section fit, falls back to one line per trace
    (its innermost frame), as many as fit. The result never exceeds ``max_bytes``.
    """
    kept: list[str] = []
    size = len("\n".join(head).encode())
    marker_size = 120
    for section in sections:
        extra = len(section.encode()) + 1
        if size + extra + marker_size > max_bytes:
            break
        kept.append(section)
        size += extra
    elided = len(sections) - len(kept)
    marker = (
        f"[modelprov: {elided} of {len(sections)} stack traces elided to fit "
        f"{max_bytes} bytes; modelprov.sources() returns them all]"
    )
    if kept:
        return "\n".join([*head, *kept, marker])
    return _innermost_only(head, sections, max_bytes)


def _elide_frames(trace: str, max_bytes: int) -> str:
    """One long trace: keeps the innermost whole frames that fit, says how many went."""
    groups = _frame_groups(trace.split("\n"))
    kept: list[list[str]] = []
    size = 130
    for group in reversed(groups):
        extra = len("\n".join(group).encode()) + 1
        if size + extra > max_bytes:
            break
        kept.insert(0, group)
        size += extra
    if not kept:
        return _innermost_only(["[]"], ["[]\n" + trace], max_bytes)
    marker = (
        f"[modelprov: {len(groups) - len(kept)} outer frames elided to fit {max_bytes} bytes; "
        "modelprov.sources() returns the whole trace]"
    )
    return "\n".join([marker, *(line for group in kept for line in group)])


def _innermost_only(head: list[str], sections: list[str], max_bytes: int) -> str:
    """One ``File "...", line N`` line per trace, within the budget."""
    shared = "\n".join(head[1:])
    lines = []
    for section in sections:
        body = section.split("\n", 1)[1] if "\n" in section else ""
        frame_lines = [line.strip() for line in (shared + "\n" + body).split("\n")]
        frame = [line for line in frame_lines if _FRAME_START.match(line)]
        lines.append(frame[-1] if frame else "(no frame)")
    header = (
        f"[modelprov: {len(sections)} stack traces, innermost frames only, to fit "
        f"{max_bytes} bytes; modelprov.sources() returns them all]"
    )
    out = [header]
    size = len(header.encode())
    for index, line in enumerate(lines):
        rest = f"[modelprov: {len(lines) - index} more]"
        if size + len(line.encode()) + 1 + len(rest) + 1 > max_bytes:
            out.append(rest)
            break
        out.append(line)
        size += len(line.encode()) + 1
    return "\n".join(out)[:max_bytes]


def rewrite_paths(trace: str, options: TraceOptions) -> str:
    """Rewrites the file paths of a trace's frames by the options (root or strip)."""
    if options.root is None and not options.strip_paths:
        return trace
    root = os.path.abspath(options.root) if options.root is not None else None

    def replace(match: re.Match[str]) -> str:
        path = match["file"]
        if options.strip_paths:
            new = os.path.basename(path)
        else:
            assert root is not None
            absolute = os.path.abspath(path) if os.path.isabs(path) else path
            inside = absolute == root or absolute.startswith(root.rstrip(os.sep) + os.sep)
            new = os.path.relpath(absolute, root) if inside else path
        return match.group(0).replace(f'File "{path}"', f'File "{new}"', 1)

    return "\n".join(
        _FRAME_START.sub(replace, line) if _FRAME_START.match(line) else line
        for line in trace.split("\n")
    )
