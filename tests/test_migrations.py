"""Migrations on real Spark + Delta: order, idempotence, checksums, failure and rollback, drift."""

from __future__ import annotations

import os
import sys

import pytest

from lakehouse.errors import MigrationError
from lakehouse.migrations import discover, read_history
from lakehouse.physical import describe, drift
from tests.conftest import CLICKS, TRIPS_SMALL, cli

pytestmark = pytest.mark.spark


def test_applies_in_numeric_order_once(project, spark):
    project.table(TRIPS_SMALL).table(CLICKS)
    # file names sort differently from numbers only when numbers are compared as numbers
    project.migration("0002_create_clicks.py", """
        def upgrade(ctx):
            assert ctx.paths("trips").live  # 0001 ran first
            from lakehouse.physical import describe
            assert describe(ctx.paths("trips").live) is not None, "0001 must run before 0002"
            ctx.create_table("clicks")
    """)
    project.migration("0001_create_trips.py", "def upgrade(ctx):\n    ctx.create_table('trips')\n")
    r = project.lh.migrate()
    assert r.applied == ["0001_create_trips", "0002_create_clicks"] and r.drift == []
    hist = read_history(project.settings.warehouse)
    assert [h.name for h in hist] == r.applied
    assert all(len(h.checksum) == 64 for h in hist)
    again = project.lh.migrate()
    assert again.applied == [] and again.drift == []
    assert len(read_history(project.settings.warehouse)) == 2
    st = project.lh.migration_status()
    assert [a.name for a in st.applied] == r.applied and st.pending == []
    for t in ("trips", "clicks"):
        p = project.lh.paths(t)
        assert describe(p.live).partition_columns == ("event_date",)
        assert describe(p.archive) is not None and describe(p.rejects) is not None


def test_changed_applied_migration_is_refused(project, spark):
    project.table(TRIPS_SMALL).create("trips")
    path = project.root / "migrations" / "0001_create_trips.py"
    path.write_text(path.read_text() + "# edited\n")
    with pytest.raises(MigrationError, match=r"migrations/0001_create_trips.py changed after it was applied"):
        project.lh.migrate()
    assert project.lh.migration_status().changed


def test_failed_migration_is_not_recorded_and_rolled_back(project, spark):
    project.table(TRIPS_SMALL).table(CLICKS).create("trips")
    before = describe(project.lh.paths("trips").live).version
    project.migration("0002_broken.py", """
        def upgrade(ctx):
            ctx.create_table("clicks")
            ctx.add_columns("trips", [{"name": "tip", "type": "double"}])
            raise RuntimeError("boom in the middle")
    """)
    with pytest.raises(MigrationError) as e:
        project.lh.migrate()
    msg = str(e.value)
    assert "migration 0002_broken failed: RuntimeError: boom in the middle" in msg
    assert "rolled back" in msg
    assert [h.name for h in read_history(project.settings.warehouse)] == ["0001_create_trips"]
    assert describe(project.lh.paths("clicks").live) is None  # created table removed
    trips_live = describe(project.lh.paths("trips").live)
    assert trips_live.column("tip") is None  # restored
    assert trips_live.version > before  # by a RESTORE commit, history kept
    assert [m.name for m in project.lh.migration_status().pending] == ["0002_broken"]


def test_add_columns_and_set_archive_evolve_live_and_archive(project, spark):
    project.table(TRIPS_SMALL).create("trips")
    new_yaml = TRIPS_SMALL.replace(
        "  - {name: event_time", "  - {name: tip, type: double}\n  - {name: note, type: string}\n  - {name: event_time"
    ).replace("delay: 24h", "delay: 36h").replace("sort_columns: [city_id, status, fx_rate]", "sort_columns: [city_id, status]")
    project.table(new_yaml)
    # before the migration: drift is reported
    problems = drift(project.lh.definition("trips"), project.lh.paths("trips"))
    assert any("column tip (double) is in tables/trips.yaml but not in the table" in p for p in problems)
    assert any("lakehouse.archive.delay" in p for p in problems)
    project.migration("0002_tip_and_archive.py", """
        def upgrade(ctx):
            ctx.add_columns("trips", [{"name": "tip", "type": "double"}, {"name": "note", "type": "string"}])
            ctx.add_columns("trips", [{"name": "tip", "type": "double"}])  # already there: skipped
            ctx.set_archive("trips", delay="36h", sort_columns=["city_id", "status"])
    """)
    r = project.lh.migrate()
    assert r.applied == ["0002_tip_and_archive"] and r.drift == []
    for part in ("live", "archive"):
        t = describe(getattr(project.lh.paths("trips"), part))
        assert t.column("tip").type == "double" and t.column("note").type == "string"
        assert t.properties["lakehouse.archive.delay"] == "36h"
        assert t.properties["lakehouse.archive.sort_columns"] == "city_id,status"
    # and loading uses the new column
    f = project.csv("a.csv", ["trip_id", "event_time", "tip"], [["t1", "2026-11-20T10:00:00Z", "1.5"]])
    project.lh.load("trips", [f])
    assert project.live("trips")[0]["tip"] == 1.5


