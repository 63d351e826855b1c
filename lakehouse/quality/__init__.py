"""Data quality: Great Expectations suites from the table YAML, built-in invariants, the
archive's quality gate, and the results on record. The audits that read a whole table through
query and archive (``check``, ``verify``) sit above them, in ``lakehouse.audit``."""
