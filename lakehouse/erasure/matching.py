"""Which rows a delete's predicate matches, for rows held as Arrow (a producer's staged rows, the
parsed records of rejects): the predicate run on DuckDB with Spark's semantics (lakehouse's
translation of Spark SQL, as ``query --engine duckdb``), so that a row is erased from staging or
rejects exactly when Spark's ``DELETE ... WHERE`` erases it from live and the archive (a NULL
condition keeps the row, as in SQL). The DuckDB database reads no file: the rows are handed in.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lakehouse.definitions import PARTITION_COLUMN, TableDefinition
from lakehouse.erasure.predicate import Predicate, parse
from lakehouse.errors import InputError, QueryError, first_line

if TYPE_CHECKING:
    import pyarrow as pa

ROWS = "_lh_erase_rows"
INDEX = "_lh_erase_index"


def check(definition: TableDefinition, text: str) -> Predicate:
    """The predicate a delete takes: ``predicate.parse``'s checks, and one DuckDB can evaluate
    with Spark's semantics (what it cannot, e.g. RLIKE's Java patterns, is refused in one line
    before anything is erased anywhere)."""
    import pyarrow as pa

    p = parse(definition, text)
    empty = pa.schema([(c.name, c.type.arrow()) for c in definition.columns]).empty_table()
    matches(definition, p, empty.append_column(PARTITION_COLUMN, pa.array([], pa.date32())), translate_only=True)
    return p


def matches(definition: TableDefinition, predicate: Predicate, rows: pa.Table, translate_only: bool = False) -> pa.Array:
    """A boolean per row of ``rows`` (the table's columns; ``event_date`` is derived from the
    event time when absent): True where the predicate is true."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from lakehouse.query import duckdb as duck
    from lakehouse.query.duckdb import table_columns, translate

    if rows.num_rows == 0 and not translate_only:
        return pa.array([], pa.bool_())
    if PARTITION_COLUMN not in rows.column_names:
        et = pc.cast(rows[definition.event_time], pa.timestamp("us", tz="UTC"))
        rows = rows.append_column(PARTITION_COLUMN, pc.cast(et, pa.date32()))
    rows = rows.select(definition.visible_columns).append_column(INDEX, pa.array(range(rows.num_rows), pa.int64()))
    columns = [*table_columns(definition), (INDEX, "bigint")]
    sql = f"SELECT `{INDEX}` FROM `{ROWS}` WHERE {predicate.sql}"
    try:
        tr = translate([], sql, {ROWS: columns})
    except QueryError as e:
        raise InputError(f"{definition.name}: --where {predicate.text!r}: {first_line(e)}") from None
    if translate_only:
        return pa.array([], pa.bool_())
    con = duck.sealed_database().cursor()
    try:
        duck.hand_in(con, ROWS, rows)  # (a DuckDB table: Spark's NaN comparisons hold there)
        hit = con.execute(tr.sql).fetch_arrow_table().column(0)
    except Exception as e:  # noqa: BLE001 - any engine failure becomes one line
        raise InputError(f"{definition.name}: --where {predicate.text!r} cannot be evaluated: {first_line(e)}") from None
    finally:
        con.close()
    mask = [False] * rows.num_rows
    for i in hit.to_pylist():
        mask[int(i)] = True
    return pa.array(mask, pa.bool_())
