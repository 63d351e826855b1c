"""Turning raw input values into typed values of a table's columns, row by row.

Pure: no engine and no IO. Used by the loader for CSV (every value a string), JSON Lines
(JSON scalars) and Parquet (typed values). Each failure is a ``BadValue`` whose message names
the column and why, and ends up as the reason of a rejects row.
"""

from __future__ import annotations

import datetime as dt
import decimal
import re
from collections.abc import Callable, Mapping
from typing import Any

from lakehouse import grammar
from lakehouse.definitions import TableDefinition
from lakehouse.errors import first_line
from lakehouse.types import ColumnType

UTC = dt.timezone.utc
INT32 = (-(2**31), 2**31 - 1)
"""The range of an int column."""
INT64 = (-(2**63), 2**63 - 1)
"""The range of a long column."""
_WIDE = decimal.Context(prec=100)
_INTEGER = re.compile(grammar.INTEGER)
_NUMBER = re.compile(grammar.NUMBER)
_DATE = re.compile(grammar.DATE)


class BadValue(ValueError):
    """A value that does not fit its column; the message is the reject reason."""


class Unreadable:
    """A raw value a reader could not turn into a Python value; always a reject."""

    def __init__(self, reason: str) -> None:
        """A value that could not be read, and why."""
        self.reason = reason

    def __str__(self) -> str:
        """``<unreadable: reason>``, as the value shows in messages."""
        return f"<unreadable: {self.reason}>"

    __repr__ = __str__


def _show(v: Any) -> str:
    if isinstance(v, str) and len(v) > 60:
        v = v[:60]  # repr of a huge value would copy all of it
    try:
        s = repr(v)
    except Exception:  # noqa: BLE001 - e.g. an int too long to print
        s = f"<{type(v).__name__}>"
    return s if len(s) <= 60 else s[:57] + "..."


def parse_timestamp(v: Any) -> dt.datetime:
    """ISO 8601 to an aware UTC datetime; no offset means UTC."""
    if isinstance(v, dt.datetime):
        return _utc(v, v)
    if isinstance(v, dt.date):
        return dt.datetime(v.year, v.month, v.day, tzinfo=UTC)
    if not isinstance(v, str):
        raise BadValue(f"{_show(v)} is not an ISO 8601 timestamp")
    s = v.strip()
    if len(s) >= 11 and s[10] == " ":
        s = s[:10] + "T" + s[11:]
    if len(s) > 64:  # no ISO 8601 timestamp is longer; do not hand megabytes to the parser
        raise BadValue(f"{_show(v)} is not an ISO 8601 timestamp")
    try:
        t = dt.datetime.fromisoformat(s)  # a bare date is midnight of that day
    except ValueError:
        raise BadValue(f"{_show(v)} is not an ISO 8601 timestamp") from None
    return _utc(t, v)


def _utc(t: dt.datetime, raw: Any) -> dt.datetime:
    """An aware UTC datetime, or BadValue when the instant falls outside 0001-01-01..9999-12-31
    UTC once its offset is applied (no engine stores those)."""
    if t.tzinfo is None:
        return t.replace(tzinfo=UTC)
    try:
        return t.astimezone(UTC)
    except (OverflowError, ValueError):
        raise BadValue(f"{_show(raw)} is outside 0001-01-01..9999-12-31 UTC") from None


def parse_date(v: Any) -> dt.date:
    """YYYY-MM-DD to a date."""
    if isinstance(v, dt.datetime):
        raise BadValue(f"{_show(v)} is a timestamp, not a date")
    if isinstance(v, dt.date):
        return v
    if not isinstance(v, str):
        raise BadValue(f"{_show(v)} is not a date (YYYY-MM-DD)")
    try:
        if not _DATE.match(v.strip()):
            raise ValueError(v)
        return dt.date.fromisoformat(v.strip())
    except ValueError:
        raise BadValue(f"{_show(v)} is not a date (YYYY-MM-DD)") from None


def _int_converter(lo: int, hi: int, label: str) -> Callable[[Any], int]:
    def conv(v: Any) -> int:
        if isinstance(v, bool):
            raise BadValue(f"{_show(v)} is a boolean, not {label}")
        if isinstance(v, int):
            n = v
        elif isinstance(v, float):
            if not v.is_integer():
                raise BadValue(f"{_show(v)} is not {label}")
            n = int(v)
        elif isinstance(v, decimal.Decimal):
            if v.is_finite() and v != 0 and v.adjusted() > 19:  # int() of 1e1000000 takes minutes
                raise BadValue(f"{_show(v)} is out of range for {label}")
            if not v.is_finite() or v != v.to_integral_value():
                raise BadValue(f"{_show(v)} is not {label}")
            n = int(v)
        elif isinstance(v, str):
            s = v.strip()
            if not _INTEGER.match(s):
                raise BadValue(f"{_show(v)} is not {label}")
            if len(s.lstrip("+-").lstrip("0")) > 20:  # beyond any long; int() of it may be refused
                raise BadValue(f"{_show(v)} is out of range for {label}")
            n = int(s)
        else:
            raise BadValue(f"{_show(v)} is not {label}")
        if not lo <= n <= hi:
            raise BadValue(f"{n} is out of range for {label}")
        return n

    return conv


def _double(v: Any) -> float:
    # + 0.0 turns -0.0 into 0.0: Spark sorts the two as equal, so keeping both signs would make
    # the archive order (and run-length runs) ambiguous.
    return _parse_double(v) + 0.0


