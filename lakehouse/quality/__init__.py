"""Data quality: Great Expectations suites from the table YAML, built-in invariants, both
engines compared (``verify``), and the results on record."""
