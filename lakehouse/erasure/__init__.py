"""Erasure: ``lakehouse delete`` removes rows by key or predicate from every place a row lives.

Built so far: what a delete erases (``predicate``: a checked predicate or a keys file), which
rows it matches where rows are held as Arrow (``matching``: DuckDB with Spark's semantics, the
same rows Spark's ``DELETE ... WHERE`` erases), the parts' steps (``Stream.erase`` for staged
rows, ``live``, ``rejects``), the vector files' generations (``archive.vectors``) and the audit
(``audit``). Not yet: the archive's step, the job that runs them in order, the command, the purge.

The design the rest follows (issue 24), one job under the table's lease (no archive run,
compaction or VACUUM meanwhile) and the stream's lease (no release meanwhile), plan first:

1. **Plan** (``--dry-run`` prints it): rows matched per part and day, read at pinned versions:
   live (every day, rows below the cutoff too), archive days, producers' staged rows
   (``matching`` over the staging Parquet), rejects (by key where the record parses, else by the
   predicate's columns, else reported unmatched). The plan is saved (``_state/erasure.json``)
   before anything changes; a delete killed at any step is finished by the next delete or
   archive run from it (each step below is idempotent and carries the erasure's number).
2. **Staged rows**: a segment's rows are rewritten into a new rows folder without the matched
   rows (and without rows already released or rejected), its counts recomputed from the file,
   the switch one save of the stream's state; the old folder goes after.
3. **Live**: Spark ``DELETE ... WHERE`` with the SetTransaction (``lakehouse.erasure``, N).
4. **Archive**: the touched days only, as an archiving run without live rows at the unchanged
   cutoff: the days' rows less the matched ones (their order kept), new data files and vector
   files of a new generation (``<day>-<cutoff>.<N>``: readers take the largest (cutoff,
   generation) committed), one metadata-only commit with the SetTransaction and the figures;
   the ledger's row for the day records the rows deleted (out = in - deleted).
5. **Rejects**: the matched rejects deleted in one commit.
6. **Audit**: a row of ``_lakehouse/erasures`` (when, table, predicate or the keys file's
   checksum, rows per part, purged; never the values).
7. **Purge** (``--purge``, or VACUUM after the retention): every file that still holds a deleted
   row (superseded data files of live, archive and rejects, old vector files, staging and inbox
   files, quality samples and the Data Docs pages that show them); ``--as-of`` a moment before
   the purge on a purged day is refused in one line.
"""
