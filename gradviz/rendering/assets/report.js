// gradviz report: the node inspector. All user text goes through textContent.
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("gv-data").textContent);
  var inspector = document.getElementById("inspector-body");

  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) { e.className = cls; }
    if (text !== undefined && text !== null) { e.textContent = String(text); }
    return e;
  }
  function shape(s) { return !s ? "?" : (s.length === 0 ? "scalar" : "(" + s.join(", ") + ")"); }
  function bytes(n) {
    if (n === null || n === undefined) { return "?"; }
    // binary units, as style.human_bytes and the diagnostics write them, so one figure reads the same everywhere
    var units = ["B", "KiB", "MiB", "GiB"], i = 0;
    while (Math.abs(n) >= 1024 && i < units.length - 1) { n /= 1024; i++; }
    return (i === 0 ? n.toFixed(0) : n.toFixed(1)) + " " + units[i];
  }
  function kv(dl, key, value) {
    if (value === null || value === undefined || value === "") { return; }
    dl.appendChild(el("dt", null, key));
    var dd = el("dd");
    if (value instanceof Node) { dd.appendChild(value); } else { dd.textContent = String(value); }
    dl.appendChild(dd);
  }
  function location(loc) {
    if (!loc) { return null; }
    var box = el("div");
    box.appendChild(el("code", null, loc.file + ":" + loc.line + (loc["function"] ? " in " + loc["function"] : "")));
    if (loc.text) { box.appendChild(el("pre", "src", loc.text)); }
    return box;
  }
  function norm(x) { return (x === null || x === undefined) ? null : Number(x).toPrecision(4); }

  function targetOf(id) {
    var m = /^gv-([nve])(\d+)/.exec(id || "");
    if (!m) { return null; }
    if (m[1] === "n") { return {node: m[2]}; }
    if (m[1] === "v") { return {variable: m[2]}; }
    var ev = data.events[m[2]];
    return ev ? {variable: String(ev.variable)} : null;
  }

  function diagLinks(ids) {
    var box = el("div");
    ids.forEach(function (i) {
      var d = data.diagnostics[i];
      var a = el("a", null, d.severity + " " + d.code);
      a.href = "#diag-" + i;
      a.addEventListener("click", function (ev) { ev.preventDefault(); window.gradvizViewer.selectDiagnostic(i); });
      box.appendChild(a); box.appendChild(document.createTextNode(" "));
    });
    return box;
  }

  function showNode(id) {
    var n = data.nodes[id];
    inspector.replaceChildren();
    if (!n) { inspector.appendChild(el("p", "muted", "node " + id + " is not in this report")); return; }
    inspector.appendChild(el("h3", null, n.op + (n.custom ? " (custom Function " + n.class_name + ")" : "")));
    var dl = el("dl", "kv");
    kv(dl, "node", "n" + id + " · graph " + n.graph);
    kv(dl, "shape", shape(n.shape));
    kv(dl, "dtype", n.dtype);
    kv(dl, "bytes", bytes(n.bytes));
    if (n.variable !== null && n.variable !== undefined) { kv(dl, "leaf", n.variable_name); }
    kv(dl, "outputs", n.output_names.join(", "));
    kv(dl, "module", n.module.join(" › "));
    kv(dl, "location", location(n.location));
    kv(dl, "grad norm", norm(n.grad_norm));
    if (n.freed_by !== null && n.freed_by !== undefined) { kv(dl, "saved freed", "by backward " + n.freed_by); }
    if (n.nonfinite) { kv(dl, "NaN/Inf", "in its " + n.nonfinite + " output"); }
    if (n.diagnostics.length) { kv(dl, "diagnostics", diagLinks(n.diagnostics)); }
    inspector.appendChild(dl);
    if (n.saved.length) {
      inspector.appendChild(el("h4", null, "saved tensors"));
      var t = el("table", "saved"), head = el("tr");
      ["tensor", "kind", "shape", "bytes", "version"].forEach(function (h) { head.appendChild(el("th", null, h)); });
      t.appendChild(head);
      n.saved.forEach(function (s) {
        var tr = el("tr");
        tr.appendChild(el("td", null, s.name));
        tr.appendChild(el("td", null, s.kind));
        tr.appendChild(el("td", null, shape(s.shape)));
        tr.appendChild(el("td", null, bytes(s.bytes)));
        tr.appendChild(el("td", s.stale ? "stale" : null, s.version + (s.stale ? " → now " + s.stale : "")));
        t.appendChild(tr);
      });
      inspector.appendChild(t);
    }
  }

  function showVariable(id) {
    var v = data.variables[id];
    inspector.replaceChildren();
    if (!v) { inspector.appendChild(el("p", "muted", "variable " + id + " is not in this report")); return; }
    inspector.appendChild(el("h3", null, v.name || ("v" + id)));
    var dl = el("dl", "kv");
    kv(dl, "variable", "v" + id + " · " + v.origin + (v.is_parameter ? " · parameter" : ""));
    kv(dl, "shape", shape(v.shape));
    kv(dl, "dtype", v.dtype);
    kv(dl, "bytes", bytes(v.bytes));
    kv(dl, "requires_grad", String(v.requires_grad));
    kv(dl, "leaf", String(v.is_leaf));
    kv(dl, "module", (v.module || []).join(" › "));
    kv(dl, "location", location(v.location));
    kv(dl, "grad norm", norm(v.grad_norm));
    if (v.grad_none_read) { kv(dl, ".grad", "read as None at line " + v.grad_none_read); }
    if (v.diagnostics.length) { kv(dl, "diagnostics", diagLinks(v.diagnostics)); }
    inspector.appendChild(dl);
  }

  window.gradvizReport = {data: data, el: el, showNode: showNode, showVariable: showVariable, targetOf: targetOf,
                          selectDiagnostic: function (i) { window.gradvizViewer.selectDiagnostic(i); }};
})();
