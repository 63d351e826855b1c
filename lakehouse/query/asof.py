"""``lakehouse query --as-of VERSION|TS``: the split views of a past moment.

``--as-of TS`` (ISO 8601, UTC without an offset): for every table the query reads, the archive
version current at TS (its last commit at or before TS) with the cutoff committed at that
version, and the live version current at TS. ``--as-of VERSION``: archive version N of the one
table the query reads; the moment is that commit's timestamp and live is taken at it.

Snapshot order needs no care here: an archiving run commits the archive before it deletes from
live, so at any moment either live still holds the archived rows (and the cutoff hides them) or
the archive holding them is already committed. Each row is counted once, as in a query that
ran at that moment.

A commit's timestamp is Delta Lake's: the modification time of its commit file, made strictly
increasing over the versions (what Delta's ``DESCRIBE HISTORY`` shows and ``timestampAsOf``
uses). The versions are resolved once, here, and both engines read exactly those versions
(Spark ``versionAsOf``, DuckDB ``delta_scan(..., version => N)``), so they answer the same.

Before a table's first commit, a version that does not exist, or a version whose data files were
vacuumed: one QueryError line naming the table, what was asked and what exists.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass
from typing import Any

from lakehouse import delta_log
from lakehouse.archive.state import CUTOFF_APP_ID, ERASURE_APP_ID, PURGE_APP_ID, Snapshot
from lakehouse.delta_log import Commit
from lakehouse.errors import QueryError
from lakehouse.query import TableSource
from lakehouse.query.split import Split
from lakehouse.times import format_timestamp, millis

UTC = dt.timezone.utc
_VERSION = re.compile(r"^\s*[+-]?[0-9]+\s*$")
_SCAN_LIMIT = 50
"""How many later versions the vacuum error looks at for the next readable one."""


@dataclass(frozen=True)
class AsOf:
    """What ``--as-of`` resolved to: the moment and each table's pinned split view."""

    asked: str
    moment: dt.datetime
    version: int | None
    """The archive version asked for (``--as-of VERSION``), else None."""
    splits: tuple[Split, ...]

    def sources(self) -> list[TableSource]:
        """The tables pinned, in the order of the splits."""
        return [s.source for s in self.splits]

    def describe(self) -> str:
        """One line for stderr: the moment and the versions read."""
        parts = []
        for s in self.splits:
            cut = "no cutoff" if s.cutoff_time is None else f"cutoff {_fmt(s.cutoff_time)}"
            parts.append(f"{s.name}: archive version {s.archive.version} ({cut}), live version {s.live.version}")
        return f"as of {_fmt(self.moment)}" + (": " + "; ".join(parts) if parts else "")


def parse(value: Any) -> int | dt.datetime:
    """``--as-of``'s value: an archive version (a non-negative integer) or a UTC instant."""
    from lakehouse.records import BadValue, parse_timestamp

    if isinstance(value, bool):
        raise QueryError(f"--as-of {value!r}: expected an archive version (an integer) or an ISO 8601 timestamp")
    if isinstance(value, int) or (isinstance(value, str) and _VERSION.match(value)):
        n = int(value)
        if n < 0:
            raise QueryError(f"--as-of {value}: a version is a number from 0 up")
        return n
    try:
        return parse_timestamp(value)
    except BadValue:
        raise QueryError(f"--as-of {value}: expected an archive version (an integer) or an ISO 8601 timestamp "
                         "(e.g. 2026-11-20T10:15:00Z; UTC without an offset)") from None


def resolve(tables: list[TableSource], sql: str, value: Any, now: dt.datetime | None = None) -> AsOf:
    """Pin the split view of every table ``sql`` reads at the moment ``value`` names."""
    from lakehouse.query import guard
    from lakehouse.stream.status import WATERMARK_VIEW

    asked = str(value).strip() if not isinstance(value, dt.datetime) else _fmt(value)
    target = parse(value)
    checked = guard.check(sql)
    if checked.kind == "show":
        raise QueryError(f"--as-of {asked}: SHOW lists today's catalog; --as-of applies to queries "
                         "(SELECT, WITH, VALUES, DESCRIBE, EXPLAIN)")
    names = guard.tables_read(checked)
    if WATERMARK_VIEW in names:
        raise QueryError(f"--as-of {asked}: {WATERMARK_VIEW} is the streams' current state and has no history; "
                         "--as-of reads tables only")
    by_name = {t.name: t for t in tables}
    read = [by_name[n] for n in sorted(names) if n in by_name]
    now = now or dt.datetime.now(UTC)
    if isinstance(target, int):
        if len(read) != 1:
            what = f"reads {len(read)} tables ({', '.join(t.name for t in read)})" if read else "reads no table"
            raise QueryError(f"--as-of {target}: a version number is one table's archive version, and this query "
                             f"{what}: give a timestamp instead (e.g. --as-of {_fmt(now)})")
        t = read[0]
        archive = delta_log.commits(t.paths.archive)
        at = next((c for c in archive if c.version == target), None)
        if at is None:
            if archive and target < archive[0].version:
                _refuse_purged(t, "archive", t.paths.archive, archive[0], f"archive version {target}")
            raise QueryError(f"{t.name}: archive version {target} "
                             f"{'is no longer in the log' if archive and target < archive[0].version else 'does not exist'}"
                             f"; {_span('archive', archive)}")
        return AsOf(asked, at.at, target, (_pin(t, at.at, archive_version=target),))
    if target > now:
        raise QueryError(f"--as-of {asked}: {_fmt(target)} is in the future (now {_fmt(now)}); "
                         "an as-of answer must not change later")
    return AsOf(asked, target, None, tuple(_pin(t, target) for t in read))


