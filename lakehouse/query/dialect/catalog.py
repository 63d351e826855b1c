"""The function table: every Spark function by the name a user writes, and what the DuckDB reader
does with it (translated, each compared with Spark by tests/test_functions_parity.py, or refused
and why). README's function table is this one; a name not here is refused as unverified."""

from __future__ import annotations

TRANSLATED: dict[str, str] = {
    # date and time
    "extract": "date", "date_part": "date", "datepart": "date", "year": "date", "month": "date", "day": "date",
    "dayofmonth": "date", "make_date": "date", "date_format": "date", "hour": "date", "minute": "date", "second": "date", "datediff": "date",
    "date_trunc": "date", "dayofweek": "date", "weekday": "date", "to_date": "date", "date_add": "date",
    "date_sub": "date", "dayofyear": "date", "weekofyear": "date", "quarter": "date", "last_day": "date",
    "add_months": "date", "next_day": "date", "trunc": "date", "unix_date": "date", "unix_seconds": "date",
    "unix_millis": "date", "unix_micros": "date", "unix_timestamp": "date", "to_unix_timestamp": "date",
    "date_from_unix_date": "date", "timestamp_seconds": "date", "timestamp_millis": "date",
    "timestamp_micros": "date",
    # math
    "sqrt": "math", "acos": "math", "asin": "math", "atan": "math", "atan2": "math", "sin": "math",
    "cos": "math", "tan": "math", "sinh": "math", "cosh": "math", "tanh": "math", "cbrt": "math",
    "exp": "math", "ln": "math", "log": "math", "log10": "math", "log2": "math", "degrees": "math",
    "radians": "math", "pi": "math", "e": "math", "sign": "math", "signum": "math", "factorial": "math",
    "negative": "math", "positive": "math", "bit_count": "math", "round": "math", "abs": "math",
    "floor": "math", "ceil": "math", "ceiling": "math", "pow": "math", "power": "math", "pmod": "math",
    "mod": "math",
    # strings
    "ascii": "string", "reverse": "string", "repeat": "string", "left": "string", "right": "string",
    "startswith": "string", "endswith": "string", "contains": "string", "translate": "string",
    "upper": "string", "ucase": "string", "lower": "string", "lcase": "string", "md5": "string", "sha1": "string", "sha": "string", "sha2": "string", "hex": "string", "base64": "string",
    "chr": "string", "char": "string", "space": "string", "bit_length": "string", "octet_length": "string",
    "split_part": "string", "find_in_set": "string", "length": "string", "char_length": "string",
    "character_length": "string", "len": "string", "trim": "string", "ltrim": "string", "rtrim": "string",
    "replace": "string", "lpad": "string", "rpad": "string", "instr": "string", "locate": "string",
    "position": "string", "substring": "string", "substr": "string", "concat": "string", "concat_ws": "string",
    # conditionals
    "nvl2": "conditional", "nanvl": "conditional", "isnull": "conditional", "isnotnull": "conditional",
    "if": "conditional", "coalesce": "conditional", "nvl": "conditional", "ifnull": "conditional",
    "nullif": "conditional", "greatest": "conditional", "least": "conditional", "isnan": "conditional",
    # aggregates
    "sum": "aggregate", "avg": "aggregate", "mean": "aggregate", "min": "aggregate", "max": "aggregate",
    "count": "aggregate", "count_if": "aggregate", "bool_and": "aggregate", "bool_or": "aggregate",
    "every": "aggregate", "some": "aggregate", "stddev": "aggregate", "std": "aggregate",
    "stddev_samp": "aggregate", "variance": "aggregate", "var_samp": "aggregate", "percentile": "aggregate",
    "median": "aggregate", "stddev_pop": "aggregate", "var_pop": "aggregate", "corr": "aggregate",
    "covar_pop": "aggregate", "covar_samp": "aggregate", "bit_and": "aggregate", "bit_or": "aggregate",
    "bit_xor": "aggregate",
    # windows
    "ntile": "window", "first_value": "window", "last_value": "window", "nth_value": "window", "cume_dist": "window", "percent_rank": "window", "row_number": "window", "rank": "window", "dense_rank": "window", "lag": "window", "lead": "window",
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
ORDER_DEPENDENT: frozenset[str] = frozenset({
    "sum", "avg", "mean", "stddev", "std", "stddev_samp", "variance", "var_samp", "percentile", "median",
    "stddev_pop", "var_pop", "corr", "covar_pop", "covar_samp",
})
"""Aggregates whose double result depends on the order the rows are added in, which neither engine
fixes (Spark's order is its partitions'): over float and double their results agree within the
relative tolerance ``lakehouse.query.compare.REL_TOL``, not to the bit. Over integers and decimals
they are exact on both."""

REFUSED: dict[str, str] = {
    "approx_count_distinct": "approximate: DuckDB's approximation differs from Spark's",
    "percentile_approx": "approximate: DuckDB's approximation differs from Spark's",
    "approx_percentile": "approximate: DuckDB's approximation differs from Spark's",
    "first": "the row it picks depends on the engine", "last": "the row it picks depends on the engine",
    "any_value": "the row it picks depends on the engine",
    "collect_list": "the order of its elements depends on the engine",
    "rand": "random numbers differ by engine", "random": "random numbers differ by engine",
    "uuid": "random numbers differ by engine",
    "current_date": "the clock is read per engine", "current_timestamp": "the clock is read per engine",
    "now": "the clock is read per engine",
    "rlike": "Java and RE2 regular expressions differ", "regexp_like": "Java and RE2 regular expressions differ",
    "regexp_replace": "Java and RE2 regular expressions differ",
    "regexp_extract": "Java and RE2 regular expressions differ",
    "date_format (other pattern letters, quoted text)": "not translated (the letters of "
    "lakehouse.query.dialect.datetimes._PATTERN are)",
    "from_unixtime": "Java date patterns are not translated",
    "to_timestamp (with a format)": "Java date patterns are not translated",
    "to_date (with a format)": "Java date patterns are not translated",
    "levenshtein": "DuckDB counts bytes, Spark characters",
    "log1p": "DuckDB has no exact equal", "expm1": "DuckDB has no exact equal",
    "sha2 (224, 384, 512 bits)": "DuckDB has only SHA-256",
    "lower (of a capital sigma)": "Spark lowers it by the letters around it (final sigma); refused at run time",
    "negation of a decimal over 34 digits": "Spark rounds it to 34 digits",
    "round (of a double beyond 17 places)": "not translated",
    "RANGE frames with an offset": "Spark computes the bounds in the order column's type and fails on overflow",
}
"""Functions refused by name on DuckDB, and why (any function in neither table is refused too:
not among those checked to give Spark's answer)."""


def markdown() -> str:
    """README's function table: the translated functions by kind, then the refused ones and why."""
    kinds: dict[str, list[str]] = {}
    for name, kind in TRANSLATED.items():
        kinds.setdefault(kind, []).append(name)
    lines = [f"{len(TRANSLATED)} Spark functions translated, each compared with Spark over hostile values "
             "(tests/test_functions_parity.py):", "", "| kind | functions |", "|---|---|"]
    lines += [f"| {kind} | {', '.join(f'`{n}`' for n in sorted(names))} |" for kind, names in kinds.items()]
    lines += ["", "Refused by name (a query using one fails on DuckDB with the reason; run it with "
              "`--engine spark`); any other function is refused as unverified:", "", "| function | why |", "|---|---|"]
    lines += [f"| `{n}` | {why} |" for n, why in REFUSED.items()]
    return "\n".join(lines) + "\n"
