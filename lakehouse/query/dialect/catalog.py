"""The function table: every Spark function by the name a user writes, and what the DuckDB reader
does with it (translated, each compared with Spark by tests/test_functions_parity.py, or refused
and why). README's function table is this one; a name not here is refused as unverified."""

from __future__ import annotations

TRANSLATED: dict[str, str] = {
    # date and time
    "extract": "date", "date_part": "date", "datepart": "date",
    # math
    "sqrt": "math", "acos": "math", "asin": "math", "atan": "math", "atan2": "math", "sin": "math",
    "cos": "math", "tan": "math", "sinh": "math", "cosh": "math", "tanh": "math", "cbrt": "math",
    "exp": "math", "ln": "math", "log": "math", "log10": "math", "log2": "math", "degrees": "math",
    "radians": "math", "pi": "math", "e": "math", "sign": "math", "signum": "math", "factorial": "math",
    "negative": "math", "positive": "math", "bit_count": "math", "round": "math",
    # strings
    "ascii": "string", "reverse": "string", "repeat": "string", "left": "string", "right": "string",
    "startswith": "string", "endswith": "string", "contains": "string", "translate": "string",
    "md5": "string",
    # conditionals
    "nvl2": "conditional", "nanvl": "conditional", "isnull": "conditional", "isnotnull": "conditional",
}
"""Spark function name -> its kind, for every function translated and tested against Spark."""

LAST_BITS: frozenset[str] = frozenset({
    "acos", "asin", "atan", "atan2", "sin", "cos", "tan", "sinh", "cosh", "tanh", "cbrt", "exp", "ln",
    "log", "log10", "log2", "degrees", "radians",
})
"""Functions whose double result may differ from Spark's in the last bits: both engines call a
math library (Java's and the C library's) that may round the last bit differently. They agree
within ``ULPS`` units in the last place; every other function's result is the same bits."""
ULPS = 4
