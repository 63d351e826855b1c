"""Seeded random interleavings of producers through the real Python API (Spark + Delta, an
injected clock), checked against the reference model of tests/stream_reference.py.

After every operation: the same errors (StreamError), rows late and staged as the insert reports
them, B and the watermark of ``t.stream(now=...)``. At the end: live rows, the late_row rejects
(producer, record, the bound they broke), each producer's state, and nothing lost (rows inserted
= live + late + still staged). A replay of the same events on a fresh table gives the same table.
"""

from __future__ import annotations

import datetime as dt
import json
import random
from dataclasses import dataclass
from typing import Any

import pytest

from lakehouse.ingest.producer import to_micros
from lakehouse.stream.model import StreamError
from tests.stream_reference import RefError, RefStream, mx

pytestmark = pytest.mark.spark

UTC = dt.timezone.utc
MIN = 60_000_000
BASE = to_micros("2026-11-20T10:00:00Z")
"""Event times start here (and stay within the day: one event_date for a keyed table)."""
START = to_micros("2026-11-20T12:00:00Z")
"""The injected clock starts here."""
LEASE = 2 * MIN


def table_yaml(name: str, lateness: str, key: bool = False) -> str:
    return f"""
name: {name}
columns:
  - {{name: user_id, type: long, nullable: {"false" if key else "true"}}}
  - {{name: url, type: string, nullable: false}}
  - {{name: at, type: timestamp, nullable: false}}
{"primary_key: [user_id]" if key else ""}
event_time: at
stream: {{allowed_lateness: {lateness}, lease: 2m}}
"""


