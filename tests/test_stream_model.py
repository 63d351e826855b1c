"""The stream's state machine (lakehouse.stream.model) against the reference model of
tests/stream_reference.py, written from the issue's rules. Pure: no Spark.

Random interleavings of attach (with and without a bound), insert (batches with duplicates, times
below B, empty batches), bound (also below the producer's own bound), heartbeat, detach (also of
a producer not attached), clock advances that expire leases, ticks and JSON round trips, with
allowed lateness None, 0, small and large. After every step: the same errors, B, watermark, each
producer's bound / attached / holding / rejected, rows staged, the multiset of event times each
operation released, and the late rows with the bound they broke.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lakehouse.stream.model import StreamError, StreamState
from tests.stream_reference import RefError, RefStream, mx

NAMES = ("P1", "P2", "P3")
START = 1_000_000


@dataclass
class Pair:
    """The implementation and the reference, driven in lock step."""

    lateness: int | None
    lease: int
    impl: StreamState = field(default_factory=StreamState)
    ref: RefStream = field(default_factory=RefStream)
    now: int = START
    times: dict[str, list[int]] = field(default_factory=dict)
    """Segment id -> its staged (non-late) event times, sorted (as ``times_of`` must give)."""
    log: list[str] = field(default_factory=list)
    reported: set[tuple[str, int]] = field(default_factory=set)
    """(producer, lease_expires) of the expiries the implementation reported."""

    # -- plumbing -------------------------------------------------------------------------------------

    def _release_impl(self) -> list[int]:
        """Release until nothing is due (the automatic release after an operation)."""
        out: list[int] = []
        for _ in range(1000):
            rel = self.impl.plan_release(self.now, lambda seg: self.times[seg.id])
            if rel is None:
                return out
            got = []
            for sid, (lo, hi) in rel.ranges.items():
                ts = self.times[sid]
                got += [t for t in ts if (lo is None or t > lo) and t <= hi]
            assert len(got) == rel.rows, (rel, got)
            assert rel.bound == mx(self.impl.bound, max(got)), rel
            events = self.impl.apply_release(rel)
            assert [(e.kind, e.rows, e.bound) for e in events] == [("release", rel.rows, rel.bound)]
            out += got
        raise AssertionError("plan_release never returns None")

    def _expiring(self) -> set[tuple[str, int]]:
        """Expiries the next operation must report (one event per lease that ran out)."""
        return {(p.name, p.lease_expires) for p in self.ref.producers.values()
                if p.attached and p.lease_expires is not None and p.lease_expires <= self.now
                and (p.name, p.lease_expires) not in self.reported}

    def _do(self, desc: str, impl_op: Any, ref_op: Any, kinds: tuple[str, ...] = ()) -> tuple[Any, Any]:
        """``impl_op`` returns (events, result); ``kinds``: events the operation must report."""
        self.log.append(desc)
        impl_err = ref_err = None
        impl_res = ref_res = None
        before = json.dumps(self.impl.to_json(), sort_keys=True)
        expiring = self._expiring()
        try:
            events, impl_res = impl_op()
        except StreamError as e:
            impl_err = e
        try:
            ref_res = ref_op()
        except RefError as e:
            ref_err = e
        assert (impl_err is None) == (ref_err is None), \
            f"{desc}: implementation raised {impl_err!r}, reference raised {ref_err!r}\n{self.trace()}"
        if impl_err is not None:
            assert json.dumps(self.impl.to_json(), sort_keys=True) == before, \
                f"{desc}: the refused operation changed the state\n{self.trace()}"
            self.check(released_impl=[], released_ref=[], desc=desc, after_op=False)
            return None, None
        expired = {(e.producer, e.at) for e in events if e.kind == "expiry"}
        assert len(expired) == sum(e.kind == "expiry" for e in events)
        assert expired == expiring, f"{desc}: expiry events {expired} != expected {expiring}\n{self.trace()}"
        self.reported |= expired
        others = [e.kind for e in events if e.kind != "expiry"]
        assert others == list(kinds), f"{desc}: events {others} != {list(kinds)}\n{self.trace()}"
        rel_impl = self._release_impl()
        rel_ref = [r.t for r in self.ref.release(self.now)]
        self.check(released_impl=rel_impl, released_ref=rel_ref, desc=desc, after_op=True)
        return impl_res, ref_res

    def trace(self) -> str:
        return "steps:\n  " + "\n  ".join(self.log)

    def check(self, released_impl: list[int], released_ref: list[int], desc: str, after_op: bool) -> None:
        i, r, now = self.impl, self.ref, self.now
        where = f"after {desc} (now={now})\n{self.trace()}"
        assert Counter(released_impl) == Counter(released_ref), f"released {sorted(released_impl)} != reference {sorted(released_ref)} {where}"
        assert i.bound == r.bound, f"B {i.bound} != reference {r.bound} {where}"
        assert i.watermark(now) == r.watermark(now), f"watermark {i.watermark(now)} != reference {r.watermark(now)} {where}"
        assert set(i.producers) == set(r.producers), where
        holders = {p.name for p in i.holders(now)}
        for name, rp in r.producers.items():
            ip = i.producers[name]
            assert ip.attached == rp.attached, f"{name}.attached {ip.attached} != {rp.attached} {where}"
            assert (name in holders) == rp.holds(now), f"{name} holding {name in holders} != {rp.holds(now)} {where}"
            if after_op:
                assert ip.holding == rp.holds(now), f"{name}.holding {ip.holding} != {rp.holds(now)} {where}"
            assert ip.rejected == rp.rejected, f"{name}.rejected {ip.rejected} != {rp.rejected} {where}"
            if rp.attached:  # a detached producer's bound is forgotten at its next attach
                assert ip.bound == rp.bound, f"{name}.bound {ip.bound} != reference {rp.bound} {where}"
            assert i.staged(name) == r.staged(name), f"staged({name}) {i.staged(name)} != {r.staged(name)} {where}"
        assert i.staged() == r.staged(), f"staged {i.staged()} != reference {r.staged()} {where}"
        # nothing lost: every row inserted is staged, released or late
        assert sum(len(v) for v in self.times.values()) == r.staged() + len(r.released_rows())

    # -- operations ---------------------------------------------------------------------------------

    def attach(self, name: str, bound: int | None = None) -> None:
        p = self.ref.producers.get(name)
        renew = p is not None and p.attached
        self._do(f"attach {name} bound={bound}",
                 lambda: (self.impl.attach(name, self.now, self.lease, bound), None),
                 lambda: self.ref.attach(name, self.now, self.lease, bound),
                 (("bound",) if bound is not None else ()) if renew else ("attach",))

    def bound(self, name: str, t: int) -> None:
        self._do(f"bound {name} {t}",
                 lambda: (self.impl.assert_bound(name, t, self.now, self.lease), None),
                 lambda: self.ref.assert_bound(name, t, self.now, self.lease), ("bound",))

    def heartbeat(self, name: str) -> None:
        self._do(f"heartbeat {name}",
                 lambda: (self.impl.heartbeat(name, self.now, self.lease), None),
                 lambda: self.ref.heartbeat(name, self.now, self.lease))

    def detach(self, name: str) -> None:
        self._do(f"detach {name}", lambda: (self.impl.detach(name, self.now), None),
                 lambda: self.ref.detach(name, self.now), ("detach",))

    def insert(self, name: str, times: list[int]) -> None:
        def impl_op() -> Any:
            seg, n_late, below, events = self.impl.insert(name, list(times), self.now, self.lease, self.lateness)
            if seg is not None:
                assert seg.id not in self.times
                assert seg.producer == name
                self.times[seg.id] = sorted(times)[n_late:]
            ins = [e for e in events if e.kind == "insert"]
            assert len(ins) == 1 and ins[0].rows == len(times) - n_late and ins[0].rejected == n_late, events
            return events, (seg, n_late, below)

        res = self._do(f"insert {name} {times}", impl_op,
                       lambda: self.ref.insert(name, [(t, None) for t in times], self.now, self.lease, self.lateness),
                       ("insert",))
        if res[0] is None:
            return
        (seg, n_late, below), ref = res
        where = f"insert {name} {times}\n{self.trace()}"
        assert n_late == len(ref.late), f"late {n_late} != reference {len(ref.late)}: {where}"
        assert (seg is None) == (not ref.staged), where
        if seg is not None:
            assert seg.rows == len(ref.staged), where
            assert Counter(self.times[seg.id]) == Counter(x.t for x in ref.staged), where
        if n_late:
            assert below == ref.late_below, f"late below {below} != reference {ref.late_below}: {where}"
            assert Counter(sorted(times)[:n_late]) == Counter(x.t for x in ref.late), where
            assert all(x.t < below and x.bound == below for x in ref.late)

    def advance(self, d: int) -> None:
        self.log.append(f"advance {d}")
        self.now += d
        self.check([], [], f"advance {d}", after_op=False)

    def tick(self) -> None:
        """What ``Stream.tick`` does: expire leases, then release what is due."""
        self._do("tick", lambda: (self.impl.expire(self.now), None), lambda: None)

    def roundtrip(self) -> None:
        self.log.append("JSON round trip")
        text = json.dumps(self.impl.to_json())
        self.impl = StreamState.from_json(json.loads(text))
        assert json.dumps(self.impl.to_json()) == text
        self.check([], [], "JSON round trip", after_op=False)


# -- generated interleavings ---------------------------------------------------------------------------
#
# An operation is a tuple; times and bounds are either absolute (small integers, so duplicates and
# times below B are common) or relative to the producer's own bound or to B at the time of the step.

name_st = st.sampled_from(NAMES + ("PX",))  # PX: never attached
absolute = st.integers(0, 120)
relative = st.integers(-12, 12)
time_st = st.one_of(st.tuples(st.just("abs"), absolute), st.tuples(st.just("rel"), relative))
op_st = st.one_of(
    st.tuples(st.just("attach"), name_st, st.none() | time_st),
    st.tuples(st.just("insert"), name_st, st.lists(time_st, max_size=6)),
    st.tuples(st.just("insert"), name_st, st.lists(time_st, max_size=6)),
    st.tuples(st.just("bound"), name_st, time_st),
    st.tuples(st.just("heartbeat"), name_st),
    st.tuples(st.just("detach"), name_st),
    st.tuples(st.just("advance"), st.integers(0, 25)),
    st.tuples(st.just("tick")),
    st.tuples(st.just("roundtrip")),
)
lateness_st = st.sampled_from([None, 0, 3, 1000])
lease_st = st.sampled_from([10, 30, 1])


def resolve(pair: Pair, name: str, spec: tuple[str, int]) -> int:
    kind, v = spec
    if kind == "abs":
        return v
    p = pair.ref.producers.get(name)
    base = mx(pair.ref.bound, p.bound if p is not None and p.attached else None)
    return (60 if base is None else base) + v


def run(pair: Pair, ops: list[tuple[Any, ...]]) -> None:
    for op in ops:
        run_one(pair, op)
    # in the end everybody leaves: everything staged is released, nothing is lost
    for name, p in list(pair.ref.producers.items()):
        if p.attached:
            pair.detach(name)
    assert pair.impl.staged() == 0 and pair.ref.staged() == 0
    assert pair.impl.watermark(pair.now) == pair.impl.top  # max(B, floor) when nobody holds


@settings(max_examples=1500, deadline=None, suppress_health_check=list(HealthCheck))
@given(lateness=lateness_st, lease=lease_st, ops=st.lists(op_st, max_size=40))
def test_interleavings_match_reference(lateness: int | None, lease: int, ops: list[tuple[Any, ...]]) -> None:
    run(Pair(lateness, lease), ops)


def random_ops(rng: random.Random, n: int) -> list[tuple[Any, ...]]:
    """Operations biased towards the interesting: producers mostly attached, inserts and bounds
    near B, leases running out."""
    def t() -> tuple[str, int]:
        return ("rel", rng.randint(-6, 8)) if rng.random() < 0.7 else ("abs", rng.randint(0, 120))

    ops: list[tuple[Any, ...]] = []
    for _ in range(n):
        name = rng.choice(NAMES[: rng.choice([2, 3])]) if rng.random() > 0.03 else "PX"
        x = rng.random()
        if x < 0.18:
            ops.append(("attach", name, None if rng.random() < 0.5 else t()))
        elif x < 0.45:
            ops.append(("insert", name, [t() for _ in range(rng.choice([0, 1, 2, 3, 5]))]))
        elif x < 0.62:
            ops.append(("bound", name, t()))
        elif x < 0.7:
            ops.append(("heartbeat", name))
        elif x < 0.76:
            ops.append(("detach", name))
        elif x < 0.94:
            ops.append(("advance", rng.choice([0, 1, 5, 9, 10, 11, 20])))
        elif x < 0.97:
            ops.append(("tick",))
        else:
            ops.append(("roundtrip",))
    return ops


@pytest.mark.parametrize("seed", range(8))
def test_seeded_long_interleavings(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(80):
        run(Pair(rng.choice([None, 0, 2, 1000]), rng.choice([10, 15])), random_ops(rng, 60))


@settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))
@given(lateness=lateness_st, lease=lease_st, ops=st.lists(op_st, max_size=30),
       cut=st.integers(0, 30), rest=st.lists(op_st, max_size=15))
def test_json_round_trip_changes_nothing(lateness: int | None, lease: int, ops: list[tuple[Any, ...]],
                                         cut: int, rest: list[tuple[Any, ...]]) -> None:
    """A state written to JSON and read back is the same state and behaves the same: the same
    operations on the original and on the copy give the same JSON after each step. (The
    interleavings above also replace the state by its JSON copy at random points.)"""
    a = Pair(lateness, lease)
    for op in ops[:cut]:
        run_one(a, op)
    text = json.dumps(a.impl.to_json(), sort_keys=True)
    copy = StreamState.from_json(json.loads(text))
    assert json.dumps(copy.to_json(), sort_keys=True) == text
    original = a.impl
    for op in [*ops[cut:], *rest]:
        err_a = err_b = None
        try:
            apply_impl_only(original, a.now, lease, lateness, op, a.times)
        except StreamError as e:
            err_a = e
        try:
            apply_impl_only(copy, a.now, lease, lateness, op, a.times)
        except StreamError as e:
            err_b = e
        assert (err_a is None) == (err_b is None)
        if op[0] == "advance":
            a.now += op[1]
        assert json.dumps(original.to_json(), sort_keys=True) == json.dumps(copy.to_json(), sort_keys=True)
        assert original.watermark(a.now) == copy.watermark(a.now)


def run_one(pair: Pair, op: tuple[Any, ...]) -> None:
    kind = op[0]
    if kind == "attach":
        pair.attach(op[1], None if op[2] is None else resolve(pair, op[1], op[2]))
    elif kind == "insert":
        pair.insert(op[1], [resolve(pair, op[1], s) for s in op[2]])
    elif kind == "bound":
        pair.bound(op[1], resolve(pair, op[1], op[2]))
    elif kind == "heartbeat":
        pair.heartbeat(op[1])
    elif kind == "detach":
        pair.detach(op[1])
    elif kind == "advance":
        pair.advance(op[1])
    elif kind == "tick":
        pair.tick()
    elif kind == "roundtrip":
        pair.roundtrip()


def apply_impl_only(s: StreamState, now: int, lease: int, lateness: int | None, op: tuple[Any, ...],
                    times: dict[str, list[int]]) -> None:
    """One operation on an implementation state alone (absolute times: ``rel`` counts from 60),
    then the automatic release."""
    def t(spec: tuple[str, int]) -> int:
        return spec[1] if spec[0] == "abs" else 60 + spec[1]

    kind = op[0]
    if kind == "attach":
        s.attach(op[1], now, lease, None if op[2] is None else t(op[2]))
    elif kind == "insert":
        ts = [t(x) for x in op[2]]
        seg, n_late, _, _ = s.insert(op[1], ts, now, lease, lateness)
        if seg is not None:
            times.setdefault(seg.id, sorted(ts)[n_late:])
            assert times[seg.id] == sorted(ts)[n_late:]
    elif kind == "bound":
        s.assert_bound(op[1], t(op[2]), now, lease)
    elif kind == "heartbeat":
        s.heartbeat(op[1], now, lease)
    elif kind == "detach":
        s.detach(op[1], now)
    elif kind == "tick":
        s.expire(now)
    else:
        return
    while (rel := s.plan_release(now, lambda seg: times[seg.id])) is not None:
        s.apply_release(rel)


# -- hand-written cases --------------------------------------------------------------------------------

MIN = 60_000_000
LEASE = 5 * MIN


def hm(h: int, m: int) -> int:
    """A time of day (micros) on 2026-11-20."""
    return 1_794_960_000_000_000 + (h * 60 + m) * MIN


def test_issue_example_step_by_step() -> None:
    """The issue's example (allowed lateness 0), on the implementation and the reference."""
    pair = Pair(0, LEASE, now=hm(12, 0))
    s, r = pair.impl, pair.ref
    pair.attach("P1", hm(10, 0))  # B undefined
    assert s.bound is None and s.producers["P1"].bound == hm(10, 0) and s.watermark(pair.now) == hm(10, 0)
    pair.insert("P1", [hm(10, 0)])  # released at once: R = 10:00
    assert s.bound == hm(10, 0) and s.staged() == 0 and [x.t for x in r.released_rows()] == [hm(10, 0)]
    pair.attach("P2", hm(10, 5))
    assert s.producers["P2"].bound == hm(10, 5) and s.watermark(pair.now) == hm(10, 0)
    pair.insert("P2", [hm(10, 5)])  # staged: R = min(10:00, 10:05)
    assert s.bound == hm(10, 0) and s.staged() == 1 and s.staged("P2") == 1
    seg, n_late, below, _ = s.insert("P2", [hm(9, 59)], pair.now, LEASE, 0)  # late_row
    assert (seg, n_late, below) == (None, 1, hm(10, 5)) and s.producers["P2"].rejected == 1
    r.insert("P2", [(hm(9, 59), None)], pair.now, LEASE, 0)
    pair.check([], [], "P2's 9:59 row", after_op=True)
    pair.detach("P1")  # R = 10:05: the 10:05 row goes
    assert s.bound == hm(10, 5) and s.staged() == 0 and s.watermark(pair.now) == hm(10, 5)
    pair.detach("P2")
    assert s.watermark(pair.now) == hm(10, 5) and not s.holders(pair.now)
    pair.advance(60 * MIN)
    pair.attach("P3")  # starts at B
    assert s.producers["P3"].bound == hm(10, 5)
    seg, n_late, below, _ = s.insert("P3", [hm(10, 1)], pair.now, LEASE, 0)
    assert (seg, n_late, below) == (None, 1, hm(10, 5)) and s.producers["P3"].rejected == 1
    assert s.bound == hm(10, 5)


