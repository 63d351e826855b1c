"""The differential test: generated queries over a table of hostile values (``test_functions_parity``'s
``fx``), run on Spark and on the DuckDB reader. Each must give the same JSON (floating-point
results under the stated rules: ``LAST_BITS`` functions within a few units in the last place,
``ORDER_DEPENDENT`` aggregates within ``REL_TOL``), fail on both, or be refused on DuckDB by name.
DuckDB answering where Spark fails, failing where Spark answers, or answering otherwise is a bug.

The grammar builds typed expressions (numbers of every type, strings, booleans, dates) from the
columns, edge literals, operators, CASE, casts and the translated functions, plain or grouped by
a column with aggregates. ``make test`` runs a fixed budget with a fixed seed
(``LAKEHOUSE_DIFF_EXAMPLES`` examples, default 60); a longer run:
``LAKEHOUSE_DIFF_EXAMPLES=2000 LAKEHOUSE_DIFF_SEED=random pytest tests/test_differential.py``.
"""

from __future__ import annotations

import json
import os

import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from lakehouse.errors import QueryError
from lakehouse.output import dumps
from lakehouse.query.dialect.catalog import LAST_BITS, ORDER_DEPENDENT
from tests.test_functions_parity import close, make_fx

pytestmark = pytest.mark.spark

EXAMPLES = int(os.environ.get("LAKEHOUSE_DIFF_EXAMPLES", "60"))
SEED = os.environ.get("LAKEHOUSE_DIFF_SEED", "20261128")

INTS = ["i", "l", "0", "1", "-1", "7", "2147483647", "-2147483648", "CAST(3 AS BIGINT)"]
FRACS = ["x", "0.5", "-2.5", "CAST('NaN' AS DOUBLE)", "CAST('-0.0' AS DOUBLE)", "1e308", "2.675"]
DECS = ["a", "m", "1.05", "0.001", "99999999.99", "CAST(-0.50 AS DECIMAL(4,2))"]
STRS = ["s", "''", "'a'", "' a b '", "'ß'", "'Hello, World'", "'x_y%z'", "id"]
DATES = ["d", "DATE '2024-02-29'", "DATE '1970-01-01'", "to_date(ts)"]


def _num(depth: int) -> st.SearchStrategy[str]:
    leaf = st.sampled_from(INTS + FRACS + DECS)
    if depth <= 0:
        return leaf
    sub = st.deferred(lambda: _num(depth - 1))
    return st.one_of(
        leaf,
        st.tuples(sub, st.sampled_from(["+", "-", "*", "/", "%"]), sub).map(lambda t: f"({t[0]} {t[1]} {t[2]})"),
        st.tuples(st.sampled_from(["abs", "sign", "sqrt", "floor", "ceil", "exp", "ln", "negative", "cbrt"]), sub)
        .map(lambda t: f"{t[0]}({t[1]})"),
        st.tuples(sub, st.sampled_from(["0", "1", "2", "-1"])).map(lambda t: f"round({t[0]}, {t[1]})"),
        st.tuples(st.sampled_from(["greatest", "least", "coalesce", "nullif", "pmod", "pow"]), sub, sub)
        .map(lambda t: f"{t[0]}({t[1]}, {t[2]})"),
        st.tuples(_bool(depth - 1), sub, sub).map(lambda t: f"CASE WHEN {t[0]} THEN {t[1]} ELSE {t[2]} END"),
        st.tuples(sub, st.sampled_from(["INT", "BIGINT", "DOUBLE", "DECIMAL(10,2)", "DECIMAL(38,6)"]))
        .map(lambda t: f"CAST({t[0]} AS {t[1]})"),
        _str(depth - 1).map(lambda s: f"length({s})"),
        st.tuples(st.sampled_from(["year", "month", "dayofyear", "weekofyear", "quarter", "unix_date"]),
                  _date(depth - 1)).map(lambda t: f"{t[0]}({t[1]})"),
    )


def _str(depth: int) -> st.SearchStrategy[str]:
    leaf = st.sampled_from(STRS)
    if depth <= 0:
        return leaf
    sub = st.deferred(lambda: _str(depth - 1))
    return st.one_of(
        leaf,
        st.tuples(st.sampled_from(["upper", "lower", "trim", "ltrim", "rtrim", "reverse", "md5", "hex"]), sub)
        .map(lambda t: f"{t[0]}({t[1]})"),
        st.tuples(sub, sub).map(lambda t: f"concat({t[0]}, {t[1]})"),
        st.tuples(sub, st.sampled_from(["0", "1", "2", "-2"]), st.sampled_from(["1", "3", "0"]))
        .map(lambda t: f"substring({t[0]}, {t[1]}, {t[2]})"),
        st.tuples(sub, st.sampled_from(["'a'", "' '", "''"]), sub).map(lambda t: f"replace({t[0]}, {t[1]}, {t[2]})"),
        st.tuples(sub, st.sampled_from(["5", "0", "2"]), st.sampled_from(["'*'", "'xy'"]))
        .map(lambda t: f"lpad({t[0]}, {t[1]}, {t[2]})"),
        st.tuples(st.sampled_from(["INT", "BIGINT", "DECIMAL(10,2)", "DATE"]), _num(0))
        .map(lambda t: f"CAST(CAST({t[1]} AS {t[0]}) AS STRING)" if t[0] != "DATE" else "CAST(d AS STRING)"),
        st.tuples(sub, st.sampled_from(["','", "' '"]), st.sampled_from(["1", "2", "-1"]))
        .map(lambda t: f"split_part({t[0]}, {t[1]}, {t[2]})"),
    )


