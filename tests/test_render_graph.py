"""build_graph: the picture as data, from hand-built trace documents (docs/trace-format.md)."""

import pytest

from gradviz.rendering.graph import build_graph
from tests.synthetic_docs import DocBuilder, chained_models_doc, loop_doc


def by_name(spec):
    return {node.name: node for node in spec.nodes}


def texts(node):
    return [row.text for row in node.rows]


def edge_pairs(spec, kind=None):
    return {(e.tail, e.head) for e in spec.edges if kind is None or e.kind == kind}


def test_ops_leaves_roots_and_module_clusters():
    doc = chained_models_doc()
    spec = build_graph(doc)
    nodes = by_name(spec)
    # AccumulateGrad nodes are drawn as their leaves: parameter path and shape, as ellipses.
    assert texts(nodes["n0"])[:2] == ["model1.weight", "(2, 3)"] and nodes["n0"].shape == "ellipse"
    assert texts(nodes["n3"])[:3] == ["AddmmBackward", "(4, 2)", "→ y1"] and nodes["n3"].shape == "box"
    assert nodes["n8"].peripheries == 2 and "root" in texts(nodes["n8"])
    assert "root" not in texts(nodes["n7"])
    # Backward graph: arrows go from consumer to producer (gradient flow), laid out bottom-up.
    assert ("n8", "n7") in edge_pairs(spec) and ("n3", "n2") in edge_pairs(spec) and spec.rankdir == "BT"
    clusters = {c.name: [r.text for r in c.rows] for c in spec.clusters}
    assert sorted(clusters.values()) == [["model1 (Linear)"], ["model2 (Linear)"]]
    model1 = next(name for name, rows in clusters.items() if rows == ["model1 (Linear)"])
    assert {n.name for n in spec.nodes if n.cluster == model1} == {"n0", "n1", "n2", "n3", "e0"}
    assert nodes["n8"].cluster is None
    assert spec.title == "seed_chained.py · backward graph · iteration 0 · graph 0 · 9 nodes"


def test_diagnostics_colour_nodes_by_severity_with_a_legend_and_none_read_note():
    spec = build_graph(chained_models_doc())
    nodes = by_name(spec)
    # y1's node is in a warning and an error: the worse wins.
    assert (nodes["n3"].fill, nodes["n3"].border) == ("#f9d6d5", "#c0392b")
    assert nodes["n7"].fill == "#f4f4f4"
    # each code listed under its own severity, even when both sit on one node
    assert [e.label for e in spec.legend[:2]] == ["error: nonscalar-backward", "warning: none-grad"]
    assert spec.legend[0].border == "#c0392b" and spec.legend[1].border == "#d68910"
    note = nodes["e0"]
    assert note.shape == "note" and texts(note)[0] == "y1.grad → None"
    assert ("e0", "n3") in edge_pairs(spec, "note")


def test_forward_view_draws_data_flow_with_inputs_and_constants():
    spec = build_graph(chained_models_doc(), forward=True)
    nodes = by_name(spec)
    assert spec.rankdir == "TB"
    assert texts(nodes["n3"])[0] == "Addmm"               # forward: the Function's class, not its backward node
    assert texts(nodes["v0"])[:3] == ["X", "(4, 3)", "no grad"] and nodes["v0"].style == "filled,dashed"
    assert ("v0", "n3") in edge_pairs(spec) and ("n3", "n7") in edge_pairs(spec)
    assert "n0" not in nodes                               # no AccumulateGrad nodes in the forward view


def test_show_saved_and_show_grads():
    doc = chained_models_doc()
    spec = build_graph(doc, show_saved=True, show_grads=True)
    nodes = by_name(spec)
    assert texts(nodes["n3_s0"]) == ["saved input X", "(4, 3) · 48 B · version 0"]
    assert texts(nodes["n3_s1"])[0] == "saved input T of model1"   # no name: the op and module that made it
    assert ("n3_s0", "n3") in edge_pairs(spec, "saved")
    norms = doc["backwards"][0]["grad_norms"]
    labels = {(e.tail, e.head): e.label for e in spec.edges}
    assert labels[("n8", "n7")] == f"{norms['7']:.3g}"
    assert "n3_s0" not in by_name(build_graph(doc))


def test_stale_saved_tensor_is_drawn_even_without_show_saved():
    b = DocBuilder()
    a = b.leaf("a", [3])
    e = b.op("ExpBackward", [a], [3], saved=[a], name="e")
    out = b.op("SumBackward", [e], [])
    b.inplace(a, "add_", saved_by=[b.variables[e]["node"]])
    b.backward(out)
    spec = build_graph(b.finish())
    saved = by_name(spec)[f"n{b.variables[e]['node']}_s0"]
    assert texts(saved) == ["saved input a", "(3) · 12 B · version 0", "stale: now version 1 (add_)"]
    assert saved.fill == "#f9d6d5"


