"""Reading vector files without Spark: a day's current file, decoded, and lookups by binary search."""

from __future__ import annotations

import datetime as dt
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from lakehouse.archive import rle, vectors
from lakehouse.archive.state import read_snapshot
from lakehouse.definitions import TableDefinition
from lakehouse.errors import LakehouseError
from lakehouse.records import BadValue, converter
from lakehouse.warehouse import TablePaths


@dataclass(frozen=True)
class DayVector:
    """One column's vector file of one archive day, read: runs (a sort column) or plain values."""

    column: str
    day: dt.date
    file: str
    cutoff: int
    table: pa.Table
    encoded: bool
    """Run-length encoded (a sort column) or plain values."""
    committed: int | None = None
    """The archive's committed cutoff the file was chosen for."""


def as_day(day: Any) -> dt.date:
    """A UTC day given as a date, a datetime (its UTC date; naive: taken as UTC) or ISO text."""
    if isinstance(day, dt.datetime):
        return (day.astimezone(dt.timezone.utc) if day.tzinfo else day).date()
    if isinstance(day, dt.date):
        return day
    if isinstance(day, str):
        try:
            return dt.date.fromisoformat(day)
        except ValueError:
            pass
    raise LakehouseError(f"day {day!r}: expected a date (YYYY-MM-DD)")


def committed_run(paths: TablePaths) -> vectors.Run | None:
    """The archive's committed run (cutoff, erasures), which vector files are read by (None
    before the first archiving run)."""
    snap = read_snapshot(paths.archive)
    return None if snap is None else snap.run


def current_encoding(definition: TableDefinition) -> vectors.Encoding:
    """The encoding the table's settings give today (what every day should be written under)."""
    a = definition.archive
    plain = (
        [c for c in definition.column_names if c not in a.sort_columns]
        if a.vectors == "all"
        else []
    )
    return vectors.Encoding(tuple(a.sort_columns), tuple(sorted([*a.sort_columns, *plain])))


def current_files(
    paths: TablePaths, columns: list[str] | None = None, day: dt.date | None = None
) -> tuple[vectors.Run | None, dict[tuple[str, dt.date], vectors.VectorFile]]:
    """The committed run, read first, and per (column, day) the vector file of the day's run
    for exactly that run (a run committing meanwhile wrote larger ones: not chosen); of every
    day, or of one ``day``."""
    committed = committed_run(paths)
    files, _ = vectors.list_files(paths.vectors, columns, day)
    return committed, vectors.current(files, committed)


def _check_column(definition: TableDefinition, column: str) -> None:
    if column not in definition.column_names:
        raise LakehouseError(
            f"{definition.name}: unknown column {column!r} (columns: {', '.join(definition.column_names)})"
        )
    if (
        definition.archive.vectors == "sort_columns"
        and column not in definition.archive.sort_columns
    ):
        raise LakehouseError(
            f"{definition.name}: column {column} has no vector files (vectors: sort_columns)"
        )


def _read_checked(
    definition: TableDefinition,
    column: str,
    day: dt.date,
    f: vectors.VectorFile,
    committed: int | None,
) -> DayVector:
    """Read a vector file, refusing it when it was written under other settings."""
    table = vectors.read(f.path)
    meta = table.schema.metadata or {}
    if (
        meta.get(vectors.META_CUTOFF, str(f.cutoff).encode()) != str(f.cutoff).encode()
        or meta.get(vectors.META_DAY, day.isoformat().encode()) != day.isoformat().encode()
    ):
        raise LakehouseError(
            f"{definition.name}: vector file {f.path} says it belongs to day "
            f"{meta.get(vectors.META_DAY, b'?').decode()} cutoff "
            f"{meta.get(vectors.META_CUTOFF, b'?').decode()}, not its name; remove it and "
            f"run lakehouse archive {definition.name}"
        )
    stale_reason = stale(definition, column, vectors.encoding_of(table))
    if stale_reason:
        raise LakehouseError(
            f"{definition.name}: day {day} of column {column} was archived under other "
            f"settings ({stale_reason}); the next `lakehouse archive {definition.name}` "
            "re-sorts and re-encodes it"
        )
    return DayVector(
        column, day, f.path, f.cutoff, table, column in definition.archive.sort_columns, committed
    )


