"""The one-pass archive's task (lakehouse/archive/write.py), fed Arrow batches as Spark would feed
it: per day, data files holding exactly the rows not replaced, in order, rolled over at the row
limit; statistics of each file; vector files byte-identical to those the staged path writes from
the same rows (encode.encode_day); figures in and out per side; and a fault injected after the
rows were counted in shows in the figures out. No Spark."""

from __future__ import annotations

import datetime as dt
import json
import random
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lakehouse.archive.encode import DayTask, encode_day
from lakehouse.archive.write import (
    HASH_COLUMN,
    OUT_SCHEMA,
    SIDE_COLUMN,
    WriteTask,
    _hash_sum,
    write_days,
)

UTC = dt.timezone.utc
COLUMNS = (("trip_id", pa.string()), ("city_id", pa.int32()), ("fare", pa.float64()),
           ("event_time", pa.timestamp("us", tz="UTC")), ("_lh_load", pa.string()))
SORT = (("city_id", pa.int32()),)
PLAIN = (("fare", pa.float64()),)


def _rows(seed: int, days: int, per_day: int) -> pa.Table:
    """Rows of ``days`` days sorted as a write task receives them (day, city), with sides and hashes."""
    rng = random.Random(seed)
    out = []
    for k in range(days):
        day = dt.date(2026, 11, 10) + dt.timedelta(days=k)
        rows = []
        for i in range(per_day):
            rows.append({"trip_id": f"t{k}-{i}", "city_id": rng.choice([None, 1, 2, 3]), "fare": rng.random(),
                         "event_time": dt.datetime.combine(day, dt.time(rng.randrange(24)), UTC),
                         "_lh_load": "L", "event_date": day, SIDE_COLUMN: rng.choice(["live", "kept", "replaced"]),
                         HASH_COLUMN: rng.randrange(-2**63, 2**63)})
        rows.sort(key=lambda r: (r["city_id"] is not None, r["city_id"] or 0, r["trip_id"]))
        out += rows
    schema = pa.schema([*COLUMNS, ("event_date", pa.date32()), (SIDE_COLUMN, pa.string()), (HASH_COLUMN, pa.int64())])
    return pa.Table.from_pylist(out, schema=schema)


def _task(root: Path, **kw) -> WriteTask:
    return WriteTask(str(root / "archive"), str(root / "vectors"), 1_790_000_000, "run1", COLUMNS,
                     ("event_time", "trip_id", "city_id"), SORT, PLAIN, **kw)


def _run(task: WriteTask, rows: pa.Table, batch_rows: int) -> list[dict]:
    out = list(write_days(task, rows.to_batches(max_chunksize=batch_rows), 3, 0))
    assert all(b.schema == OUT_SCHEMA for b in out)
    return [r for b in out for r in b.to_pylist()]


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 10_000), st.integers(1, 3), st.integers(1, 40), st.integers(1, 17), st.integers(0, 9))
def test_a_task_writes_each_day_whole_and_counts_it_in_and_out(tmp_path_factory, seed, days, per_day, batch_rows,
                                                               per_file) -> None:
    root = tmp_path_factory.mktemp("w")
    rows = _rows(seed, days, per_day)
    task = _task(root, rows_per_file=per_file)
    records = _run(task, rows, batch_rows)
    for day in sorted(set(rows.column("event_date").to_pylist())):
        mine = rows.filter(pa.compute.equal(rows.column("event_date"), pa.scalar(day, pa.date32())))
        written = mine.filter(pa.compute.not_equal(mine.column(SIDE_COLUMN), "replaced"))
        files = [r for r in records if r["kind"] == "file" and r["day"] == day.isoformat()]
        assert [f["path"] for f in files] == sorted(f["path"] for f in files)
        got = [pq.read_table(root / "archive" / f["path"]) for f in files]
        assert all(g.schema.names == [n for n, _ in COLUMNS] for g in got)
        assert (pa.concat_tables(got).to_pylist() if got else []) == written.select([n for n, _ in COLUMNS]).to_pylist()
        assert [json.loads(f["stats"])["numRecords"] for f in files] == [g.num_rows for g in got] == [f["rows"] for f in files]
        if per_file:
            assert all(g.num_rows <= per_file for g in got)
        figures = {r["side"]: (r["rows"], int(r["sum"])) for r in records if r["kind"] == "figures"
                   and r["day"] == day.isoformat()}
        for side in ("live", "kept", "replaced"):
            picked = [r[HASH_COLUMN] for r in mine.to_pylist() if r[SIDE_COLUMN] == side]
            assert (figures[side] == (len(picked), sum(picked))) if picked else (side not in figures)
        out = figures.get("out", (0, 0))
        assert out == (figures.get("live", (0, 0))[0] + figures.get("kept", (0, 0))[0],
                       figures.get("live", (0, 0))[1] + figures.get("kept", (0, 0))[1])
        (vec,) = [r for r in records if r["kind"] == "vectors" and r["day"] == day.isoformat()]
        assert vec["size"] == 2 and vec["rows"] == written.num_rows


