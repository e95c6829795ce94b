// modelprov provenance report: inflates the data in #report-data (packed JSON, deflated,
// base64; see report/_pack.py) and renders it with textContent only.
(function () {
  "use strict";
  var SVG = "http://www.w3.org/2000/svg";
  var status = document.getElementById("status");

  function inflate(base64) {
    var binary = atob(base64.replace(/\s+/g, ""));
    var bytes = new Uint8Array(binary.length);
    for (var k = 0; k < binary.length; k++) bytes[k] = binary.charCodeAt(k);
    var stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("deflate"));
    return new Response(stream).text();
  }

  // The document report_data built, from its packed form (mirrors report/_pack.py unpack).
  function unpack(p) {
    if (p.format !== "modelprov.report" || p.version !== 2) {
      throw new Error("unknown report data: " + p.format + " version " + p.version);
    }
    var strings = p.strings, keysets = p.keysets.map(function (flat) {
      var o = {};
      for (var k = 0; k < flat.length; k += 2) o[strings[flat[k]]] = strings[flat[k + 1]];
      return o;
    });
    function text(k) { return k === null ? null : strings[k]; }
    function sourceList(c) {
      var out = new Array(c.id.length);
      for (var k = 0; k < out.length; k++) {
        out[k] = {id: text(c.id[k]), fx: text(c.fx[k]), module: text(c.module[k]),
                  type: text(c.type[k]), target: text(c.target[k]), file: text(c.file[k]),
                  line: c.line[k], trace: text(c.trace[k]), keys: keysets[c.keys[k]]};
      }
      return out;
    }
    var L = p.layout, stepX = L.node_w + L.gap_x, stepY = L.node_h + L.gap_y;
    var c = p.nodes, count = c.group.length, nodes = new Array(count), i, j;
    for (i = 0; i < count; i++) {
      var src = c.src[i], confidence = text(c.confidence[i]), ins = c["in"][i].slice();
      for (j = 0; j < ins.length; j++) ins[j] = i - ins[j];
      var state = confidence === "named" || confidence === "inferred" ? "recovered" :
          !src.length ? "none" : src.length > 1 ? "merged" : "exact";
      nodes[i] = {name: text(c.name[i]), op: text(c.op[i]), domain: text(c.domain[i]),
                  state: state, src: src, keys: keysets[c.keys[i]], confidence: confidence,
                  "in": ins, out: [], group: c.group[i],
                  x: L.pad + c.col[i] * stepX, y: L.pad + c.row[i] * stepY};
    }
    var gc = p.groups, groups = new Array(gc.path.length), g;
    var opened = {};
    gc.open.forEach(function (x) { opened[x] = true; });
    for (g = 0; g < groups.length; g++) {
      var path = text(gc.path[g]) || "";
      groups[g] = {path: path, label: path ? path.slice(path.lastIndexOf(".") + 1) : "(root module)",
                   type: text(gc.type[g]), parent: gc.parent[g],
                   depth: path ? path.split(".").length : 0, nodes: [], edges: [],
                   count: 0, cols: 0, rows: 0, open: opened[g] === true};
    }
    for (i = 0; i < count; i++) {
      var n = nodes[i], grp = groups[n.group];
      grp.nodes.push(i);
      grp.cols = Math.max(grp.cols, c.col[i] + 1);
      grp.rows = Math.max(grp.rows, c.row[i] + 1);
      for (j = 0; j < n["in"].length; j++) {
        var q = n["in"][j];
        nodes[q].out.push(i);
        if (q < i && nodes[q].group === n.group) grp.edges.push([q, i]);
      }
    }
    for (g = groups.length - 1; g >= 0; g--) {
      var G = groups[g], widest = Math.max(G.cols, 1);
      G.count += G.nodes.length;
      if (G.parent !== null) groups[G.parent].count += G.count;
      G.w = 2 * L.pad + widest * L.node_w + (widest - 1) * L.gap_x;
      G.h = 2 * L.pad + G.rows * L.node_h + Math.max(G.rows - 1, 0) * L.gap_y;
    }
    if (p.numerics) {
      p.numerics.nodes.forEach(function (r) {
        nodes[r[0]].num = {rel: r[1], sqnr: r[2], fx: r[3], value: r[4], diverges: r[5], own: r[6]};
      });
    }
    return {title: p.title, colors: p.colors, summary: p.summary, code: p.code, numerics: p.numerics,
            sources: sourceList(p.sources), lost: sourceList(p.lost), nodes: nodes, groups: groups};
  }

  if (typeof DecompressionStream === "undefined") {
    status.textContent = "This browser cannot read the report: it lacks DecompressionStream " +
      "(Chromium 80+, Firefox 113+, Safari 16.4+ have it).";
    document.body.setAttribute("data-ready", "error");
    return;
  }
  inflate(document.getElementById("report-data").textContent).then(function (text) {
    render(unpack(JSON.parse(text)));
    status.remove();
    document.body.setAttribute("data-ready", "1");
  }).catch(function (error) {
    status.textContent = "Cannot read the report data: " + error;
    console.error(error);
    document.body.setAttribute("data-ready", "error");
  });

  function render(data) {
    var nodes = data.nodes, groups = data.groups, sources = data.sources;
    var nodeEls = new Array(nodes.length);
    var rowEls = new Array(nodes.length);
    var groupEls = new Array(groups.length);
    var selected = -1, related = [];
    var isMatch = new Array(nodes.length);  // search hits, for groups drawn later

    // Names, keys and values come from an untrusted model: every text is shown with its
    // control characters and bidi controls escaped visibly (as modelprov's text output does,
    // core/_printable.py), so a U+202E cannot reorder the report's own labels; names next
    // to the report's text also sit in <bdi> (isolated: right-to-left names stay in place).
    var UNSAFE = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]/g;
    function printable(text) {
      return String(text).replace(UNSAFE, function (c) {
        var code = c.charCodeAt(0);
        return code < 0x100 ? "\\x" + ("0" + code.toString(16)).slice(-2)
                            : "\\u" + ("000" + code.toString(16)).slice(-4);
      });
    }
    function el(tag, cls, text) {
      var e = document.createElement(tag);
      if (cls) e.className = cls;
      if (text !== undefined && text !== null) e.textContent = printable(text);
      return e;
    }
    function isolated(parent, name, after) {  // <bdi>name</bdi> then the report's own text
      parent.appendChild(el("bdi", null, name));
      if (after) parent.appendChild(document.createTextNode(after));
      return parent;
    }
    function svg(tag, attrs) {
      var e = document.createElementNS(SVG, tag);
      for (var k in attrs) e.setAttribute(k, attrs[k]);
      return e;
    }
    function pct(x) { return (100 * x).toFixed(1) + " %"; }
    function bytes(n) {
      if (n < 1024) return n + " B";
      if (n < 1048576) return (n / 1024).toFixed(1) + " KiB";
      return (n / 1048576).toFixed(2) + " MiB";
    }
    function where(s) { return s.file === null ? "(no source line)" : s.file + ":" + s.line; }
    function nodeLabel(i) { var n = nodes[i]; return n.name || (n.op + "@" + i); }
    function card(parent, key, value, detail) {
      var c = el("div", "card");
      c.appendChild(el("div", "k", key));
      c.appendChild(el("div", "v", value));
      if (detail) c.appendChild(el("div", "d", detail));
      parent.appendChild(c);
    }
    function kv(parent, key, value) {
      parent.appendChild(el("div", "kk", key));
      parent.appendChild(el("div", "vv", value));
    }

    // Header and summary.
    document.title = "modelprov report: " + printable(data.title);
    var heading = document.getElementById("title");
    heading.textContent = "Provenance report: ";
    isolated(heading, data.title);
    var s = data.summary;
    var cards = document.getElementById("summary");
    card(cards, "nodes", s.nodes, s.groups + " module groups");
    card(cards, "coverage", pct(s.coverage), "nodes with at least one source");
    card(cards, "sources", s.sources, "original operations referenced");
    data.states_order = ["exact", "merged", "recovered", "none"];
    data.states_order.forEach(function (st) { card(cards, st, s.states[st], pct(s.nodes ? s.states[st] / s.nodes : 0)); });
    var mb = s.metadata_bytes;
    card(cards, "metadata", bytes(mb.total),
         "nodes " + bytes(mb.nodes) + ", values " + bytes(mb.values) + ", model " + bytes(mb.model));
    if (s.before) {
      var r = s.before.recall;
      card(cards, "FX-node recall", pct(r.fx_nodes.value), r.fx_nodes.kept + "/" + r.fx_nodes.total +
           " (dyn " + pct(r.fx_nodes_dyn.value) + ")");
      card(cards, "source-line recall", pct(r.source_lines.value), r.source_lines.kept + "/" + r.source_lines.total);
      card(cards, "module recall", pct(r.module_paths.value), r.module_paths.kept + "/" + r.module_paths.total);
      card(cards, "lost sources", data.lost.length, "before: " + s.before.nodes + " nodes, " +
           bytes(s.before.metadata_bytes.total) + " metadata");
    }
    var legend = document.getElementById("legend");
    data.states_order.forEach(function (st) {
      var item = el("span");
      var sw = el("span", "swatch");
      sw.style.background = data.colors[st];
      item.appendChild(sw);
      item.appendChild(document.createTextNode(st));
      legend.appendChild(item);
    });
    legend.appendChild(el("span", "muted",
      "exact: one source, unchanged · merged: several sources · recovered: re-derived by modelprov.recover · none: no source"));

    // Graph: one collapsible <details> per module group, nested like the modules.
    var graph = document.getElementById("graph");
    graph.setAttribute("data-node-count", String(nodes.length));
    function stateBar(g) {
      var counts = {exact: 0, merged: 0, recovered: 0, none: 0};
      (function add(gi) {
        groups[gi].nodes.forEach(function (i) { counts[nodes[i].state] += 1; });
        groups[gi].children.forEach(add);
      })(g);
      var bar = el("span", "bar");
      var total = groups[g].count || 1;
      data.states_order.forEach(function (st) {
        if (!counts[st]) return;
        var seg = el("span");
        seg.style.width = (100 * counts[st] / total) + "%";
        seg.style.background = data.colors[st];
        bar.appendChild(seg);
      });
      bar.title = data.states_order.map(function (st) { return st + " " + counts[st]; }).join(", ");
      return bar;
    }
    // A group's nodes are drawn the first time it is open (big graphs open few groups).
    var drawn = new Array(groups.length);
    function drawGroup(gi) {
      var g = groups[gi], d = groupEls[gi];
      if (drawn[gi] || !g.nodes.length) return;
      drawn[gi] = true;
      var box = svg("svg", {"class": "nodes", width: g.w, height: g.h, viewBox: "0 0 " + g.w + " " + g.h});
      var edges = svg("g", {});
      g.edges.forEach(function (e) {
        var a = nodes[e[0]], b = nodes[e[1]];
        var x1 = a.x + 66, y1 = a.y + 30, x2 = b.x + 66, y2 = b.y;
        var my = (y1 + y2) / 2;
        edges.appendChild(svg("path", {"class": "edge",
          d: "M" + x1 + "," + y1 + " C" + x1 + "," + my + " " + x2 + "," + my + " " + x2 + "," + y2}));
      });
      box.appendChild(edges);
      g.nodes.forEach(function (i) {
        var n = nodes[i];
        var ng = svg("g", {"class": "node", "data-i": i, transform: "translate(" + n.x + "," + n.y + ")"});
        ng.appendChild(svg("rect", {width: 132, height: 30, fill: nodeFill(n)}));
        var t = svg("text", {x: 8, y: 19});
        var label = n.op + (n.src.length > 1 ? " ×" + n.src.length : "");
        t.textContent = printable(label.length > 20 ? label.slice(0, 19) + "…" : label);
        ng.appendChild(t);
        var tip = svg("title", {});
        tip.textContent = printable(nodeLabel(i)) + " (" + n.state + ")" +
          (n.num ? ", max rel error " + n.num.rel.toExponential(2) : "");
        ng.appendChild(tip);
        ng.addEventListener("click", function () { select(i, false); });
        nodeEls[i] = ng;
        if (isMatch[i]) ng.classList.add("match");
        if (i === selected) ng.classList.add("selected");
        if (related.indexOf(i) >= 0) ng.classList.add("related");
        box.appendChild(ng);
      });
      d.insertBefore(box, d.children[1] || null);  // after the summary, before subgroups
    }
    groups.forEach(function (g) { g.children = []; });
    groups.forEach(function (g, gi) { if (g.parent !== null) groups[g.parent].children.push(gi); });
    groups.forEach(function (g, gi) {
      var d = el("details", "group depth" + Math.min(g.depth, 1));
      d.open = g.open;
      d.setAttribute("data-group", g.path);
      var sum = el("summary");
      sum.appendChild(el("span", "path", g.label));
      var meta = [g.path !== g.label ? g.path : "", g.type, g.count + " nodes"].filter(Boolean).join("  ·  ");
      sum.appendChild(el("span", "meta", meta));
      sum.appendChild(stateBar(gi));
      d.appendChild(sum);
      d.addEventListener("toggle", function () { if (d.open) drawGroup(gi); });
      groupEls[gi] = d;
      (g.parent === null ? graph : groupEls[g.parent]).appendChild(d);
    });
    groups.forEach(function (g, gi) { if (g.open) drawGroup(gi); });
    document.getElementById("expand").addEventListener("click", function () {
      groupEls.forEach(function (d) { d.open = true; });
    });
    document.getElementById("collapse").addEventListener("click", function () {
      groupEls.forEach(function (d, gi) { d.open = groups[gi].depth === 0; });
    });

    function openGroupOf(i) {
      for (var g = nodes[i].group; g !== null && g !== undefined; g = groups[g].parent) {
        groupEls[g].open = true;
        drawGroup(g);
      }
    }

    // Details of one node.
    var details = document.getElementById("details");
    function nodeLink(i) {
      var a = isolated(isolated(el("a"), nodeLabel(i), " ("), nodes[i].op, ")");
      a.href = "#";
      a.addEventListener("click", function (ev) { ev.preventDefault(); select(i, true); });
      return a;
    }
    // Details panel: source lines with their code first, then module, FX nodes, metadata.
    var LONG = 120;
    function pretty(text) {
      try { return JSON.stringify(JSON.parse(text), null, 2); } catch (e) { return text; }
    }
    function keyValue(parent, key, value) {
      value = String(value);
      if (value.length <= LONG && value.indexOf("\n") < 0) { kv(parent, key, value); return; }
      // Long records (aten_call, inline records, tables) stay collapsed; formatted on demand.
      parent.appendChild(el("div", "kk", key));
      var box = el("details", "vv long");
      box.appendChild(el("summary", null, value.length + " characters: show"));
      box.addEventListener("toggle", function () {
        if (box.open && box.childNodes.length === 1) box.appendChild(el("pre", null, pretty(value)));
      });
      parent.appendChild(box);
    }
    function frameCode(src) {
      // The code line of the frame the source points at, as the stack trace recorded it.
      var lines = (src.trace || "").split("\n"), mark = ", line " + src.line;
      for (var k = lines.length - 2; k >= 0; k--) {
        var at = lines[k].indexOf(mark);
        if (at >= 0 && /^\s*File "/.test(lines[k]) && !/^\d/.test(lines[k].slice(at + mark.length))) {
          return lines[k + 1].trim();
        }
      }
      return "";
    }
    function codeBlock(src) {
      var pre = el("pre", "code");
      var context = data.code ? data.code[src.file + ":" + src.line] : null;
      if (context) {
        context.lines.forEach(function (text, k) {
          var number = context.first + k;
          var row = el("span", number === src.line ? "hl" : null,
                       ("     " + number).slice(-5) + "  " + text + "\n");
          pre.appendChild(row);
        });
        return pre;
      }
      var code = frameCode(src);
      if (!code) return null;
      pre.appendChild(el("span", "hl", ("     " + src.line).slice(-5) + "  " + code));
      return pre;
    }
    function sourceRow(src) {
      var b = el("div", "src");
      var grid = el("div", "kv");
      kv(grid, "FX node", src.fx || src.id);
      if (src.target) kv(grid, "target", src.target);
      kv(grid, "module", (src.module || "(root)") + (src.type ? "  (" + src.type + ")" : ""));
      Object.keys(src.keys).forEach(function (k) { keyValue(grid, k, src.keys[k]); });
      b.appendChild(grid);
      if (src.trace) {
        var t = el("details");
        t.appendChild(el("summary", null, "stack trace"));
        t.addEventListener("toggle", function () {
          if (t.open && t.childNodes.length === 1) t.appendChild(el("pre", null, src.trace));
        });
        b.appendChild(t);
      }
      return b;
    }
    // With numerics, nodes are coloured by log10 of their max relative error against the
    // reference: blue within the tolerance's scale, yellow around 1e-3, red at 1e-1 and over.
    function errorColor(rel) {
      var t = Math.max(0, Math.min(1, (Math.log10(Math.max(rel, 1e-12)) + 7) / 6));
      var stops = [[44, 123, 182], [255, 255, 191], [215, 25, 28]];
      var k = t < 0.5 ? 0 : 1, f = t < 0.5 ? t * 2 : (t - 0.5) * 2;
      var c = stops[k].map(function (v, j) { return Math.round(v + f * (stops[k + 1][j] - v)); });
      return "rgb(" + c.join(",") + ")";
    }
    function nodeFill(n) {
      if (!data.numerics) return data.colors[n.state];
      return n.num ? errorColor(n.num.rel) : "#e0e0e0";
    }
    function showDetails(i) {
      var n = nodes[i];
      details.textContent = "";
      details.setAttribute("data-node", String(i));
      details.appendChild(el("h3", null, nodeLabel(i)));
      var pill = el("span", "pill", n.state + (n.confidence ? " (" + n.confidence + ")" : ""));
      pill.style.background = data.colors[n.state];
      details.appendChild(pill);
      details.appendChild(el("span", "muted", "  " + (n.domain ? n.domain + "::" : "") + n.op +
                             " · " + n.src.length + (n.src.length === 1 ? " source" : " sources")));
      if (n.num) {
        details.appendChild(el("h2", null, "Numerics against " + printable(data.numerics.reference) +
                               (data.numerics.first === i ? " (first divergence)" : "")));
        var ngrid = el("div", "kv");
        kv(ngrid, "value", printable(n.num.value) + " (output of " + printable(n.num.fx) + ")");
        kv(ngrid, "max rel error", n.num.rel.toExponential(3) + (n.num.diverges ? " (diverges)" : ""));
        kv(ngrid, "SQNR", n.num.sqnr === null ? "n/a" : n.num.sqnr.toFixed(1) + " dB");
        if (n.num.own !== null) kv(ngrid, "own SQNR", n.num.own.toFixed(1) + " dB");
        details.appendChild(ngrid);
      }
      var srcs = n.src.map(function (si) { return sources[si]; });
      // Source lines, each once, with the code around it and the FX nodes made there.
      var byLine = {}, order = [];
      srcs.forEach(function (src) {
        var key = where(src);
        if (!byLine[key]) { byLine[key] = []; order.push(key); }
        byLine[key].push(src);
      });
      var lines = el("div", "lines");
      lines.appendChild(el("h2", null, "Source lines (" + order.length + ")"));
      if (!srcs.length) lines.appendChild(el("div", "muted", "This node has no source."));
      order.forEach(function (key) {
        var group = byLine[key];
        var block = el("div", "srcline");
        block.appendChild(el("div", "line", key));
        var code = group[0].file === null ? null : codeBlock(group[0]);
        if (code) block.appendChild(code);
        block.appendChild(el("div", "muted", "FX " + group.map(function (x) { return x.fx || x.id; }).join(", ")));
        lines.appendChild(block);
      });
      details.appendChild(lines);
      details.appendChild(el("h2", null, "Module"));
      var grid = el("div", "kv");
      kv(grid, "path", groups[n.group].path || "(root)");
      if (groups[n.group].type) kv(grid, "type", groups[n.group].type);
      details.appendChild(grid);
      if (srcs.length) {
        details.appendChild(el("h2", null, "FX nodes (" + srcs.length + ")"));
        srcs.forEach(function (src) { details.appendChild(sourceRow(src)); });
      }
      var keys = Object.keys(n.keys);
      if (keys.length) {
        details.appendChild(el("h2", null, "Metadata"));
        var meta = el("div", "kv");
        keys.forEach(function (k) { keyValue(meta, k, n.keys[k]); });
        details.appendChild(meta);
      }
      [["inputs from", n["in"]], ["used by", n.out]].forEach(function (pair) {
        if (!pair[1].length) return;
        details.appendChild(el("h2", null, pair[0]));
        pair[1].slice(0, 50).forEach(function (j) {
          var row = el("div");
          row.appendChild(nodeLink(j));
          details.appendChild(row);
        });
      });
    }
    function select(i, reveal) {
      if (selected >= 0 && nodeEls[selected]) nodeEls[selected].classList.remove("selected");
      related.forEach(function (j) { if (nodeEls[j]) nodeEls[j].classList.remove("related"); });
      selected = i;
      related = nodes[i]["in"].concat(nodes[i].out);
      related.forEach(function (j) { if (nodeEls[j]) nodeEls[j].classList.add("related"); });
      if (nodeEls[i]) nodeEls[i].classList.add("selected");
      showDetails(i);
      if (reveal) {
        openGroupOf(i);
        if (nodeEls[i]) nodeEls[i].scrollIntoView({block: "center", inline: "center"});
      }
    }

    // Searchable table of nodes.
    var tbody = document.getElementById("node-rows");
    var ROW_LIMIT = 1000;  // rows in the page at once; "show more" adds the next ones
    var haystack = new Array(nodes.length);
    var fxText = new Array(nodes.length), lineText = new Array(nodes.length);
    nodes.forEach(function (n, i) {
      var srcs = n.src.map(function (si) { return sources[si]; });
      fxText[i] = srcs.map(function (x) { return x.fx || x.id; }).join(", ");
      lineText[i] = srcs.map(where).filter(function (x, k, a) { return a.indexOf(x) === k; }).join("\n");
      haystack[i] = [nodeLabel(i), n.op, groups[n.group].path, fxText[i],
                     srcs.map(function (x) { return x.module + " " + x.target; }).join(" ")].join("\n").toLowerCase();
    });
    function row(i) {
      if (rowEls[i]) return rowEls[i];
      var n = nodes[i];
      var tr = el("tr");
      tr.setAttribute("data-i", String(i));
      tr.appendChild(el("td", null, i));
      tr.appendChild(el("td", "mono", nodeLabel(i)));
      tr.appendChild(el("td", null, n.op));
      var st = el("td");
      var pill = el("span", "pill", n.state);
      pill.style.background = data.colors[n.state];
      st.appendChild(pill);
      tr.appendChild(st);
      tr.appendChild(el("td", "mono", groups[n.group].path));
      tr.appendChild(el("td", "mono", fxText[i]));
      tr.appendChild(el("td", "mono", lineText[i]));
      tr.addEventListener("click", function () { select(i, true); });
      rowEls[i] = tr;
      return tr;
    }
    var hits = [], listed = 0;
    function listMore() {
      var more = document.getElementById("more-rows");
      if (more) more.remove();
      var end = Math.min(hits.length, listed + ROW_LIMIT);
      var batch = document.createDocumentFragment();
      for (; listed < end; listed++) batch.appendChild(row(hits[listed]));
      if (listed < hits.length) {
        var tr = el("tr");
        tr.id = "more-rows";
        var td = el("td", "muted", "show " + Math.min(ROW_LIMIT, hits.length - listed) + " more of " +
                    (hits.length - listed) + " remaining");
        td.colSpan = 7;
        td.style.cursor = "pointer";
        td.addEventListener("click", listMore);
        tr.appendChild(td);
        batch.appendChild(tr);
      }
      tbody.appendChild(batch);
    }
    var search = document.getElementById("search");
    var count = document.getElementById("match-count");
    var marked = [];
    function runSearch() {
      var q = search.value.trim().toLowerCase();
      marked.forEach(function (i) {
        isMatch[i] = false;
        if (nodeEls[i]) nodeEls[i].classList.remove("match");
      });
      marked = [];
      hits = [];
      for (var i = 0; i < nodes.length; i++) {
        if (!q || haystack[i].indexOf(q) >= 0) hits.push(i);
      }
      if (q) marked = hits.slice();
      var shown = hits.length;
      tbody.textContent = "";
      listed = 0;
      listMore();
      marked.forEach(function (j) {
        isMatch[j] = true;
        if (nodeEls[j]) nodeEls[j].classList.add("match");
      });
      if (q && marked.length <= 50) marked.forEach(openGroupOf);
      count.textContent = shown + " of " + nodes.length + " nodes";
      count.setAttribute("data-shown", String(shown));
    }
    var timer = null;
    search.addEventListener("input", function () {
      if (timer) clearTimeout(timer);
      timer = setTimeout(runSearch, nodes.length > 500 ? 120 : 0);
    });
    runSearch();

    // Lost sources.
    var lost = document.getElementById("lost");
    if (!s.before) {
      lost.appendChild(el("p", "muted", "Pass the model before the change (--before) to see recall and lost sources."));
    } else if (!data.lost.length) {
      lost.appendChild(el("p", null, "No source was lost."));
    } else {
      var table = el("table");
      var head = el("tr");
      ["FX node", "target", "module", "source line", "stack trace"].forEach(function (h) { head.appendChild(el("th", null, h)); });
      var thead = el("thead");
      thead.appendChild(head);
      table.appendChild(thead);
      var body = el("tbody");
      data.lost.forEach(function (src) {
        var tr = el("tr");
        tr.appendChild(el("td", "mono", src.fx || src.id));
        tr.appendChild(el("td", "mono", src.target));
        tr.appendChild(el("td", "mono", src.module));
        tr.appendChild(el("td", "mono", where(src)));
        var td = el("td");
        if (src.trace) {
          var t = el("details");
          t.appendChild(el("summary", null, "show"));
          t.appendChild(el("pre", null, src.trace));
          td.appendChild(t);
        }
        tr.appendChild(td);
        body.appendChild(tr);
      });
      table.appendChild(body);
      var wrap = el("div", "tablewrap");
      wrap.appendChild(table);
      lost.appendChild(wrap);
    }
  }
})();
