"""Small commits into live and rejects without Spark (lakehouse/live.py ``commit_live_rows``,
lakehouse/delta_log ``upsert``, lakehouse/rejects.py): the latest row of each key is the one
Spark's path chooses, for every class of key collision, order and null; a record without raw text
reads as the JSON Spark's ``to_json`` writes; delta-rs commits racing each other and Spark's
lose and double nothing; and what they write, Spark and DuckDB read."""

from __future__ import annotations

import datetime as dt
import decimal
import json
import math
import threading
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lakehouse import delta_log, rejects
from lakehouse.definitions import LOAD_COLUMN, PARTITION_COLUMN
from lakehouse.definitions.validate import parse_definition
from lakehouse.live import SEQ_COLUMN, _source_frame, commit_live_rows, latest_per_key, small
from lakehouse.staging import FILE_COLUMN, LINE_COLUMN
from tests.conftest import CLICKS, TRIPS_SMALL, Project

pytestmark = pytest.mark.spark

UTC = dt.timezone.utc
T0 = dt.datetime(2026, 11, 20, 23, 59, 59, 999_999, tzinfo=UTC)  # rows fall on both sides of midnight
TRIPS = parse_definition(__import__("yaml").safe_load(TRIPS_SMALL), "trips.yaml")
ORDER = [(SEQ_COLUMN, pa.int64()), (FILE_COLUMN, pa.int32()), (LINE_COLUMN, pa.int64())]
SCHEMA = pa.schema([(c.name, c.type.arrow()) for c in TRIPS.columns] + ORDER)
"""Parsed trips rows with their order columns."""


def _rows(draw: Any, n: int) -> pa.Table:
    """``n`` parsed trips rows: keys drawn from a few (collisions within and across seq, file and
    days), distinct (seq, file, line) order values, every other column possibly null."""
    keys = draw(st.lists(st.sampled_from(["a", "b", "c", "'q`\"", "é", ""]), min_size=n, max_size=n))
    order = draw(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 2), st.integers(1, 40)),
                          min_size=n, max_size=n, unique=True))
    offsets = draw(st.lists(st.integers(-3, 3), min_size=n, max_size=n))
    maybe = st.one_of(st.none(), st.integers(-5, 5))
    cols: dict[str, Any] = {
        "trip_id": pa.array(keys, pa.string()),
        "city_id": pa.array(draw(st.lists(maybe, min_size=n, max_size=n)), pa.int32()),
        "status": pa.array(range(n), pa.int32()),  # which input row it was
        "fx_rate": pa.array(draw(st.lists(st.one_of(st.none(), st.floats(-2, 2)), min_size=n, max_size=n)),
                            pa.float64()),
        "fare_total": pa.array([None] * n, pa.float64()),
        "fare_local": pa.array([decimal.Decimal("1.25")] * n, pa.decimal128(10, 2)),
        "is_pool": pa.array(draw(st.lists(st.one_of(st.none(), st.booleans()), min_size=n, max_size=n)), pa.bool_()),
        "trip_date": pa.array([dt.date(2026, 11, 20)] * n, pa.date32()),
        "event_time": pa.array([T0 + dt.timedelta(microseconds=o) for o in offsets], pa.timestamp("us", tz="UTC")),
    }
    for i, (name, t) in enumerate(ORDER):
        cols[name] = pa.array([o[i] for o in order], t)
    return pa.table(cols, schema=SCHEMA)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.data())
def test_the_latest_row_of_each_key_is_the_one_sparks_path_chooses(spark: Any, data: Any) -> None:
    rows = _rows(data.draw, data.draw(st.integers(0, 14)))
    mine = latest_per_key(TRIPS, rows, "L1")
    theirs = _source_frame(TRIPS, spark.createDataFrame(rows), "L1").toPandas()

    def key(r: dict[str, Any]) -> tuple:
        return (r["trip_id"], r["status"])

    got = sorted(({k: r[k] for k in ("trip_id", "status", LOAD_COLUMN)} | {"day": r[PARTITION_COLUMN]}
                  for r in mine.to_pylist()), key=key)
    want = sorted(({k: r[k] for k in ("trip_id", "status", LOAD_COLUMN)} | {"day": r[PARTITION_COLUMN]}
                   for r in theirs.to_dict("records")), key=key)
    assert got == want
    assert mine.column_names == [*TRIPS.column_names, LOAD_COLUMN, PARTITION_COLUMN]
    assert len(set(mine["trip_id"].to_pylist())) == mine.num_rows


TYPES = {
    "s": ("string", st.text(max_size=12)),
    "i": ("int", st.integers(-2**31, 2**31 - 1)),
    "l": ("long", st.integers(-2**63, 2**63 - 1)),
    "f": ("double", st.floats(allow_nan=True, allow_infinity=True)),
    "b": ("boolean", st.booleans()),
    "d": ("date", st.dates(dt.date(1000, 1, 1), dt.date(9999, 12, 31))),
    "t": ("timestamp", st.datetimes(dt.datetime(1000, 1, 1), dt.datetime(9999, 12, 31)).map(
        lambda x: x.replace(tzinfo=UTC))),
    "m": ("decimal(12,4)", st.decimals(min_value=-10**7, max_value=10**7, places=4, allow_nan=False)),
}


