"""Delta file statistics of a data file the archive writes itself (the one-pass archive's tasks),
gathered batch by batch as the file is written, in the JSON of an add action's ``stats``.

As Delta's own writer records them, on the columns of ``delta.dataSkippingStatsColumns``
(``physical.stats_columns``): ``numRecords``; ``nullCount`` of each; ``minValues`` and
``maxValues`` where they are safe bounds for every reader. Readers skip a file on these bounds,
so a bound that is not one loses rows; where a safe bound cannot be written the column has none
in that file (it is then never skipped on), never a guess:

- timestamps to the millisecond, as Delta writes them: the minimum rounded down, the maximum up;
- strings of up to ``STRING_PREFIX`` characters as they are; a longer minimum as its prefix (a
  prefix sorts first); a longer maximum has no bound;
- a float column holding NaN or an infinity has no bounds (JSON holds neither);
- booleans, decimals and binary columns have null counts only.

Plain Arrow; no Spark, nothing written."""

from __future__ import annotations

import datetime as dt
import json
import math
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

STRING_PREFIX = 32
"""Delta's ``delta.dataSkippingStringPrefixLength`` default: the characters a string bound keeps."""

_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)


def _bounded(t: pa.DataType) -> bool:
    """Whether a column of type ``t`` gets min/max bounds at all."""
    return (pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_date(t)
            or pa.types.is_timestamp(t) or pa.types.is_string(t) or pa.types.is_large_string(t))


def _millis_text(micros: int) -> str:
    """An instant (microseconds since the epoch, on the millisecond) as Delta's statistics write it."""
    t = _EPOCH + dt.timedelta(microseconds=micros)
    return (f"{t.year:04d}-{t.month:02d}-{t.day:02d}T{t.hour:02d}:{t.minute:02d}:{t.second:02d}."
            f"{t.microsecond // 1000:03d}Z")


class FileStats:
    """The statistics of one file of ``columns`` (name -> Arrow type), batch by batch."""

    def __init__(self, columns: dict[str, pa.DataType]) -> None:
        self.columns = columns
        self.rows = 0
        self.nulls = dict.fromkeys(columns, 0)
        self.low: dict[str, Any] = {}
        self.high: dict[str, Any] = {}
        self.unbounded: set[str] = {c for c, t in columns.items() if not _bounded(t)}
        """Columns this file records no bounds for."""

    def add(self, batch: pa.RecordBatch | pa.Table) -> None:
        """Count ``batch``, written to the file, into the statistics."""
        self.rows += batch.num_rows
        for name, t in self.columns.items():
            arr = batch.column(name)
            self.nulls[name] += arr.null_count
            if name in self.unbounded or arr.null_count == len(arr):
                continue
            if pa.types.is_floating(t) and pc.any(pc.invert(pc.is_finite(arr))).as_py():
                self.unbounded.add(name)
                continue
            if pa.types.is_timestamp(t):
                arr = arr.cast(pa.timestamp("us", tz="UTC")).cast(pa.int64())
            elif pa.types.is_date(t):
                arr = arr.cast(pa.date32())
            mm = pc.min_max(arr)
            lo, hi = mm["min"].as_py(), mm["max"].as_py()
            if name not in self.low or lo < self.low[name]:
                self.low[name] = lo
            if name not in self.high or hi > self.high[name]:
                self.high[name] = hi

    def _bounds(self, name: str) -> tuple[Any, Any]:
        """The JSON (min, max) of a column (None where there is no safe bound)."""
        if name in self.unbounded or name not in self.low:
            return None, None
        t = self.columns[name]
        lo, hi = self.low[name], self.high[name]
        if pa.types.is_timestamp(t):
            return _millis_text(lo - lo % 1000), _millis_text(hi + (-hi) % 1000)
        if pa.types.is_date(t):
            return lo.isoformat(), hi.isoformat()
        if isinstance(lo, str):
            return lo[:STRING_PREFIX], hi if len(hi) <= STRING_PREFIX else None
        if isinstance(lo, float) and not (math.isfinite(lo) and math.isfinite(hi)):
            return None, None
        return lo, hi

    def as_dict(self) -> dict[str, Any]:
        """The statistics as an add action's ``stats`` document."""
        low, high = {}, {}
        for name in self.columns:
            lo, hi = self._bounds(name)
            if lo is not None:
                low[name] = lo
            if hi is not None:
                high[name] = hi
        return {"numRecords": self.rows, "minValues": low, "maxValues": high, "nullCount": dict(self.nulls)}

    def json(self) -> str:
        """``as_dict`` as the JSON text an add action carries."""
        return json.dumps(self.as_dict(), separators=(",", ":"), allow_nan=False)
