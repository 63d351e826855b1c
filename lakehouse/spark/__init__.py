"""Spark, the pipeline's engine: the process's session (``session``), committing to Delta
tables with retries and SetTransaction idempotence (``commit``), and Delta's log as Spark sees
it (``delta``)."""
