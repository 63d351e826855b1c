"""``lakehouse delete`` end to end (lakehouse.erasure.job), on a table holding rows in every
place a row lives: live above and below the cutoff, several archive days, rows staged by an
attached producer, rejects. By predicate and by keys, the split view on both engines equals a
model of the rows, ``verify`` and ``check`` pass, vector files decode to their days (verify),
``lookup`` agrees with SQL, the erased staged rows are never released, the dry run's plan is what
the delete then erases, the audit keeps one row per delete; bad requests are refused in one line
before anything runs."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import pytest

from lakehouse.archive.state import current_snapshot
from lakehouse.erasure.job import DeletePlan, DeleteResult
from lakehouse.erasure.selection import INLINE_KEYS
from lakehouse.errors import InputError
from lakehouse.ingest.producer import to_micros
from tests.conftest import SALES, Project

pytestmark = pytest.mark.spark
UTC = dt.timezone.utc
STREAMED = SALES + "stream: {allowed_lateness: 30d}\n"
COLUMNS = ["id", "shop", "price", "at"]


class Clock:
    def __init__(self) -> None:
        self.now = to_micros("2026-11-20T12:00:00Z")

    def __call__(self) -> int:
        return self.now


def row(i: int, day: int, hour: int, shop: int | None = None) -> dict[str, Any]:
    return {"id": f"s{i}", "shop": i % 5 if shop is None else shop, "price": i * 0.5 if i % 7 else None,
            "at": f"2026-11-{day:02d}T{hour:02d}:{i % 60:02d}:00Z"}


@pytest.fixture
def sales(spark: Any, project: Project) -> tuple[Project, dict[str, dict[str, Any]], Any]:
    """The sales table of ``build``, its model of rows and the producer holding the watermark."""
    model, slow = build(project)
    return project, model, slow


def build(project: Project) -> tuple[dict[str, dict[str, Any]], Any]:
    """sales: days 16..18 and 19 before 12:00 archived (cutoff 2026-11-19T12:00), late rows of
    the 17th waiting in live below it, rows of the 19th and 20th in live, two rejects (one of
    shop 1), and rows a producer staged that wait for another's bound (22:00 on the 20th)."""
    project.table(STREAMED)
    project.create("sales")
    lh = project.lh
    model: dict[str, dict[str, Any]] = {}
    first = [row(i, 16 + i % 4, (i * 5) % 24 if i % 4 < 3 else (i * 5) % 12) for i in range(80)]
    later = [row(100 + i, 19 + i % 2, 13 + i % 9) for i in range(20)]
    for r in first + later:
        model[r["id"]] = r
    lh.load("sales", [project.csv("a.csv", COLUMNS, [[r[c] for c in COLUMNS] for r in first])])
    lh.archive("sales", now=dt.datetime(2026, 11, 20, 12, tzinfo=UTC))
    late = [row(200 + i, 17, 3 + i) for i in range(6)]
    lh.load("sales", [project.csv("b.csv", COLUMNS, [[r[c] for c in COLUMNS] for r in late + later])])
    model.update({r["id"]: r for r in late})
    bad = project.csv("bad.csv", COLUMNS, [["r1", 1, "cheap", "2026-11-20T01:00:00Z"],
                                           ["r2", 2, "cheap", "2026-11-20T01:00:00Z"],
                                           ["s300", 3, 1.0, "2026-11-20T02:00:00Z"]])
    lh.load("sales", [bad])
    model["s300"] = {"id": "s300", "shop": 3, "price": 1.0, "at": "2026-11-20T02:00:00Z"}
    assert rejected(project) == ["r1", "r2"]
    clock = Clock()
    t = lh.table("sales")
    slow, fast = t.producer("slow", clock=clock), t.producer("fast", clock=clock)
    slow.attach("2026-11-20T22:00:00Z")  # the loads moved the table's bound to 21:57
    fast.attach("2026-11-20T22:00:00Z")
    staged = [{"id": f"p{i}", "shop": i % 4, "price": float(i), "at": f"2026-11-20T22:{10 + i:02d}:00Z"}
              for i in range(8)]
    fast.insert(staged)
    assert t.stream()["staged"] == 8
    return model, slow


