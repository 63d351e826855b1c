"""Parity: the same Spark SQL gives byte-identical JSON on Spark and on DuckDB, or DuckDB refuses.

Two small real Delta tables (rows on UTC day boundaries, NaN, infinities, nulls, decimals) are
loaded once; every case runs on both engines through ``Lakehouse.query`` and is rendered as
``lakehouse query --format json`` renders it. A case either matches byte for byte, is refused
on DuckDB with an error naming the construct, or fails on both engines (ANSI errors).
"""

from __future__ import annotations

import pytest

from lakehouse.errors import QueryError
from lakehouse.output import dumps

pytestmark = pytest.mark.spark

FACTS = """
name: facts
columns:
  - {name: id,     type: string, nullable: false}
  - {name: n,      type: int}
  - {name: big,    type: long}
  - {name: x,      type: double}
  - {name: amount, type: 'decimal(10,2)'}
  - {name: flag,   type: boolean}
  - {name: d,      type: date}
  - {name: s,      type: string}
  - {name: event_time, type: timestamp, nullable: false}
primary_key: [id]
event_time: event_time
archive: {delay: 24h, interval: 2h, sort_columns: [n]}
"""
FACTS_ROWS = [
    ["f1", "1", "10", "1.5", "1.25", "true", "2026-11-22", "a_b", "2026-11-20T23:59:59Z"],
    ["f2", "2", "", "NaN", "2.50", "false", "2026-11-23", "ab", "2026-11-21T00:00:00Z"],
    ["f3", "3", "3", "", "", "", "", "", "2026-11-21T10:15:00.5Z"],
    ["f4", "-4", "-5", "-0.25", "-7.77", "true", "2026-12-31", "Hello World",
     "2026-11-21T23:59:59.999999Z"],
    ["f5", "", "9000000000", "inf", "99999999.99", "false", "2026-01-01", "a%b",
     "2026-11-22T00:00:00Z"],
    ["f6", "7", "7", "2.5", "0.01", "true", "2024-02-29", "x\\_y", "2026-11-19T12:00:00Z"],
]
DIMS = """
name: dims
columns:
  - {name: k,     type: int}
  - {name: label, type: string}
  - {name: rate,  type: 'decimal(6,3)'}
  - {name: at,    type: timestamp, nullable: false}
event_time: at
"""
DIMS_ROWS = [
    ["1", "one", "0.125", "2026-11-20T00:00:00Z"],
    ["2", "two", "1.500", "2026-11-21T00:00:00Z"],
    ["2", "two-b", "", "2026-11-21T12:00:00Z"],
    ["9", "", "3.333", "2026-11-22T00:00:00Z"],
]

SAME = "same"
BOTH_FAIL = "both fail"


def refused(construct: str) -> str:
    return "refused:" + construct


