"""Spark's scalar functions that DuckDB computes the same way once written as a template: math
(with Spark's NULL and NaN outside a function's domain, where DuckDB raises), strings, and
conditionals; each with Spark's result type.

A template is DuckDB SQL whose ``{this}``, ``{expression}``, ``{expressions_0}``, ... are the
function's arguments (sqlglot's argument keys, dots as underscores), already rewritten. Every
function here is compared with Spark by tests/test_functions_parity.py.
"""

from __future__ import annotations

from sqlglot import exp

from lakehouse.query.dialect.infer import ChildTypes, Rule, Typer
from lakehouse.query.dialect.macros import parse_duckdb, sql_of
from lakehouse.query.dialect.refuse import FnKey, duck_refuse, spark_func_name
from lakehouse.query.dialect.types import FRACTIONAL, INTEGRAL, decimal_of, is_numeric

_D = "CAST({this} AS DOUBLE)"
_DUCK_INT = {"tinyint": "TINYINT", "smallint": "SMALLINT", "int": "INTEGER", "bigint": "BIGINT"}
_EMPTY = "substring({this}, 1, 0)"
"""'' where the string is not NULL."""
_NAN = "CAST('NaN' AS DOUBLE)"


def args_of(e: exp.Expression) -> dict[str, str]:
    """A function's arguments as DuckDB SQL by template name (``expressions.0`` -> ``expressions_0``)."""
    out = {}
    for key, value in e.args.items():
        if isinstance(value, exp.Expression):
            out[key] = sql_of(value)
        elif isinstance(value, list):
            for i, v in enumerate(value):
                if isinstance(v, exp.Expression):
                    out[f"{key}_{i}"] = sql_of(v)
    return out


def template(sql: str, *, numeric: tuple[str, ...] = (), integral: tuple[str, ...] = ()) -> Rule:
    """A rule that writes the function as ``sql`` (see the module doc); ``numeric``: the argument
    keys that must be numbers (else refused: Spark would cast a string first); ``integral``: those
    that must be integers (Spark truncates a fraction where a plain CAST would round)."""
    def rule(e: exp.Expression, c: ChildTypes, t: str | None) -> exp.Expression | None:
        for k in numeric:
            if k in c and not is_numeric(c.get(k)) and c.get(k) != "void":
                raise duck_refuse(f"{spark_func_name(e)}() of a {c.get(k) or 'value of unknown type'}", "only numbers are translated")
        for k in integral:
            if k in c and c.get(k) not in INTEGRAL and c.get(k) != "void":
                raise duck_refuse(f"{spark_func_name(e)}() with a {c.get(k) or 'value of unknown type'} count",
                                  "only integer counts are translated")
        args = args_of(e)
        if isinstance(e, exp.Anonymous):
            args.update({f"expressions_{i}": sql_of(a) for i, a in enumerate(e.expressions)})
        try:
            return parse_duckdb(sql.format(**args))
        except KeyError as missing:
            raise duck_refuse(f"{spark_func_name(e)}() without its argument {missing}", "not translated") from None
    return rule



def of(t: str) -> Typer:
    """A result type that does not depend on the arguments."""
    return lambda e, c: t


def same(key: str = "this") -> Typer:
    """The result type of the argument ``key``."""
    return lambda e, c: c.get(key)


def _double_domain(fn: str, bad: str, value: str = "NULL") -> str:
    """``fn`` of a double, ``value`` (Spark's) where ``bad`` holds instead of DuckDB's error."""
    x = _D
    return f"CASE WHEN {bad.format(x=x)} THEN {value} ELSE {fn}({x}) END"


def _sign(e: exp.Expression, c: ChildTypes, t: str | None) -> exp.Expression | None:
    # Java's Math.signum: NaN stays NaN, -0.0 stays -0.0; DuckDB's sign is a TINYINT.
    x = f"CAST({sql_of(e.this)} AS DOUBLE)"
    return parse_duckdb(f"CASE WHEN isnan({x}) OR {x} = 0 THEN {x} WHEN {x} > 0 THEN 1.0 WHEN {x} < 0 THEN -1.0 END")


