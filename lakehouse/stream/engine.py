"""A table's stream on Spark and Delta: producers attach, insert staged batches, assert bounds
and detach; staged rows are released into live in event-time order, exactly once.

Every operation takes the stream's lease, first finishes a release a crashed process left
(``_finish_pending``), applies the rule (``lakehouse.stream.model``), saves the state, logs the
events, then releases what became due. A release is planned and saved first (pending, with its
number) [``stream_after_plan``]; its rows are committed into live in one commit carrying the
SetTransaction (``lakehouse.stream``, release number) and B in the commit's metadata
[``stream_during_release``, ``stream_after_live``] (a small release, the usual case, is read with
Arrow and committed through delta-rs without a Spark job: ``lakehouse.live.small``); then it is applied to the state
[``stream_after_state``]. A pending release is applied at once when live already holds its
number, else committed again: no row is lost or doubled whatever the instant of a crash. Just
before each commit, the release's line of the loads ledger (``lakehouse.stream.ledger``: when,
which inserts, which event-time ranges) is appended; readers take only committed releases.

Inserted rows are the staging of the one write path (``lakehouse.ingest.batch``): a segment
names the staging folder, which the stream removes once every row of it is released.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import functools
import json
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from lakehouse import crashpoints
from lakehouse.definitions import LOAD_COLUMN, TableDefinition
from lakehouse.errors import LakehouseError
from lakehouse.lease import Lease
from lakehouse.live import SEQ_COLUMN, commit_live, commit_live_rows, small
from lakehouse.spark.commit import SESSION_CONF, with_retries
from lakehouse.staging import FILE_COLUMN, GOOD, KIND_COLUMN, LINE_COLUMN
from lakehouse.storage import remove_tree
from lakehouse.stream import ledger, staged
from lakehouse.stream.entries import DueRejects, Event, Release, Segment
from lakehouse.stream.ledger import APP_ID
from lakehouse.stream.model import StreamError, StreamState, fmt
from lakehouse.stream.status import wall_clock
from lakehouse.stream.store import StreamStore
from lakehouse.times import from_micros
from lakehouse.warehouse import TablePaths

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)
UTC = dt.timezone.utc


def pa_concat(tables: list["pa.Table"]) -> "pa.Table":
    """The tables one after the other (their schemas unified)."""
    import pyarrow as pa

    return pa.concat_tables(tables, promote_options="permissive")


RELEASE_MARK = "~r"


def release_load(seg: Segment, release: int) -> str:
    """The load id (``_lh_load``) of the rows of insert ``seg`` that release ``release`` puts into
    live: the insert's load id (a load, an ingest batch, a producer's insert), then the release.
    One insert can reach live over several releases, and archiving purges live by (day, load)
    after it committed what it read: were the releases to share a load id, the purge would delete
    rows of a release committed after the run read live, rows it never archived."""
    return f"{seg.data.get('load_id', '')}{RELEASE_MARK}{int(release)}"


def insert_of(load: str) -> str:
    """The insert's load id of a row's ``_lh_load`` (the release part taken off)."""
    return load.split(RELEASE_MARK, 1)[0]


@dataclass
class Registered:
    """What the stream made of one insert."""

    segment: str | None
    """The segment staged (None: no row was taken)."""
    late_below: int | None
    late_by_file: dict[int, int] = field(default_factory=dict)
    keeps_staging: bool = False
    """The stream now owns the staging folder (it removes it when all is released)."""
    duplicate: bool = False
    """Its idempotency key was inserted before: nothing was taken (no row, no reject)."""

    @property
    def late(self) -> int:
        """Rows the insert rejected late, over all its files."""
        return sum(self.late_by_file.values())


@dataclass
class Released:
    """Totals of the releases one call committed."""

    inserted: int = 0
    updated: int = 0


class Stream:
    """The stream of one table."""

    def __init__(self, spark_factory: Callable[[], "SparkSession"], definition: TableDefinition,
                 paths: TablePaths, clock: Callable[[], int] | None = None) -> None:
        self.spark_factory = spark_factory
        self.definition = definition
        self.paths = paths
        self.store = StreamStore(paths)
        self.clock = clock or wall_clock
        self.released = Released()
        self._times: dict[str, np.ndarray] = {}
        self._times_from: dict[str, str] = {}
        """Segment id -> the rows folder its cached times were read from (an erasure by another
        process moves a segment's rows: its times are read again)."""

    @property
    def lease_us(self) -> int:
        """The table's producer lease, in microseconds."""
        return self.definition.stream.lease.millis * 1000

    @property
    def lateness_us(self) -> int | None:
        """The table's allowed lateness in microseconds (None: no row is late)."""
        lat = self.definition.stream.allowed_lateness
        return None if lat is None else lat.millis * 1000

    # -- producer operations ----------------------------------------------------------------------

    @contextlib.contextmanager
    def _changing(self, what: str) -> Iterator[tuple[StreamState, Lease]]:
        with self.store.locked(f"{what} on {self.definition.name}") as lease:
            state = self.store.read()
            self.store.fence = lease.check  # no save once another process has taken the lease
            try:
                self.store.flush(state)  # events a crashed process saved but did not log
                self._finish_pending(state, lease)
                self._finish_rejects(state, lease)
                yield state, lease
            except StreamError as e:
                raise StreamError(f"{self.definition.name}: {e}") from None
            finally:
                self.store.fence = None

    def _apply(self, what: str, op: Callable[[StreamState, int], list[Event]]) -> StreamState:
        with self._changing(what) as (state, lease):
            now = self.clock()
            events = op(state, now)  # raises StreamError before anything is saved
            self.store.commit(state, events)
            self._release(state, lease, now)
            return state

    def attach(self, name: str, bound: int | None = None) -> StreamState:
        """Attach producer ``name`` (renew it when attached), at ``bound`` (micros) if given."""
        return self._apply(f"attach {name}", lambda s, now: s.attach(name, now, self.lease_us, bound))

    def assert_bound(self, name: str, bound: int, raise_only: bool = False) -> StreamState:
        """Producer ``name`` promises no later row earlier than ``bound`` (micros); ``raise_only``: a
        bound below its own is a heartbeat, not an error."""
        return self._apply(f"bound {name}", lambda s, now: s.assert_bound(name, bound, now, self.lease_us,
                                                                          raise_only=raise_only))

    def heartbeat(self, name: str) -> StreamState:
        """Renew producer ``name``'s lease (it holds the watermark again if it had stopped)."""
        return self._apply(f"heartbeat {name}", lambda s, now: s.heartbeat(name, now, self.lease_us))

    def detach(self, name: str, attached_at: int | None = None) -> StreamState:
        """Detach producer ``name`` (it stops holding the watermark), then release what is due;
        ``attached_at``: only the attachment made then (a later one stays)."""
        return self._apply(f"detach {name}", lambda s, now: s.detach(name, now, attached_at))

    def tick(self) -> StreamState:
        """Expire leases and release what is due (archiving with ``clock: bound`` does this first)."""
        return self._apply("release", lambda s, now: s.expire(now))

    def attached(self, name: str) -> bool:
        """Whether producer ``name`` is attached now (read without the lease)."""
        p = self.store.read().producers.get(name)
        return p is not None and p.attached

    def replay(self, name: str, origin: str, number: int) -> dict[str, Any] | None:
        """What insert ``number`` of ``origin`` did, if it was registered (read without the lease:
        ``register`` checks again under it)."""
        owner = self.store.read().seen_by(origin, number)
        if owner is None:
            return None
        last = owner.last.get(origin, {})
        return last if last.get("number") == number else {}

    def register(self, name: str, origin: str, number: int, staging: str, failed: list[int], load_id: str,
                 rejects: dict[str, Any] | None = None, manifest: dict[str, Any] | None = None,
                 key: tuple[str, int] | None = None, moves_bound: bool = True) -> Registered:
        """Insert the good rows staged in ``staging`` (files ``failed`` excluded) as producer
        ``name``'s insert ``number`` of ``origin``; replayed inserts are recognised, and so is an
        insert whose idempotency ``key`` (the caller's (app, version)) was inserted before: it takes
        nothing (``duplicate``). The key is saved with the insert, in the same save.

        This is the moment the insert happens: one save takes its rows (staged, late) and its
        rejects (``rejects``: ``staged.rejects_spec`` of the bad rows and failed files; late rows
        are added here). Then its rejects are committed and what became due is released; a
        process killed after the save leaves both to the next operation, whoever runs it."""
        with self._changing(f"insert by {name}") as (state, lease):
            now = self.clock()
            owner = state.seen_by(origin, number)
            if owner is not None:  # registered before (maybe under another producer name)
                last = owner.last.get(origin, {})
                self.store.commit(state, state.expire(now))
                self._release(state, lease, now)
                seg_id = last.get("segment")
                live_seg = any(s.id == seg_id for s in state.segments)
                return Registered(seg_id, last.get("below"), {int(k): v for k, v in last.get("late", {}).items()},
                                  keeps_staging=live_seg)
            if key is not None and state.seen_key(key) is not None:  # the caller's replay: nothing is taken
                self.store.commit(state, state.expire(now))
                self._release(state, lease, now)
                return Registered(None, None, {}, duplicate=True)
            table = staged.read_times(self.definition, staging, failed)
            times = table["t"]
            if manifest and int(manifest.get("good", 0)) and not len(times):
                raise LakehouseError(f"{self.definition.name}: insert {number} of {name!r}: its staged rows "
                                     f"({staging}) are gone; nothing was registered: run the same command again")
            data = {"path": staging, "failed": failed, "load_id": load_id, "origin": origin, "number": number}
            seg, n_late, below, events = state.insert(name, times, now, self.lease_us, self.lateness_us, origin,
                                                      number, segment_id=f"{state.insert_seq + 1:010d}", data=data,
                                                      key=key, moves_bound=moves_bound)
            late_by_file: dict[int, int] = {}
            if below is not None:
                files, counts = np.unique(table["f"][times < below], return_counts=True)
                late_by_file = {int(f): int(n) for f, n in zip(files, counts)}
            if seg is not None:
                self._times[seg.id] = np.sort(times if below is None else times[times >= below])
                self._times_from[seg.id] = staged.segment_rows(data)
            spec = dict(rejects or {})
            if staged.has_rejects(spec, n_late):
                state.rejects_due.append(DueRejects(origin, number, name, None if seg is None else seg.id,
                                                    below if n_late else None, int(n_late), spec))
            state.producers[name].last[origin] = {  # what a replay of this insert must report
                "number": number, "below": below, "late": {str(k): v for k, v in late_by_file.items()},
                "segment": None if seg is None else seg.id, "manifest": manifest}
            self.store.commit(state, events)
            crashpoints.reached("stream_after_insert")
            self._release(state, lease, now)
            crashpoints.reached("stream_before_rejects")
            self._finish_rejects(state, lease)
            return Registered(None if seg is None else seg.id, below, late_by_file,
                              keeps_staging=seg is not None and any(s.id == seg.id for s in state.segments))

    def recover(self) -> bool:
        """Finish what a crashed operation left (a planned release, a registered insert's rejects),
        if anything: True when there was something (read-only commands call this first; nothing
        is planned anew, so no JVM starts when nothing is left)."""
        if not self.store.read().unfinished():
            return False
        with self._changing("recovery"):
            return True

    # -- releases ---------------------------------------------------------------------------------

    def _release(self, state: StreamState, lease: Lease, now: int) -> None:
        while True:
            floor = state.floor
            rel = state.plan_release(now, self._times_of)
            if rel is None:
                if state.floor != floor:  # the watermark this operation leaves: never below it again
                    self.store.save(state)
                self._cleanup(state)
                return
            state.pending = rel
            self.store.save(state)
            crashpoints.reached("stream_after_plan")
            self._commit(state, rel, lease)
            crashpoints.reached("stream_after_live")
            self.store.commit(state, state.apply_release(rel))
            crashpoints.reached("stream_after_state")
            self._cleanup(state)

    def _finish_pending(self, state: StreamState, lease: Lease) -> None:
        done = ledger.last_committed(self.paths)
        rel = state.pending
        if rel is not None:
            if done < rel.seq:
                log.warning("stream of %s: finishing release %d left by an interrupted run",
                            self.definition.name, rel.seq)
                self._commit(state, rel, lease)
            self.store.commit(state, state.apply_release(rel))
            self._cleanup(state)
        elif done > state.release_seq:  # a state older than the table: numbering continues after it
            log.warning("stream state of %s is behind the table (release %d); numbering continues",
                        self.definition.name, done)
            state.release_seq = done
            self.store.save(state)

    def _finish_rejects(self, state: StreamState, lease: Lease) -> None:
        """Commit the rejects of registered inserts (oldest first; a commit already in the table
        is skipped), then let their staging go once nothing else needs it."""
        if not state.rejects_due:
            return
        for due in list(state.rejects_due):
            lease.check()
            if staged.commit_rejects(self.definition, self.paths, due):
                crashpoints.reached("stream_after_rejects")
            state.rejects_committed(due)
            self.store.save(state)
            if due.segment is None:  # no segment owns the staging (no row was taken): it can go now
                self._remove_staging(state, due.data.get("staging", ""))
        self._cleanup(state)

    def _remove_staging(self, state: StreamState, path: str) -> None:
        if path and path not in self.store.referenced(state):
            remove_tree(path)

    def _commit(self, state: StreamState, rel: Release, lease: Lease) -> None:
        lease.check()
        days: set[dt.date] = set()
        segments = {s.id: s for s in state.segments}
        for sid, (lo, hi) in sorted(rel.ranges.items()):
            times = self._times_of(segments[sid])
            a = 0 if lo is None else int(np.searchsorted(times, lo, side="right"))
            b = int(np.searchsorted(times, hi, side="right"))
            day = 86_400_000_000
            for start in np.unique(times[a:b] - times[a:b] % day):
                days.add(from_micros(int(start)).date())
        meta = json.dumps({"lakehouse.stream": {"release": rel.seq, "bound": fmt(rel.bound),
                                                "upto": fmt(rel.upto) if rel.upto is not None else None}})
        ledger.record(self.paths, rel.seq, wall_clock(), [  # when and from whom these rows entered live
            {"load": release_load(segments[sid], rel.seq), "producer": segments[sid].producer, "after": lo,
             "upto": hi, "rows": rel.counts.get(sid, 0)} for sid, (lo, hi) in sorted(rel.ranges.items())],
            watermark=rel.upto if rel.upto is not None else max((t for t in (rel.bound, state.floor) if t is not None),
                                                                default=None))
        crashpoints.kill_later("stream_during_release", 0.3)
        ranges = sorted(rel.ranges.items())
        if small(self.paths, rel.rows, days):  # a few rows: Arrow and delta-rs, no Spark job
            rows = pa_concat([self._rows(segments[sid], lo, hi, rel.seq) for sid, (lo, hi) in ranges])

            def commit() -> tuple[int, int]:
                """The release's one commit into live; (inserted, updated)."""
                return commit_live_rows(self.definition, self.paths, rows, "", days, txn=(APP_ID, rel.seq),
                                        user_metadata=meta)
        else:
            spark = self.spark_factory()
            frames = [self._frame(spark, segments[sid], lo, hi, rel.seq) for sid, (lo, hi) in ranges]
            good = functools.reduce(lambda a, b: a.unionByName(b), frames)

            def commit() -> tuple[int, int]:
                """The release's one commit into live; (inserted, updated)."""
                with SESSION_CONF:
                    spark.conf.set("spark.databricks.delta.commitInfo.userMetadata", meta)
                    try:
                        return commit_live(spark, self.definition, self.paths, good, "", days, rel.rows,
                                           txn=(APP_ID, rel.seq))
                    finally:
                        spark.conf.unset("spark.databricks.delta.commitInfo.userMetadata")

        (ins, upd), _ = with_retries(f"release {rel.seq} into {self.definition.name}/live", commit)
        self.released.inserted += ins
        self.released.updated += upd

    def _rows(self, seg: Segment, lo: int | None, hi: int, release: int) -> "pa.Table":
        import pyarrow as pa

        t = staged.read_rows(self.definition, seg.data["path"], seg.data.get("failed", []), seg.late_below, lo, hi,
                             rows=staged.segment_rows(seg.data))
        return t.append_column(SEQ_COLUMN, pa.array([seg.seq] * t.num_rows, pa.int64())) \
            .append_column(LOAD_COLUMN, pa.array([release_load(seg, release)] * t.num_rows, pa.string()))

    def _frame(self, spark: "SparkSession", seg: Segment, lo: int | None, hi: int, release: int) -> "DataFrame":
        from pyspark.sql import functions as F

        et = F.col(self.definition.event_time)
        df = spark.read.parquet(staged.segment_rows(seg.data)).where(F.col(KIND_COLUMN) == GOOD)
        if seg.data.get("failed"):
            df = df.where(~F.col(FILE_COLUMN).isin(seg.data["failed"]))
        if seg.late_below is not None:
            df = df.where(et >= F.expr(f"timestamp_micros({int(seg.late_below)}L)"))
        if lo is not None:
            df = df.where(et > F.expr(f"timestamp_micros({int(lo)}L)"))
        df = df.where(et <= F.expr(f"timestamp_micros({int(hi)}L)"))
        return df.select(*self.definition.column_names, FILE_COLUMN, LINE_COLUMN,
                         F.lit(seg.seq).cast("long").alias(SEQ_COLUMN),
                         F.lit(release_load(seg, release)).alias(LOAD_COLUMN))

    def _times_of(self, seg: Segment) -> "np.ndarray":
        folder = staged.segment_rows(seg.data)
        cached = self._times.get(seg.id) if self._times_from.get(seg.id) == folder else None
        if cached is None:
            times = staged.read_times(self.definition, seg.data["path"], seg.data.get("failed", []),
                                      staged.segment_rows(seg.data))["t"]
            cached = np.sort(times if seg.late_below is None else times[times >= seg.late_below])
            self._times[seg.id], self._times_from[seg.id] = cached, folder
        return cached

    def _cleanup(self, state: StreamState) -> None:
        for sid in set(self._times) - {s.id for s in state.segments}:  # cleaned by another process
            del self._times[sid]
            self._times_from.pop(sid, None)
        done = state.finished_segments()
        if not done:
            return
        state.drop({s.id for s in done})
        self.store.save(state)
        for s in done:
            self._times.pop(s.id, None)
            self._remove_staging(state, s.data["path"])