def test_cut_edge_is_a_dashed_break_to_where_it_was_cut():
    b = DocBuilder()
    w = b.leaf("w", [2], parameter=True)
    y = b.op("MulBackward", [w, w], [2], name="y")
    cut = b.leaf("y_data", [2], requires_grad=False, origin="data", source=y)
    z = b.op("AddBackward", [y, cut], [2], name="z")
    b.backward(b.op("SumBackward", [z], []))
    spec = build_graph(b.finish())
    nodes = by_name(spec)
    cut_key = f"v{cut}"
    assert nodes[cut_key].shape == "octagon" and "cut by .data" in texts(nodes[cut_key])
    producer = f"n{b.variables[y]['node']}"
    dashed = [e for e in spec.edges if e.kind == "cut"]
    assert [(e.tail, e.head, e.style, e.label) for e in dashed] == [(cut_key, producer, "dashed", "cut")]


def test_retained_graph_is_a_shaded_cluster_with_its_bytes():
    b = DocBuilder()
    w = b.leaf("w", [1000], parameter=True)
    y = b.op("ExpBackward", [w], [1000], saved=[w])
    # y's saved input is a parameter: it belongs to the model and is not counted
    z = b.op("TanhBackward", [y], [1000], saved=[y])
    b.backward(b.op("SumBackward", [z], []), retain_graph=True)
    spec = build_graph(b.finish())
    (cluster,) = spec.clusters
    assert [r.text for r in cluster.rows] == ["graph 0 (iteration 0)",
                                              "retained after backward: 3.9 KiB of saved tensors (2 nodes not freed)"]
    assert cluster.style == "rounded,filled" and cluster.fill == "#ececec"
    assert all(n.cluster == cluster.name for n in spec.nodes)
    assert "retained graph" in [e.label for e in spec.legend]


def test_graph_partly_freed_by_a_second_backward_is_still_retained():
    # The seed's hook answer: loss.backward(retain_graph=True) then y1.backward(...) frees model1's part only;
    # the graph's freed_by names that backward, but model2's nodes keep their saved tensors.
    b = DocBuilder()
    x = b.leaf("x", [100], requires_grad=False)
    w = b.leaf("w", [100], parameter=True)
    y1 = b.op("MulBackward", [w, x], [100], saved=[x], name="y1")
    y2 = b.op("ExpBackward", [y1], [100], saved=[y1], name="y2")
    loss = b.op("SumBackward", [y2], [], name="loss")
    b.backward(loss, retain_graph=True)
    doc = b.finish()
    doc["nodes"][b.variables[y1]["node"]]["freed_by"] = 1     # the second backward freed y1's node only
    doc["graphs"][0]["freed_by"] = 1
    (cluster,) = build_graph(doc).clusters
    assert cluster.rows[1].text == "retained after backward: 400 B of saved tensors (1 node not freed)"
    for node in doc["nodes"]:
        if node["saved"]:
            node["freed_by"] = 1
    assert build_graph(doc).clusters == []                  # everything freed: nothing retained


def test_earlier_graph_feeding_this_one_is_drawn_as_a_stub():
    # `total += loss`: each iteration's sum takes the previous sum as input; that link keeps the graphs alive
    b = DocBuilder()
    w = b.leaf("w", [3], parameter=True)
    total = b.op("SumBackward", [w], [], name="loss")
    b.next_iteration()
    total2 = b.op("AddBackward", [total, b.op("SumBackward", [w], [])], [], name="total")
    doc = b.finish()
    later = doc["variables"][total2]["node"]
    graph = doc["nodes"][later]["graph"]
    earlier = doc["variables"][total]["node"]
    doc["graphs"][graph]["nodes"] = [n for n in doc["graphs"][graph]["nodes"] if n not in (earlier, 0)]
    doc["nodes"][earlier]["graph"] = 99
    doc["graphs"].append({**doc["graphs"][graph], "id": 99, "iteration": 0, "nodes": [earlier]})
    spec = build_graph(doc, graphs=[graph])
    stub = by_name(spec)["x99"]
    assert texts(stub) == ["graph 99", "SumBackward scalar", "iteration 0, not drawn"]
    assert (f"n{later}", "x99") in edge_pairs(spec)
    assert "input from an earlier graph (not drawn)" in [e.label for e in spec.legend]


