"""The document contract (gradviz.document): one vocabulary for every engine, and the re-exports that keep the
old import paths working."""

import pytest

import gradviz
from gradviz import document
from gradviz.diagnose import diagnose
from gradviz.diagnose.catalogue import CODES

from .test_diagnose_rules import _param_doc, _step, backward, loc, variable


@pytest.mark.parametrize("name,normal", [
    ("MulBackward0", "MulBackward"), ("AddmmBackward0", "AddmmBackward"), ("FillBackward3", "FillBackward"),
    ("MulBackward", "MulBackward"), ("torch::autograd::AccumulateGrad", "AccumulateGrad"),
    ("AccumulateGrad", "AccumulateGrad"), ("MyFnBackward", "MyFnBackward"), ("CppFunction", "CppFunction"),
    ("Backward0Thing", "Backward0Thing"), (None, None), ("", ""),
])
def test_op_names_normalise_across_engines(name, normal):
    assert document.normalise_op(name) == normal


def test_accumulators_and_resets_by_either_engines_name():
    for op in ("AccumulateGrad", "torch::autograd::AccumulateGrad"):
        assert document.is_accumulate_grad({"op": op})
    assert not document.is_accumulate_grad({"op": "AddBackward0"}) and not document.is_accumulate_grad(None)
    for op in ("FillBackward", "FillBackward0", "FillBackward2", "ZeroBackward0", "ZeroBackward"):
        assert document.is_reset_op({"op": op}), op
    for op in ("MulBackward0", "AddBackward", None, "Filler", "ZeroPadBackward0"):
        assert not document.is_reset_op({"op": op}), op


def test_severities_are_ordered_once_for_everyone():
    assert document.SEVERITIES == ("error", "warning", "info")
    ranks = [document.severity_rank(s) for s in document.SEVERITIES]
    assert ranks == sorted(ranks, reverse=True) and min(ranks) > document.severity_rank("bogus") == 0
    assert document.severity_rank(None) == 0
    assert gradviz.diagnose.SEVERITIES is document.SEVERITIES
    assert {severity for severity, _ in CODES.values()} <= set(document.SEVERITIES)


def test_error_codes_by_type_message_or_recorded_code():
    assert document.error_code({"type": "StaleVersionError", "message": ""}) == "stale-version"
    # real PyTorch raises RuntimeError: its wording identifies the case
    torch_text = ("one of the variables needed for gradient computation has been modified by an inplace "
                  "operation: [torch.FloatTensor [3]] is at version 1; expected version 0 instead.")
    assert document.error_code({"type": "RuntimeError", "message": torch_text}) == "stale-version"
    assert document.error_code(RuntimeError("Trying to backward through the graph a second time")) == "graph-freed"
    assert document.error_code({"type": "X", "message": "?", "code": "leaf-inplace"}) == "leaf-inplace"
    assert document.error_code({"type": "ValueError", "message": "bad"}) is None
    assert document.error_code(None) is None
    assert set(document.ERROR_CODES.values()) <= set(CODES)
    assert {code for _, code in document.ERROR_MESSAGES} <= set(CODES)


def test_origins_cover_what_the_rules_read():
    assert set(document.CUT_ORIGINS) <= set(document.ORIGINS)
    assert {"op", "new", "factory", "data", "detach", "parameter", "grad", "external"} <= set(document.ORIGINS)


def test_the_tracer_records_the_contracts_error_code():
    with gradviz.trace() as tr:
        x = gradviz.randn(3, requires_grad=True)
        y = x * 2
        with pytest.raises(RuntimeError):
            y.backward()
    (b,) = tr.to_dict()["backwards"]
    assert b["error"]["code"] == "nonscalar-backward" == document.error_code(b["error"])


@pytest.mark.parametrize("reset_op", ["FillBackward", "ZeroBackward0", "FillBackward2"])
def test_a_grad_zeroed_in_place_is_a_reset_under_either_engines_name(reset_op):
    # p.grad.zero_() between step and the next backward: clean, whichever engine named the in-place op
    grads = {"0": 1.0, "1": 0.5}
    reset = [{"id": 10 + p, "seq": 2, "kind": "inplace", "location": loc(5, "p.grad.zero_()"), "iteration": 1,
              "variable": 3 + p, "op": reset_op, "old_version": 0, "new_version": 1, "node": None, "saved_by": []}
             for p in (0, 1)]
    doc = _param_doc([_step(0, 0, seq=1), *reset, _step(1, 1, seq=4)],
                     [backward(0, 7, [2], [2], leaf_grad_norms=grads, visited=[2, 0, 1], seq=0),
                      backward(1, 7, [2], [2], leaf_grad_norms=grads, visited=[2, 0, 1], iteration=1, seq=3)])
    doc["variables"] += [variable(3 + p, origin="grad", source=p) for p in (0, 1)]
    assert diagnose(doc) == []
    for event in reset:
        event["op"] = "MulBackward0"  # any other in-place op leaves the sum in place
    assert [d["code"] for d in diagnose(doc)] == ["grad-accumulation"]


def test_old_import_paths_still_work():
    from gradviz.tracing import TraceDocument, TraceFormatError, load_trace, validate

    assert load_trace is document.load_trace is gradviz.load_trace
    assert (TraceFormatError, validate, TraceDocument) == (document.TraceFormatError, document.validate,
                                                           document.TraceDocument)
