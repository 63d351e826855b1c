"""``lakehouse delete --purge``: afterwards no file under the warehouse holds a deleted key or
value. The victims' rows are first put everywhere a row's bytes can be: archive days (data files,
vector files), live above and below the cutoff, a producer's staged rows (released ones too), a
reject's record, an earlier archive run's superseded files, the Delta logs (statistics, a
DELETE's predicate), quality results' samples and the Data Docs pages that show them; a scan
that reads every file (Parquet and Arrow files decoded, everything else as bytes) finds them
before. After the purge it finds none; ``query --as-of`` a moment before the purge is refused in
one line naming it; the table reads and checks as before without the victims; the audit shows
the delete purged; a later purge alone has nothing to do."""

from __future__ import annotations

import datetime as dt
import json
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lakehouse.errors import InputError, QueryError
from tests.conftest import Project, cli_in_process
from tests.test_delete import COLUMNS, STREAMED, Clock

pytestmark = pytest.mark.spark
UTC = dt.timezone.utc
CHECKED = STREAMED + """quality:
  - expect_column_values_to_be_between: {column: price, min_value: 0, max_value: 1000}
"""
VICTIM = "vic-zq"
PRICE = 4242.125
"""The victims' price: a value no other row has (and over the quality check's maximum)."""


def victim(n: int, at: str) -> list[Any]:
    return [f"{VICTIM}{n:03d}", 5, PRICE, at]


def holders(root: Path) -> dict[str, str]:
    """Files under ``root`` holding a victim's key or price: read as bytes, and decoded when they
    are Parquet or Arrow."""
    needles = (VICTIM, repr(PRICE))
    found: dict[str, str] = {}
    for f in sorted(root.rglob("*")):
        if not f.is_file():
            continue
        texts = [f.read_bytes().decode("latin-1")]
        for read in (lambda p: pq.read_table(p), lambda p: pa.ipc.open_file(p).read_all(),
                     lambda p: pa.ipc.open_stream(p).read_all()):
            try:
                texts.append(str(read(str(f)).to_pylist()))
                break
            except Exception:  # noqa: BLE001 - not that format
                continue
        hit = next((n for n in needles for t in texts if n in t), None)
        if hit is not None:
            found[str(f.relative_to(root))] = hit
    return found


@pytest.fixture
def victims(spark: Any, project: Project) -> Project:
    project.table(CHECKED)
    project.create("sales")
    lh = project.lh
    rows = [[f"s{i}", i % 5, float(i), f"2026-11-{16 + i % 4:02d}T{i % 12:02d}:00:00Z"] for i in range(60)]
    lh.load("sales", [project.csv("a.csv", COLUMNS, rows + [victim(1, "2026-11-16T05:00:00Z"),
                                                             victim(2, "2026-11-17T06:00:00Z")])])
    lh.archive("sales", now=dt.datetime(2026, 11, 19, 12, tzinfo=UTC))  # 16, 17 archived
    lh.load("sales", [project.csv("b.csv", COLUMNS, [victim(3, "2026-11-18T07:00:00Z"),
                                                     ["s900", 1, 1.0, "2026-11-18T08:00:00Z"]])])
    lh.archive("sales", now=dt.datetime(2026, 11, 20, 12, tzinfo=UTC))  # 18 archived: 16, 17's files stay
    lh.load("sales", [project.csv("c.csv", COLUMNS, [victim(4, "2026-11-20T20:00:00Z"),  # live
                                                     victim(5, "2026-11-17T09:00:00Z"),  # live below the cutoff
                                                     ["r1", 2, "cheap", "2026-11-20T01:00:00Z"],
                                                     [f"{VICTIM}006", 2, "dear", "2026-11-20T01:00:00Z"]])])
    clock = Clock()
    t = lh.table("sales")
    slow, fast = t.producer("slow", clock=clock), t.producer("fast", clock=clock)
    slow.attach("2026-11-20T22:00:00Z")
    fast.attach("2026-11-20T21:00:00Z")
    fast.insert([{"id": f"{VICTIM}007", "shop": 5, "price": PRICE, "at": "2026-11-20T21:30:00Z"},  # released
                 {"id": f"{VICTIM}008", "shop": 5, "price": PRICE, "at": "2026-11-20T23:00:00Z"},  # staged
                 {"id": "p1", "shop": 1, "price": 2.0, "at": "2026-11-20T23:10:00Z"}])
    assert t.stream()["staged"] == 2
    rep = lh.check("sales")
    assert not rep.ok  # the victims' price is over the check's maximum: their values are in the samples
    return project