def test_custom_function_labelled_with_class_name():
    b = DocBuilder()
    a = b.leaf("a", [2])
    out = b.op("MyFnBackward", [a], [2], custom=True, class_name="MyFn")
    b.backward(b.op("SumBackward", [out], []))
    node = by_name(build_graph(b.finish()))["n1"]
    assert texts(node)[:3] == ["MyFn", "(2)", "custom Function"] and node.fill == "#efe3fb"


def _nested_doc(calls=3):
    b = DocBuilder()
    b.module("net", "Net")
    b.module("net.block", "Block")
    h = b.leaf("x", [4, 8], requires_grad=False)
    for i in range(calls):
        w = b.leaf(f"net.block.w{i}", [8, 8], parameter=True)
        m = b.op("MmBackward", [h, w], [4, 8], module=["net", "net.block"], saved=[h, w])
        h = b.op("ReluBackward", [m], [4, 8], module=["net", "net.block"])
        h = b.op("MulBackward", [h, h], [4, 8], module=["net"])
    b.backward(b.op("SumBackward", [h], []))
    return b.finish()


def test_nested_clusters_one_per_call():
    spec = build_graph(_nested_doc())
    labels = {c.name: ([r.text for r in c.rows], c.parent) for c in spec.clusters}
    net = [name for name, (rows, _) in labels.items() if rows == ["net (Net)"]]
    blocks = [name for name, (rows, parent) in labels.items() if rows[0] == "net.block (Block)"]
    assert len(net) == 1 and len(blocks) == 3
    assert {labels[b][1] for b in blocks} == set(net)
    assert sorted(labels[b][0][1] for b in blocks) == ["call 1", "call 2", "call 3"]


def test_depth_collapses_deeper_modules_into_boxes():
    spec = build_graph(_nested_doc(), depth=1)
    boxes = [n for n in spec.nodes if n.kind == "module"]
    assert len(boxes) == 3
    # The first call's input X needs no grad, so the backward graph has no edge into it.
    assert texts(boxes[0]) == ["net.block (Block)", "2 ops · 1 parameters (64 values)", "out (4, 8)"]
    assert texts(boxes[1]) == ["net.block (Block)", "2 ops · 1 parameters (64 values)", "in (4, 8)", "out (4, 8)"]
    assert boxes[0].shape == "box3d"
    assert not any(n.name.startswith("n") and "MmBackward" in texts(n) for n in spec.nodes)
    assert "modules deeper than 1 are collapsed" in spec.subtitle
    top = build_graph(_nested_doc(), depth=0)
    assert [texts(n)[0] for n in top.nodes if n.kind == "module"] == ["net (Net)"]


def test_above_max_nodes_collapses_by_depth_and_says_so():
    spec = build_graph(_nested_doc(calls=10), max_nodes=20, fold_loops=False)
    assert spec.subtitle[0] == "too large to draw whole: 41 nodes > max_nodes 20, so"
    assert len(spec.nodes) <= 20


def test_unrolled_loop_folds_once_with_repeat_count_and_a_loop_edge():
    spec = build_graph(loop_doc(100))
    nodes = by_name(spec)
    ops = sorted(texts(n)[0] for n in spec.nodes if n.kind == "op")
    assert ops == ["AddBackward", "MmBackward", "SumBackward", "TanhBackward"]
    (cluster,) = [c for c in spec.clusters if c.rows[0].text == "× 100"]
    assert [n.name for n in spec.nodes if n.cluster == cluster.name] == ["n1", "n3", "n4"]
    loops = [e for e in spec.edges if e.kind == "loop"]
    assert [(e.tail, e.head, e.constraint) for e in loops] == [("n1", "n4", False)]
    assert "a loop of 100 steps × 3 ops is drawn once" in spec.subtitle
    assert nodes["n0"].kind == "leaf" and texts(nodes["n0"])[0] == "W"


def test_per_step_inputs_fold_onto_one_leaf():
    spec = build_graph(loop_doc(20, reuse_input=False))
    leaves = [n for n in spec.nodes if n.kind == "leaf"]
    assert sorted(texts(n)[0] for n in leaves) == ["W", "x_t"]
    assert "a different one each step (20 in all)" in texts(next(n for n in leaves if texts(n)[0] == "x_t"))


def test_high_degree_leaf_becomes_ghosts_when_not_folded():
    spec = build_graph(loop_doc(6), fold_loops=False)
    ghosts = [n for n in spec.nodes if n.kind == "ghost"]
    # W and x are each used at all 6 steps: one real node plus 5 ghosts each, labelled like the leaf.
    assert sorted(texts(g)[0] for g in ghosts) == ["W"] * 5 + ["x"] * 5
    w = by_name(spec)["n0"]
    assert all((g.fill, g.border) == (w.fill, w.border) for g in ghosts if texts(g)[0] == "W")
    assert all(g.style.endswith("dashed") for g in ghosts)
    heads = [e.head for e in spec.edges if e.head == "n0"]
    assert len(heads) == 1


