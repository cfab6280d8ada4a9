"""The rules on small hand-built trace documents (docs/trace-format.md): no engine, no tracer."""

import json

import pytest

import gradviz
from gradviz.diagnose import diagnose, why_none
from gradviz.diagnose.graph_rules import growing
from gradviz.document import DocIndex


def loc(line, text=""):
    return {"file": "train.py", "line": line, "text": text, "function": "<module>"}


def variable(vid, **fields):
    v = {"id": vid, "name": None, "shape": [2], "dtype": "float32", "bytes": 8, "requires_grad": False,
         "is_leaf": True, "is_parameter": False, "origin": "new", "node": None, "accumulator": None, "source": None,
         "volatile": False, "grad_mode": True, "module": [], "location": loc(1), "graph": None, "iteration": 0}
    v.update(fields)
    return v


def node(nid, op, inputs=(), input_variables=(), outputs=(), **fields):
    n = {"id": nid, "op": op, "custom": False, "class_name": op, "inputs": [list(e) for e in inputs],
         "input_variables": list(input_variables), "outputs": list(outputs), "variable": None, "shape": [2],
         "dtype": "float32", "saved": [], "meta": {}, "module": [], "location": loc(1), "graph": 0,
         "freed_by": None, "nonfinite": None, "iteration": 0}
    n.update(fields)
    return n


def backward(bid, line, roots=(), root_nodes=(), **fields):
    b = {"id": bid, "iteration": 0, "roots": list(roots), "root_nodes": list(root_nodes), "retain_graph": False,
         "kind": "backward", "location": loc(line, "loss.backward()"), "visited": [], "grad_norms": {},
         "leaf_grad_norms": {}, "gradient_from": None, "error": None}
    b.update(fields)
    return b


def document(variables=(), nodes=(), backwards=(), events=(), memory=None):
    return {"format": "gradviz-trace", "version": 1, "status": {"completed": True, "exception": None},
            "variables": list(variables), "nodes": list(nodes), "graphs": [], "structures": [],
            "backwards": list(backwards), "events": list(events), "diagnostics": [],
            "memory": memory or {"peak_retained_bytes": 0, "final_retained_bytes": 0, "series": [], "graphs": []}}


def codes(doc):
    return [d["code"] for d in diagnose(doc)]


def test_empty_document_is_clean():
    assert diagnose(document()) == []


@pytest.mark.parametrize("values,expected", [
    ([0, 100, 200, 300, 400], True),
    ([5, 5, 5, 5, 5], False),
    ([0, 1, 1, 1, 1, 1, 1], False),
    ([10, 20, 10, 20, 10, 20], False),
    ([0, 10], False),
    ([1, 3, 4, 4, 5, 4, 4, 5, 4, 4, 5], False),  # three backward calls per loop: warm-up, then a repeating pattern
    ([0, 360, 0, 0, 360, 0, 0, 360, 0, 0, 360], False),
    ([1, 3, 4, 4, 5, 5, 5, 6, 6, 6, 7, 7], True),  # the same loop keeping one graph more every loop
    ([0, 0, 0, 0, 0, 0, 100, 100, 100], False),  # one jump is not growth
    ([1, 2, 3], False),  # a script that stopped in its second loop: too short to call a trend
])
def test_growing(values, expected):
    assert growing(values) is expected


def _param_doc(events, backwards):
    params = [variable(0, name="fc.weight", is_parameter=True, requires_grad=True, accumulator=0, origin="parameter"),
              variable(1, name="fc.bias", is_parameter=True, requires_grad=True, accumulator=1, origin="parameter")]
    nodes = [node(0, "AccumulateGrad", variable=0), node(1, "AccumulateGrad", variable=1),
             node(2, "AddmmBackward", inputs=[(1, 0), (0, 0)], input_variables=[1, 0], outputs=[2])]
    return document(params + [variable(2, origin="op", node=2, requires_grad=True, is_leaf=False)], nodes,
                    backwards, events)


def _step(eid, it, kind="step", line=9, seq=None):
    return {"id": eid, "seq": seq, "kind": "optimizer", "location": loc(line, f"opt.{kind}()"), "iteration": it,
            "event": kind, "optimizer": "SGD", "parameters": [0, 1]}


