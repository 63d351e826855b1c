"""The vectorised parse of a clean CSV block: Arrow's CSV reader and casts, taken only when every
value is in a form the row converter reads identically (``lakehouse.grammar``); otherwise the
caller parses the block row by row (``lakehouse.ingest.parse``). Pure: a file's bytes in, Arrow
out.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from lakehouse import grammar, storage
from lakehouse.definitions import TableDefinition
from lakehouse.ingest.blocks import Block
from lakehouse.ingest.splitting import QUOTE, longest_line, quotes_follow_rfc4180
from lakehouse.staging import block_schema


class _Slow(Exception):
    """The vectorized path cannot vouch for this block: parse it row by row."""


def fast_csv_block(definition: TableDefinition, block: Block) -> pa.Table | None:
    """The block parsed with Arrow's CSV reader and vectorized casts, or None when any value is
    not in a form the row converter accepts identically (then the caller parses row by row)."""
    import pyarrow.compute as pc
    import pyarrow.csv as pcsv

    assert block.header is not None
    if block.end - block.start > definition.ingest.block_size + definition.ingest.max_record_bytes:
        return None  # a block stretched by an over-long record: stream it row by row instead
    with storage.open_read(block.path) as f:
        f.seek(block.start)
        data = f.read(block.end - block.start)
    if not data:
        return None
    if data.startswith(b"\xef\xbb\xbf"):
        return None  # Arrow drops a leading U+FEFF; the row path keeps it in the value
    buf = np.frombuffer(data, dtype=np.uint8)
    if not quotes_follow_rfc4180(buf, np.flatnonzero(buf == QUOTE), -1, -1, 0):
        return None  # Arrow reads `"x"y` as xy; Python's strict reader rejects it
    if longest_line(buf) > definition.ingest.max_record_bytes:
        return None  # the row path rejects the over-long record
    lines = data.count(b"\n") + (0 if data.endswith(b"\n") else 1)
    try:
        table = pcsv.read_csv(
            pa.py_buffer(data),
            read_options=pcsv.ReadOptions(column_names=list(block.header), use_threads=False),
            parse_options=pcsv.ParseOptions(newlines_in_values=False),
            convert_options=pcsv.ConvertOptions(
                column_types={h: pa.string() for h in block.header}, strings_can_be_null=True,
                quoted_strings_can_be_null=True, null_values=[""]),
        )
    except (pa.ArrowInvalid, pa.ArrowException):
        return None
    n = table.num_rows
    if n != lines:  # blank lines, lone CRs or newlines inside quotes: line numbers need the slow path
        return None
    required = set(definition.primary_key) | {definition.event_time}
    cols: list[pa.Array] = []
    try:
        for c in definition.columns:
            target = c.type.arrow()
            if c.name not in table.column_names:
                if not c.nullable or c.name in required:
                    raise _Slow
                cols.append(pa.nulls(n, target))
                continue
            raw = table.column(c.name).combine_chunks()
            if raw.null_count and (not c.nullable or c.name in required):
                raise _Slow
            cols.append(_fast_cast(raw, c.type.name, target, pc))
    except (_Slow, pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return None
    schema = block_schema(definition)
    nulls_s = pa.nulls(n, pa.string())
    cols += [
        pa.array(np.full(n, block.file_index, dtype=np.int32)),
        pa.array(np.arange(block.first_line, block.first_line + n, dtype=np.int64)),
        pa.array(np.zeros(n, dtype=np.int8)),
        nulls_s,
        nulls_s,
    ]
    return pa.Table.from_arrays(cols, schema=schema)


def _fast_cast(raw: pa.Array, kind: str, target: pa.DataType, pc: Any) -> pa.Array:
    """``raw`` (strings) cast to ``target``; _Slow when a value is not in a form both paths read
    alike."""
    def all_match(pattern: str) -> None:
        ok = pc.match_substring_regex(raw, pattern)
        if pc.sum(pc.invert(ok).cast(pa.int64())).as_py():
            raise _Slow

    def no_year_zero() -> None:  # Arrow reads year 0000; Python (the row path) does not
        if pc.any(pc.starts_with(raw, "0000")).as_py():
            raise _Slow

    if kind == "string":
        return raw
    if kind in ("int", "long"):
        all_match(grammar.ARROW_INTEGER)
        return pc.cast(raw, target)  # raises on overflow
    if kind == "double":
        all_match(grammar.NUMBER)
        return pc.add(pc.cast(raw, pa.float64()), 0.0)  # -0.0 -> 0.0, as the row converter does
    if kind == "decimal":
        all_match(grammar.ARROW_DECIMAL)
        return pc.cast(raw, target)  # raises when rounding or precision would lose data
    if kind == "boolean":
        low = pc.utf8_lower(raw)
        keys = pa.array(list(grammar.BOOLEAN_WORDS))
        idx = pc.index_in(low, value_set=keys)
        if idx.null_count != raw.null_count:
            raise _Slow
        return pc.take(pa.array(list(grammar.BOOLEAN_WORDS.values())), idx)
    if kind == "date":
        all_match(grammar.DATE)
        no_year_zero()
        return _in_range(pc.cast(raw, pa.date32()), _MIN_DATE, _MAX_DATE, pc)
    if kind == "timestamp":
        all_match(grammar.ARROW_TIMESTAMP)
        no_year_zero()
        s = pc.replace_substring_regex(raw, r"^(.{10}) ", r"\1T")
        zoned = pc.match_substring_regex(s, r"(Z|[+-][0-9]{2}:[0-9]{2})$")
        s = pc.if_else(zoned, s, pc.binary_join_element_wise(s, "Z", ""))
        return _in_range(pc.cast(s, target), _MIN_TS, _MAX_TS, pc)
    raise _Slow


_MIN_DATE, _MAX_DATE = pa.scalar(1 - 719163, pa.int32()), pa.scalar(2932896, pa.int32())
"""0001-01-01 and 9999-12-31 as days since the epoch."""
_MIN_TS = pa.scalar(-62135596800_000000, pa.int64())
_MAX_TS = pa.scalar(253402300799_999999, pa.int64())
"""0001-01-01T00:00:00Z and 9999-12-31T23:59:59.999999Z in microseconds since the epoch."""


def _in_range(values: pa.Array, lo: pa.Scalar, hi: pa.Scalar, pc: Any) -> pa.Array:
    """``values`` when all lie in [lo, hi] (as integers); else the row path decides (years 0
    and 10000, or an offset that moves an instant past 9999-12-31, are rejects there)."""
    ints = values.cast(lo.type)
    mm = pc.min_max(ints)
    if mm["min"].is_valid and (mm["min"].as_py() < lo.as_py() or mm["max"].as_py() > hi.as_py()):
        raise _Slow
    return values
