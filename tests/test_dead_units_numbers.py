"""dead-relu's facts in the tracing layer are plain numbers: the torch adapter holds each ReLU call's count of live
units (a device tensor) until the iteration's counts are read together, and hands ``DeadUnits`` the numbers."""

import pytest

import gradviz

torch = pytest.importorskip("torch")


def _tensors_in(value, seen=None):
    """Every torch tensor reachable from ``value`` through dicts, lists, tuples, sets and objects' __dict__."""
    seen = set() if seen is None else seen
    if id(value) in seen:
        return []
    seen.add(id(value))
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, dict):
        items = list(value.keys()) + list(value.values())
    elif isinstance(value, (list, tuple, set, frozenset)):
        items = list(value)
    elif hasattr(value, "__dict__") and not callable(value):
        items = list(vars(value).values())
    else:
        return []
    return [t for item in items for t in _tensors_in(item, seen)]


def test_dead_units_holds_numbers_and_the_adapter_the_unread_counts():
    torch.manual_seed(0)
    fc = torch.nn.Linear(4, 8)
    with torch.no_grad():
        fc.bias.fill_(-100.0)  # every unit dead
    opt = torch.optim.SGD(fc.parameters(), lr=0.0)
    x = torch.randn(16, 4)
    with gradviz.trace(engine="torch") as tr:
        for _ in range(3):
            opt.zero_grad()
            torch.relu(fc(x)).sum().backward()
            opt.step()
        adapter = tr.adapters[0]
        dead = adapter.builder.training.dead_units
        assert _tensors_in(dead) == []
        entry, = dead.relus.values()  # iterations 1 and 2, read when the next one's first count came
        assert (entry["calls"], entry["iterations"], entry["mostly_dead"]) == (2, 2, 2)
        pending = adapter.relu_counts.pending
        assert len(pending) == 1 and isinstance(pending[0][5], torch.Tensor)  # the last iteration's, unread
    doc = tr.to_dict()
    found, = doc["training"]["dead_relu"]
    assert (found["calls"], found["iterations"], found["mostly_dead"], found["units"]) == (3, 3, 3, 8)
    assert adapter.relu_counts.pending == []
