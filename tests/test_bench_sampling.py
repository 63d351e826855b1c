"""How the benchmarks time their sides (lakehouse/bench/sampling.py): a warm-up that is not
counted, runs interleaved in alternating order, every run prepared first, medians, spreads and
ratios from the samples. Plain Python: no Spark."""

from __future__ import annotations

import statistics

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lakehouse.bench.sampling import Samples, Side, measure, median_of, order, ratio


def test_sides_run_interleaved_in_alternating_order_after_an_uncounted_warm_up() -> None:
    calls: list[tuple[str, str, int]] = []

    def side(name: str) -> Side:
        return Side(lambda i: calls.append(("run", name, i)) or f"{name}{i}",
                    lambda i: calls.append(("prepare", name, i)))

    said: list[str] = []
    out = measure({"a": side("a"), "b": side("b"), "c": side("c")}, 3, report=said.append)
    runs = [(n, i) for what, n, i in calls if what == "run"]
    assert runs == [("a", -1), ("b", -1), ("c", -1),
                    ("a", 0), ("b", 0), ("c", 0), ("c", 1), ("b", 1), ("a", 1), ("a", 2), ("b", 2), ("c", 2)]
    # every run is prepared just before it
    for k, call in enumerate(calls):
        if call[0] == "run":
            assert calls[k - 1] == ("prepare", call[1], call[2])
    assert {n: s.results for n, s in out.items()} == {n: [f"{n}0", f"{n}1", f"{n}2"] for n in "abc"}
    assert all(len(s.seconds) == 3 and min(s.seconds) >= 0 for s in out.values())
    assert said[:3] == ["a: warm-up", "b: warm-up", "c: warm-up"] and said[3] == "a: run 1 of 3"


def test_without_a_warm_up_only_the_timed_runs_happen_and_repeats_must_be_positive() -> None:
    runs: list[int] = []
    out = measure({"a": Side(runs.append)}, 2, warmup=False)
    assert runs == [0, 1] and len(out["a"].seconds) == 2
    with pytest.raises(ValueError, match="at least 1"):
        measure({"a": Side(runs.append)}, 0)


@given(st.lists(st.sampled_from("abcdef"), min_size=1, max_size=6, unique=True), st.integers(0, 20))
def test_each_round_runs_every_side_once(names: list[str], round_: int) -> None:
    got = order(names, round_)
    assert sorted(got) == sorted(names)
    assert got == (names if round_ % 2 == 0 else names[::-1])


@given(st.lists(st.floats(0.01, 100), min_size=1, max_size=9), st.lists(st.floats(0.01, 100), min_size=1, max_size=9))
def test_figures_follow_from_the_samples(a: list[float], b: list[float]) -> None:
    sa, sb = Samples(a), Samples(b)
    doc = sa.as_dict()
    assert doc["runs"] == len(a) and doc["median_s"] == round(statistics.median(a), 3)
    assert doc["min_s"] <= doc["median_s"] <= doc["max_s"]
    assert doc["spread"] == round((max(a) - min(a)) / statistics.median(a), 3)
    r = ratio(sa, sb)
    assert r["median"] == round(statistics.median(a) / statistics.median(b), 3)
    assert r["low"] is not None and r["high"] is not None and r["median"] is not None
    assert r["low"] <= r["median"] + 0.001 and r["median"] <= r["high"] + 0.001


def test_a_ratio_to_nothing_is_none_and_step_medians_count_a_missing_step_as_zero() -> None:
    assert ratio(Samples([1.0]), Samples([])) == {"median": None, "low": None, "high": None}
    assert median_of([{"stage": 1.0, "commit": 4.0}, {"stage": 3.0}, {"stage": 2.0, "commit": 2.0}]) == \
        {"stage": 2.0, "commit": 2.0}
    assert median_of([]) == {}