# (sql, expectation). Multi-row results are ordered so that JSON can be compared byte for byte.
CASES: list[tuple[str, str]] = [
    # aggregates and their result types
    ("SELECT sum(n), avg(amount) FROM facts", SAME),
    ("SELECT sum(big) AS s, sum(amount) AS a, avg(n) AS m FROM facts", SAME),
    ("SELECT count(*), count(n), count(DISTINCT s) FROM facts", SAME),
    ("SELECT min(amount), max(amount), min(s), max(d) FROM facts", SAME),
    ("SELECT avg(rate) AS r, sum(rate) AS t, avg(k) AS ak FROM dims", SAME),
    ("SELECT flag, count(*) AS c, sum(amount) AS a FROM facts GROUP BY flag ORDER BY flag", SAME),
    ("SELECT k, avg(rate) AS r FROM dims GROUP BY k ORDER BY k", SAME),
    ("SELECT avg(amount) AS a, sum(n) AS s, count(*) AS c FROM facts WHERE n > 100", SAME),
    (("SELECT stddev(n) AS sd, variance(n) AS v, count_if(n > 1) AS c, bool_and(n > -10) AS b "
     "FROM facts WHERE n IN (1, 3)"), SAME),
    ("SELECT percentile(n, 0.5) AS p, median(n) AS m, percentile(n, 0.25) AS q FROM facts", SAME),
    ("SELECT count_if(n > 1) AS c, count(n) AS k FROM facts WHERE n > 1000", SAME),  # 0, not NULL
    ("SELECT flag, count_if(n > 1) OVER (PARTITION BY flag) AS c FROM facts ORDER BY id", SAME),
    ("SELECT percentile_approx(n, 0.5) AS p FROM facts", refused("percentile_approx()")),
    ("SELECT approx_count_distinct(s) AS c FROM facts", refused("approx_count_distinct()")),
    ("SELECT first(n) AS f FROM facts", refused("first()")),
    ("SELECT collect_list(n) AS l FROM facts", refused("collect_list()")),
    ("SELECT max(x) AS mx, min(x) AS mn, sum(x) AS sx FROM facts", SAME),
    # casts (ANSI)
    (("SELECT CAST(2.7 AS INT) AS a, CAST(-2.7 AS INT) AS b, CAST(2.5D AS INT) AS c, "
     "CAST(' 3 ' AS INT) AS e, CAST('-12' AS BIGINT) AS f, try_cast(2.7 AS INT) AS g"), SAME),
    (("SELECT CAST(amount AS INT) AS a, CAST(x AS BIGINT) AS b FROM facts WHERE id IN ('f1', 'f4') "
     "ORDER BY id"), SAME),
    ("SELECT CAST('2.7' AS INT) AS a", BOTH_FAIL),
    ("SELECT CAST('x' AS INT) AS a", BOTH_FAIL),
    ("SELECT CAST(9999999999 AS INT) AS a", BOTH_FAIL),
    ("SELECT CAST(x AS INT) AS a FROM facts WHERE id = 'f2'", BOTH_FAIL),
    ("SELECT try_cast('x' AS INT) AS a", refused("TRY_CAST(string AS int)")),
    (("SELECT CAST(n AS DOUBLE) AS a, CAST(n AS DECIMAL(5,1)) AS b, CAST(amount AS DECIMAL(12,4)) AS c "
     "FROM facts ORDER BY id"), SAME),
    ("SELECT CAST(1.239 AS DECIMAL(5,2)) AS a, CAST(-1.235 AS DECIMAL(5,2)) AS b", SAME),
    ("SELECT CAST(12345.6 AS DECIMAL(5,2)) AS a", BOTH_FAIL),
    ("SELECT CAST('12.345' AS DECIMAL(5,2)) AS a", refused("CAST(string AS decimal(5,2))")),
    (("SELECT CAST(event_time AS STRING) AS t, CAST(event_time AS DATE) AS d, event_date, "
     "CAST(d AS TIMESTAMP) AS dt FROM facts ORDER BY id"), SAME),
    (("SELECT CAST(d AS STRING) AS t, CAST(amount AS STRING) AS a, CAST(n AS STRING) AS b, "
     "CAST(flag AS STRING) AS f "
     "FROM facts ORDER BY id"), SAME),
    ("SELECT CAST(x AS STRING) AS f FROM facts ORDER BY id", refused("CAST(x AS STRING)")),
    ("SELECT CAST('2026-13-01' AS DATE) AS d", BOTH_FAIL),
    (("SELECT to_date('2026-11-20') AS d, CAST('2026-11-20' AS DATE) AS e, "
     "CAST('2026-11-20T10:15:00+02:00' AS TIMESTAMP) AS t"), SAME),
    ("SELECT to_date('bad') AS d", BOTH_FAIL),
    (("SELECT CAST(n AS STRING) || '-' || s AS c, concat(s, '/', CAST(event_time AS STRING)) AS e, "
     "concat('t=', event_time) AS f FROM facts ORDER BY id"), SAME),
    # arithmetic (ANSI errors; decimal precision and scale)
    ("SELECT n + 1 AS a, n * 2 AS b, n - big AS c, -n AS e FROM facts ORDER BY id", SAME),
    ("SELECT 7 / 2 AS a, 7 div 2 AS b, -7 div 2 AS c, -7 % 3 AS e, pmod(-7, 3) AS f", SAME),
    ("SELECT n / 2 AS a, big / n AS b FROM facts ORDER BY id", SAME),
    ("SELECT 1 / 0 AS a", BOTH_FAIL),
    ("SELECT n / 0 AS a FROM facts", BOTH_FAIL),
    ("SELECT 5 % 0 AS a", BOTH_FAIL),
    ("SELECT 1 div 0 AS a", BOTH_FAIL),
    ("SELECT 2147483647 + 1 AS a", BOTH_FAIL),
    (("SELECT amount * 2 AS a, amount + 1 AS b, amount - amount AS c, amount * 1.5 AS e, "
     "amount + 0.001 AS f, n * 2.5 AS g FROM facts ORDER BY id"), SAME),
    ("SELECT amount / 3 AS a, amount / 7 AS b FROM facts ORDER BY id", SAME),
    ("SELECT amount * amount AS a, amount / amount AS b FROM facts WHERE id <> 'f5' ORDER BY id",
     SAME),
    ("SELECT amount / 0 AS a FROM facts", BOTH_FAIL),
    ("SELECT x * 2 AS a, x + n AS b FROM facts ORDER BY id", SAME),
    ("SELECT 10.0 / 4 AS a, CAST(10 AS DECIMAL(10,0)) / 4 AS b", SAME),
    (("SELECT round(amount, 1) AS r, abs(n) AS a, floor(amount) AS f, ceil(amount) AS c, "
     "round(x) AS rx, floor(x * 2) AS fx, ceil(-x) AS cx FROM facts WHERE id <> 'f2' AND id <> 'f5' "
     "ORDER BY id"), SAME),
    ("SELECT round(x, 1) AS r FROM facts ORDER BY id", SAME),
    ("SELECT sqrt(4D) AS a, power(n, 2) AS b, x % 2 AS c, n % 3 AS e FROM facts ORDER BY id", SAME),
    ("SELECT x / 0 AS a FROM facts", BOTH_FAIL),
    ("SELECT md5(s) AS m FROM facts ORDER BY id", SAME),
    # strings
    ("SELECT s LIKE 'a\\\\_b' AS a, s LIKE 'a%' AS b, s LIKE 'a\\\\%b' AS c FROM facts ORDER BY id",
     SAME),
    (("SELECT s ILIKE 'HELLO%' AS a, s NOT LIKE '%o%' AS b, s LIKE 'x\\\\\\\\\\\\_y' AS c "
     "FROM facts ORDER BY id"), SAME),
    (("SELECT substr(s, 0, 2) AS a, substr(s, 1, 2) AS b, substr(s, -3, 2) AS c FROM facts "
     "ORDER BY id"), SAME),
    (("SELECT substr(s, -20, 3) AS a, substring(s, 2) AS b, substr(s, 0) AS c, substr(s, 2, 0) AS e "
     "FROM facts ORDER BY id"), SAME),
    ("SELECT lower(s), upper(s), length(s) FROM facts ORDER BY id", SAME),
    (("SELECT trim('  a ') AS a, concat_ws('-', s, 'y') AS b, replace(s, '_', '+') AS c "
     "FROM facts ORDER BY id"), SAME),
    ("SELECT lpad(s, 6, '*') AS a, rpad(s, 6, '*') AS b, instr(s, 'b') AS c FROM facts ORDER BY id",
     SAME),
    ("SELECT s RLIKE '^a' AS a FROM facts", refused("RLIKE")),
    ("SELECT regexp_replace(s, '_', '') AS a FROM facts", refused("regexp_replace()")),
    ("SELECT coalesce(s, 'none') AS a, nvl(big, 0) AS b, nullif(n, 1) AS c FROM facts ORDER BY id",
     SAME),
    (("SELECT CASE WHEN n > 1 THEN 'big' WHEN n IS NULL THEN 'null' ELSE 'small' END AS c, "
     "if(flag, 1, 0) AS f FROM facts ORDER BY id"), SAME),
    # dates and times, on day boundaries
    (("SELECT dayofweek(d) AS a, weekday(d) AS b, date_add(d, 1) AS c, date_sub(d, 1) AS e, "
     "datediff(d, DATE'2026-11-20') AS f FROM facts ORDER BY id"), SAME),
    (("SELECT year(d) AS y, month(d) AS m, dayofmonth(d) AS dm, hour(event_time) AS h, "
     "minute(event_time) AS mi, second(event_time) AS se FROM facts ORDER BY id"), SAME),
    (("SELECT date_trunc('DAY', event_time) AS a, date_trunc('HOUR', event_time) AS b, "
     "date_trunc('MONTH', event_time) AS c FROM facts ORDER BY id"), SAME),
    ("SELECT event_date, count(*) AS c FROM facts GROUP BY event_date ORDER BY event_date", SAME),
    (("SELECT id FROM facts WHERE event_time >= TIMESTAMP'2026-11-21 00:00:00' "
     "AND event_time < TIMESTAMP'2026-11-22 00:00:00' ORDER BY id"), SAME),
    ("SELECT id, event_time FROM facts WHERE CAST(event_time AS DATE) = DATE'2026-11-21' ORDER BY id",
     SAME),
    ("SELECT date_format(event_time, 'yyyy-MM-dd') AS a FROM facts ORDER BY a", SAME),
    ("SELECT current_date() AS a", refused("current_date()")),
    # NaN and infinities
    ("SELECT id, x, x = x AS eq, x > 1 AS gt, isnan(x) AS n FROM facts ORDER BY id", SAME),
    ("SELECT x, count(*) AS c FROM facts GROUP BY x ORDER BY x", SAME),
    ("SELECT id FROM facts ORDER BY x DESC, id", SAME),
    ("SELECT id, x FROM facts ORDER BY x", SAME),
    # nulls
    ("SELECT id, n, big FROM facts ORDER BY n, id", SAME),
    ("SELECT id, n FROM facts ORDER BY n DESC", SAME),
    ("SELECT n IS NULL AS a, n <=> NULL AS b, n = NULL AS c, n <=> big AS e FROM facts ORDER BY id",
     SAME),
    ("SELECT greatest(n, big) AS g, least(n, 0) AS l FROM facts ORDER BY id", SAME),
    # windows
    (("SELECT id, row_number() OVER (ORDER BY event_time) AS r, sum(n) OVER (ORDER BY id) AS s "
     "FROM facts ORDER BY id"), SAME),
    ("SELECT id, rank() OVER (PARTITION BY flag ORDER BY n) AS r FROM facts ORDER BY id", SAME),
    ("SELECT k, label, dense_rank() OVER (ORDER BY k DESC) AS r FROM dims ORDER BY label", SAME),
    (("SELECT id, lag(n) OVER (ORDER BY id) AS p, lead(n, 1) OVER (ORDER BY id) AS q FROM facts "
     "ORDER BY id"), SAME),
    ("SELECT id, sum(amount) OVER (PARTITION BY flag) AS s FROM facts ORDER BY id", SAME),
    ("SELECT id, avg(amount) OVER (PARTITION BY flag) AS s FROM facts ORDER BY id",
     refused("avg(decimal) OVER (...)")),
    # joins of two tables
    ("SELECT f.id, d.label FROM facts f JOIN dims d ON f.n = d.k ORDER BY f.id, d.label", SAME),
    ("SELECT f.id, d.rate FROM facts f LEFT JOIN dims d ON f.n = d.k ORDER BY f.id, d.rate", SAME),
    ("SELECT f.id, d.k FROM facts f FULL OUTER JOIN dims d ON f.n = d.k ORDER BY f.id, d.k", SAME),
    (("SELECT d.k, sum(f.amount) AS a, count(f.id) AS c FROM dims d LEFT JOIN facts f "
     "ON CAST(f.event_time AS DATE) = CAST(d.at AS DATE) GROUP BY d.k ORDER BY d.k"), SAME),
    ("SELECT f.amount * d.rate AS p FROM facts f JOIN dims d ON f.n = d.k ORDER BY p", SAME),
    # subqueries, CTEs, set operations, VALUES
    ("SELECT id FROM facts WHERE n IN (SELECT k FROM dims) ORDER BY id", SAME),
    ("SELECT id FROM facts f WHERE EXISTS (SELECT 1 FROM dims d WHERE d.k = f.n) ORDER BY id", SAME),
    ("SELECT id, (SELECT max(rate) FROM dims) AS m FROM facts ORDER BY id", SAME),
    (("WITH t AS (SELECT n, amount FROM facts WHERE n > 0) SELECT sum(amount) AS s, count(*) AS c "
     "FROM t"), SAME),
    ("SELECT c, count(*) AS k FROM (SELECT flag AS c FROM facts) q GROUP BY c ORDER BY c", SAME),
    ("SELECT n FROM facts WHERE n > 2 UNION ALL SELECT k FROM dims ORDER BY n", SAME),
    ("SELECT k FROM dims UNION SELECT n FROM facts WHERE n < 3 ORDER BY k", SAME),
    ("SELECT * FROM VALUES (1, 'a'), (2, 'b') AS v(i, t) ORDER BY i", SAME),
    ("SELECT * FROM dims ORDER BY at", SAME),
    ("SELECT * FROM facts ORDER BY id", SAME),
    ("SELECT DISTINCT flag FROM facts ORDER BY flag LIMIT 2", SAME),
    ("SELECT substr(s, 0, 2) FROM facts", refused("result column 1")),
    # Spark's generated column names
    ("SELECT n + 1, n * 2, n = 1, n > 1 AND flag, count(*) FROM facts GROUP BY n, flag ORDER BY n",
     SAME),
    ("SELECT 1, 'abc', TRUE, 1.5, NULL, N, Id, f.s FROM facts f ORDER BY id", SAME),
    ("SELECT CAST(big AS INT) AS b FROM facts", BOTH_FAIL),
    ("SELECT id FROM facts WHERE s = 1", BOTH_FAIL),
    # read-only: refused on both engines
    ("DESCRIBE facts", SAME),
    ("DESCRIBE TABLE dims", SAME),
    ("DESCRIBE EXTENDED facts", refused("DESCRIBE")),
    ("EXPLAIN SELECT 1", refused("EXPLAIN")),
]