def _log(e: exp.Expression, c: ChildTypes, t: str | None) -> exp.Expression | None:
    # sqlglot: log10(x), log2(x), log(b, x) are all Log(this=base, expression=x).
    base, x = e.this, e.expression
    if x is None:  # log(x) in a dialect where it is the natural logarithm
        x, base = base, None
    xs = f"CAST({sql_of(x)} AS DOUBLE)"
    # log10(x): a base sqlglot made (no place in the text); log(10, x) is ln(x) / ln(10) on Spark
    if isinstance(base, exp.Literal) and base.name == "10" and "line" not in base.meta:
        return parse_duckdb(f"CASE WHEN {xs} <= 0 THEN NULL ELSE log10({xs}) END")
    if base is None:
        return parse_duckdb(f"CASE WHEN {xs} <= 0 THEN NULL ELSE ln({xs}) END")
    # Spark: log2(x) and log(b, x) are ln(x) / ln(b), NULL where either is not positive
    bs = f"CAST({sql_of(base)} AS DOUBLE)"
    return parse_duckdb(f"CASE WHEN {xs} <= 0 OR {bs} <= 0 THEN NULL ELSE ln({xs}) / ln({bs}) END")


def _round_double(e: exp.Expression, c: ChildTypes, t: str | None) -> exp.Expression | None:
    """round(double, n) as Spark computes it: the double's decimal text rounded half up."""
    digits = e.args.get("decimals")
    negated = isinstance(digits, exp.Neg)
    digits = digits.this if isinstance(digits, exp.Neg) else digits
    n = 0 if digits is None else int(digits.name) * (-1 if negated else 1) if isinstance(digits, exp.Literal) and \
        not digits.is_string and digits.name.isdigit() else None
    if n is None or not -17 <= n <= 17:
        raise duck_refuse("round() of a double to a non-constant or far number of places", "not translated")
    x = f"CAST({sql_of(e.this)} AS DOUBLE)"
    # |x| >= 1e17: every double there is a whole number (n >= 0 keeps it); else its shortest text
    # (the digits Java's Double.toString gives) is exact in DECIMAL(38,20).
    return parse_duckdb(
        f"CASE WHEN isnan({x}) OR isinf({x}) THEN {x} WHEN abs({x}) >= 1e17 AND {n} >= 0 THEN {x} + 0.0 "
        f"WHEN abs({x}) >= 1e37 THEN {x} + 0.0 "  # 17 digits: what is rounded off is zeros
        f"WHEN abs({x}) >= 1e17 THEN CAST(CAST(round(CAST(CAST({x} AS VARCHAR) AS DECIMAL(38,0)), {n}) AS VARCHAR) "
        f"AS DOUBLE) "
        + (f"WHEN abs({x}) < 1e-3 AND abs({x}) >= 5e-{n + 1} THEN error('round() of a double below 0.001 "
           f"to {n} places is refused on DuckDB: its digits exceed 20 places; run it with --engine spark') "
           if n > 2 else "")
        + (f"WHEN abs({x}) < 5e-{n + 1} THEN 0.0 " if n >= 0 else "")  # zero, as Spark's (never -0.0)
        + f"ELSE CAST(CAST(round(CAST(CAST({x} AS VARCHAR) AS DECIMAL(38,20)), {n}) AS VARCHAR) AS DOUBLE) END")


def _negate(e: exp.Expression, c: ChildTypes, t: str | None) -> exp.Expression | None:
    d = decimal_of(c.get("this"))
    if d and d[0] > 34:  # Spark negates through a 34-digit BigDecimal: it rounds (or fails) there
        raise duck_refuse(f"negation of a {c.get('this')}", "Spark rounds a decimal of more than 34 digits when negating")
    if not is_numeric(c.get("this")):
        raise duck_refuse(f"negation of a {c.get('this') or 'value of unknown type'}", "not translated")
    return exp.Neg(this=exp.Paren(this=e.this)) if isinstance(e, exp.Negative) else None


