"""The self-contained HTML provenance report: one file, no network, data as an inert block."""

from __future__ import annotations

import os
from collections.abc import Iterable
from importlib import resources
from typing import TYPE_CHECKING

from modelprov._model_io._convert import ModelInput, as_ir
from modelprov._model_io._files import atomic_write_bytes
from modelprov.report._data import report_data
from modelprov.report._embed import data_element

if TYPE_CHECKING:
    from modelprov.numerics import NumericsReport

__all__ = ["report", "write_report"]

_TEMPLATE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; \
style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>modelprov report</title>
<style>{css}</style>
</head>
<body>
<header><h1 id="title">Provenance report</h1>
<div class="sub">modelprov: where each node of the graph came from</div></header>
<main>
<p id="status" class="muted">Reading the report data…</p>
<h2>Summary</h2>
<div id="summary" class="cards"></div>
<div id="legend" class="legend"></div>
<h2>Graph, grouped by module</h2>
<div class="toolbar"><button id="expand" type="button">expand all</button>
<button id="collapse" type="button">collapse all</button>
<span class="muted">click a node for its sources; edges between groups are listed in its
details</span></div>
<div class="layout">
<div id="graph"></div>
<aside id="details"><div class="empty">Click a node (or a table row) to see its sources.</div>
</aside>
</div>
<h2>Nodes</h2>
<div class="toolbar"><input id="search" type="search"
placeholder="search by FX node, node name, op type or module"> <span id="match-count"></span></div>
<div class="tablewrap"><table>
<thead><tr><th>#</th><th>node</th><th>op</th><th>state</th><th>module</th><th>FX nodes</th>
<th>source lines</th></tr></thead>
<tbody id="node-rows"></tbody></table></div>
<h2>Lost sources</h2>
<div id="lost"></div>
</main>
{data}
<script>{js}</script>
</body>
</html>
"""


def _asset(name: str) -> str:
    return resources.files(__name__.rpartition(".")[0]).joinpath("_assets", name).read_text("utf-8")


def _as_text(name: str) -> str:
    """A title that encodes as UTF-8: a file name's undecodable bytes (``os.fsdecode``'s
    surrogate escapes) and lone surrogates are shown as backslash escapes."""
    try:
        return name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:
        return name.encode("utf-8", "backslashreplace").decode("utf-8")


def report(
    model: ModelInput,
    *,
    before: ModelInput | None = None,
    title: str = "",
    source_code: bool = True,
    numerics: NumericsReport | None = None,
    source_roots: Iterable[str | os.PathLike[str]] = (),
) -> str:
    """The HTML provenance report of a model, as text.

    Summary (coverage, states, metadata bytes; recall and lost sources against ``before``),
    the graph grouped by module and coloured by state, node details with their source lines,
    a searchable node table. Self-contained: it loads nothing when opened. ``source_code``
    embeds a few lines around each source line from the Python files the traces name
    (read now, bounded; False to leave them out). A model is untrusted: only files under the
    working folder, ``source_roots`` and the installed packages' folders are read (real
    paths, symlinks and ``..`` resolved), never other paths a trace names. ``numerics`` (a
    :func:`modelprov.compare` report of this model) colours nodes by their error against the
    reference and lists each node's errors in its details.
    """
    if not title and isinstance(model, str | os.PathLike):
        title = os.path.basename(os.fspath(model))
    document = report_data(
        as_ir(model, where="report"),
        before=None if before is None else as_ir(before, where="report(before=...)"),
        title=_as_text(title),
        source_code=source_code,
        numerics=numerics,
        source_roots=source_roots,
    )
    return _TEMPLATE.format(
        css=_asset("report.css"), js=_asset("report.js"), data=data_element(document)
    )


def write_report(
    model: ModelInput,
    path: str | os.PathLike[str],
    *,
    before: ModelInput | None = None,
    source_code: bool = True,
    numerics: NumericsReport | None = None,
    source_roots: Iterable[str | os.PathLike[str]] = (),
) -> str:
    """Writes the HTML report to ``path`` and returns the path (arguments: see ``report``)."""
    title = os.path.basename(os.fspath(model)) if isinstance(model, str | os.PathLike) else ""
    text = report(
        model,
        before=before,
        title=title,
        source_code=source_code,
        numerics=numerics,
        source_roots=source_roots,
    )
    atomic_write_bytes(path, text.encode("utf-8"))
    return os.fspath(path)
