"""modelprov.report: the self-contained HTML report, in code and in headless Chromium."""

from __future__ import annotations

import json
import os
import re
import warnings
from collections.abc import Iterator

import onnx_ir as ir
import pytest

import modelprov
from modelprov._cli import _examples
from modelprov.core._stack_trace import display_path
from modelprov.core._walks import all_nodes
from modelprov.keys import STACK_TRACE_KEY
from modelprov.onnx.functions._aten_call import ATEN_CALL_KEY
from modelprov.report import node_state, report, write_report
from modelprov.report._data import report_data
from modelprov.report._embed import read_report_data
from modelprov.report._layout import NODE_H, NODE_W, layout_group
from tests._cdp import Browser, Page, chromium_path
from tests._cli import cli
from tests._synthetic import synthetic_model
from tests.conftest import plain_export

HOSTILE = '</script><img src=x onerror="document.title=1"><!-- & \u2028'


@pytest.fixture(scope="module")
def gpt2_pair() -> tuple[ir.Model, ir.Model]:
    """(plain torch.onnx export, modelprov.export) of GPT-2, 2 layers, 64 wide."""
    module, args = _examples.gpt2(2, 64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        after = modelprov.export(module, args, verbose=False).model
    return plain_export("gpt2"), after


WAIT_READY = """new Promise(resolve => {
  const check = () => document.body.dataset.ready ? resolve(document.body.dataset.ready)
                                                  : setTimeout(check, 10);
  check();
})"""
"""The page renders once its data is inflated (asynchronously): wait for that."""


def test_states() -> None:
    source = modelprov.Source.from_metadata("a", {"pkg.torch.onnx.fx_node": "%a : [] = x"})
    empty = modelprov.Source.from_metadata("node:n", {})
    assert node_state({}, [source]) == "exact"
    assert node_state({}, [source, source]) == "merged"
    assert node_state({}, []) == node_state({}, [empty]) == "none"
    assert node_state({"modelprov.confidence": "inferred"}, [source]) == "recovered"
    assert node_state({"modelprov.confidence": "named"}, [source]) == "recovered"
    assert node_state({"modelprov.confidence": "exact"}, [source]) == "exact"


def test_layout_is_layered_and_does_not_overlap() -> None:
    members = list(range(20))
    predecessors = {i: [i - 1] for i in range(1, 20)} | {5: [0, 1, 2, 3, 4]}
    layout = layout_group(members, predecessors)
    boxes = set(layout.positions.values())
    assert len(boxes) == 20
    for (x1, y1), (x2, y2) in zip(sorted(boxes), sorted(boxes)[1:], strict=False):
        assert abs(x1 - x2) >= NODE_W or abs(y1 - y2) >= NODE_H
    for a, b in layout.edges:
        assert layout.positions[a][1] < layout.positions[b][1]
    assert all(
        x + NODE_W <= layout.width and y + NODE_H <= layout.height
        for x, y in layout.positions.values()
    )


def test_summary_matches_diff(gpt2_pair: tuple[ir.Model, ir.Model]) -> None:
    before, after = gpt2_pair
    data = report_data(after, before=before)
    expected = modelprov.diff(before, after)
    summary = data["summary"]
    assert summary["nodes"] == len(all_nodes(after.graph)) == len(data["nodes"])
    assert sum(summary["states"].values()) == summary["nodes"]
    assert summary["states"]["merged"] > 0
    recall = summary["before"]["recall"]
    assert recall["fx_nodes"]["value"] == expected.fx_nodes.value
    assert recall["source_lines"]["kept"] == expected.source_lines.kept
    assert {s["fx"] or s["id"] for s in data["lost"]} == set(expected.lost_sources)
    assert summary["metadata_bytes"]["total"] > 0
    assert sum(len(g["nodes"]) for g in data["groups"]) == summary["nodes"]
    for i, node in enumerate(after.graph):
        entry = data["nodes"][i]
        assert entry["name"] == node.name and entry["op"] == node.op_type


def test_lost_sources_are_listed_with_lines() -> None:
    before = plain_export("double_transpose")
    after = before.clone()
    doomed = next(n for n in after.graph if n.op_type == "Transpose")
    source = modelprov.sources(before, next(n for n in before.graph if n.name == doomed.name))[0]
    doomed.metadata_props.clear()
    doomed.name = None
    data = report_data(after, before=before)
    lost = {s["fx"]: s for s in data["lost"]}
    assert source.file is not None and lost[source.fx_node]["file"] == display_path(source.file)
    assert lost[source.fx_node]["line"] == source.line
    assert data["summary"]["states"]["none"] == 1


def test_hostile_metadata_stays_inert_json(tmp_path: str) -> None:
    model = synthetic_model(30)
    model.graph.node(0).metadata_props["custom.note"] = HOSTILE
    html = report(model)
    assert "<img" not in html and "<!--" not in html
    assert html.count("</script>") == 2
    assert read_report_data(html)["nodes"][0]["keys"]["custom.note"] == HOSTILE


def test_self_contained(gpt2_pair: tuple[ir.Model, ir.Model], tmp_path: str) -> None:
    path = os.path.join(tmp_path, "report.html")
    assert write_report(gpt2_pair[1], path, before=gpt2_pair[0]) == path
    with open(path, encoding="utf-8") as stream:
        html = stream.read()
    page = re.sub(
        r'<script type="application/x-modelprov-report".*?</script>', "", html, flags=re.S
    )
    page = page.replace('"http://www.w3.org/2000/svg"', "")  # a namespace name, never fetched
    assert not re.search(r"<link|<img|<iframe|\bsrc=|@import|url\(|https?://", page)
    assert "default-src 'none'" in html


SECRET_LINE = "SECRET_KEY = 'do-not-share'"


def _naming_files(model: ir.Model, paths: list[str]) -> ir.Model:
    """``model`` whose nodes' stack traces name ``paths`` (one each, round robin), line 2."""
    for i, node in enumerate(model.graph):
        path = paths[i % len(paths)]
        node.metadata_props[STACK_TRACE_KEY] = f'File "{path}", line 2, in forward\n    x'
    return model


def _planted_secret(tmp_path: str) -> tuple[str, str, list[str]]:
    """(working folder, the folder with settings.py outside it, paths a hostile trace names:
    absolute, ``..`` out of the working folder, a symlinked file and a symlinked folder)."""
    project = os.path.join(tmp_path, "project")
    outside = os.path.join(tmp_path, "elsewhere")
    os.makedirs(project)
    os.makedirs(outside)
    secret = os.path.join(outside, "settings.py")
    with open(secret, "w", encoding="utf-8") as stream:
        stream.write(f"import os\n{SECRET_LINE}\n")
    os.symlink(secret, os.path.join(project, "settings.py"))
    os.symlink(outside, os.path.join(project, "config"))
    named = [
        secret,
        os.path.join(project, "..", "elsewhere", "settings.py"),
        "../elsewhere/settings.py",
        os.path.join(project, "settings.py"),
        "config/settings.py",
    ]
    return project, outside, named


def test_report_never_embeds_files_outside_the_allowed_roots(
    tmp_path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    project, outside, named = _planted_secret(tmp_path)
    monkeypatch.chdir(project)
    model = _naming_files(synthetic_model(20), named)
    document = read_report_data(report(model))
    assert 2 in {source["line"] for source in document["sources"]}
    assert document["code"] == {}
    assert SECRET_LINE not in json.dumps(document)
    # Allowed by name, the same file is shown: the check above could have failed.
    allowed = report_data(model, source_roots=[outside])["code"]
    assert len(allowed) >= 2 and all(SECRET_LINE in entry["lines"] for entry in allowed.values())
    assert report_data(model, source_code=False)["code"] == {}


def test_report_command_takes_source_roots(tmp_path: str) -> None:
    project, outside, named = _planted_secret(tmp_path)
    model_path = os.path.join(project, "model.onnx")
    ir.save(_naming_files(synthetic_model(10), named[:2]), model_path)
    html = os.path.join(project, "report.html")
    for extra, shown in (([], False), (["--source-root", outside], True)):
        result = cli("report", model_path, "-o", html, *extra)
        assert result.returncode == 0, result.stderr
        with open(html, encoding="utf-8") as stream:
            document = read_report_data(stream.read())
        assert (SECRET_LINE in json.dumps(document["code"])) is shown


# --- in headless Chromium ----------------------------------------------------------------

CHROMIUM = chromium_path()
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)"
)


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    assert CHROMIUM is not None
    with Browser.launched(CHROMIUM) as launched:
        yield launched


