"""The schema of staged rows: what parsing a block yields, and what an insert or a load leaves in
its staging folder until the rows are committed.

A staged batch holds the table's columns (all nullable here) and bookkeeping columns: the file
the row came from (its index in the batch), its line (or record number), its kind (a good row,
a reject, or the one error of a whole file), and for rejects the raw record and the reason.
Pure: the parser writes these columns, the stream and live read them; none needs the other.
"""

from __future__ import annotations

import pyarrow as pa

from lakehouse.definitions import TableDefinition

FILE_COLUMN = "_lh_file"
"""The row's file, as its position in the batch (a later file wins over an earlier one)."""
LINE_COLUMN = "_lh_line"
"""The row's file line (text) or record number (Parquet); within a file the later line wins."""
KIND_COLUMN = "_lh_kind"
"""GOOD, REJECT or FILE_ERROR."""
RAW_COLUMN = "_lh_raw"
"""A reject's raw record (null for good rows)."""
REASON_COLUMN = "_lh_reason"
"""Why a row was rejected, or why its file failed (null for good rows)."""
GOOD, REJECT, FILE_ERROR = 0, 1, 2
"""Values of the kind column."""


def block_schema(definition: TableDefinition) -> pa.Schema:
    """What parsing a block yields: the table's columns (nullable here) and bookkeeping."""
    fields = [pa.field(c.name, c.type.arrow()) for c in definition.columns]
    fields += [
        pa.field(FILE_COLUMN, pa.int32()),
        pa.field(LINE_COLUMN, pa.int64()),
        pa.field(KIND_COLUMN, pa.int8()),
        pa.field(RAW_COLUMN, pa.string()),
        pa.field(REASON_COLUMN, pa.string()),
    ]
    return pa.schema(fields)