def test_bound_below_own_bound_is_refused_and_changes_nothing() -> None:
    pair = Pair(0, 10)
    pair.attach("P1", 50)
    pair.insert("P1", [60])
    before = json.dumps(pair.impl.to_json(), sort_keys=True)
    with pytest.raises(StreamError):
        pair.impl.assert_bound("P1", 59, pair.now + 5, 10)
    assert json.dumps(pair.impl.to_json(), sort_keys=True) == before  # the lease is not renewed either
    pair.bound("P1", 59)  # through the pair: both refuse
    pair.bound("P1", 60)  # equal to its own bound: fine
    pair.attach("P1", 55)  # attached already: asserting a lower bound is refused too
    assert pair.impl.producers["P1"].bound == 60


def test_not_attached_operations_are_refused() -> None:
    pair = Pair(None, 10)
    for op in (lambda: pair.insert("PX", [1]), lambda: pair.bound("PX", 1), lambda: pair.heartbeat("PX"),
               lambda: pair.detach("PX")):
        op()
        assert "PX" not in pair.impl.producers
    pair.attach("P1")
    pair.detach("P1")
    for _what, call in (("insert", lambda: pair.impl.insert("P1", [1], pair.now, 10, None)),
                       ("bound", lambda: pair.impl.assert_bound("P1", 1, pair.now, 10)),
                       ("heartbeat", lambda: pair.impl.heartbeat("P1", pair.now, 10)),
                       ("detach", lambda: pair.impl.detach("P1", pair.now))):
        with pytest.raises(StreamError):
            call()


