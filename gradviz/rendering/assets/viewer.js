// gradviz report: the graph viewer. One view on screen at a time (cloned from its <template>, or laid out by
// layout.js from its graph data when it is a part view), pan and zoom by
// svg-pan-zoom, module boxes that open their inside, search, the diagnostics bar, keys and deep links
// (#diag-2, #node-g0-n17). All user text goes through textContent.
(function () {
  "use strict";
  var R = window.gradvizReport, data = R.data, el = R.el;
  var views = {}, tops = [];
  data.views.forEach(function (v) { views[v.key] = v; if (!v.parent) { tops.push(v); } });
  var stage = document.getElementById("stage");
  var current = null;        // {key: view drawn, shown: view asked for (a deduped one shows its twin), pz, svg}
  var active = null;         // {diag: position, targets: [{kind, id}], step: index}
  var MIN_TEXT_PX = 10;  // node text on screen at least this at fit (overview.MIN_TEXT_PX)

  // ----- packed views: the views below the top ones come deflated; all are inflated once, after the first view
  // is on screen (a view asked for before then is shown when it is ready) --------------------------------------
  var unpacked = {}, graphs = {}, pending = Object.keys(data.packed || {}).length, waiting = [];
  function inflate(b64) {
    var bin = atob(b64), bytes = new Uint8Array(bin.length);
    for (var i = 0; i < bin.length; i++) { bytes[i] = bin.charCodeAt(i); }
    var stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("deflate"));
    return new Response(stream).text();
  }
  function unpackAll() {
    var jobs = Object.keys(data.packed || {}).map(function (key) {
      return inflate(data.packed[key]).then(function (text) {
        if (views[key] && views[key].layout === "page") { graphs[key] = JSON.parse(text); return; }
        var doc = new DOMParser().parseFromString(text, "image/svg+xml");
        unpacked[key] = doc.documentElement.nodeName === "svg" ? doc.documentElement : null;
      });
    });
    Promise.all(jobs).then(function () {
      pending = 0;
      window.gradvizViewer.unpacked = performance.now();
      waiting.splice(0).forEach(function (fn) { fn(); });
    }, function (err) { pending = 0; stage.textContent = "could not unpack the views: " + err; });
  }
  function whenReady(key, fn) {  // run fn now if view `key` can be shown, else once the views are unpacked
    if (pending && data.packed && data.packed[drawnKey(key)] !== undefined) { waiting.push(fn); return false; }
    return true;
  }
  function viewContent(key) {
    var tpl = document.getElementById("tpl-" + key);
    if (tpl) { return tpl.content.cloneNode(true); }
    if (!unpacked[key] && graphs[key]) {  // a part view's graph: laid out here when first opened, then kept
      try { unpacked[key] = window.gradvizLayout.draw(graphs[key]); } catch (err) {
        var failed = document.createElement("div");
        failed.className = "nopic";
        failed.textContent = "No picture: this view could not be laid out (" + err + ")";
        return failed;
      }
    }
    return unpacked[key] ? unpacked[key].cloneNode(true) : null;
  }

  // ----- views ------------------------------------------------------------------------------------------------
  function drawnKey(key) { var v = views[key]; return v && v.same_as ? v.same_as : key; }

  function fontSize(svg) {
    var t = svg.querySelector("g.node text");
    return t ? parseFloat(t.getAttribute("font-size") || "11") : 11;
  }
  function textPx() {  // on-screen size of node text in the current view
    return current && current.pz ? current.pz.getSizes().realZoom * fontSize(current.svg) : 0;
  }

  function fitView() {
    if (current && current.pz) { current.pz.resize(); current.pz.fit(); current.pz.center(); }
  }

  function place(g) {
    // where a node is drawn, in px from the stage's top-left, from pan/zoom's state (its DOM update waits for
    // the next animation frame, so the element's on-screen box may still be the old one)
    var b = g.getBBox(), m = current.svg.createSVGMatrix();
    for (var e = g.parentNode; e && !(e.classList && e.classList.contains("svg-pan-zoom_viewport")); e = e.parentNode) {
      var t = e.transform && e.transform.baseVal.consolidate();
      if (t) { m = t.matrix.multiply(m); }
    }
    var pan = current.pz.getPan(), zoom = current.pz.getSizes().realZoom;
    var x = m.a * b.x + m.c * b.y + m.e, y = m.b * b.x + m.d * b.y + m.f;
    return {x: pan.x + zoom * x, y: pan.y + zoom * y, w: zoom * b.width, h: zoom * b.height};
  }

  function inStage(g) {
    var r = g.getBoundingClientRect(), s = stage.getBoundingClientRect();
    return r.left >= s.left && r.right <= s.right && r.top >= s.top && r.bottom <= s.bottom;
  }

  function centre(g, top) {  // pan so that node g is in the middle of the stage (or near its top)
    var p = place(g), box = stage.getBoundingClientRect();
    current.pz.panBy({x: box.width / 2 - (p.x + p.w / 2), y: (top ? 40 : box.height / 2 - p.h / 2) - p.y});
  }

  function legible() {
    // fit first; when that leaves node text too small to read, zoom in and start at the topmost node (not at
    // blank space between clusters)
    fitView();
    var px = textPx();
    if (px > 0 && px < MIN_TEXT_PX) {
      current.pz.zoomBy(MIN_TEXT_PX / px);
      var first = null, best = null;
      current.svg.querySelectorAll("g.node").forEach(function (g) {
        var p = place(g);
        if (!best || p.y < best.y - 1 || (Math.abs(p.y - best.y) <= 1 && p.x < best.x)) { best = p; first = g; }
      });
      if (first) { centre(first, true); }
    }
  }

  function mount(key) {
    var view = views[key];
    if (!view) { return false; }
    var drawn = drawnKey(key);
    if (current && current.key === drawn && current.shown === key) { return true; }
    if (!whenReady(key, function () { mount(key); })) { return false; }
    if (current && current.pz) { current.pz.destroy(); }
    stage.replaceChildren();
    var content = viewContent(drawn);
    if (content) { stage.appendChild(content); }
    var svg = stage.querySelector("svg");
    current = {key: drawn, shown: key, pz: null, svg: svg};
    if (svg) {
      svg.setAttribute("width", "100%"); svg.setAttribute("height", "100%");
      current.pz = window.svgPanZoom(svg, {zoomEnabled: true, panEnabled: true, controlIconsEnabled: false,
        fit: true, center: true, minZoom: 0.05, maxZoom: 60, zoomScaleSensitivity: 0.25,
        dblClickZoomEnabled: false});
      wire(svg);
      // a view opened from a box shows the whole of what the box held, fitted to the stage (a search or a link
      // landing on one of its nodes zooms onto it); a top view starts legible
      if (view.parent) { fitView(); } else { legible(); }
      if (active) { highlight(); }
    }
    toolbar(view);
    return true;
  }

  function opened(key, elem) {  // the view element `elem` of view `key` opens (an inner loop: its outer loop's)
    return (views[key].opens || {})[elem] || key + "-" + elem.slice(3);
  }

  function wire(svg) {
    var boxes = views[current.key].boxes || [];
    svg.querySelectorAll("g.node, g.cluster").forEach(function (g) {
      var opens = boxes.indexOf(g.id) >= 0;
      if (opens) { g.classList.add("gv-opens"); }
      if (!opens && g.classList.contains("cluster")) { return; }
      function activate(ev) {
        ev.stopPropagation();
        if (opens) { mount(opened(current.key, g.id)); return; }
        select(g);
      }
      g.addEventListener("click", activate);
      // Tab walks the nodes (and the boxes that open), Enter or Space acts as a click
      g.setAttribute("tabindex", "0");
      g.setAttribute("role", "button");
      g.addEventListener("keydown", function (ev) {
        if (ev.key === "Enter" || ev.key === " ") { ev.preventDefault(); activate(ev); }
      });
      g.addEventListener("focus", function () { if (!inStage(g)) { centre(g, false); } });
    });
  }

  function select(g) {
    stage.querySelectorAll(".gv-selected").forEach(function (e) { e.classList.remove("gv-selected"); });
    g.classList.add("gv-selected");
    var t = R.targetOf(g.id);
    if (!t) {
      document.getElementById("inspector-body").replaceChildren(el("p", "muted", g.textContent.trim()));
      return;
    }
    if (t.node !== undefined) {
      R.showNode(t.node);
      var n = data.nodes[t.node];
      if (n) { setHash("node-g" + (shownGraph() !== null ? shownGraph() : n.graph) + "-n" + originalId(t.node)); }
    } else { R.showVariable(t.variable); }
  }

  function shownGraph() { var v = views[current.shown]; return v && v.graph >= 0 ? v.graph : null; }
  function originalId(drawnId) {  // the id in the graph asked for, when its picture is its twin's
    var v = views[current.shown];
    if (!v || !v.same_as) { return drawnId; }
    for (var k in v.alias) { if (v.alias[k] === Number(drawnId)) { return k; } }
    return drawnId;
  }

  function toolbar(view) {
    var top = view; while (top.parent) { top = views[top.parent]; }
    var select = document.getElementById("structure-select");
    if (!select.options.length) {
      var seen = {};
      tops.forEach(function (v) {
        var s = v.structure === null || v.structure === undefined ? v.key : "s" + v.structure;
        if (seen[s]) { return; }
        seen[s] = true;
        var o = el("option", null, v.label);
        o.value = v.key;
        select.appendChild(o);
      });
      select.addEventListener("change", function () { mount(select.value); });
    }
    var first = tops.filter(function (v) { return sameStructure(v, top); })[0];
    if (first) { select.value = first.key; }
    var its = document.getElementById("iterations");
    its.replaceChildren();
    tops.filter(function (v) { return sameStructure(v, top); }).forEach(function (v) {
      if (v.iteration === null || v.iteration === undefined) { return; }
      var b = el("button", v.key === top.key ? "on" : null,
                 "iteration " + v.iteration + (v.which ? " (" + v.which + ")" : ""));
      b.addEventListener("click", function () { mount(v.key); });
      its.appendChild(b);
    });
    var crumbs = document.getElementById("crumbs"), chain = [], c = view;
    while (c) { chain.unshift(c); c = c.parent ? views[c.parent] : null; }
    crumbs.replaceChildren();
    chain.forEach(function (v, i) {
      if (i) { crumbs.appendChild(document.createTextNode(" › ")); }
      var a = el("a", i === chain.length - 1 ? "here" : null, i ? v.title : "graph " + (v.graph >= 0 ? v.graph : v.title));
      a.href = "#";
      a.addEventListener("click", function (ev) { ev.preventDefault(); mount(v.key); });
      crumbs.appendChild(a);
    });
    var note = document.getElementById("view-note");
    note.textContent = view.same_as ? "iteration " + view.iteration + " is drawn exactly like iteration " +
      views[view.same_as].iteration + ": that picture is shown, with this graph's nodes mapped onto it" :
      (view.note || "");
  }
  function sameStructure(a, b) {
    return (a.structure !== null && a.structure !== undefined) ? a.structure === b.structure : a.key === b.key;
  }

  // ----- finding a node ---------------------------------------------------------------------------------------
  function locate(kind, id, graph) {
    // {key, elem}: the view drawing document id `id` (kind n/v/e), taking the graph asked for into account
    var asked = null;
    if (graph !== undefined && graph !== null) {
      asked = tops.filter(function (v) { return v.graph === Number(graph); })[0] || null;
    }
    var drawnId = id;
    if (asked && asked.same_as && kind === "n" && asked.alias[String(id)] !== undefined) {
      drawnId = asked.alias[String(id)];
    }
    var key = data.where[kind + drawnId], elem = "gv-" + kind + drawnId, standsIn = null;
    if (!key && data.stand && data.stand[kind + drawnId]) {  // drawn only as part of a box, fold or "… more"
      key = data.stand[kind + drawnId][0]; elem = data.stand[kind + drawnId][1]; standsIn = drawnId;
    }
    if (!key) { return null; }
    if (asked && asked.same_as && key.indexOf(asked.same_as) === 0) { key = asked.key + key.slice(asked.same_as.length); }
    var via = asked && asked.same_as && drawnId !== id ? {graph: asked.graph, id: id, iteration: asked.iteration,
                                                         twin: views[asked.same_as]} : null;
    return {key: views[key] ? key : drawnKey(key), elem: elem, via: via, standsIn: standsIn};
  }

  function focus(place) {
    if (!place) { return null; }
    var key = place.key;
    if (!views[key]) {  // an inside view of a deduped graph: its twin's
      var parts = key.split("-"); key = drawnKey(parts[0]) + key.slice(parts[0].length);
    }
    if (!whenReady(key, function () { focus(place); })) { return null; }
    mount(key);
    var g = stage.querySelector('[id="' + place.elem + '"]');
    if (!g) { return null; }
    if (textPx() < 13) { current.pz.zoomBy(14 / textPx()); }
    centre(g, false);
    select(g);
    if (place.standsIn !== null && place.standsIn !== undefined) {
      var opens = (views[current.key].boxes || []).indexOf(place.elem) >= 0;
      var inside = views[opened(current.key, place.elem)];
      document.getElementById("view-note").textContent = "node n" + place.standsIn + " is drawn as part of " +
        place.elem.slice(3) + (opens ? " (click it to open)" : "") + (inside && inside.error ?
          ": the view of its inside could not be drawn (" + inside.error + ")" :
          ": its own view was left out to keep the page small");
    }
    if (place.via) {  // a graph drawn like its structure's first: say which node stands for the one asked for
      var v = place.via;
      document.getElementById("view-note").textContent = "node n" + v.id + " of graph " + v.graph +
        " (iteration " + v.iteration + ") is shown as " + place.elem.slice(3) + " of graph " + v.twin.graph +
        ": the two graphs are drawn alike";
      setHash("node-g" + v.graph + "-n" + v.id);
    }
    return g;
  }

  // ----- diagnostics bar --------------------------------------------------------------------------------------
  function targetsOf(i) {
    var d = data.diagnostics[i], out = [];
    d.nodes.forEach(function (n) { out.push({kind: "n", id: n, graph: (data.nodes[n] || {}).graph}); });
    d.variables.forEach(function (v) { out.push({kind: "v", id: v}); });
    return out.filter(function (t) { return locate(t.kind, t.id, t.graph); });
  }

  function highlight() {
    stage.querySelectorAll(".gv-hl, .gv-hl-in").forEach(function (e) { e.classList.remove("gv-hl", "gv-hl-in"); });
    if (!active) { return; }
    var d = data.diagnostics[active.diag], v = views[current.shown];
    // a box, fold or "… more" holding a diagnosed node is marked on every level, so the diagnostic stays in sight
    var holds = (views[current.key] || {}).holds || {}, wanted = {};
    d.nodes.forEach(function (n) {
      var shown = v && v.same_as && v.alias[String(n)] !== undefined ? v.alias[String(n)] : n;
      wanted[shown] = true;
    });
    Object.keys(holds).forEach(function (elem) {
      if (!holds[elem].some(function (n) { return wanted[n]; })) { return; }
      var g = stage.querySelector('[id="' + elem + '"]');
      if (g) { g.classList.add("gv-hl-in"); }
    });
    stage.querySelectorAll("g.node").forEach(function (g) {
      var t = R.targetOf(g.id);
      if (!t) { return; }
      var n = t.node !== undefined ? Number(originalId(t.node)) : null;
      if ((n !== null && d.nodes.indexOf(n) >= 0) ||
          (t.variable !== undefined && d.variables.indexOf(Number(t.variable)) >= 0)) { g.classList.add("gv-hl"); }
    });
    void v;
  }

  function selectDiagnostic(i, step, overview) {
    document.querySelectorAll(".dentry.active").forEach(function (e) { e.classList.remove("active"); });
    var entry = document.getElementById("diag-" + i);
    if (!entry) { return; }
    entry.classList.add("active");
    active = {diag: i, targets: targetsOf(i), step: step || 0};
    setHash("diag-" + i);
    showStep(entry, overview);
  }

  function topOf(key) { var v = views[key]; while (v && v.parent) { v = views[v.parent]; } return v ? v.key : key; }

  function showStep(entry, overview) {
    // overview: stay on the top view of the graph the node is in, its box marked (the page's first screen)
    entry = entry || document.getElementById("diag-" + active.diag);
    var pos = entry.querySelector(".steppos"), status = document.getElementById("diag-status");
    var n = active.targets.length;
    if (!n) {
      pos.textContent = "not drawn";
      status.textContent = "(its nodes are not in the pictures)";
      highlight();
      return;
    }
    status.textContent = "";
    active.step = (active.step % n + n) % n;
    pos.textContent = (active.step + 1) + "/" + n;
    var t = active.targets[active.step];
    var place = locate(t.kind, t.id, t.graph), g = null;
    if (overview && place && views[place.key] && views[place.key].parent) { mount(topOf(place.key)); }
    else { g = focus(place); }
    setHash("diag-" + active.diag);  // the link names the diagnostic, not the node it steps to
    highlight();
    if (g) { g.classList.add("gv-selected"); }
    if (entry.scrollIntoView) { entry.scrollIntoView({block: "nearest"}); }
  }

  function stepBy(delta) { if (active) { active.step += delta; showStep(); } }
  function diagBy(delta) {
    var order = data.order;
    if (!order.length) { return; }
    var at = active ? order.indexOf(active.diag) : -1;
    selectDiagnostic(order[((at + delta) % order.length + order.length) % order.length]);
  }

  document.querySelectorAll(".dentry").forEach(function (entry) {
    var i = Number(entry.dataset.diag);
    entry.setAttribute("tabindex", "0");  // Tab reaches each diagnostic; Enter selects it, again steps on
    entry.addEventListener("keydown", function (ev) {
      if (ev.target !== entry || (ev.key !== "Enter" && ev.key !== " ")) { return; }
      ev.preventDefault();
      if (active && active.diag === i) { stepBy(1); } else { selectDiagnostic(i); }
    });
    entry.addEventListener("click", function (ev) {
      if (ev.target.closest("a.srcloc")) { return; }
      if (ev.target.closest("button.next")) { if (active && active.diag === i) { stepBy(1); return; } }
      if (ev.target.closest("button.prev")) { if (active && active.diag === i) { stepBy(-1); return; } }
      if (!active || active.diag !== i) { selectDiagnostic(i); }
    });
  });

  // ----- search -----------------------------------------------------------------------------------------------
  var box = document.getElementById("search"), results = document.getElementById("search-results");
  var index = [];
  data.search.forEach(function (row) {
    var n = data.nodes[row[0]] || {};
    var words = [row[1], row[2], row[3], n.variable_name, (n.output_names || []).join(" "),
                 n.location && n.location.text, (n.module || []).join(" ")];
    index.push({kind: "n", id: row[0], graph: row[4], label: row[1] + (row[2] ? " · " + row[2] : "") +
                (row[3] ? " · " + row[3] : "") + (row[5] > 1 ? " (×" + row[5] + ")" : ""),
                text: words.filter(Boolean).join(" ").toLowerCase()});
  });
  Object.keys(data.variables).forEach(function (id) {
    var v = data.variables[id];
    if (!v.is_parameter && !v.name) { return; }
    index.push({kind: "v", id: Number(id), label: (v.name || "v" + id) + (v.is_parameter ? " · parameter" : ""),
                text: [v.name, (v.module || []).join(" "), v.location && v.location.text].filter(Boolean)
                  .join(" ").toLowerCase(), param: v.is_parameter});
  });
  var hits = [], chosen = 0;

  function placeOf(hit) {
    var p = locate(hit.kind, hit.id, hit.graph);
    if (!p && hit.kind === "v") {  // a leaf drawn as its accumulator or ghosted per use: find a node holding it
      for (var nid in data.nodes) {
        if (data.nodes[nid].variable === hit.id) { p = locate("n", nid, data.nodes[nid].graph); if (p) { break; } }
      }
    }
    return p;
  }
  function runSearch() {
    var q = box.value.trim().toLowerCase();
    results.replaceChildren();
    hits = [];
    if (!q) { results.hidden = true; return; }
    index.forEach(function (h) { if (h.text.indexOf(q) >= 0) { hits.push(h); } });
    hits.sort(function (a, b) { return (b.param ? 1 : 0) - (a.param ? 1 : 0); });
    chosen = 0;
    results.appendChild(el("div", "muted", hits.length + " match" + (hits.length === 1 ? "" : "es")));
    hits.slice(0, 40).forEach(function (h, i) {
      var item = el("div", "hit" + (i === 0 ? " on" : ""), h.label);
      if (!placeOf(h)) { item.appendChild(el("span", "muted", " (not drawn: folded or left out)")); }
      item.addEventListener("mousedown", function (ev) { ev.preventDefault(); go(h); });
      results.appendChild(item);
    });
    results.hidden = false;
    markHits(q);
  }
  function markHits(q) {
    stage.querySelectorAll(".gv-match").forEach(function (e) { e.classList.remove("gv-match"); });
    if (!q) { return; }
    stage.querySelectorAll("g.node").forEach(function (g) {
      if (g.textContent.toLowerCase().indexOf(q) >= 0) { g.classList.add("gv-match"); }
    });
  }
  function go(hit) {
    results.hidden = true;
    var g = focus(placeOf(hit));
    if (!g) {
      if (hit.kind === "n") { R.showNode(hit.id); } else { R.showVariable(hit.id); }
    }
    markHits(box.value.trim().toLowerCase());
  }
  box.addEventListener("input", runSearch);
  box.addEventListener("keydown", function (ev) {
    var items = results.querySelectorAll(".hit");
    if (ev.key === "ArrowDown" || ev.key === "ArrowUp") {
      ev.preventDefault();
      if (!items.length) { return; }
      items[chosen].classList.remove("on");
      chosen = (chosen + (ev.key === "ArrowDown" ? 1 : -1) + items.length) % items.length;
      items[chosen].classList.add("on");
    } else if (ev.key === "Enter" && hits.length) { ev.preventDefault(); go(hits[chosen]); }
    else if (ev.key === "Escape") { box.value = ""; runSearch(); box.blur(); }
  });
  box.addEventListener("blur", function () { results.hidden = true; });

  // ----- tools, keys, deep links ------------------------------------------------------------------------------
  document.getElementById("zoom-in").addEventListener("click", function () { if (current && current.pz) { current.pz.zoomIn(); } });
  document.getElementById("zoom-out").addEventListener("click", function () { if (current && current.pz) { current.pz.zoomOut(); } });
  document.getElementById("fit").addEventListener("click", fitView);

  document.addEventListener("keydown", function (ev) {
    if (ev.target === box || ev.ctrlKey || ev.metaKey || ev.altKey) { return; }
    var pz = current && current.pz, k = ev.key;
    if (k === "/") { ev.preventDefault(); box.focus(); }
    else if (k === "j") { diagBy(1); } else if (k === "k") { diagBy(-1); }
    else if (k === "n") { stepBy(1); } else if (k === "p") { stepBy(-1); }
    else if ((k === "+" || k === "=") && pz) { pz.zoomIn(); } else if (k === "-" && pz) { pz.zoomOut(); }
    else if (k === "0" && pz) { fitView(); }
    else if (k === "Escape" && current) { var v = views[current.shown]; if (v && v.parent) { mount(v.parent); } }
    else if (pz && k.indexOf("Arrow") === 0) {
      ev.preventDefault();
      pz.panBy({x: k === "ArrowLeft" ? 80 : k === "ArrowRight" ? -80 : 0, y: k === "ArrowUp" ? 80 : k === "ArrowDown" ? -80 : 0});
    }
  });

  var hashing = false;
  function setHash(h) {
    if (location.hash === "#" + h) { return; }
    hashing = true;
    try { history.replaceState(null, "", "#" + h); } catch (e) { /* file:// pages may refuse */ }
    hashing = false;
  }
  function openHash() {
    if (hashing) { return false; }
    var h = decodeURIComponent(location.hash.slice(1)), m;
    if ((m = /^diag-(\d+)$/.exec(h)) && data.diagnostics[m[1]]) { selectDiagnostic(Number(m[1])); return true; }
    if ((m = /^node-g(\d+)-n(\d+)$/.exec(h))) {
      var place = locate("n", Number(m[2]), Number(m[1]));
      if (place) { focus(place); }  // (shown once the views are unpacked when it is in a packed one)
      return !!place;
    }
    if ((m = /^view-(.+)$/.exec(h)) && views[m[1]]) { return mount(m[1]); }
    return false;
  }
  window.addEventListener("hashchange", openHash);
  window.addEventListener("resize", function () { if (current && current.pz) { current.pz.resize(); } });

  window.gradvizViewer = {mount: mount, focus: focus, locate: locate, selectDiagnostic: selectDiagnostic,
                          step: stepBy, textPx: textPx, current: function () { return current; }};
  if (!openHash()) {
    if (data.order.length && targetsOf(data.order[0]).length) { selectDiagnostic(data.order[0], 0, true); }
    else if (tops.length) { mount(tops[0].key); }
  }
  window.gradvizViewer.ready = performance.now();  // the first view is on screen (benchmarks read it)
  if (pending) { unpackAll(); } else { window.gradvizViewer.unpacked = window.gradvizViewer.ready; }
})();