def _replace(e: exp.Expression, c: ChildTypes, t: str | None) -> exp.Expression | None:
    # Spark: replace(s, search) removes search; an empty search leaves s as it is (DuckDB too)
    if e.args.get("replacement") is None:
        return parse_duckdb(f"replace({sql_of(e.this)}, {sql_of(e.expression)}, '')")
    return None


def _corr(e: exp.Expression, c: ChildTypes, t: str | None) -> exp.Expression | None:
    if e.find_ancestor(exp.Window) is not None:
        raise duck_refuse("corr() OVER (...)", "not translated")
    x, y = sql_of(e.this), sql_of(e.expression)
    # Spark: NULL for one pair (DuckDB: NaN)
    return parse_duckdb(f"CASE WHEN count(CASE WHEN {x} IS NOT NULL AND {y} IS NOT NULL THEN 1 END) = 1 "
                        f"THEN NULL ELSE corr({x}, {y}) END")


def _sha2(e: exp.Expression, c: ChildTypes, t: str | None) -> exp.Expression | None:
    bits = e.args.get("length")
    if bits is not None and not (isinstance(bits, exp.Literal) and bits.name in ("0", "256")):
        raise duck_refuse("sha2() of other than 256 bits", "DuckDB has only SHA-256")
    return parse_duckdb(f"sha256({sql_of(e.this)})")


def _hex(e: exp.Expression, c: ChildTypes, t: str | None) -> exp.Expression | None:
    if c.get("this") in INTEGRAL:  # Java's Long.toHexString, upper case: a negative in two's complement
        return parse_duckdb(f"hex(CAST({sql_of(e.this)} AS BIGINT))")
    if c.get("this") == "string":  # the UTF-8 bytes
        return parse_duckdb(f"hex({sql_of(e.this)})")
    raise duck_refuse(f"hex() of a {c.get('this') or 'value of unknown type'}", "not translated")


def _factorial(e: exp.Expression, c: ChildTypes, t: str | None) -> exp.Expression | None:
    if c.get("this") not in INTEGRAL:
        raise duck_refuse("factorial() of a non-integer", "not translated")
    x = sql_of(e.this)
    # Spark's factorial takes an int: a bigint beyond it is an error
    return parse_duckdb(f"CASE WHEN {x} NOT BETWEEN -2147483648 AND 2147483647 THEN error('[CAST_OVERFLOW] ' || "
                        f"{x} || ' cannot be cast to INT') WHEN {x} BETWEEN 0 AND 20 THEN "
                        f"CAST(factorial(CAST({x} AS INTEGER)) AS BIGINT) END")


def _numeric_same(e: exp.Expression, c: ChildTypes) -> str | None:
    return c.get("this") if is_numeric(c.get("this")) else None