def _parse_double(v: Any) -> float:
    if isinstance(v, bool):
        raise BadValue(f"{_show(v)} is a boolean, not a double")
    if isinstance(v, (int, float, decimal.Decimal)):
        return float(v)
    if isinstance(v, str):
        s = v.strip()
        if s.lower() in grammar.FLOAT_WORDS:
            return grammar.FLOAT_WORDS[s.lower()]
        if not _NUMBER.match(s):
            raise BadValue(f"{_show(v)} is not a double")
        return float(s)
    raise BadValue(f"{_show(v)} is not a double")


def _boolean(v: Any) -> bool:
    if isinstance(v, bool):
        return v
    if isinstance(v, str):
        b = grammar.BOOLEAN_WORDS.get(v.strip().lower())
        if b is not None:
            return b
    raise BadValue(f"{_show(v)} is not a boolean (true/false)")


def _string(v: Any) -> str:
    if isinstance(v, str):
        if not v.isascii():
            try:
                v.encode("utf-8")
            except UnicodeEncodeError:  # a lone surrogate (JSON "\ud800") no engine can store
                raise BadValue(f"{_show(v)} is not valid Unicode text (a lone surrogate)") from None
        return v
    if isinstance(v, (bool, dict, list)):
        raise BadValue(f"{_show(v)} is not a string")
    if isinstance(v, (int, float, decimal.Decimal)):
        return str(v)
    raise BadValue(f"{_show(v)} is not a string")


def _decimal_converter(precision: int, scale: int) -> Callable[[Any], decimal.Decimal]:
    quantum = decimal.Decimal(1).scaleb(-scale)
    label = f"decimal({precision},{scale})"

    def conv(v: Any) -> decimal.Decimal:
        if isinstance(v, bool):
            raise BadValue(f"{_show(v)} is a boolean, not {label}")
        try:
            if isinstance(v, float):
                d = decimal.Decimal(repr(v))
            elif isinstance(v, (int, decimal.Decimal)):
                d = decimal.Decimal(v)
            elif isinstance(v, str):
                if v.strip().lower() in grammar.FLOAT_WORDS:
                    raise BadValue(f"{_show(v)} is not a finite {label}")
                if not _NUMBER.match(v.strip()):
                    raise BadValue(f"{_show(v)} is not {label}")
                d = decimal.Decimal(v.strip())
            else:
                raise BadValue(f"{_show(v)} is not {label}")
        except decimal.InvalidOperation:
            raise BadValue(f"{_show(v)} is not {label}") from None
        if not d.is_finite():
            raise BadValue(f"{_show(v)} is not a finite {label}")
        if d != 0 and d.adjusted() >= precision - scale:  # a zero (0E+5 too) always fits
            raise BadValue(f"{_show(v)} does not fit {label}")
        try:
            q = d.quantize(quantum, rounding=decimal.ROUND_HALF_EVEN, context=_WIDE)
        except decimal.InvalidOperation:
            raise BadValue(f"{_show(v)} does not fit {label}") from None
        if q != d:
            raise BadValue(f"{_show(v)} has more than {scale} decimal places for {label}")
        if len(q.as_tuple().digits) > precision and q != 0:
            raise BadValue(f"{_show(v)} does not fit {label}")
        return q

    return conv


def converter(t: ColumnType) -> Callable[[Any], Any]:
    """The function that turns a raw non-null value into a value of type ``t``."""
    if t.name == "string":
        return _string
    if t.name == "int":
        return _int_converter(*INT32, "an int")
    if t.name == "long":
        return _int_converter(*INT64, "a long")
    if t.name == "double":
        return _double
    if t.name == "boolean":
        return _boolean
    if t.name == "date":
        return parse_date
    if t.name == "timestamp":
        return parse_timestamp
    if t.name == "decimal":
        assert t.precision is not None and t.scale is not None
        return _decimal_converter(t.precision, t.scale)
    raise ValueError(f"no converter for type {t}")


class RowConverter:
    """Converts one raw record (a mapping of column name to raw value) into a typed row.

    ``empty_is_null`` treats empty strings as null (CSV, where an empty field is the only way
    to write a null).
    """

    def __init__(self, definition: TableDefinition, empty_is_null: bool) -> None:
        """A converter for rows of ``definition``; with ``empty_is_null``, "" is null."""
        self.definition = definition
        self.empty_is_null = empty_is_null
        required = set(definition.primary_key) | {definition.event_time}
        self._columns = [
            (c.name, converter(c.type), (not c.nullable) or c.name in required, str(c.type))
            for c in definition.columns
        ]

    def convert(self, record: Mapping[str, Any]) -> tuple[Any, ...]:
        """The typed row in column order; BadValue naming the column and reason otherwise."""
        out: list[Any] = []
        for name, conv, required, type_label in self._columns:
            if name not in record:
                if required:
                    raise BadValue(f"column {name}: missing required column")
                out.append(None)
                continue
            raw = record[name]
            if raw is None or (self.empty_is_null and isinstance(raw, str) and raw == ""):
                if required:
                    raise BadValue(f"column {name}: null in a non-nullable column")
                out.append(None)
                continue
            if isinstance(raw, Unreadable):
                raise BadValue(f"column {name}: {raw.reason}")
            try:
                out.append(conv(raw))
            except BadValue as e:
                raise BadValue(f"column {name}: {e}") from None
            except Exception as e:  # noqa: BLE001 - any value that breaks a converter is a reject
                raise BadValue(f"column {name}: {_show(raw)} cannot be read as {type_label} "
                               f"({type(e).__name__}: {first_line(e, 200)})") from None
        return tuple(out)
