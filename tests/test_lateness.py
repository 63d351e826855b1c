"""Pure tests of the lateness profile (lakehouse/lateness/core.py), the loads ledger
(lakehouse/stream/ledger.py), the archive's cutoff history (delta-rs, no Spark) and the plot.

Arrivals are drawn from known delay distributions (exponential, uniform): the percentiles land
where the distribution puts them, the suggested delay covers at least the fraction and one unit
less does not.
"""

from __future__ import annotations

import datetime as dt
import json
import math
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lakehouse import output
from lakehouse.lateness.core import (
    Arrivals,
    Distribution,
    check_fraction,
    format_delay,
    human,
    label,
    late_path,
    lateness_seconds,
    profile,
    round_up,
    suggest_delay,
    unit_for,
)
from lakehouse.stream import ledger
from lakehouse.warehouse import TablePaths

US = 1_000_000
T0 = 1_795_000_000  # an epoch second in 2026
FRACTIONS = st.sampled_from([0.5, 0.9, 0.95, 0.99, 0.995, 0.999, 1.0])


def brute_quantile(values: list[int], q: float) -> int:
    """The smallest v with at least a share q of the values <= v (by counting; exact fractions)."""
    from fractions import Fraction

    need = Fraction(str(q)) * len(values)
    return min(v for v in set(values) if sum(1 for x in values if x <= v) >= need)


# -- quantiles and the suggestion --------------------------------------------------------------


@given(st.lists(st.integers(-100, 10_000), min_size=1, max_size=200), FRACTIONS)
def test_quantile_is_the_inverted_cdf(values: list[int], q: float) -> None:
    assert Distribution.of(values).quantile(q) == brute_quantile(values, q)


@given(st.lists(st.tuples(st.integers(0, 5000), st.integers(1, 50)), min_size=1, max_size=60), FRACTIONS)
def test_counts_weigh_like_repeated_values(pairs: list[tuple[int, int]], q: float) -> None:
    expanded = [v for v, n in pairs for _ in range(n)]
    d = Distribution.of([v for v, _ in pairs], [n for _, n in pairs])
    assert d.total == len(expanded)
    assert d.quantile(q) == brute_quantile(expanded, q)
    limit = pairs[0][0]
    assert d.at_most(limit) == sum(1 for v in expanded if v <= limit)


def test_quantile_of_nothing_is_none() -> None:
    d = Distribution.of([])
    assert d.quantile(0.5) is None and d.max is None and d.share(10) is None
    assert suggest_delay(d, 0.999).text is None


@pytest.mark.parametrize("seconds,expected", [
    (-5, (0, "0s")), (0, (0, "0s")), (1, (1, "1s")), (119, (119, "119s")), (120, (120, "2m")),
    (121, (180, "3m")), (3600, (3600, "1h")), (5400, (5400, "90m")), (7199, (7200, "2h")),
    (3 * 3600 + 17 * 60, (4 * 3600, "4h")), (26 * 3600 + 1, (27 * 3600, "27h")), (48 * 3600, (48 * 3600, "2d")),
    (7 * 86400 + 1, (8 * 86400, "8d")),
])
def test_round_up_to_a_sensible_unit(seconds: int, expected: tuple[int, str]) -> None:
    assert round_up(seconds) == expected


def draw(kind: str, seed: int, n: int, scale: float) -> np.ndarray:
    """Delays in seconds (whole, rounded up) from a known distribution."""
    rng = np.random.default_rng(seed)
    raw = rng.exponential(scale, n) if kind == "exponential" else rng.uniform(0, scale, n)
    return np.ceil(raw).astype(np.int64)


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(["exponential", "uniform"]), st.integers(0, 2**32 - 1), st.integers(1, 3000),
       st.sampled_from([30.0, 600.0, 3600.0, 6 * 3600.0, 3 * 86400.0, 20 * 86400.0]), FRACTIONS)
