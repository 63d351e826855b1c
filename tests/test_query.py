"""Queries on both engines over the same Delta tables: saved queries agree, UTC days agree."""

from __future__ import annotations

import datetime as dt
import functools
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lakehouse.errors import QueryError
from lakehouse.query.dialect.conform import conform
from lakehouse.query.dialect.names import spark_name
from lakehouse.query.dialect.translate import Translator
from lakehouse.query.duckdb import transpile
from lakehouse.query.guard import check
from tests.conftest import HEADER_SMALL, TRIPS_SMALL


@pytest.fixture(scope="module")
def loaded_repo(tmp_path_factory, spark):
    """This repository's project with generated trips loaded (module-scoped: built once)."""
    from lakehouse.demo import generate
    from tests.conftest import copy_of_repo

    p = copy_of_repo(tmp_path_factory.mktemp("q") / "repo")
    root = p.root
    p.lh.migrate()
    data = generate(root / "in", rows=3000, days=3, end=dt.date(2026, 11, 20))
    # through ingest with the shipped trips.yaml settings: days, then updates, then requests
    r = p.lh.ingest("trips", str(root / "in"), drain=True)
    assert [f for b in r.batches for f in b.files] == [f.name for f in data.files]
    assert r.rows + r.rows_rejected == data.rows_written and r.rows_rejected == data.bad_rows
    return p


@pytest.mark.spark
def test_every_saved_query_agrees_on_both_engines(loaded_repo):
    queries = loaded_repo.lh.saved_queries()
    assert len(queries) >= 4
    for q in queries:
        s, _, cmp = loaded_repo.lh.compare_engines(q.sql)
        assert cmp.equal, f"queries/{q.path.name}: {cmp.detail}"
        assert s.num_rows > 0, f"queries/{q.path.name} returned nothing on the demo data"


@pytest.mark.spark
def test_engines_agree_on_utc_days_around_midnight(project, spark):
    project.table(TRIPS_SMALL).create("trips")
    times = ["2026-11-20T23:59:59.999999Z", "2026-11-21T00:00:00Z", "2026-11-20T20:00:00-05:00",
             "2026-11-21T01:00:00+02:00", "2026-03-29T01:30:00Z"]
    f = project.csv("a.csv", HEADER_SMALL, [[f"t{i}", 1, 0, 1.0, 1.0, "1.00", "true", "", t] for i, t in enumerate(times)])
    project.lh.load("trips", [f])
    sql = ("SELECT event_date, CAST(event_time AS DATE) AS d, hour(event_time) AS h, count(*) AS n "
           "FROM trips GROUP BY event_date, CAST(event_time AS DATE), hour(event_time) ORDER BY event_date, h")
    s = project.lh.query(sql, "spark").to_pylist()
    d = project.lh.query(sql, "duckdb").to_pylist()
    assert s == d
    # 20:00-05:00 is 01:00 UTC on the 21st; 01:00+02:00 is 23:00 UTC on the 20th
    assert [(r["event_date"], r["h"], r["n"]) for r in s] == [
        (dt.date(2026, 3, 29), 1, 1), (dt.date(2026, 11, 20), 23, 2),
        (dt.date(2026, 11, 21), 0, 1), (dt.date(2026, 11, 21), 1, 1),
    ]
    assert all(r["event_date"] == r["d"] for r in s)


@pytest.mark.spark
def test_query_errors_name_the_engine(loaded_repo):
    with pytest.raises(QueryError, match=r"^spark: .*no_such_table"):
        loaded_repo.lh.query("SELECT * FROM no_such_table", "spark")
    with pytest.raises(QueryError, match=r"^duckdb: .*no_such_table"):
        loaded_repo.lh.query("SELECT * FROM no_such_table", "duckdb")
    for engine in ("spark", "duckdb"):
        with pytest.raises(QueryError, match=r"^query: more than one statement \(SELECT, SELECT\)"):
            loaded_repo.lh.query("SELECT 1; SELECT 2", engine)


def test_transpile_quotes_identifiers_duckdb_reserves():
    out = transpile("SELECT at, count(*) FROM clicks GROUP BY at")
    assert '"at"' in out and '"clicks"' in out


# -- the read-only guard (pure: no engine) ------------------------------------------------------


ALLOWED = [
    ("SELECT 1", "query"), ("select * from trips", "query"), ("FROM trips SELECT trip_id", "query"),
    ("WITH a AS (SELECT 1 AS x) SELECT x FROM a", "query"), ("VALUES (1, 2)", "query"),
    ("(SELECT 1)", "query"), ("SELECT 1 UNION ALL SELECT 2", "query"), ("SELECT 1;", "query"),
    ("SELECT * FROM range(3)", "query"), ("SELECT ';DROP TABLE t' AS s", "query"),
    ("SELECT 1 -- ; DROP TABLE t", "query"), ("SELECT 1 /* ; DROP TABLE t */", "query"),
    ("SELECT 1 /* /* nested */ DROP TABLE t */", "query"),
    ("SELECT input_file_name() FROM trips", "query"),
    ("SELECT * FROM trips t JOIN trips u ON t.trip_id = u.trip_id", "query"),
    ("SHOW TABLES", "show"), ("SHOW COLUMNS IN trips", "show"), ("DESCRIBE trips", "describe"),
    ("DESC TABLE EXTENDED trips", "describe"), ("DESCRIBE FUNCTION abs", "describe"),
    ("EXPLAIN SELECT * FROM trips", "explain"), ("EXPLAIN EXTENDED SELECT 1", "explain"),
]