def open_report(browser: Browser, html: str, folder: str, name: str) -> Page:
    path = os.path.join(folder, name)
    with open(path, "w", encoding="utf-8") as stream:
        stream.write(html)
    page = browser.new_page()
    page.goto("file://" + path)
    assert page.evaluate(WAIT_READY) == "1", page.errors
    return page


def type_search(page: Page, text: str) -> int:
    page.evaluate(
        "(() => { const s = document.getElementById('search'); s.value = "
        + json.dumps(text)
        + "; s.dispatchEvent(new Event('input')); })()"
    )
    page.evaluate("new Promise(r => setTimeout(r, 200))")
    return int(page.evaluate("document.getElementById('match-count').dataset.shown"))


@needs_chromium
def test_gpt2_report_in_chromium(
    browser: Browser, gpt2_pair: tuple[ir.Model, ir.Model], tmp_path: str
) -> None:
    before, after = gpt2_pair
    page = open_report(browser, report(after, before=before), tmp_path, "gpt2.html")
    shot = os.path.join(tmp_path, "gpt2.png")
    page.screenshot(shot)
    with open(shot, "rb") as stream:
        png = stream.read()
    assert png.startswith(b"\x89PNG\r\n\x1a\n") and len(png) > 10_000

    count = len(all_nodes(after.graph))
    assert page.evaluate("document.querySelectorAll('#graph .node').length") == count
    assert page.evaluate("document.getElementById('graph').dataset.nodeCount") == str(count)

    nodes = list(after.graph)
    merged = next(i for i, n in enumerate(nodes) if len(modelprov.sources(after, n)) > 1)
    page.evaluate(
        f"document.querySelector('#graph .node[data-i=\"{merged}\"]')"
        ".dispatchEvent(new MouseEvent('click', {bubbles: true}))"
    )
    details = page.evaluate("document.getElementById('details').textContent")
    for source in modelprov.sources(after, nodes[merged]):
        assert source.file is not None
        assert f"{display_path(source.file)}:{source.line}" in details
        assert source.fx_node in details

    fx_name = modelprov.sources(after, nodes[merged])[-1].fx_node
    shown = type_search(page, fx_name)
    assert 1 <= shown < count
    assert (
        page.evaluate(f"document.querySelector('#node-rows tr[data-i=\"{merged}\"]').style.display")
        == ""
    )
    assert type_search(page, "no such node anywhere") == 0
    assert type_search(page, "") == count
    assert page.errors == []
    assert all(url.startswith("file://") for url in page.requests), page.requests