def rejected(project: Project) -> list[str]:
    return sorted(str(r["record"]).split(",")[0] for r in project.lh.rejects("sales"))


WAITING = {f"s{200 + i}" for i in range(6)}
"""Late rows in live below the cutoff: the split view shows them after the next archiving run."""


def visible(project: Project, engine: str) -> list[str]:
    return sorted(project.lh.query("SELECT id FROM sales", engine=engine).column("id").to_pylist())


def books_keep(project: Project) -> None:
    lh = project.lh
    bad = [c for c in lh.verify("sales") if not c.ok]
    assert not bad, bad
    rep = lh.check("sales", docs=False)
    assert rep.ok, rep.failed
    cutoff = dt.datetime.fromtimestamp(current_snapshot(lh.paths("sales").archive).cutoff or 0, UTC)
    for day in ("2026-11-16", "2026-11-17", "2026-11-18", "2026-11-19"):
        for shop in range(5):
            sql = (f"SELECT count(*) AS n FROM sales WHERE event_date = DATE '{day}' AND shop = {shop} "
                   f"AND at < TIMESTAMP '{cutoff:%Y-%m-%d %H:%M:%S}'")
            n = lh.query(sql).column("n")[0].as_py()
            archived = project.lh.lookup("sales", day, [f"shop={shop}"]).range.count
            assert archived == n, (day, shop, archived, n)


def test_a_delete_by_predicate_reaches_every_part_and_the_books_keep(sales: Any) -> None:
    project, model, slow = sales
    lh = project.lh
    cutoff = current_snapshot(lh.paths("sales").archive).cutoff
    plan = lh.delete("sales", where="shop = 1 AND id <> 's1'", dry_run=True)
    assert isinstance(plan, DeletePlan)
    gone = {k for k, r in model.items() if r["shop"] == 1 and k != "s1"}
    archived = gone & {f"s{i}" for i in range(80)}  # the first load's rows, all below the cutoff
    assert sum(plan.archive.values()) == len(archived) and len(plan.archive) >= 3
    assert sum(plan.live.values()) == len(gone) - len(archived)
    assert sum(plan.staged.values()) == 2 and plan.rejects == 1 and plan.number == 1
    json.dumps(plan.as_dict())

    res = lh.delete("sales", where="shop = 1 AND id <> 's1'")
    assert isinstance(res, DeleteResult) and res.number == 1 and not res.resumed
    assert (res.live, res.archive["rows"], res.staged, res.rejects) == (
        sum(plan.live.values()), sum(plan.archive.values()), 2, 1)
    assert set(res.archive["days"]) == {d.isoformat() for d in plan.archive}
    want = sorted(set(model) - gone - WAITING)
    assert visible(project, "spark") == want and visible(project, "duckdb") == want
    assert rejected(project) == ["r2"]
    assert current_snapshot(lh.paths("sales").archive).cutoff == cutoff  # an erasure never moves the cutoff
    books_keep(project)
    [e] = lh.erasures("sales")
    assert (e.number, e.predicate, e.rows_live, e.rows_archive, e.rows_staged, e.rows_rejects) == (
        1, "shop = 1 AND id <> 's1'", res.live, res.archive["rows"], 2, 1)

    slow.detach()  # the staged rows are released: the erased ones never appear
    staged_left = {f"p{i}" for i in range(8) if i % 4 != 1}
    assert visible(project, "duckdb") == sorted(set(want) | staged_left)
    lh.archive("sales", now=dt.datetime(2026, 11, 21, 12, tzinfo=UTC))  # archiving goes on from the erased days
    books_keep(project)
    assert visible(project, "spark") == sorted(set(want) | staged_left | (WAITING - gone))


