"""Data quality: Great Expectations suites from the table YAML, built-in invariants, results."""
