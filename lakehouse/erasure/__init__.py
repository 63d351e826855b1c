"""Erasure: ``lakehouse delete`` removes rows by key or predicate from every place a row lives,
keeps the books, and (``--purge``, or VACUUM after the retention) removes the bytes.

- ``predicate``: what a delete erases (a checked predicate or a keys file); pure.
- ``matching``: which rows it matches where rows are held as Arrow (staged rows, rejects' parsed
  records): DuckDB with Spark's semantics, the same rows Spark's ``DELETE ... WHERE`` erases.
- ``selection``: the rows Spark selects in a Delta part (the condition, or a join with many keys).
- The parts' steps: staged rows (``stream.erase``), ``live`` (Spark ``DELETE``, or ``MERGE``), ``archive``
  (only the days holding a matched row rewritten in one pass at the unchanged cutoff, vector
  files of the erasure's generation, one commit, the ledger's rows), ``rejects``.
- ``job``: the delete under the table's lease, plan first (``--dry-run``), saved before anything
  changes and finished by the next delete or archiving run after a crash; ``audit``: one row per
  delete in ``_lakehouse/erasures`` (``--history``).
- ``purge``: every copy a delete leaves (superseded data files, the Delta logs' statistics and
  predicates, staging, inbox, quality samples, Data Docs) removed; the history before it cut.

Every part records the erasure's number N as a SetTransaction (``lakehouse.erasure``) in the
commit that erases from it, so a step run again after a crash is skipped by a part that holds N
and says what that commit erased.
"""