@pytest.mark.parametrize("sql,kind", ALLOWED)
def test_guard_allows_one_read_only_statement(sql, kind):
    assert check(sql).kind == kind


# Every statement class that writes, reconfigures or reaches outside: (sql, construct named).
WRITES = [
    ("INSERT INTO delta.`/tmp/x` SELECT 1", "INSERT"), ("INSERT INTO trips SELECT * FROM trips", "INSERT"),
    ("INSERT OVERWRITE DIRECTORY '/tmp/x' SELECT 1", "INSERT"), ("DELETE FROM trips", "DELETE"),
    ("UPDATE trips SET status = 1", "UPDATE"),
    ("MERGE INTO trips t USING trips s ON t.trip_id = s.trip_id WHEN MATCHED THEN DELETE", "MERGE"),
    ("CREATE TABLE x AS SELECT 1", "CREATE"), ("CREATE TEMP VIEW v AS SELECT 1", "CREATE"),
    ("DROP TABLE trips", "DROP"), ("ALTER TABLE trips ADD COLUMNS (x INT)", "ALTER"),
    ("TRUNCATE TABLE trips", "TRUNCATE"), ("SET spark.sql.ansi.enabled = false", "SET"),
    ("SET", "SET"), ("RESET", "RESET"), ("ADD JAR /tmp/x.jar", "ADD JAR"), ("USE other", "USE"),
    ("CACHE TABLE trips", "CACHE"), ("UNCACHE TABLE trips", "UNCACHE"), ("REFRESH TABLE trips", "REFRESH"),
    ("MSCK REPAIR TABLE trips", "MSCK"), ("ANALYZE TABLE trips COMPUTE STATISTICS", "ANALYZE"),
    ("COPY trips TO '/tmp/x.csv'", "COPY"), ("INSTALL httpfs", "INSTALL"), ("LOAD httpfs", "LOAD"),
    ("PRAGMA version", "PRAGMA"), ("ATTACH '/tmp/x.db' AS y", "ATTACH"), ("CALL f()", "CALL"),
    ("TABLE trips", "TABLE"), ("EXECUTE IMMEDIATE 'DROP TABLE t'", "EXECUTE"),
    ("DECLARE VARIABLE v INT", "DECLARE"), ("MAP trip_id USING 'cat' FROM trips", "MAP"),
    ("REDUCE trip_id USING 'cat' FROM trips", "REDUCE"), ("VACUUM trips", "VACUUM"),
    ("OPTIMIZE trips", "OPTIMIZE"), ("RESTORE TABLE trips TO VERSION AS OF 1", "RESTORE"),
    ("CONVERT TO DELTA parquet.`/x`", "CONVERT"), ("ADD FILE /etc/passwd", "ADD FILE"),
    ("LIST JAR", "LIST JAR"), ("CLEAR CACHE", "CLEAR CACHE"),
]


def _random_case(draw, sql: str) -> str:
    flips = draw(st.lists(st.booleans(), min_size=len(sql), max_size=len(sql)))
    return "".join(c.upper() if f else c.lower() for c, f in zip(sql, flips))


@st.composite
def disguised(draw, sql: str) -> str:
    """The statement in random case, with comments where spaces were, maybe behind a query."""
    out = _random_case(draw, sql) if draw(st.booleans()) else sql
    comment = draw(st.sampled_from([" ", " /* x */ ", " /* ; */ ", " -- c\n", "\n\t"]))
    out = out.replace(" ", comment, draw(st.integers(0, 3)))
    prefix = draw(st.sampled_from(["", "/* hi */ ", "-- note\n", "  "]))
    return prefix + out


@pytest.mark.parametrize("sql,construct", WRITES)
@settings(max_examples=15, deadline=None)
@given(data=st.data())
def test_guard_refuses_writes_and_commands_in_any_disguise(sql, construct, data):
    text = data.draw(disguised(sql))
    with pytest.raises(QueryError) as e:
        check(text)
    msg = str(e.value)
    assert msg.startswith("query: ") and "\n" not in msg
    assert construct in msg.upper(), msg


@pytest.mark.parametrize("sql,construct", WRITES)
def test_guard_refuses_a_write_behind_a_query_or_explain(sql, construct):
    for text in (f"SELECT 1; {sql}", f"EXPLAIN {sql}", f"EXPLAIN EXTENDED {sql}"):
        with pytest.raises(QueryError) as e:
            check(text)
        msg = str(e.value)
        assert msg.startswith("query: ") and construct.split()[0] in msg.upper(), msg


