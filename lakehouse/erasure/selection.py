"""Which rows of a Delta part (live, archive) a delete selects, as Spark evaluates it: a Spark SQL
condition (a ``--where`` predicate, or up to ``INLINE_KEYS`` keys as an ``IN`` list, which Delta
also uses to skip files by their statistics), or a join with the keys (more keys: a literal list
of a million keys is a SQL text Spark takes minutes to parse, and an ``OR`` of thousands of
compound keys defeats its code generation).

Three uses, one rule each way: rows per day (``matched``: the plan, the archive's days), a side
per row (``sided``: ``deleted`` where selected, else ``kept``, for the archive's rewrite) and the
live part's delete (``delete``: ``DELETE ... WHERE`` or ``MERGE ... WHEN MATCHED THEN DELETE``).
A NULL never selects a row: Spark's ``DELETE`` semantics, and an equality join's.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import TYPE_CHECKING

from lakehouse.definitions import PARTITION_COLUMN, TableDefinition
from lakehouse.erasure.predicate import keys_predicate
from lakehouse.sql import spark_ident

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

INLINE_KEYS = 1000
"""Keys up to which a delete by keys is a SQL ``IN`` list (more: a join with the keys)."""

_MATCHED = "__lakehouse_selected"


@dataclass(frozen=True)
class Selection:
    """The rows a delete erases, for Spark: ``condition`` (Spark SQL), or ``keys`` joined on the
    table's primary key ``key`` (``condition`` then empty)."""

    condition: str
    keys: pa.Table | None = None
    key: tuple[str, ...] = ()
    types: tuple[str, ...] = ()
    """The key columns' Spark SQL types (the keys frame is cast to them)."""

    @classmethod
    def of_keys(cls, definition: TableDefinition, keys: pa.Table, inline: int = INLINE_KEYS) -> Selection:
        """The rows whose primary key is one of ``keys`` (typed as the key's columns)."""
        if keys.num_rows <= inline:
            return cls(keys_predicate(definition, keys))
        key = tuple(definition.primary_key)
        types = {c.name: c.type.spark_ddl() for c in definition.columns}
        return cls("", keys.select(list(key)), key, tuple(types[k] for k in key))

    def keys_frame(self, spark: SparkSession) -> DataFrame:
        """The keys as a Spark frame of the key's columns, each typed as the table's column, each
    key once."""
        from pyspark.sql import functions as F

        assert self.keys is not None
        frame = spark.createDataFrame(self.keys)
        typed = frame.select(*[F.col(spark_ident(k)).cast(t).alias(k) for k, t in zip(self.key, self.types)])
        return typed.distinct()  # each key once (Spark's join takes NaN = NaN): a join never doubles a row

    def selected(self, spark: SparkSession, rows: DataFrame) -> DataFrame:
        """The selected rows of ``rows``."""
        if self.keys is None:
            return rows.where(f"({self.condition})")
        return rows.join(self.keys_frame(spark), on=list(self.key), how="left_semi")

    def sided(self, spark: SparkSession, rows: DataFrame, column: str) -> DataFrame:
        """``rows`` with ``column``: ``deleted`` where selected, else ``kept``."""
        from pyspark.sql import functions as F

        if self.keys is None:
            side = F.when(F.expr(f"({self.condition})"), F.lit("deleted")).otherwise(F.lit("kept"))
            return rows.withColumn(column, side)
        marked = self.keys_frame(spark).withColumn(_MATCHED, F.lit(True))
        joined = rows.join(marked, on=list(self.key), how="left")
        side = F.when(F.col(_MATCHED), F.lit("deleted")).otherwise(F.lit("kept"))
        return joined.withColumn(column, side).drop(_MATCHED)

    def delete(self, spark: SparkSession, path: str) -> int:
        """Delete the selected rows from the Delta table at ``path`` (inside the caller's
        ``spark.commit.idempotent``): rows deleted, -1 when Delta removed whole files without
        counting their rows (the commit's metrics count them)."""
        if self.keys is None:
            rows = spark.sql(f"DELETE FROM delta.{spark_ident(path)} WHERE {self.condition}").collect()
            n = int(rows[0][0]) if rows and rows[0][0] is not None else 0
            return -1 if n < 0 else n
        from lakehouse.spark.commit import merge_into

        on = " AND ".join(f"t.{spark_ident(k)} = s.{spark_ident(k)}" for k in self.key)
        metrics = merge_into(spark, path, self.keys_frame(spark), on, "WHEN MATCHED THEN DELETE")
        return int(metrics.get("num_deleted_rows", 0))


def matched(spark: SparkSession, path: str, selection: Selection, version: int | None = None) -> dict[dt.date, int]:
    """Rows of a part's Delta table (at ``version``, the latest by default) the selection holds,
    per day."""
    from pyspark.sql import functions as F

    reader = spark.read.format("delta")
    if version is not None:
        reader = reader.option("versionAsOf", int(version))
    rows = selection.selected(spark, reader.load(path))
    counts = rows.groupBy(F.col(spark_ident(PARTITION_COLUMN)).alias("d")).count().collect()
    return {r["d"]: int(r["count"]) for r in counts}
