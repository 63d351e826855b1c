"""Crash safety of ``lakehouse delete``: a real process (on the suite's Spark Connect server) is
killed (SIGKILL) at each named step of a delete and at random instants (seeds printed); right
after the kill the books keep (``verify``); then a different operation runs next (an archiving
run, another delete, a producer's release followed by a delete; after a random kill, the delete
again) and finishes the interrupted delete: the split view on both engines equals the model, every matched row is gone from every
part, the audit holds the delete once with every part's rows counted once, nothing is left saved."""

from __future__ import annotations

import datetime as dt
import os
import random
import shutil
import signal
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from lakehouse import storage
from tests.conftest import Project, cli
from tests.test_delete import WAITING, Clock, build, rejected, visible

pytestmark = [pytest.mark.slow, pytest.mark.spark]
UTC = dt.timezone.utc
WHERE = "shop = 1 AND id <> 's1'"
POINTS = ["erase_after_save", "stream_before_erase_save", "stream_after_erase_save", "erase_after_staged",
          "erase_after_live", "erase_after_archive_write", "erase_after_archive_commit", "erase_after_archive",
          "erase_after_rejects", "erase_after_audit"]
NEXT = ("archive", "delete", "release")
OPS = {"erase_after_archive_commit": "delete", "erase_after_archive": "archive"}
"""A delete killed between its archive commit and its ledger rows, finished by another delete of
the same days: the books are repaired before that one checks them."""
RANDOM = [int(s) for s in os.environ.get("LAKEHOUSE_TEST_SEEDS", "").split(",") if s] or [
    dt.date.today().toordinal() * 10 + k for k in range(1)]
"""A seed of the day (the same in every xdist worker, new each day); LAKEHOUSE_TEST_SEEDS=a,b,... runs others."""


@pytest.fixture(scope="module")
def template(tmp_path_factory: Any, spark: Any) -> tuple[Path, dict[str, dict[str, Any]], dict[str, int]]:
    """The sales table of test_delete, and the rows a clean delete erases from each part."""
    root = tmp_path_factory.mktemp("delete-kills") / "proj"
    p = Project(root)
    model, _ = build(p)
    ref = tmp_path_factory.mktemp("delete-ref") / "proj"
    clone(root, ref)
    res = Project(ref).lh.delete("sales", where=WHERE)
    counts = {"live": res.live, "archive": int(res.archive["rows"]), "staged": res.staged, "rejects": res.rejects}
    return root, model, counts


def clone(src: Path, dest: Path) -> None:
    """A copy of a project: its stream's state names staging folders relative to the table's
    folder, so the copy's stream reads its own."""
    shutil.copytree(src, dest)
    assert str(src) not in (dest / "warehouse" / "sales" / "_stream" / "state.json").read_text()


def _kill(root: Path, point: str | None, after: float | None = None) -> subprocess.CompletedProcess[str] | None:
    if point is not None:
        proc = cli(Project(root), "delete", "sales", "--where", WHERE, crash=point)
        assert isinstance(proc, subprocess.CompletedProcess)
        return proc
    bg = cli(Project(root), "delete", "sales", "--where", WHERE, background=True)
    assert isinstance(bg, subprocess.Popen)
    time.sleep(after or 0)
    bg.send_signal(signal.SIGKILL)
    out, err = bg.communicate()
    return subprocess.CompletedProcess(bg.args, bg.returncode, out, err)


@pytest.fixture(scope="module")
def killed(template: Any, tmp_path_factory: Any) -> Any:
    """One clone per point (and per random instant), each with its delete killed there; two at a
    time in the background while the tests check the ones done."""
    pool = ThreadPoolExecutor(max_workers=2)
    out = {}
    for point in POINTS:
        root = tmp_path_factory.mktemp(point) / "proj"
        clone(template[0], root)
        out[point] = (root, pool.submit(_kill, root, point))
    for seed in RANDOM:
        root = tmp_path_factory.mktemp(f"random{seed}") / "proj"
        clone(template[0], root)
        after = random.Random(seed).uniform(0.5, 12.0)
        out[f"random-{seed}"] = (root, pool.submit(_kill, root, None, after))
    yield out
    pool.shutdown(wait=True, cancel_futures=True)


