"""Spark's date and time functions on DuckDB: the fields of a date or timestamp (``extract``,
``date_part``), with Spark's field names, numbering and result types.

Sessions run in UTC on both engines (Spark's session time zone, DuckDB's TimeZone), so a
timestamp's fields are its UTC fields on both.
"""

from __future__ import annotations

from sqlglot import exp

from lakehouse.query.dialect.infer import ChildTypes, Rule, Typer
from lakehouse.query.dialect.macros import parse_duckdb, sql_of
from lakehouse.query.dialect.refuse import FnKey, duck_refuse

_FIELDS = {
    "YEAR": ("Y", "YEARS", "YR", "YRS"),
    "YEAROFWEEK": (),
    "QUARTER": ("QTR",),
    "MONTH": ("MON", "MONS", "MONTHS"),
    "WEEK": ("W", "WEEKS"),
    "DAY": ("D", "DAYS"),
    "DAYOFWEEK": ("DOW",),
    "DAYOFWEEK_ISO": ("DOW_ISO",),
    "DOY": (),
    "HOUR": ("H", "HOURS", "HR", "HRS"),
    "MINUTE": ("M", "MIN", "MINS", "MINUTES"),
    "SECOND": ("S", "SEC", "SECONDS", "SECS"),
}
FIELD = {alias: name for name, aliases in _FIELDS.items() for alias in (name, *aliases)}
"""Spark's field names (and their synonyms) -> the field."""
_DUCK = {
    "YEAR": "year({x})",
    "YEAROFWEEK": "isoyear({x})",  # the ISO 8601 week-numbering year
    "QUARTER": "quarter({x})",
    "MONTH": "month({x})",
    "WEEK": "weekofyear({x})",  # ISO 8601: weeks start on Monday, week 1 has the year's first Thursday
    "DAY": "day({x})",
    "DAYOFWEEK": "dayofweek({x}) + 1",  # Spark: 1 = Sunday .. 7 = Saturday
    "DAYOFWEEK_ISO": "isodow({x})",  # 1 = Monday .. 7 = Sunday
    "DOY": "dayofyear({x})",
    "HOUR": "hour({x})",
    "MINUTE": "minute({x})",
}
"""DuckDB's value of each integer field of ``x`` (a DATE or a TIMESTAMPTZ in UTC)."""
_TIME_FIELDS = ("HOUR", "MINUTE", "SECOND")
SECONDS = "decimal(8,6)"
"""Spark's type of the SECOND field: the seconds with their fraction."""


def _field(e: exp.Expression) -> tuple[str, exp.Expression]:
    """(the field, the source) of extract(F FROM x) or date_part('F', x)."""
    if isinstance(e, exp.Extract):
        name, source = e.this.name, e.expression
    else:
        args = e.expressions
        if len(args) != 2 or not (isinstance(args[0], exp.Literal) and args[0].is_string):
            raise duck_refuse(f"{e.name.lower()}() with a field that is not a constant string", "not translated")
        name, source = args[0].name, args[1]
    field = FIELD.get(name.strip().upper())
    if field is None:
        raise duck_refuse(f"the field {name!r} of {_fname(e)}", "not a field Spark extracts from a date or timestamp")
    return field, source


def _fname(e: exp.Expression) -> str:
    return "extract()" if isinstance(e, exp.Extract) else f"{e.name.lower()}()"


def _source_type(e: exp.Expression, c: ChildTypes) -> str | None:
    return c.get("expression") if isinstance(e, exp.Extract) else c.get("expressions.1")


def _extract_type(e: exp.Expression, c: ChildTypes) -> str | None:
    field, _ = _field(e)
    return SECONDS if field == "SECOND" else "int"


def _extract(e: exp.Expression, c: ChildTypes, t: str | None) -> exp.Expression | None:
    field, source = _field(e)
    src = _source_type(e, c)
    if src not in ("date", "timestamp"):
        raise duck_refuse(f"{_fname(e)} of a {src or 'value of unknown type'}",
                          "only dates and timestamps are translated")
    x = sql_of(source)
    if src == "date" and field in _TIME_FIELDS:
        x = f"CAST({x} AS TIMESTAMP)"  # midnight, as Spark casts a date to a timestamp
    if field == "SECOND":  # DuckDB's microsecond() counts the minute's microseconds
        return parse_duckdb(f"CAST(CAST(microsecond({x}) AS DECIMAL(8,0)) * CAST(0.000001 AS DECIMAL(7,6)) "
                            f"AS DECIMAL(8,6))")
    return parse_duckdb(f"CAST({_DUCK[field].format(x=x)} AS INTEGER)")