@pytest.mark.parametrize("days,per_day,batch_rows", [(2, 500, 64), (1, 140_000, 10_000)])
def test_vector_files_are_byte_identical_to_the_staged_paths(tmp_path: Path, days, per_day, batch_rows) -> None:
    """Whatever batches Spark hands over (10,000 rows by default) and the staged files are read
    in, the vector files are the same bytes (encoded in chunks of BATCH_ROWS either way)."""
    rows = _rows(7, days, per_day)
    _run(_task(tmp_path / "one"), rows, batch_rows)
    for day in [dt.date(2026, 11, 10) + dt.timedelta(days=k) for k in range(days)]:
        mine = rows.filter(pa.compute.equal(rows.column("event_date"), pa.scalar(day, pa.date32())))
        staged = tmp_path / f"staged-{day}.parquet"
        pq.write_table(mine.filter(pa.compute.not_equal(mine.column(SIDE_COLUMN), "replaced")), staged,
                       row_group_size=50_000)  # batches end at row groups too
        encode_day(DayTask(day, (str(staged),), str(tmp_path / "two" / "vectors"), 1_790_000_000, SORT, PLAIN))
        for col in ("city_id", "fare"):
            name = f"{day:%Y%m%d}-1790000000"
            one = (tmp_path / "one" / "vectors" / col / name).read_bytes()
            assert one == (tmp_path / "two" / "vectors" / col / name).read_bytes()


@pytest.mark.parametrize("fault,rows_out,sum_changes", [("drop_row", -1, True), ("dup_row", 1, True),
                                                        ("change_value", 0, True)])
def test_a_fault_after_the_rows_were_counted_in_shows_in_the_figures_out(tmp_path: Path, fault, rows_out,
                                                                         sum_changes) -> None:
    rows = _rows(3, 2, 30)
    day = dt.date(2026, 11, 11)
    records = _run(_task(tmp_path, fault=fault, fault_day=day), rows, 8)
    for d in ("2026-11-10", "2026-11-11"):
        f = {r["side"]: (r["rows"], int(r["sum"])) for r in records if r["kind"] == "figures" and r["day"] == d}
        into = (f.get("live", (0, 0))[0] + f.get("kept", (0, 0))[0], f.get("live", (0, 0))[1] + f.get("kept", (0, 0))[1])
        if d == day.isoformat():
            assert f["out"][0] == into[0] + rows_out and (f["out"][1] != into[1]) == sum_changes
        else:
            assert f["out"] == into


def test_hash_sums_are_exact_beyond_64_bits() -> None:
    hashes = [2**63 - 1] * 5 + [-(2**63)] * 2 + [12345, -1]
    assert _hash_sum(pa.array(hashes, pa.int64())) == sum(hashes)
    assert _hash_sum(pa.chunked_array([pa.array(hashes[:4], pa.int64()), pa.array(hashes[4:], pa.int64())])) == sum(hashes)


@pytest.mark.parametrize("t,values", [(pa.float64(), [1.5, 2.5]), (pa.int32(), [1, 2]), (pa.string(), ["a", "bc"])])
def test_what_a_null_slot_held_does_not_change_the_bytes_of_a_vector_file(t, values) -> None:
    """Two arrays of the same values whose null slots hold different bytes (Spark's batches and
    Parquet's reader leave different things there) encode to the same vector file bytes."""
    import io

    import pyarrow.ipc as ipc

    from lakehouse.archive.encode import canonical

    def ipc_bytes(arr: pa.Array) -> bytes:
        sink = io.BytesIO()
        with ipc.new_file(sink, pa.schema([("value", arr.type)])) as w:
            w.write_table(pa.table({"value": canonical(arr)}))
        return sink.getvalue()

    a, b = pa.array([values[0], values[1], values[0]], t), pa.array([values[0], values[0], values[0]], t)
    validity = pa.array([True, False, True]).buffers()[1]
    one = pa.Array.from_buffers(t, 3, [validity, *a.buffers()[1:]], 1)
    two = pa.Array.from_buffers(t, 3, [validity, *b.buffers()[1:]], 1)
    assert one.to_pylist() == two.to_pylist() == [values[0], None, values[0]]
    assert ipc_bytes(one) == ipc_bytes(two)