def then(p: Project, op: str) -> set[str]:
    """Run ``op`` after the kill; the ids it erases itself (besides the interrupted delete's)."""
    lh = p.lh
    if op == "archive":
        lh.archive("sales", now=dt.datetime(2026, 11, 21, 12, tzinfo=UTC))
        return set()
    if op == "retry":  # the user runs the delete again (a kill before its save left nothing to finish)
        lh.delete("sales", where=WHERE)
        return set()
    if op == "release":  # a stream operation does not finish the delete; its rows never come back
        lh.table("sales").producer("slow", clock=Clock()).detach()
    res = lh.delete("sales", where="id = 's3'")
    assert res.number == 2 and res.rows == 1
    return {"s3"}


@pytest.mark.parametrize("point", POINTS + [f"random-{s}" for s in RANDOM])
def test_a_killed_delete_is_finished_by_the_next_operation(point: str, template: Any, killed: Any) -> None:
    root, model, counts = template
    where, future = killed[point]
    proc = future.result()
    print(f"delete killed at {point} (seeds {RANDOM}; LAKEHOUSE_TEST_SEEDS=... to replay)")
    if not point.startswith("random"):
        assert proc.returncode == -signal.SIGKILL, f"not killed at {point}: {proc.returncode} {proc.stderr[-2000:]}"
    p = Project(where)
    lh = p.lh
    bad = [c for c in lh.verify("sales") if not c.ok]  # the books keep at every step
    assert not bad, (point, bad)
    op = "retry" if point.startswith("random") else OPS.get(point, NEXT[POINTS.index(point) % len(NEXT)])
    also = then(p, op)
    gone = {k for k, r in model.items() if r["shop"] == 1 and k != "s1"} | also
    staged_gone = {"p1", "p5"}
    waiting = set() if op == "archive" else WAITING
    released = {f"p{i}" for i in range(8)} - staged_gone if op == "release" else set()
    want = sorted((set(model) - gone - waiting) | released)
    assert visible(p, "spark") == want and visible(p, "duckdb") == want, (point, op)
    assert rejected(p) == ["r2"]
    assert not storage.exists(lh.paths("sales").erasure)
    first = [e for e in lh.erasures("sales") if e.number == 1]
    assert len(first) == 1 and first[0].predicate == WHERE
    e = first[0]
    assert {"live": e.rows_live, "archive": e.rows_archive, "staged": e.rows_staged,
            "rejects": e.rows_rejects} == counts, (point, op)
    bad = [c for c in lh.verify("sales") if not c.ok]
    assert not bad, (point, op, bad)
    if op != "release":  # the erased staged rows are never released
        lh.table("sales").producer("slow", clock=Clock()).detach()
        assert not staged_gone & set(visible(p, "duckdb"))


PURGE_POINTS = ["purge_after_staging", "purge_after_live_cut", "purge_after_archive_cut"]


@pytest.mark.parametrize("point", PURGE_POINTS)
def test_a_killed_purge_is_finished_by_a_purge_again(point: str, template: Any, tmp_path: Path) -> None:
    root, model, counts = template
    where = tmp_path / "proj"
    clone(root, where)
    p = Project(where)
    proc = cli(p, "delete", "sales", "--where", WHERE, "--purge", crash=point)
    assert isinstance(proc, subprocess.CompletedProcess)
    assert proc.returncode == -signal.SIGKILL, f"not killed at {point}: {proc.returncode} {proc.stderr[-2000:]}"
    lh = p.lh
    [e] = lh.erasures("sales")  # the delete itself finished before its purge
    assert not e.purged and {"live": e.rows_live, "archive": e.rows_archive, "staged": e.rows_staged,
                             "rejects": e.rows_rejects} == counts
    done = lh.delete("sales", purge=True)
    assert done.number == 1 and lh.erasures("sales")[0].purged
    gone = {k for k, r in model.items() if r["shop"] == 1 and k != "s1"}
    want = sorted(set(model) - gone - WAITING)
    assert visible(p, "spark") == want and visible(p, "duckdb") == want
    bad = [c for c in lh.verify("sales") if not c.ok]
    assert not bad, (point, bad)