def test_suggestion_covers_the_fraction_and_one_unit_less_does_not(kind: str, seed: int, n: int, scale: float,
                                                                    q: float) -> None:
    delays = draw(kind, seed, n, scale)
    d = Distribution.of(delays)
    s = suggest_delay(d, q)
    assert s.needed is not None and s.seconds is not None and s.text is not None
    covered = np.count_nonzero(delays <= s.seconds) / n
    assert covered >= q
    _, unit = unit_for(s.needed)
    if s.seconds > 0:
        assert np.count_nonzero(delays <= s.seconds - unit) / n < q
    # the duration text is what the seconds say, in a form archive.delay accepts
    from lakehouse.durations import Duration

    assert Duration.parse(s.text).millis == s.seconds * 1000


@settings(max_examples=20, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_percentiles_of_exponential_arrivals_are_where_the_distribution_puts_them(seed: int) -> None:
    mean = 3600.0
    delays = draw("exponential", seed, 20_000, mean)
    d = Distribution.of(delays)
    for q in (0.5, 0.9, 0.99):
        expected = -math.log(1 - q) * mean
        assert abs(d.quantile(q) - expected) / expected < 0.08, (q, d.quantile(q), expected)


def test_fraction_labels_and_checks() -> None:
    assert [label(q) for q in (0.5, 0.9, 0.99, 0.999, 0.995, 1.0)] == ["p50", "p90", "p99", "p99.9", "p99.5", "p100"]
    for bad in (0, -0.1, 1.5, float("nan"), True):
        with pytest.raises(ValueError, match="fraction"):
            check_fraction(bad)


def test_human_and_delay_text() -> None:
    assert [human(x) for x in (None, 0, 45, 61, 3 * 3600 + 5 * 60, 2 * 86400 + 4 * 3600, -30)] == \
        ["-", "0s", "45s", "1m01s", "3h05m", "2d04h", "-30s"]
    assert [format_delay(ms) for ms in (86_400_000, 5_400_000, 500, 0, 90_000)] == ["1d", "90m", "500ms", "0s", "90s"]


def test_lateness_is_rounded_up_from_the_start_of_the_event_second() -> None:
    loaded = np.array([10 * US, 10 * US + 1, 9 * US + 500_000], np.int64)
    assert lateness_seconds(loaded, np.array([7, 7, 10])).tolist() == [3, 4, 0]


# -- the late path ------------------------------------------------------------------------------


def test_late_path_against_the_cutoff_history() -> None:
    # archive commits at T0+100 (cutoff T0-1000) and T0+500 (cutoff T0-500)
    commits = np.array([(T0 + 100) * US, (T0 + 500) * US])
    cutoffs = np.array([T0 - 1000, T0 - 500])
    loaded = np.array([T0 + 50, T0 + 200, T0 + 200, T0 + 600, T0 + 600, T0 + 700]) * US
    event = np.array([T0 - 5000, T0 - 1001, T0 - 1000, T0 - 501, T0 - 400, T0 - 800])
    in_live = np.array([False, False, False, True, False, True])
    lp = late_path(loaded, event, in_live, commits, cutoffs, now_us=(T0 + 1000) * US)
    # before any archive commit nothing is late; T0-1001 is below the first cutoff; T0-1000 is not
    assert lp.late.tolist() == [False, True, False, True, False, True]
    assert lp.archived.tolist() == [False, True, False, False, False, False]
    assert lp.waiting.tolist() == [False, False, False, True, False, True]
    assert lp.wait_s.tolist() == [-1, 300, -1, 400, -1, 300]


def test_a_live_row_below_the_latest_cutoff_is_waiting() -> None:
    # stamped at T0+450, before the run that committed cutoff T0-500 at T0+500, which did not take it
    commits = np.array([(T0 + 100) * US, (T0 + 500) * US])
    lp = late_path(np.array([(T0 + 450) * US] * 2), np.array([T0 - 600] * 2), np.array([True, False]), commits,
                   np.array([T0 - 1000, T0 - 500]), now_us=(T0 + 1000) * US)
    assert lp.late.tolist() == [True, False] and lp.waiting.tolist() == [True, False]
    assert lp.wait_s.tolist() == [550, -1]


def test_no_archive_run_means_no_late_path() -> None:
    lp = late_path(np.array([T0 * US]), np.array([T0 - 10**6]), np.array([True]), np.array([], np.int64),
                   np.array([], np.int64), now_us=T0 * US)
    assert not lp.late.any() and lp.wait_s.tolist() == [-1]


# -- the profile -----------------------------------------------------------------------------------


def known_arrivals(seed: int = 7) -> tuple[Arrivals, dict[str, np.ndarray]]:
    """Two sources: 'app' exponential (mean 1h), 'batch' uniform (0..8h), loaded at T0+0..3600s."""
    rng = np.random.default_rng(seed)
    rows = []
    delays = {}
    for name, kind, scale, n in (("app", "exponential", 3600.0, 4000), ("batch", "uniform", 8 * 3600.0, 2000)):
        d = draw(kind, int(rng.integers(2**31)), n, scale)
        delays[name] = d
        loaded = (T0 + rng.integers(0, 3600, n)) * US  # whole seconds: lateness is exact
        counts = Counter(zip(loaded.tolist(), (loaded // US - d).tolist()))
        rows += [(name, lu, es, False, c) for (lu, es), c in counts.items()]
    return Arrivals.of(rows, unknown=3), delays


def test_profile_of_known_distributions() -> None:
    rows, delays = known_arrivals()
    p = profile("t", rows, [], [], {"batch": 2, "old": 5}, delay_ms=6 * 3600 * 1000, fraction=0.999,
                now_us=(T0 + 7200) * US)
    everything = np.concatenate(list(delays.values()))
    assert p.rows == 6000 and p.unknown == 3
    assert p.percentiles["p50"] == brute_quantile(everything.tolist(), 0.5)
    assert p.percentiles["max"] == int(everything.max())
    by = {s.source: s for s in p.sources}
    assert list(by) == ["app", "batch", "old"]
    assert by["app"].rows == 4000 and by["batch"].rows == 2000 and by["old"].rows == 0
    assert abs(by["app"].percentiles["p50"] - math.log(2) * 3600) < 0.08 * 3600
    assert abs(by["batch"].percentiles["p90"] - 0.9 * 8 * 3600) < 0.05 * 8 * 3600
    assert by["old"].percentiles["p50"] is None
    assert (by["batch"].rejected_late, by["old"].rejected_late) == (2, 5)
    assert p.rejected_late == {"rows": 7, "by_producer": {"batch": 2, "old": 5}}
    # without an archive run no row took the late path
    assert p.late_path["rows"] == 0 and p.late_path["wait"]["max"] is None
    # 6h covers all of 'app' but 3/4 of 'batch'; the needed delay is near 8h
    covers = np.count_nonzero(everything <= 6 * 3600) / 6000
    assert p.delay["current"] == "6h" and p.delay["current_covers"] == pytest.approx(covers)
    assert p.delay["needed_seconds"] == brute_quantile(everything.tolist(), 0.999)
    assert p.delay["suggested"] == "8h" and p.delay["change"] == "longer"
    doc = json.loads(output.dumps(p.as_dict()))
    assert set(doc) == {"table", "now", "since", "fraction", "rows", "rows_without_load_time", "lateness", "sources",
                        "late_path", "rejected_late", "delay"}
    assert list(doc["lateness"]) == ["p50", "p90", "p99", "p99.9", "max"]
    assert doc["now"] == output.format_timestamp(dt.datetime.fromtimestamp(T0 + 7200, dt.timezone.utc))


def test_another_fraction_gets_its_own_percentile() -> None:
    rows, _ = known_arrivals()
    p = profile("t", rows, [], [], {}, delay_ms=3600_000, fraction=0.95, now_us=T0 * US)
    assert list(p.percentiles) == ["p50", "p90", "p95", "p99", "p99.9", "max"]
    assert p.delay["needed_seconds"] == p.percentiles["p95"]


# -- the loads ledger --------------------------------------------------------------------------------


def test_ledger_keeps_committed_releases_and_the_last_line_of_each(tmp_path: Path) -> None:
    paths = TablePaths(str(tmp_path), "t")
    ledger.record(paths, 1, 100, [{"load": "load-1", "producer": "load", "after": None, "upto": 50, "rows": 3}])
    ledger.record(paths, 2, 200, [{"load": "load-2", "producer": "a", "after": None, "upto": 60, "rows": 1}])
    # release 2 re-committed after a crash: its line again, later
    ledger.record(paths, 2, 250, [{"load": "load-2", "producer": "a", "after": None, "upto": 60, "rows": 1},
                                  {"load": "load-1", "producer": "load", "after": 50, "upto": 70, "rows": 2}])
    with open(ledger.ledger_path(paths), "a") as f:
        f.write('{"release": 3, "at": 30')  # cut short by a crash
    ledger.record(paths, 3, 300, [{"load": "load-3", "producer": "b", "after": None, "upto": 80, "rows": 5}])
    t = ledger.read(paths, committed=2)
    assert t.column("release").to_pylist() == [1, 2, 2]
    assert t.column("loaded_at").to_pylist() == [100, 250, 250]
    assert t.column("after").to_pylist() == [None, None, 50]
    assert ledger.read(paths, committed=3).column("load").to_pylist()[-1] == "load-3"
    assert ledger.read(TablePaths(str(tmp_path), "none"), committed=5).num_rows == 0


# -- the archive's cutoff history (delta-rs writes, no Spark) -------------------------------------------


def test_cutoff_history_reads_each_runs_set_transaction(tmp_path: Path) -> None:
    import pyarrow as pa
    from deltalake import CommitProperties, Transaction, write_deltalake

    from lakehouse.archive.state import CUTOFF_APP_ID, cutoff_history

    path = str(tmp_path / "archive")
    data = pa.table({"x": [1]})
    write_deltalake(path, data)  # created: no cutoff yet
    write_deltalake(path, data, mode="append",
                    commit_properties=CommitProperties(app_transactions=[Transaction(CUTOFF_APP_ID, 1000)]))
    write_deltalake(path, data, mode="append")  # a compaction-like commit: no cutoff
    write_deltalake(path, data, mode="append",
                    commit_properties=CommitProperties(app_transactions=[Transaction(CUTOFF_APP_ID, 2000)]))
    h = cutoff_history(path)
    assert [(c.version, c.cutoff) for c in h] == [(1, 1000), (3, 2000)]
    assert h[0].at_ms < h[1].at_ms


# -- the plot ---------------------------------------------------------------------------------------


def test_plot_writes_a_png(tmp_path: Path) -> None:
    from lakehouse.errors import LakehouseError
    from lakehouse.lateness.plot import write_png

    rows, _ = known_arrivals()
    p = profile("t", rows, [], [], {"old": 5}, delay_ms=6 * 3600 * 1000, fraction=0.999, now_us=T0 * US)
    out = tmp_path / "lateness.png"
    write_png(p, str(out))
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    empty = profile("t", Arrivals.of([]), [], [], {}, delay_ms=1000, fraction=0.9, now_us=T0 * US)
    write_png(empty, str(tmp_path / "empty.png"))
    assert (tmp_path / "empty.png").stat().st_size > 0
    with pytest.raises(LakehouseError, match="lateness t: cannot write the plot to"):
        write_png(p, str(tmp_path / "no" / "such" / "dir" / "x.png"))


def test_plot_leaves_the_callers_matplotlib_backend_alone(tmp_path: Path) -> None:
    """write_png used to force the Agg backend on the whole process, so a notebook's inline
    plots stopped showing after it."""
    import matplotlib

    from lakehouse.lateness.plot import write_png

    before = matplotlib.get_backend()
    matplotlib.use("svg")  # any backend other than Agg, as a notebook's inline one would be
    try:
        rows, _ = known_arrivals()
        write_png(profile("t", rows, [], [], {}, delay_ms=3600 * 1000, fraction=0.99, now_us=T0 * US),
                  str(tmp_path / "x.png"))
        assert matplotlib.get_backend() == "svg"
        assert (tmp_path / "x.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    finally:
        matplotlib.use(before)


# -- the gathering, on Delta tables written by delta-rs (no Spark) ----------------------------------


def test_gather_joins_rows_to_their_release_and_skips_archived_rows_not_purged(tmp_path: Path) -> None:
    import pyarrow as pa
    from deltalake import CommitProperties, Transaction, write_deltalake

    from lakehouse import rejects
    from lakehouse.archive.state import CUTOFF_APP_ID
    from lakehouse.definitions import parse_definition
    from lakehouse.lateness.gather import arrivals
    from lakehouse.lateness.gather import profile as gather_profile
    from lakehouse.stream.ledger import APP_ID

    d = parse_definition({"name": "c", "columns": [{"name": "u", "type": "long"},
                                                   {"name": "at", "type": "timestamp", "nullable": False}],
                          "event_time": "at", "archive": {"delay": "1h"}}, "c.yaml")
    p = TablePaths(str(tmp_path), "c")
    t = dt.datetime(2026, 11, 20, 12, tzinfo=dt.timezone.utc)
    hour = dt.timedelta(hours=1)

    def frame(rows: list[tuple[int, dt.datetime, str]]) -> pa.Table:
        return pa.table({"u": pa.array([r[0] for r in rows], pa.int64()),
                         "at": pa.array([r[1] for r in rows], pa.timestamp("us", tz="UTC")),
                         "_lh_load": pa.array([r[2] for r in rows]),
                         "event_date": pa.array([r[1].date() for r in rows], pa.date32())})

    def us(x: dt.datetime) -> int:
        return int(x.timestamp()) * US

    # live: u1 (load-1, release 1), u2 (load-2), u3 archived but not purged yet, u5 load-1's second release
    write_deltalake(p.live, frame([(1, t, "load-1"), (2, t - 3 * hour, "load-2"), (3, t - 5 * hour, "load-1"),
                                   (5, t + hour, "load-1")]),
                    partition_by=["event_date"], commit_properties=CommitProperties(app_transactions=[Transaction(APP_ID, 3)]))
    write_deltalake(p.archive, frame([(3, t - 5 * hour, "load-1"), (4, t - 6 * hour, "load-0")]),
                    partition_by=["event_date"],
                    commit_properties=CommitProperties(app_transactions=[Transaction(CUTOFF_APP_ID, int((t - 4 * hour).timestamp()))]))
    write_deltalake(p.rejects, pa.table({"source": ["f"], "line": [1], "record": ["{}"], "reason": [rejects.LATE_ROW],
                                         "at": pa.array([t], pa.timestamp("us", tz="UTC")), "load_id": ["x"],
                                         "producer": ["b"], "bound": pa.array([t], pa.timestamp("us", tz="UTC"))}))
    ledger.record(p, 1, us(t) + 60 * US, [{"load": "load-1", "producer": "a", "after": None, "upto": us(t), "rows": 2}])
    ledger.record(p, 2, us(t) + 120 * US, [{"load": "load-2", "producer": "b", "after": None, "upto": us(t), "rows": 1}])
    ledger.record(p, 3, us(t) + 7200 * US, [{"load": "load-1", "producer": "a", "after": us(t), "upto": us(t + hour), "rows": 1}])
    ledger.record(p, 4, us(t) + 9999 * US, [{"load": "load-9", "producer": "z", "after": None, "upto": us(t), "rows": 1}])
    rows = arrivals(d, p)
    got = sorted(zip(rows.source.tolist(), rows.loaded_us.tolist(), rows.event_s.tolist(), rows.in_live.tolist(),
                     rows.count.tolist()))
    assert got == sorted([
        ("a", us(t) + 60 * US, int(t.timestamp()), True, 1),  # u1
        ("a", us(t) + 60 * US, int((t - 5 * hour).timestamp()), False, 1),  # u3, from the archive only
        ("b", us(t) + 120 * US, int((t - 3 * hour).timestamp()), True, 1),  # u2
        ("a", us(t) + 7200 * US, int((t + hour).timestamp()), True, 1),  # u5: load-1's second release
    ])
    assert rows.unknown == 1  # u4: loaded before the ledger
    prof = gather_profile(d, p, 0.5, now=t + 3 * hour)
    assert prof.rows == 4 and prof.rejected_late == {"rows": 1, "by_producer": {"b": 1}}
    assert arrivals(d, p, since_us=us(t - 4 * hour)).rows == 3  # u3 falls out of the window
    assert gather_profile(d, p, 0.5, days=1, now=t + 3 * hour).rejected_late["rows"] == 1
    assert gather_profile(d, p, 0.5, days=1, now=t + 48 * hour).rejected_late["rows"] == 0  # rejected before the window