@pytest.mark.parametrize("sql,construct", [
    ("WITH a AS (INSERT INTO t SELECT 1) SELECT 1", "INSERT inside a query"),
    ("SELECT * FROM (INSERT INTO t SELECT 1)", "INSERT inside a query"),
    ("EXPLAIN INSERT INTO t SELECT 1", "EXPLAIN INSERT"),
    ("EXPLAIN EXTENDED DELETE FROM t", "EXPLAIN DELETE"),
    ("SELECT 1; SELECT 2", "more than one statement (SELECT, SELECT)"),
    ("SHOW TABLES; DROP TABLE t", "more than one statement (SHOW TABLES, DROP)"),
    ("SHOW TABLES LIKE 'x'", "SHOW TABLES LIKE"),
    ("SELECT reflect('java.lang.System', 'getProperty', 'user.home')", "reflect()"),
    ("SELECT java_method('java.lang.System', 'exit', 0)", "java_method()"),
    ("SELECT TRANSFORM(trip_id) USING 'cat /etc/passwd' AS (x) FROM trips", "TRANSFORM ... USING"),
    ("SELECT * FROM (FROM trips SELECT TRANSFORM(trip_id) USING 'sh')", "TRANSFORM ... USING"),
    ("SELECT * FROM IDENTIFIER('parquet.`/etc`')", "table function identifier()"),
    ("DESCRIBE HISTORY delta.`/x`", "path-qualified table delta.`/x`"),
    ("DESCRIBE IDENTIFIER('delta.`/x`')", "DESCRIBE IDENTIFIER ('delta.`/x`')"),
    ("desc table identifier('trips')", "DESCRIBE identifier ('trips')"),
    ("SHOW TBLPROPERTIES delta.`/x`", "SHOW TBLPROPERTIES delta.`/x`"),
])
def test_guard_refuses_nested_and_disguised_writes(sql, construct):
    with pytest.raises(QueryError) as e:
        check(sql)
    assert str(e.value).startswith("query: ") and construct in str(e.value), str(e.value)


PATH_TABLES = ["parquet.`/etc/x`", "delta.`/tmp/w/trips/live`", "csv.`/etc/passwd`",
               "json.`/x`", "text.`/etc/passwd`", "orc.`/x`", "binaryFile.`/x`", "PARQUET.`/x`",
               "`parquet`.`/x`", "`delta`.`s3a://bucket/key`", "spark_catalog.default.t",
               "global_temp.v", "`/etc/passwd.csv`", "'/etc/passwd'", "`file:///etc/passwd`"]
FILE_CALLS = ["read_csv('/etc/passwd')", "READ_CSV_AUTO('/etc/passwd')", "read_parquet('/x')",
              "parquet_scan('/x')", "read_json('/x')", "read_json_auto('/x')",
              "read_ndjson_objects('/x')", "read_text('/etc/passwd')", "read_blob('/x')",
              "delta_scan('/x')", "glob('/etc/*')", "query('DROP TABLE t')",
              "query_table('t')", "sniff_csv('/x')", "parquet_metadata('/x')", "read_files('/x')"]
PLACES = ["SELECT * FROM {t}", "SELECT * FROM trips JOIN {t} ON true",
          "SELECT * FROM trips WHERE EXISTS (SELECT 1 FROM {t})",
          "WITH a AS (SELECT * FROM {t}) SELECT * FROM a", "SELECT (SELECT count(*) FROM {t}) AS n",
          "SELECT 1 UNION SELECT * FROM {t}", "EXPLAIN SELECT * FROM {t}",
          "SELECT * FROM (SELECT * FROM (SELECT * FROM {t}) q) r",
          "SELECT * FROM trips WHERE trip_id IN (SELECT * FROM {t})"]


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_guard_refuses_paths_and_file_functions_anywhere(data):
    source = data.draw(st.sampled_from(PATH_TABLES + FILE_CALLS))
    sql = data.draw(disguised(data.draw(st.sampled_from(PLACES)).format(t=source)))
    with pytest.raises(QueryError) as e:
        check(sql)
    msg = str(e.value)
    assert msg.startswith("query: ") and "\n" not in msg
    assert "table" in msg or "()" in msg, msg


@pytest.mark.parametrize("call", FILE_CALLS)
def test_guard_refuses_file_functions_outside_from(call):
    with pytest.raises(QueryError, match=r"^query: .*\(\) is not allowed"):
        check(f"SELECT {call} AS x")


# -- Spark's types, names and semantics on DuckDB (pure rules + real DuckDB, no Spark) ---------


SCHEMA = {"t": [("i", "int"), ("s", "string"), ("d", "decimal(10,2)"), ("f", "double"),
                ("ts", "timestamp"), ("dt", "date"), ("l", "bigint")]}


def _translate(sql: str):
    return Translator(SCHEMA).translate(check(sql).tree)


