"""When jobs are due (pure, against an injected clock) and what compaction plans (pure)."""

from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lakehouse.durations import Duration
from lakehouse.jobs.attempt import Run
from lakehouse.jobs.compact import MAX_FILES_PER_DAY, archive_days, live_days, rows_per_file
from lakehouse.jobs.schedule import decide, slot_start
from lakehouse.layout import DataFile

UTC = dt.timezone.utc
H2 = Duration.parse("2h")
BACK = dt.timedelta(minutes=1)


def t(s: str) -> dt.datetime:
    return dt.datetime.fromisoformat(s).replace(tzinfo=UTC)


def run(started: str, outcome: str = "succeeded", seconds: float = 10, terminal: bool = False, fp: str = "x",
        job: str = "archive", table: str = "trips", attempt: int = 1) -> Run:
    s = t(started)
    return Run("r", job, table, s, s + dt.timedelta(seconds=seconds), outcome, attempt, terminal=terminal,
               error=None if outcome == "succeeded" else "boom", fingerprint=fp)


def due(runs: list[Run], now: str, fp: str = "x", interval: Duration | None = H2) -> tuple[bool, str]:
    d = decide("archive", "trips", interval, runs, t(now), fp, BACK)
    return d.due, d.why


def test_slots_are_aligned_to_the_epoch():
    assert slot_start(t("2026-11-20T11:59:59"), H2) == t("2026-11-20T10:00:00")
    assert slot_start(t("2026-11-20T12:00:00"), H2) == t("2026-11-20T12:00:00")
    assert slot_start(t("2026-11-20T12:00:00"), Duration.parse("1d")) == t("2026-11-20T00:00:00")


def test_never_ran_is_due_and_off_never_is():
    assert due([], "2026-11-20T10:00:00") == (True, "never ran")
    assert due([], "2026-11-20T10:00:00", interval=None) == (False, "off")


def test_once_per_slot():
    runs = [run("2026-11-20T10:00:05")]
    assert not due(runs, "2026-11-20T10:00:06")[0]
    assert not due(runs, "2026-11-20T11:59:59")[0]
    ok, why = due(runs, "2026-11-20T12:00:00")
    assert ok and "last success 2026-11-20T10:00:05Z" in why
    d = decide("archive", "trips", H2, runs, t("2026-11-20T11:00:00"), "x")
    assert d.next_due == t("2026-11-20T12:00:00")


def test_other_jobs_and_tables_do_not_count():
    runs = [run("2026-11-20T10:00:05", job="vacuum"), run("2026-11-20T10:00:05", table="clicks")]
    assert due(runs, "2026-11-20T10:30:00") == (True, "never ran")


def test_terminal_failure_waits_for_a_change():
    runs = [run("2026-11-20T10:00:00"), run("2026-11-20T12:00:00", "failed", terminal=True, fp="a")]
    ok, why = due(runs, "2026-11-21T12:00:00", fp="a")
    assert not ok and "not retried until the definition or the data changes: boom" in why
    assert due(runs, "2026-11-20T12:05:00", fp="b")[0]  # something changed: try again


@pytest.mark.parametrize("failures,wait", [(1, 1), (2, 2), (3, 4), (4, 8), (10, 120)])
def test_transient_failures_back_off_doubling_up_to_the_interval(failures, wait):
    runs = [run("2026-11-20T09:00:00")]
    start = t("2026-11-20T10:00:00")
    for i in range(failures):
        s = start + dt.timedelta(minutes=i)
        runs.append(Run("r", "archive", "trips", s, s, "failed", 3, error="conflict", fingerprint="x"))
    last = runs[-1].ended
    at = last + dt.timedelta(minutes=wait) - dt.timedelta(seconds=1)
    assert not decide("archive", "trips", H2, runs, at, "x", BACK).due
    assert decide("archive", "trips", H2, runs, at + dt.timedelta(seconds=1), "x", BACK).due


