"""A delete racing an archiving run and a producer's releases, each in a process of its own (on
the suite's Spark Connect server), started at seeded random offsets (seeds printed;
LAKEHOUSE_TEST_SEEDS replays them). Whatever the interleaving: every row the delete matched was
erased exactly once from whichever part held it at that moment (the audit's rows per part add up
to the rows matched), no other row is lost or doubled (the split view equals the model on both
engines, one row per key), none comes back (the erased staged rows are never released), and the
books keep (``verify``). A command that finds the table's lease held by another fails in one
line and is run again, as the jobs runner would."""

from __future__ import annotations

import datetime as dt
import os
import random
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Project, cli
from tests.test_delete import COLUMNS, build, rejected, visible
from tests.test_delete_kills import WHERE, clone

pytestmark = [pytest.mark.slow, pytest.mark.spark]
UTC = dt.timezone.utc
SEEDS = [int(s) for s in os.environ.get("LAKEHOUSE_TEST_SEEDS", "").split(",") if s] or [
    dt.date.today().toordinal() * 10 + k for k in range(1)]
"""A seed of the day (the same in every xdist worker, new each day); LAKEHOUSE_TEST_SEEDS=a,b,... runs others."""


@pytest.fixture(scope="module")
def template(tmp_path_factory: Any, spark: Any) -> tuple[Path, dict[str, dict[str, Any]]]:
    root = tmp_path_factory.mktemp("delete-race") / "proj"
    model, _ = build(Project(root))
    return root, model


def run(p: Project, *args: str) -> subprocess.CompletedProcess[str]:
    """A command, run again while another holds the table's lease."""
    for _ in range(30):
        proc = cli(p, *args)
        assert isinstance(proc, subprocess.CompletedProcess)
        if proc.returncode == 0 or "lease" not in proc.stderr:
            return proc
        time.sleep(0.5)
    return proc


@pytest.mark.parametrize("seed", SEEDS)
def test_a_delete_racing_an_archive_run_and_releases(seed: int, template: Any, tmp_path: Path) -> None:
    print(f"seed {seed} (LAKEHOUSE_TEST_SEEDS={seed} replays it)")
    rnd = random.Random(seed)
    root, model = template
    where = tmp_path / "proj"
    clone(root, where)
    p = Project(where)
    new = [[f"n{i}", 9, float(i), f"2026-11-20T22:{40 + i:02d}:00Z"] for i in range(6)]
    rows = p.csv("new.csv", COLUMNS, new)
    chains = {
        "delete": [("delete", "sales", "--where", WHERE)],
        "archive": [("archive", "sales", "--now", "2026-11-21T12:00:00Z")],
        "producer": [("producer", "sales", "racer", "attach", "--bound", "2026-11-20T22:30:00Z"),
                     ("producer", "sales", "racer", "insert", rows),
                     ("producer", "sales", "racer", "detach")],
    }
    delays = {name: rnd.uniform(0, 6) for name in chains}
    print("start offsets:", {k: round(v, 2) for k, v in delays.items()})
    results: dict[str, list[subprocess.CompletedProcess[str]]] = {}

    def chain(name: str) -> None:
        time.sleep(delays[name])
        results[name] = [run(p, *cmd) for cmd in chains[name]]

    threads = [threading.Thread(target=chain, args=(name,)) for name in chains]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for name, procs in results.items():
        for proc in procs:
            assert proc.returncode == 0, (seed, name, proc.args[-4:], proc.stderr[-2000:])

    lh = p.lh
    gone = {k for k, r in model.items() if r["shop"] == 1 and k != "s1"}
    [e] = lh.erasures("sales")
    assert e.rows_live + e.rows_archive + e.rows_staged + e.rows_rejects == len(gone) + 2 + 1, (seed, e)
    assert rejected(p) == ["r2"]
    for name in ("slow", "fast"):  # whatever is still staged is released
        lh.producer("sales", name).detach()
    lh.archive("sales", now=dt.datetime(2026, 11, 22, 12, tzinfo=UTC))
    want = sorted((set(model) - gone) | ({f"p{i}" for i in range(8)} - {"p1", "p5"}) | {r[0] for r in new})
    assert visible(p, "spark") == want and visible(p, "duckdb") == want, seed
    n = lh.query("SELECT count(*) AS n, count(DISTINCT id) AS k FROM sales").to_pylist()[0]
    assert n["n"] == n["k"] == len(want)
    bad = [c for c in lh.verify("sales") if not c.ok]
    assert not bad, (seed, bad)