def test_after_a_purge_no_file_holds_a_deleted_key_or_value(victims: Project, tmp_path: Path) -> None:
    p = victims
    lh = p.lh
    warehouse = Path(p.settings.warehouse)
    before = holders(warehouse)
    kinds = {"_delta_log", "_quality/results", "_quality/gx", "_quality/docs", "vectors", "_staging",
             "event_date=2026-11-16", "live/event_date=2026-11-20"}
    assert all(any(k in f for f in before) for k in kinds), sorted(before)  # the scan sees every kind of copy
    moment = dt.datetime.now(UTC)
    time.sleep(1.1)
    keys = tmp_path / "victims.txt"
    keys.write_text("\n".join(f"{VICTIM}{n:03d}" for n in range(1, 9)) + "\n")
    run = cli_in_process(p, "delete", "sales", "--keys", str(keys), "--purge")
    assert run.returncode == 0, run.stderr
    assert "erasure 1 (--keys (8 key(s), sha256" in run.stdout and "purged up to erasure 1: live" in run.stdout
    [e] = lh.erasures("sales")
    assert (e.rows_archive, e.rows_live, e.rows_staged, e.rows_rejects) == (3, 3, 1, 1), e
    assert holders(warehouse) == {}

    with pytest.raises(QueryError, match="before the purge of erasure 1") as err:
        lh.query("SELECT count(*) FROM sales", as_of=moment)
    assert "\n" not in str(err.value)
    run = cli_in_process(p, "query", "SELECT count(*) AS n FROM sales", "--as-of", moment.isoformat())
    assert run.returncode == 1 and "before the purge of erasure 1" in run.stderr
    assert len(run.stderr.strip().splitlines()) == 1

    ids = lh.query("SELECT id FROM sales ORDER BY id", engine="duckdb").column("id").to_pylist()
    assert sorted(ids) == sorted([f"s{i}" for i in range(60)] + ["s900"])  # p1 still waits in staging
    bad = [c for c in lh.verify("sales") if not c.ok]
    assert not bad, bad
    assert lh.check("sales").ok  # no victim left to fail the price check
    [e] = lh.erasures("sales")
    assert e.purged and e.purged_at is not None
    with pytest.raises(InputError, match="no delete to purge"):
        lh.delete("sales", purge=True)
    bad = cli_in_process(p, "delete", "sales", "--keys", str(keys), "--purge", "--dry-run")
    assert bad.returncode == 1 and "without --purge" in bad.stderr
    doc = json.loads(cli_in_process(p, "delete", "--history", "--format", "json").stdout)
    assert doc[0]["purged"] is True


def test_the_vacuum_job_purges_a_delete_once_it_is_older_than_the_retention(victims: Project, tmp_path: Path) -> None:
    p = victims
    lh = p.lh
    warehouse = Path(p.settings.warehouse)
    keys = tmp_path / "victims.txt"
    keys.write_text("\n".join(f"{VICTIM}{n:03d}" for n in range(1, 9)) + "\n")
    res = lh.delete("sales", keys=str(keys))
    assert res.purged is None and res.rows == 8
    left = holders(warehouse)
    assert any("_delta_log" in f for f in left) and any("_quality" in f for f in left), left  # not purged yet
    plan = lh.vacuum("sales", retain="7d")  # the delete is younger than the retention: nothing purged
    assert plan.purged_erasure is None and not lh.erasures("sales")[0].purged
    plan = lh.vacuum("sales", retain="0s", force=True)  # now it is older
    assert plan.purged_erasure == 1
    assert holders(warehouse) == {}
    assert lh.erasures("sales")[0].purged
    ids = lh.query("SELECT id FROM sales", engine="duckdb").column("id").to_pylist()
    assert sorted(ids) == sorted([f"s{i}" for i in range(60)] + ["s900"])
    assert lh.vacuum("sales", retain="0s", force=True).purged_erasure is None  # once

