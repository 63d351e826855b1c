"""One archiving run on Spark: plan, then execute, recoverably at every step.

Steps (crash points in brackets; a SIGKILL anywhere leaves every query exact):

0. Lease and recover: take the table's lease (a file in the warehouse: one run at a time, also
   across hosts); bring the ledger up to the committed cutoff; purge live rows the last committed
   run archived but did not delete yet; remove vector files no reader uses (uncommitted or
   superseded) and other runs' leftover staging.
1. Plan: C' = now - delay; the live snapshot V; the UTC days of V's rows with event time < C',
   rows per day; archived days whose vector files were written under other settings (they are
   re-sorted and re-encoded too). [after_plan]
2. Stage: merge those rows with the days' archive batches (with a key, the live version of a key
   replaces the archived one), sort each day by the total order (sort columns, event time, key,
   other columns), write to ``_staging/archive-<C'>-<run id>`` (this run's own folder),
   range-partitioned by day into a few partitions (not one per day). [after_staging]
3. Vectors: tasks of many days each stream the staged rows into vector files ``<day>-<C'>``
   (executors); they count the rows per day, checked against the plan. [during_vectors,
   after_vectors]
   Conservation (``archive/ledger.py``): per day, the rows taken (live rows, plus the day's
   archive rows kept; replaced ones counted) and the staged rows read back have the same count
   and checksum, or the run stops here (``ConservationError``); ``LAKEHOUSE_FAULT`` damages
   the staged batch just before this check (tests).
4. Commit: one Delta write replaces the days in the archive (a day range and IN lists of days)
   and records C' (SetTransaction) and the figures (``userMetadata``); then the committed rows
   per day are checked against the staged ones, and the figures go into the ledger
   (``<table>/_ledger``; a crash before that is repaired by recovery). [during_commit,
   after_commit]
5. Purge: one MERGE deletes from live the archived rows: event time < C' and a (day, load) pair
   the archive holds (rows loaded after V carry other load ids, so they stay). [after_purge]
6. Clean: superseded vector files and staging.

A failing step is recorded in ``_state/archive-status.json`` (``lakehouse tables`` shows it); a
step after the commit is retried by the next run's recovery.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import logging
import os
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

import pyarrow as pa

from lakehouse import crashpoints, faults
from lakehouse.archive import ledger_table, vectors
from lakehouse.archive.encode import DayTask, encode_days
from lakehouse.archive.ledger import (
    CommitFigures,
    DayInput,
    Figures,
    commit_info,
    conservation_problems,
    hash_sum_sql,
    row_hash_sql,
    stored_columns,
)
from lakehouse.archive.plan import (
    ArchivePlan,
    cutoff_time,
    date_literal,
    days_sql,
    group_days,
    new_cutoff,
    partition_count,
    staged_problems,
)
from lakehouse.archive.state import CUTOFF_APP_ID, read_status, spark_snapshot, write_status
from lakehouse.definitions import LOAD_COLUMN, PARTITION_COLUMN, TableDefinition
from lakehouse.errors import CommitConflict, ConservationError, LakehouseError
from lakehouse.lease import Lease, table_lease
from lakehouse.live import check_loadable
from lakehouse.spark.commit import with_retries
from lakehouse.storage import join, remove_tree
from lakehouse.warehouse import TablePaths

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

log = logging.getLogger(__name__)
"""``vectors/_runs/<cutoff>.json``: the encoding each run wrote its days under (a sidecar)."""


@dataclass
class ArchiveResult:
    """What a run did."""

    plan: ArchivePlan
    committed: bool = False
    rows_archived: int = 0
    rows_purged: int = 0
    recovered_rows: int = 0
    """Rows purged on behalf of an earlier run that crashed after its commit."""
    vector_files: int = 0
    removed_vector_files: int = 0
    seconds: float = 0.0
    timings: dict[str, float] = field(default_factory=dict)
    run_id: str = ""
    figures: CommitFigures | None = None
    """The run's books (rows and checksums in and out per day), as committed."""
    ledger_rows: int = 0
    """Ledger rows recovery wrote on behalf of an earlier run (or as a baseline)."""

    def as_dict(self) -> dict[str, Any]:
        return {
            "cutoff": self.plan.cutoff if self.committed else self.plan.previous_cutoff,
            "previous_cutoff": self.plan.previous_cutoff,
            "days": [d.isoformat() for d in self.plan.days],
            "rows_archived": self.rows_archived,
            "committed": self.committed,
            "rows_purged": self.rows_purged,
            "recovered_rows": self.recovered_rows,
            "reencoded_days": [d.isoformat() for d in self.plan.reencode_days]
            if self.committed
            else [],
            "rows_replaced": sum(i.replaced.rows for _, i, _ in self.figures.days) if self.figures else 0,
            "ledger_rows_repaired": self.ledger_rows,
            "vector_files": self.vector_files,
            "removed_vector_files": self.removed_vector_files,
            "seconds": round(self.seconds, 3),
        }