def stale(
    definition: TableDefinition, column: str, encoding: vectors.Encoding | None
) -> str | None:
    """Why a file of ``column`` written under ``encoding`` cannot be read under the table's
    current settings; None when it can."""
    if encoding is None:
        return "written before encodings were recorded"
    return encoding.reads(current_encoding(definition), column)


def read_day(
    definition: TableDefinition, paths: TablePaths, column: str, day: dt.date
) -> DayVector:
    """One column's vector of one archive day, for the committed cutoff read first."""
    return read_columns(definition, paths, [column], day)[0]


def read_columns(
    definition: TableDefinition,
    paths: TablePaths,
    columns: list[str],
    day: dt.date,
    attempts: int = 3,
) -> list[DayVector]:
    """Several columns of one archive day, all from the day's one run for one committed cutoff.

    A run committing and cleaning up meanwhile can remove a chosen file before it is read: then
    the cutoff is read again and the files chosen again."""
    day = as_day(day)
    for c in columns:
        _check_column(definition, c)
    for attempt in range(attempts):
        committed, selection = current_files(paths, columns, day)
        try:
            return _read_selected(definition, paths, columns, day, committed, selection)
        except (FileNotFoundError, _Retry):
            if attempt == attempts - 1:
                raise _kept_changing(definition, day) from None
    raise AssertionError("unreachable")


def _read_selected(
    definition: TableDefinition,
    paths: TablePaths,
    columns: list[str],
    day: dt.date,
    committed: vectors.Run | None,
    selection: dict[tuple[str, dt.date], vectors.VectorFile],
) -> list[DayVector]:
    """The columns' files of ``day`` among those chosen for the ``committed`` run;
    FileNotFoundError or _Retry when a run committing meanwhile removed one (choose again)."""
    out = []
    for c in columns:
        f = selection.get((c, day))
        if f is None:
            out.append(_missing(definition, paths, c, day, committed, selection))
            continue
        out.append(_read_checked(definition, c, day, f, None if committed is None else committed[0]))
    return out


def _kept_changing(definition: TableDefinition, day: dt.date) -> LakehouseError:
    return LakehouseError(
        f"{definition.name}: the vector files of {day} kept changing while "
        "being read (archiving runs committing); try again"
    )


class _Retry(Exception):
    pass


def _missing(
    definition: TableDefinition,
    paths: TablePaths,
    column: str,
    day: dt.date,
    committed: vectors.Run | None,
    selection: dict[tuple[str, dt.date], vectors.VectorFile],
) -> DayVector:
    if committed is None:
        raise LakehouseError(f"{definition.name}: nothing is archived yet (no committed cutoff)")
    others = [f for (c, d), f in selection.items() if d == day]
    if not others:  # the day's other columns tell which run wrote it and under which settings
        rest = [c for c in definition.column_names if c != column]
        files, _ = vectors.list_files(paths.vectors, rest, day)
        others = [f for (c, d), f in vectors.current(files, committed).items() if d == day]
    if not others:
        if committed_run(paths) != committed:
            raise _Retry()
        raise LakehouseError(
            f"{definition.name}: no vector file for column {column} on {day} (is that day archived?)"
        )
    try:
        enc = vectors.encoding_of(vectors.read_schema(others[0].path))
    except FileNotFoundError:
        raise _Retry() from None
    reason = stale(definition, column, enc)
    if reason:
        raise LakehouseError(
            f"{definition.name}: day {day} has no vector file for column {column} "
            f"({reason}); the next `lakehouse archive {definition.name}` re-encodes it"
        )
    if committed_run(paths) != committed:
        raise _Retry()
    raise LakehouseError(
        f"{definition.name}: the vector file of column {column} on {day} (cutoff "
        f"{others[0].cutoff}) is missing; run lakehouse archive {definition.name} to rewrite it"
    )


