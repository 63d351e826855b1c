"""The change feed: the rows each release put into live, each once, in release order.

Every row enters a table through a release of its stream (``lakehouse.stream.engine``): one
commit into live carrying the SetTransaction (``lakehouse.stream``, release number), whose rows
all have the load id ``<insert>~r<release>`` (``release_load``). So release N's rows, as they
were released, are the rows of the data files that commit added whose load id ends ``~r<N>``:
new keys and new versions of keys alike, each once, whatever happened to live after (archiving
moves rows to the archive and purges them from live, compaction rewrites files, a later release
replaces a key: none of these is a release, and none shows in the feed).

Why not Delta's change data feed on live: live is changed by MERGE (a key's new version is an
update there), by archiving's purge (deletes) and by compaction; the feed a downstream job wants
is the releases alone, with lakehouse's own facts about each (when, the table's watermark then,
the producer), and small releases are committed through delta-rs, whose change files Delta's
reader would have to trust. The releases are already in live's log (the SetTransaction), their
rows carry their release in their load id, and the loads ledger names each insert's producer:
reading the added files of one commit is all the feed costs, with nothing written on the write
path.

Positions are release numbers (the stream's SetTransaction version in live); a time is the
first release committed at or after it. A release whose commit file or data files are gone (the
log's retention, VACUUM's) cannot be read: ``FeedGone`` says which and where the feed can start.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from lakehouse import delta_log
from lakehouse.definitions import LOAD_COLUMN, PARTITION_COLUMN, TableDefinition
from lakehouse.errors import LakehouseError
from lakehouse.storage import filesystem
from lakehouse.stream import ledger
from lakehouse.stream.engine import RELEASE_MARK
from lakehouse.stream.ledger import APP_ID
from lakehouse.times import micros
from lakehouse.types import ColumnType
from lakehouse.warehouse import TablePaths

if TYPE_CHECKING:
    import pyarrow as pa

RELEASE = "_lh_release"
RELEASED_AT = "_lh_released_at"
WATERMARK = "_lh_watermark"
PRODUCER = "_lh_producer"
FEED_COLUMNS = ((RELEASE, "bigint"), (RELEASED_AT, "timestamp"), (WATERMARK, "timestamp"), (PRODUCER, "string"))
"""What the feed adds to a table's visible columns: the release, its commit time, the table's
watermark just after it, the producer of the row's insert."""


class FeedGone(LakehouseError):
    """A release the feed was asked for can no longer be read."""


@dataclass(frozen=True)
class CommittedRelease:
    """One committed release: its number, the live version that committed it, when, the table's
    watermark just after it (micros; None: undefined) and the producer of each insert in it."""

    number: int
    version: int
    at_ms: int
    watermark: int | None
    producers: dict[str, str]


@dataclass(frozen=True)
class Shape:
    """What reading a table's feed needs of its definition (plain data: it travels to Spark's
    Python workers as JSON): the table's name and its columns with their types."""

    table: str
    columns: tuple[tuple[str, str], ...]

    @classmethod
    def of(cls, definition: TableDefinition) -> "Shape":
        """The shape of a table's feed."""
        return cls(definition.name, tuple((c.name, str(c.type)) for c in definition.columns))

    def to_json(self) -> str:
        """The shape as one JSON string (a data source option)."""
        return json.dumps({"table": self.table, "columns": [list(c) for c in self.columns]})

    @classmethod
    def from_json(cls, text: str) -> "Shape":
        """``to_json`` reversed."""
        doc = json.loads(text)
        return cls(str(doc["table"]), tuple((str(n), str(t)) for n, t in doc["columns"]))

    @property
    def names(self) -> list[str]:
        """The table's column names, in order."""
        return [n for n, _ in self.columns]

    def ddl(self) -> str:
        """The feed's columns in Spark DDL: the table's visible columns, then ``FEED_COLUMNS``."""
        cols = [f"`{n}` {ColumnType.parse(t).spark_ddl()}" for n, t in self.columns]
        return ", ".join([*cols, f"`{PARTITION_COLUMN}` DATE", *(f"`{n}` {t.upper()}" for n, t in FEED_COLUMNS)])

    def arrow(self) -> pa.Schema:
        """The feed's columns as Arrow types."""
        import pyarrow as pa

        kinds = {"bigint": pa.int64(), "timestamp": pa.timestamp("us", tz="UTC"), "string": pa.string()}
        return pa.schema([*((n, ColumnType.parse(t).arrow()) for n, t in self.columns),
                          (PARTITION_COLUMN, pa.date32()), *((n, kinds[t]) for n, t in FEED_COLUMNS)])