@needs_chromium
def test_details_panel_shows_source_lines_with_code_first(
    browser: Browser, gpt2_pair: tuple[ir.Model, ir.Model], tmp_path: str
) -> None:
    _, after = gpt2_pair
    page = open_report(browser, report(after), tmp_path, "details.html")
    nodes = list(after.graph)
    merged = max(range(len(nodes)), key=lambda i: len(modelprov.sources(after, nodes[i])))
    sources = modelprov.sources(after, nodes[merged])
    assert len(sources) > 1 and any(ATEN_CALL_KEY in n.metadata_props for n in nodes)
    page.evaluate(f"document.querySelector('#node-rows tr[data-i=\"{merged}\"]').click()")
    panel = json.loads(
        page.evaluate(
            """JSON.stringify((() => {
              const d = document.getElementById('details');
              const top = d.getBoundingClientRect().top;
              const blocks = [...d.querySelectorAll('.srcline')];
              return {
                screen: window.innerHeight,
                lines: blocks.map(b => ({
                  where: b.querySelector('.line').textContent,
                  code: (b.querySelector('pre.code .hl') || {}).textContent || '',
                  top: b.getBoundingClientRect().top - top})),
                long: [...d.querySelectorAll('details.long')].map(x => x.open),
                height: d.scrollHeight};
            })())"""
        )
    )
    expected = {f"{display_path(s.file)}:{s.line}" for s in sources if s.file is not None}
    assert {line["where"] for line in panel["lines"]} == expected
    first = panel["lines"][0]
    assert first["top"] < panel["screen"] / 2  # the first source line is near the top
    assert all(line["top"] < panel["screen"] for line in panel["lines"][:3])
    # The highlighted code is the line the source points at, read from the user's file.
    source = next(s for s in sources if f"{display_path(s.file or '')}:{s.line}" == first["where"])
    assert source.file is not None and source.line is not None
    with open(source.file, encoding="utf-8") as stream:
        text = stream.read().splitlines()[source.line - 1].strip()
    assert first["code"].strip().endswith(text)
    # Long records stay collapsed until asked for, then show pretty-printed JSON.
    assert panel["long"] and not any(panel["long"])
    pretty = page.evaluate(
        """(() => { const box = document.querySelector('#details details.long');
          box.open = true; box.dispatchEvent(new Event('toggle'));
          return box.querySelector('pre').textContent; })()"""
    )
    assert pretty.startswith("{\n  ") or pretty.startswith("[\n  ")
    assert page.errors == []


