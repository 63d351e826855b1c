"""Group counts and sums from an archive day's run lengths (AresDB's pre-aggregation by runs).

Pure (Arrow and numpy; no engine, no IO). A day's batch is sorted by the sort columns c1..cn and
their runs nest (lakehouse.archive.rle): each run of ck is one distinct (c1..ck) of the day, and
its ``count`` is how many records hold it. So the day grouped by c1..ck is ck's runs, the keys of
the shallower columns found by the accumulative counts; no record is read.

A *measure* is a column aggregated within those groups: count (non-null), sum, min, max. Its
items are either a deeper sort column's runs (a value and how many records hold it) or a plain
vector file's values (one a record); each group's items lie next to each other, so every measure
is one ``reduceat`` over the items. What this module cannot give exactly, it refuses with
``Unsupported`` (the caller then reads the data files).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

KINDS = ("count", "sum", "min", "max")
"""What a measure gives a group: its non-null count, sum, minimum and maximum."""

_EXACT = float(1 << 62)
"""Sums whose double estimate stays under this are exact in 64-bit integers."""


class Unsupported(Exception):
    """The runs cannot give this aggregate exactly (the reason is the message)."""


@dataclass(frozen=True)
class Groups:
    """One day's groups at some depth: their keys (c1..ck, each an Arrow array), how many
    records each holds and where each ends in the day's record order."""

    keys: list[pa.Array]
    counts: np.ndarray
    ends: np.ndarray

    @property
    def starts(self) -> np.ndarray:
        """Where each group starts in the day's record order."""
        return np.concatenate(([0], self.ends[:-1])).astype(np.int64)

    def __len__(self) -> int:
        return len(self.counts)


def groups(runs: Sequence[pa.Table], total: int) -> Groups:
    """The groups of a day of ``total`` records by its first ``len(runs)`` sort columns, from
    their runs (``runs[j]``: column j's runs table, as a vector file holds it). With no runs,
    the whole day is one group."""
    if not runs:
        return Groups([], np.array([total], np.int64), np.array([total], np.int64))
    acc = [_acc(r) for r in runs]
    for j, a in enumerate(acc):
        if len(a) == 0 or int(a[-1]) != total:
            raise Unsupported(f"the runs of sort column {j + 1} hold {int(a[-1]) if len(a) else 0} records, "
                              f"the day {total}")
    ends = acc[-1]
    keys = []
    for r, a in zip(runs, acc):
        values = r.column("value").combine_chunks()
        keys.append(values if a is ends else values.take(pa.array(np.searchsorted(a, ends, side="left"))))
    counts = np.diff(np.concatenate(([0], ends))).astype(np.int64)
    return Groups(keys, counts, ends)


def stack(parts: Sequence[pa.Table], records: Sequence[int]) -> pa.Table:
    """The runs of consecutive batches (days) as the runs of one batch: each part's accumulative
    counts moved on by the records of the batches before it (``records``: each batch's). Every
    column's runs end where a batch ends, so stacked runs still nest."""
    if not parts:
        return _runs(pa.array([]), np.zeros(0, np.int64))
    whole = pa.concat_tables([t.select(["value", "accumulative_count"]).replace_schema_metadata(None) for t in parts])
    offsets = np.concatenate(([0], np.cumsum(records, dtype=np.int64)[:-1]))
    acc = _acc(whole) + np.repeat(offsets, [t.num_rows for t in parts])
    return _runs(whole.column("value").combine_chunks(), acc)


def batch_runs(values: pa.Array, records: Sequence[int]) -> pa.Table:
    """The runs of a column constant within each batch (a day's date): one run per batch."""
    return _runs(values, np.cumsum(records, dtype=np.int64))


def _runs(values: pa.Array, acc: np.ndarray) -> pa.Table:
    counts = np.diff(np.concatenate(([0], acc))).astype(np.int64)
    return pa.table({"value": values, "null": values.is_null(), "count": pa.array(counts, pa.int64()),
                     "accumulative_count": pa.array(acc, pa.int64())})


