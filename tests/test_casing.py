"""upper() and lower() on DuckDB give Spark's answer on every Unicode code point.

Spark 4 maps case with ICU's full mapping (ß -> SS, İ -> i̇, ǰ -> J̌, ligatures, Greek with
ypogegrammeni, and a newer Unicode than DuckDB's); DuckDB's upper() and lower() map one character
to one. ``lakehouse.query.dialect.casing`` holds every character where they differ, generated from
both engines; here every code point (but the surrogates) is run through both engines as the
reader translates ``upper``/``lower``, 64 to a row, and the answers compared: an upgrade of either
engine that changes a mapping fails this test. The capital sigma, whose lower case depends on its
neighbours, is refused at run time (and is tested apart)."""

from __future__ import annotations

import pytest
import sqlglot

from lakehouse.errors import QueryError
from lakehouse.query.dialect.casing import LOWER, SIGMA, UPPER
from lakehouse.query.dialect.translate import Translator

pytestmark = pytest.mark.spark

WIDTH = 64


def _chunks() -> list[tuple[int, str]]:
    cps = [c for c in range(1, 0x110000) if not 0xD800 <= c <= 0xDFFF and chr(c) != SIGMA]
    return [(i, "".join(chr(c) for c in cps[i:i + WIDTH])) for i in range(0, len(cps), WIDTH)]


def _duckdb(sql: str, rows: list[tuple[int, str]]) -> list[tuple[int, str, str]]:
    import pyarrow as pa

    from lakehouse.query.duckdb import connect

    tr = Translator({"chars": [("id", "int"), ("s", "string")]}).translate(sqlglot.parse_one(sql, read="spark"))
    con = connect(delta=False)
    con.register("chars", pa.table({"id": [r[0] for r in rows], "s": [r[1] for r in rows]}))
    return [tuple(r) for r in con.execute(tr.sql).fetchall()]


def test_upper_and_lower_of_every_code_point(spark):
    rows = _chunks()
    sql = "SELECT id, upper(s) AS u, lower(s) AS l FROM chars ORDER BY id"
    spark.createDataFrame(rows, "id int, s string").createOrReplaceTempView("chars")
    want = [(r.id, r.u, r.l) for r in spark.sql(sql).collect()]
    got = _duckdb(sql, rows)
    assert len(got) == len(want) == len(rows)
    bad = [(w[0], rows[i][1], w[1:], g[1:]) for i, (w, g) in enumerate(zip(want, got)) if w != g]
    assert bad == [], f"{len(bad)} rows differ, first: {bad[0]}"


def test_the_table_holds_only_characters_duckdb_maps_otherwise(spark):
    import duckdb

    con = duckdb.connect()
    for table, fn in ((UPPER, "upper"), (LOWER, "lower")):
        for ch, mapped in table.items():
            assert con.execute(f"SELECT {fn}(?)", [ch]).fetchone()[0] != mapped, (fn, ch)


def test_lower_of_a_capital_sigma_is_refused_at_run_time(spark):
    rows = [(1, "ΟΔΟΣ"), (2, "plain")]
    with pytest.raises(Exception, match="final sigma"):
        _duckdb("SELECT id, lower(s) AS l FROM chars ORDER BY id", rows)
    assert _duckdb("SELECT id, upper(s) AS u FROM chars ORDER BY id", rows) == [(1, "ΟΔΟΣ"), (2, "PLAIN")]


def test_the_refusal_names_the_function_and_says_to_use_spark(tmp_path, spark):
    from tests.conftest import Project

    p = Project(tmp_path / "proj")
    p.table("""
        name: words
        columns:
          - {name: w, type: string}
          - {name: at, type: timestamp, nullable: false}
        event_time: at
    """).create("words")
    p.lh.load("words", [p.csv("w.csv", ["w", "at"], [["ΟΔΟΣ", "2026-11-20T00:00:00Z"]])])
    assert p.lh.query("SELECT lower(w) AS l FROM words", "spark").to_pylist() == [{"l": "οδος"}]
    with pytest.raises(QueryError, match=r"^duckdb: .*lower\(\) of a string with Σ is refused.*--engine spark"):
        p.lh.query("SELECT lower(w) AS l FROM words", "duckdb")