@needs_chromium
def test_hostile_metadata_is_text_in_chromium(browser: Browser, tmp_path: str) -> None:
    model = synthetic_model(30)
    model.graph.node(0).metadata_props["custom.note"] = HOSTILE
    page = open_report(browser, report(model), tmp_path, "hostile.html")
    page.evaluate("document.querySelector('#node-rows tr').click()")
    assert HOSTILE.split("\u2028")[0] in page.evaluate(
        "document.getElementById('details').textContent"
    )
    assert page.evaluate("document.querySelectorAll('img').length") == 0
    assert page.evaluate("document.title").startswith("modelprov report")
    assert page.errors == []


@needs_chromium
def test_2000_node_report_opens_without_errors(browser: Browser, tmp_path: str) -> None:
    model = synthetic_model(2000)
    page = open_report(browser, report(model), tmp_path, "big.html")
    assert page.evaluate("document.getElementById('graph').dataset.nodeCount") == "2000"
    # Groups are drawn when first opened: a search hit inside a closed group gets drawn.
    assert page.evaluate("document.querySelectorAll('#graph .node').length") <= 2000
    assert type_search(page, "mul_1003") == 1
    assert (
        page.evaluate("document.querySelector('#graph .node.match').closest('details').open")
        is True
    )
    page.evaluate("document.getElementById('expand').click()")
    page.evaluate("new Promise(r => setTimeout(r, 200))")
    assert page.evaluate("document.querySelectorAll('#graph .node').length") == 2000
    page.screenshot(os.path.join(tmp_path, "big.png"))
    assert page.errors == []


@needs_chromium
def test_table_lists_a_bounded_number_of_rows(browser: Browser, tmp_path: str) -> None:
    model = synthetic_model(2500)
    page = open_report(browser, report(model), tmp_path, "rows.html")
    rows = "document.querySelectorAll('#node-rows tr[data-i]').length"
    assert type_search(page, "") == 2500
    assert page.evaluate(rows) == 1000
    page.evaluate("document.querySelector('#more-rows td').click()")
    assert page.evaluate(rows) == 2000
    late = model.graph.node(2400).name
    assert late and type_search(page, late) == 1
    assert page.evaluate(rows) == 1
    page.evaluate("document.querySelector('#node-rows tr[data-i]').click()")
    assert late in page.evaluate("document.getElementById('details').textContent")
    assert page.errors == []