def _order(definition: TableDefinition) -> list["Column"]:
    from pyspark.sql import functions as F

    return [F.col(PARTITION_COLUMN).asc()] + [
        F.col(c).asc_nulls_first() for c in definition.sort_order
    ]


def _archive_columns(definition: TableDefinition) -> list[str]:
    return [*definition.column_names, LOAD_COLUMN, PARTITION_COLUMN]


def _ts(cutoff: int) -> "Column":
    from pyspark.sql import functions as F

    return F.lit(cutoff_time(cutoff)).cast("timestamp")


def _days_sql(days: list[dt.date] | tuple[dt.date, ...]) -> str:
    return days_sql(PARTITION_COLUMN, days)


def encoding(definition: TableDefinition) -> vectors.Encoding:
    from lakehouse.archive.reader import current_encoding

    return current_encoding(definition)


class ArchiveJob:
    """An archiving run of one table; ``plan()`` first, then ``execute(plan)``."""

    def __init__(
        self,
        spark: "SparkSession",
        warehouse: str,
        definition: TableDefinition,
        run_id: str | None = None,
        lease: Lease | None = None,
        ledger: bool = True,
    ) -> None:
        self.spark = spark
        self.definition = definition
        self.paths = TablePaths(warehouse, definition.name)
        self.run_id = run_id or uuid.uuid4().hex[:12]
        self.lease = lease
        self.ledger = ledger
        """Check conservation and keep the books (off only for the benchmark's baseline)."""
        self.repaired = 0
        """Ledger rows the recovery wrote."""
        self.step = "start"

    @property
    def parallelism(self) -> int:
        return max(1, int(self.spark.sparkContext.defaultParallelism))

    def staging_for(self, cutoff: int) -> str:
        """This run's own staging folder (another run never shares it)."""
        return join(self.paths.staging, f"archive-{cutoff}-{self.run_id}")

    # -- reading ----------------------------------------------------------------------------

    def _read(self, path: str, version: int) -> "DataFrame":
        return self.spark.read.format("delta").option("versionAsOf", version).load(path)

    def _archive_day_rows(self, version: int | None) -> dict[dt.date, int]:
        """Rows per archive day at a version, from the Delta log (no data read)."""
        if version is None:
            return {}
        from deltalake import DeltaTable

        actions = pa.table(
            DeltaTable(self.paths.archive, version=version).get_add_actions(flatten=True)
        )
        out: dict[dt.date, int] = {}
        if actions.num_rows == 0:
            return out
        for day, n in zip(
            actions.column(f"partition.{PARTITION_COLUMN}").to_pylist(),
            actions.column("num_records").to_pylist(),
        ):
            out[day] = out.get(day, 0) + int(n or 0)
        return out

    def stale_days(self, committed: int | None, archived: set[dt.date]) -> list[dt.date]:
        """Archived days whose vector files were written under other settings than today's
        (sort columns or the vector set), or are missing: they need re-sorting and re-encoding."""
        if committed is None:
            return []
        return sorted(vectors.stale_days(self.paths.vectors, encoding(self.definition), committed, archived))

    def _write_run_sidecar(self, plan: ArchivePlan) -> None:
        fs, root = vectors.filesystem(join(self.paths.vectors, vectors.RUNS_FOLDER))
        fs.create_dir(root, recursive=True)
        doc = {
            "cutoff": plan.cutoff,
            "run_id": self.run_id,
            "encoding": encoding(self.definition).key(),
            "days": len(plan.days),
        }
        tmp = join(root, f".{plan.cutoff}.json.{self.run_id}.tmp")
        with fs.open_output_stream(tmp) as f:
            f.write(json.dumps(doc).encode())
        fs.move(tmp, join(root, f"{plan.cutoff}.json"))

    # -- plan -------------------------------------------------------------------------------

    def plan(self, now: dt.datetime) -> ArchivePlan:
        from pyspark.sql import functions as F

        self.step = "plan"
        d = self.definition
        check_loadable(d, self.paths)
        archive = spark_snapshot(self.spark, self.paths.archive)
        live = spark_snapshot(self.spark, self.paths.live)
        watermark = None
        if d.archive.clock == "bound":  # never seal a day an attached producer may still write into
            from lakehouse.stream.engine import describe, micros
            from lakehouse.stream.store import StreamStore

            watermark = describe(StreamStore(self.paths), d, self.paths, micros(now))["watermark"]
            if watermark is None:
                previous = archive.cutoff
                return ArchivePlan(d.name, now, previous, previous if previous is not None else 0, live.version,
                                   archive.version, clock="bound", no_watermark=True,
                                   notes=["the table's watermark is undefined (no row released by a producer yet, "
                                          "or a producer holding it has no bound): nothing is sealed"])
        clock = now
        if watermark is not None:  # rows may still come as far below it as the allowed lateness
            lateness = d.stream.allowed_lateness
            clock = min(now, watermark - dt.timedelta(milliseconds=lateness.millis if lateness else 0))
        cutoff = new_cutoff(clock, d.archive.delay)
        if cutoff < 0:
            raise LakehouseError(
                f"archive {d.name}: the cutoff {cutoff} ({cutoff_time(cutoff).isoformat()}) is before "
                "1970-01-01; Delta records the cutoff as a SetTransaction version, which cannot be "
                "negative; pass a --now after 1970-01-01 plus the delay (rows of any earlier day are "
                "archived by such a run)"
            )
        previous = archive.cutoff
        base = ArchivePlan(d.name, now, previous, cutoff, live.version, archive.version, clock=d.archive.clock,
                           watermark=watermark)
        if not base.advances:
            return base
        et = F.col(d.event_time)
        late = F.lit(False) if previous is None else et < _ts(previous)
        aggs = [F.count(F.lit(1)).alias("n"), F.sum(F.when(late, 1).otherwise(0)).alias("late")]
        if self.ledger:  # the live side of the books, in the same pass
            aggs.append(F.expr(hash_sum_sql(row_hash_sql(stored_columns(d)))).alias("h"))
        rows = (
            self._read(self.paths.live, live.version)
            .where(F.col(PARTITION_COLUMN) <= F.lit(cutoff_time(cutoff).date()))
            .where(et < _ts(cutoff))
            .groupBy(PARTITION_COLUMN)
            .agg(*aggs)
            .collect()
        )
        new_rows = {r[PARTITION_COLUMN]: int(r["n"]) for r in rows}
        new_sums = {r[PARTITION_COLUMN]: Figures.of(r["n"], r["h"]).checksum for r in rows} if self.ledger else {}
        archived = self._archive_day_rows(archive.version)
        stale = [
            day
            for day in self.stale_days(previous, {k for k, v in archived.items() if v})
            if day not in new_rows and archived.get(day)
        ]
        days = tuple(sorted({*new_rows, *stale}))
        archive_rows = {day: archived[day] for day in days if archived.get(day)}
        return ArchivePlan(
            d.name,
            now,
            previous,
            cutoff,
            live.version,
            archive.version,
            days,
            rows=sum(new_rows.values()),
            late_rows=sum(int(r["late"] or 0) for r in rows),
            archive_rows_in_days=sum(archive_rows.values()),
            new_rows=new_rows,
            new_sums=new_sums,
            archive_rows=archive_rows,
            reencode_days=tuple(stale),
            clock=d.archive.clock,
            watermark=watermark,
        )

    # -- execute ----------------------------------------------------------------------------

    def _check_lease(self) -> None:
        if self.lease is not None:
            self.lease.check()

    def execute(self, plan: ArchivePlan, through: str | None = None) -> ArchiveResult:
        """Run the plan; ``through="commit"`` stops right after the commit (tests of readers)."""
        started = time.monotonic()
        result = ArchiveResult(plan, run_id=self.run_id)
        if not plan.advances:
            result.seconds = time.monotonic() - started
            return result
        crashpoints.reached("after_plan")
        staging = self.staging_for(plan.cutoff)
        staged: dict[dt.date, int] = {}
        figures: CommitFigures | None = None
        try:
            if plan.days:
                self.step = "stage"
                t = time.monotonic()
                self._stage(plan, staging)
                result.timings["stage"] = time.monotonic() - t
                crashpoints.reached("after_staging")
                self.step = "vectors"
                t = time.monotonic()
                result.vector_files, staged = self._write_vectors(plan, staging)
                result.timings["vectors"] = time.monotonic() - t
                crashpoints.reached("after_vectors")
                problems = staged_problems(
                    self.definition.name,
                    plan.days,
                    plan.new_rows,
                    plan.archive_rows,
                    staged,
                    self.definition.has_key,
                )
                if problems:
                    raise LakehouseError(
                        problems[0]
                        + (f" (and {len(problems) - 1} more)" if len(problems) > 1 else "")
                        + "; nothing was committed; run again"
                    )
                if faults.armed():
                    damage = faults.damage_staging(self._staged_files(staging))
                    log.warning("archive %s: injected fault: %s", self.definition.name, damage)
            if self.ledger:
                self.step = "conservation"
                t = time.monotonic()
                figures = self._conservation(plan, staging)
                result.timings["conservation"] = time.monotonic() - t
            if plan.days and self.definition.archive.checks == "before_commit":
                self.step = "checks"
                t = time.monotonic()
                self._gate(plan, staging)
                result.timings["checks"] = time.monotonic() - t
            self.step = "commit"
            t = time.monotonic()
            self._write_run_sidecar(plan)
            version = self._commit(plan, staging, figures)
        except BaseException:
            self._discard_uncommitted(plan.cutoff, staging)
            raise
        result.timings["commit"] = time.monotonic() - t
        result.committed = True
        result.rows_archived = plan.rows
        result.figures = figures
        crashpoints.reached("after_commit")
        self.step = "check"
        self._check_committed(plan, staged)
        if figures is not None:
            self.step = "ledger"
            t = time.monotonic()
            ledger_table.append(self.paths, figures.rows(version), plan.cutoff)
            result.timings["ledger"] = time.monotonic() - t
        if through == "commit":
            return result
        self.step = "purge"
        t = time.monotonic()
        result.rows_purged = self.purge(plan.cutoff)
        result.timings["purge"] = time.monotonic() - t
        crashpoints.reached("after_purge")
        self.step = "clean"
        t = time.monotonic()
        result.removed_vector_files = self.clean(plan.cutoff)
        result.timings["clean"] = time.monotonic() - t
        result.seconds = time.monotonic() - started
        return result

    def _taken(self, plan: ArchivePlan) -> tuple["DataFrame", "DataFrame"]:
        """The live rows the run takes, and the days' archive rows at the plan's version."""
        from pyspark.sql import functions as F

        d = self.definition
        cols = _archive_columns(d)
        assert plan.live_version is not None and plan.archive_version is not None
        new_days = sorted(plan.new_rows)
        new = (
            self._read(self.paths.live, plan.live_version)
            .where(_days_sql(new_days))
            .where(F.col(d.event_time) < _ts(plan.cutoff))
            .select(*cols)
        )
        old = (
            self._read(self.paths.archive, plan.archive_version)
            .where(_days_sql(plan.days))
            .select(*cols)
        )
        return new, old

    def _merged(self, plan: ArchivePlan) -> "DataFrame":
        d = self.definition
        cols = _archive_columns(d)
        new, old = self._taken(plan)
        if d.has_key:
            keys = [*d.primary_key, PARTITION_COLUMN]
            old = old.join(new.select(*keys), on=keys, how="left_anti").select(*cols)
        return old.unionByName(new)

    def _partitions(self, plan: ArchivePlan) -> int:
        rows = plan.rows + plan.archive_rows_in_days
        return partition_count(rows, len(plan.days), self.parallelism)

    def _stage(self, plan: ArchivePlan, staging: str) -> None:
        from pyspark.sql import functions as F

        (
            self._merged(plan)
            .repartition(self._partitions(plan), F.col(PARTITION_COLUMN))
            .sortWithinPartitions(*_order(self.definition))
            .write.mode("errorifexists")
            .partitionBy(PARTITION_COLUMN)
            .parquet(staging)
        )

    def _staged_files(self, staging: str) -> dict[dt.date, list[str]]:
        fs, root = vectors.filesystem(staging)
        import pyarrow.fs as pafs

        out: dict[dt.date, list[str]] = {}
        for info in fs.get_file_info(pafs.FileSelector(root, recursive=True)):
            if info.type != pafs.FileType.File or not info.base_name.endswith(".parquet"):
                continue
            part = info.path.rsplit("/", 2)[-2]
            if not part.startswith(f"{PARTITION_COLUMN}="):
                continue
            day = dt.date.fromisoformat(part.split("=", 1)[1])
            out.setdefault(day, []).append(vectors.to_uri(staging, root, info.path))
        return {k: sorted(v) for k, v in out.items()}

    def _write_vectors(self, plan: ArchivePlan, staging: str) -> tuple[int, dict[dt.date, int]]:
        """Encode the staged days into vector files; (files written, staged rows per day)."""
        d = self.definition
        sort_cols = tuple((c, d.column(c).type.arrow()) for c in d.archive.sort_columns)
        plain: tuple[tuple[str, pa.DataType], ...] = ()
        if d.archive.vectors == "all":
            plain = tuple(
                (c.name, c.type.arrow()) for c in d.columns if c.name not in d.archive.sort_columns
            )
        files = self._staged_files(staging)
        if not sort_cols and not plain:
            import pyarrow.parquet as pq

            counts: dict[dt.date, int] = {}
            for day, paths in files.items():
                for path in paths:
                    fs, p = vectors.filesystem(path)
                    with fs.open_input_file(p) as f:
                        counts[day] = counts.get(day, 0) + pq.ParquetFile(f).metadata.num_rows
            return 0, counts
        missing = [day for day in plan.days if day not in files]
        if missing:
            raise LakehouseError(
                f"archive {d.name}: staged batch missing for {missing[0]} in {staging}; "
                "nothing was committed; run again"
            )
        pid = os.getpid() if crashpoints.armed() else None
        enc = encoding(d).key()
        tasks = {
            day: DayTask(
                day, tuple(files[day]), self.paths.vectors, plan.cutoff, sort_cols, plain, pid, enc
            )
            for day in files
        }
        weights = {day: plan.new_rows.get(day, 0) + plan.archive_rows.get(day, 0) for day in files}
        groups = [[tasks[day] for day in g] for g in group_days(weights, self.parallelism)]
        sc = self.spark.sparkContext
        done = sc.parallelize(groups, len(groups)).flatMap(encode_days).collect()
        return sum(n for _, _, n in done), {
            dt.date.fromisoformat(day): rows for day, rows, _ in done
        }

    def _gate(self, plan: ArchivePlan, staging: str) -> None:
        """``archive.checks: before_commit``: the table's quality checks on the staged batches;
        a failing one refuses the commit (QualityGateFailed: terminal for the jobs)."""
        from lakehouse.quality.gate import gate

        gate(self.spark, self.definition, self._read_staged(staging), cutoff_time(plan.cutoff),
             self.paths.warehouse, self.run_id)

    def _read_staged(self, staging: str) -> "DataFrame":
        """The staged batch as the commit writes it."""
        from pyspark.sql.types import StructType

        d = self.definition
        schema = cast(StructType, StructType.fromDDL(d.spark_ddl()))
        return (
            self.spark.read.schema(schema)
            .option("basePath", staging)
            .parquet(staging)
            .select(*_archive_columns(d))
        )

    def _conservation(self, plan: ArchivePlan, staging: str) -> CommitFigures:
        """Rows in == rows out per day, or ConservationError (nothing committed). The live rows
        taken were hashed and summed per day by the plan (same snapshot, same pass); one Spark
        job hashes and sums per day the days' archive rows, kept or replaced (by a live row of the
        same key and day; skipped when the days hold none), and the staged rows read back."""
        from pyspark.sql import functions as F

        d = self.definition
        columns = stored_columns(d)
        h = ledger_table.hash_column(columns).alias("_lh_hash")
        sides: dict[dt.date, dict[str, Figures]] = {}
        if plan.new_sums:
            for day, n in plan.new_rows.items():
                sides.setdefault(day, {})["live"] = Figures(n, plan.new_sums.get(day, 0))
        parts = []
        if plan.days:
            new, old = self._taken(plan)
            if not plan.new_sums and plan.new_rows:  # a plan made without the books
                parts.append(new.select(PARTITION_COLUMN, F.lit("live").alias("_lh_side"), h))
            if sum(plan.archive_rows.values()):
                if d.has_key:
                    keys = [*d.primary_key, PARTITION_COLUMN]
                    marks = new.select(*keys).distinct().withColumn("_lh_replaced", F.lit(True))
                    old = old.join(marks, on=keys, how="left")
                    side = F.when(F.col("_lh_replaced"), F.lit("replaced")).otherwise(F.lit("kept"))
                else:
                    side = F.lit("kept")
                parts.append(old.select(PARTITION_COLUMN, side.alias("_lh_side"), h))
            parts.append(self._read_staged(staging).select(PARTITION_COLUMN, F.lit("out").alias("_lh_side"), h))
        if parts:
            union = parts[0]
            for part in parts[1:]:
                union = union.unionByName(part)
            figs = ledger_table.figures_by(union, [PARTITION_COLUMN, "_lh_side"], hashed="_lh_hash")
            for (day, side_name), f in figs.items():
                sides.setdefault(day, {})[side_name] = f
        inputs = {
            day: DayInput(s.get("live", Figures()), s.get("kept", Figures()), s.get("replaced", Figures()))
            for day, s in sides.items() if set(s) - {"out"}
        }
        outputs = {day: s["out"] for day, s in sides.items() if "out" in s}
        problems = conservation_problems(d.name, plan.days, inputs, outputs, plan.new_rows, plan.archive_rows)
        if problems:
            more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
            raise ConservationError(
                f"{problems[0]}{more}; cutoff {plan.cutoff} refused: nothing was committed, live rows stay"
            )
        return CommitFigures(
            plan.cutoff, plan.previous_cutoff, self.run_id, tuple(c for c, _ in columns),
            tuple((day, inputs.get(day, DayInput()), outputs.get(day, Figures())) for day in plan.days),
        )

    def _commit(self, plan: ArchivePlan, staging: str, figures: CommitFigures | None = None) -> int:
        """Commit the staged days and the cutoff (and the figures); the archive version written."""
        from pyspark.sql import functions as F
        from pyspark.sql.types import StructType

        d = self.definition
        schema = cast(StructType, StructType.fromDDL(d.spark_ddl()))
        if plan.days:
            df = (
                self._read_staged(staging)
                .repartition(self._partitions(plan), F.col(PARTITION_COLUMN))
                .sortWithinPartitions(*_order(d))
            )
            writer = (
                df.write.format("delta")
                .mode("overwrite")
                .option("replaceWhere", _days_sql(plan.days))
            )
        else:
            writer = self.spark.createDataFrame([], schema).write.format("delta").mode("append")
        self._check_lease()
        current = spark_snapshot(self.spark, self.paths.archive)
        if current.version != plan.archive_version:
            raise CommitConflict(
                f"archive {d.name}: the archive changed since the plan (version {plan.archive_version} -> "
                f"{current.version}); another archiving run is under way or finished; run again"
            )
        crashpoints.kill_later("during_commit", 1.0)
        writer = writer.option("txnAppId", CUTOFF_APP_ID).option("txnVersion", plan.cutoff)
        if figures is not None:
            writer = writer.option("userMetadata", commit_info(figures))
        writer.save(self.paths.archive)
        after = spark_snapshot(self.spark, self.paths.archive)
        if after.cutoff != plan.cutoff:
            raise CommitConflict(
                f"archive {d.name}: cutoff {plan.cutoff} was not committed (the archive holds {after.cutoff}); "
                "another archiving run committed first; run again"
            )
        return after.version

    def _check_committed(self, plan: ArchivePlan, staged: dict[dt.date, int]) -> None:
        """The committed rows per day are the staged ones (from the Delta log; no data read)."""
        if not plan.days:
            return
        version = spark_snapshot(self.spark, self.paths.archive).version
        committed = self._archive_day_rows(version)
        bad = [day for day in plan.days if committed.get(day, 0) != staged.get(day, 0)]
        if bad:
            day = bad[0]
            raise LakehouseError(
                f"archive {self.definition.name}: day {day} holds {committed.get(day, 0)} rows after the commit of "
                f"cutoff {plan.cutoff}, {staged.get(day, 0)} were staged; live rows are not purged; "
                "check the archive with lakehouse verify"
            )

    # -- purge and clean (also the recovery of a crashed run) --------------------------------

    def purge(self, cutoff: int | None = None) -> int:
        """Delete from live the rows the archive holds: event time < cutoff and a (day, load)
        pair the archive's batch of that day contains. One MERGE against the small frame of
        pairs, however many days. Idempotent; returns rows deleted."""
        from delta.tables import DeltaTable
        from pyspark.sql import functions as F

        d = self.definition
        if cutoff is None:
            cutoff = spark_snapshot(self.spark, self.paths.archive).cutoff
            if cutoff is None:
                return 0
        live = self.spark.read.format("delta").load(self.paths.live)
        below = live.where(F.col(PARTITION_COLUMN) <= F.lit(cutoff_time(cutoff).date())).where(
            F.col(d.event_time) < _ts(cutoff)
        )
        days = sorted(
            r[PARTITION_COLUMN] for r in below.select(PARTITION_COLUMN).distinct().collect()
        )
        if not days:
            return 0
        pairs = (
            self.spark.read.format("delta")
            .load(self.paths.archive)
            .where(_days_sql(days))
            .select(PARTITION_COLUMN, LOAD_COLUMN)
            .distinct()
        )
        pair_rows = pairs.collect()  # small: loads per day
        if not pair_rows:
            return 0
        source = self.spark.createDataFrame(pair_rows, pairs.schema)
        held = sorted({r[PARTITION_COLUMN] for r in pair_rows})
        cond = (  # the literal day range lets Delta prune live's files; the join does the rest
            f"t.`{PARTITION_COLUMN}` >= {date_literal(held[0])} AND t.`{PARTITION_COLUMN}` <= {date_literal(held[-1])} "
            f"AND t.`{PARTITION_COLUMN}` = s.`{PARTITION_COLUMN}` AND t.`{LOAD_COLUMN}` = s.`{LOAD_COLUMN}` "
            f"AND t.`{d.event_time}` < timestamp_seconds({int(cutoff)})"
        )

        def delete() -> int:
            table = DeltaTable.forPath(self.spark, self.paths.live)
            (
                table.alias("t")
                .merge(F.broadcast(source).alias("s"), cond)
                .whenMatchedDelete()
                .execute()
            )
            last = table.history(1).select("operation", "operationMetrics").collect()[0]
            if last["operation"] != "MERGE":
                return 0
            return int((last["operationMetrics"] or {}).get("numTargetRowsDeleted", 0))

        deleted, _ = with_retries(f"purge of archived rows from {d.name}/live", delete)
        return deleted

    def _discard_uncommitted(self, cutoff: int, staging: str | None = None) -> None:
        """Remove the vector files (and staging) of this run's cutoff when its commit did not happen."""
        try:
            if staging:
                remove_tree(staging)
            if spark_snapshot(self.spark, self.paths.archive).cutoff == cutoff:
                return
            files, _ = vectors.list_files(self.paths.vectors)
            vectors.delete([f.path for f in files if f.cutoff == cutoff], self.paths.vectors)
            vectors.delete(
                [join(self.paths.vectors, vectors.RUNS_FOLDER, f"{cutoff}.json")], self.paths.vectors
            )
        except Exception:  # noqa: BLE001 - the next run's clean-up removes them too
            log.warning("could not remove the uncommitted vector files of cutoff %s", cutoff)

    def clean(self, committed: int | None = None) -> int:
        """Remove vector files no reader uses, temporary leftovers, run sidecars no day uses
        and archive staging (other runs' only while this run holds the lease)."""
        if committed is None:
            committed = spark_snapshot(self.spark, self.paths.archive).cutoff
        files, temps = vectors.list_files(self.paths.vectors)
        junk = [f.path for f in vectors.garbage(files, committed)] + temps
        removed = vectors.delete(junk, self.paths.vectors)
        import pyarrow.fs as pafs

        used = set(vectors.day_runs(files, committed).values()) | (
            {committed} if committed is not None else set()
        )
        fs, root = vectors.filesystem(join(self.paths.vectors, vectors.RUNS_FOLDER))
        for info in fs.get_file_info(pafs.FileSelector(root, allow_not_found=True)):
            if info.type != pafs.FileType.File:
                continue
            stem = info.base_name.removesuffix(".json")
            if (
                info.base_name.startswith(".")
                or not stem.lstrip("-").isdigit()
                or int(stem) not in used
            ):
                fs.delete_file(info.path)
        fs, root = vectors.filesystem(self.paths.staging)
        for info in fs.get_file_info(pafs.FileSelector(root, allow_not_found=True)):
            if info.type == pafs.FileType.Directory and info.base_name.startswith("archive-"):
                fs.delete_dir(info.path)  # only this table's archive staging; loads stage elsewhere
        return removed

    def recover(self) -> tuple[int, int]:
        """Finish what a crashed or failed run left: (rows purged, files removed); the ledger
        rows a crash kept out of the ledger are written first (``self.repaired``)."""
        self.step = "recover"
        committed = spark_snapshot(self.spark, self.paths.archive).cutoff
        self.repaired = ledger_table.repair(self.spark, self.definition, self.paths, committed) if self.ledger else 0
        return self.purge(committed), self.clean(committed)