def test_bad_migration_calls_fail_clearly(project, spark):
    project.table(TRIPS_SMALL).create("trips")
    project.migration("0002_bad_type.py", """
        def upgrade(ctx):
            ctx.add_columns("trips", [{"name": "status", "type": "string"}])
    """)
    with pytest.raises(MigrationError, match=r"0002_bad_type failed: add_columns\('trips'\): column status exists as int, not string"):
        project.lh.migrate()
    (project.root / "migrations" / "0002_bad_type.py").unlink()
    project.migration("0002_unknown.py", "def upgrade(ctx):\n    ctx.create_table('nope')\n")
    with pytest.raises(MigrationError, match=r"table 'nope' is not defined"):
        project.lh.migrate()


def test_drift_after_migrate_is_reported(project, spark):
    project.table(TRIPS_SMALL).create("trips")
    project.table(TRIPS_SMALL.replace("{name: status,     type: int}", "{name: status,     type: long}"))
    r = project.lh.migrate()
    assert r.applied == []
    assert r.drift == ["trips/live: column status is int in the table but long in tables/trips.yaml",
                       "trips/archive: column status is int in the table but long in tables/trips.yaml"]
    project.table(CLICKS)
    r = project.lh.migrate()
    assert any("clicks/live: defined in tables/clicks.yaml but not created" in d for d in r.drift)


def test_discovery_rejects_bad_names_and_duplicates(tmp_path):
    d = tmp_path / "migrations"
    d.mkdir()
    (d / "0001_a.py").write_text("def upgrade(ctx): pass\n")
    (d / "__init__.py").write_text("")
    assert [m.name for m in discover(d)] == ["0001_a"]
    (d / "0001_b.py").write_text("def upgrade(ctx): pass\n")
    with pytest.raises(MigrationError, match="number 0001 is also used"):
        discover(d)
    (d / "0001_b.py").unlink()
    (d / "1_short.py").write_text("")
    with pytest.raises(MigrationError, match=r"migrations/1_short.py: bad file name"):
        discover(d)


def test_a_migration_is_run_from_its_source_as_it_is_now_and_its_import_errors_are_one_line(tmp_path, monkeypatch):
    """Loaded from the file's bytes at the time, whatever Python would cache: a version rewritten
    in the same second with the same size is the one run, and no __pycache__ lands in the project;
    an import that fails is one line naming the file and the error."""
    from lakehouse.migrations import _load_upgrade

    monkeypatch.setattr(sys, "dont_write_bytecode", False)  # as Python runs by default
    d = tmp_path / "migrations"
    d.mkdir()
    path = d / "0001_a.py"
    for value in ("1", "2", "3"):  # same size, same second, same mtime (pinned)
        path.write_text(f"def upgrade(ctx):\n    ctx.append({value})\n")
        os.utime(path, (1_700_000_000, 1_700_000_000))
        got: list[int] = []
        _load_upgrade(discover(d)[0])(got)  # type: ignore[arg-type]
        assert got == [int(value)]
    assert not (d / "__pycache__").exists()
    for body, error in (("def upgrade(ctx):\n  return (\n", "SyntaxError"),
                        ("import no_such_module_here\n", "ModuleNotFoundError: No module named 'no_such_module_here'"),
                        ("raise ValueError('bad setting')\ndef upgrade(ctx): pass\n", "ValueError: bad setting")):
        path.write_text(body)
        with pytest.raises(MigrationError) as e:
            _load_upgrade(discover(d)[0])
        assert str(e.value).startswith(f"migrations/0001_a.py: failed to import: {error}"), str(e.value)
        assert "\n" not in str(e.value)


def test_migration_without_upgrade_is_refused(project, spark):
    project.migration("0001_nothing.py", "X = 1\n")
    with pytest.raises(MigrationError, match=r"migrations/0001_nothing.py: defines no upgrade\(ctx\) function"):
        project.lh.migrate()
    assert read_history(project.settings.warehouse) == []


def test_rollback_undoes_only_the_migrations_own_changes(project, spark):
    """A load commits while the migration runs: the rollback of the failed migration drops its
    column and puts its property back, and keeps the loaded rows (a RESTORE would drop them)."""
    project.table(TRIPS_SMALL).create("trips")
    p = project.lh.paths("trips")
    before_props = describe(p.live).properties
    project.migration("0002_broken.py", f"""
        def upgrade(ctx):
            ctx.add_columns("trips", [{{"name": "tip", "type": "double"}}])
            ctx.set_archive("trips", delay="36h")
            # another writer (a load in another process) commits rows meanwhile
            ctx.spark.sql(
                "SELECT 'm' || id AS trip_id, CAST(id AS INT) AS city_id, "
                "TIMESTAMP'2026-11-20 10:00:00' AS event_time, 'other-load' AS _lh_load, "
                "DATE'2026-11-20' AS event_date FROM range(1, 3)"
            ).write.format("delta").mode("append").save({p.live!r})
            raise RuntimeError("boom after a load committed")
    """)
    with pytest.raises(MigrationError, match="boom after a load committed; its changes were rolled back"):
        project.lh.migrate()
    for path in (p.live, p.archive):
        t = describe(path)
        assert t.column("tip") is None
        assert t.properties.get("lakehouse.archive.delay") == before_props.get("lakehouse.archive.delay")
    rows = project.live("trips", order_by="trip_id")
    assert [r["trip_id"] for r in rows] == ["m1", "m2"] and "tip" not in rows[0]
    assert describe(p.live).version == 5  # create, add columns, properties, the load; the undo: columns, properties
    assert project.lh.query("SELECT count(*) AS n FROM trips", "spark").to_pylist() == [{"n": 2}]
    assert drift(project.lh.definition("trips"), p) == []
    assert [h.name for h in read_history(project.settings.warehouse)] == ["0001_create_trips"]