@needs_chromium
def test_page_unpacks_what_report_data_built(browser: Browser, tmp_path: str) -> None:
    """The page's script derives states, groups, edges and sizes from the packed data:
    what it draws and lists matches the document ``report_data`` built."""
    model = synthetic_model(300)
    document = report_data(model)
    page = open_report(browser, report(model), tmp_path, "unpack.html")
    page.evaluate("document.getElementById('expand').click()")
    page.evaluate("new Promise(r => setTimeout(r, 200))")
    drawn = json.loads(
        page.evaluate(
            """JSON.stringify([...document.querySelectorAll('#graph details')].map(d => {
              const box = d.querySelector(':scope > svg.nodes');
              return {path: d.dataset.group, w: box ? +box.getAttribute('width') : null,
                h: box ? +box.getAttribute('height') : null,
                edges: box ? box.querySelectorAll('path.edge').length : 0,
                nodes: box ? [...box.querySelectorAll(':scope > g.node')].map(g => [
                  +g.dataset.i, g.getAttribute('transform'),
                  g.querySelector('rect').getAttribute('fill')]) : [],
                meta: d.querySelector(':scope > summary .meta').textContent};
            }))"""
        )
    )
    colors = document["colors"]
    nodes = document["nodes"]
    assert [d["path"] for d in drawn] == [g["path"] for g in document["groups"]]
    for shown, group in zip(drawn, document["groups"], strict=True):
        assert f"{group['count']} nodes" in shown["meta"]
        assert [n[0] for n in shown["nodes"]] == group["nodes"]
        if group["nodes"]:
            assert (shown["w"], shown["h"]) == (group["w"], group["h"])
            assert shown["edges"] == len(group["edges"])
        for i, transform, fill in shown["nodes"]:
            assert transform == f"translate({nodes[i]['x']},{nodes[i]['y']})"
            assert fill == colors[nodes[i]["state"]]
    rows = json.loads(
        page.evaluate(
            """JSON.stringify([...document.querySelectorAll('#node-rows tr[data-i]')].map(
              tr => [...tr.children].map(td => td.textContent)))"""
        )
    )
    assert len(rows) == len(nodes)
    sources = document["sources"]
    for i, row in enumerate(rows):
        node = nodes[i]
        own = [sources[s] for s in node["src"]]
        assert row[:4] == [str(i), node["name"] or f"{node['op']}@{i}", node["op"], node["state"]]
        assert row[4] == document["groups"][node["group"]]["path"]
        assert row[5] == ", ".join(s["fx"] or s["id"] for s in own)
    last = max(range(len(nodes)), key=lambda i: len(nodes[i]["out"]))
    page.evaluate(f"document.querySelector('#node-rows tr[data-i=\"{last}\"]').click()")
    details = page.evaluate("document.getElementById('details').textContent")
    for j in nodes[last]["in"] + nodes[last]["out"]:
        assert (nodes[j]["name"] or f"{nodes[j]['op']}@{j}") in details
    assert page.errors == []


@needs_chromium
def test_a_browser_without_decompression_says_so(browser: Browser, tmp_path: str) -> None:
    """The data is inflated with DecompressionStream; a browser lacking it gets a message."""
    path = os.path.join(tmp_path, "old-browser.html")
    with open(path, "w", encoding="utf-8") as stream:
        stream.write(report(synthetic_model(20)))
    page = browser.new_page()
    page.send("Page.addScriptToEvaluateOnNewDocument", source="delete window.DecompressionStream;")
    page.goto("file://" + path)
    assert page.evaluate(WAIT_READY) == "error"
    assert "DecompressionStream" in page.evaluate("document.getElementById('status').textContent")
    assert page.evaluate("document.querySelectorAll('#node-rows tr').length") == 0


@needs_chromium
def test_bidi_controls_in_names_cannot_reorder_the_reports_text(
    browser: Browser, tmp_path: str
) -> None:
    """A U+202E in a node name reversed the report's own labels ("used by" links)."""
    model = synthetic_model(30)
    nodes = list(model.graph)
    names = ["evil\u202egnp.exe", "\u05e9\u05dc\u05d5\u05dd", "clear\x1b[2K", "iso\u2067x"]
    for node, name in zip(nodes[1:5], names, strict=True):
        node.name = name
    page = open_report(browser, report(model), tmp_path, "bidi.html")
    page.evaluate("document.querySelector('#node-rows tr[data-i=\"0\"]').click()")
    links = json.loads(
        page.evaluate(
            """JSON.stringify([...document.querySelectorAll('#details a')].map(a => {
              const name = a.querySelector('bdi');
              const after = [...a.childNodes].filter(n => n.nodeType === 3);
              const box = r => { const range = document.createRange();
                range.selectNodeContents(r); return range.getBoundingClientRect().left; };
              return {text: a.textContent, name: name ? name.textContent : null,
                      nameLeft: name ? box(name) : null,
                      ownLeft: after.length ? box(after[0]) : null};
            }))"""
        )
    )
    shown = {link["name"]: link for link in links}
    assert "evil\\u202egnp.exe" in shown, links  # visible, and no longer an override
    for link in links:
        assert not set(link["text"]) & set("\u202e\u2067\x1b"), link
        assert link["text"].startswith(link["name"] + " (")
        assert link["ownLeft"] > link["nameLeft"]  # " (op)" stays right of the name
    assert page.errors == []
