"""Groups from run lengths (lakehouse.archive.rollup) against the rows they stand for.

Pure: sorted columns with nulls, NaN, infinities, -0.0, repeated values and decimals at their
precision are generated, run-length encoded as the archive encodes them, grouped at every depth,
and every measure (count, sum, min, max) of every other column compared with the same grouping
done row by row in plain Python with Spark's rules.
"""

from __future__ import annotations

import math
from decimal import Decimal
from itertools import groupby
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lakehouse.archive import rle, rollup

SMALL_INTS = st.one_of(st.none(), st.integers(-3, 3))
DOUBLES = st.one_of(st.none(), st.sampled_from([0.0, -0.0, 1.5, -2.25, math.nan, math.inf, -math.inf, 1e300]))
LONGS = st.one_of(st.none(), st.integers(-(2**62), 2**62))
DECIMALS = st.one_of(st.none(), st.decimals(min_value=Decimal("-9999999999999999.99"),
                                             max_value=Decimal("9999999999999999.99"), places=2,
                                             allow_nan=False, allow_infinity=False))
STRINGS = st.one_of(st.none(), st.sampled_from(["", "a", "b", "ß", "é", "\x00", "z"]))

TYPES = {"k1": pa.int32(), "k2": pa.string(), "k3": pa.float64(),
         "x": pa.float64(), "n": pa.int64(), "m": pa.decimal128(18, 2), "s": pa.string(), "i": pa.int32()}


def spark_key(v: Any) -> tuple[int, Any]:
    return rle.sort_key(v)


@st.composite
def days(draw: Any) -> list[dict[str, Any]]:
    n = draw(st.integers(1, 60))
    rows = [{"k1": draw(SMALL_INTS), "k2": draw(STRINGS), "k3": draw(DOUBLES), "x": draw(DOUBLES),
             "n": draw(LONGS), "m": draw(DECIMALS), "s": draw(STRINGS), "i": draw(SMALL_INTS)} for _ in range(n)]
    rows.sort(key=lambda r: (spark_key(r["k1"]), spark_key(r["k2"]), spark_key(r["k3"])))
    return rows


def expected(kind: str, values: list[Any]) -> Any:
    """Spark's aggregate over one group's values."""
    present = [v for v in values if v is not None]
    if kind == "count":
        return len(present)
    if not present:
        return None
    if kind == "sum":
        if isinstance(present[0], float):
            return math.fsum(present) if not any(math.isnan(v) or math.isinf(v) for v in present) else \
                sum(present)
        return sum(present)
    if isinstance(present[0], float):
        real = [v for v in present if not math.isnan(v)]
        if kind == "max":
            return math.nan if len(real) < len(present) else max(real)
        return min(real) if real else math.nan
    return min(present) if kind == "min" else max(present)


def same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        return a == b or math.isclose(a, b, rel_tol=1e-12)
    return a == b


@settings(max_examples=80, deadline=None)
@given(days())
def test_groups_and_measures_match_the_rows(rows):
    table = pa.table({c: pa.array([r[c] for r in rows], t) for c, t in TYPES.items()})
    runs = rle.encode([table.column(c).combine_chunks() for c in ("k1", "k2", "k3")])
    for depth in range(4):
        g = rollup.groups(runs[:depth], len(rows))
        keyed = [list(grp) for _, grp in groupby(rows, key=lambda r: tuple(spark_key(r[c]) for c in ("k1", "k2", "k3")[:depth]))]
        assert len(g) == len(keyed)
        assert g.counts.tolist() == [len(k) for k in keyed]
        for j, key in enumerate(g.keys):
            got = key.to_pylist()
            want = [grp[0][("k1", "k2", "k3")[j]] for grp in keyed]
            assert all(same(a, b) or (a is None and b is None) for a, b in zip(got, want))
        sources = {c: rollup.plain_items(g, table.column(c)) for c in ("x", "n", "m", "s", "i")}
        for j in range(depth, 3):  # a deeper sort column's runs
            sources[f"k{j + 1}"] = rollup.run_items(g, runs[j])
        for column, items in sources.items():
            for kind in rollup.KINDS:
                if kind == "sum" and column in ("s", "k2"):
                    with pytest.raises(rollup.Unsupported):
                        rollup.aggregate(kind, *items)
                    continue
                want = [expected(kind, [r[column] for r in grp]) for grp in keyed]
                if kind == "sum" and column == "n" and any(w is not None and abs(w) >= 2**63 for w in want):
                    with pytest.raises(rollup.Unsupported, match="64-bit"):
                        rollup.aggregate(kind, *items)
                    continue
                got = rollup.aggregate(kind, *items).to_pylist()
                assert all(same(a, b) for a, b in zip(got, want)), (column, kind, got, want)


