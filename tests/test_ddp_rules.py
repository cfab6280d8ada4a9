"""``diagnose_job`` as a pure function of hand-made rank documents, the ``ddp`` section's bounds and schema, and
``gradviz explain`` for the DDP codes."""

import copy

import pytest
from click.testing import CliRunner

from gradviz.cli import main
from gradviz.diagnose.ddp_rules import diagnose_job
from gradviz.document import TraceFormatError, validate
from gradviz.tracing.builder import TraceBuilder
from gradviz.tracing.ddp_facts import KEEP, DdpFacts


def loc(line, text="", file="train.py"):
    return {"file": file, "line": line, "text": text, "function": "forward"}


PARAMS = ["model.module.a.weight", "model.module.b.weight"]
OWNERS = {"model.module.a.weight": "model.module.a", "model.module.b.weight": "model.module.b"}


def rank_doc(rank=None, *, unused=(), find_unused=False, grads=None, accumulation=None, errors=(), forwards=3,
             graphs=(), nodes=(), structures=()):
    ddp = {
        "process": None if rank is None else {"rank": rank, "world_size": 2, "backend": "gloo"},
        "modules": [{"path": "model", "find_unused_parameters": find_unused, "static_graph": False,
                     "parameters": list(PARAMS), "owners": dict(OWNERS),
                     "call_sites": {"model.module.a": loc(10), "model.module.b": loc(12, "h = self.b(h)")}}],
        "forwards": [], "forward_count": forwards + 1, "backward_count": forwards,  # one evaluation forward
        "steps": [{"step": 0, "iteration": 0, "location": loc(30, "opt.step()"), "optimizer": "SGD", "micro": [],
                   "gradients": grads or {p: [1.0, 0.5] for p in PARAMS}}],
        "step_count": 1,
        "unused": [{"module": "model", "parameter": p, "count": c, "first_forward": 0, "iteration": 0,
                    "location": loc(25, "out = model(x)"), "owner_called": False} for p, c in unused],
        "accumulation": accumulation or {"steps": 1, "unsynchronised_micro_steps": 0, "extra_syncs": 0,
                                         "first": None},
        "errors": list(errors),
    }
    return {"ddp": ddp, "graphs": list(graphs), "nodes": list(nodes), "structures": list(structures),
            "variables": []}


def test_no_ddp_section_no_diagnostic():
    assert diagnose_job([{"graphs": []}, {"graphs": []}]) == []
    assert diagnose_job([]) == []


def test_skipped_on_one_rank_without_find_unused_is_an_error_at_the_call_site():
    docs = [rank_doc(0), rank_doc(1, unused=[("model.module.b.weight", 1)])]
    [d] = diagnose_job(docs)
    assert d["code"] == "ddp-unused-parameters" and d["severity"] == "error"
    assert d["location"] == loc(12, "h = self.b(h)")
    assert d["details"]["ranks"] == [1] and d["details"]["parameters"] == ["model.module.b.weight"]
    assert "find_unused_parameters=True" in d["hint"] and d["hint"].endswith("(gradviz explain ddp-unused-parameters)")
    assert d["related"] == [{"role": "DDP forward", "location": loc(25, "out = model(x)")}]


def test_with_find_unused_parameters_a_branch_is_info_and_never_used_is_a_warning():
    sometimes = [rank_doc(0, find_unused=True), rank_doc(1, find_unused=True, unused=[("model.module.b.weight", 1)])]
    [d] = diagnose_job(sometimes)
    assert d["severity"] == "info" and d["details"]["never_used"] is False
    never = [rank_doc(r, find_unused=True, unused=[("model.module.b.weight", 3)]) for r in (0, 1)]
    [d] = diagnose_job(never)
    assert d["severity"] == "warning" and d["details"]["never_used"] is True
    assert d["details"]["ranks"] == [0, 1]
    assert "Remove the layer" in d["hint"]


def test_a_layer_no_rank_calls_is_placed_at_the_ddp_call_and_said_so():
    docs = [rank_doc(r, find_unused=True, unused=[("model.module.b.weight", 3)]) for r in (0, 1)]
    for doc in docs:
        del doc["ddp"]["modules"][0]["call_sites"]["model.module.b"]
    [d] = diagnose_job(docs)
    assert d["location"] == loc(25, "out = model(x)")
    assert "no rank ever called `model.module.b` in forward" in d["message"]
    assert d["severity"] == "warning"


def test_a_layer_called_whose_output_missed_the_loss_is_said_so():
    docs = [rank_doc(0), rank_doc(1, unused=[("model.module.b.weight", 1)])]
    docs[1]["ddp"]["unused"][0]["owner_called"] = True
    [d] = diagnose_job(docs)
    assert "`model.module.b` was called at train.py:12 but its output did not reach the loss" in d["message"]