class Releases:
    """The committed releases of one table, found in live's log (commit files read once each)."""

    def __init__(self, paths: TablePaths) -> None:
        self.paths = paths
        self._found: dict[int, tuple[int, int]] = {}
        """Release -> (live version, commit ms), of the commit files read so far."""
        self._scanned = -1
        """The last live version whose commit file was read."""

    def latest(self) -> int:
        """The last release committed (0: none)."""
        return ledger.last_committed(self.paths)

    def earliest(self) -> int:
        """The first release the feed can still read (one past the last when none is)."""
        self._scan()
        return min(self._found, default=self.latest() + 1)

    def _scan(self) -> None:
        new = [c for c in delta_log.commits(self.paths.live) if c.version > self._scanned]
        if not new:
            return
        for t in delta_log.txn_commits(self.paths.live, APP_ID, new):
            self._found.setdefault(t.txn, (t.version, t.ms))
        self._scanned = new[-1].version

    def between(self, after: int, upto: int) -> list[CommittedRelease]:
        """Releases ``after`` < N <= ``upto``, in order (FeedGone for one live's log lost)."""
        if upto <= after:
            return []
        if upto > self.latest():
            raise LakehouseError(f"{self.paths.name}: release {upto} is not committed yet (the last is "
                                 f"{self.latest()})")
        if any(n not in self._found for n in range(after + 1, upto + 1)):
            self._scan()
        missing = [n for n in range(after + 1, upto + 1) if n not in self._found]
        if missing:
            first = min(self._found, default=None)
            raise FeedGone(f"{self.paths.name}: release {missing[0]} is no longer in live's log (cleaned up after its "
                           "retention)" + (f"; the feed can start at release {first}" if first else ""))
        lines = ledger.releases(self.paths, upto)
        out: list[CommittedRelease] = []
        for n in range(after + 1, upto + 1):
            version, ms = self._found[n]
            line = lines.get(n, {})
            loads = line.get("loads", [])
            mark = line.get("watermark")
            if mark is None:  # a line written before the watermark was recorded: its rows' latest time
                mark = max((int(e["upto"]) for e in loads if e.get("upto") is not None), default=None)
            if out and out[-1].watermark is not None:  # (a table's watermark never goes back)
                mark = out[-1].watermark if mark is None else max(mark, out[-1].watermark)
            out.append(CommittedRelease(n, version, ms, mark,
                                        {str(e.get("load")): str(e.get("producer")) for e in loads if e.get("load")}))
        return out

    def at_or_after(self, when: dt.datetime) -> int:
        """The number of the first release committed at or after ``when`` (one past the last
        release when none is)."""
        self._scan()
        ms = micros(when) // 1000
        later = [n for n, (_, at) in self._found.items() if at >= ms]
        return min(later) if later else self.latest() + 1