def test_grad_accumulation_across_steps():
    grads = {"0": 1.0, "1": 0.5}
    doc = _param_doc([_step(0, 0, seq=1), _step(1, 1, seq=4)],
                     [backward(0, 7, [2], [2], leaf_grad_norms=grads, visited=[2, 0, 1], seq=0),
                      backward(1, 7, [2], [2], leaf_grad_norms=grads, visited=[2, 0, 1], iteration=1, seq=3)])
    (d,) = diagnose(doc)
    assert (d["code"], d["location"]["line"], sorted(d["variables"])) == ("grad-accumulation", 7, [0, 1])
    assert d["related"][0]["location"]["line"] == 9
    # the same with a zero_grad between the first step and the second backward: clean
    doc["events"].insert(1, _step(2, 1, "zero_grad", line=5, seq=2))
    assert diagnose(doc) == []
    # ...but not when that zero_grad comes after the second step (seq orders them, not the list)
    doc["events"][1]["seq"] = 4.5
    assert [d["code"] for d in diagnose(doc)] == ["grad-accumulation"]
    # a reset between the second backward and the step that would use the sum: that step sums nothing
    # (zeroing before step is a mistake of its own, not an accumulation across steps)
    doc["events"][1]["seq"] = 3.5
    assert diagnose(doc) == []


def test_leftover_gradients_reset_before_their_next_step_are_not_accumulation():
    """A GAN: the generator's backward runs through the discriminator after the discriminator's step, and the
    discriminator's zero_grad() clears that before its next step. Nothing is summed into a step."""
    grads = {"0": 1.0, "1": 0.5}
    events = [_step(0, 0, seq=1), _step(1, 1, "zero_grad", line=3, seq=3), _step(2, 1, seq=5)]
    backwards = [backward(0, 7, [2], [2], leaf_grad_norms=grads, visited=[2, 0, 1], seq=0),
                 backward(1, 12, [2], [2], leaf_grad_norms=grads, visited=[2, 0, 1], seq=2),  # G's step
                 backward(2, 7, [2], [2], leaf_grad_norms=grads, visited=[2, 0, 1], iteration=1, seq=4)]
    doc = _param_doc(events, backwards)
    assert diagnose(doc) == []
    # without the zero_grad, the step at seq 5 uses D's gradient from before the first step: reported at the
    # backward that added to the stepped gradient, naming both steps
    doc["events"].pop(1)
    (d,) = diagnose(doc)
    assert (d["code"], d["location"]["line"]) == ("grad-accumulation", 12)
    assert [r["role"] for r in d["related"]] == ["previous optimizer step", "step that uses the sum"]
    assert d["message"].startswith("backward at line 12 adds to gradients already used by SGD.step() at line 9, "
                                   "and its next step there uses the sum: no zero_grad() between them")


def test_grad_accumulation_is_not_judged_across_iterations_left_out_of_the_document():
    """Only the first and last few iterations have full records: a step before the gap and a backward after it
    say nothing about the zero_grad calls in between."""
    grads = {"0": 1.0, "1": 0.5}
    doc = _param_doc([_step(0, 0, seq=1), _step(1, 9, seq=40)],
                     [backward(0, 7, [2], [2], leaf_grad_norms=grads, visited=[2, 0, 1], seq=0),
                      backward(1, 7, [2], [2], leaf_grad_norms=grads, visited=[2, 0, 1], iteration=9, seq=39)])
    assert diagnose(doc) == []
    doc["backwards"][1]["iteration"] = doc["events"][1]["iteration"] = 1  # consecutive: accumulated
    assert codes(doc) == ["grad-accumulation"]


def test_timeline_follows_seq_not_document_order():
    events = [{"id": 0, "kind": "optimizer", "event": "step", "iteration": 0, "seq": 5, "location": None},
              {"id": 1, "kind": "grad_read", "iteration": 0, "seq": 1, "location": None}]
    index = DocIndex(document(events=events, backwards=[backward(0, 3, seq=2)]))
    assert [kind for kind, _ in index.timeline()] == ["grad_read", "backward", "optimizer"]


def test_nan_inf_found_from_gradient_norms():
    nodes = [node(0, "MulBackward", outputs=[0], location=loc(3, "y = x * w")),
             node(1, "SqrtBackward", inputs=[(0, 0)], outputs=[1], location=loc(4, "r = y.sqrt()")),
             node(2, "SumBackward", inputs=[(1, 0)], outputs=[2], location=loc(5))]
    b = backward(0, 6, [2], [2], visited=[2, 1, 0], grad_norms={"2": 1.0, "1": 1.4, "0": "inf"})
    (d,) = diagnose(document(nodes=nodes, backwards=[b]))
    assert (d["code"], d["location"]["line"], d["nodes"]) == ("nan-inf", 4, [1])
    assert d["details"]["phase"] == "backward"


