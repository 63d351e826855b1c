"""The read-side audits of a table, above query and archive: ``lakehouse check`` (``check``: the
built-in invariants and the table's Great Expectations suite over the split view, recorded) and
``lakehouse verify`` (``verify``: the same figures on Spark and on DuckDB, compared). The
expectations, invariants, the archive's quality gate and the results on record they build on
live below, in ``lakehouse.quality``."""