SCALARS: dict[FnKey, tuple[Rule, Typer | None]] = {
    # math: doubles, with Spark's NaN or NULL outside the domain
    exp.Sqrt: (template(_double_domain("sqrt", "{x} < 0", _NAN), numeric=("this",)), of("double")),
    exp.Acos: (template(_double_domain("acos", "abs({x}) > 1", _NAN), numeric=("this",)), of("double")),
    exp.Asin: (template(_double_domain("asin", "abs({x}) > 1", _NAN), numeric=("this",)), of("double")),
    exp.Atan: (template(f"atan({_D})", numeric=("this",)), of("double")),
    exp.Atan2: (template("atan2(CAST({this} AS DOUBLE) + 0.0, CAST({expression} AS DOUBLE) + 0.0)",
                         numeric=("this", "expression")), of("double")),
    exp.Sin: (template(_double_domain("sin", "isinf({x})", _NAN), numeric=("this",)), of("double")),
    exp.Cos: (template(_double_domain("cos", "isinf({x})", _NAN), numeric=("this",)), of("double")),
    exp.Tan: (template(_double_domain("tan", "isinf({x})", _NAN), numeric=("this",)), of("double")),
    exp.Sinh: (template(f"sinh({_D})", numeric=("this",)), of("double")),
    exp.Cosh: (template(f"cosh({_D})", numeric=("this",)), of("double")),
    exp.Tanh: (template(f"tanh({_D})", numeric=("this",)), of("double")),
    exp.Cbrt: (template(f"cbrt({_D})", numeric=("this",)), of("double")),
    exp.Exp: (template(f"exp({_D})", numeric=("this",)), of("double")),
    exp.Ln: (template(_double_domain("ln", "{x} <= 0"), numeric=("this",)), of("double")),
    exp.Log: (_log, of("double")),
    exp.Degrees: (template(f"degrees({_D})", numeric=("this",)), of("double")),
    exp.Radians: (template(f"radians({_D})", numeric=("this",)), of("double")),
    exp.Pi: (template("pi()"), of("double")),
    "e": (template("2.718281828459045::DOUBLE"), of("double")),
    exp.Sign: (_sign, of("double")),
    exp.Factorial: (_factorial, of("bigint")),
    exp.Negative: (_negate, _numeric_same),
    exp.Neg: (_negate, None),
    "positive": (template("({expressions_0})", numeric=("expressions.0",)), same("expressions.0")),
    # Spark counts the bits of the value widened to a bigint (an int's sign bits too)
    exp.BitwiseCount: (template("CAST(bit_count(CAST({this} AS BIGINT)) AS INTEGER)", integral=("this",)), of("int")),
    # strings
    exp.Upper: (template("lh_upper({this})"), of("string")),  # Spark's full case mapping (dialect.casing)
    exp.Lower: (template("lh_lower({this})"), of("string")),
    exp.Ascii: (template("CASE WHEN {this} = '' THEN 0 ELSE ascii({this}) END"), of("int")),
    # Spark reverses code points; DuckDB's reverse() keeps a letter and its combining marks together
    exp.Reverse: (template("list_aggregate(list_reverse(string_split({this}, '')), 'string_agg', '')"), of("string")),
    exp.Repeat: (template(f"CASE WHEN {{times}} < 1 THEN {_EMPTY} ELSE repeat({{this}}, CAST({{times}} AS BIGINT)) END",
                          integral=("times",)), of("string")),
    exp.Left: (template(f"CASE WHEN {{expression}} < 1 THEN {_EMPTY} "
                        "ELSE left({this}, CAST({expression} AS BIGINT)) END", integral=("expression",)), of("string")),
    exp.Right: (template(f"CASE WHEN {{expression}} < 1 THEN {_EMPTY} "
                         "ELSE right({this}, CAST({expression} AS BIGINT)) END", integral=("expression",)), of("string")),
    exp.StartsWith: (template("starts_with({this}, {expression})"), of("boolean")),
    exp.EndsWith: (template("ends_with({this}, {expression})"), of("boolean")),
    exp.Contains: (template("contains({this}, {expression})"), of("boolean")),
    exp.Translate: (template("translate({this}, {from_}, {to})"), of("string")),
    exp.Replace: (_replace, of("string")),
    exp.Corr: (_corr, of("double")),
    exp.MD5: (template("md5({this})"), of("string")),
    exp.SHA: (template("sha1({this})"), of("string")),
    exp.SHA2: (_sha2, of("string")),
    exp.Hex: (_hex, of("string")),
    exp.ToBase64: (template("to_base64(encode({this}))"), of("string")),
    exp.Chr: (template("CASE WHEN {expressions_0} < 0 THEN '' ELSE chr(CAST({expressions_0} % 256 AS INTEGER)) END",
                       integral=("expressions.0",)), of("string")),
    exp.Space: (template("CASE WHEN {this} < 1 THEN '' ELSE repeat(' ', CAST({this} AS BIGINT)) END",
                         integral=("this",)), of("string")),
    exp.BitLength: (template("CAST(octet_length(encode({this})) * 8 AS INTEGER)"), of("int")),
    "octet_length": (template("CAST(octet_length(encode({expressions_0})) AS INTEGER)"), of("int")),
    exp.SplitPart: (template(
        "CASE WHEN {this} IS NULL OR {delimiter} IS NULL OR {part_index} IS NULL THEN NULL "
        "WHEN {part_index} = 0 THEN error('[INVALID_INDEX_OF_ZERO] split_part: the index 0 is invalid') "
        "WHEN {delimiter} = '' THEN CASE WHEN {part_index} IN (1, -1) THEN {this} "
        "WHEN {this} IS NOT NULL THEN '' END "
        "ELSE split_part({this}, {delimiter}, CAST({part_index} AS BIGINT)) END", integral=("part_index",)),
        of("string")),
    "find_in_set": (template(
        "CASE WHEN {expressions_0} IS NULL OR {expressions_1} IS NULL THEN NULL "
        "WHEN contains({expressions_0}, ',') THEN 0 "
        "ELSE coalesce(list_position(string_split({expressions_1}, ','), {expressions_0}), 0) END"), of("int")),
    # conditionals
    exp.Nvl2: (template("CASE WHEN {this} IS NOT NULL THEN {true} ELSE {false} END"), None),
    exp.Nanvl: (template("CASE WHEN isnan(CAST({this} AS DOUBLE)) THEN CAST({expression} AS DOUBLE) "
                         "ELSE CAST({this} AS DOUBLE) END", numeric=("this", "expression")), of("double")),
    "isnull": (template("({expressions_0} IS NULL)"), of("boolean")),
    "isnotnull": (template("({expressions_0} IS NOT NULL)"), of("boolean")),
}
"""Each translated scalar function: its rewrite and Spark's result type (None: ``type_of``'s)."""