def row_groups(keys: Sequence[pa.Array]) -> tuple[Groups, np.ndarray]:
    """Rows in any order grouped by equal ``keys`` (nulls equal nulls; a group may be split where
    values are equal but not alike, such as 0.0 and -0.0: a finer grouping, which the query
    groups again): the groups, and the order of the rows that puts each group's rows together
    (take it before ``plain_items``)."""
    n = len(keys[0]) if keys else 0
    code = np.zeros(n, np.int64)
    span = 1
    for k in keys:
        d = pc.dictionary_encode(k)
        size = len(d.dictionary) + 1
        idx = np.asarray(pc.fill_null(d.indices, size - 1).to_numpy(), dtype=np.int64)
        if span * size >= 1 << 62:  # number the codes so far 0..m-1 again
            code = np.unique(code, return_inverse=True)[1].astype(np.int64)
            span = int(code.max()) + 1 if n else 1
        code, span = code * size + idx, span * size
    order = np.argsort(code)
    ordered = code[order]
    starts = np.flatnonzero(np.concatenate(([True], ordered[1:] != ordered[:-1]))) if n else np.zeros(0, np.int64)
    ends = np.append(starts[1:], n).astype(np.int64)
    first = pa.array(order[starts])
    return Groups([k.take(first) for k in keys], (ends - starts).astype(np.int64), ends), order


def _acc(runs: pa.Table) -> np.ndarray:
    return np.asarray(runs.column("accumulative_count").to_numpy(), dtype=np.int64)


def run_items(g: Groups, runs: pa.Table) -> tuple[pa.Array, np.ndarray, np.ndarray]:
    """A deeper sort column's runs as a measure's items: (values, weights, each group's first
    item). Its runs nest inside the groups', so each group's runs lie together."""
    acc = _acc(runs)
    if len(acc) == 0 or int(acc[-1]) != int(g.ends[-1]):
        raise Unsupported("a deeper sort column's runs do not cover the day")
    first = np.searchsorted(acc, g.starts, side="right")
    return runs.column("value").combine_chunks(), np.diff(np.concatenate(([0], acc))).astype(np.int64), first


