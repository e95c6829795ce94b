"""Opens a report in headless Chromium and times what a user does first: the first render
(until the page says it is ready), a search, and a click on a node. Used by
``benchmarks/bench_scale.py --browser`` (needs chromium on PATH)."""

from __future__ import annotations

import json
import os
import time

from tests._cdp import Browser, chromium_path

__all__ = ["time_report"]


def time_report(path: str, query: str = "layers.100.") -> dict[str, object]:
    """Seconds to first render, to a search for ``query``, to a click on the first hit;
    bytes; console errors."""
    binary = chromium_path()
    if binary is None:
        return {"skipped": "chromium is not installed"}
    with Browser.launched(binary) as browser:
        page = browser.new_page()
        started = time.perf_counter()
        page.goto("file://" + os.path.abspath(path), timeout=300.0)
        ready = (
            page.evaluate(
                "new Promise(r => { const c = () => document.body.dataset.ready ? "
                "r(document.body.dataset.ready) : setTimeout(c, 10); c(); })"
            )
            == "1"
        )
        first_render = time.perf_counter() - started
        nodes = int(page.evaluate("document.getElementById('graph').dataset.nodeCount"))
        started = time.perf_counter()
        page.evaluate(
            "(() => { const s = document.getElementById('search'); s.value = "
            + json.dumps(query)
            + "; s.dispatchEvent(new Event('input')); })()"
        )
        page.evaluate("new Promise(r => setTimeout(r, 150))")
        shown = int(page.evaluate("document.getElementById('match-count').dataset.shown"))
        search = time.perf_counter() - started - 0.15
        started = time.perf_counter()
        page.evaluate("document.querySelector('#node-rows tr[data-i]').click()")
        detail = page.evaluate("document.getElementById('details').dataset.node")
        click = time.perf_counter() - started
        return {
            "ready": ready,
            "nodes": nodes,
            "first_render_s": round(first_render, 2),
            "search_s": round(search, 2),
            "search_matches": shown,
            "click_s": round(click, 2),
            "clicked_node": detail,
            "html_bytes": os.path.getsize(path),
            "errors": page.errors,
        }