FUTURE_TOLERANCE = dt.timedelta(minutes=1)
"""How far ``--now`` may run ahead of the wall clock without ``--allow-future``."""


def check_now(
    table: str, now: dt.datetime, wall: dt.datetime | None = None, allow_future: bool = False
) -> None:
    """Refuse a clock more than a minute ahead of the wall clock: a committed cutoff never moves
    back, so a typo in ``--now`` would hide every later row for good."""
    wall = wall or dt.datetime.now(dt.timezone.utc)
    if now.tzinfo is None:
        now = now.replace(tzinfo=dt.timezone.utc)
    if allow_future or now <= wall + FUTURE_TOLERANCE:
        return
    ahead = now - wall
    raise LakehouseError(
        f"archive {table}: --now {now.isoformat()} is {_human(ahead)} ahead of the clock "
        f"({wall.replace(microsecond=0).isoformat()}); a committed cutoff cannot move back, so this "
        "would hide every later row for good; fix --now or pass --allow-future if you mean it"
    )


def _human(delta: dt.timedelta) -> str:
    s = int(delta.total_seconds())
    if s >= 86_400:
        return f"{s // 86_400}d {s % 86_400 // 3600}h"
    if s >= 3600:
        return f"{s // 3600}h {s % 3600 // 60}m"
    return f"{s // 60}m {s % 60}s"