def test_ranks_come_from_the_process_section_not_the_list_order():
    docs = [rank_doc(1, unused=[("model.module.b.weight", 1)]), rank_doc(0)]
    assert diagnose_job(docs)[0]["details"]["ranks"] == [1]
    unnamed = [rank_doc(None), rank_doc(None, unused=[("model.module.b.weight", 1)])]
    assert diagnose_job(unnamed)[0]["details"]["ranks"] == [1]  # no process section: the list's order
    dist_style = copy.deepcopy(unnamed)
    dist_style[0]["process"], dist_style[1]["process"] = {"rank": 3}, {"rank": 2}
    assert diagnose_job(dist_style)[0]["details"]["ranks"] == [2]


def test_pytorchs_reduction_error_alone_still_names_the_parameters():
    error = {"module": "model", "forward": 1, "iteration": 1, "location": loc(25, "out = model(x)"),
             "message": "Expected to have finished reduction in the prior iteration before starting a new one.",
             "rank": 1, "parameters": ["model.module.a.weight"]}
    [d] = diagnose_job([rank_doc(0), rank_doc(1, errors=[error])])
    assert d["details"]["parameters"] == ["model.module.a.weight"]
    assert d["details"]["reduction_error_rank"] == 1
    assert d["location"] == loc(10)  # where model.module.a is called
    assert "rank 1 raised it at train.py:25" in d["message"]


def test_gradients_equal_or_within_rounding_are_not_a_mismatch():
    same = {p: [1.0, 0.5] for p in PARAMS}
    close = {p: [1.0 + 1e-9, 0.5] for p in PARAMS}
    assert diagnose_job([rank_doc(0, grads=same), rank_doc(1, grads=close)]) == []


def test_a_wrapped_parameter_differing_after_the_all_reduce():
    other = {PARAMS[0]: [1.0, 0.5], PARAMS[1]: [2.0, 0.5]}
    [d] = diagnose_job([rank_doc(0), rank_doc(1, grads=other)])
    assert d["code"] == "ddp-grad-mismatch" and d["severity"] == "error"
    assert d["details"]["parameters"] == [PARAMS[1]] and d["details"]["not_wrapped"] == []
    assert d["details"]["norms"] == {PARAMS[1]: {"0": 1.0, "1": 2.0}}
    assert "after DDP's all-reduce" in d["message"]
    assert d["location"] == loc(30, "opt.step()")  # no op used it in the document: the step's line
    assert d["details"]["groups"] == [[0], [1]]


def test_a_mismatch_on_one_rank_of_four_groups_the_others():
    same = {p: [1.0, 0.5] for p in PARAMS}
    docs = [rank_doc(r, grads=same if r != 2 else {**same, PARAMS[0]: [3.0, 0.5]}) for r in range(4)]
    [d] = diagnose_job(docs)
    assert d["details"]["groups"] == [[0, 1, 3], [2]] and d["details"]["parameters"] == [PARAMS[0]]


def test_an_unwrapped_parameter_is_located_at_its_first_use():
    grads = [{**{p: [1.0, 0.5] for p in PARAMS}, "head.weight": [float(r + 1), 0.1]} for r in (0, 1)]
    docs = [rank_doc(r, grads=grads[r]) for r in (0, 1)]
    docs[0]["variables"] = [{"id": 7, "name": "head.weight"}]
    docs[0]["nodes"] = [{"id": 3, "op": "AddmmBackward0", "input_variables": [5, 7], "location": loc(40, "head(h)")}]
    [d] = diagnose_job(docs)
    assert d["details"]["not_wrapped"] == ["head.weight"] and d["location"] == loc(40, "head(h)")
    assert "not in any DDP module" in d["message"]


def test_accumulation_reported_once_for_the_ranks_sharing_the_line():
    first = {"module": "model", "backwards": 4, "synced": 4, "location": loc(25, "loss = model(x)"), "step": 0,
             "iteration": 0, "step_location": loc(30, "opt.step()")}
    acc = {"steps": 2, "unsynchronised_micro_steps": 0, "extra_syncs": 6, "first": first}
    [d] = diagnose_job([rank_doc(0, accumulation=acc), rank_doc(1, accumulation=acc)])
    assert d["code"] == "ddp-accumulate-without-no-sync"
    assert d["location"] == loc(25, "loss = model(x)")
    assert d["details"]["ranks"] == [0, 1] and d["details"]["extra_all_reduces"] == 6
    assert "first 3 micro-steps" in d["hint"]


def _graph_docs(ops_by_rank, shapes_by_rank=None):
    docs = []
    for rank, ops in enumerate(ops_by_rank):
        nodes = [{"id": i, "op": op, "location": loc(line), "shape": [2]} for i, (op, line) in enumerate(ops)]
        sig = "s" + "".join(op for op, _ in ops) + str((shapes_by_rank or {}).get(rank, ""))
        graph = {"id": 0, "iteration": 0, "structure": 0, "nodes": [n["id"] for n in nodes]}
        docs.append(rank_doc(rank, graphs=[graph], nodes=nodes, structures=[{"id": 0, "signature": sig}]))
    return docs