def read_release(shape: Shape, paths: TablePaths, release: CommittedRelease) -> pa.Table:
    """Release ``release``'s rows as it put them into live, with the feed's columns."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    files = delta_log.added_files(paths.live, release.version)
    if files is None:
        raise FeedGone(f"{shape.table}: release {release.number} (live version {release.version}): its commit "
                       "file is gone (the log's retention)")
    schema = shape.arrow()
    names = shape.names
    suffix = f"{RELEASE_MARK}{release.number}"
    parts = []
    for f in files:
        fs, where = filesystem(f.path)
        try:
            held = set(pq.read_schema(where, filesystem=fs).names)
            present = [c for c in [*names, LOAD_COLUMN] if c in held]  # (a column added since: null here)
            t = pq.read_table(where, filesystem=fs, columns=present, coerce_int96_timestamp_unit="us")
        except FileNotFoundError:
            raise FeedGone(f"{shape.table}: release {release.number}: {f.path} was removed (VACUUM after the "
                           "retention); the feed cannot show this release any more") from None
        t = t.cast(pa.schema([(f.name, pa.string() if pa.types.is_string_view(f.type) else f.type)
                              for f in t.schema]))  # (delta-rs writes string views)
        t = t.filter(pc.ends_with(t[LOAD_COLUMN], suffix))
        if not t.num_rows:
            continue
        day = f.partition.get(PARTITION_COLUMN)
        n = t.num_rows
        cols: dict[str, Any] = {c: t[c].cast(schema.field(c).type) if c in t.column_names
                                else pa.nulls(n, schema.field(c).type) for c in names}
        cols[PARTITION_COLUMN] = pa.array([None if day is None else dt.date.fromisoformat(day)] * n, pa.date32())
        cols[RELEASE] = pa.array([release.number] * n, pa.int64())
        cols[RELEASED_AT] = pa.array([release.at_ms * 1000] * n, pa.int64()).cast(schema.field(RELEASED_AT).type)
        cols[WATERMARK] = pa.array([release.watermark] * n, pa.int64()).cast(schema.field(WATERMARK).type)
        cols[PRODUCER] = pa.array([release.producers.get(str(x)) for x in t[LOAD_COLUMN].to_pylist()], pa.string())
        parts.append(pa.table(cols, schema=schema))
    return pa.concat_tables(parts) if parts else schema.empty_table()


def read(definition: TableDefinition, paths: TablePaths, start: Any = None, end: Any = None) -> pa.Table:
    """The feed's rows of releases ``start`` to ``end`` (inclusive; release numbers or times; from
    the first, to the last)."""
    import pyarrow as pa

    shape = Shape.of(definition)
    rel = Releases(paths)
    first, last = span(paths, start, end, rel)  # (a span that ends before it starts: no rows)
    tables = [read_release(shape, paths, r) for r in rel.between(first - 1, last)]
    return pa.concat_tables(tables) if tables else shape.arrow().empty_table()


def span(paths: TablePaths, start: Any, end: Any, releases: Releases | None = None) -> tuple[int, int]:
    """The releases (first, last) from ``start`` to ``end``, inclusive: release numbers, or times
    (from the first release committed at or after ``start``, to the last committed at or before
    ``end``); None: from the first the feed can read, to the last committed."""
    rel = releases or Releases(paths)
    first = rel.earliest() if start in (None, "earliest") else position(rel, start)
    last = rel.latest() if end is None else min(rel.latest(), position(rel, end, end=True))
    return first, last


def position(releases: Releases, at: Any, end: bool = False) -> int:
    """A feed position given as a release number (1 to one past the last committed) or a time (a
    datetime or date, or an ISO 8601 string): the first release committed at or after it
    (``end``: the last at or before it)."""
    if isinstance(at, bool):
        raise LakehouseError(f"bad feed position {at!r}: a release number or a time")
    if isinstance(at, int):
        latest = releases.latest()
        if not 1 <= at <= latest + 1:
            raise LakehouseError(f"bad feed position {at}: releases of {releases.paths.name} are numbered 1 to "
                                 f"{latest} (and {latest + 1}, the next)")
        return at
    from lakehouse.records import BadValue, parse_timestamp

    when = at
    if isinstance(at, str):
        try:
            when = parse_timestamp(at)
        except BadValue:
            raise LakehouseError(f"bad feed position {at!r}: a release number or an ISO 8601 time") from None
    if isinstance(when, dt.date) and not isinstance(when, dt.datetime):
        when = dt.datetime(when.year, when.month, when.day)
    if not isinstance(when, dt.datetime):
        raise LakehouseError(f"bad feed position {at!r}: a release number or a time")
    when = when if when.tzinfo else when.replace(tzinfo=dt.timezone.utc)
    if end:
        return releases.at_or_after(when + dt.timedelta(milliseconds=1)) - 1
    return releases.at_or_after(when)
