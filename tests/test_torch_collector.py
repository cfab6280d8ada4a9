"""While a torch trace is attached, the cyclic collector is asked to do less (docs/torch-backend.md): what
existed at attach is frozen out of its sight and the young generations are collected less often. Both are put
back at detach, and a program's own settings win."""

import gc

import pytest

torch = pytest.importorskip("torch")

import gradviz  # noqa: E402


@pytest.fixture
def collector():
    before = gc.get_threshold(), gc.isenabled()
    gc.set_threshold(700, 10, 10)
    yield
    gc.set_threshold(*before[0])
    (gc.enable if before[1] else gc.disable)()


def _work():
    x = torch.ones(3, requires_grad=True)
    (x * 2).sum().backward()


def test_thresholds_raised_while_attached_and_restored(collector):
    seen = {}
    with gradviz.trace(engine="torch"):
        seen["inside"] = gc.get_threshold()
        seen["frozen"] = gc.get_freeze_count()
        _work()
    assert seen["inside"] == (2000, 50, 10)
    assert seen["frozen"] > 0
    assert gc.get_threshold() == (700, 10, 10)
    assert gc.get_freeze_count() == 0


def test_higher_thresholds_of_the_program_are_kept(collector):
    gc.set_threshold(5000, 100, 20)
    with gradviz.trace(engine="torch"):
        assert gc.get_threshold() == (5000, 100, 20)
        _work()
    assert gc.get_threshold() == (5000, 100, 20)


def test_a_change_made_during_the_trace_stays(collector):
    with gradviz.trace(engine="torch"):
        gc.set_threshold(300, 5, 5)  # the program's own choice, made while traced
        _work()
    assert gc.get_threshold() == (300, 5, 5)


def test_collector_off_is_left_alone(collector):
    gc.disable()
    with gradviz.trace(engine="torch"):
        assert gc.get_threshold() == (700, 10, 10) and gc.get_freeze_count() == 0
        _work()
    assert not gc.isenabled() and gc.get_threshold() == (700, 10, 10)


def test_compiling_a_module_while_traced_gives_no_warning_about_our_hooks():
    """torch.compile(module) warns about global module hooks: ours while attached, so silenced then (the filter
    is gone again at stop)."""
    import warnings

    model = torch.nn.Linear(2, 2)
    before = list(warnings.filters)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with gradviz.trace(engine="torch"):
            compiled = torch.compile(model)
            out = compiled(torch.ones(1, 2))  # (the warning comes with the first call)
    assert torch.allclose(out, model(torch.ones(1, 2)))
    assert not [w for w in caught if "global hooks on modules" in str(w.message)], [str(w.message) for w in caught]
    assert warnings.filters == before
