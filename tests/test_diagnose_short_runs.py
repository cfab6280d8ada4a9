"""A run of three iterations (Lightning's ``max_steps=3``): a line chaining each iteration's graph to the next is
named, while three points of a growing count with no such line are still too few to call a trend."""

import os
from functools import partial

import gradviz
import gradviz.nn as nn

from .marked_lines import marked_line

HERE = os.path.abspath(__file__)
_line_of = partial(marked_line, HERE)  # a line of this file, by its marker comment


def _loop(keep):
    gradviz.manual_seed(0)
    model = nn.Linear(4, 1)
    opt = gradviz.optim.SGD(model.parameters(), lr=0.1)
    x, y = gradviz.randn(8, 4), gradviz.randn(8, 1)
    total, kept = 0, []
    with gradviz.trace() as tr:
        for _ in range(3):
            opt.zero_grad()
            loss = ((model(x) - y) ** 2).mean()
            if keep == "chain":  # as in a Lightning training_step, before backward
                total += loss  # chains the three graphs
            else:
                kept.append(loss)
            loss.backward()
            opt.step()
    return tr.to_dict()


def test_three_iterations_chained_by_one_line_are_a_retained_graph_at_that_line():
    doc = _loop("chain")
    assert [(d["code"], d["severity"], d["location"]["line"]) for d in doc["diagnostics"]] == [
        ("retained-graph", "warning", _line_of("# chains the three graphs"))]
    alive = [s["graphs_alive"] for s in doc["memory"]["series"]]
    assert len(alive) == 3 and alive[0] < alive[1] < alive[2]


def test_three_iterations_kept_in_a_list_are_too_few_to_call_a_trend():
    doc = _loop("list")
    alive = [s["graphs_alive"] for s in doc["memory"]["series"]]
    assert len(alive) == 3 and alive[0] < alive[1] < alive[2]
    assert doc["diagnostics"] == []
