"""Nested run-length encoding of sorted columns, streamed over Arrow batches; decoding; lookup.

Pure (Arrow and numpy, no engine, no IO). For sort columns c1..cn of rows sorted by them, a run
of column k ends wherever the value of any of c1..ck changes, so every run of c(k+1) lies inside
exactly one run of ck. Each run stores ``value`` (null for a null run), ``null``, ``count`` and
``accumulative_count`` (records up to and including the run). Nulls equal nulls and NaN equals
NaN for the purpose of runs.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

RUN_FIELDS = ("value", "null", "count", "accumulative_count")


def run_schema(value_type: pa.DataType) -> pa.Schema:
    """The schema of a run-length-encoded vector file."""
    return pa.schema([
        pa.field("value", value_type),
        pa.field("null", pa.bool_(), nullable=False),
        pa.field("count", pa.int64(), nullable=False),
        pa.field("accumulative_count", pa.int64(), nullable=False),
    ])


def _changes(arr: pa.Array, prev: pa.Array | None) -> np.ndarray:
    """Boolean per row: does the value differ from the row before (null- and NaN-aware)?

    Row 0 compares with ``prev`` (the last row of the previous batch) or is a change when none.
    """
    n = len(arr)
    if n == 0:
        return np.zeros(0, dtype=bool)
    full = pa.concat_arrays([prev.cast(arr.type), arr]) if prev is not None else arr
    cur, before = full.slice(1), full.slice(0, len(full) - 1)
    valid_cur = np.asarray(cur.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
    valid_before = np.asarray(before.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
    neq = pc.not_equal(cur, before)
    if pa.types.is_floating(arr.type):
        both_nan = pc.and_(pc.is_nan(cur), pc.is_nan(before))
        neq = pc.and_(neq, pc.invert(both_nan))
    neq_np = np.asarray(pc.fill_null(neq, False).to_numpy(zero_copy_only=False), dtype=bool)
    diff = (valid_cur != valid_before) | (valid_cur & valid_before & neq_np)
    if prev is None:
        return np.concatenate([[True], diff])
    return diff


@dataclass
class _Open:
    """The run still open at the end of the rows seen so far."""

    value: pa.Scalar
    start: int


class RunEncoder:
    """Streams batches of sorted rows (the sort columns, in order) into nested runs.

    ``push`` returns, per column, an Arrow table of the runs that closed in that batch;
    ``finish`` closes the open runs. Memory is bounded by the batch size.
    """

    def __init__(self, types: Sequence[pa.DataType]) -> None:
        self.types = list(types)
        self.schemas = [run_schema(t) for t in self.types]
        self._prev: list[pa.Array | None] = [None] * len(self.types)
        self._open: list[_Open | None] = [None] * len(self.types)
        self.rows = 0

    def push(self, columns: Sequence[pa.Array | pa.ChunkedArray]) -> list[pa.Table]:
        """Add the next rows; the runs each column closed."""
        cols = [c.combine_chunks() if isinstance(c, pa.ChunkedArray) else c for c in columns]
        if len(cols) != len(self.types):
            raise ValueError(f"expected {len(self.types)} columns, got {len(cols)}")
        n = len(cols[0]) if cols else 0
        out = []
        boundary = np.zeros(n, dtype=bool)
        for k, arr in enumerate(cols):
            boundary = boundary | _changes(arr, self._prev[k])
            starts = np.flatnonzero(boundary)
            out.append(self._close_runs(k, arr, starts))
            if n:
                self._prev[k] = arr.slice(n - 1, 1)
        self.rows += n
        return out

    def _close_runs(self, k: int, arr: pa.Array, starts: np.ndarray) -> pa.Table:
        schema = self.schemas[k]
        open_run = self._open[k]
        if len(starts) == 0:
            return schema.empty_table()
        global_starts = starts.astype(np.int64) + self.rows
        # runs closing now: the open one (if any) and all but the last new one
        closing_starts = global_starts[:-1]
        closing_values = arr.take(pa.array(starts[:-1], pa.int64()))
        if open_run is not None:
            closing_starts = np.concatenate([[open_run.start], closing_starts])
            closing_values = pa.concat_arrays([pa.array([open_run.value.as_py()], arr.type), closing_values])
        ends = global_starts if open_run is not None else global_starts[1:]
        self._open[k] = _Open(arr[int(starts[-1])], int(global_starts[-1]))
        if len(closing_starts) == 0:
            return schema.empty_table()
        return _runs_table(schema, closing_values, closing_starts, ends)

    def finish(self) -> list[pa.Table]:
        """Close the open runs; the last runs of each column."""
        out = []
        for k, schema in enumerate(self.schemas):
            o = self._open[k]
            if o is None:
                out.append(schema.empty_table())
                continue
            values = pa.array([o.value.as_py()], self.types[k])
            out.append(_runs_table(schema, values, np.array([o.start]), np.array([self.rows])))
            self._open[k] = None
        return out


def _runs_table(schema: pa.Schema, values: pa.Array, starts: np.ndarray, ends: np.ndarray) -> pa.Table:
    counts = (ends - starts).astype(np.int64)
    return pa.table(
        [values, values.is_null(), pa.array(counts, pa.int64()), pa.array(ends.astype(np.int64), pa.int64())],
        schema=schema,
    )


def encode(columns: Sequence[pa.Array], batch_size: int = 65_536) -> list[pa.Table]:
    """Encode whole columns at once (tests and small data); one runs table per column."""
    if not columns:
        return []
    enc = RunEncoder([c.type for c in columns])
    parts: list[list[pa.Table]] = [[] for _ in columns]
    n = len(columns[0])
    for off in range(0, n, batch_size):
        for k, t in enumerate(enc.push([c.slice(off, batch_size) for c in columns])):
            parts[k].append(t)
    for k, t in enumerate(enc.finish()):
        parts[k].append(t)
    return [pa.concat_tables(p) for p in parts]


def decode(runs: pa.Table) -> pa.Array:
    """Expand a runs table back into one value per record."""
    counts = runs.column("count").to_numpy()
    if len(counts) == 0:
        return pa.array([], runs.schema.field("value").type)
    idx = np.repeat(np.arange(len(counts), dtype=np.int64), counts)
    values = runs.column("value").combine_chunks()
    return values.take(pa.array(idx))


def check_runs(runs: pa.Table, files: Sequence[int] | None = None) -> list[str]:
    """Internal consistency of a runs table (counts add up, null flags match values); ``files``:
    the runs of several files end to end, how many runs each holds (each file's running sum
    starts again)."""
    problems = []
    counts = runs.column("count").to_numpy()
    acc = runs.column("accumulative_count").to_numpy()
    if len(counts) and (counts <= 0).any():
        problems.append("a run has a count of zero or less")
    running = np.cumsum(counts)
    if files is not None:  # less the records of the files before each run's
        first = np.concatenate(([0], np.cumsum(files)))[:-1]
        running = running - np.repeat(np.concatenate(([0], running))[first], files)
    if len(counts) and not np.array_equal(running, acc):
        problems.append("accumulative_count is not the running sum of count")
    nulls = runs.column("null").to_numpy(zero_copy_only=False)
    value_nulls = runs.column("value").is_null().to_numpy(zero_copy_only=False)
    if not np.array_equal(nulls, value_nulls):
        problems.append("the null flag disagrees with the value")
    return problems


# -- lookup ---------------------------------------------------------------------------------------


class RunColumn:
    """Random access to one column's runs, counting how many entries a search touches.

    ``materialize``: the runs as Python values (a list each) instead of Arrow arrays, searched
    with ``bisect`` (the same probes as ``_first``, counted through its key): for a reader that
    keeps a day's runs and looks up many times (``fresh`` gives a column over the same runs with
    its own count)."""

    __slots__ = ("_acc", "_plain", "_values", "n", "touched")

    def __init__(self, runs: pa.Table, materialize: bool = False) -> None:
        values = runs.column("value").combine_chunks()
        acc = runs.column("accumulative_count").combine_chunks()
        self._plain = materialize
        self._values: Any = values.to_pylist() if materialize else values
        self._acc: Any = acc.to_pylist() if materialize else acc
        self.touched = 0
        self.n = runs.num_rows

    def acc(self, i: int) -> int:
        """The accumulative count of run ``i`` (records up to and including it), counted as touched."""
        self.touched += 1
        return self._acc[i] if self._plain else int(self._acc[i].as_py())  # type: ignore[no-any-return]

    def value(self, i: int) -> Any:
        """The value of run ``i``, counted as touched."""
        self.touched += 1
        return self._values[i] if self._plain else self._values[i].as_py()

    def first_acc_above(self, count: int, lo: int) -> int:
        """The first run from ``lo`` whose accumulative count is above ``count`` (n if none)."""
        if self._plain:
            return bisect.bisect_right(self._acc, count, lo, self.n, key=self._touch)
        return _first(lo, self.n, lambda i: self.acc(i) > count)

    def first_acc_at_least(self, count: int, lo: int) -> int:
        """The first run from ``lo`` whose accumulative count is ``count`` or more (n if none)."""
        if self._plain:
            return bisect.bisect_left(self._acc, count, lo, self.n, key=self._touch)
        return _first(lo, self.n, lambda i: self.acc(i) >= count)

    def first_value_at_least(self, key: tuple[int, Any], lo: int, hi: int) -> int:
        """The first run in [lo, hi) whose value's ``sort_key`` is ``key`` or more (hi if none)."""
        if self._plain:
            return bisect.bisect_left(self._values, key, lo, hi, key=self._touch_key)
        return _first(lo, hi, lambda i: sort_key(self.value(i)) >= key)

    def _touch(self, v: Any) -> Any:
        self.touched += 1
        return v

    def _touch_key(self, v: Any) -> tuple[int, Any]:
        self.touched += 1
        return sort_key(v)

    def fresh(self) -> RunColumn:
        """The same runs (shared, not copied), with nothing touched yet."""
        column = RunColumn.__new__(RunColumn)
        column._plain, column._values, column._acc, column.n = self._plain, self._values, self._acc, self.n
        column.touched = 0
        return column


