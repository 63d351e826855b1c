"""Quoting names and values into SQL text, for each engine: one home, so a hostile column name
(a backtick, a double quote, a quote) is never read as SQL.

Spark SQL quotes identifiers with backticks, DuckDB with double quotes; both write a string
literal in single quotes. Inside an identifier its quote character is doubled; inside a string
literal DuckDB (and DataFusion) double a single quote, while Spark reads ``'it''s'`` as two
adjacent literals (``its``) and takes a backslash as an escape: ``spark_literal`` escapes both.
"""

from __future__ import annotations


def spark_ident(name: str) -> str:
    """A name (column, view, path in ``delta.`...```) as a Spark SQL identifier."""
    return "`" + name.replace("`", "``") + "`"


def duck_ident(name: str) -> str:
    """A name as a DuckDB identifier."""
    return '"' + name.replace('"', '""') + '"'


def literal_body(text: str) -> str:
    """The inside of a single-quoted SQL string literal (quotes doubled), for both engines."""
    return text.replace("'", "''")


def literal(text: str) -> str:
    """A single-quoted SQL string literal for DuckDB and DataFusion (quotes doubled)."""
    return "'" + literal_body(text) + "'"


def spark_literal(text: str) -> str:
    """A single-quoted Spark SQL string literal: a backslash and a quote escaped with a backslash
    (Spark's default parser: ``spark.sql.parser.escapedStringLiterals`` false)."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"
