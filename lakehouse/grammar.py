"""The text forms of values an input file may hold, for both ways of reading them.

One grammar for the row-by-row converter (``lakehouse.records``, Python ``re`` on the value with
blanks around it stripped) and the vectorised CSV parse (``lakehouse.ingest.fast_csv``, Arrow's
RE2 on the raw value): a value is read the same way whichever path reads it. The vectorised path
only takes the forms marked for it below, where Arrow's casts give exactly what the row path
gives; any other value sends its block to the row path, which decides. Patterns are plain strings
that both regex engines read alike (anchored, no classes beyond ``[...]``).
"""

from __future__ import annotations

import math

INTEGER = r"^[+-]?[0-9]+$"
"""An int or long: an optional sign, then digits (the range is checked after)."""
NUMBER = r"^[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?$"
"""A double or decimal in positional or exponent notation (both paths)."""
DATE = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$"
"""A date: YYYY-MM-DD (both paths; the calendar is checked after)."""
BOOLEAN_WORDS: dict[str, bool] = {"true": True, "t": True, "1": True, "yes": True, "y": True,
                                  "false": False, "f": False, "0": False, "no": False, "n": False}
"""A boolean: these words in any case (both paths)."""
FLOAT_WORDS: dict[str, float] = {"nan": math.nan, "inf": math.inf, "+inf": math.inf,
                                 "-inf": -math.inf, "infinity": math.inf, "+infinity": math.inf,
                                 "-infinity": -math.inf}
"""Doubles written as words, in any case (the row path; never a finite decimal)."""

ARROW_INTEGER = r"^-?[0-9]+$"
"""The integers the vectorised path takes: no plus sign."""
ARROW_DECIMAL = r"^[+-]?[0-9]{1,38}(\.[0-9]{0,38})?$"
"""Plain decimal text Arrow casts exactly (longer text wraps beyond 128 bits; exponents are left
to the row converter)."""
ARROW_TIMESTAMP = (r"^[0-9]{4}-[0-9]{2}-[0-9]{2}[T ][0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,6})?"
                   r"(Z|[+-][0-9]{2}:[0-9]{2})?$")
"""The timestamps the vectorised path takes: ISO 8601 with seconds, optional microseconds and an
optional offset (the row path reads any form ``datetime.fromisoformat`` does)."""