@pytest.mark.parametrize("absent", [1, 1500], ids=["an-in-list", "a-join"])
def test_a_delete_by_keys_and_requests_refused_in_one_line(sales: Any, tmp_path: Any, absent: int) -> None:
    """A few keys are an IN list in Spark's DELETE; more than INLINE_KEYS, a join (MERGE)."""
    project, model, slow = sales
    lh = project.lh
    keys = tmp_path / "keys.csv"
    erase = ["s0", "s6", "s102", "s201", "p3", "r2"]  # archive, archive, live, live below the cutoff, staged, a reject
    absentees = [f"nobody{i}" for i in range(absent)]
    keys.write_text("id\n" + "\n".join(erase + absentees) + "\n")
    assert (len(erase) + absent > INLINE_KEYS) == (absent > 1)
    res = lh.delete("sales", keys=str(keys))
    assert isinstance(res, DeleteResult)
    assert (res.archive["rows"], res.live, res.staged, res.rejects) == (2, 2, 1, 1)
    want = sorted(set(model) - set(erase) - WAITING)
    assert visible(project, "spark") == want and visible(project, "duckdb") == want
    books_keep(project)
    [e] = lh.erasures("sales")
    assert e.predicate is None and e.keys == len(erase) + absent and len(e.keys_sha256 or "") == 64

    again = lh.delete("sales", keys=str(keys))  # nothing is left to erase: a second erasure that finds none
    assert again.number == 2 and again.rows == 0 and again.archive["rows"] == 0
    for where, keys_file, message in (
        ("nope = 1", None, "nope"),
        ("shop = 1", str(keys), "one of them"),
        (None, None, "one of them"),
        ("rand() > 0.5", None, "rand"),
        ("shop IN (SELECT 1)", None, "subquery"),
        (None, str(tmp_path / "missing.csv"), "no such file"),
    ):
        with pytest.raises(InputError, match=message) as err:
            lh.delete("sales", where=where, keys=keys_file)
        assert "\n" not in str(err.value)
    assert len(lh.erasures("sales")) == 2


def test_the_command_line(sales: Any, tmp_path: Any) -> None:
    from tests.conftest import cli_in_process

    project, model, slow = sales
    plan = cli_in_process(project, "delete", "sales", "--where", "shop = 2", "--dry-run", "--format", "json")
    assert plan.returncode == 0, plan.stderr
    doc = json.loads(plan.stdout)
    assert doc["number"] == 1 and doc["rows"] == sum(1 for r in model.values() if r["shop"] == 2) + 2 + 1
    text = cli_in_process(project, "delete", "sales", "--where", "shop = 2", "--dry-run")
    assert "would erase" in text.stdout and "archive:" in text.stdout and "rejects: 1 row(s)" in text.stdout
    assert project.lh.erasures("sales") == []  # a dry run changes nothing
    run = cli_in_process(project, "delete", "sales", "--where", "shop = 2")
    assert run.returncode == 0 and f"erasure 1 (--where 'shop = 2'): {doc['rows']} row(s) erased" in run.stdout, run
    keys = tmp_path / "keys.txt"
    keys.write_text("s0\ns100\n")
    run = cli_in_process(project, "delete", "sales", "--keys", str(keys), "--format", "json")
    assert run.returncode == 0 and json.loads(run.stdout)["rows"] == 2, run
    hist = cli_in_process(project, "delete", "--history", "--format", "json")
    assert [(e["number"], e["predicate"], e["keys"]) for e in json.loads(hist.stdout)] == [(1, "shop = 2", None),
                                                                                         (2, None, 2)]
    hist = cli_in_process(project, "delete", "sales", "--history")
    assert "--where shop = 2" in hist.stdout and "--keys 2 key(s)" in hist.stdout
    csv = cli_in_process(project, "delete", "--history", "--format", "csv")
    assert csv.stdout.splitlines()[0].startswith("table_name,number,at,predicate")
    for args, message in ((("sales", "--where", "nope = 1"), "nope"),
                          (("sales",), "one of them"),
                          ((), "give TABLE"),
                          (("sales", "--history", "--where", "shop = 1"), "takes no --where"),
                          (("nosuch", "--where", "shop = 1"), "nosuch")):
        bad = cli_in_process(project, "delete", *args)
        assert bad.returncode == 1 and message in bad.stderr and len(bad.stderr.strip().splitlines()) == 1, bad