# Spark 4.0.1's result types (as printed by df.schema on the pinned session)
@pytest.mark.parametrize("expr,spark_type", [
    ("sum(i)", "bigint"), ("sum(l)", "bigint"), ("avg(d)", "decimal(14,6)"), ("sum(d)", "decimal(20,2)"),
    ("avg(i)", "double"), ("avg(f)", "double"), ("max(d)", "decimal(10,2)"), ("count(*)", "bigint"),
    ("i + 1", "int"), ("i * 2.5", "decimal(13,1)"), ("d * 2", "decimal(12,2)"), ("d + 1", "decimal(11,2)"),
    ("d / 3", "decimal(14,6)"), ("i / 2", "double"), ("10.0 / 4", "decimal(8,6)"),
    ("CAST(10 AS DECIMAL(10,0)) / 4", "decimal(16,6)"), ("7 div 2", "bigint"), ("-7 % 3", "int"),
    ("pmod(-7, 3)", "int"), ("1.5", "decimal(2,1)"), ("round(d, 1)", "decimal(10,1)"),
    ("round(2.5)", "decimal(2,0)"), ("floor(1.5)", "decimal(2,0)"), ("abs(-2)", "int"),
    ("percentile(i, 0.5)", "double"), ("median(i)", "double"), ("length(s)", "int"),
    ("dayofweek(dt)", "int"), ("weekday(dt)", "int"), ("CAST(ts AS DATE)", "date"),
    ("CASE WHEN i = 1 THEN 'x' ELSE 'y' END", "string"), ("coalesce(i, l)", "bigint"),
    ("row_number() OVER (ORDER BY i)", "int"), ("sum(i) OVER (ORDER BY i)", "bigint"),
])
def test_result_types_follow_spark(expr, spark_type):
    assert _translate(f"SELECT {expr} AS c FROM t").types == [spark_type]


@pytest.mark.parametrize("expr,name", [
    ("sum(duration_s)", "sum(duration_s)"), ("avg(fare_local)", "avg(fare_local)"),
    ("count(*)", "count(1)"), ("count(DISTINCT s)", "count(DISTINCT s)"), ("I", "I"),
    ("t.s", "s"), ("CAST(d AS STRING)", "d"), ("i + 1", "(i + 1)"), ("-7 % 3", None),
    ("i = 1 AND s = 'x'", "((i = 1) AND (s = x))"), ("lower(s)", "lower(s)"),
    ("substr(s, 0, 2)", None), ("sum(t.i)", None), ("x AS y", "y"),
])
def test_spark_column_names_or_none(expr, name):
    import sqlglot

    assert spark_name(sqlglot.parse_one(f"SELECT {expr}", read="spark").expressions[0]) == name


@pytest.mark.parametrize("sql,construct", [
    ("SELECT percentile_approx(i, 0.5) AS p FROM t", "percentile_approx()"),
    ("SELECT approx_percentile(i, 0.5) AS p FROM t", "percentile_approx()"),
    ("SELECT date_format(ts, 'Q') AS p FROM t", "date_format() with the pattern 'Q'"),
    ("SELECT s RLIKE 'a' AS p FROM t", "RLIKE"),
    ("SELECT first(i) AS p FROM t", "first()"),
    ("SELECT CAST(f AS STRING) AS p FROM t", "CAST(f AS STRING)"),
    ("SELECT try_cast(s AS INT) AS p FROM t", "TRY_CAST(string AS int)"),
    ("SELECT substr(s, 0, 2) FROM t", "result column 1"),
    ("SELECT i FROM t LATERAL VIEW explode(array(1)) x AS y", "explode()"),
    ("SELECT crc32(s) AS m FROM t", "crc32()"), ("SELECT format_number(f, 2) AS m FROM t", "format_number()"),
    ("SELECT current_timestamp() AS n", "current_timestamp()"),
])
def test_duckdb_refuses_what_it_cannot_match(sql, construct):
    with pytest.raises(QueryError) as e:
        _translate(sql)
    msg = str(e.value)
    assert msg.startswith("duckdb: ") and construct in msg and "--engine spark" in msg, msg


@functools.lru_cache(maxsize=1)
def _shared_duckdb():
    """One DuckDB connection (with lakehouse's macros) for the pure-rule tests: fast examples."""
    from lakehouse.query.duckdb import connect

    return connect()


def _duck_rows(sql: str, rows: list[tuple]) -> list[dict]:
    """Translate Spark SQL and run it on real DuckDB over a table t of ``rows``."""
    import pyarrow as pa

    cols = list(zip(*rows)) if rows else [[] for _ in SCHEMA["t"]]
    types = [pa.int32(), pa.string(), pa.decimal128(10, 2), pa.float64(), pa.timestamp("us", tz="UTC"),
             pa.date32(), pa.int64()]
    data = pa.table([pa.array(list(c), t) for c, t in zip(cols, types)], names=[n for n, _ in SCHEMA["t"]])
    con = _shared_duckdb()
    con.register("t_arrow", data)
    con.execute("CREATE OR REPLACE TABLE t AS SELECT * FROM t_arrow")
    tr = _translate(sql)
    try:
        return conform(con.execute(tr.sql).fetch_arrow_table(), tr).to_pylist()
    except Exception as e:  # noqa: BLE001 - DuckDB's own errors, as lakehouse reports them
        raise QueryError(f"duckdb: {str(e).splitlines()[0]}") from None


def _row(i=None, s=None, d=None, f=None, ts=None, dt_=None, big=None):
    return (i, s, d, f, ts, dt_, big)