def test_success_after_failures_resets_the_backoff():
    runs = [run("2026-11-20T10:00:00", "failed"), run("2026-11-20T10:01:00", "failed"), run("2026-11-20T10:10:00")]
    assert not due(runs, "2026-11-20T10:11:00")[0]
    assert due(runs, "2026-11-20T12:00:00")[0]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 48 * 60), st.sampled_from(["succeeded", "failed", "retrying", "aborted"]),
                          st.booleans()), max_size=12),
       st.integers(0, 48 * 60), st.sampled_from(["15m", "1h", "2h", "1d"]))
def test_a_job_that_succeeded_in_the_current_slot_is_never_due(events, now_min, every):
    """Whatever the history, the job is due at most once per slot: never again after a success in
    the slot, and always once the slot has no success and no failure holds it back."""
    base = t("2026-11-20T00:00:00")
    iv = Duration.parse(every)
    runs = sorted((Run("r", "archive", "trips", base + dt.timedelta(minutes=m), base + dt.timedelta(minutes=m),
                       o, 1, terminal=term and o == "failed", error="e", fingerprint="x") for m, o, term in events),
                  key=lambda r: r.started)
    now = base + dt.timedelta(minutes=now_min)
    runs = [r for r in runs if r.started <= now]
    d = decide("archive", "trips", iv, runs, now, "x", BACK)
    slot = slot_start(now, iv)
    if any(r.outcome == "succeeded" and r.started >= slot for r in runs):
        assert not d.due
    if not runs or (runs[-1].outcome == "succeeded" and runs[-1].started < slot):
        assert d.due
    if runs and runs[-1].outcome == "aborted" and not any(r.outcome == "succeeded" and r.started >= slot for r in runs):
        assert d.due  # an interrupted attempt is not a failure: no backoff


def test_an_aborted_attempt_is_run_again_at_once_even_after_failures():
    runs = [run("2026-11-20T10:00:00", "failed"), run("2026-11-20T10:00:30", "aborted")]
    ok, why = due(runs, "2026-11-20T10:00:31")
    assert ok and why.startswith("aborted at 2026-11-20T10:00:40Z"), why


# -- compaction planning ------------------------------------------------------------------------

D1, D2 = dt.date(2026, 11, 18), dt.date(2026, 11, 19)


def files(day: dt.date, *sizes: int) -> list[DataFile]:
    return [DataFile(f"event_date={day}/part-{i:05d}-x.c000.snappy.parquet", s, s // 10, day) for i, s in enumerate(sizes)]


def test_live_days_with_more_than_n_small_files():
    by_day = {D1: files(D1, *[100] * 5), D2: files(D2, *[100] * 3, 1000)}
    assert list(live_days(by_day, 1000, 4)) == [D1]
    assert list(live_days(by_day, 1000, 2)) == [D1, D2]
    assert live_days(by_day, 1000, 2)[D2] == "3 small files (more than 2)"
    assert list(live_days(by_day, 1000, 100, day=D2)) == [D2]  # by hand: any two small files
    assert live_days({D1: files(D1, 100, 900)}, 1000, 0, day=D1) == {}


def test_archive_days_split_big_merge_small_and_leave_stale_alone():
    by_day = {D1: files(D1, 5000), D2: files(D2, 100, 200, 300)}
    todo, skipped = archive_days(by_day, 1000)
    assert todo[D1].startswith("a file of 4.9KB") and todo[D2] == "3 files below half the target"
    todo, skipped = archive_days(by_day, 1000, stale={D2})
    assert list(todo) == [D1] and "re-sorts" in skipped[D2]
    assert archive_days({D1: files(D1, 1000, 1000, 400)}, 1000) == ({}, {})  # already compact: stable
    assert list(archive_days(by_day, 1000, day=D2)[0]) == [D2]


@given(st.integers(1, 10**9), st.integers(1, 10**12), st.integers(1024, 1 << 30))
def test_rows_per_file_stays_within_the_file_name_order(rows, size, target):
    per = rows_per_file(rows, size, target)
    assert per >= 1
    assert -(-rows // per) <= MAX_FILES_PER_DAY