def _nvl2_type(e: exp.Expression, c: ChildTypes) -> str | None:
    from lakehouse.query.dialect.types import wider

    return wider(c.get("true"), c.get("false"))


def _round_rule(e: exp.Expression, c: ChildTypes, t: str | None) -> exp.Expression | None:
    if c.get("this") in FRACTIONAL:
        return _round_double(e, c, t)
    if c.get("this") in INTEGRAL:
        digits = e.args.get("decimals")
        if digits is None or (isinstance(digits, exp.Literal) and not digits.is_string and digits.name.isdigit()):
            return None  # n >= 0: the value itself
        limits = {"tinyint": 7, "smallint": 15, "int": 31, "bigint": 63}[str(c.get("this"))]
        x = f"round(CAST({sql_of(e.this)} AS DECIMAL(38,0)), {sql_of(digits)})"
        # Spark rounds in a decimal and fails (ANSI) when the result leaves the type
        return parse_duckdb(f"CASE WHEN {x} NOT BETWEEN {-(1 << limits)} AND {(1 << limits) - 1} THEN "
                            f"error('[ARITHMETIC_OVERFLOW] Overflow') ELSE CAST({x} AS {_DUCK_INT[str(c.get('this'))]}) END")
    if decimal_of(c.get("this")):
        return None
    raise duck_refuse(f"round() of a {c.get('this') or 'value of unknown type'}", "not translated")


RULES: dict[FnKey, Rule] = {k: rule for k, (rule, _) in SCALARS.items()} | {exp.Round: _round_rule}
"""The scalar rewrites by function."""
TYPES: dict[FnKey, Typer] = {k: typer for k, (_, typer) in SCALARS.items() if typer is not None} | {
    exp.Nvl2: _nvl2_type, exp.CovarPop: of("double"), exp.CovarSamp: of("double"), exp.CumeDist: of("double"),
    exp.PercentRank: of("double"), exp.NthValue: same(), exp.BitwiseAndAgg: same(), exp.BitwiseOrAgg: same(), exp.BitwiseXorAgg: same()}
"""Spark's result types of the scalar functions."""