def test_undefined_holder_blocks_release_and_no_holder_releases_all() -> None:
    pair = Pair(None, 10)
    pair.attach("P1")  # B undefined: P1's bound is undefined
    pair.attach("P2", 100)
    pair.insert("P2", [5, 100, 7])
    assert pair.impl.staged() == 3 and pair.impl.watermark(pair.now) is None
    pair.detach("P2")
    assert pair.impl.staged() == 3 and pair.impl.bound is None
    pair.detach("P1")  # nobody holds: everything goes
    assert pair.impl.staged() == 0 and pair.impl.bound == 100 and pair.impl.watermark(pair.now) == 100


def test_expired_producer_rejoins_at_b() -> None:
    pair = Pair(0, 10)
    pair.attach("P1", 10)
    pair.attach("P2", 10)
    pair.insert("P2", [30])  # staged: P1 holds at 10
    assert pair.impl.staged() == 1
    pair.advance(10)  # both leases run out (lease_expires <= now)
    assert pair.impl.watermark(pair.now) == pair.impl.top  # max(B, floor) when nobody holds is None
    pair.heartbeat("P2")  # P2 holds alone: R = 30, released
    assert pair.impl.bound == 30 and pair.impl.staged() == 0
    assert pair.impl.producers["P1"].attached and not pair.impl.producers["P1"].holding
    pair.bound("P1", 20)  # its own bound is now max(10, B) = 30: refused
    assert pair.impl.producers["P1"].bound == 10 and not pair.impl.producers["P1"].holding
    pair.heartbeat("P1")  # rejoins at B
    assert pair.impl.producers["P1"].bound == 30 and pair.impl.watermark(pair.now) == 30
    seg, n_late, below, _ = pair.impl.insert("P1", [29, 30], pair.now, 10, 0)
    assert n_late == 1 and below == 30


