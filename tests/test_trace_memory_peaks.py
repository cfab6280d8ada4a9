"""Each memory.series point carries the highest retained bytes since the point before it: an iteration's peak
comes before its backward and its point after, so without it a loop that backwards every iteration shows 0 at
every point (report.html's chart was a flat zero on every real run)."""

import gradviz
from gradviz import nn


def series_of(tr):
    return tr.to_dict()["memory"]


def test_each_point_has_its_iterations_peak_and_the_highest_is_the_runs():
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 1))
    with gradviz.trace() as tr:
        seen = []
        for i in range(6):
            x = gradviz.randn(64 if i == 3 else 8, 16)     # iteration 3 saves 8x more
            loss = model(x).pow(2).mean()
            seen.append(tr.stats["retained_bytes"])          # just before backward: the iteration's high
            loss.backward()
    memory = series_of(tr)
    points = memory["series"]
    assert [p["retained_bytes"] for p in points] == [0] * 6      # every backward freed its graph
    assert [p["peak_retained_bytes"] for p in points] == seen
    assert max(seen) == seen[3] == memory["peak_retained_bytes"] > 8 * seen[0] - 1


def test_a_total_loss_leak_shows_each_iterations_peak_and_the_graphs_it_keeps():
    model = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 1))
    x = gradviz.randn(64, 10)
    with gradviz.trace() as tr:
        total = 0
        for _ in range(5):
            loss = model(x).pow(2).mean()
            loss.backward()
            total += loss
    memory = series_of(tr)
    points = memory["series"]
    assert {p["retained_bytes"] for p in points} == {0}
    # five iterations, then the state when the trace stopped (`total += loss` after the last backward: nothing held)
    assert [p["peak_retained_bytes"] for p in points] == [memory["peak_retained_bytes"]] * 5 + [0]
    assert memory["peak_retained_bytes"] > 0
    alive = [p["graphs_alive"] for p in points]
    assert alive == sorted(alive) and alive[-1] > alive[0]


def test_thinning_the_series_keeps_the_peak_of_the_points_it_drops():
    from gradviz.tracing.grouping import SERIES_LIMIT

    w = gradviz.randn(4, requires_grad=True)
    with gradviz.trace() as tr:
        for i in range(SERIES_LIMIT + 200):
            n = 4000 if i == 777 else 4                     # one odd iteration saves much more
            (gradviz.ones(n) * w.sum()).exp().sum().backward()
    memory = series_of(tr)
    points = memory["series"]
    assert tr.to_dict()["dropped"]["series_points"] > 0 and len(points) < SERIES_LIMIT
    assert max(p["peak_retained_bytes"] for p in points) == memory["peak_retained_bytes"]
    assert not any(p["iteration"] == 777 for p in points)  # its own point was thinned away, its peak kept
