"""Erasing a producer's staged rows (``Stream.erase``, step 2 of a delete): the rows still to
release less the matched ones are written into a rows folder of their own, the switch one save
of the stream's state; the folder read before goes. Released rows stay where they are (live is
another step's), the rest is released as if the matched rows had never been inserted, also by a
process that cached the segment's times before; a SIGKILL before or after the save leaves the
segment whole or erased, never half, and the next erasure removes what the kill left."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow.compute as pc
import pytest

from lakehouse.ingest.producer import to_micros
from lakehouse.stream.engine import Stream
from lakehouse.stream.erase import erase
from lakehouse.stream.store import StreamStore
from tests.conftest import CLICKS, REPO, Project

pytestmark = pytest.mark.spark


class Clock:
    def __init__(self) -> None:
        self.now = to_micros("2026-11-20T12:00:00Z")

    def __call__(self) -> int:
        return self.now


def at(minute: int) -> str:
    return f"2026-11-20T10:{minute:02d}:00Z"


def rows(*pairs: tuple[int, int]) -> list[dict[str, Any]]:
    return [{"user_id": u, "url": f"/u{u}", "at": at(m)} for u, m in pairs]


def users(project: Project) -> list[int]:
    return sorted(r["user_id"] for r in project.live("clicks"))


def staged_folders(project: Project) -> list[str]:
    root = Path(project.settings.warehouse) / "clicks" / "_staging"
    return sorted(p.name for d in root.iterdir() if d.is_dir() for p in d.iterdir() if p.name.startswith("rows"))


@pytest.fixture
def held(spark: Any, project: Project) -> tuple[Project, Any, Any]:
    """clicks: producer "slow" holds the watermark at 10:05; "fast" inserted rows up to 10:20, of
    which those up to 10:05 are released."""
    project.table(CLICKS + "stream: {allowed_lateness: 1h}\n")
    project.create("clicks")
    clock = Clock()
    t = project.lh.table("clicks")
    slow, fast = t.producer("slow", clock=clock), t.producer("fast", clock=clock)
    slow.attach(at(0))
    fast.attach(at(0))
    fast.insert(rows((1, 1), (2, 2), (3, 10), (4, 12), (3, 15), (5, 20)))
    slow.bound(at(5))
    assert users(project) == [1, 2]
    return project, slow, fast


def erase_users(project: Project, ids: set[int], number: int = 1) -> dict[str, int]:
    d, p = project.lh.definition("clicks"), project.lh.paths("clicks")
    stream = Stream(project.lh.spark, d, p)
    return erase(stream, lambda t: pc.is_in(t["user_id"], value_set=__import__("pyarrow").array(sorted(ids))), number)


def test_erased_staged_rows_are_never_released_and_the_rest_is(held: tuple[Project, Any, Any]) -> None:
    project, slow, fast = held
    before = project.lh.table("clicks").stream()["staged"]
    erased = erase_users(project, {3, 2})  # 2 was released already: not staging's
    assert sum(erased.values()) == 2 and project.lh.table("clicks").stream()["staged"] == before - 2
    assert staged_folders(project) == ["rows-e1"]  # the folder read before is gone
    fast.insert(rows((6, 25)))  # the producer's own Stream cached the segment's times before
    slow.detach()
    fast.detach()
    assert users(project) == [1, 2, 4, 5, 6]
    assert project.lh.table("clicks").stream()["staged"] == 0


def test_an_erasure_matching_nothing_changes_no_row_and_is_recorded_once(held: tuple[Project, Any, Any]) -> None:
    project, slow, fast = held
    state = StreamStore(project.lh.paths("clicks")).read().to_json()
    assert erase_users(project, {99}) == {}
    after = StreamStore(project.lh.paths("clicks")).read().to_json()
    assert after.pop("erasures") == {"1": {}}
    assert {**state, "erasures": None, "unlogged": None} == {**after, "erasures": None, "unlogged": None}
    assert staged_folders(project) == ["rows"]
    assert erase_users(project, {3}, number=1) == {}  # erasure 1 ran: run again, it does nothing
    erased = erase_users(project, {3}, number=2)
    assert sum(erased.values()) == 2 and erase_users(project, {3, 4}, number=2) == erased  # what it did then


ERASE = """
import sys
import pyarrow as pa, pyarrow.compute as pc
from lakehouse.project import Lakehouse
from lakehouse.settings import Settings
from lakehouse.stream.engine import Stream
from lakehouse.stream.erase import erase
lh = Lakehouse(Settings.resolve(sys.argv[1], sys.argv[2], "local[1]", env={}))
s = Stream(lh.spark, lh.definition("clicks"), lh.paths("clicks"))
erase(s, lambda t: pc.is_in(t["user_id"], value_set=pa.array([3])), int(sys.argv[3]))
"""


@pytest.mark.parametrize("point", ["stream_before_erase_save", "stream_after_erase_save"])
def test_a_kill_around_the_switch_leaves_the_segment_whole_or_erased(held: tuple[Project, Any, Any],
                                                                    point: str) -> None:
    project, slow, fast = held
    env = {**os.environ, "LAKEHOUSE_CRASH_AT": point, "PYTHONPATH": str(REPO)}
    r = subprocess.run([sys.executable, "-c", ERASE, str(project.root), project.settings.warehouse, "7"], env=env,
                       cwd=REPO, capture_output=True, text=True, timeout=300)
    assert r.returncode == -9, r.stderr[-2000:]
    saved = point == "stream_after_erase_save"
    assert staged_folders(project) == ["rows", "rows-e7"]  # what the kill left (the state names one)
    erase_users(project, {5}, number=8)  # the next erasure: the kill's leftovers go
    assert staged_folders(project) == ["rows-e8"]
    slow.detach()
    fast.detach()
    assert users(project) == ([1, 2, 4] if saved else [1, 2, 3, 3, 4])  # (user 3 sent two rows)


def test_the_inserting_process_releases_right_after_another_erased_its_rows(spark: Any, project: Project) -> None:
    """The producer that inserted the rows keeps their times from its insert; an erasure by
    another process moves the segment's rows: its next release reads them again, and neither
    releases an erased row nor loses a kept one."""
    project.table(CLICKS + "stream: {allowed_lateness: 1h}\n")
    project.create("clicks")
    clock = Clock()
    p = project.lh.table("clicks").producer("only", clock=clock)
    p.attach(at(0))
    p.insert(rows((3, 3), (4, 4), (5, 5)), moves_bound=False)  # they wait for its bound: nothing read yet
    assert users(project) == []
    assert sum(erase_users(project, {3}).values()) == 1  # another process
    p.bound(at(4))  # the inserting process plans its first release from the segment as it is now
    assert users(project) == [4]
    p.bound(at(10))
    assert users(project) == [4, 5] and project.lh.table("clicks").stream()["staged"] == 0
    p.detach()