def test_truncation_keeps_nodes_nearest_the_root():
    b = DocBuilder()
    h = b.leaf("x", [3])
    ops = ["ExpBackward", "SinBackward", "MulBackward", "AddBackward", "NegBackward", "CosBackward", "LogBackward"]
    for i in range(300):                      # an aperiodic chain: nothing to fold
        h = b.op(ops[(i * i + 3 * i) % 7], [h], [3])
    b.backward(b.op("SumBackward", [h], []))
    spec = build_graph(b.finish(), max_nodes=50, fold_loops=False)
    assert len(spec.nodes) == 50
    more = by_name(spec)["more"]
    assert texts(more)[0] == "… 253 more nodes"
    assert "only the 49 nodes nearest the root are drawn" in spec.subtitle


def test_iteration_selection_and_errors():
    b = DocBuilder()
    for _ in range(3):
        a = b.leaf("a", [2])
        b.backward(b.op("SumBackward", [b.op("ExpBackward", [a], [2])], []))
        b.next_iteration()
    doc = b.finish()
    assert build_graph(doc).title.endswith("iteration 2 · graph 2 · structure seen 3× · 3 nodes")
    assert "iteration 0 · graph 0" in build_graph(doc, iteration=0).title
    with pytest.raises(ValueError, match=r"no graph recorded in iteration 7 \(iterations with graphs: 0–2\)"):
        build_graph(doc, iteration=7)


def test_empty_trace_draws_a_note():
    spec = build_graph(DocBuilder().finish())
    assert spec.title == "model.py: no graph was recorded"
    assert [n.name for n in spec.nodes] == ["empty"]


def test_hook_sample_traced_for_real_draws_its_retained_graph_shaded():
    # Against the tracer's actual document, not a hand-built one: retain_graph=True, then y1.backward(...) frees
    # model1's nodes only, so each iteration's graph stays shaded with what model2's nodes still hold.
    from pathlib import Path

    from gradviz.cli.session import trace_script

    sample = Path(__file__).resolve().parent.parent / "samples" / "seed_hook_retain_graph.py"
    doc = trace_script(str(sample)).doc
    first = doc["structures"][0]["first_graph"]
    spec = build_graph(doc, graphs=[first])
    (cluster,) = [c for c in spec.clusters if c.fill == "#ececec"]
    assert cluster.rows[1].text.startswith("retained after backward: 4.8 KiB of saved tensors")
    assert doc["memory"]["series"][0]["retained_bytes"] == 4864       # the same figure the memory table shows


def test_a_nan_label_says_which_phase_made_it():
    """A node whose forward output was NaN/Inf says so; one whose backward produced the NaN/Inf gradient (its
    forward output finite) says that instead."""
    b = DocBuilder()
    a = b.leaf("a", [2])
    e = b.op("ExpBackward", [a], [2])
    s = b.op("SumBackward", [e], [])
    b.backward(s)
    doc = b.finish()
    ids = {n["op"]: n for n in doc["nodes"]}
    ids["ExpBackward"]["nonfinite"] = "forward"
    ids["SumBackward"]["nonfinite"] = "backward"
    rows = {n.doc_node: [r.text for r in n.rows] for n in build_graph(doc).nodes if n.doc_node is not None}
    assert rows[ids["ExpBackward"]["id"]][-1] == "NaN/Inf in output"
    assert rows[ids["SumBackward"]["id"]][-1] == "NaN/Inf in its gradient"


def test_asking_for_a_light_iteration_names_the_iterations_with_graphs_and_the_rerun():
    b = DocBuilder()
    for _ in range(3):
        a = b.leaf("a", [2])
        b.backward(b.op("SumBackward", [b.op("ExpBackward", [a], [2])], []))
        b.next_iteration()
    doc = b.finish()
    doc["script"] = "train.py"
    doc["schedule"] = {"mode": "light", "full": [{"first": 0, "last": 1, "why": "first"},
                                                 {"first": 2, "last": 2, "why": "sample"}]}
    doc["graphs"][1]["iteration"] = 8  # two ranges with graphs: 0, 2 and 8 (as a light run's samples)
    for node in doc["nodes"]:
        if node.get("graph") == doc["graphs"][1]["id"]:
            node["iteration"] = 8
    with pytest.raises(ValueError, match=r"no graph recorded in iteration 5 \(iterations with graphs: 0, 2, 8\); it "
                                         r"was a light iteration, watched but not recorded: `gradviz run "
                                         r"--trace-steps 5:5 train.py` records it"):
        build_graph(doc, iteration=5)