def run_archive(
    spark_factory: Callable[[], "SparkSession"],
    warehouse: str,
    definition: TableDefinition,
    now: dt.datetime | None = None,
    dry_run: bool = False,
    allow_future: bool = False,
    lease: Lease | None = None,
    ledger: bool = True,
) -> ArchiveResult:
    """Plan and (unless ``dry_run``) execute one archiving run, after recovering a crashed one.

    ``now`` more than a minute ahead of the wall clock is refused unless ``allow_future``. Runs
    under the table's lease: taken here, or ``lease`` when the caller (the jobs runner) holds it."""
    if now is not None and not dry_run:
        check_now(definition.name, now, allow_future=allow_future)
    spark = spark_factory()
    job = ArchiveJob(spark, warehouse, definition, ledger=ledger)
    now = now or dt.datetime.now(dt.timezone.utc)
    if dry_run:
        return ArchiveResult(job.plan(now))
    if definition.archive.clock == "bound":  # expire stalled producers' leases, release what is due
        from lakehouse.stream.engine import Stream, micros

        t = micros(min(now, dt.datetime.now(dt.timezone.utc)))  # a --now ahead expires no lease
        Stream(spark_factory, definition, job.paths, clock=lambda: t).tick()
    with contextlib.nullcontext(lease) if lease is not None else table_lease(job.paths, "archive") as held:
        job.lease = held
        try:
            t0 = time.monotonic()
            recovered, removed = job.recover()
            t1 = time.monotonic()
            plan = job.plan(now)
            t2 = time.monotonic()
            result = job.execute(plan)
        except BaseException as e:
            _record_failure(job, e)
            raise
        result.timings = {"recover": t1 - t0, "plan": t2 - t1, **result.timings}
        result.recovered_rows = recovered
        result.ledger_rows = job.repaired
        result.removed_vector_files += removed
        _record_success(job, result)
        return result