def sort_key(v: Any) -> tuple[int, Any]:
    """Spark's ascending order with nulls first and NaN after every other number."""
    if v is None:
        return (0, 0)
    if isinstance(v, float) and math.isnan(v):
        return (2, 0)
    return (1, v)


def _first(lo: int, hi: int, pred: Callable[[int], bool]) -> int:
    """The first index in [lo, hi) where the monotone ``pred`` holds (hi if none)."""
    while lo < hi:
        mid = (lo + hi) // 2
        if pred(mid):
            hi = mid
        else:
            lo = mid + 1
    return lo


@dataclass(frozen=True)
class Range:
    """Records [start, end) of a day batch."""

    start: int
    end: int

    @property
    def count(self) -> int:
        """How many records the range holds."""
        return self.end - self.start


def lookup(columns: Sequence[RunColumn], values: Sequence[Any], total: int) -> Range:
    """The record range whose first len(values) sort columns equal ``values``.

    Binary search per column: first the runs of column k that lie inside the range found for
    column k-1 (by accumulative count), then the run with the wanted value among them (by value;
    they are sorted because the records are). O(k log runs) entries are touched.
    """
    if len(values) > len(columns):
        raise ValueError(f"{len(values)} values for {len(columns)} sort columns")
    start, end = 0, total
    for col, wanted in zip(columns, values):
        if start >= end:
            return Range(start, start)
        # runs r0..r1-1 cover [start, end): acc(r) > start ... acc(r) >= end
        r0 = col.first_acc_above(start, 0)
        r1 = col.first_acc_at_least(end, r0) + 1
        key = sort_key(wanted)
        r = col.first_value_at_least(key, r0, r1)
        if r >= r1 or sort_key(col.value(r)) != key:
            pos = start if r == r0 else col.acc(r - 1)
            return Range(pos, pos)
        new_start = start if r == r0 else col.acc(r - 1)
        start, end = new_start, col.acc(r)
    return Range(start, end)


def naive_lookup(rows: Iterable[Sequence[Any]], values: Sequence[Any]) -> Range:
    """The same answer by scanning records (the model property tests compare against)."""
    rows = list(rows)
    k = len(values)
    want = tuple(sort_key(v) for v in values)
    hits = [i for i, r in enumerate(rows) if tuple(sort_key(v) for v in r[:k]) == want]
    if not hits:
        # insertion point: first record whose prefix is greater
        pos = next((i for i, r in enumerate(rows) if tuple(sort_key(v) for v in r[:k]) > want), len(rows))
        return Range(pos, pos)
    return Range(hits[0], hits[-1] + 1)
