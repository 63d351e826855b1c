"""Ingestion: landing directories into a table's live store, in implied-time order, exactly once.

- ``tsort``: the file T-sort (pure): a priority queue with a hold-back window.
- ``blocks``: what a block is; cutting one file into blocks (pure).
- ``splitting``: record starts in a text file's raw bytes, where blocks may begin (pure).
- ``parse``: one block into Arrow batches of the staged schema, row by row when in doubt (pure).
- ``fast_csv``: the vectorised Arrow parse of a clean CSV block (pure).
- ``state``: the durable ingest state (queue, T_read, every file seen, the batch in flight).
- ``scanner``: listing a landing directory; completeness of files.
- ``batch``: THE write path of ``load`` and ``ingest``: parse a batch's blocks in parallel
  (Spark), stage, commit into live and rejects exactly once.
- ``pipeline``: ``ingest``: scan, T-sort, take batches.
- ``load``: ``load``: the files at hand as one batch, idempotent by content.
"""