_PATTERN = {
    "yyyy": "%Y", "yy": "%y", "MMMM": "%B", "MMM": "%b", "MM": "%m", "M": "%-m", "dd": "%d", "d": "%-d",
    "HH": "%H", "H": "%-H", "hh": "%I", "h": "%-I", "mm": "%M", "m": "%-M", "ss": "%S", "s": "%-S",
    "SSSSSS": "%f", "SSS": "%g", "a": "%p", "EEEE": "%A", "EEE": "%a", "E": "%a",
}
"""Java DateTimeFormatter letters (as Spark's date_format takes them) -> DuckDB's strftime, for
the letter counts whose output is the same (years 1000-9999; English names)."""


def strftime_of(pattern: str) -> str | None:
    """DuckDB's strftime format of a Spark datetime pattern; None when a letter (or its count)
    is not translated. Text in single quotes is literal ('' is a quote)."""
    out, i = [], 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "'":
            end = pattern.find("'", i + 1)
            if end == -1:
                return None
            out.append("'" if end == i + 1 else pattern[i + 1:end].replace("%", "%%"))
            i = end + 1
            continue  # (sqlglot splits quoted text off the pattern: such a call is refused before)
        if ch.isalpha():
            j = i
            while j < len(pattern) and pattern[j] == ch:
                j += 1
            code = _PATTERN.get(pattern[i:j])
            if code is None:
                return None
            out.append(code)
            i = j
            continue
        if ch not in _LITERAL:  # Java gives [ ] # { } a meaning (optional sections, reserved)
            return None
        out.append("%%" if ch == "%" else ch)
        i += 1
    return "".join(out)


_LITERAL = set(" -:/.,_%0123456789")
"""The characters a pattern may hold outside letters: printed as they are by both engines."""


def refuse_patterns(sql: str) -> None:
    """Refuse a date_format() whose pattern, as written, has a letter sqlglot would turn into
    another one on reading it (``YYYY``, Java's week-based year, reads as ``yyyy``)."""
    import re

    for m in re.finditer(r"date_format\s*\((?:[^()']|\([^()]*\))*,\s*'([^']*)'\s*\)", sql, re.IGNORECASE):
        letters = set(re.sub(r"[^A-Za-z]", "", m.group(1)))
        if letters - set("yMdHhmsSaE"):
            raise duck_refuse(f"date_format() with the pattern {m.group(1)!r}", "its letters are not translated")


def _date_format(e: exp.Expression, c: ChildTypes, t: str | None) -> exp.Expression | None:
    fmt = e.args.get("format")
    src = c.get("this")
    if not (isinstance(fmt, exp.Literal) and fmt.is_string):
        raise duck_refuse("date_format() with a pattern that is not a constant or with quoted text", "not translated")
    pattern = _spark_pattern(e)
    code = strftime_of(pattern) if pattern is not None else None
    if code is None:
        raise duck_refuse(f"date_format() with the pattern {pattern!r}", "its letters are not translated")
    if src not in ("date", "timestamp"):
        raise duck_refuse(f"date_format() of a {src or 'value of unknown type'}", "only dates and timestamps are translated")
    x = sql_of(e.this)
    x = f"CAST({x} AS TIMESTAMP)" if src == "date" else x
    return parse_duckdb(f"strftime({x}, '{code.replace(chr(39), chr(39) * 2)}')")


def _spark_pattern(e: exp.Expression) -> str | None:
    """The pattern as the user wrote it: sqlglot keeps it in its own form, and writes it back."""
    import sqlglot

    fmt = e.args.get("format")
    if not isinstance(fmt, exp.Literal):
        return None
    back = sqlglot.parse_one(exp.TimeToStr(this=exp.column("x"), format=fmt.copy()).sql("spark"))
    arg = back.expressions[1] if isinstance(back, exp.Anonymous) and len(back.expressions) == 2 else None
    return arg.name if isinstance(arg, exp.Literal) and arg.is_string else None


RULES: dict[FnKey, Rule] = {
    exp.TimeToStr: _date_format,
    exp.Extract: _extract,
    "date_part": _extract,
    "datepart": _extract,
}
"""The date and time rewrites by function."""
TYPES: dict[FnKey, Typer] = {
    exp.TimeToStr: lambda e, c: "string",
    exp.Extract: _extract_type,
    "date_part": _extract_type,
    "datepart": _extract_type,
}
"""Spark's result types of the date and time functions."""
