"""A node's ``input_variables`` name, at each position, the variable that its input at that position carries, even
when the op's node takes its arguments in another order: ``F.linear(x, W, b)`` builds ``AddmmBackward0`` over
(b, x, W's transpose) once ``x`` requires grad."""

import pytest

torch = pytest.importorskip("torch")

import torch.nn.functional as F  # noqa: E402

import gradviz  # noqa: E402

pytestmark = pytest.mark.oracle


def _addmm_inputs(x_requires_grad):
    W = torch.randn(3, 4, requires_grad=True)
    b = torch.randn(3, requires_grad=True)
    x0 = torch.randn(2, 4, requires_grad=x_requires_grad)
    with gradviz.trace(engine="torch") as tr:
        x = x0 * 2
        y = F.linear(x, W, b)
        y.sum().backward()
    doc = tr.to_dict()
    names = {v["id"]: v["name"] for v in doc["variables"]}
    (addmm,) = [n for n in doc["nodes"] if n["op"] == "AddmmBackward0"]
    return [None if i is None else names[i] for i in addmm["input_variables"]], len(addmm["inputs"])


def test_linear_on_an_input_that_requires_grad_names_bias_input_and_weight_in_the_nodes_order():
    assert _addmm_inputs(True) == (["b", "x", "W"], 3)


def test_linear_on_an_input_without_grad_names_the_same_positions():
    variables, inputs = _addmm_inputs(False)
    assert inputs == 3 and variables[0] == "b" and variables[2] == "W"
