"""Progress lines and summaries of the command line."""

from __future__ import annotations

import io
import time

from modelprov._cli import _progress


def test_short_steps_say_nothing_long_ones_say_start_repeat_and_end() -> None:
    out = io.StringIO()
    with _progress.status("quick", stream=out, first_after=0.5):
        pass
    assert out.getvalue() == ""
    with _progress.status("exporting m.onnx", stream=out, first_after=0.05, every=0.1):
        time.sleep(0.35)
    lines = out.getvalue().splitlines()
    assert lines[0] == "modelprov: exporting m.onnx..."
    assert 2 <= len(lines) <= 6  # rate-limited
    assert lines[-1].startswith("modelprov: exporting m.onnx: done in ")


def test_quiet_silences_progress_and_summary() -> None:
    out = io.StringIO()
    token = _progress.QUIET.set(True)
    try:
        with _progress.status("slow", stream=out, first_after=0.01):
            time.sleep(0.05)
        _progress.summary("wrote x", stream=out)
    finally:
        _progress.QUIET.reset(token)
    assert out.getvalue() == ""
    _progress.summary("wrote x", stream=out)
    assert out.getvalue() == "modelprov: wrote x\n"