def test_a_sum_past_64_bits_is_refused_and_a_decimal_sum_is_exact():
    values = pa.array([2**62, 2**62, 2**62], pa.int64())
    g = rollup.groups([], 3)
    with pytest.raises(rollup.Unsupported, match="64-bit"):
        rollup.aggregate("sum", *rollup.plain_items(g, values))
    big = pa.array([Decimal("9999999999999999.99")] * 3, pa.decimal128(18, 2))
    got = rollup.aggregate("sum", *rollup.plain_items(g, big))
    assert got.type == pa.decimal128(28, 2)
    assert got.to_pylist() == [Decimal("29999999999999999.97")]


def test_runs_that_disagree_with_the_day_are_refused():
    runs = rle.encode([pa.array([1, 1, 2], pa.int32())])
    with pytest.raises(rollup.Unsupported, match="hold 3 records, the day 4"):
        rollup.groups(runs, 4)
    g = rollup.groups(runs, 3)
    with pytest.raises(rollup.Unsupported, match="plain vector file holds 2"):
        rollup.plain_items(g, pa.array([1, 2]))


def test_weights_multiply_run_values():
    """A run of 10**6 records of 0.1 sums as 0.1 * 10**6 (the rule for doubles: within the
    stated relative tolerance of adding them one by one)."""
    g = rollup.Groups([pa.array([1], pa.int32())], np.array([10**6]), np.array([10**6]))
    deep = pa.table({"value": pa.array([0.1]), "null": [False], "count": pa.array([10**6], pa.int64()),
                     "accumulative_count": pa.array([10**6], pa.int64())})
    got = rollup.aggregate("sum", *rollup.run_items(g, deep)).to_pylist()[0]
    assert math.isclose(got, sum([0.1] * 10**6), rel_tol=1e-9)


def identity(v: Any) -> Any:
    """A key as row_groups tells keys apart: NaN alike, 0.0 and -0.0 apart, None alike."""
    if isinstance(v, float):
        return ("nan",) if math.isnan(v) else (v, math.copysign(1.0, v))
    return v


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(SMALL_INTS, STRINGS, DOUBLES), max_size=80))
def test_row_groups_put_each_key_in_one_group(rows):
    keys = [pa.array([r[i] for r in rows], t) for i, t in enumerate((pa.int32(), pa.string(), pa.float64()))]
    if not rows:
        return
    g, order = rollup.row_groups(keys)
    assert sorted(order.tolist()) == list(range(len(rows)))
    assert int(g.counts.sum()) == len(rows) and g.ends.tolist() == np.cumsum(g.counts).tolist()
    seen = set()
    for i, (start, end) in enumerate(zip(g.starts, g.ends)):
        members = {tuple(identity(v) for v in rows[j]) for j in order[start:end]}
        assert len(members) == 1, members
        key = members.pop()
        assert key not in seen
        seen.add(key)
        assert tuple(identity(k[i].as_py()) for k in g.keys) == key
    assert seen == {tuple(identity(v) for v in r) for r in rows}


@settings(max_examples=40, deadline=None)
@given(st.lists(days(), min_size=1, max_size=4))
def test_stacked_days_group_as_each_day_does(batches):
    """Days' runs stacked (each day a run of its date around them) give each day's groups, in
    day order, with the measures of deeper columns as each day gives them."""
    per_day, stacked_keys, deep, records = [], [[], []], [], []
    for b in batches:
        t = pa.table({c: pa.array([r[c] for r in b], TYPES[c]) for c in ("k1", "k2", "k3", "x")})
        runs = rle.encode([t.column(c).combine_chunks() for c in ("k1", "k2", "k3")])
        g = rollup.groups(runs[:2], t.num_rows)
        per_day.append((g, rollup.aggregate("sum", *rollup.run_items(g, runs[2])).to_pylist(),
                        rollup.aggregate("max", *rollup.plain_items(g, t.column("x"))).to_pylist(), t.column("x")))
        stacked_keys[0].append(runs[0])
        stacked_keys[1].append(runs[1])
        deep.append(runs[2])
        records.append(t.num_rows)
    dates = pa.array(list(range(len(batches))), pa.int32())
    g = rollup.groups([rollup.batch_runs(dates, records), rollup.stack(stacked_keys[0], records),
                       rollup.stack(stacked_keys[1], records)], sum(records))
    assert g.counts.tolist() == [c for d in per_day for c in d[0].counts.tolist()]
    assert g.keys[0].to_pylist() == [i for i, d in enumerate(per_day) for _ in range(len(d[0]))]
    for j in (1, 2):
        got = g.keys[j].to_pylist()
        want = [v for d in per_day for v in d[0].keys[j - 1].to_pylist()]
        assert all(same(a, b) or (a is None and b is None) for a, b in zip(got, want, strict=True))
    sums = rollup.aggregate("sum", *rollup.run_items(g, rollup.stack(deep, records))).to_pylist()
    assert all(same(a, b) for a, b in zip(sums, [v for d in per_day for v in d[1]], strict=True))
    xs = pa.concat_arrays([d[3].combine_chunks() for d in per_day])
    maxes = rollup.aggregate("max", *rollup.plain_items(g, xs)).to_pylist()
    assert all(same(a, b) for a, b in zip(maxes, [v for d in per_day for v in d[2]], strict=True))
