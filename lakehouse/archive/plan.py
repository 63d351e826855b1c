"""Planning an archiving run: the new cutoff and what it covers. Pure."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field

from lakehouse.durations import Duration

UTC = dt.timezone.utc
EPOCH = dt.datetime(1970, 1, 1, tzinfo=UTC)


MIN_CUTOFF = (dt.datetime(1, 1, 1, tzinfo=UTC) - EPOCH) // dt.timedelta(seconds=1)
"""0001-01-01T00:00:00Z in epoch seconds (negative): the earliest cutoff there is."""
MAX_CUTOFF = (dt.datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC) - EPOCH) // dt.timedelta(seconds=1)


def new_cutoff(now: dt.datetime, delay: Duration) -> int:
    """C' = now - delay, in whole epoch seconds (rounded down; negative before 1970)."""
    if now.tzinfo is None:
        now = now.replace(tzinfo=UTC)
    since_epoch = now - EPOCH - dt.timedelta(milliseconds=delay.millis)
    cutoff = since_epoch // dt.timedelta(seconds=1)
    if cutoff < MIN_CUTOFF:
        from lakehouse.errors import LakehouseError

        raise LakehouseError(
            f"archive: now {now.isoformat()} minus the delay {delay} is before 0001-01-01; "
            "no cutoff can be that early (pass a later --now)"
        )
    return cutoff


def cutoff_time(cutoff: int) -> dt.datetime:
    """A cutoff as an aware UTC datetime (any cutoff of years 0001..9999, negative ones too)."""
    return EPOCH + dt.timedelta(seconds=int(cutoff))


def day_of(t: dt.datetime) -> dt.date:
    """The UTC day of an instant."""
    return (t.astimezone(UTC) if t.tzinfo else t).date()


@dataclass(frozen=True)
class ArchivePlan:
    """What one archiving run will do (``--dry-run`` prints it)."""

    table: str
    now: dt.datetime
    previous_cutoff: int | None
    cutoff: int
    """The new cutoff C' (epoch seconds)."""
    live_version: int | None
    """The live snapshot V the rows are taken from."""
    archive_version: int | None
    """The archive snapshot the day batches are merged with."""
    days: tuple[dt.date, ...] = ()
    """UTC days that get a new batch."""
    rows: int = 0
    """Live rows of snapshot V with event time < C'."""
    late_rows: int = 0
    """Of those, rows below the previous cutoff (arrived late)."""
    archive_rows_in_days: int = 0
    """Archive rows already in those days (merged with the new ones)."""
    notes: list[str] = field(default_factory=list)
    new_rows: dict[dt.date, int] = field(default_factory=dict)
    """Per day, the live rows that move (the plan's side of the staged-rows check)."""
    new_sums: dict[dt.date, int] = field(default_factory=dict)
    """Per day, the sum of those rows' hashes modulo 2^64 (the ledger's spec; empty when the
    plan was made without the books)."""
    archive_rows: dict[dt.date, int] = field(default_factory=dict)
    """Per day, the rows the archive holds at ``archive_version``."""
    reencode_days: tuple[dt.date, ...] = ()
    """Archived days written under other settings (sort columns, vector set), re-sorted and
    re-encoded by this run; they are also in ``days``."""
    clock: str = "now"
    """``now`` (cutoff = now - delay) or ``bound`` (cutoff = min(now, watermark) - delay)."""
    watermark: dt.datetime | None = None
    """With ``clock: bound``: the table's watermark when planned (None: undefined)."""
    no_watermark: bool = False
    """With ``clock: bound`` and no watermark yet (nothing released): nothing can be sealed."""

    @property
    def advances(self) -> bool:
        """Whether the cutoff moves forward (otherwise the run does nothing)."""
        if self.no_watermark:
            return False
        return self.previous_cutoff is None or self.cutoff > self.previous_cutoff

    def as_dict(self) -> dict[str, object]:
        """The plan as a JSON document (``lakehouse archive --dry-run --json``)."""
        return {
            "table": self.table,
            "now": self.now,
            "previous_cutoff": self.previous_cutoff,
            "cutoff": self.cutoff,
            "advances": self.advances,
            "clock": self.clock,
            "watermark": self.watermark,
            "live_version": self.live_version,
            "archive_version": self.archive_version,
            "days": [d.isoformat() for d in self.days],
            "rows": self.rows,
            "late_rows": self.late_rows,
            "archive_rows_in_days": self.archive_rows_in_days,
            "reencode_days": [d.isoformat() for d in self.reencode_days],
            "notes": self.notes,
        }