@pytest.fixture(scope="module")
def parity_project(tmp_path_factory, spark):
    from tests.conftest import Project

    p = Project(tmp_path_factory.mktemp("parity") / "proj")
    p.table(FACTS).table(DIMS).create("facts", "dims")
    p.lh.load("facts", [p.csv("facts.csv", ["id", "n", "big", "x", "amount", "flag", "d", "s",
                                            "event_time"], FACTS_ROWS)])
    p.lh.load("dims", [p.csv("dims.csv", ["k", "label", "rate", "at"], DIMS_ROWS)])
    return p


def _json(p, sql: str, engine: str) -> str:
    return dumps(p.lh.query(sql, engine).to_pylist())


def test_enough_cases():
    assert len(CASES) >= 80
    assert len({sql for sql, _ in CASES}) == len(CASES)


@pytest.mark.parametrize("sql,expect", CASES, ids=[f"{i:03d}" for i in range(len(CASES))])
def test_parity(parity_project, sql, expect):
    p = parity_project
    if expect == SAME:
        spark_json = _json(p, sql, "spark")
        assert _json(p, sql, "duckdb") == spark_json
    elif expect == BOTH_FAIL:
        with pytest.raises(QueryError, match=r"^spark: "):
            _json(p, sql, "spark")
        with pytest.raises(QueryError, match=r"^duckdb: "):
            _json(p, sql, "duckdb")
    else:
        construct = expect.removeprefix("refused:")
        with pytest.raises(QueryError) as e:
            _json(p, sql, "duckdb")
        msg = str(e.value)
        assert msg.startswith("duckdb: ") and construct in msg and "\n" not in msg, msg
