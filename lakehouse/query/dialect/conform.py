"""DuckDB's answer with Spark's result columns: Spark's names, and Spark's types where DuckDB's
differ but the values fit; refused where the printed answer (JSON) could differ from Spark's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lakehouse.errors import QueryError
from lakehouse.query.dialect.refuse import duck_refuse
from lakehouse.query.dialect.types import arrow_type

if TYPE_CHECKING:
    import pyarrow as pa

    from lakehouse.query.dialect.translate import Translation


def conform(result: pa.Table, tr: Translation) -> pa.Table:
    """DuckDB's result with Spark's column names and types; refuses what would change the JSON."""
    import pyarrow as pa

    if result.num_columns != len(tr.names):
        raise QueryError(f"duckdb: {result.num_columns} result columns, Spark has {len(tr.names)}")
    cols = []
    for i, (name, t) in enumerate(zip(tr.names, tr.types)):
        col = result.column(i)
        have = col.type
        want = arrow_type(t) if t else None
        if t == "void":  # a NULL literal: null on both engines, whatever DuckDB's type
            cols.append(col)
            continue
        if want is None:
            # A number whose Spark type is unknown could print differently (5 vs "5.00").
            if not (pa.types.is_string(have) or pa.types.is_boolean(have)
                    or pa.types.is_temporal(have) or pa.types.is_null(have)):
                raise duck_refuse(f"result column `{name}`",
                                  f"its Spark type is not derived here (DuckDB gives {have})")
            cols.append(col)
            continue
        if have != want:
            ok = (
                pa.types.is_null(have)
                or (pa.types.is_integer(want) and (pa.types.is_integer(have) or (
                    pa.types.is_decimal(have) and have.scale == 0)))
                or (pa.types.is_decimal(want) and (pa.types.is_decimal(have) or pa.types.is_integer(have)))
                or (pa.types.is_floating(want) and (pa.types.is_floating(have) or pa.types.is_integer(have)
                                                    or pa.types.is_decimal(have)))
                or (pa.types.is_timestamp(want) and pa.types.is_timestamp(have))
                or (pa.types.is_date(want) and (pa.types.is_date(have) or pa.types.is_timestamp(have)))
            )
            if not ok:
                raise duck_refuse(f"result column `{name}`",
                                  f"DuckDB computes {have} where Spark computes {t}")
            try:
                col = col.cast(want, safe=True)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
                raise QueryError(f"duckdb: result column `{name}` does not fit Spark's {t}: "
                                 f"{str(e).splitlines()[0]}") from None
        cols.append(col)
    return pa.Table.from_arrays(cols, names=tr.names)