def test_a_failed_migration_is_undone_through_a_connect_server(project, spark):
    """The same undo from a command on a Spark Connect server (no JVM API in reach): a column the
    migration added goes, the property it changed is put back, and
    the next migrate, with the migration fixed, applies it."""
    project.table(TRIPS_SMALL).create("trips")
    p = project.lh.paths("trips")
    before = describe(p.live).properties
    project.migration("0002_broken.py", """
        def upgrade(ctx):
            ctx.add_columns("trips", [{"name": "tip", "type": "double"}, {"name": "note", "type": "string"}])
            ctx.set_archive("trips", delay="36h")
            ctx.sql(f"ALTER TABLE delta.`{ctx.paths('trips').live}` SET TBLPROPERTIES ('team.owner' = 'ops')")
            raise RuntimeError("boom")
    """)
    proc = cli(project, "migrate")
    assert proc.returncode == 1 and "boom; its changes were rolled back" in proc.stderr, proc.stderr
    for path in (p.live, p.archive):
        t = describe(path)
        assert t.column("tip") is None and t.column("note") is None
        assert t.properties.get("lakehouse.archive.delay") == before.get("lakehouse.archive.delay")
    # a property the migration set through ctx.sql is its own business (not rolled back)
    assert describe(p.live).properties.get("team.owner") == "ops"
    assert drift(project.lh.definition("trips"), p) == []
    project.migration("0002_broken.py", "def upgrade(ctx):\n    pass\n")
    proc = cli(project, "migrate")
    assert proc.returncode == 0, proc.stderr
    assert [h.name for h in read_history(project.settings.warehouse)][-1] == "0002_broken"


def test_two_migrates_of_one_warehouse_at_once_apply_each_migration_once(project, spark):
    """Two ``lakehouse migrate`` processes started together: one applies the migrations while the
    other waits for its lock, then finds nothing pending; the history holds each migration once."""
    import json

    project.table(TRIPS_SMALL).table(CLICKS)
    project.migration("0001_create_trips.py", "import time\n\ndef upgrade(ctx):\n    time.sleep(1)\n"
                      "    ctx.create_table('trips')\n")
    project.migration("0002_create_clicks.py", "def upgrade(ctx):\n    ctx.create_table('clicks')\n")
    runs = [cli(project, "--format", "json", "migrate", background=True) for _ in range(2)]
    outs = [r.communicate(timeout=600) for r in runs]
    assert [r.returncode for r in runs] == [0, 0], [err[-1500:] for _, err in outs]
    applied = sorted(json.loads(out)["applied"] for out, _ in outs)
    assert applied == [[], ["0001_create_trips", "0002_create_clicks"]]
    assert [h.name for h in read_history(project.settings.warehouse)] == applied[1]


def test_a_warehouse_the_suite_copies_instead_of_migrating_again_reads_as_a_fresh_migrate(spark, tmp_path):
    """``Project.create`` (tests/conftest.py) copies a warehouse its process migrated before for the
    same project: each part has the same schema, partitioning and properties, the history the same
    migrations, no drift, and its commits are dated now (Delta dates a commit by its file)."""
    import dataclasses
    import time
    from pathlib import Path

    from tests.conftest import _MIGRATED, Project

    first = Project(tmp_path / "first").table(TRIPS_SMALL).create("trips")
    started = time.time()
    second = Project(tmp_path / "second").table(TRIPS_SMALL).create("trips")
    assert second._migrated_key() in _MIGRATED  # a copy
    for part in ("live", "archive", "rejects"):
        a, b = (getattr(p.lh.paths("trips"), part) for p in (first, second))
        copied, made = describe(b), describe(a)
        assert copied is not None and dataclasses.replace(copied, path=a) == made
        assert all(f.stat().st_mtime >= started - 1 for f in (Path(b) / "_delta_log").glob("*.json"))
    assert [h.name for h in read_history(second.settings.warehouse)] == ["0001_create_trips"]
    assert drift(second.lh.definition("trips"), second.lh.paths("trips")) == []
    assert second.lh.query("SELECT count(*) AS n FROM trips", "spark").to_pylist() == [{"n": 0}]
