"""Validating a parsed YAML document into a ``TableDefinition``: field errors first, then the
problems across fields, each reported as ``<source>: <field path>: <reason>`` on one line."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from lakehouse.definitions.expectations import problems as expectation_problems
from lakehouse.definitions.names import PARTITION_COLUMN
from lakehouse.definitions.table import TableDefinition
from lakehouse.errors import DefinitionError


def parse_definition(data: Any, source: str, expected_name: str | None = None) -> TableDefinition:
    """Validate a parsed YAML document; raise DefinitionError naming source, field and reason."""
    if not isinstance(data, dict):
        raise DefinitionError(f"{source}: expected a mapping with name, columns, event_time, ...")
    try:
        d = TableDefinition.model_validate(data)
    except ValidationError as e:
        raise DefinitionError(f"{source}: " + "; ".join(format_error(x) for x in e.errors())) from None
    problems = cross_check(d, expected_name)
    if problems:
        raise DefinitionError(f"{source}: " + "; ".join(problems))
    return d


def cross_check(d: TableDefinition, expected_name: str | None) -> list[str]:
    """What is wrong across fields once each field is valid ([] when nothing is): the name against
    the file, columns named by event time, key, sort columns and quality, ingest's time source."""
    problems: list[str] = []
    if expected_name is not None and d.name != expected_name:
        problems.append(f"name: {d.name!r} must equal the file name {expected_name!r}")
    seen: dict[str, int] = {}
    for i, c in enumerate(d.columns):
        if c.name in seen:
            problems.append(f"columns[{i}].name: duplicate column {c.name!r} (also columns[{seen[c.name]}])")
        seen.setdefault(c.name, i)
    names = set(seen)
    if d.event_time not in names:
        problems.append(f"event_time: unknown column {d.event_time!r}")
    elif d.column(d.event_time).type.name != "timestamp":
        problems.append(
            f"event_time: column {d.event_time!r} is {d.column(d.event_time).type}, not a timestamp"
        )
    for i, k in enumerate(d.primary_key):
        if k not in names:
            problems.append(f"primary_key[{i}]: unknown column {k!r}")
    if len(set(d.primary_key)) != len(d.primary_key):
        problems.append("primary_key: a column is listed twice")
    for i, s in enumerate(d.archive.sort_columns):
        if s not in names:
            problems.append(f"archive.sort_columns[{i}]: unknown column {s!r}")
    if len(set(d.archive.sort_columns)) != len(d.archive.sort_columns):
        problems.append("archive.sort_columns: a column is listed twice")
    if d.archive.interval.millis == 0:
        problems.append("archive.interval: must be greater than zero")
    ing = d.ingest
    if ing.sort_field == "TIME_IN_FILENAME" and ing.filename_time is None:
        problems.append("ingest.filename_time: required with sort_field TIME_IN_FILENAME "
                        "(e.g. {regex: 'trips_(\\d{8}T\\d{4})', format: '%Y%m%dT%H%M'})")
    if ing.sort_field == "MODIFIED_FILE_TIME" and ing.filename_time is not None:
        problems.append("ingest.filename_time: only used with sort_field TIME_IN_FILENAME")
    if d.quality:
        visible = names | {PARTITION_COLUMN}
        for i, e in enumerate(d.quality):
            problems += expectation_problems(i, e.name, e.args, visible)
    return problems


def _format_loc(loc: tuple[Any, ...]) -> str:
    """A pydantic location as the field path a user writes: ``columns[2].type``."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out or "(top level)"


def format_error(err: Any) -> str:
    """One pydantic error as ``field.path: reason`` (what a user can act on, on one line)."""
    loc = _format_loc(tuple(err["loc"]))
    kind = err["type"]
    if kind == "extra_forbidden":
        return f"{loc}: unknown key"
    if kind == "missing":
        return f"{loc}: required key is missing"
    msg = str(err["msg"])
    if msg.startswith("Value error, "):
        msg = msg[len("Value error, "):]
    if kind == "literal_error":
        msg = f"{msg}, got {err.get('input')!r}"
    if kind in ("model_type", "dict_type"):
        msg = f"expected a mapping, got {err.get('input')!r}"
    return f"{loc}: {msg}"
