"""Column types of a table definition and their spelling in Spark, Arrow and DuckDB.

Pure: no engine is imported here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import pyarrow as pa

SIMPLE_TYPES = ("string", "int", "long", "double", "boolean", "date", "timestamp")
"""The column types without parameters (``decimal(p,s)`` is the one with)."""
_DECIMAL = re.compile(r"^decimal\( *([0-9]{1,2}) *, *([0-9]{1,2}) *\)$")

_SPARK = {
    "string": "STRING",
    "int": "INT",
    "long": "BIGINT",
    "double": "DOUBLE",
    "boolean": "BOOLEAN",
    "date": "DATE",
    "timestamp": "TIMESTAMP",
}
_DUCKDB = {  # as DuckDB's delta extension reads the column
    "string": "VARCHAR",
    "int": "INTEGER",
    "long": "BIGINT",
    "double": "DOUBLE",
    "boolean": "BOOLEAN",
    "date": "DATE",
    "timestamp": "TIMESTAMP WITH TIME ZONE",
}
_ARROW = {
    "string": pa.string(),
    "int": pa.int32(),
    "long": pa.int64(),
    "double": pa.float64(),
    "boolean": pa.bool_(),
    "date": pa.date32(),
    "timestamp": pa.timestamp("us", tz="UTC"),
}


@dataclass(frozen=True)
class ColumnType:
    """A column type: one of SIMPLE_TYPES, or decimal with precision and scale."""

    name: str
    precision: int | None = None
    scale: int | None = None

    @classmethod
    def parse(cls, text: str) -> "ColumnType":
        """Parse ``string``, ``int``, ..., ``decimal(p,s)``; raise ValueError with the reason."""
        if not isinstance(text, str):
            raise ValueError(f"type must be a string, got {text!r}")
        t = text.lower()
        if t in SIMPLE_TYPES:
            return cls(t)
        m = _DECIMAL.fullmatch(t)
        if m:
            p, s = int(m.group(1)), int(m.group(2))
            if not 1 <= p <= 38:
                raise ValueError(f"decimal precision must be 1..38, got {p}")
            if s > p:
                raise ValueError(f"decimal scale {s} is larger than its precision {p}")
            return cls("decimal", p, s)
        if t.startswith("decimal(") and ")" not in t:
            raise ValueError(
                f"unknown type {text!r}: inside {{...}} a comma ends the value, so quote it: 'decimal(p,s)'"
            )
        raise ValueError(
            f"unknown type {text!r} (expected one of {', '.join(SIMPLE_TYPES)}, decimal(p,s))"
        )

    def __str__(self) -> str:
        """The type as a definition spells it: ``long``, ``decimal(10,2)``."""
        if self.name == "decimal":
            return f"decimal({self.precision},{self.scale})"
        return self.name

    @property
    def is_numeric(self) -> bool:
        """Whether the type holds numbers (int, long, double, decimal)."""
        return self.name in ("int", "long", "double", "decimal")

    def spark_ddl(self) -> str:
        """The type in Spark SQL DDL."""
        if self.name == "decimal":
            return f"DECIMAL({self.precision},{self.scale})"
        return _SPARK[self.name]

    def duckdb_ddl(self) -> str:
        """The type in DuckDB SQL, as DuckDB's delta extension reads the column."""
        if self.name == "decimal":
            return f"DECIMAL({self.precision},{self.scale})"
        return _DUCKDB[self.name]

    def arrow(self) -> pa.DataType:
        """The Arrow type used when staging parsed rows."""
        if self.name == "decimal":
            assert self.precision is not None and self.scale is not None
            return pa.decimal128(self.precision, self.scale)
        return _ARROW[self.name]

    @classmethod
    def from_spark_simple_string(cls, s: str) -> "ColumnType":
        """Map Spark's ``DataType.simpleString()`` back to a lakehouse type."""
        back = {
            "string": "string",
            "int": "int",
            "bigint": "long",
            "double": "double",
            "boolean": "boolean",
            "date": "date",
            "timestamp": "timestamp",
        }
        if s in back:
            return cls(back[s])
        m = _DECIMAL.fullmatch(s)
        if m:
            return cls("decimal", int(m.group(1)), int(m.group(2)))
        return cls(f"unsupported:{s}")
