"""The optimizer watch's scheduler wrappers (tracing/adapters/optimizer_watch.py): made once per engine, not at
every trace start (a loop that traces each step paid ~300 calls a start for them), installed only while a trace
runs, and still reporting each user's ``step()`` to the trace that is running."""

import gradviz
import gradviz.nn as nn
from gradviz.optim import SGD, lr_scheduler


def _traced_steps(steps):
    model = nn.Linear(2, 1)
    opt = SGD(model.parameters(), lr=0.5)
    with gradviz.trace() as tr:
        sched = lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
        wrappers = (lr_scheduler.LRScheduler.__init__, lr_scheduler.LRScheduler.step, lr_scheduler.StepLR.__init__)
        for _ in range(steps):
            opt.zero_grad()
            model(gradviz.ones(1, 2)).sum().backward()
            opt.step()
            sched.step()
    return list(tr.builder.training.schedulers.values()), wrappers


def test_the_wrappers_are_made_once_and_removed_when_the_trace_stops():
    originals = (vars(lr_scheduler.LRScheduler)["__init__"], vars(lr_scheduler.LRScheduler)["step"],
                 vars(lr_scheduler.StepLR)["__init__"])
    _, first = _traced_steps(1)
    _, second = _traced_steps(1)
    assert first == second  # the same wrapper objects: nothing made at the second start
    assert [w.__wrapped__ for w in first] == list(originals)
    after = (vars(lr_scheduler.LRScheduler)["__init__"], vars(lr_scheduler.LRScheduler)["step"],
             vars(lr_scheduler.StepLR)["__init__"])
    assert after == originals


def test_each_trace_still_hears_the_users_scheduler_steps():
    for steps in (2, 3):  # a second trace, with the wrappers made by the first
        [scheduler], _ = _traced_steps(steps)
        assert scheduler["class"] == "StepLR" and scheduler["steps"] == steps, scheduler
