"""Archiving: live rows older than the cutoff move into sorted, run-length-encoded day batches.

``plan`` (pure: cutoff and days), ``rle`` (pure: nested run-length encoding, decoding and
binary-search lookup), ``vectors`` (vector files: names, atomic writes, which file is current),
``state`` (the cutoff as committed in the archive's Delta log) and ``job`` (the Spark run).
"""