def parse_where(definition: TableDefinition, items: list[str]) -> list[Any]:
    """``C=V`` equalities on a prefix of the sort columns, as typed values in sort-column order.
    ``NULL`` (upper case) looks up the null run."""
    sort = list(definition.archive.sort_columns)
    given: dict[str, Any] = {}
    for item in items:
        if "=" not in item:
            raise LakehouseError(f"--where {item!r}: expected COLUMN=VALUE")
        name, raw = item.split("=", 1)
        name = name.strip()
        if name not in sort:
            raise LakehouseError(
                f"--where {item!r}: {name!r} is not a sort column of {definition.name} (sort columns: {', '.join(sort) or 'none'})"
            )
        if name in given:
            raise LakehouseError(f"--where: column {name} given twice")
        try:
            given[name] = from_text(definition, name, raw)
        except BadValue as e:
            raise LakehouseError(f"--where {item!r}: {e}") from None
    return prefix_values(definition, given)


def from_text(definition: TableDefinition, column: str, raw: str) -> Any:
    """A sort column's value given as text, as the command line takes it (``NULL``: the null
    run); BadValue when it is not one of the column's type."""
    return None if raw == "NULL" else converter(definition.column(column).type)(raw)


def prefix_values(definition: TableDefinition, given: dict[str, Any]) -> list[Any]:
    """Typed values of sort columns (None: the null run) in sort-column order; they must name a
    prefix of the sort columns."""
    sort = list(definition.archive.sort_columns)
    unknown = [c for c in given if c not in sort]
    if unknown:
        raise LakehouseError(
            f"where: {unknown[0]!r} is not a sort column of {definition.name} (sort columns: {', '.join(sort) or 'none'})"
        )
    k = len(given)
    if set(given) != set(sort[:k]):
        missing = [c for c in sort[:k] if c not in given]
        raise LakehouseError(
            f"--where must cover a prefix of the sort columns ({', '.join(sort)}); missing {', '.join(missing)}"
        )
    return [given[c] for c in sort[:k]]


@dataclass(frozen=True)
class LookupResult:
    """The answer of a lookup: the matching record range and how much of the vectors it read."""

    range: rle.Range
    touched: int
    """Vector entries read by the binary search."""
    cutoff: int | None
    """The committed cutoff the answer is for (the files of the day's run for that cutoff)."""
    files: tuple[str, ...]

    def __iter__(self) -> Any:  # ``r, touched = lookup(...)`` as before
        return iter((self.range, self.touched))


def lookup(
    definition: TableDefinition, paths: TablePaths, day: dt.date, values: list[Any]
) -> LookupResult:
    """The record range of a day matching the values, from the vector files of one committed
    cutoff (read first) and one run."""
    sort = definition.archive.sort_columns
    if not sort:
        raise LakehouseError(f"{definition.name} has no sort columns to look up")
    dvs = read_columns(definition, paths, list(sort[: max(1, len(values))]), day)
    return _search(definition, [rle.RunColumn(dv.table) for dv in dvs], values, dvs[0].committed,
                   tuple(dv.file for dv in dvs))


def _search(definition: TableDefinition, cols: list[rle.RunColumn], values: list[Any],
            cutoff: int | None, files: tuple[str, ...]) -> LookupResult:
    """The binary search over the runs of the first sort columns, as a LookupResult."""
    first = cols[0]
    total = first.acc(first.n - 1) if first.n else 0
    try:
        r = rle.lookup(cols, values, total)
    except (TypeError, ArithmeticError):  # a value of another kind than the column's
        given = ", ".join(f"{c}={v!r}" for c, v in zip(definition.archive.sort_columns, values))
        raise LakehouseError(
            f"{definition.name}: where {given}: a value does not compare with its column's values"
        ) from None
    return LookupResult(r, sum(c.touched for c in cols), cutoff, files)


