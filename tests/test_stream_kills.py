"""Random interleavings of producers with real kills at random instants, against the reference model.

Three producers attach, insert CSV files (some rows late, some bad), assert bounds, heartbeat and
detach on an injected clock; ``stream``, ``tables`` and archiving runs (``clock: bound``) come in
between. Most operations run in this process (the shared SparkSession). An operation drawn for a
kill runs as a real ``lakehouse`` command in a process started ahead of time (Spark up), and the
whole process group is killed with SIGKILL at an instant drawn at random over the command's
expected run time: in its staging job, between its saves, in a release or its rejects commit,
wherever it happens to be. The operation after a kill is drawn from those that must finish what
the killed one left: another producer's insert, a heartbeat, a detach, ``stream``, ``tables`` or
an archiving run.

After a kill the durable stream state tells whether the operation was saved (it happened) and
whether its release was planned; the reference model (tests/stream_reference.py) takes the same
steps. After every completed operation the invariant is checked: every row of every insert that
happened is in exactly one of staged, live (or the archive) and rejects, as the reference says
(late rows with the bound they broke, bad rows with their reason); every row of an insert killed
before its registration is nowhere; B and the watermark are the reference's.

Seeds: ``LAKEHOUSE_KILL_SEEDS=7,8`` replays the given ones (each failure prints its seed). The
operations of a seed are fixed; the instants of the kills are timings, drawn from the seed too.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import random
import select
import signal
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import pyarrow.dataset as ds
import pytest

from lakehouse import delta_log
from lakehouse.ingest.producer import to_micros
from lakehouse.spark import fence
from lakehouse.stream.status import describe
from lakehouse.stream.store import StreamStore
from tests.conftest import CLICKS, FAST_JVM, REPO, Project, suite_server
from tests.stream_reference import RefError, RefStream, mx

pytestmark = [pytest.mark.slow, pytest.mark.spark]

UTC = dt.timezone.utc
MIN = 60_000_000
LEASE = 2 * MIN
BASE = to_micros("2026-11-20T10:00:00Z")
START = to_micros("2026-11-20T12:00:00Z")
DEFAULT_SEEDS = "301,302,303,304"
SEEDS = [int(s) for s in os.environ.get("LAKEHOUSE_KILL_SEEDS", DEFAULT_SEEDS).split(",") if s.strip()]
OPS_PER_SEED = int(os.environ.get("LAKEHOUSE_KILL_OPS", "62"))
"""Operations drawn per seed, time advances included (about 52 operations and 4 kills a seed)."""
NAMES = ("P1", "P2", "P3")
TABLE = CLICKS + "stream: {allowed_lateness: 0, lease: 2m}\narchive: {delay: 5m, clock: bound}\n"
PRODUCER_OPS = ("attach", "insert", "bound", "heartbeat", "detach")
ANCHORS = {
    "insert": ("start", "ingest_after_take", "ingest_after_staging", "stream_after_insert", "stream_after_plan",
               "stream_after_live", "stream_before_rejects", "ingest_after_live"),
    **{k: ("start", "stream_after_plan", "stream_after_live") for k in ("attach", "bound", "heartbeat", "detach")},
}
"""Where a kill's random wait starts: the command's start, or a named point it passes (a point it
does not reach, a release that does not happen, lets it finish). The wait is a random fraction of
the time the command took from that point to its next line (a point, or its end) when it last ran
to the end: so the instant falls inside whatever it does next (a Spark job, a commit, a save)."""
FIRST_GAP = 0.2
"""Seconds after a point before any run of the kind has been timed (a small insert or a release
takes milliseconds without Spark: a longer wait would fall after the command's end)."""
AFTER_KILL = ("insert", "heartbeat", "detach", "stream", "tables", "archive")


def iso(t: int) -> str:
    return (dt.datetime(1970, 1, 1, tzinfo=UTC) + dt.timedelta(microseconds=t)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass
class Op:
    kind: str
    name: str = ""
    arg: Any = None
    """attach/bound: a time (or None); insert: rows (user id or None for a bad row, time, url)."""
    kill: tuple[float, float] | None = None
    """Run in a process and kill it (None: in this process): (which of the kind's ``ANCHORS``,
    how long after it), each a fraction drawn from the seed."""
    file: str = ""

    def describe(self) -> str:
        if self.kind == "insert":
            rows = ", ".join(f"{'bad' if u is None else u}@{iso(t)[11:19]}" for u, t, _ in self.arg)
            s = f"insert {self.name} [{rows}]"
        elif self.kind in ("attach", "bound"):
            s = f"{self.kind} {self.name}" + ("" if self.arg is None else f" {iso(self.arg)[11:19]}")
        elif self.kind == "advance":
            s = f"advance {self.arg // 1_000_000}s"
        else:
            s = f"{self.kind} {self.name}".strip()
        if self.kill is not None:
            anchors = ANCHORS.get(self.kind, ("start",))
            s += f"  [killed {self.kill[1]:.2f} after {anchors[int(self.kill[0] * len(anchors))]}]"
        return s


def make_plan(seed: int, n_ops: int) -> list[Op]:
    """``n_ops`` operations steered by a shadow reference (most are valid, a few are refused on
    purpose); about one in nine producer operations is killed, and the one after it is drawn from
    ``AFTER_KILL``."""
    rng = random.Random(seed)
    shadow = RefStream()
    now = START
    ops: list[Op] = []
    n_row = 0
    after_kill = False

    def rows(name: str) -> list[tuple[int | None, int, str]]:
        nonlocal n_row
        p = shadow.producers.get(name)
        base = mx(shadow.bound, p.bound if p is not None and p.attached else None) or BASE
        out: list[tuple[int | None, int, str]] = []
        for _ in range(rng.randint(1, 4)):
            n_row += 1
            bad = rng.random() < 0.08
            t = base + rng.randint(-2, 4) * MIN + rng.choice([0, 0, 30_000_000])
            out.append((None if bad else n_row, t, f"/{name}/{n_row}"))
        return out

    while len(ops) < n_ops:
        name = rng.choice(NAMES)
        p = shadow.producers.get(name)
        attached = p is not None and p.attached
        if after_kill:
            kind = rng.choice(AFTER_KILL)
            if kind in ("insert", "heartbeat", "detach"):
                name = rng.choice([n for n in NAMES if (q := shadow.producers.get(n)) and q.attached] or list(NAMES))
            op = Op(kind, name if kind in PRODUCER_OPS else "", rows(name) if kind == "insert" else None)
        else:
            x = rng.random()
            if not attached:
                op = Op("attach", name, None if x < 0.4 else BASE + rng.randint(0, 20) * MIN) if x < 0.85 else \
                    Op(rng.choice(["insert", "heartbeat", "detach"]), name)  # refused: not attached
                if op.kind == "insert":
                    op.arg = rows(name)
            elif x < 0.40:
                op = Op("insert", name, rows(name))
            elif x < 0.55:
                below = rng.random() < 0.15 and p is not None and p.bound is not None
                base = mx(shadow.bound, p.bound if p is not None else None) or BASE
                op = Op("bound", name, (p.bound - MIN) if below and p and p.bound else base + rng.randint(0, 3) * MIN)
            elif x < 0.62:
                op = Op("heartbeat", name)
            elif x < 0.72:
                op = Op("detach", name)
            elif x < 0.80:
                op = Op(rng.choice(["stream", "tables", "archive"]))
            else:
                op = Op("advance", "", rng.choice([30_000_000, MIN, LEASE, 3 * MIN]))
        finishing, after_kill = after_kill, False
        if not finishing and op.kind in PRODUCER_OPS and rng.random() < (0.3 if op.kind == "insert" else 0.12):
            op.kill = (rng.random(), rng.random())  # (the operation after a kill runs to its end)
            after_kill = True
        ops.append(op)
        if op.kind == "advance":
            now += op.arg
        else:
            ref_apply(shadow, op, now, release=True)
    return ops


def good_rows(op: Op) -> list[tuple[int, dict[str, Any]]]:
    return [(t, {"user_id": u, "url": url}) for u, t, url in op.arg if u is not None]


def ref_apply(ref: RefStream, op: Op, now: int, release: bool) -> bool:
    """``op`` on the reference (then its release, if ``release``); False when the rules refuse it."""
    try:
        if op.kind == "attach":
            ref.attach(op.name, now, LEASE, op.arg)
        elif op.kind == "insert":
            ref.insert(op.name, good_rows(op), now, LEASE, 0)
        elif op.kind == "bound":
            ref.assert_bound(op.name, op.arg, now, LEASE)
        elif op.kind == "heartbeat":
            ref.heartbeat(op.name, now, LEASE)
        elif op.kind == "detach":
            ref.detach(op.name, now)
        elif op.kind == "archive":  # with clock: bound, archiving first expires leases and releases
            ref.observe(now)
        else:  # stream, tables: read, after finishing what a crashed operation left
            return True
    except RefError:
        return False
    if release:
        ref.release(now)
    return True


# -- processes killed at random instants ------------------------------------------------------------


class Lines:
    """The lines a worker prints, read without blocking past a deadline (select on the raw pipe;
    a buffered reader would hide lines select no longer sees)."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdout is not None
        self.fd = proc.stdout.fileno()
        self.buf = b""

    def next(self, timeout: float) -> str | None:
        """The next line ('' at the end of the output), or None when ``timeout`` passes first."""
        deadline = time.monotonic() + timeout
        while b"\n" not in self.buf:
            ready, _, _ = select.select([self.fd], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                return None
            chunk = os.read(self.fd, 65536)
            if not chunk:
                line, self.buf = self.buf, b""
                return line.decode(errors="replace")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return line.decode(errors="replace") + "\n"


class Workers:
    """``tests/kill_worker.py`` processes: the one in use (until it is killed), and the next one
    starting in the background."""

    def __init__(self, log_dir: str) -> None:
        self.log_dir = log_dir
        self.remote = None if os.environ.get("LAKEHOUSE_TESTS_OWN_SPARK") == "1" else suite_server()
        """The suite's Spark Connect server the workers use (None: a Spark of their own each,
        LAKEHOUSE_TESTS_OWN_SPARK=1)."""
        self.n = 0
        self.current: subprocess.Popen[bytes] | None = None
        self.lines: Lines | None = None
        self.next = self._start()

    def _start(self) -> subprocess.Popen[bytes]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("LAKEHOUSE_")}
        env.update(LAKEHOUSE_MASTER="local[1]", LAKEHOUSE_JAVA_OPTS=FAST_JVM, PYTHONPATH=str(REPO))
        if self.remote is not None:
            env["LAKEHOUSE_REMOTE"] = self.remote
        self.n += 1
        err = open(os.path.join(self.log_dir, f"worker-{self.n}.log"), "w")  # noqa: SIM115 - the child's
        return subprocess.Popen([sys.executable, "-m", "tests.kill_worker"], cwd=REPO, env=env,
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, start_new_session=True)

    def take(self) -> tuple[subprocess.Popen[bytes], Lines]:
        """A worker ready for a command: the current one, or (after a kill) the next."""
        if self.current is not None and self.lines is not None and self.current.poll() is None:
            return self.current, self.lines
        proc, self.next = self.next, self._start()
        lines = Lines(proc)
        line = lines.next(300)
        assert line is not None and line.strip() == "ready", f"a kill worker did not start: {line!r}"
        self.current, self.lines = proc, lines
        return proc, lines

    def close(self) -> None:
        for proc in (self.current, self.next):
            if proc is not None:
                kill_group(proc)


def kill_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL the process and everything of its group (Spark's JVM, Python workers); wait until
    none is left."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            os.killpg(proc.pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)
    raise AssertionError(f"process group {proc.pid} outlived SIGKILL")


def command(p: Project, op: Op, now: int) -> list[str]:
    base = ["--project", str(p.root), "--warehouse", p.settings.warehouse, "producer", "clicks", op.name]
    if op.kind == "attach":
        return [*base, "attach", *(["--bound", iso(op.arg)] if op.arg is not None else []), "--now", iso(now)]
    if op.kind == "bound":
        return [*base, "bound", iso(op.arg), "--now", iso(now)]
    if op.kind == "insert":
        return [*base, "insert", op.file, "--now", iso(now)]
    return [*base, op.kind, "--now", iso(now)]


# -- what the table holds ----------------------------------------------------------------------------


def staged_ids(p: Project) -> Counter[int]:
    """User ids of the rows staged now, read from the stream's segments and their staging files."""
    out: Counter[int] = Counter()
    for seg in StreamStore(p.lh.paths("clicks")).read().segments:
        folder = os.path.join(seg.data["path"], "rows")
        if seg.staged <= 0 or not os.path.isdir(folder):
            assert seg.staged <= 0, f"segment {seg.id}: {seg.staged} rows staged, no files"
            continue
        t = ds.dataset(folder, format="parquet").to_table(columns=["user_id", "at", "_lh_kind", "_lh_file"]).to_pylist()
        for r in t:
            if r["_lh_kind"] != 0 or r["_lh_file"] in seg.data.get("failed", []):
                continue
            at = to_micros(r["at"])
            if (seg.late_below is None or at >= seg.late_below) and (seg.released_upto is None or at > seg.released_upto):
                out[r["user_id"]] += 1
    return out


def stored_ids(p: Project) -> Counter[int]:
    paths = p.lh.paths("clicks")
    return Counter(r["user_id"] for part in (paths.live, paths.archive)
                   for r in delta_log.scan(part, "SELECT user_id FROM t").to_pylist())


@dataclass
class Books:
    """What the test sent: rows of inserts that happened, and of inserts killed before that."""

    happened: dict[str, tuple[int | None, str]] = field(default_factory=dict)
    """url -> (user id, or None for a bad row; producer)."""
    discarded: set[str] = field(default_factory=set)
    """urls of inserts that never happened (killed before their registration)."""


def url(reject: dict[str, Any]) -> str:
    """The url of a rejected row: its record is the CSV line as read, or the row as JSON."""
    record = reject["record"] or ""
    return str(json.loads(record)["url"]) if record.startswith("{") else record.split(",")[1]


def check(p: Project, ref: RefStream, books: Books, now: int, where: str) -> None:
    """The invariant after a completed operation (see the module's docstring)."""
    stored, staged = stored_ids(p), staged_ids(p)
    rejects = p.lh.rejects("clicks")
    late = Counter(url(r) for r in rejects if r["reason"] == "late_row")
    bad = Counter(url(r) for r in rejects if r["reason"] != "late_row")
    late_bound = {url(r): to_micros(r["bound"]) for r in rejects if r["reason"] == "late_row"}
    url_of = {u: x for x, (u, _) in books.happened.items() if u is not None}
    places: Counter[str] = Counter()
    for counter in (Counter({url_of.get(i, f"?{i}"): n for i, n in stored.items()}),
                    Counter({url_of.get(i, f"?{i}"): n for i, n in staged.items()}), late, bad):
        places.update(counter)
    wrong = {u: n for u, n in places.items() if n != 1 or u not in books.happened}
    missing = set(books.happened) - set(places)
    assert not wrong and not missing, (f"rows not in exactly one place: {wrong}; nowhere: {sorted(missing)}\n{where}")
    assert not books.discarded & set(places), f"rows of an insert that never happened: {books.discarded & set(places)}"
    assert set(bad) == {x for x, (u, _) in books.happened.items() if u is None}, where
    assert sorted(stored) == sorted(r.payload["user_id"] for r in ref.released_rows()), f"live/archive\n{where}"
    assert sorted(staged) == sorted(r.payload["user_id"] for r in ref.staged_rows), f"staged\n{where}"
    assert late_bound == {x.payload["url"]: x.bound for x in ref.late_rows}, f"late rows\n{where}"
    status = describe(StreamStore(p.lh.paths("clicks")), p.lh.definition("clicks"), p.lh.paths("clicks"), now)
    got = (None if status["bound"] is None else to_micros(status["bound"]),
           None if status["watermark"] is None else to_micros(status["watermark"]))
    want = (ref.bound, ref.shown_watermark(now))
    assert got == want, f"(B, watermark) {got} != {want}\n{where}"


# -- one seed ----------------------------------------------------------------------------------------


def state_key(p: Project) -> dict[str, Any]:
    s = StreamStore(p.lh.paths("clicks")).read()
    return {"events": s.event_seq, "floor": s.floor, "inserts": s.insert_seq,
            "producers": {n: (x.attached, x.holding, x.bound, x.lease_expires) for n, x in s.producers.items()},
            "release": s.release_seq, "pending": s.pending is not None}


def run_seed(seed: int, root: Any) -> dict[str, int]:
    p = Project(root / "proj").table(TABLE).create("clicks")
    plan = make_plan(seed, OPS_PER_SEED)
    clock = {"now": START}
    producers = {n: p.lh.table("clicks").producer(n, clock=lambda: clock["now"]) for n in NAMES}
    ref, books = RefStream(), Books()
    workers = Workers(str(root))
    took: dict[str, float] = {}
    steps: list[str] = []
    counts: Counter[str] = Counter()
    try:
        for i, op in enumerate(plan):
            now = clock["now"]
            steps.append(op.describe())
            where = f"seed {seed} (replay: LAKEHOUSE_KILL_SEEDS={seed}), step {i + 1}:\n  " + "\n  ".join(steps[-25:])
            if op.kind == "insert":
                op.file = p.csv(f"s{i}.csv", ["user_id", "url", "at"],
                                [[f"x{url[1:]}" if u is None else u, url, iso(t)] for u, t, url in op.arg])
            if op.kind == "advance":
                clock["now"] += op.arg
                continue
            if op.kill is not None:
                counts["killed"] += run_killed(p, op, now, ref, books, workers, took, where)
                counts["operations"] += 1
                continue
            started = time.monotonic()
            refused = False
            try:
                if op.kind == "attach":
                    producers[op.name].attach(None if op.arg is None else iso(op.arg))
                elif op.kind == "insert":
                    producers[op.name].insert_files([op.file])
                elif op.kind == "bound":
                    producers[op.name].bound(iso(op.arg))
                elif op.kind == "heartbeat":
                    producers[op.name].heartbeat()
                elif op.kind == "detach":
                    producers[op.name].detach()
                elif op.kind == "stream":
                    p.lh.stream_status("clicks", iso(now))
                elif op.kind == "tables":
                    p.lh.tables()
                elif op.kind == "archive":
                    p.lh.archive("clicks", now=dt.datetime.fromisoformat(iso(now).replace("Z", "+00:00")))
            except Exception as e:  # noqa: BLE001 - only the rules' refusals are expected
                if "not attached" not in str(e) and "below its own bound" not in str(e):
                    raise AssertionError(f"{type(e).__name__}: {e}\n{where}") from e
                refused = True
            took[op.kind] = time.monotonic() - started
            if os.environ.get("LAKEHOUSE_KILL_TRACE"):
                print(f"{time.monotonic() - started:6.2f}s {op.describe()}", flush=True)
            accepted = ref_apply(ref, op, now, release=True)
            assert accepted != refused, f"refused: implementation {refused}, reference {not accepted}\n{where}"
            if op.kind == "insert" and accepted:
                books.happened.update({x: (u, op.name) for u, _, x in op.arg})
            counts["operations"] += 1
            check(p, ref, books, now, where)
    finally:
        workers.close()
    return dict(counts)


def run_killed(p: Project, op: Op, now: int, ref: RefStream, books: Books, workers: Workers,
               took: dict[str, float], where: str) -> int:
    """Run ``op`` as a command and SIGKILL it at the drawn instant; take on the reference what the
    durable state says happened. 1 if it was killed (0: it finished first)."""
    before = state_key(p)
    proc, lines = workers.take()
    assert proc.stdin is not None and op.kill is not None
    anchors = ANCHORS[op.kind]
    anchor = anchors[int(op.kill[0] * len(anchors))]
    delay = op.kill[1] * took.get(f"{op.kind} after {anchor}", FIRST_GAP)
    started = time.monotonic()
    seen: list[tuple[str, float]] = [("start", started)]
    # the worker arms the kill itself when it passes the anchor (tests/kill_worker.py)
    proc.stdin.write((json.dumps({"args": command(p, op, now), "kill": [anchor, delay]}) + "\n").encode())
    proc.stdin.flush()
    code = None
    while True:  # the command's lines: the points it passes, then "done <exit code>"
        got = lines.next(600.0)
        assert got is not None, f"a command hangs\n{where}"
        if not got:
            break  # killed at the instant
        line = got.strip()
        if line.startswith("done ") or line.startswith("point "):
            seen.append((line.split()[1], time.monotonic()))
        if line.startswith("done "):
            code = int(line.split()[1])
            break
    if code is not None:  # it finished before the instant: a completed operation (the worker goes on)
        for (point, at), (_, after) in zip(seen, seen[1:]):  # how long each step took, for later kills
            took[f"{op.kind} after {point}"] = after - at
        if os.environ.get("LAKEHOUSE_KILL_TRACE"):
            print(f"  finished before the kill: {op.describe()}", flush=True)
        accepted = ref_apply(ref, op, now, release=True)
        assert (code == 0) == accepted, f"exit {code}, reference accepted {accepted}\n{where}"
        if op.kind == "insert" and accepted:
            books.happened.update({x: (u, op.name) for u, _, x in op.arg})
        check(p, ref, books, now, where)
        return 0
    kill_group(proc)
    if workers.remote is not None:  # its jobs still running on the server end now, as the next command's fence ends them
        fence.fence(workers.remote)
    after = state_key(p)
    saved = {k: v for k, v in after.items() if k not in ("release", "pending")} != \
        {k: v for k, v in before.items() if k not in ("release", "pending")}
    planned = after["pending"] or after["release"] > before["release"]
    if os.environ.get("LAKEHOUSE_KILL_TRACE"):
        print(f"  killed {delay:.2f}s after {anchor}: {op.describe()}: saved {saved}, release planned "
              f"{planned}, committed {after['release'] > before['release']}", flush=True)
    assert saved or not planned, where
    if saved:  # the operation happened (it is one save): the reference takes it, then the release if planned
        assert ref_apply(ref, op, now, release=False), f"saved by the implementation, refused by the reference\n{where}"
        if planned:
            ref.release(now)
        elif ref.floor != after["floor"]:  # killed after the save of the watermark it leaves (no release)
            ref.observe(now)
        assert ref.floor == after["floor"], f"floor {after['floor']} != reference {ref.floor}\n{where}"
        if op.kind == "insert":
            books.happened.update({x: (u, op.name) for u, _, x in op.arg})
    elif op.kind == "insert":
        books.discarded.update(x for _, _, x in op.arg)
    # right after the kill: nothing doubled anywhere
    assert not [i for i, n in stored_ids(p).items() if n > 1], f"rows twice after the kill\n{where}"
    return 1


@pytest.mark.parametrize("seed", SEEDS)
def test_random_kills_lose_and_double_nothing(spark: Any, tmp_path: Any, seed: int) -> None:
    print(f"seed {seed} (replay: LAKEHOUSE_KILL_SEEDS={seed})")
    counts = run_seed(seed, tmp_path)
    print(f"seed {seed}: {counts}")
    # the seed must exercise kills, and the seeds together at least 200 operations
    assert counts.get("killed", 0) >= 2 and counts["operations"] >= 200 // len(DEFAULT_SEEDS.split(",")), counts
