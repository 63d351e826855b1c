"""Spark, the pipeline's engine: the process's session (``session``) and committing to Delta
tables with retries and SetTransaction idempotence (``commit``)."""