def _pin(t: TableSource, moment: dt.datetime, archive_version: int | None = None) -> Split:
    live_c, arch_c = delta_log.commits(t.paths.live), delta_log.commits(t.paths.archive)
    limit = millis(moment)
    live = _last(live_c, limit)
    archive = (next(c for c in arch_c if c.version == archive_version) if archive_version is not None
               else _last(arch_c, limit))
    if live is None or archive is None:
        if not live_c or not arch_c:
            raise QueryError(f"{t.name}: as of {_fmt(moment)}: the table's Delta log has no readable version")
        for part, path, found, hist in (("live", t.paths.live, live, live_c), ("archive", t.paths.archive, archive,
                                                                               arch_c)):
            if found is None:
                _refuse_purged(t, part, path, hist[0], f"as of {_fmt(moment)}")
        first = max(live_c[0].at, arch_c[0].at)
        last = max(live_c[-1].at, arch_c[-1].at)
        raise QueryError(
            f"{t.name}: nothing to read as of {_fmt(moment)}: the table's history runs from {_fmt(first)} to "
            f"{_fmt(last)} (archive versions {arch_c[0].version}..{arch_c[-1].version}, live versions "
            f"{live_c[0].version}..{live_c[-1].version})")
    live_snap, live_absent = _load(t, "live", t.paths.live, live, live_c, moment)
    arch_snap, arch_absent = _load(t, "archive", t.paths.archive, archive, arch_c, moment)
    return Split(t, live_snap, arch_snap, live_absent, arch_absent)


def _load(t: TableSource, part: str, path: str, commit: Commit, history: list[Commit],
          moment: dt.datetime) -> tuple[Snapshot, frozenset[str]]:
    """The snapshot at a version (cutoff included) and the visible columns it lacks; a clear
    error when its data files were vacuumed."""
    table, missing = delta_log.missing_files(path, commit.version)
    if table is None:
        raise QueryError(f"{t.name}: {part} version {commit.version} cannot be read ({missing[0]}); "
                         f"{_span(part, history)}")
    if missing:
        later = _next_readable(path, commit, history)
        hint = (f"version {later.version} ({_fmt(later.at)}) is the next one readable" if later
                else f"none of the {_SCAN_LIMIT} versions after it is complete either")
        raise QueryError(
            f"{t.name}: as of {_fmt(moment)}, {part} version {commit.version} ({_fmt(commit.at)}) can no longer be "
            f"read: {len(missing)} of its data files were vacuumed (e.g. {missing[0]}); {_span(part, history)}; "
            f"{hint}")
    v = table.transaction_version(CUTOFF_APP_ID)
    erasures = table.transaction_version(ERASURE_APP_ID) or 0
    have = {f.name for f in table.schema().fields}
    absent = frozenset(c for c in t.definition.visible_columns if c not in have)
    return Snapshot(commit.version, None if v is None else int(v), int(erasures)), absent


def _refuse_purged(t: TableSource, part: str, path: str, first: Commit, asked: str) -> None:
    """Refuse, naming the purge, a moment before a part's history starts at a purge's marker."""
    number = delta_log.txn_version(path, PURGE_APP_ID, first.version)
    if number is None:
        return
    raise QueryError(f"{t.name}: {asked} is before the purge of erasure {number} ({_fmt(first.at)}): the files and "
                     f"the log that held its deleted rows are gone, and with them the {part}'s history before it; "
                     f"ask for {_fmt(first.at)} or later")


def _next_readable(path: str, commit: Commit, history: list[Commit]) -> Commit | None:
    for c in [h for h in history if h.version > commit.version][:_SCAN_LIMIT]:
        table, missing = delta_log.missing_files(path, c.version)
        if table is not None and not missing:
            return c
    return None


def _last(history: list[Commit], limit_ms: int) -> Commit | None:
    """The last commit at or before ``limit_ms``."""
    found = None
    for c in history:
        if c.ms > limit_ms:
            break
        found = c
    return found


def _span(part: str, history: list[Commit]) -> str:
    if not history:
        return f"the {part} table has no readable version"
    a, b = history[0], history[-1]
    return f"{part} versions {a.version}..{b.version} exist ({_fmt(a.at)} .. {_fmt(b.at)})"


def _fmt(t: dt.datetime) -> str:
    return format_timestamp(t)