def _same(name: str, mine: Any, theirs: Any) -> bool:
    if name == "f" and isinstance(mine, float):
        return mine == theirs or (math.isnan(mine) and math.isnan(theirs))
    if name == "t":  # Spark writes milliseconds; lakehouse keeps the microseconds it has
        m = dt.datetime.fromisoformat(mine.replace("Z", "+00:00"))
        return m.replace(microsecond=m.microsecond // 1000 * 1000) == dt.datetime.fromisoformat(
            theirs.replace("Z", "+00:00"))
    if name == "m":
        return decimal.Decimal(str(mine)) == decimal.Decimal(str(theirs))
    return mine == theirs


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.data())
def test_a_record_without_raw_text_reads_as_sparks_to_json(spark: Any, data: Any) -> None:
    from lakehouse.types import ColumnType

    n = data.draw(st.integers(1, 6))
    cols = {}
    for name, (t, strategy) in TYPES.items():
        cols[name] = pa.array(data.draw(st.lists(st.one_of(st.none(), strategy), min_size=n, max_size=n)),
                              ColumnType.parse(t).arrow())
    table = pa.table(cols)
    mine = [json.loads(x, parse_float=float) for x in rejects.record_json(table, tuple(TYPES)).to_pylist()]
    from pyspark.sql import functions as F

    df = spark.createDataFrame(table)
    theirs = [json.loads(r[0]) for r in df.select(F.to_json(F.struct(*TYPES))).collect()]
    for m, s in zip(mine, theirs):
        assert set(m) == set(s), (m, s)  # the same fields: nulls left out
        for k in m:
            assert _same(k, m[k], s[k]), (k, m[k], s[k])


def _table(p: Project, yaml: str, name: str) -> Project:
    return p.table(yaml).create(name)


def test_racing_delta_rs_commits_and_a_spark_merge_lose_and_double_nothing(spark: Any, project: Project) -> None:
    p = _table(project, TRIPS_SMALL, "trips")
    paths = p.lh.paths("trips")
    d = p.lh.definition("trips")
    day = {dt.date(2026, 11, 20)}

    def batch(writer: int, k: int) -> pa.Table:
        keys = [f"k{(writer * 7 + k * 3 + i) % 25}" for i in range(5)]  # writers share keys
        n = len(keys)
        t = {f.name: pa.nulls(n, f.type) for f in SCHEMA}
        t["trip_id"] = pa.array(keys, pa.string())
        t["status"] = pa.array([writer * 1000 + k] * n, pa.int32())
        t["event_time"] = pa.array([dt.datetime(2026, 11, 20, 10, tzinfo=UTC)] * n, pa.timestamp("us", tz="UTC"))
        t[SEQ_COLUMN] = pa.array([k] * n, pa.int64())
        t[FILE_COLUMN] = pa.array([0] * n, pa.int32())
        t[LINE_COLUMN] = pa.array(range(n), pa.int64())
        return pa.table(t)

    totals: list[tuple[int, int]] = []
    errors: list[BaseException] = []

    def writer(w: int) -> None:
        try:
            for k in range(6):
                totals.append(commit_live_rows(d, paths, batch(w, k), f"w{w}", day, txn=(f"writer-{w}", k + 1)))
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(3)]
    for t in threads:
        t.start()
    # meanwhile Spark's MERGE path commits into the same day
    from lakehouse.live import commit_live
    from lakehouse.spark.commit import with_retries

    src = batch(9, 0)
    with_retries("spark's merge", lambda: commit_live(spark, d, paths, spark.createDataFrame(src), "spark", day,
                                                      src.num_rows))
    for t in threads:
        t.join()
    assert not errors, errors
    live = delta_log.scan(paths.live, "SELECT trip_id, status FROM t").to_pylist()
    ids = [r["trip_id"] for r in live]
    assert len(ids) == len(set(ids))  # no key twice
    assert set(ids) == {f"k{i}" for i in range(25)}
    assert sum(i for i, _ in totals) + sum(u for _, u in totals) == 3 * 6 * 5  # every row of the threads taken once
    assert sum(i for i, _ in totals) <= 25
    for w in range(3):  # each writer's SetTransaction is its last batch
        assert delta_log.txn_version(paths.live, f"writer-{w}") == 6
    # a replayed commit writes nothing
    version = delta_log.version(paths.live)
    assert commit_live_rows(d, paths, batch(0, 5), "w0", day, txn=("writer-0", 6)) == (0, 0)
    assert delta_log.version(paths.live) == version
    # Spark and DuckDB read what delta-rs wrote
    assert spark.read.format("delta").load(paths.live).count() == 25
    assert p.lh.query("SELECT count(*) AS n FROM trips", engine="duckdb").to_pylist()[0]["n"] == 25