def test_stale_version_confirmed_by_the_failing_backward():
    nodes = [node(0, "SigmoidBackward", outputs=[0], location=loc(2, "y = x.sigmoid()"),
                  saved=[{"variable": None, "kind": "output", "index": 0, "shape": [2], "bytes": 8, "version": 0}])]
    event = {"id": 0, "kind": "inplace", "location": loc(3, "y.mul_(2)"), "iteration": 0, "variable": 0,
             "op": "MulBackward", "old_version": 0, "new_version": 1, "node": 1, "saved_by": [0]}
    failed = backward(0, 4, [0], [0], error={"type": "StaleVersionError", "message": "modified by an inplace "
                                                                                     "operation", "code": None})
    doc = document([variable(0, origin="op", node=0)], nodes, [failed], [event])
    (d,) = diagnose(doc)
    assert (d["code"], d["severity"], d["location"]["line"]) == ("stale-version", "error", 3)
    assert {r["role"]: r["location"]["line"] for r in d["related"]} == {"saved here": 2, "backward failed here": 4}
    doc["backwards"] = []
    (d,) = diagnose(doc)
    assert (d["code"], d["severity"]) == ("stale-version", "warning")
    # a graph no backward ever ran through, that died before the trace ended (a validation pass with grad on,
    # then an optimizer step): nothing could backward through it, so nothing will fail
    doc["graphs"] = [{"id": 0, "alive_at_end": False, "backwarded": False}]
    assert diagnose(doc) == []
    doc["graphs"][0]["alive_at_end"] = True
    assert codes(doc) == ["stale-version"]


def test_retained_graph_warns_on_growth_and_names_the_chaining_line():
    series = [{"iteration": i, "retained_bytes": 1000 * (i + 1), "graphs_alive": i + 1} for i in range(6)]
    nodes = [node(0, "MseLossBackward", iteration=0, location=loc(5)),
             node(1, "AddBackward", inputs=[(0, 0)], iteration=1, location=loc(8, "total += loss"))]
    doc = document(nodes=nodes, memory={"peak_retained_bytes": 6000, "final_retained_bytes": 6000,
                                        "series": series, "graphs": []})
    (d,) = diagnose(doc)
    assert (d["code"], d["severity"], d["location"]["line"]) == ("retained-graph", "warning", 8)
    assert "total += loss" in d["message"] and d["nodes"] == [1]
    doc["memory"]["series"] = [dict(s, retained_bytes=1000, graphs_alive=1) for s in series]
    assert diagnose(doc) == []


def test_exploding_grad_is_an_info():
    params = [variable(i, name=f"l{i}.weight", is_parameter=True, requires_grad=True, origin="parameter")
              for i in range(4)]
    norms = {"0": 1.0, "1": 2.0, "2": 5000.0, "3": 1.5}
    (d,) = diagnose(document(params, backwards=[backward(0, 9, leaf_grad_norms=norms)]))
    assert (d["code"], d["severity"], d["variables"]) == ("exploding-grad", "info", [2])


def test_duplicates_on_one_line_are_counted():
    v = variable(0, origin="op", node=0, is_leaf=False, requires_grad=True)
    reads = [{"id": i, "kind": "grad_read", "location": loc(7, "print(h.grad)"), "iteration": i, "variable": 0,
              "was_none": True, "is_leaf": False, "retains_grad": False} for i in range(3)]
    (d,) = diagnose(document([v], [node(0, "MulBackward", outputs=[0])], events=reads))
    assert (d["code"], d["count"], d["hint"][-len("(gradviz explain none-grad)"):]) == \
        ("none-grad", 3, "(gradviz explain none-grad)")


def test_why_none_unknown_variable_is_a_clear_error():
    with pytest.raises(ValueError, match="no Variable v7"):
        why_none(document([variable(0)]), 7)


def test_why_none_other_iteration():
    vs = [variable(0, requires_grad=True, accumulator=0), variable(1, origin="op", node=1, requires_grad=True,
                                                                  is_leaf=False, iteration=0)]
    nodes = [node(0, "AccumulateGrad", variable=0), node(1, "MulBackward", [(0, 0)], [0], [1], iteration=0)]
    b = backward(0, 9, iteration=3)
    answer = why_none(document(vs, nodes, [b]), 0)
    assert answer["cause"] == "other-iteration" and answer["break"]["node"] == 0


def test_diagnose_reads_a_saved_document(tmp_path):
    """The same answers from report.json as from the live trace (pure functions of the document)."""
    with gradviz.trace() as tr:
        x = gradviz.randn(4, requires_grad=True)
        h = x * 2
        h.sum().backward()
        h.grad  # noqa: B018 - the mistake under test
    path = tr.to_json(tmp_path / "t.json")
    loaded = json.loads(path.read_text())
    assert codes(loaded) == codes(tr.to_dict()) == ["none-grad"]