# -- scaling to many days: predicates, partitions and tasks that do not grow one per day ----------

DAYS_PER_CHUNK = 500
"""Days per IN list in a predicate; the lists are OR-ed in a balanced tree (depth log2)."""
ROWS_PER_PARTITION = 1_000_000
"""Rows per Spark partition when staging and committing (days are range-partitioned)."""
ROWS_PER_VECTOR_TASK = 2_000_000
"""Rows per vector-encoding task (each task encodes many days, one after the other)."""


def chunks(items: list, size: int) -> list[list]:
    """``items`` in consecutive chunks of at most ``size``."""
    return [items[i : i + size] for i in range(0, len(items), size)]


def _balanced_or(terms: list[str]) -> str:
    if len(terms) == 1:
        return terms[0]
    mid = len(terms) // 2
    return f"({_balanced_or(terms[:mid])} OR {_balanced_or(terms[mid:])})"


def date_literal(day: dt.date) -> str:
    """A Spark SQL date literal, zero-padded for every year (``DATE'0999-01-02'``)."""
    return f"DATE'{day.year:04d}-{day.month:02d}-{day.day:02d}'"


def days_sql(
    column: str, days: list[dt.date] | tuple[dt.date, ...], size: int = DAYS_PER_CHUNK
) -> str:
    """A Spark SQL predicate selecting exactly ``days`` of a date column: a range (for partition
    pruning) and IN lists of ``size`` days OR-ed in a balanced tree, so the expression stays
    shallow for any number of days (one OR term per day overflows the JVM's stack)."""
    if not days:
        return "FALSE"
    ds = sorted(set(days))
    col = f"`{column}`"
    rng = f"{col} >= {date_literal(ds[0])} AND {col} <= {date_literal(ds[-1])}"
    if (ds[-1] - ds[0]).days + 1 == len(ds):
        return rng  # contiguous: the range says it all
    ins = [f"{col} IN ({', '.join(date_literal(d) for d in c)})" for c in chunks(ds, size)]
    return f"{rng} AND {_balanced_or(ins)}"


def partition_count(
    rows: int, days: int, parallelism: int, rows_per_partition: int = ROWS_PER_PARTITION
) -> int:
    """Spark partitions for staging and committing ``rows`` over ``days`` days (range-partitioned
    by day, so a day is in one partition): enough to use every core and to keep partitions
    near ``rows_per_partition``, never more than the days, never one per day for small days."""
    by_rows = -(-rows // rows_per_partition) if rows > 0 else 1
    return max(1, min(days, max(parallelism, by_rows)))


def group_days(
    day_rows: dict[dt.date, int], parallelism: int, rows_per_task: int = ROWS_PER_VECTOR_TASK
) -> list[list[dt.date]]:
    """Days in consecutive groups for vector tasks: about ``rows_per_task`` rows a group, at least
    ``parallelism`` groups (when there are that many days), each group many small days."""
    days = sorted(day_rows)
    if not days:
        return []
    total = sum(day_rows.values())
    groups_n = max(min(parallelism, len(days)), -(-total // rows_per_task))
    target = max(1, -(-total // groups_n))
    out: list[list[dt.date]] = [[]]
    acc = 0
    for d in days:
        if out[-1] and acc + day_rows[d] > target and len(out) < groups_n:
            out.append([])
            acc = 0
        out[-1].append(d)
        acc += day_rows[d]
    return out


def staged_problems(
    table: str,
    days: tuple[dt.date, ...],
    new_rows: dict[dt.date, int],
    archive_rows: dict[dt.date, int],
    staged: dict[dt.date, int],
    has_key: bool,
) -> list[str]:
    """What is wrong with a staged batch against its plan (rows per day), as messages.

    Each planned day must be staged; without a key, a day holds exactly its new and archived
    rows; with a key, each new row replaces at most one archived row, so a day holds between
    max(new, archived) and new + archived rows."""
    out = []
    extra = sorted(set(staged) - set(days))
    if extra:
        out.append(f"archive {table}: day {extra[0]} was staged but not planned")
    for d in days:
        n, a, s = new_rows.get(d, 0), archive_rows.get(d, 0), staged.get(d)
        if s is None:
            out.append(
                f"archive {table}: day {d} was planned ({n} new, {a} archived rows) but not staged"
            )
            continue
        lo = max(n, a) if has_key else n + a
        if s is not None and not lo <= s <= n + a:
            want = f"{lo}..{n + a}" if lo != n + a else str(n + a)
            out.append(
                f"archive {table}: day {d} staged {s} rows, the plan expects {want} "
                f"({n} new, {a} archived)"
            )
    return out
