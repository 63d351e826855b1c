"""What DuckDB does not answer for Spark: the refusal error, the refused constructs, the gate.

A construct whose answer on DuckDB would differ from Spark's (and is not rewritten) is refused
with a QueryError that names it and says to run the query on Spark. The gate walks a query top
down before anything is translated: refused constructs raise, and so does any function that is
neither rewritten nor among those checked against real Spark (tests/test_query_parity.py).
"""

from __future__ import annotations

from collections.abc import Collection

from sqlglot import exp

from lakehouse.errors import QueryError

APPROX = "DuckDB's approximation differs from Spark's"
"""Why approximate aggregates are refused."""
UNVERIFIED = "not among the functions checked to give Spark's answer on DuckDB"
"""Why a function outside the verified and rewritten ones is refused."""

_REGEX = "Java and RE2 regular expressions differ"
_PATTERN = "Java date patterns are not translated"
_PICKS = "the row it picks depends on the engine"

REFUSED: dict[type, tuple[str | None, str]] = {
    exp.ApproxQuantile: (None, APPROX),
    exp.ApproxDistinct: (None, APPROX),
    exp.RegexpLike: ("RLIKE", _REGEX),
    exp.RegexpReplace: ("regexp_replace()", _REGEX),
    exp.RegexpExtract: ("regexp_extract()", _REGEX),
    exp.StrToTime: ("to_timestamp() with a format", _PATTERN),
    exp.UnixToStr: ("from_unixtime()", _PATTERN),
    exp.First: (None, _PICKS),
    exp.Last: (None, _PICKS),
    exp.AnyValue: (None, _PICKS),
    exp.ArrayAgg: (None, "the order of its elements depends on the engine"),
    exp.Rand: (None, "random numbers differ by engine"),
    exp.CurrentDate: (None, "the clock is read per engine"),
    exp.CurrentTimestamp: (None, "the clock is read per engine"),
}
"""Constructs refused wherever they appear: sqlglot class -> (name in the error, or None for the
function's Spark name; why)."""

VERIFIED_FUNCTIONS: frozenset[type] = frozenset({
    exp.And, exp.Or, exp.Sum, exp.Avg, exp.Min, exp.Max, exp.Count, exp.CountIf, exp.LogicalAnd, exp.LogicalOr,
    exp.Stddev, exp.StddevSamp, exp.Variance, exp.Case, exp.If, exp.Coalesce, exp.Nullif,
    exp.Greatest, exp.Least, exp.Exists, exp.Lower, exp.Upper, exp.Length, exp.Trim,
    exp.Replace, exp.Pad, exp.StrPosition, exp.Abs, exp.Round, exp.Floor, exp.Ceil, exp.Sqrt,
    exp.Pow, exp.Year, exp.Month, exp.DayOfMonth, exp.Day, exp.Hour, exp.Minute, exp.Second,
    exp.DateDiff, exp.TimestampTrunc, exp.RowNumber, exp.Rank, exp.DenseRank, exp.Lag, exp.Lead,
    exp.StddevPop, exp.VariancePop, exp.Corr, exp.CovarPop, exp.CovarSamp, exp.BitwiseAndAgg,
    exp.BitwiseOrAgg, exp.BitwiseXorAgg, exp.Ntile, exp.CumeDist, exp.PercentRank, exp.FirstValue,
    exp.LastValue, exp.NthValue,
})
"""Functions that DuckDB computes as Spark does (once rewritten where a rewrite exists): each is
exercised by tests/test_query_parity.py against real Spark. Any other function is refused."""


FnKey = type | str
"""A function's identity to the translator: its sqlglot class, or the lower-case name of a
function sqlglot does not know (``exp.Anonymous``)."""


def fn_key(e: exp.Expression) -> FnKey:
    """``e``'s identity as a function (``FnKey``)."""
    return e.name.lower() if isinstance(e, exp.Anonymous) else type(e)


def duck_refuse(construct: str, why: str) -> QueryError:
    """The error that refuses ``construct`` on DuckDB, saying why and to run it on Spark."""
    return QueryError(f"duckdb: {construct} is refused: {why}; run it with --engine spark")


def spark_func_name(e: exp.Expression) -> str:
    """A function's name as Spark spells it (sqlglot's class names are not Spark's; a function
    sqlglot does not know keeps the name it was called by)."""
    if isinstance(e, exp.Anonymous):
        return e.name.lower()
    return e.sql("spark").split("(", 1)[0].strip().lower()


def refuse_functions(node: exp.Expression, rewritten: Collection[FnKey]) -> None:
    """Raise for the first refused construct or unverified function under ``node``, top down,
    so that the outermost function a user wrote is the one named; a function whose key
    (``fn_key``) is in ``rewritten`` (the translator's rewrites) passes."""
    refused = REFUSED.get(type(node))
    if refused is not None:
        what, why = refused
        raise duck_refuse(what or f"{spark_func_name(node)}()", why)
    if (isinstance(node, exp.Func) and fn_key(node) not in rewritten
            and type(node) not in VERIFIED_FUNCTIONS):
        raise duck_refuse(f"{spark_func_name(node)}()", UNVERIFIED)
    for child in node.iter_expressions():
        refuse_functions(child, rewritten)