def iso(t: int) -> str:
    return (dt.datetime(1970, 1, 1, tzinfo=UTC) + dt.timedelta(microseconds=t)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def us(d: dt.datetime | None) -> int | None:
    return None if d is None else to_micros(d)


# -- interleavings ---------------------------------------------------------------------------------------

@dataclass
class Plan:
    ops: list[tuple[Any, ...]]
    lateness: int | None


def make_plan(seed: int, names: tuple[str, ...], n_ops: int, lateness: int | None, keys: int = 0) -> Plan:
    """``n_ops`` operations of ``names``, steered by a shadow reference so that most are valid
    (a few are refused on purpose). ``keys``: user ids drawn from 1..keys (a keyed table: several
    producers write the same key), else unique."""
    rng = random.Random(seed)
    shadow = RefStream()
    now = START
    ops: list[tuple[Any, ...]] = []
    n_row = 0

    def rows(name: str, base: int) -> list[dict[str, Any]]:
        nonlocal n_row
        out = []
        for _ in range(rng.randint(1, 3)):
            n_row += 1
            t = base + rng.randint(-2, 4) * MIN + rng.choice([0, 0, 30_000_000])
            out.append({"user_id": rng.randint(1, keys) if keys else n_row, "url": f"/{name}/{n_row}", "at": iso(t)})
        return out

    while len(ops) < n_ops:
        name = rng.choice(names)
        p = shadow.producers.get(name)
        base = mx(shadow.bound, p.bound if p is not None and p.attached else None)
        base = BASE if base is None else base
        x = rng.random()
        if p is None or not p.attached:
            if x < 0.7:
                op: tuple[Any, ...] = ("attach", name, None if rng.random() < 0.4 else base + rng.randint(0, 3) * MIN)
            elif x < 0.85:
                op = ("with", name, rows(name, base))  # attach, insert, detach
            else:
                op = (rng.choice(["insert", "heartbeat", "detach"]), name, [])  # refused: not attached
        elif x < 0.42:
            op = ("insert", name, rows(name, base))
        elif x < 0.58:
            below = rng.random() < 0.2 and p.bound is not None
            op = ("bound", name, p.bound - MIN if below else base + rng.randint(0, 3) * MIN)
        elif x < 0.64:
            op = ("heartbeat", name)
        elif x < 0.68:  # attached already: renews, and asserts the bound if given (maybe below its own)
            op = ("attach", name, rng.choice([None, base - MIN, base + MIN]))
        elif x < 0.78:
            op = ("detach", name)
        else:
            op = ("advance", rng.choice([MIN, LEASE, 3 * MIN]))
        ops.append(op)
        if op[0] == "advance":
            now += op[1]
        else:
            ref_step(shadow, now, lateness, op)
    return Plan(ops, lateness)


def ref_step(ref: RefStream, now: int, lateness: int | None, op: tuple[Any, ...]) -> bool:
    """One operation on the reference, each followed by its automatic release; False if refused."""
    kind, name = op[0], op[1]
    steps: list[Any]
    if kind == "attach":
        steps = [lambda: ref.attach(name, now, LEASE, op[2])]
    elif kind == "insert":
        steps = [lambda: ref.insert(name, [(to_micros(r["at"]), r) for r in op[2]], now, LEASE, lateness)]
    elif kind == "bound":
        steps = [lambda: ref.assert_bound(name, op[2], now, LEASE)]
    elif kind == "heartbeat":
        steps = [lambda: ref.heartbeat(name, now, LEASE)]
    elif kind == "detach":
        steps = [lambda: ref.detach(name, now)]
    elif kind == "with":
        steps = [lambda: ref.attach(name, now, LEASE, None),
                 lambda: ref.insert(name, [(to_micros(r["at"]), r) for r in op[2]], now, LEASE, lateness),
                 lambda: ref.detach(name, now)]
    for step in steps:
        try:
            step()
        except RefError:
            return False
        ref.release(now)
    return True


def describe(op: tuple[Any, ...]) -> str:
    if op[0] in ("insert", "with"):
        return f"insert {op[1]} " + ", ".join(f"{r['user_id']}@{r['at'][11:19]}" for r in op[2])
    if op[0] in ("attach", "bound") and op[2] is not None:
        return f"{op[0]} {op[1]} {iso(op[2])[11:19]}"
    return " ".join(str(x) for x in op)


@dataclass
class Run:
    ref: RefStream
    now: int
    steps: list[str]
    accepted: int
    """Rows of the inserts the stream took (not refused)."""
    refused: int
    """Operations refused (StreamError), by both."""
    rejoins: int
    """Operations of an attached producer whose lease had expired (it rejoins at B)."""
    below_b: int
    """Rows inserted (and not late) below B at the time."""
    inserts: int
    """Inserts the stream took."""
    expiries: set[tuple[str, int]]
    """(producer, lease_expires) of each lease that ran out, as the next accepted operation sees it."""


def drive(project: Any, table: str, plan: Plan) -> Run:
    """Run ``plan`` through the Python API on ``table``, checking each step against the reference."""
    clock = {"now": START}
    t = project.lh.table(table)
    producers = {n: t.producer(n, clock=lambda: clock["now"]) for n in {op[1] for op in plan.ops if op[0] != "advance"}}
    ref = RefStream()
    steps: list[str] = []
    accepted = refused_ops = rejoins = below_b = inserts = 0
    expiries: set[tuple[str, int]] = set()
    for op in plan.ops:
        steps.append(describe(op))
        where = f"at step {len(steps)} of {table}:\n  " + "\n  ".join(steps)
        kind, now = op[0], clock["now"]
        if kind == "advance":
            clock["now"] += op[1]
        else:
            name = op[1]
            rp = ref.producers.get(name)
            if kind in ("attach", "insert", "bound", "heartbeat") and rp is not None and rp.attached \
                    and not rp.holds(now):
                rejoins += 1
            late_before, b_before, res = len(ref.late_rows), ref.bound, None
            expiring = {(p.name, p.lease_expires) for p in ref.producers.values()
                        if p.attached and p.lease_expires is not None and p.lease_expires <= now}
            refused = False
            try:
                if kind == "attach":
                    producers[name].attach(bound=None if op[2] is None else iso(op[2]))
                elif kind == "insert":
                    res = producers[name].insert(op[2]).as_dict()
                elif kind == "bound":
                    producers[name].bound(iso(op[2]))
                elif kind == "heartbeat":
                    producers[name].heartbeat()
                elif kind == "detach":
                    producers[name].detach()
                elif kind == "with":
                    with producers[name] as p:
                        res = p.insert(op[2]).as_dict()
            except StreamError:
                refused = True
            if kind == "with":  # the reference step by step, to see the insert's own effect
                assert ref_step(ref, now, plan.lateness, ("attach", name, None))
                assert ref_step(ref, now, plan.lateness, ("insert", name, op[2]))
                staged_after_insert = ref.staged(name)
                assert ref_step(ref, now, plan.lateness, ("detach", name))
                ref_refused = False
            else:
                ref_refused = not ref_step(ref, now, plan.lateness, op)
                staged_after_insert = ref.staged(name)
            assert refused == ref_refused, f"refused: implementation {refused}, reference {ref_refused} {where}"
            refused_ops += refused
            if not refused:
                expiries |= expiring
            if kind in ("insert", "with") and not refused:
                assert res is not None
                inserts += 1
                accepted += len(op[2])
                below_b += sum(1 for r in ref.staged_rows + ref.released_rows()
                               if r.seq == ref.inserts and b_before is not None and r.t < b_before)
                late = len(ref.late_rows) - late_before
                assert res["rows_late"] == late, f"rows_late {res['rows_late']} != reference {late} {where}"
                assert res["rows_staged"] == staged_after_insert, \
                    f"rows_staged {res['rows_staged']} != reference {staged_after_insert} {where}"
        status = t.stream(now=iso(clock["now"]))
        assert us(status["bound"]) == ref.bound, f"B {status['bound']} != reference {iso_or(ref.bound)} {where}"
        assert us(status["watermark"]) == ref.watermark(clock["now"]), \
            f"watermark {status['watermark']} != reference {iso_or(ref.watermark(clock['now']))} {where}"
        assert status["staged"] == ref.staged(), f"staged {status['staged']} != reference {ref.staged()} {where}"
    return Run(ref, clock["now"], steps, accepted, refused_ops, rejoins, below_b, inserts, expiries)


def iso_or(t: int | None) -> str:
    return "undefined" if t is None else iso(t)


def live_rows(project: Any, table: str) -> list[tuple[int, str, int]]:
    return sorted((r["user_id"], r["url"], to_micros(r["at"])) for r in project.live(table))


def late_rejects(project: Any, table: str) -> list[tuple[str, str, int, int]]:
    """(producer, url, the bound broken, line: the row's 1-based place in its insert) of each reject."""
    out = []
    for r in project.lh.rejects(table):
        assert r["reason"] == "late_row", r  # no other reject in these interleavings
        out.append((r["producer"], json.loads(r["record"])["url"], us(r["bound"]), r["line"]))
    return sorted(out)


def check_end(project: Any, table: str, run: Run, keyed: bool = False) -> None:
    ref, now = run.ref, run.now
    where = f"in {table} after:\n  " + "\n  ".join(run.steps)
    live = live_rows(project, table)
    if keyed:
        won = ref.live_by_key(lambda r: r.payload["user_id"]).values()
        want = sorted((r.payload["user_id"], r.payload["url"], r.t) for r in won)
    else:
        want = sorted((r.payload["user_id"], r.payload["url"], r.t) for r in ref.released_rows())
    assert live == want, f"live rows\n  {live}\nreference\n  {want}\n{where}"
    rejects = late_rejects(project, table)
    want_late = sorted((x.producer, x.payload["url"], x.bound, x.line + 1) for x in ref.late_rows)
    assert rejects == want_late, f"late rejects\n  {rejects}\nreference\n  {want_late}\n{where}"
    status = project.lh.table(table).stream(now=iso(now))
    assert us(status["bound"]) == ref.bound and us(status["watermark"]) == ref.watermark(now), where
    by_name = {p["name"]: p for p in status["producers"]}
    assert set(by_name) == set(ref.producers), where
    for name, rp in ref.producers.items():
        p = by_name[name]
        assert p["attached"] == rp.attached and p["holding"] == rp.holds(now), (name, p, rp, where)
        assert p["rejected"] == rp.rejected and p["staged"] == ref.staged(name), (name, p, rp, where)
        if rp.attached:
            assert us(p["bound"]) == rp.bound, (name, p, rp, where)
            assert us(p["lease_expires"]) == rp.lease_expires, (name, p, rp, where)
    # nothing lost: every row of an accepted insert is live (or overwritten by a later one of its
    # key), rejected late or still staged
    released = len(live) if not keyed else len(ref.released_rows())
    assert released + len(rejects) + status["staged"] == run.accepted, where
    assert len(ref.released_rows()) + len(ref.late_rows) + ref.staged() == run.accepted, where
    # the stream's event log: one release event per release (its rows), one insert event per insert,
    # one expiry event per lease that ran out
    events = project.lh.stream_events(table)
    assert [e["rows"] for e in events if e["kind"] == "release"] == [len(rel) for rel in ref.releases], where
    assert sum(e["kind"] == "insert" for e in events) == run.inserts, where
    expired = [(e["producer"], to_micros(e["at"])) for e in events if e["kind"] == "expiry"]
    assert sorted(expired) == sorted(run.expiries), f"expiry events {expired} != {sorted(run.expiries)} {where}"


# -- the tests ---------------------------------------------------------------------------------------------
# Seeds chosen for what they cover (asserted, so that a change of the generator does not quietly
# test less): refused operations, leases running out, releases, late rows, a context-managed
# producer, an attached producer attaching again.

@pytest.mark.slow
def test_three_producers_no_lateness(spark: Any, project: Any) -> None:
    project.table(table_yaml("clicks", "0")).create("clicks")
    plan = make_plan(190, ("P1", "P2", "P3"), 13, 0)
    run = drive(project, "clicks", plan)
    check_end(project, "clicks", run)
    assert run.ref.late_rows and len(run.ref.releases) >= 3 and run.refused and run.rejoins and run.ref.staged()
    assert any(op[0] == "with" for op in plan.ops)


@pytest.mark.slow
def test_two_producers_unbounded_lateness(spark: Any, project: Any) -> None:
    """Nothing is late: rows below B are taken (and released into live)."""
    project.table(table_yaml("clicks", "unbounded")).create("clicks")
    run = drive(project, "clicks", make_plan(35, ("P1", "P2"), 12, None))
    check_end(project, "clicks", run)
    assert not run.ref.late_rows and run.below_b and len(run.ref.releases) >= 3 and run.refused and run.rejoins


@pytest.mark.slow
def test_keyed_table_two_producers_same_keys(spark: Any, project: Any) -> None:
    """Two producers write the same user ids; within a release the later insert wins a key (even
    when its event time is earlier), a later release overwrites an earlier one."""
    project.table(table_yaml("visits", "0", key=True)).create("visits")
    run = drive(project, "visits", make_plan(108, ("P1", "P2"), 12, 0, keys=2))
    check_end(project, "visits", run, keyed=True)
    contested = [(rel, k) for rel in run.ref.releases for k in (1, 2)
                 if len({r.producer for r in rel if r.payload["user_id"] == k}) > 1]
    assert contested and run.ref.late_rows and run.refused
    # the later insert won although an earlier insert's row of that key has a later event time
    assert any(max(rows, key=lambda r: (r.seq, r.line)).t < max(r.t for r in rows)
               for rows in ([r for r in rel if r.payload["user_id"] == k] for rel, k in contested))


@pytest.mark.slow
def test_a_replay_of_the_same_events_gives_the_same_table(spark: Any, project: Any) -> None:
    project.table(table_yaml("v1", "30s", key=True)).table(table_yaml("v2", "30s", key=True)).create("v1", "v2")
    plan = make_plan(162, ("P1", "P2"), 12, 30_000_000, keys=3)
    runs = [drive(project, name, plan) for name in ("v1", "v2")]
    for name, run in zip(("v1", "v2"), runs):
        check_end(project, name, run, keyed=True)
    assert runs[0].ref.late_rows and runs[0].rejoins and len(runs[0].ref.releases) >= 3
    a, b = (project.live(n, order_by="user_id") for n in ("v1", "v2"))
    assert a == b

    def rejects(name: str) -> list[tuple[Any, ...]]:
        return sorted((r["line"], r["record"], r["reason"], r["producer"], r["bound"]) for r in project.lh.rejects(name))

    assert rejects("v1") == rejects("v2")
    now = iso(runs[0].now)
    sa, sb = (project.lh.table(n).stream(now=now) for n in ("v1", "v2"))
    assert {**sa, "table": None} == {**sb, "table": None}
    assert project.lh.stream_events("v1") == project.lh.stream_events("v2")


def test_an_insert_without_good_rows_renews_the_lease(spark: Any, project: Any) -> None:
    """"A lease renewed by any insert": also an insert of no rows, or of rows all rejected as bad
    (the model's ``insert`` renews the lease for an empty batch; the write path must reach it),
    and an expired producer holds again after such an insert, rejoining at B."""
    project.table(table_yaml("clicks", "0")).create("clicks")
    clock = {"now": START}
    t = project.lh.table("clicks")
    a = t.producer("A", clock=lambda: clock["now"])
    b = t.producer("B", clock=lambda: clock["now"])
    a.attach(bound="2026-11-20T10:00:00Z")
    b.attach(bound="2026-11-20T10:05:00Z")

    def producer(name: str) -> dict[str, Any]:
        return next(p for p in t.stream(now=iso(clock["now"]))["producers"] if p["name"] == name)

    problems = []
    clock["now"] += 90_000_000  # 12:01:30; A's lease runs to 12:02
    assert a.insert([]).as_dict()["rows_staged"] == 0
    if us(producer("A")["lease_expires"]) != clock["now"] + LEASE:
        problems.append(f"empty insert at {iso(clock['now'])}: lease_expires {producer('A')['lease_expires']}")
    clock["now"] += 60_000_000  # 12:02:30
    b.heartbeat()
    bad = a.insert([{"user_id": 1, "url": None, "at": "2026-11-20T10:06:00Z"}]).as_dict()  # url is not nullable
    assert bad["rows_rejected"] == 1 and bad["rows_late"] == 0
    if us(producer("A")["lease_expires"]) != clock["now"] + LEASE or not producer("A")["holding"]:
        p = producer("A")
        problems.append(f"all-bad insert at {iso(clock['now'])}: lease_expires {p['lease_expires']}, "
                        f"holding {p['holding']}")
    assert not problems, "; ".join(problems)