def test_detached_producer_attaching_again_starts_fresh() -> None:
    pair = Pair(None, 10)
    pair.attach("P2", 5)  # first: a producer joining later starts at the watermark then (5)
    pair.attach("P1", 100)
    pair.insert("P1", [50])  # no lateness: staged (R = 5)
    pair.detach("P1")
    pair.attach("P1", 7)  # forgets 100: starts at max(B, 7)
    assert pair.impl.producers["P1"].bound == 7 and pair.impl.staged() == 1
    pair.detach("P2")
    assert pair.impl.staged() == 1 and pair.impl.bound is None  # P1 holds at 7 < 50
    pair.bound("P1", 50)
    assert pair.impl.bound == 50 and pair.impl.staged() == 0


def test_an_empty_insert_renews_the_lease() -> None:
    pair = Pair(0, 10)
    pair.attach("P1", 5)
    pair.advance(9)
    pair.insert("P1", [])
    pair.advance(9)
    assert [p.name for p in pair.impl.holders(pair.now)] == ["P1"]
    pair.advance(1)
    assert not pair.impl.holders(pair.now)


def test_json_round_trip_of_a_pending_release() -> None:
    """A release planned and saved (pending) reads back the same and applies the same."""
    s, now, times = StreamState(), START, {}
    s.attach("P1", now, 10, 10)
    s.attach("P2", now, 10, 10)
    for name, ts in (("P1", [15, 12, 20, 15]), ("P2", [30, 11, 15])):
        seg, n_late, _, _ = s.insert(name, ts, now, 10, 0)
        times[seg.id] = sorted(ts)[n_late:]
    rel = s.plan_release(now, lambda seg: times[seg.id])  # R = min(20, 30)
    assert rel is not None and rel.rows == 6 and rel.bound == 20 and rel.upto == 20
    s.pending = rel
    copy = StreamState.from_json(json.loads(json.dumps(s.to_json())))
    assert copy.pending == rel
    s.apply_release(rel)
    copy.apply_release(copy.pending)
    assert json.dumps(copy.to_json(), sort_keys=True) == json.dumps(s.to_json(), sort_keys=True)
    assert s.staged() == 1 and s.staged("P2") == 1 and s.bound == 20 and s.pending is None
    assert s.plan_release(now, lambda seg: times[seg.id]) is None