def test_a_commit_into_big_days_or_of_many_rows_goes_to_spark(spark: Any, project: Project) -> None:
    from lakehouse import live

    p = _table(project, CLICKS, "clicks")
    paths = p.lh.paths("clicks")
    day = dt.date(2026, 11, 20)
    assert small(paths, 10, {day}) and small(paths, 10, set())
    assert not small(paths, live.SMALL_ROWS + 1, {day})
    f = p.csv("a.csv", ["user_id", "url", "at"], [[1, "/a", "2026-11-20T10:00:00Z"]])
    p.lh.load("clicks", [f])
    size = int(sum(delta_log.add_actions(paths.live)["size_bytes"].to_pylist()))
    old = live.SMALL_BYTES
    try:
        live.SMALL_BYTES = size - 1
        assert not small(paths, 1, {day})
        assert small(paths, 1, {day + dt.timedelta(days=1)})  # another day: nothing to read
    finally:
        live.SMALL_BYTES = old


@pytest.mark.parametrize("spark_path", [False, True], ids=["delta-rs", "spark"])
def test_both_paths_release_the_same_rows(spark: Any, project: Project, monkeypatch: Any, spark_path: bool) -> None:
    """The same inserts (updates across producers and releases, a later line winning within a
    file, several days) give the same live rows whichever path commits the releases."""
    from lakehouse import live

    if spark_path:
        monkeypatch.setattr(live, "SMALL_ROWS", -1)
    p = _table(project, TRIPS_SMALL + "stream: {allowed_lateness: 0}\n", "trips")
    header = ["trip_id", "city_id", "status", "fx_rate", "event_time"]
    a = p.lh.table("trips").producer("A")
    b = p.lh.table("trips").producer("B")
    a.attach()
    b.attach()
    a.insert_files([p.csv("a1.csv", header, [["x", 1, 1, 1.0, "2026-11-20T10:00:00Z"], ["y", 1, 1, 1.0, "2026-11-20T23:59:59.999999Z"],
                                             ["x", 1, 2, 1.0, "2026-11-20T10:00:00Z"]])])
    b.insert_files([p.csv("b1.csv", header, [["y", 2, 3, 2.0, "2026-11-21T00:00:00Z"], ["z", 2, 1, None, "2026-11-21T01:00:00Z"]])])
    a.insert_files([p.csv("a2.csv", header, [["x", 1, 4, 1.0, "2026-11-21T02:00:00Z"]])])
    a.detach()
    b.detach()
    got = sorted((r["trip_id"], r["status"], str(r["event_date"])) for r in delta_log.scan(p.lh.paths("trips").live).to_pylist())
    assert got == [("x", 2, "2026-11-20"), ("x", 4, "2026-11-21"), ("y", 1, "2026-11-20"), ("y", 3, "2026-11-21"),
                   ("z", 1, "2026-11-21")]
    history = delta_log.history(p.lh.paths("trips").live)
    engines = {h.get("engineInfo", "").split(":")[0].split("/")[0] for h in history if h.get("operation") != "CREATE TABLE"}
    assert engines == ({"Apache-Spark"} if spark_path else {"delta-rs"}), engines


def test_an_empty_upsert_still_records_its_set_transaction(tmp_path: Any) -> None:
    """A commit with no row is still the commit of its SetTransaction: a replay of it is
    recognised, and nothing else changes."""
    path = str(tmp_path / "t")
    t = pa.table({"k": ["a"], "day": ["2026-11-20"]})
    from deltalake import write_deltalake  # the table only; lakehouse writes through delta_log

    write_deltalake(path, t, partition_by=["day"])
    assert delta_log.upsert(path, t.slice(0, 0), ("k",), "day", ["2026-11-20"], txn=("app", 3)) == (0, 0)
    assert delta_log.txn_version(path, "app") == 3 and delta_log.version(path) == 1
    assert delta_log.upsert(path, t.slice(0, 0), ("k",), "day", ["2026-11-20"], txn=("app", 3)) is None
    assert delta_log.version(path) == 1 and delta_log.row_count(path) == 1


def test_an_add_actions_path_is_url_decoded_to_the_file_it_names(tmp_path: Any) -> None:
    """The log names a file by a URL-encoded path: a partition value with ``%``, a space or a
    colon is found on disk (the purge reads such files' footers)."""
    import os

    from deltalake import write_deltalake

    path = str(tmp_path / "t")
    write_deltalake(path, pa.table({"x": [1], "p": ["a b:c%"]}), partition_by=["p"])
    [logged] = delta_log.add_actions(path)["path"].to_pylist()
    assert "%" in logged and os.path.isfile(delta_log.file_uri(path, logged))