def test_duckdb_gives_spark_values_for_the_known_differences():
    import decimal as D

    ts = dt.datetime(2026, 11, 20, 10, 15, 0, 500000, tzinfo=dt.UTC)
    rows = [_row(1, "a_b", D.Decimal("1.25"), 1.5, ts, dt.date(2026, 11, 22), 10)]
    got = _duck_rows(
        "SELECT CAST(2.7 AS INT) AS a, CAST(-2.7 AS INT) AS b, s LIKE 'a\\\\_b' AS c, "
        "substr(s, 0, 2) AS e, dayofweek(dt) AS g, weekday(dt) AS h, CAST(ts AS STRING) AS k, "
        "pmod(-7, 3) AS m, pmod(7, -3) AS o, 7 div 2 AS p FROM t", rows)
    assert got == [{"a": 2, "b": -2, "c": True, "e": "a_", "g": 1, "h": 6, "k": "2026-11-20 10:15:00.5",
                    "m": 2, "o": 1, "p": 3}]
    agg = _duck_rows("SELECT sum(i), avg(d), sum(d) FROM t", rows)
    assert agg == [{"sum(i)": 1, "avg(d)": D.Decimal("1.250000"), "sum(d)": D.Decimal("1.25")}]


@pytest.mark.parametrize("sql,error", [
    ("SELECT 1 / 0 AS x", "DIVIDE_BY_ZERO"), ("SELECT i / 0 AS x FROM t", "DIVIDE_BY_ZERO"),
    ("SELECT d / 0 AS x FROM t", "DIVIDE_BY_ZERO"), ("SELECT i % 0 AS x FROM t", "DIVIDE_BY_ZERO"),
    ("SELECT i div 0 AS x FROM t", "DIVIDE_BY_ZERO"), ("SELECT CAST('2.7' AS INT) AS x", "CAST_INVALID_INPUT"),
    ("SELECT CAST(s AS INT) AS x FROM t", "CAST_INVALID_INPUT"),
])
def test_duckdb_raises_where_ansi_spark_raises(sql, error):
    with pytest.raises(QueryError, match=error):
        _duck_rows(sql, [_row(1, "x", 1, 1.0, None, None, 1)])


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(-10**9, 10**9), min_size=1, max_size=12), st.integers(1, 999))
def test_decimal_avg_and_division_are_exact_and_round_half_up(cents, k):
    import decimal as D

    values = [D.Decimal(c).scaleb(-2) for c in cents]
    rows = [_row(1, None, v, None, None, None, None) for v in values]
    got = _duck_rows(f"SELECT avg(d) AS a, sum(d) / {k} AS q FROM t", rows)[0]
    ctx = D.Context(prec=80, rounding=D.ROUND_HALF_UP)
    total = sum(values, D.Decimal(0))
    assert got["a"] == ctx.divide(total, len(values)).quantize(D.Decimal("1e-6"), context=ctx)
    assert got["q"] == ctx.divide(total, k).quantize(D.Decimal("1e-6"), context=ctx)


def test_duckdb_sandbox_reads_only_the_tables(tmp_path):
    from lakehouse.query.duckdb import connect, sandbox

    secret = tmp_path / "secret.csv"
    secret.write_text("a\n1\n")
    con = connect()
    sandbox(con, [])
    for sql in (f"SELECT * FROM read_csv('{secret}')", f"SELECT * FROM '{secret}'",
                f"COPY (SELECT 1) TO '{tmp_path / 'out.csv'}'", "SET enable_external_access = true",
                f"ATTACH '{tmp_path / 'x.db'}' AS x"):
        with pytest.raises(Exception):  # noqa: B017 - DuckDB's permission and lock errors
            con.execute(sql)
    assert not (tmp_path / "out.csv").exists()


def test_an_extension_file_is_signature_checked_once_and_again_once_it_changed(tmp_path, monkeypatch):
    """The first connection of a process loads the delta extension with DuckDB's signature check;
    later ones skip the check only for the same file unchanged: a copy tampered with after a good
    load, or a tampered file first seen, is refused; a sandboxed connection loads nothing."""
    import os
    import shutil
    from pathlib import Path

    from lakehouse.query import duckdb as duck

    good = duck.extension_path("delta")
    copy = tmp_path / "delta.duckdb_extension"
    shutil.copyfile(good, copy)
    monkeypatch.setattr(duck, "_SIGNED", set())
    monkeypatch.setattr(duck, "extension_path", lambda name="delta": str(copy))
    for _ in range(3):
        con = duck.connect()
        assert con.execute("SELECT count(*) FROM duckdb_extensions() WHERE loaded AND extension_name = 'delta'"
                           ).fetchone() == (1,)
        con.close()
    assert [k[0] for k in duck._SIGNED] == [str(copy)]

    def tamper(path: Path, at: int) -> None:  # a new file in its place (a loaded library is never written)
        body = bytearray(path.read_bytes())
        body[at] ^= 0xFF
        fresh = path.with_name(path.name + ".new")
        fresh.write_bytes(bytes(body))
        os.replace(fresh, path)

    tamper(copy, 4096)
    with pytest.raises(Exception, match="signature"):
        duck.connect()
    monkeypatch.setattr(duck, "_SIGNED", set())  # a process whose first sight is a tampered file
    with pytest.raises(Exception, match="signature"):
        duck.connect()
    tamper(copy, 4096)  # the original bytes again: checked, and good
    con = duck.connect()
    duck.sandbox(con, [])
    other = tmp_path / "other.duckdb_extension"
    shutil.copyfile(good, other)
    for sql in (f"LOAD '{other}'", "INSTALL httpfs", "LOAD httpfs", "SET allow_unsigned_extensions = false"):
        with pytest.raises(Exception):  # noqa: B017 - DuckDB's permission and lock errors
            con.execute(sql)


