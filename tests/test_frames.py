"""The split view in the user's own sessions: ``Lakehouse.frame`` (a lazy Spark DataFrame),
``register`` (temporary views of a Spark session), ``register_duckdb`` (views of a user's DuckDB
connection), and ``lakehouse.open(spark=...)`` taking a session the user built.

On this repository's project with generated trips ingested and archived up to a cutoff in the
middle of the data: every saved query answers through each of them as ``query`` answers it; a
day filter on a frame prunes the archive's days (the plan's partition filters); a session without
Delta Lake, or not on UTC, is refused in one line naming what it lacks, before anything runs.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import io
import os
import subprocess
import sys
import textwrap

import pytest

from lakehouse.errors import ConfigError
from lakehouse.query.compare import compare_json

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def archived_repo(tmp_path_factory, spark):
    """This repository's project, generated trips ingested, archived up to 2026-11-19 12:00."""
    from lakehouse.demo import generate
    from tests.conftest import copy_of_repo

    p = copy_of_repo(tmp_path_factory.mktemp("frames") / "repo")
    root = p.root
    p.lh.migrate()
    generate(root / "in", rows=2000, days=3, end=dt.date(2026, 11, 20))
    p.lh.ingest("trips", str(root / "in"), drain=True)
    done = p.lh.archive("trips", now=dt.datetime(2026, 11, 20, 12, tzinfo=dt.UTC))
    assert done.rows_archived > 0
    return p


def test_a_frame_is_the_split_view_and_stays_lazy(archived_repo):
    p = archived_repo
    df = p.lh.frame("trips")
    assert df.columns == p.lh.definition("trips").visible_columns
    want = p.lh.query("SELECT count(*) AS n, sum(fare_total) AS f FROM trips", "spark", runs=False)
    from pyspark.sql import functions as F

    got = df.agg(F.count(F.lit(1)).alias("n"), F.sum("fare_total").alias("f")).toArrow()
    assert compare_json(want, got).equal


def test_a_day_filter_on_a_frame_prunes_the_archive_days(archived_repo):
    from pyspark.sql import functions as F

    df = archived_repo.lh.frame("trips").where(F.col("event_date") == F.lit("2026-11-18").cast("date"))
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        df.explain(mode="formatted")
    plan = out.getvalue()
    archive = plan.split("trips/archive]", 1)  # the archive's scan: its days pruned by the filter
    assert len(archive) == 2 and "(event_date" in archive[1].split("PartitionFilters: [", 1)[1].split("]", 1)[0], plan
    want = archived_repo.lh.query("SELECT count(*) AS n FROM trips WHERE event_date = DATE '2026-11-18'",
                                  "duckdb", runs=False).column("n")[0].as_py()
    assert df.count() == want > 0


def test_saved_queries_answer_through_registered_views_as_query_does(archived_repo, spark):
    import duckdb

    from lakehouse.query import duckdb as duck
    from lakehouse.query import sources

    p = archived_repo
    names = p.lh.register(spark)
    assert "trips" in names and "lakehouse_watermarks" in names
    con = duckdb.connect()
    assert p.lh.register_duckdb(con) == names
    tables = sources(p.settings.warehouse, p.lh.definitions())
    for q in p.lh.saved_queries():
        want = p.lh.query(q.sql, "spark", runs=False)
        same = compare_json(want, spark.sql(q.sql).toArrow(), "query", "register")
        assert same.equal, f"{q.path.name} on the registered Spark views: {same.detail}"
        duck_sql = duck.translate(tables, q.sql).sql
        from lakehouse.query.dialect.conform import conform

        got = conform(con.execute(duck_sql).fetch_arrow_table(), duck.translate(tables, q.sql))
        same = compare_json(want, got, "query", "register_duckdb")
        assert same.equal, f"{q.path.name} on the user's DuckDB connection: {same.detail}"
    con.close()


def test_a_session_not_on_utc_is_refused_in_one_line(archived_repo, spark):
    other = spark.newSession()
    other.conf.set("spark.sql.session.timeZone", "Europe/Paris")
    with pytest.raises(ConfigError) as e:
        archived_repo.lh.register(other)
    assert "spark.sql.session.timeZone is Europe/Paris, not UTC" in str(e.value) and "\n" not in str(e.value)
    from lakehouse.spark.session import adopt, current

    with pytest.raises(ConfigError, match="timeZone"):
        adopt(other)
    assert current() is not other


USER_SESSION = """
import sys, lakehouse, lakehouse.errors
from pyspark.sql import SparkSession
from lakehouse.spark.session import delta_jars
builder = SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
if sys.argv[3] == "delta":
    builder = (builder.config("spark.jars", ",".join(delta_jars()))
               .config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
               .config("spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog")
               .config("spark.sql.session.timeZone", "UTC"))
users = builder.getOrCreate()
try:
    lh = lakehouse.open(sys.argv[1], sys.argv[2], spark=users if sys.argv[4] == "given" else None)
    n = lh.frame("trips").count()
    print("rows", n, lh.spark() is users)
except lakehouse.errors.LakehouseError as e:
    print("error", e)
from lakehouse.spark.session import stop_spark
stop_spark()
print("alive", users.range(3).count())
"""


@pytest.mark.slow
@pytest.mark.parametrize("kind,how", [("delta", "given"), ("delta", "active"), ("plain", "given")])
def test_the_users_own_session_is_used_checked_and_never_stopped(archived_repo, tmp_path, kind, how):
    """A notebook's session (given, or active in the process) runs lakehouse and outlives it;
    one without Delta Lake is refused in one line naming the settings, and also outlives it."""
    script = tmp_path / "user.py"
    script.write_text(textwrap.dedent(USER_SESSION))
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAKEHOUSE_")}
    out = subprocess.run([sys.executable, str(script), str(archived_repo.root), archived_repo.settings.warehouse,
                          kind, how], capture_output=True, text=True, timeout=300, env=env)
    assert out.returncode == 0, out.stderr[-2000:]
    lines = out.stdout.strip().splitlines()
    assert lines[-1] == "alive 3", out.stdout
    if kind == "delta":
        want = archived_repo.lh.query("SELECT count(*) AS n FROM trips", "duckdb").column("n")[0].as_py()
        assert lines[-2] == f"rows {want} True", out.stdout
    else:
        assert lines[-2].startswith("error the SparkSession given cannot run lakehouse: "), out.stdout
        assert "spark.sql.extensions lacks io.delta.sql.DeltaSparkSessionExtension" in lines[-2]
        assert "spark.sql.catalog.spark_catalog is not org.apache.spark.sql.delta.catalog.DeltaCatalog" in lines[-2]