def plain_items(g: Groups, values: pa.Array | pa.ChunkedArray) -> tuple[pa.Array, None, np.ndarray]:
    """A plain vector file's values (one a record, in record order) as a measure's items."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    if len(values) != int(g.ends[-1]):
        raise Unsupported(f"a plain vector file holds {len(values)} values, the day {int(g.ends[-1])} records")
    return values, None, g.starts


def sum_type(t: pa.DataType) -> pa.DataType:
    """Spark's type of ``sum`` over a column of Arrow type ``t`` (long, double, or a decimal ten
    digits wider); Unsupported for what the runs do not sum."""
    if pa.types.is_integer(t):
        return pa.int64()
    if pa.types.is_floating(t):
        return pa.float64()
    if pa.types.is_decimal(t) and t.precision <= 18:
        return pa.decimal128(min(38, t.precision + 10), t.scale)
    raise Unsupported(f"sum of {t} is not taken from vector files")


def aggregate(kind: str, values: pa.Array, weights: np.ndarray | None, first: np.ndarray) -> pa.Array:
    """One measure over every group: ``values`` the items (``weights``: how many records each
    stands for, None for one each), ``first`` each group's first item (groups in order, none
    empty). Spark's semantics: nulls skipped, a group of nulls gives null (count: 0); NaN is
    above every number (max is NaN when there is one; min only when all are)."""
    valid = np.asarray(values.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
    w = np.ones(len(values), np.int64) if weights is None else weights  # (live rows: a group each, few)
    nonnull = np.add.reduceat(np.where(valid, w, 0), first) if len(values) else np.zeros(0, np.int64)
    if kind == "count":
        return pa.array(nonnull, pa.int64())
    empty = nonnull == 0
    if kind == "sum":
        return _sum(values, valid, w, first, empty)
    if kind in ("min", "max"):
        return _extreme(kind, values, valid, first, empty)
    raise ValueError(f"unknown measure kind {kind!r}")


def _sum(values: pa.Array, valid: np.ndarray, w: np.ndarray, first: np.ndarray, empty: np.ndarray) -> pa.Array:
    t, out = values.type, sum_type(values.type)
    if pa.types.is_floating(t):
        v = np.where(valid, values.to_numpy(zero_copy_only=False).astype(np.float64), 0.0)
        with np.errstate(invalid="ignore", over="ignore"):  # inf - inf is NaN, as in Spark
            return pa.array(np.add.reduceat(v * w, first), out, mask=empty)
    ints = _integers(values, valid)
    estimate = np.add.reduceat(np.abs(ints.astype(np.float64)) * w, first)
    if len(estimate) and float(estimate.max()) >= _EXACT:
        sums = [int(x) for x in np.add.reduceat(ints.astype(object) * w.astype(object), first)]
        if pa.types.is_integer(t) and any(not -(1 << 63) <= s < (1 << 63) for s in sums):
            raise Unsupported("a group's sum leaves the 64-bit range")
    else:
        sums = np.add.reduceat(ints * w, first).tolist()
    if pa.types.is_integer(t):
        return pa.array(sums, out, mask=empty)
    scale = t.scale
    return pa.array([None if e else Decimal(s).scaleb(-scale) for s, e in zip(sums, empty)], out)


def _integers(values: pa.Array, valid: np.ndarray) -> np.ndarray:
    """Integer columns as int64; decimals (18 digits at most) as their unscaled int64; nulls 0."""
    t = values.type
    if pa.types.is_integer(t):
        return np.where(valid, pc.fill_null(values, 0).cast(pa.int64()).to_numpy(), 0)
    if pa.types.is_decimal(t) and t.precision <= 18:  # 16 bytes a value, two's complement: the low 8 hold it
        words = np.frombuffer(values.buffers()[1], dtype=np.int64, count=2 * (values.offset + len(values)))
        return np.where(valid, words[2 * values.offset::2], 0)
    raise Unsupported(f"sum of {t} is not taken from vector files")


def _extreme(kind: str, values: pa.Array, valid: np.ndarray, first: np.ndarray, empty: np.ndarray) -> pa.Array:
    t = values.type
    if pa.types.is_floating(t):
        v = values.to_numpy(zero_copy_only=False).astype(np.float64)
        if kind == "max":  # NaN propagates: Spark's max is NaN when the group has one
            got = np.maximum.reduceat(np.where(valid, v, -np.inf), first)
        else:  # fmin skips NaN unless all are: Spark's min
            got = np.fmin.reduceat(np.where(valid, v, np.nan), first)
        return pa.array(got, pa.float64(), mask=empty).cast(t)
    as_int = _int_view(t)
    if as_int is not None:
        v = np.asarray(values.view(as_int).to_numpy(zero_copy_only=False)).astype(np.int64) if valid.all() else \
            np.asarray(pc.fill_null(values.view(as_int), 0).to_numpy(), dtype=np.int64)
        fill = np.iinfo(np.int64).max if kind == "min" else np.iinfo(np.int64).min
        op = np.minimum if kind == "min" else np.maximum
        got = op.reduceat(np.where(valid, v, fill), first)
        return pa.array(got, pa.int64(), mask=empty).cast(as_int).view(t)
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_boolean(t) or pa.types.is_decimal(t):
        seg = np.repeat(np.arange(len(first), dtype=np.int64), np.diff(np.concatenate((first, [len(values)]))))
        agg = pa.table({"g": seg, "v": values}).group_by("g", use_threads=False).aggregate([("v", kind)])
        order = pc.sort_indices(agg.column("g"))
        return agg.column(f"v_{kind}").take(order).combine_chunks().cast(t)
    raise Unsupported(f"{kind} of {t} is not taken from vector files")


def _int_view(t: pa.DataType) -> pa.DataType | None:
    """The integer type an Arrow type's values are stored as, when ordering them is ordering
    those integers (integers, dates, timestamps, durations); None otherwise."""
    if pa.types.is_integer(t):
        return t
    if pa.types.is_date32(t):
        return pa.int32()
    if pa.types.is_date64(t) or pa.types.is_timestamp(t) or pa.types.is_duration(t):
        return pa.int64()
    return None
