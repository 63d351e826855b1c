"""Archiving: live rows older than the cutoff move into sorted, run-length-encoded day batches.

Pure: ``plan`` (cutoff and days), ``rle`` (nested run-length encoding, decoding and
binary-search lookup), ``ledger`` (the books: rows and checksums in and out per day).
Files and logs: ``vectors`` (vector files: names, atomic writes, which file is current),
``state`` (the cutoff and what else a Delta log says), ``status`` (the last runs' outcome),
``reader`` (reading vector files), ``ledger_table`` (the books as a Delta table).
One run on Spark (``run``: plan, then execute), by step: ``survey`` (plan), ``order`` (a day
batch's columns and row order), ``stage`` (staged days and their vector files, ``encode`` on
the executors), ``checks`` (before the commit), ``commit`` (data + cutoff in one commit) and
``recover`` (purge, clean, and finishing what a killed run left).
"""