def _bool(depth: int) -> st.SearchStrategy[str]:
    cmp = st.sampled_from(["=", "<>", "<", "<=", ">", ">="])
    leaf = st.one_of(
        st.sampled_from(["b", "true", "false", "x IS NULL", "isnan(x)", "s LIKE 'a%'", "s LIKE '%\\_%'"]),
        st.tuples(_num(0), cmp, _num(0)).map(lambda t: f"{t[0]} {t[1]} {t[2]}"),
        st.tuples(_str(0), cmp, _str(0)).map(lambda t: f"{t[0]} {t[1]} {t[2]}"),
    )
    if depth <= 0:
        return leaf
    sub = st.deferred(lambda: _bool(depth - 1))
    return st.one_of(
        leaf,
        st.tuples(sub, st.sampled_from(["AND", "OR"]), sub).map(lambda t: f"({t[0]} {t[1]} {t[2]})"),
        sub.map(lambda b: f"NOT ({b})"),
        st.tuples(_num(depth - 1), cmp, _num(depth - 1)).map(lambda t: f"{t[0]} {t[1]} {t[2]}"),
        st.tuples(_num(depth - 1), _num(0), _num(0)).map(lambda t: f"{t[0]} BETWEEN {t[1]} AND {t[2]}"),
        st.tuples(_str(depth - 1), _str(0), _str(0)).map(lambda t: f"{t[0]} IN ({t[1]}, {t[2]})"),
    )


def _date(depth: int) -> st.SearchStrategy[str]:
    leaf = st.sampled_from(DATES)
    if depth <= 0:
        return leaf
    sub = st.deferred(lambda: _date(depth - 1))
    return st.one_of(
        leaf,
        st.tuples(sub, st.sampled_from(["1", "-1", "30", "i % 100"])).map(lambda t: f"date_add({t[0]}, {t[1]})"),
        st.tuples(sub, st.sampled_from(["1", "-13"])).map(lambda t: f"add_months({t[0]}, {t[1]})"),
        sub.map(lambda d: f"last_day({d})"),
        st.tuples(sub, st.sampled_from(["'YEAR'", "'MM'", "'week'"])).map(lambda t: f"trunc({t[0]}, {t[1]})"),
    )


def _value(depth: int) -> st.SearchStrategy[str]:
    return st.one_of(_num(depth), _str(depth), _bool(depth), _date(depth))


AGGS = ["sum", "avg", "min", "max", "count"]


@st.composite
def queries(draw: st.DrawFn) -> str:
    if draw(st.booleans()):
        exprs = draw(st.lists(_value(2), min_size=1, max_size=3))
        where = draw(st.one_of(st.just(""), _bool(1).map(lambda b: f" WHERE {b}")))
        return "SELECT id, " + ", ".join(f"{e} AS v{i}" for i, e in enumerate(exprs)) + f" FROM fx{where} ORDER BY id"
    aggs = draw(st.lists(st.tuples(st.sampled_from(AGGS), _num(1)), min_size=1, max_size=3))
    return ("SELECT b, " + ", ".join(f"{f}({e}) AS v{i}" for i, (f, e) in enumerate(aggs))
            + " FROM fx GROUP BY b ORDER BY b")


def _outcome(p, sql: str, engine: str) -> tuple[str, str]:
    try:
        return "ok", dumps(p.lh.query(sql, engine).to_pylist())
    except QueryError as e:
        return "error", str(e)


def _close(u, v, sql: str) -> bool:
    return close(u, v, any(f"{f}(" in sql for f in ORDER_DEPENDENT), any(f"{f}(" in sql for f in LAST_BITS))


def check(p, sql: str) -> None:
    """One generated query: the same answer, both failing, or refused on DuckDB."""
    spark_kind, spark_out = _outcome(p, sql, "spark")
    duck_kind, duck_out = _outcome(p, sql, "duckdb")
    if duck_kind == "error" and " is refused" in duck_out:
        return
    if spark_kind == duck_kind == "error":
        return
    assert spark_kind == duck_kind, f"{sql}\nspark {spark_kind}: {spark_out[:300]}\nduckdb {duck_kind}: {duck_out[:300]}"
    if spark_out != duck_out:
        assert _close(json.loads(spark_out), json.loads(duck_out), sql), \
            f"{sql}\nspark:  {spark_out}\nduckdb: {duck_out}"


@pytest.fixture(scope="module")
def diff_project(tmp_path_factory, spark):
    return make_fx(tmp_path_factory, "differential")


_settings = settings(max_examples=EXAMPLES, deadline=None, database=None,
                     suppress_health_check=list(HealthCheck))


@_settings
@given(sql=queries())
def _run(p, sql: str) -> None:
    check(p, sql)


def test_generated_queries_agree(diff_project):
    run = _run if SEED == "random" else seed(int(SEED))(_run)
    run(diff_project)
