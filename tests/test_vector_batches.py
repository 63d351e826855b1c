"""The vector check's batch comparison (``audit.files._batch_matches``) against its day-by-day
check (``_day_problems``): generated days, vector files built as the archive writes them, then
one of the ways a file can be wrong. The batch says "all match" exactly when no day has a
problem, so the fast path never hides a finding the day-by-day check would report."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from lakehouse.archive import rle
from lakehouse.audit.files import _batch_matches, _batches, _day_problems

WANTED = ["city", "fare"]
RLE = ("city",)
DAY0 = dt.date(2026, 11, 1)

days_strategy = st.lists(
    st.lists(st.tuples(st.one_of(st.none(), st.integers(0, 3)),
                       st.one_of(st.none(), st.floats(-5, 5, allow_nan=False, width=32))), max_size=12),
    min_size=1, max_size=6)
harm = st.one_of(st.none(), st.tuples(
    st.sampled_from(["value", "count", "acc", "null", "missing", "unreadable", "short", "plain value"]),
    st.integers(0, 50), st.integers(0, 50)))


def _read(days: list[list[tuple]]) -> list[tuple[pa.Table, dict]]:
    out = []
    for i, rows in enumerate(days):
        city = pa.array([r[0] for r in rows], pa.int32())
        fare = pa.array([r[1] for r in rows], pa.float64())
        table = pa.table({"city": city, "fare": fare})
        runs = rle.encode([city])[0]
        out.append((table, {"city": (f"city/{i}", runs),
                            "fare": (f"fare/{i}", pa.table({"value": fare}))}))
    return out


def _harmed(read: list, how: tuple | None) -> list:
    if how is None:
        return read
    kind, day, at = how
    table, vectors = read[day % len(read)]
    vectors = dict(vectors)
    path, runs = vectors["city"]
    if kind == "missing":
        vectors["city"] = None
    elif kind == "unreadable":
        vectors["city"] = (path, OSError("not an Arrow file"))
    elif kind == "plain value":
        if table.num_rows == 0:
            return read
        values = vectors["fare"][1].column("value").to_pylist()
        values[at % len(values)] = 99.0
        vectors["fare"] = (vectors["fare"][0], pa.table({"value": pa.array(values, pa.float64())}))
    elif runs.num_rows == 0:
        if kind != "short":
            return read
        vectors["city"] = (path, pa.table({"value": pa.array([1], pa.int32()), "null": [False], "count": [1],
                                           "accumulative_count": [1]}, schema=runs.schema))
    else:
        k = at % runs.num_rows
        cols = {n: runs.column(n).to_pylist() for n in runs.column_names}
        if kind == "value":
            cols["value"][k] = 7 if cols["value"][k] != 7 else 6
            cols["null"][k] = False
        elif kind == "count":
            cols["count"][k] += 1
        elif kind == "acc":
            cols["accumulative_count"][k] += 1
        elif kind == "null":
            cols["null"][k] = not cols["null"][k]
        elif kind == "short":
            cols = {n: v[:-1] for n, v in cols.items()}
        vectors["city"] = (path, pa.table(cols, schema=runs.schema))
    out = list(read)
    out[day % len(read)] = (table, vectors)
    return out


@settings(max_examples=300, deadline=None)
@given(days_strategy, harm)
def test_a_batch_matches_exactly_when_no_day_has_a_problem(days, how):
    read = _harmed(_read(days), how)
    problems = [p for i, (rows, vectors) in enumerate(read)
                for p in _day_problems(DAY0 + dt.timedelta(days=i), rows, vectors, WANTED, RLE)[1]]
    assert _batch_matches(read, WANTED, RLE) == (not problems), problems


def test_nan_is_left_to_the_day_by_day_check():
    rows = pa.table({"city": pa.array([1], pa.int32()), "fare": pa.array([float("nan")])})
    read = [(rows, {"city": ("c", rle.encode([rows.column("city").combine_chunks()])[0]),
                    "fare": ("f", pa.table({"value": pa.array([float("nan")])}))})]
    assert not _batch_matches(read, WANTED, RLE)
    assert _day_problems(DAY0, *read[0], WANTED, RLE) == (2, [])


def test_batches_hold_whole_days_up_to_the_rows_given():
    days = [DAY0 + dt.timedelta(days=i) for i in range(5)]
    rows = dict(zip(days, [3, 3, 10, 1, 1], strict=True))
    assert list(_batches(days, rows, 6)) == [days[:2], [days[2]], days[3:]]
    assert list(_batches([], rows, 6)) == []
    assert np.concatenate([np.array(b, dtype=object) for b in _batches(days, rows, 1)]).tolist() == days


def test_vector_files_read_whole_or_mapped_give_the_same_table(tmp_path, monkeypatch):
    """``storage.arrow_buffer``: a small file read at once, one from ``MAP_BYTES`` on memory-mapped,
    a ``file://`` URI like its path; a missing file is FileNotFoundError."""
    import pyarrow.ipc as ipc
    import pytest

    from lakehouse import storage
    from lakehouse.archive.vectors import read

    runs = rle.encode([pa.array([1, 1, None, 2, 2, 2], pa.int32())])[0]
    path = tmp_path / "city" / "20261101-1795651200"
    path.parent.mkdir()
    with ipc.new_file(str(path), runs.schema) as w:
        w.write_table(runs)
    assert not isinstance(storage.arrow_buffer(str(path)), pa.MemoryMappedFile)
    whole = read(str(path))
    monkeypatch.setattr(storage, "MAP_BYTES", 1)
    assert isinstance(storage.arrow_buffer(str(path)), pa.MemoryMappedFile)
    assert read(str(path)).equals(whole) and read(f"file://{path}").equals(whole) and whole.equals(runs)
    with pytest.raises(FileNotFoundError):
        storage.arrow_buffer(str(tmp_path / "nope"))