def test_the_watermark_never_goes_back_when_producers_join_or_leave() -> None:
    """A holder asserts a bound far above the rows it sent: the watermark is that bound, and a
    producer joining, or the holder leaving, does not take it back to B (a cutoff sealed from it
    stays safe); a joiner's rows below it are late under strict bounds."""
    lease, now = 10**9, 0
    s = StreamState()
    s.attach("A", now, lease)
    s.insert("A", [9], now, lease, 0)
    s.apply_release(s.plan_release(now, lambda seg: [9]))  # type: ignore[arg-type]
    s.assert_bound("A", 12, now, lease)
    assert (s.bound, s.watermark(now)) == (9, 12)
    s.attach("C", now, lease)
    assert s.producers["C"].bound == 12 and s.watermark(now) == 12
    _, late, below, _ = s.insert("C", [10], now, lease, 0)
    assert (late, below) == (1, 12)
    s.detach("A", now)
    s.detach("C", now)
    assert s.watermark(now) == 12 and s.bound == 9


def test_idempotency_keys_follow_deltas_txn_rule() -> None:
    """An insert's key (app, version) is remembered with it: that version and every lower one of
    the app are seen (from any producer, across a JSON round trip); another app, or a higher
    version, is not. Version 0 is a version like any other."""
    s, now, lease = StreamState(), START, 10
    s.attach("P1", now, lease)
    s.attach("P2", now, lease)
    assert s.seen_key(("q", 0)) is None
    s.insert("P1", [5], now, lease, None, "o", 1, key=("q", 0))
    assert s.seen_key(("q", 0)) is s.producers["P1"] and s.seen_key(("q", 1)) is None
    s.insert("P2", [], now, lease, None, "o2", 1, key=("q", 7))  # an empty batch's key counts too
    copy = StreamState.from_json(json.loads(json.dumps(s.to_json())))
    for state in (s, copy):
        assert state.seen_key(("q", 3)) is not None and state.seen_key(("q", 7)) is not None
        assert state.seen_key(("q", 8)) is None and state.seen_key(("other", 0)) is None
        assert state.seen_by("o", 1) is not None  # the write path's own origins are untouched
    s.detach("P2", now)
    s.attach("P2", now, lease)  # attaching again keeps what it inserted
    assert s.seen_key(("q", 7)) is s.producers["P2"]