# -- both engines through Lakehouse.query (real Spark, real DuckDB) ------------------------------


@pytest.mark.spark
def test_the_issue_example_prints_the_same_json_on_both_engines(loaded_repo):
    from lakehouse.output import dumps

    sql = "SELECT sum(duration_s), avg(fare_local) FROM trips"
    s = dumps(loaded_repo.lh.query(sql, "spark").to_pylist())
    d = dumps(loaded_repo.lh.query(sql, "duckdb").to_pylist())
    assert s == d
    assert '"sum(duration_s)": ' in s and '"avg(fare_local)": "' in s  # a bigint; a decimal string


@pytest.mark.spark
@pytest.mark.parametrize("sql,construct", [
    ("INSERT INTO trips SELECT * FROM trips", "INSERT"),
    ("SELECT * FROM parquet.`/etc`", "path-qualified table"),
    ("SELECT * FROM trips; DROP TABLE trips", "more than one statement"),
    ("EXPLAIN DELETE FROM trips", "EXPLAIN DELETE"),
    ("SELECT * FROM read_csv('/etc/passwd')", "read_csv()"),
])
@pytest.mark.parametrize("engine", ["spark", "duckdb"])
def test_both_engines_refuse_what_is_not_read_only(loaded_repo, sql, construct, engine):
    with pytest.raises(QueryError) as e:
        loaded_repo.lh.query(sql, engine)
    assert str(e.value).startswith("query: ") and construct in str(e.value)


@pytest.mark.spark
@pytest.mark.parametrize("sql,kind", [
    ("INSERT INTO trips SELECT * FROM trips", "query"), ("CACHE TABLE trips", "query"),
    ("SELECT * FROM csv.`/x`", "query"), ("WITH a AS (SELECT * FROM json.`/x`) SELECT * FROM a", "query"),
    ("SELECT * FROM trips WHERE EXISTS (SELECT 1 FROM text.`/etc/passwd`)", "query"),
    ("SELECT * FROM read_files('/x')", "query"), ("SELECT 1", "show"), ("SHOW TABLES", "describe"),
    ("SELECT TRANSFORM(trip_id) USING 'cat' AS (x) FROM trips", "query"),
])
def test_sparks_own_parse_is_checked_too(spark, sql, kind):
    """The second line of defence: whatever sqlglot thought, Spark's parse must agree."""
    from lakehouse.query.guard import Checked
    from lakehouse.query.spark import confirm, parsed_plan

    spark.range(1).createOrReplaceTempView("trips")
    tree = parsed_plan(spark, sql)
    with pytest.raises(QueryError, match=r"^query: .* \(as Spark parses it\)"):
        confirm(tree, Checked(kind, None))  # type: ignore[arg-type]


PARSES = [
    "SELECT 1", "SELECT * FROM trips WHERE a = 'x''y' AND b IN (1, 2)",
    "WITH a AS (SELECT * FROM json.`/x`) SELECT * FROM a", "SELECT * FROM trips t JOIN trips u USING (id)",
    "SELECT * FROM trips WHERE EXISTS (SELECT 1 FROM text.`/etc/passwd`)", "SELECT * FROM read_files('/x')",
    "SELECT TRANSFORM(id) USING 'cat' AS (x) FROM trips", "INSERT INTO trips SELECT * FROM trips",
    "CACHE TABLE trips", "SHOW TABLES", "DESCRIBE EXTENDED trips", "EXPLAIN SELECT count(*) FROM trips",
    "SET spark.sql.ansi.enabled = false", "SELECT count(*) OVER (PARTITION BY id ORDER BY id) FROM trips",
    "SELECT * FROM trips LATERAL VIEW explode(array(1, 2)) AS x", "SELECT `a``b` FROM `c``d`",
    "SELECT " + ", ".join(f"c{i}" for i in range(40)) + " FROM trips",
]


@pytest.mark.spark
@pytest.mark.parametrize("sql", PARSES)
def test_sparks_parser_and_explain_print_the_same_parse(spark, sql):
    """A classic session reads Spark's parse from its parser, a Connect session from EXPLAIN
    EXTENDED: the guard must see the same tree either way (and the same error)."""
    import re

    from lakehouse.query.spark import explained_plan, parsed_plan

    spark.range(1).createOrReplaceTempView("trips")

    def ids_out(tree: str) -> str:  # expression ids are numbered anew at each parse
        return re.sub(r"#\d+", "#", tree)

    assert ids_out(parsed_plan(spark, sql)) == ids_out(explained_plan(spark, sql))