def test_divergent_graph_points_at_the_line_only_some_ranks_ran():
    base = [("AddmmBackward0", 10), ("ReluBackward0", 10)]
    docs = _graph_docs([base + [("MeanBackward0", 20)],
                        base + [("SigmoidBackward0", 15), ("MulBackward0", 15), ("MeanBackward0", 20)]])
    [d] = diagnose_job(docs)
    assert d["code"] == "ddp-divergent-graph" and d["location"]["line"] == 15
    assert d["details"]["groups"] == [[0], [1]] and d["details"]["first_difference"] == 2


def test_a_branch_taken_once_beyond_the_kept_iterations_is_found_from_the_structures():
    base = [("AddmmBackward0", 10), ("MeanBackward0", 20)]
    docs = _graph_docs([base, base])  # iteration 0, kept on both ranks, the same
    for doc in docs:
        doc["structures"][0].update({"iterations": [0, 999], "count": 1000, "first_graph": 0})
    # rank 1 took a branch once, in iteration 500: a structure of its own, whose first graph is kept; rank 0's
    # graph of iteration 500 was dropped (only its structure's count says it was there)
    extra = [{"id": 20, "op": "AddmmBackward0", "location": loc(10), "shape": [2]},
             {"id": 21, "op": "SigmoidBackward0", "location": loc(15), "shape": [2]},
             {"id": 22, "op": "MeanBackward0", "location": loc(20), "shape": []}]
    docs[1]["nodes"] += extra
    docs[1]["graphs"].append({"id": 5, "iteration": 500, "structure": 1, "nodes": [20, 21, 22], "backwarded": True})
    docs[1]["structures"].append({"id": 1, "signature": "branch", "iterations": [500, 500], "count": 1,
                                  "first_graph": 5})
    docs[1]["structures"][0]["count"] = 999
    [d] = diagnose_job(docs)
    assert d["code"] == "ddp-divergent-graph"
    assert (d["details"]["iteration"], d["location"]["line"], d["details"]["groups"]) == (500, 15, [[0], [1]])


def test_a_graph_no_backward_ran_through_is_not_compared():
    base = [("AddmmBackward0", 10), ("MeanBackward0", 20)]
    docs = _graph_docs([base, base])
    metric = [{"id": 9, "op": "SumBackward0", "location": loc(50), "shape": []}]
    docs[0]["nodes"] += metric
    docs[0]["graphs"].append({"id": 1, "iteration": 0, "structure": 1, "nodes": [9], "backwarded": False})
    docs[0]["structures"].append({"id": 1, "signature": "metric"})
    assert diagnose_job(docs) == []
    docs[0]["graphs"][1]["backwarded"] = True
    assert diagnose_job(docs)[0]["location"]["line"] == 50


def test_graphs_differing_in_shapes_only_are_not_divergent():
    ops = [("AddmmBackward0", 10), ("MeanBackward0", 20)]
    assert diagnose_job(_graph_docs([ops, ops], shapes_by_rank={1: "[3]"})) == []


def test_ddp_facts_keep_both_ends_and_summarise_everything():
    facts = DdpFacts()
    facts.add("module", {"path": "model", "find_unused_parameters": False, "static_graph": False,
                         "parameters": list(PARAMS), "owners": dict(OWNERS)}, 0)
    for i in range(100):
        facts.add("forward", {"module": "model", "forward": i, "synced": True, "location": None, "backward": True,
                              "unused": [PARAMS[1]] if i % 2 else [], "skipped": ["model.module.b"] if i % 2 else []},
                  i)
    section = facts.section(lambda x: x)
    assert section["forward_count"] == 100 and len(section["forwards"]) == 2 * KEEP
    assert [f["forward"] for f in section["forwards"]][KEEP - 1:KEEP + 1] == [KEEP - 1, 100 - KEEP]
    assert section["unused"] == [{"module": "model", "parameter": PARAMS[1], "count": 50, "first_forward": 1,
                                  "iteration": 1, "location": None, "owner_called": False}]


def test_ddp_section_is_absent_without_ddp_and_checked_by_the_schema():
    assert "ddp" not in TraceBuilder().document(with_diagnostics=False)
    b = TraceBuilder()
    b.ddp("process", {"rank": 0, "world_size": 2, "backend": "gloo"})
    b.ddp("module", {"path": "model", "find_unused_parameters": False, "static_graph": False, "parameters": ["p"],
                     "owners": {"p": "model.module"}})
    doc = b.document(with_diagnostics=False)
    validate(doc)
    assert doc["ddp"]["process"]["rank"] == 0 and doc["ddp"]["modules"][0]["call_sites"] == {}
    doc["ddp"]["modules"][0]["parameters"] = "p"
    with pytest.raises(TraceFormatError, match=r"^ddp\.modules\[0\]\.parameters: expected a list$"):
        validate(doc)


@pytest.mark.parametrize("code", ["ddp-unused-parameters", "ddp-divergent-graph", "ddp-accumulate-without-no-sync",
                                  "ddp-grad-mismatch"])
def test_gradviz_explain_prints_the_ddp_codes(code):
    result = CliRunner().invoke(main, ["explain", code])
    assert result.exit_code == 0
    assert result.output.startswith(f"{code} (")
    listing = CliRunner(env={"COLUMNS": "200"}).invoke(main, ["explain"]).output
    assert code in listing