class Lookups:
    """Many lookups in one table's archive, on the vector files of the committed cutoff read
    when opened (``refresh`` moves to the latest one), as a reader pinned to a snapshot answers.

    Each day's sort-column runs are read once (a column when a lookup first needs it) and kept
    as Python values, those of the days used last up to ``max_runs`` runs in all (about 60 bytes
    a run), so a lookup is the binary search alone: microseconds, where ``lookup`` reads the
    archive's log and the day's vector files on every call. A day first read after a later run
    removed its files moves the reader to the latest cutoff (each answer names its cutoff); so
    does any read while nothing was archived when it opened. One reader is not for several
    threads at once."""

    def __init__(self, definition: TableDefinition, paths: TablePaths, max_runs: int = 2_000_000) -> None:
        if not definition.archive.sort_columns:
            raise LakehouseError(f"{definition.name} has no sort columns to look up")
        if max_runs < 1:
            raise LakehouseError(f"lookups: max_runs {max_runs} must be 1 or more")
        self.definition, self.paths, self.max_runs = definition, paths, max_runs
        self._days: OrderedDict[dt.date, dict[str, tuple[rle.RunColumn, str]]] = OrderedDict()
        self.cutoff: int | None = None
        self.run: vectors.Run | None = None
        """The committed run (cutoff, erasures) the files were chosen for."""
        self._selection: dict[tuple[str, dt.date], vectors.VectorFile] = {}
        self.refresh()

    def refresh(self) -> int | None:
        """Read the committed cutoff and choose its files again; the days kept stay when the
        committed run has not moved (no archiving run, no erasure). Returns the cutoff."""
        columns = list(self.definition.archive.sort_columns)
        committed, selection = current_files(self.paths, columns)
        if committed != self.run:
            self._days.clear()
        self.run, self._selection = committed, selection
        self.cutoff = None if committed is None else committed[0]
        return self.cutoff

    def lookup(self, day: Any, where: dict[str, Any] | list[str]) -> LookupResult:
        """The record range of ``day`` whose sort columns equal ``where``: typed values by
        column (None: the null run), or ``C=V`` items as the command line takes them; a
        prefix of the sort columns. Text values are converted as on the command line."""
        if isinstance(where, dict):
            values = prefix_values(self.definition, {c: self._typed(c, v) for c, v in where.items()})
        else:
            values = parse_where(self.definition, where)
        columns = list(self.definition.archive.sort_columns[: max(1, len(values))])
        runs = self._runs(as_day(day), columns)
        return _search(self.definition, [runs[c][0].fresh() for c in columns], values, self.cutoff,
                       tuple(runs[c][1] for c in columns))

    def _typed(self, column: str, value: Any) -> Any:
        """Text as on the command line (``NULL``: the null run); a NumPy scalar as Python's."""
        if hasattr(value, "item") and not isinstance(value, (str, bytes)):
            value = value.item()
        if not isinstance(value, str) or column not in self.definition.column_names:
            return value
        try:
            return from_text(self.definition, column, value)
        except BadValue as e:
            raise LakehouseError(f"where {column}={value!r}: {e}") from None

    def _runs(self, day: dt.date, columns: list[str]) -> dict[str, tuple[rle.RunColumn, str]]:
        """The day's runs of ``columns`` (and any read before), all of the reader's cutoff."""
        if self.cutoff is None:
            self.refresh()
        for attempt in range(3):
            kept = self._days.setdefault(day, {})
            self._days.move_to_end(day)
            missing = [c for c in columns if c not in kept]
            try:
                dvs = _read_selected(self.definition, self.paths, missing, day, self.run, self._selection)
                break
            except (FileNotFoundError, _Retry):
                if attempt == 2:
                    raise _kept_changing(self.definition, day) from None
                self.refresh()
        for dv in dvs:
            kept[dv.column] = (rle.RunColumn(dv.table, materialize=True), dv.file)
        total = sum(c.n for runs in self._days.values() for c, _ in runs.values())
        while total > self.max_runs and len(self._days) > 1:
            _, gone = self._days.popitem(last=False)
            total -= sum(c.n for c, _ in gone.values())
        return kept
