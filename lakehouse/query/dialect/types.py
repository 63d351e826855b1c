"""Spark's types as this package names them, and Spark's rules for combining them.

A type is Spark's simpleString: int, bigint, double, decimal(10,2), string, ... or None when the
dialect cannot tell (then DuckDB's type is kept, unless that could change the JSON). ``void`` is
the type of a NULL literal. The rules are Spark 4's with ANSI mode on and
spark.sql.decimalOperations.allowPrecisionLoss=true, as lakehouse's session runs it.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from sqlglot import exp

if TYPE_CHECKING:
    import pyarrow as pa

Columns = list[tuple[str, "str | None"]]
"""A source's columns in order: (name, Spark type or None)."""

INTEGRAL = ("tinyint", "smallint", "int", "bigint")
"""Spark's integral types, narrowest first."""
FRACTIONAL = ("float", "double")
"""Spark's binary floating-point types."""
MAX_PRECISION = 38
"""The largest precision of a Spark decimal."""
COLUMN_TYPES = {"string": "string", "int": "int", "long": "bigint", "double": "double",
                "boolean": "boolean", "date": "date", "timestamp": "timestamp"}
"""lakehouse column types (lakehouse.types.ColumnType names) as Spark types."""

_DEC = re.compile(r"^decimal\((\d+),(\d+)\)$")


def decimal_of(t: str | None) -> tuple[int, int] | None:
    """(precision, scale) of a decimal type; None for any other type."""
    m = _DEC.match(t or "")
    return (int(m.group(1)), int(m.group(2))) if m else None


def dec(p: int, s: int) -> str:
    """The decimal type of precision ``p`` and scale ``s``."""
    return f"decimal({p},{s})"


def bounded(p: int, s: int) -> str:
    """DecimalType.bounded: precision and scale capped at 38."""
    return dec(min(p, MAX_PRECISION), min(s, MAX_PRECISION))


def adjust(p: int, s: int) -> str:
    """DecimalType.adjustPrecisionScale (spark.sql.decimalOperations.allowPrecisionLoss=true)."""
    if p <= MAX_PRECISION:
        return dec(p, s)
    int_digits = p - s
    min_scale = min(s, 6)
    return dec(MAX_PRECISION, max(MAX_PRECISION - int_digits, min_scale))


def is_numeric(t: str | None) -> bool:
    """Whether ``t`` is an integral, floating-point or decimal type."""
    return t in INTEGRAL or t in FRACTIONAL or decimal_of(t) is not None


def as_decimal(t: str | None, literal: exp.Expression | None = None) -> tuple[int, int] | None:
    """An integral type as Spark widens it for decimal arithmetic (literals: their digits)."""
    d = decimal_of(t)
    if d:
        return d
    if isinstance(literal, exp.Literal) and not literal.is_string and t in INTEGRAL:
        return (max(len(literal.this.lstrip("-")), 1), 0)
    return {"tinyint": (3, 0), "smallint": (5, 0), "int": (10, 0), "bigint": (20, 0)}.get(t or "")


def wider(a: str | None, b: str | None) -> str | None:
    """The common type of two branches (CASE, COALESCE, UNION), for the types handled here."""
    if a == b or b == "void":
        return a
    if a == "void":
        return b
    if a is None or b is None:
        return None
    if a in INTEGRAL and b in INTEGRAL:
        return max(a, b, key=INTEGRAL.index)
    if a in FRACTIONAL or b in FRACTIONAL:
        return "double" if is_numeric(a) and is_numeric(b) else None
    da, db = as_decimal(a), as_decimal(b)
    if da and db:
        s = max(da[1], db[1])
        return bounded(max(da[0] - da[1], db[0] - db[1]) + s, s)
    if {a, b} == {"date", "timestamp"}:
        return "timestamp"
    return None


def arithmetic(e: exp.Expression, a: str | None, b: str | None) -> str | None:
    """Spark's result type of + - * / % on two operand types (ANSI, precision loss allowed)."""
    if a is None or b is None:
        return None
    if a == "void" or b == "void":
        return a if b == "void" else b
    if isinstance(e, exp.Div) and not (decimal_of(a) or decimal_of(b)):
        return "double" if is_numeric(a) and is_numeric(b) else None
    if a in FRACTIONAL or b in FRACTIONAL:
        return "double"
    if a in INTEGRAL and b in INTEGRAL:
        return max(a, b, key=INTEGRAL.index)
    da = as_decimal(a, e.this if isinstance(e.this, exp.Literal) else None)
    db = as_decimal(b, e.expression if isinstance(e.expression, exp.Literal) else None)
    if not da or not db:
        return None
    (p1, s1), (p2, s2) = da, db
    if isinstance(e, (exp.Add, exp.Sub)):
        s = max(s1, s2)
        return adjust(max(p1 - s1, p2 - s2) + s + 1, s)
    if isinstance(e, exp.Mul):
        return adjust(p1 + p2 + 1, s1 + s2)
    if isinstance(e, exp.Div):
        s = max(6, s1 + p2 + 1)
        return adjust(p1 - s1 + s2 + s, s)
    if isinstance(e, exp.Mod):
        s = max(s1, s2)
        return adjust(min(p1 - s1, p2 - s2) + s, s)
    return None


# -- one type in the other languages -----------------------------------------------------------

def spark_type_of(data_type: exp.DataType) -> str | None:
    """A sqlglot DataType (parsed as Spark) as Spark's simpleString."""
    t = data_type.this
    T = exp.DataType.Type
    simple = {
        T.TINYINT: "tinyint", T.SMALLINT: "smallint", T.INT: "int", T.BIGINT: "bigint",
        T.FLOAT: "float", T.DOUBLE: "double", T.BOOLEAN: "boolean", T.DATE: "date",
        T.TIMESTAMP: "timestamp", T.TIMESTAMPLTZ: "timestamp", T.TIMESTAMPTZ: "timestamp",
        T.VARCHAR: "string", T.TEXT: "string", T.CHAR: "string",
    }
    if t in simple:
        return simple[t]
    if t == T.DECIMAL:
        params = [int(e.name) for e in data_type.expressions]
        p = params[0] if params else 10
        s = params[1] if len(params) > 1 else 0
        return dec(p, s)
    return None


def duck_type(t: str) -> exp.DataType:
    """A Spark type as DuckDB's DataType (for the casts a rewrite writes)."""
    return exp.DataType.build(t.replace("string", "varchar"), dialect="duckdb")


def arrow_type(t: str) -> pa.DataType | None:
    """A Spark type as the Arrow type Spark's answer carries; None when not mapped here."""
    import pyarrow as pa

    d = decimal_of(t)
    if d:
        return pa.decimal128(*d)
    return {
        "tinyint": pa.int8(), "smallint": pa.int16(), "int": pa.int32(), "bigint": pa.int64(),
        "float": pa.float32(), "double": pa.float64(), "string": pa.string(),
        "boolean": pa.bool_(), "date": pa.date32(), "timestamp": pa.timestamp("us", tz="UTC"),
    }.get(t)