@pytest.mark.spark
def test_on_spark_connect_a_querys_parse_comes_from_an_explain_that_plans_no_scan(spark):
    """Spark Connect has no parse-only request: a query is explained as ``SELECT * FROM (query)
    LIMIT 0`` (optimized to an empty relation before any scan is planned), whose parse holds the
    query's own tree, as the classic parser gives it, whole. SHOW, DESCRIBE, EXPLAIN, commands and
    what the parentheses cannot hold are explained as they stand; the guard refuses the same."""
    import re

    from pyspark.sql.connect.session import SparkSession as ConnectSession

    from lakehouse.query.guard import Checked
    from lakehouse.query.spark import confirm, parsed_plan, run_on_views
    from tests.conftest import suite_server

    def ids_out(tree: str) -> list[str]:
        return re.sub(r"#\d+", "#", tree).splitlines()

    remote = ConnectSession.builder.remote(suite_server()).create()
    try:
        remote.range(1).createOrReplaceTempView("trips")
        spark.range(1).createOrReplaceTempView("trips")
        wrapped = []
        for sql in [*PARSES, "SELECT 1;", "SELECT 1 -- a comment", "VALUES (1), (2)", "FROM trips SELECT id",
                    "SELECT * FROM trips ORDER BY id LIMIT 5", "SELECT 1) UNION (SELECT 2"]:
            try:
                own = ids_out(parsed_plan(spark, sql))
            except QueryError:
                own = None
            query = sql.split()[0].upper() in ("SELECT", "WITH", "VALUES", "FROM")
            got = ids_out(parsed_plan(remote, sql, query)) if own is not None else None
            if got and got[0] == "'GlobalLimit 0":
                assert query and got[1:3] == ["+- 'LocalLimit 0", "   +- 'Project [*]"], sql
                assert got[3].replace("'", "") == "      +- SubqueryAlias __auto_generated_subquery_name", sql
                assert [line[12:] for line in got[4:]] == own and got[4][:12] == "         +- ", sql
                wrapped.append(sql)
            else:
                assert got == own, sql
        assert "SELECT 1" in wrapped and "SHOW TABLES" not in wrapped and "SELECT 1;" not in wrapped
        assert "INSERT INTO trips SELECT * FROM trips" not in wrapped and "FROM trips SELECT id" in wrapped
        for sql in ("SELECT * FROM csv.`/x`", "SELECT * FROM read_files('/x')",
                    "SELECT * FROM trips WHERE EXISTS (SELECT 1 FROM text.`/etc/passwd`)",
                    "SELECT TRANSFORM(id) USING 'cat' AS (x) FROM trips", "INSERT INTO trips SELECT * FROM trips"):
            with pytest.raises(QueryError, match=r"^query: .* \(as Spark parses it\)"):
                confirm(parsed_plan(remote, sql, True), Checked("query", None))  # type: ignore[arg-type]
        with pytest.raises(Exception, match="PARSE_SYNTAX_ERROR") as e:
            parsed_plan(remote, "SELEC 1", True)
        assert "LIMIT 0" not in str(e.value)
        # parentheses the wrapper closes parse there, but what runs is the statement as given
        assert "'Union" in "\n".join(ids_out(parsed_plan(remote, "SELECT 1) UNION (SELECT 2", True)))
        with pytest.raises(QueryError):
            run_on_views(remote, "SELECT 1) UNION (SELECT 2")
    finally:
        remote.stop()


@pytest.mark.spark
def test_a_statement_spark_cannot_parse_is_the_same_error_either_way(spark):
    from lakehouse.errors import first_line
    from lakehouse.query.spark import explained_plan, parsed_plan

    for sql in ("SELEC 1", "SELECT (1", "SELECT 'unclosed"):
        with pytest.raises(QueryError) as a:
            parsed_plan(spark, sql)
        try:  # as run_on_views reports a failure of the EXPLAIN path
            explained_plan(spark, sql)
            raise AssertionError(f"{sql!r} parsed")
        except QueryError as e:
            b = str(e)
        except Exception as e:  # noqa: BLE001 - Spark's own exception
            b = f"spark: {first_line(e)}"
        # the same error; the position is the one in the statement as given (EXPLAIN's counts its prefix)
        at = r" \(line \d+, pos \d+\)"
        assert re.sub(at, "", str(a.value)) == re.sub(at, "", b) and b.startswith("spark: [PARSE_SYNTAX_ERROR]"), \
            (str(a.value), b)
    with pytest.raises(QueryError, match=r"\(line 1, pos 0\)"):
        parsed_plan(spark, "SELEC 1")


@pytest.mark.spark
def test_show_explain_and_extended_describe_run_on_spark_and_are_refused_on_duckdb(loaded_repo):
    for sql in ("SHOW TABLES", "DESCRIBE EXTENDED trips", "EXPLAIN SELECT count(*) FROM trips"):
        assert loaded_repo.lh.query(sql, "spark").num_rows > 0
        with pytest.raises(QueryError, match=r"^duckdb: (SHOW|DESCRIBE|EXPLAIN) is refused"):
            loaded_repo.lh.query(sql, "duckdb")


@pytest.mark.spark
def test_verify_has_a_check_per_saved_query(loaded_repo):
    bad = loaded_repo.root / "queries" / "zz_approx.sql"
    bad.write_text("SELECT percentile_approx(duration_s, 0.5) AS p FROM trips\n")
    try:
        checks = {c.name: c for c in loaded_repo.lh.verify() if c.table == "queries"}
        only_pings = [c for c in loaded_repo.lh.verify("driver_pings") if c.table == "queries"]
    finally:
        bad.unlink()
    names = [q.path.name for q in loaded_repo.lh.saved_queries()]
    assert all(any(n in name for name in checks) for n in names)
    failing = [c for c in checks.values() if not c.ok]
    assert [c.name for c in failing] == [
        "saved query zz_approx.sql gives the same answer on both engines"]
    assert "percentile_approx() is refused" in failing[0].detail
    assert only_pings == []  # no saved query reads driver_pings


