// gradviz report: lays out a part view in the page, from the graph data views.py embeds (view_graph.py), when
// it is first opened, so writing the report never lays these out. Layers: ranks by longest path (sources pulled
// up to their first use), order by barycentre sweeps with each module box's nodes kept together, x by separation
// constraints balanced toward each node's neighbours, edges as curves through one point per layer they cross.
// Draws SVG with the ids and classes dot's views carry (g.node#gv-n17, g.cluster#gv-cluster_3, g.edge#edge1), so
// search, deep links, highlighting and the inspector work on it unchanged. All user text goes through textContent.
(function () {
  "use strict";
  var NS = "http://www.w3.org/2000/svg";
  var NODE_SEP = 18, THIN_SEP = 8;   // between nodes in a row; when one of them is an edge's bend point
  var RANK_SEP = 26, PAD = 8;        // between rows; inside a module box, around what it holds
  var MARGIN_X = 8, MARGIN_Y = 3, MIN_HEIGHT = 20, ARROW = 7;
  var SWEEPS = 12, ROUNDS = 24;
  var FONT = "Helvetica, Arial, sans-serif";
  var measure = document.createElement("canvas").getContext("2d");

  function textWidth(text, size, bold) {
    measure.font = (bold ? "bold " : "") + size + "px " + FONT;
    return measure.measureText(text).width;
  }

  function lines(rows, fontsize) {  // a label's rows with their sizes: {text, size, bold, color, h, w}
    return rows.map(function (r) {
      var size = r[2] || fontsize, text = r[0] || " ";
      return {text: text, size: size, bold: !!r[1], color: r[3] || null, h: size * 1.2 + 2,
              w: textWidth(text, size, !!r[1]) + 2};
    });
  }
  function sum(list, f) { var s = 0; list.forEach(function (x) { s += f(x); }); return s; }
  function max(list, f, least) { var m = least; list.forEach(function (x) { m = Math.max(m, f(x)); }); return m; }

  // ----- the graph ---------------------------------------------------------------------------------------------
  function read(data) {
    var clusters = {}, clusterList = [];
    data.clusters.forEach(function (c, i) {
      var box = {name: c[0], id: c[1], parentName: c[2], label: lines(c[3], 10), style: c[4] || "", fill: c[5],
                 border: c[6], index: i, children: [], nodes: [], chain: null};
      clusters[box.name] = box; clusterList.push(box);
    });
    clusterList.forEach(function (c) {
      c.parent = c.parentName && clusters[c.parentName] ? clusters[c.parentName] : null;
      if (c.parent) { c.parent.children.push(c); }
    });
    function chainOf(c) {  // the module boxes holding c, outermost first, c last
      if (!c) { return []; }
      if (!c.chain) { c.chain = chainOf(c.parent).concat([c]); }
      return c.chain;
    }
    clusterList.forEach(chainOf);
    var nodes = [], byName = {};
    data.nodes.forEach(function (n) {
      var small = n[2] === "ghost" || n[2] === "saved" || n[2] === "note";
      var label = lines(n[10], n[9]), mx = small ? 3 : MARGIN_X, my = small ? 1 : MARGIN_Y;
      var w = max(label, function (l) { return l.w; }, 0) + 2 * mx;
      var h = Math.max(sum(label, function (l) { return l.h; }) + 2 * my, small ? 14 : MIN_HEIGHT);
      if (n[3] === "ellipse") { w *= 1.3; h *= 1.3; }
      var node = {id: n[0], name: n[1], kind: n[2], shape: n[3], style: n[4] || "", fill: n[5], border: n[6],
                  pen: n[7] || 1, peripheries: n[8] || 1, label: label, tooltip: n[11], w: w, h: h,
                  cluster: n[12] && clusters[n[12]] ? clusters[n[12]] : null, index: nodes.length, dummy: false};
      node.chain = node.cluster ? node.cluster.chain : [];
      if (node.cluster) { node.cluster.nodes.push(node); }
      nodes.push(node); byName[node.name] = node;
    });
    var edges = [];
    data.edges.forEach(function (e, i) {
      var tail = byName[e[0]], head = byName[e[1]];
      if (!tail || !head) { return; }
      edges.push({id: "edge" + (i + 1), tail: tail, head: head, style: e[2] || "solid", color: e[3] || "#555555",
                  pen: e[4] || 1, label: e[5] || "", constraint: !!e[6], minlen: e[7] === undefined ? 1 : e[7],
                  arrowhead: e[8] || "normal"});
    });
    return {nodes: nodes, edges: edges, clusters: clusterList, data: data};
  }

  // ----- ranks: longest path over the constraint edges (cycles broken where a depth-first walk closes them) ----
  function rank(g) {
    var n = g.nodes.length, out = [], inn = [], state = new Array(n).fill(0);
    g.nodes.forEach(function () { out.push([]); inn.push([]); });
    var arcs = [];
    g.edges.forEach(function (e) {
      if (e.constraint && e.tail !== e.head) { arcs.push({a: e.tail.index, b: e.head.index, len: e.minlen}); }
    });
    arcs.forEach(function (arc) { out[arc.a].push(arc); });
    function walk(start) {  // iterative DFS: an arc into a node still on the stack is turned round
      var stack = [[start, 0]];
      state[start] = 1;
      while (stack.length) {
        var top = stack[stack.length - 1], v = top[0];
        if (top[1] < out[v].length) {
          var arc = out[v][top[1]++], w = arc.b;
          if (state[w] === 1) { arc.back = true; } else if (state[w] === 0) { state[w] = 1; stack.push([w, 0]); }
        } else { state[v] = 2; stack.pop(); }
      }
    }
    for (var s = 0; s < n; s++) { if (!state[s]) { walk(s); } }
    out = g.nodes.map(function () { return []; });
    arcs.forEach(function (arc) {
      var a = arc.back ? arc.b : arc.a, b = arc.back ? arc.a : arc.b, d = {a: a, b: b, len: arc.len};
      out[a].push(d); inn[b].push(d);
    });
    var order = topo(n, out, inn), r = new Array(n).fill(0);
    order.forEach(function (v) { inn[v].forEach(function (d) { r[v] = Math.max(r[v], r[d.a] + d.len); }); });
    // a node nothing feeds (a parameter, an input) sits next to its first use, not on the bottom row
    for (var i = order.length - 1; i >= 0; i--) {
      var v = order[i];
      if (!inn[v].length && out[v].length) {
        r[v] = Math.min.apply(null, out[v].map(function (d) { return r[d.b] - d.len; }));
      }
    }
    var least = Math.min.apply(null, r.concat([0]));
    g.nodes.forEach(function (node, k) { node.rank = r[k] - least; });
  }

  function topo(n, out, inn) {  // Kahn's order of 0..n-1 by arcs {a, b}; what a cycle leaves comes last
    var count = inn.map(function (l) { return l.length; }), queue = [], order = [], seen = new Array(n).fill(false);
    for (var v = 0; v < n; v++) { if (!count[v]) { queue.push(v); } }
    for (var head = 0; head < queue.length; head++) {
      var u = queue[head];
      order.push(u); seen[u] = true;
      out[u].forEach(function (d) { if (--count[d.b] === 0) { queue.push(d.b); } });
    }
    for (v = 0; v < n; v++) { if (!seen[v]) { order.push(v); } }
    return order;
  }

  function commonBox(a, b) {  // the innermost module box holding both chains (null: none)
    var c = null;
    for (var i = 0; i < Math.min(a.length, b.length) && a[i] === b[i]; i++) { c = a[i]; }
    return c;
  }

  // ----- layers: a bend point for each row an edge crosses, a filler where a box spans a row it has no node in -
  function layers(g) {
    var rows = [];
    function add(node) { (rows[node.rank] = rows[node.rank] || []).push(node); return node; }
    function dummy(r, box, thin) {
      var d = {id: null, dummy: true, rank: r, w: thin ? 0 : 2, h: 0, cluster: box, chain: box ? box.chain : [],
               index: g.nodes.length};
      g.nodes.push(d);
      return add(d);
    }
    g.nodes.slice().forEach(add);
    g.segments = [];
    g.edges.forEach(function (e) {
      var lo = e.tail, hi = e.head;
      if (lo.rank > hi.rank) { lo = e.head; hi = e.tail; e.reversed = true; }
      e.points = [lo];
      if (lo === hi || lo.rank === hi.rank) { e.flat = true; e.points.push(hi); return; }
      var box = commonBox(lo.chain, hi.chain), prev = lo;
      for (var r = lo.rank + 1; r < hi.rank; r++) {
        var d = dummy(r, box, false);
        g.segments.push([prev, d]); e.points.push(d); prev = d;
      }
      g.segments.push([prev, hi]); e.points.push(hi);
    });
    g.clusters.forEach(function (c) { c.lo = Infinity; c.hi = -Infinity; c.rows = {}; c.y0 = NaN; });
    g.nodes.forEach(function (v) {
      v.chain.forEach(function (c) { c.lo = Math.min(c.lo, v.rank); c.hi = Math.max(c.hi, v.rank); c.rows[v.rank] = 1; });
    });
    g.clusters.forEach(function (c) {
      for (var r = c.lo; r <= c.hi; r++) {
        if (c.rows[r]) { continue; }
        dummy(r, c, true);
        c.chain.forEach(function (a) { a.rows[r] = 1; });
      }
    });
    for (var r = 0; r < rows.length; r++) { rows[r] = rows[r] || []; }
    g.rows = rows;
    g.nodes.forEach(function (v) { v.up = []; v.down = []; });
    g.segments.forEach(function (s) { s[0].down.push(s[1]); s[1].up.push(s[0]); });
  }

  // ----- order within rows: barycentre sweeps; a module box's nodes stay together in every row, and sibling
  // boxes keep one left-to-right order in all rows (so their borders never cross) -------------------------------
  function positions(g) {
    g.rows.forEach(function (row) { row.forEach(function (v, i) { v.pos = row.length > 1 ? i / (row.length - 1) : 0.5; }); });
  }
  function mean(list, f) { return list.length ? sum(list, f) / list.length : null; }

  function sortRow(row, key, boxKey) {
    function path(v) {  // [box key, box index, …, own key, own index]: compared in order, boxes stay together
      var p = [];
      v.chain.forEach(function (c) { p.push(boxKey[c.index], c.index); });
      p.push(key(v), v.index);
      return p;
    }
    var paths = new Map();
    row.forEach(function (v) { paths.set(v, path(v)); });
    row.sort(function (a, b) {
      var p = paths.get(a), q = paths.get(b);
      for (var i = 0; i < Math.min(p.length, q.length); i++) { if (p[i] !== q[i]) { return p[i] - q[i]; } }
      return p.length - q.length;
    });
  }

  function crossings(g) {
    var total = 0;
    for (var r = 0; r + 1 < g.rows.length; r++) {
      var segs = [];
      g.rows[r].forEach(function (v) { v.down.forEach(function (w) { segs.push([v.pos, w.pos]); }); });
      for (var i = 0; i < segs.length; i++) {
        for (var j = i + 1; j < segs.length; j++) {
          if ((segs[i][0] - segs[j][0]) * (segs[i][1] - segs[j][1]) < 0) { total++; }
        }
      }
    }
    return total;
  }

  function order(g) {
    var boxKey = g.clusters.map(function (c) { return c.index; });
    g.rows.forEach(function (row) { sortRow(row, function (v) { return v.index; }, boxKey); });
    positions(g);
    var best = crossings(g), kept = g.rows.map(function (row) { return row.slice(); });
    for (var sweep = 0; sweep < SWEEPS && best > 0; sweep++) {
      // a box's place among its siblings: where all its nodes' neighbours are, on both sides
      var totals = g.clusters.map(function () { return [0, 0]; });
      g.nodes.forEach(function (v) {
        var b = mean(v.up.concat(v.down), function (w) { return w.pos; });
        v.chain.forEach(function (c) { totals[c.index][0] += b === null ? v.pos : b; totals[c.index][1]++; });
      });
      boxKey = totals.map(function (t) { return t[1] ? t[0] / t[1] : 0.5; });
      var down = sweep % 2 === 0, start = g.rows[down ? 0 : g.rows.length - 1];
      // the sweep's first row keeps its order but takes the boxes' new order too: every row of a sweep puts
      // sibling boxes in one order, or their borders' constraints (xs) would go round in a circle
      sortRow(start, function (v) { return v.pos; }, boxKey);
      start.forEach(function (v, i) { v.pos = start.length > 1 ? i / (start.length - 1) : 0.5; });
      for (var k = 1; k < g.rows.length; k++) {
        var r = down ? k : g.rows.length - 1 - k, row = g.rows[r];
        sortRow(row, function (v) {
          var b = mean(down ? v.up : v.down, function (w) { return w.pos; });
          return b === null ? v.pos : b;
        }, boxKey);
        row.forEach(function (v, i) { v.pos = row.length > 1 ? i / (row.length - 1) : 0.5; });
      }
      var now = crossings(g);
      if (now < best) { best = now; kept = g.rows.map(function (row) { return row.slice(); }); }
    }
    g.rows = kept;
    positions(g);
    g.rows.forEach(function (row) { row.forEach(function (v, i) { v.slot = i; }); });
    g.crossings = best;
  }

  // ----- x: separation constraints (row neighbours apart, box borders around what they hold), solved as the
  // average of a leftmost-feasible and a rightmost-feasible placement near each node's neighbours --------------
  function xs(g) {
    var n = g.nodes.length, vars = n + 2 * g.clusters.length, arcs = {}, list = [];
    function L(c) { return n + 2 * c.index; }
    function R(c) { return n + 2 * c.index + 1; }
    function need(a, b, gap) {  // value(b) >= value(a) + gap
      var k = a + "," + b;
      if (arcs[k] === undefined) { arcs[k] = list.length; list.push({a: a, b: b, gap: gap}); }
      else { list[arcs[k]].gap = Math.max(list[arcs[k]].gap, gap); }
    }
    g.rows.forEach(function (row) {
      for (var i = 0; i + 1 < row.length; i++) {
        var u = row[i], v = row[i + 1], k = 0;
        while (k < u.chain.length && k < v.chain.length && u.chain[k] === v.chain[k]) { k++; }
        var sep = u.dummy || v.dummy ? THIN_SEP : NODE_SEP;
        var a = k < u.chain.length ? R(u.chain[k]) : u.index, b = k < v.chain.length ? L(v.chain[k]) : v.index;
        need(a, b, sep + (a === u.index ? u.w / 2 : 0) + (b === v.index ? v.w / 2 : 0));
      }
    });
    g.nodes.forEach(function (v) {
      if (v.cluster) { need(L(v.cluster), v.index, PAD + v.w / 2); need(v.index, R(v.cluster), PAD + v.w / 2); }
    });
    g.clusters.forEach(function (c) {
      if (c.parent) { need(L(c.parent), L(c), PAD); need(R(c), R(c.parent), PAD); }
      need(L(c), R(c), max(c.label, function (l) { return l.w; }, 0) + 2 * PAD);
    });
    var out = [], inn = [];
    for (var v = 0; v < vars; v++) { out.push([]); inn.push([]); }
    list.forEach(function (d) { out[d.a].push(d); inn[d.b].push(d); });
    var seq = topo(vars, out, inn), place = new Array(vars).fill(0);
    var isL = function (k) { return k >= n && (k - n) % 2 === 0; }, isR = function (k) { return k >= n && (k - n) % 2 === 1; };

    function wanted(x) {  // where each node would like to be: amid its neighbours; a box's borders: around those
      var d = new Array(vars).fill(0);
      g.nodes.forEach(function (v) {
        var b = mean(v.up.concat(v.down), function (w) { return x[w.index]; });
        d[v.index] = b === null ? x[v.index] : b;
      });
      for (var i = seq.length - 1; i >= 0; i--) {  // left borders: innermost first (they come after their box's)
        var k = seq[i];
        if (isL(k)) {
          d[k] = Infinity;
          out[k].forEach(function (e) { if (!isR(e.b)) { d[k] = Math.min(d[k], d[e.b] - e.gap); } });
        }
      }
      seq.forEach(function (k) {  // right borders: after what they hold
        if (isR(k)) { d[k] = -Infinity; inn[k].forEach(function (e) { d[k] = Math.max(d[k], d[e.a] + e.gap); }); }
      });
      return d;
    }
    function leftmost(d) {
      var x = new Array(vars);
      seq.forEach(function (k) {
        var lo = -Infinity;
        inn[k].forEach(function (e) { lo = Math.max(lo, x[e.a] + e.gap); });
        x[k] = isR(k) ? lo : Math.max(lo, isFinite(d[k]) ? d[k] : lo);
        if (!isFinite(x[k])) { x[k] = 0; }
      });
      return x;
    }
    function rightmost(d) {
      var x = new Array(vars);
      for (var i = seq.length - 1; i >= 0; i--) {
        var k = seq[i], hi = Infinity;
        out[k].forEach(function (e) { hi = Math.min(hi, x[e.b] - e.gap); });
        x[k] = isL(k) ? hi : Math.min(hi, isFinite(d[k]) ? d[k] : hi);
        if (!isFinite(x[k])) { x[k] = 0; }
      }
      return x;
    }
    var x = leftmost(place);
    for (var round = 0; round < ROUNDS; round++) {
      var d = wanted(x), a = leftmost(d), b = rightmost(d);
      x = a.map(function (value, k) { return (value + b[k]) / 2; });
    }
    var least = Infinity;
    g.nodes.forEach(function (v) { if (!v.dummy || v.w) { least = Math.min(least, x[v.index] - v.w / 2); } });
    g.clusters.forEach(function (c) { if (isFinite(c.lo)) { least = Math.min(least, x[L(c)]); } });
    g.nodes.forEach(function (v) { v.x = x[v.index] - least; });
    g.clusters.forEach(function (c) { c.x0 = x[L(c)] - least; c.x1 = x[R(c)] - least; });
  }

  // ----- y: rows apart by what ends and starts between them (box borders and labels stacked) -----------------
  function ys(g) {
    var up = g.data.rankdir === "BT";  // drawn bottom to top: row 0 at the bottom, labels on each box's top
    var rows = g.rows.length;
    g.clusters.forEach(function (c) {
      var label = sum(c.label, function (l) { return l.h; }) + 4;
      c.padLo = PAD + (up ? 0 : label); c.padHi = PAD + (up ? label : 0);  // on the row-0 side, the other side
    });
    function stack(v, r, side) {  // the border room needed on `side` of row r for node v's boxes
      var s = 0;
      v.chain.forEach(function (c) { if ((side === "lo" ? c.lo : c.hi) === r) { s += side === "lo" ? c.padLo : c.padHi; } });
      return s;
    }
    var heights = g.rows.map(function (row) { return max(row, function (v) { return v.h; }, 0); });
    var lo = g.rows.map(function (row, r) { return max(row, function (v) { return stack(v, r, "lo"); }, 0); });
    var hi = g.rows.map(function (row, r) { return max(row, function (v) { return stack(v, r, "hi"); }, 0); });
    var top = [], at = 0;
    for (var r = 0; r < rows; r++) {
      at += lo[r];
      top.push(at);
      at += heights[r] + hi[r] + (r + 1 < rows ? RANK_SEP : 0);
    }
    g.height = at;
    g.rows.forEach(function (row, r) { row.forEach(function (v) { v.y = top[r] + heights[r] / 2; }); });
    // box edges: innermost first, each around what it holds and the boxes inside it
    var byDepth = g.clusters.filter(function (c) { return isFinite(c.lo); }).sort(function (a, b) { return b.chain.length - a.chain.length; });
    byDepth.forEach(function (c) {
      var y0 = top[c.lo], y1 = top[c.hi] + heights[c.hi];
      c.children.forEach(function (k) { if (isFinite(k.y0)) { y0 = Math.min(y0, k.y0); y1 = Math.max(y1, k.y1); } });
      c.y0 = y0 - c.padLo; c.y1 = y1 + c.padHi;
    });
    if (up) {  // row 0 at the bottom
      var h = g.height;
      g.nodes.forEach(function (v) { v.y = h - v.y; });
      g.clusters.forEach(function (c) { var y0 = c.y0; c.y0 = h - c.y1; c.y1 = h - y0; });
    }
  }

  // ----- drawing ----------------------------------------------------------------------------------------------
  function make(tag, attrs, parent) {
    var e = document.createElementNS(NS, tag);
    Object.keys(attrs).forEach(function (k) { if (attrs[k] !== null && attrs[k] !== undefined) { e.setAttribute(k, attrs[k]); } });
    if (parent) { parent.appendChild(e); }
    return e;
  }
  function num(v) { return Math.round(v * 100) / 100; }
  function dash(style) { return /dashed/.test(style) ? "5,2" : /dotted/.test(style) ? "1,5" : null; }
  function rect(x0, y0, x1, y1, r) {
    if (!r) { return "M" + num(x0) + "," + num(y0) + "H" + num(x1) + "V" + num(y1) + "H" + num(x0) + "Z"; }
    return "M" + num(x0 + r) + "," + num(y0) + "H" + num(x1 - r) + "Q" + num(x1) + "," + num(y0) + " " + num(x1) + "," +
      num(y0 + r) + "V" + num(y1 - r) + "Q" + num(x1) + "," + num(y1) + " " + num(x1 - r) + "," + num(y1) + "H" +
      num(x0 + r) + "Q" + num(x0) + "," + num(y1) + " " + num(x0) + "," + num(y1 - r) + "V" + num(y0 + r) + "Q" +
      num(x0) + "," + num(y0) + " " + num(x0 + r) + "," + num(y0) + "Z";
  }
  function texts(label, cx, y0, anchor, parent) {
    label.forEach(function (l) {
      y0 += l.h;
      var t = make("text", {"text-anchor": anchor, x: num(cx), y: num(y0 - 2 - l.size * 0.2 - 1), "font-size": l.size,
                            "font-weight": l.bold ? "bold" : null, fill: l.color}, parent);
      t.textContent = l.text;
    });
  }

  function drawNode(v, parent) {
    var g = make("g", {id: v.id, "class": "node"}, parent);
    if (v.tooltip) { make("title", {}, g).textContent = v.tooltip; }
    var fill = /filled/.test(v.style) ? v.fill : "#ffffff", stroke = v.border, width = /bold/.test(v.style) ? 2 : v.pen;
    var x0 = v.x - v.w / 2, y0 = v.y - v.h / 2, x1 = v.x + v.w / 2, y1 = v.y + v.h / 2;
    for (var p = v.peripheries; p >= 1; p--) {
      var grow = (p - 1) * 4, attrs = {fill: p === 1 ? fill : "none", stroke: stroke, "stroke-width": width,
                                       "stroke-dasharray": dash(v.style)};
      if (v.shape === "ellipse") {
        attrs.cx = num(v.x); attrs.cy = num(v.y); attrs.rx = num(v.w / 2 + grow); attrs.ry = num(v.h / 2 + grow);
        make("ellipse", attrs, g);
      } else {
        attrs.d = rect(x0 - grow, y0 - grow, x1 + grow, y1 + grow, /rounded/.test(v.style) || v.shape === "cylinder" ? 6 : 0);
        make("path", attrs, g);
      }
    }
    if (v.shape === "box3d") {
      make("path", {fill: "none", stroke: stroke, d: "M" + num(x0 + 4) + "," + num(y0) + "V" + num(y0 - 4) + "H" +
                    num(x1 + 4) + "V" + num(y1 - 4) + "H" + num(x1)}, g);
    }
    var inner = sum(v.label, function (l) { return l.h; });
    texts(v.label, v.x, v.y - inner / 2, "middle", g);
  }

  function drawCluster(c, parent) {
    var g = make("g", {id: c.id, "class": "cluster"}, parent);
    make("path", {fill: /filled/.test(c.style) ? c.fill : "none", stroke: c.border, "stroke-dasharray": dash(c.style),
                  d: rect(c.x0, c.y0, c.x1, c.y1, /rounded/.test(c.style) ? 6 : 0)}, g);
    texts(c.label, c.x0 + PAD, c.y0 + 2, "start", g);
  }

  function curve(points) {  // through the points, leaving and entering each row upright
    var d = "M" + num(points[0][0]) + "," + num(points[0][1]);
    for (var i = 1; i < points.length; i++) {
      var a = points[i - 1], b = points[i], mid = (a[1] + b[1]) / 2;
      d += "C" + num(a[0]) + "," + num(mid) + " " + num(b[0]) + "," + num(mid) + " " + num(b[0]) + "," + num(b[1]);
    }
    return d;
  }

  function drawEdge(e, parent) {
    var g = make("g", {id: e.id, "class": "edge"}, parent);
    var pts = e.points.map(function (v) { return [v.x, v.y]; }), tail = e.points[0], head = e.points[e.points.length - 1];
    if (e.reversed) { pts.reverse(); tail = e.points[e.points.length - 1]; head = e.points[0]; }
    var arrow = e.arrowhead !== "none" ? ARROW : 0, tip, base, path;
    if (e.flat && tail === head) { return; }  // (a node feeding itself: nothing to draw in a graph of ops)
    if (e.flat && Math.abs(tail.slot - head.slot) === 1) {  // neighbours in their row: side to side
      var dir = head.x >= tail.x ? 1 : -1;
      var start = [tail.x + dir * tail.w / 2, tail.y];
      tip = [head.x - dir * head.w / 2, head.y]; base = [tip[0] - dir * arrow, tip[1]];
      path = "M" + num(start[0]) + "," + num(start[1]) + "L" + num(base[0]) + "," + num(base[1]);
    } else if (e.flat) {  // others between them: over their tops, so it cannot read as a chain through them
      var side = tail.x + (head.x >= tail.x ? 0.3 : -0.3) * tail.w, y0 = tail.y - tail.h / 2, lift = Math.min(RANK_SEP, 6 + Math.abs(head.x - tail.x) / 8);
      tip = [head.x, head.y - head.h / 2]; base = [tip[0], tip[1] - arrow];
      path = "M" + num(side) + "," + num(y0) + "C" + num(side) + "," + num(Math.min(y0, base[1]) - lift) + " " +
        num(base[0]) + "," + num(Math.min(y0, base[1]) - lift) + " " + num(base[0]) + "," + num(base[1]);
    } else {
      var s = pts[1][1] > pts[0][1] ? 1 : -1, last = pts.length - 1;
      pts[0] = [pts[0][0], pts[0][1] + s * tail.h / 2];
      tip = [pts[last][0], pts[last][1] - s * head.h / 2]; base = [tip[0], tip[1] - s * arrow];
      pts[last] = base;
      path = curve(pts);
    }
    var dashes = dash(e.style);
    make("path", {fill: "none", stroke: e.color, "stroke-width": e.pen, "stroke-dasharray": dashes, d: path}, g);
    if (arrow) {
      var dx = tip[0] - base[0], dy = tip[1] - base[1], len = Math.sqrt(dx * dx + dy * dy) || 1;
      var nx = -dy / len * 2.5, ny = dx / len * 2.5;
      if (e.arrowhead === "tee") {
        make("path", {fill: "none", stroke: e.color, "stroke-width": 2, d: "M" + num(tip[0] + 2 * nx) + "," + num(tip[1] + 2 * ny) +
                      "L" + num(tip[0] - 2 * nx) + "," + num(tip[1] - 2 * ny) + "M" + num(base[0]) + "," + num(base[1]) +
                      "L" + num(tip[0]) + "," + num(tip[1])}, g);
      } else {
        make("polygon", {fill: e.color, stroke: e.color, points: [[base[0] + nx, base[1] + ny], tip, [base[0] - nx, base[1] - ny]]
          .map(function (p) { return num(p[0]) + "," + num(p[1]); }).join(" ")}, g);
      }
    }
    if (e.label) {
      var mid = e.points[Math.floor(e.points.length / 2)];
      var at = e.flat ? [(tail.x + head.x) / 2, tail.y - 4] : [mid.x + 4, e.points.length > 2 ? mid.y : (tail.y + head.y) / 2];
      make("text", {x: num(at[0]), y: num(at[1]), "font-size": 9, fill: e.color}, g).textContent = e.label;
    }
  }

  function heading(data) {  // the title, notes and legend above the graph, as dot's views have them
    var rows = [[data.title, 1, 14, ""]].concat((data.subtitle || []).map(function (s) { return [s, 0, 9, ""]; }));
    if (data.legend && data.legend.length) {
      rows.push([data.legend.map(function (e) { return e[0] + " " + e[2]; }).join("    "), 0, 9, ""]);
    }
    return lines(rows.filter(function (r) { return r[0]; }), 11);
  }

  function layout(data) {
    var g = read(data);
    rank(g); layers(g); order(g); xs(g); ys(g);
    return g;
  }

  function draw(data) {
    var g = layout(data), head = heading(data), top = sum(head, function (l) { return l.h; }) + (head.length ? 8 : 0);
    var width = 0;
    g.nodes.forEach(function (v) { width = Math.max(width, v.x + v.w / 2); });
    g.clusters.forEach(function (c) { width = Math.max(width, c.x1); });
    width = Math.max(width, max(head, function (l) { return l.w; }, 0)) + 16;
    var height = g.height + top + 16;
    var svg = make("svg", {xmlns: NS, width: num(width) + "pt", height: num(height) + "pt",
                           viewBox: "0 0 " + num(width) + " " + num(height)});
    var root = make("g", {id: "graph0", "class": "graph", transform: "translate(8 " + num(top + 8) + ")"}, svg);
    make("rect", {x: -8, y: -top - 8, width: num(width), height: num(height), fill: "white"}, root);
    texts(head, 0, -top, "start", root);
    g.clusters.slice().sort(function (a, b) { return a.chain.length - b.chain.length; })
      .forEach(function (c) { if (isFinite(c.x0) && isFinite(c.y0)) { drawCluster(c, root); } });
    g.edges.forEach(function (e) { drawEdge(e, root); });
    g.nodes.forEach(function (v) { if (!v.dummy) { drawNode(v, root); } });
    return svg;
  }

  window.gradvizLayout = {draw: draw, layout: layout};
})();