@pytest.mark.parametrize("key", [("", 1), ("q", -1), ("q", 1.0), ("q", True), ("a\nb", 1), ("q",), "q", None,
                                 ("x" * 501, 1), (1, 1)])
def test_bad_idempotency_keys_are_refused_in_one_line(key: Any) -> None:
    s = StreamState()
    s.attach("P1", START, 10)
    with pytest.raises(StreamError, match="bad idempotency key") as e:
        s.insert("P1", [1], START, 10, None, key=key) if key is not None else s.seen_key(key)  # type: ignore[arg-type]
    assert "\n" not in str(e.value)
    assert s.producers["P1"].inserted == 0


def test_rows_that_do_not_move_the_bound_wait_for_a_later_bound() -> None:
    """A pipeline's producer whose bound is its watermark: rows above the bound stay staged while
    it holds, go once a bound passes them, and a row behind the bound by more than the lateness is
    late."""
    s, now, lease = StreamState(), START, 10**9
    times: dict[str, list[int]] = {}
    s.attach("Q", now, lease, 100)
    seg, late, _, _ = s.insert("Q", [150, 120, 180], now, lease, 5, moves_bound=False)
    assert seg is not None and late == 0 and s.producers["Q"].bound == 100
    times[seg.id] = [120, 150, 180]
    assert s.plan_release(now, lambda g: times[g.id]) is None  # nothing is behind the bound yet
    s.assert_bound("Q", 160, now, lease)
    rel = s.plan_release(now, lambda g: times[g.id])
    assert rel is not None and rel.rows == 2 and rel.upto == 160
    s.apply_release(rel)
    _, late, below, _ = s.insert("Q", [154, 156], now, lease, 5, moves_bound=False)
    assert (late, below) == (1, 155)
    s.detach("Q", now)
    rel = s.plan_release(now, lambda g: times.get(g.id, [156]))
    assert rel is not None and rel.upto is None  # no holder: everything staged goes