@pytest.mark.spark
@pytest.mark.parametrize("engine", ["spark", "duckdb"])
def test_a_query_registers_only_the_tables_it_names_and_always_reads_them_fresh(project, spark, engine, monkeypatch):
    """A query pins and registers the views of the tables it names (and the watermarks view only
    when it reads it): another table's log is not even opened (here: broken, and the query still
    answers). A table whose view an earlier query left, on older versions, is never read stale,
    even when the guard's parse misses a name Spark's parse has (then every view is registered)."""
    import shutil

    from lakehouse.query import guard
    from tests.conftest import CLICKS

    project.table(TRIPS_SMALL).create("trips")
    project.table(CLICKS).create("clicks")
    rows = [[f"t{i}", 1, 0, 1.0, 1.0, "1.00", "true", "", "2026-11-20T10:00:00Z"] for i in range(3)]
    project.lh.load("trips", [project.csv("a.csv", HEADER_SMALL, rows)])
    project.lh.load("clicks", [project.csv("c.csv", ["user_id", "url", "at"], [[1, "/a", "2026-11-20T10:00:00Z"]])])
    q = project.lh.query
    both = "SELECT (SELECT count(*) FROM trips) AS t, (SELECT count(*) FROM clicks) AS c"
    assert q(both, engine).to_pylist() == [{"t": 3, "c": 1}]
    # clicks changes; a query of trips alone leaves clicks' view as the first query made it
    project.lh.load("clicks", [project.csv("c2.csv", ["user_id", "url", "at"], [[2, "/b", "2026-11-20T11:00:00Z"]])])
    assert q("SELECT count(*) AS n FROM trips", engine).to_pylist() == [{"n": 3}]
    assert q("WITH x AS (SELECT * FROM clicks) SELECT count(*) AS n FROM x", engine).to_pylist() == [{"n": 2}]
    # the guard's parse misses clicks: Spark's parse names it, every view is registered anew
    project.lh.load("clicks", [project.csv("c3.csv", ["user_id", "url", "at"], [[3, "/c", "2026-11-20T12:00:00Z"]])])
    if engine == "spark":
        real = guard.names_read
        monkeypatch.setattr(guard, "names_read", lambda checked: real(checked) - {"clicks"})
        assert q("SELECT count(*) AS n FROM clicks", engine).to_pylist() == [{"n": 3}]
        monkeypatch.undo()
        # a real one: sqlglot reads `(TABLE clicks)` as a table named TABLE; Spark's parse names clicks
        project.lh.load("clicks", [project.csv("c4.csv", ["user_id", "url", "at"], [[4, "/d", "2026-11-20T13:00:00Z"]])])
        assert q("SELECT count(*) AS n FROM (TABLE clicks)", engine).to_pylist() == [{"n": 4}]
        project.lh.load("clicks", [project.csv("c5.csv", ["user_id", "url", "at"], [[5, "/e", "2026-11-20T14:00:00Z"]])])
        assert q("SELECT count(*) AS n FROM trips", engine).to_pylist() == [{"n": 3}]
        assert q("EXPLAIN SELECT * FROM (TABLE clicks)", engine).num_rows == 1
        assert q("SELECT count(*) AS n FROM (TABLE clicks)", engine).to_pylist() == [{"n": 5}]
    # a broken log of clicks does not stop a query of trips; a query of clicks names it
    log = project.lh.paths("clicks").live.replace("file://", "") + "/_delta_log"
    shutil.move(log, log + ".away")
    try:
        assert q("SELECT count(*) AS n FROM trips", engine).to_pylist() == [{"n": 3}]
        with pytest.raises(Exception, match="clicks|Delta"):
            q("SELECT count(*) AS n FROM clicks", engine)
    finally:
        shutil.move(log + ".away", log)
    assert q(both, engine).to_pylist() == [{"t": 3, "c": 5 if engine == "spark" else 3}]


@pytest.mark.parametrize("sql,names", [
    ("SELECT * FROM trips", {"trips"}),
    ("WITH x AS (SELECT * FROM Trips) SELECT * FROM x JOIN clicks USING (k)", {"trips", "x", "clicks"}),
    ("SELECT * FROM (TABLE clicks)", {"table"}),  # sqlglot's misreading: Spark's parse names clicks
    ("SELECT (SELECT max(k) FROM `clicks`) FROM trips WHERE k IN (SELECT k FROM lakehouse_watermarks)",
     {"trips", "clicks", "lakehouse_watermarks"}),
    ("DESCRIBE trips", None), ("DESC TABLE EXTENDED trips", None), ("EXPLAIN SELECT * FROM (TABLE clicks)", None),
    ("SHOW TABLES", None),
])
def test_a_query_names_its_tables_and_anything_else_every_view(sql, names):
    """What ``query`` registers: a query's every table name (CTE names too: harmless); DESCRIBE,
    EXPLAIN and SHOW every view (Spark's parse does not show their targets as relations)."""
    from lakehouse.query.guard import names_read

    assert names_read(check(sql)) == names
