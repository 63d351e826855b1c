"""``invariants.counts_sql`` (every invariant counted in one read of the ``tagged`` view) against
each invariant's own count (``count_sql`` over the ``view``, ``archive`` and ``stored`` views), on
DuckDB as verify transpiles them: generated live and archive rows (keys repeated across days and
tables, NULL keys, event times and days, rows before and after the cutoff, days that disagree
with the event time), a table with and without a key, no cutoff yet or one."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import duckdb
from hypothesis import given, settings
from hypothesis import strategies as st

from lakehouse.definitions import load_definitions
from lakehouse.quality.invariants import IN_ARCHIVE, IN_VIEW, count_sql, counts_sql, row_invariants
from lakehouse.query.duckdb import transpile

TABLES = load_definitions(Path(__file__).resolve().parent.parent / "tables")
T0 = dt.datetime(2026, 11, 20, tzinfo=dt.timezone.utc)

row = st.tuples(st.one_of(st.none(), st.sampled_from(["a", "b", "c"])),  # key
                st.one_of(st.none(), st.integers(0, 5 * 24)),  # event time, hours after T0
                st.integers(-1, 1))  # the event_date's distance from the event time's day
rows = st.lists(row, max_size=10)


def _load(con, name: str, data: list[tuple], key: str, et: str) -> None:
    con.execute(f"CREATE TABLE {name} ({key} VARCHAR, {et} TIMESTAMPTZ, event_date DATE)")
    for k, h, shift in data:
        at = None if h is None else T0 + dt.timedelta(hours=h)
        day = None if at is None else at.date() + dt.timedelta(days=shift)
        con.execute(f"INSERT INTO {name} VALUES (?, ?, ?)", [k, at, day])


@settings(max_examples=150, deadline=None)
@given(rows, rows, st.one_of(st.none(), st.integers(0, 5 * 24)), st.sampled_from(["trips", "driver_pings"]))
def test_one_read_counts_what_each_invariant_counts(live, archive, cutoff_h, table):
    d = TABLES[table]
    key = d.primary_key[0] if d.has_key else "key_unused"
    et = d.event_time
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    _load(con, "live", live, key, et)
    _load(con, "arch", archive, key, et)
    cut = "CAST(NULL AS TIMESTAMPTZ)" if cutoff_h is None else f"TIMESTAMPTZ '{T0 + dt.timedelta(hours=cutoff_h)}'"
    cut_day = "NULL" if cutoff_h is None else f"DATE '{(T0 + dt.timedelta(hours=cutoff_h)).date()}'"
    in_split = "TRUE" if cutoff_h is None else f"event_date >= {cut_day} AND {et} >= {cut}"
    con.execute(f"CREATE VIEW v_archive AS SELECT *, {cut} AS cutoff_ts FROM arch")
    con.execute("CREATE VIEW v_stored AS SELECT * FROM live UNION ALL SELECT * FROM arch")
    con.execute(f"CREATE VIEW v_view AS SELECT * FROM arch UNION ALL SELECT * FROM live WHERE {in_split}")
    con.execute(f"CREATE VIEW v_tagged AS SELECT *, {cut} AS cutoff_ts, TRUE AS {IN_VIEW}, TRUE AS {IN_ARCHIVE} "
                f"FROM arch UNION ALL SELECT *, {cut} AS cutoff_ts, coalesce({in_split}, FALSE) AS {IN_VIEW}, "
                f"FALSE AS {IN_ARCHIVE} FROM live")
    each = [con.execute(transpile(count_sql(inv))).fetchone()[0]
            for inv in row_invariants(d, "v_view", "v_archive", "v_stored")]
    at_once = list(con.execute(transpile(counts_sql(d, "v_tagged", True, distinct_keys=d.has_key))).fetchone())
    if d.has_key:
        distinct = con.execute(transpile(f"SELECT count(*) FROM (SELECT DISTINCT {key} FROM v_view) k")).fetchone()[0]
        assert at_once == [distinct, *each]
    else:
        assert at_once == each
    # without the archive's invariant (a check of live alone): the same counts less that one
    live_only = [con.execute(transpile(count_sql(inv))).fetchone()[0] for inv in row_invariants(d, "live", None, "live")]
    con.execute(f"CREATE VIEW l_tagged AS SELECT *, {cut} AS cutoff_ts, TRUE AS {IN_VIEW}, FALSE AS {IN_ARCHIVE} "
                "FROM live")
    assert list(con.execute(transpile(counts_sql(d, "l_tagged", False))).fetchone()) == live_only