def _record_failure(job: ArchiveJob, e: BaseException) -> None:
    """Keep the failing step and its error in ``_state/archive-status.json`` for ``tables``."""
    try:
        before = read_status(job.paths.root) or {}
        last = before.get("last_error") or {}
        same = last.get("step") == job.step
        message = (str(e).strip().splitlines() or [type(e).__name__])[0]
        if not isinstance(e, LakehouseError):
            message = f"{type(e).__name__}: {message}"
        write_status(
            job.paths.root,
            {
                **before,
                "last_error": {
                    "step": job.step,
                    "error": message[:2000],
                    "run_id": job.run_id,
                    "at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
                    "failures": int(last.get("failures", 0)) + 1 if same else 1,
                    "since": last.get("since")
                    if same and last.get("since")
                    else dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
                },
            },
        )
    except Exception:  # noqa: BLE001 - never hide the run's own error
        log.warning("archive %s: could not record the failure", job.definition.name, exc_info=True)


def _record_success(job: ArchiveJob, result: ArchiveResult) -> None:
    try:
        before = read_status(job.paths.root) or {}
        before.pop("last_error", None)
        write_status(
            job.paths.root,
            {
                **before,
                "last_success": {
                    "run_id": job.run_id,
                    "cutoff": result.plan.cutoff
                    if result.committed
                    else result.plan.previous_cutoff,
                    "at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
                },
            },
        )
    except Exception:  # noqa: BLE001
        log.warning("archive %s: could not record the outcome", job.definition.name, exc_info=True)
