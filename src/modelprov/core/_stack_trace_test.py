"""Stack-trace parsing, merging and hygiene."""

from __future__ import annotations

import pathlib

import pytest

from modelprov.core import _stack_trace as st

OUTER = 'File "/home/me/proj/model.py", line 30, in forward\n    y = self.block(x)'
FIRST = OUTER + '\n  File "/home/me/proj/block.py", line 12, in forward\n    k = k.transpose(1, 2)'
SECOND = (
    OUTER + '\n  File "/home/me/proj/block.py", line 13, in forward\n    k = k.transpose(-2, -1)'
)


def test_frames_and_innermost() -> None:
    frames = st.frames(FIRST)
    assert [(f.file, f.line, f.function) for f in frames] == [
        ("/home/me/proj/model.py", 30, "forward"),
        ("/home/me/proj/block.py", 12, "forward"),
    ]
    innermost = st.innermost_frame(FIRST)
    assert innermost is not None and innermost.code == "k = k.transpose(1, 2)"


def test_merge_shows_shared_frames_once_and_round_trips() -> None:
    merged = st.format_merged_traces([FIRST, SECOND, FIRST])
    assert merged.count("y = self.block(x)") == 1
    assert merged.startswith("[modelprov: 2 stack traces; 2 shared lines]")
    assert st.split_merged_traces(merged) == [FIRST, SECOND]
    assert st.format_merged_traces([merged, SECOND]) == merged


def test_single_trace_stays_verbatim() -> None:
    assert st.format_merged_traces([FIRST, FIRST]) == FIRST
    assert st.split_merged_traces(FIRST) == [FIRST]


def test_chunks_concatenate_back() -> None:
    for trace in (FIRST, "no frames at all", "", FIRST + "\n"):
        assert "".join(st.split_chunks(trace)) == trace


def test_budget_elides_whole_traces_visibly() -> None:
    traces = [
        f'File "/p/m.py", line {i}, in forward\n    x = op_{i}(x)' + " " * 80 for i in range(20)
    ]
    merged = st.format_merged_traces(traces, max_bytes=600)
    assert len(merged.encode()) <= 600
    assert "stack traces elided to fit 600 bytes" in merged
    kept = st.split_merged_traces(merged)
    assert kept == traces[: len(kept)] and 0 < len(kept) < 20


def test_paths_relative_to_root_or_stripped() -> None:
    relative = st.rewrite_paths(FIRST, st.TraceOptions(root="/home/me/proj"))
    assert 'File "model.py", line 30' in relative and 'File "block.py", line 12' in relative
    assert "/home/me" not in relative
    stripped = st.rewrite_paths(
        'File "/x/y/z.py", line 1, in f\n    a', st.TraceOptions(strip_paths=True)
    )
    assert stripped.startswith('File "z.py", line 1')
    outside = st.rewrite_paths(
        'File "/elsewhere/a.py", line 1, in f', st.TraceOptions(root="/home")
    )
    assert outside == 'File "/elsewhere/a.py", line 1, in f'


def test_budget_must_be_sensible() -> None:
    with pytest.raises(ValueError, match="at least 256"):
        st.TraceOptions(max_bytes=10)


def test_display_location_shortens_the_file_and_keeps_the_line(tmp_path: pathlib.Path) -> None:
    inside = tmp_path / "pkg" / "model.py"
    assert st.display_location(f"{inside}:12", root=str(tmp_path)) == "pkg/model.py:12"
    installed = "/opt/venv/lib/python3.11/site-packages/torch/nn/modules/linear.py:125"
    assert st.display_location(installed) == "<site-packages>/torch/nn/modules/linear.py:125"
    assert st.display_location("C:/work/model.py") == "C:/work/model.py"
    assert st.display_location("model.py:7") == "model.py:7"
