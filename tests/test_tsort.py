"""Pure tests for the file T-sort (lakehouse/ingest/tsort.py).

The rule: T = (implied time, file name); a newly seen file with T < T_read is late; otherwise it
is queued. pop (delay >= 0) takes the head while time(tail) - time(head) >= delay. delay < 0:
files are taken in push order and nothing is late. drain takes everything queued, in order.

The randomized tests compare the implementation with a small independent model (`Model` below)
that keeps times as integer minutes and never uses the implementation.
"""

from __future__ import annotations

import datetime as dt
import random

from hypothesis import given, settings
from hypothesis import strategies as st

from lakehouse.ingest.tsort import FileTSort, T

MINUTE_MS = 60_000
EPOCH = dt.datetime(2024, 5, 1, tzinfo=dt.timezone.utc)


def at(minute: int, name: str | None = None) -> T:
    """The T of a file whose implied time is EPOCH + minute; named by its minute by default."""
    return T(EPOCH + dt.timedelta(minutes=minute), f"{minute:04d}" if name is None else name)


def names(ts: list[T]) -> list[str]:
    return [t.name for t in ts]


# -- the worked example (delay 10 minutes) ---------------------------------------------------


def test_example_first_three_files_wait() -> None:
    s = FileTSort(10 * MINUTE_MS)
    for m in (0, 4, 8):
        assert s.push(at(m)) is True
        assert s.pop() == []
    assert names(s.queue) == ["0000", "0004", "0008"]
    assert s.t_read is None


def test_example_step_by_step() -> None:
    s = FileTSort(10 * MINUTE_MS)
    for m in (0, 4, 8):
        s.push(at(m))
        s.pop()

    # 0006 arrives: queued in time order, still nothing taken (8 - 0 < 10)
    assert s.push(at(6)) is True
    assert names(s.queue) == ["0000", "0004", "0006", "0008"]
    assert s.pop() == []
    assert s.t_read is None

    # 0012 arrives: 12 - 0 >= 10, so 0000 is taken; 12 - 4 < 10, so the rest waits
    assert s.push(at(12)) is True
    assert s.pop() == [at(0)]
    assert names(s.queue) == ["0004", "0006", "0008", "0012"]
    assert s.t_read == at(0)

    # 0002 arrives: after T_read (0000), so not late; it goes to the head and 12 - 2 >= 10
    assert s.push(at(2)) is True
    assert names(s.queue) == ["0002", "0004", "0006", "0008", "0012"]
    assert s.pop() == [at(2)]
    assert names(s.queue) == ["0004", "0006", "0008", "0012"]
    assert s.t_read == at(2)

    # 0001 arrives: before T_read (0002): late, not queued
    assert s.is_late(at(1)) is True
    assert s.push(at(1)) is False
    assert names(s.queue) == ["0004", "0006", "0008", "0012"]
    assert s.pop() == []
    assert s.t_read == at(2)

    # the end of the stream: everything left, in order
    assert s.drain() == [at(4), at(6), at(8), at(12)]
    assert s.queue == []
    assert s.t_read == at(12)


def test_pop_takes_exactly_at_the_delay_boundary() -> None:
    s = FileTSort(10 * MINUTE_MS)
    s.push(at(0))
    s.push(at(9))
    assert s.pop() == []
    s.push(at(10))
    assert s.pop() == [at(0)]  # 10 - 0 >= 10; then 10 - 9 < 10


def test_pop_takes_several_heads_at_once() -> None:
    s = FileTSort(10 * MINUTE_MS)
    for m in (0, 1, 2, 15):
        s.push(at(m))
    assert s.pop() == [at(0), at(1), at(2)]  # 15 - 15 < 10 stops at the tail
    assert names(s.queue) == ["0015"]


def test_pop_never_takes_a_lone_file_with_positive_delay() -> None:
    s = FileTSort(MINUTE_MS)
    s.push(at(5))
    assert s.pop() == []
    assert s.pop() == []
    assert names(s.queue) == ["0005"]


def test_pop_on_empty_queue_takes_nothing() -> None:
    for delay in (-1, 0, MINUTE_MS):
        assert FileTSort(delay).pop() == []
        assert FileTSort(delay).drain() == []


# -- delay 0 ---------------------------------------------------------------------------------


def test_delay_zero_takes_each_file_as_soon_as_seen() -> None:
    s = FileTSort(0)
    for m in (3, 7, 20):
        assert s.push(at(m)) is True
        assert s.pop() == [at(m)]
        assert s.queue == []
        assert s.t_read == at(m)


def test_delay_zero_takes_a_batch_in_time_order() -> None:
    s = FileTSort(0)
    for m in (9, 2, 5):
        s.push(at(m))
    assert s.pop() == [at(2), at(5), at(9)]
    assert s.t_read == at(9)


def test_delay_zero_any_earlier_file_is_late() -> None:
    s = FileTSort(0)
    s.push(at(10))
    s.pop()
    assert s.push(at(9)) is False
    assert s.push(at(11)) is True
    assert s.pop() == [at(11)]


def test_delay_zero_equal_times_are_taken_in_name_order() -> None:
    s = FileTSort(0)
    for n in ("c", "a", "b"):
        s.push(at(5, n))
    assert names(s.pop()) == ["a", "b", "c"]
    assert s.t_read == at(5, "c")


# -- delay -1 (no ordering) ------------------------------------------------------------------


def test_unordered_flag() -> None:
    assert FileTSort(-1).ordered is False
    assert FileTSort(0).ordered is True
    assert FileTSort(MINUTE_MS).ordered is True


def test_unordered_takes_in_push_order() -> None:
    s = FileTSort(-1)
    for m in (9, 2, 5):
        assert s.push(at(m)) is True
    assert names(s.queue) == ["0009", "0002", "0005"]
    assert s.pop() == [at(9), at(2), at(5)]
    assert s.queue == []
    assert s.t_read == at(5)  # the last file taken, not the largest


def test_unordered_nothing_is_late() -> None:
    s = FileTSort(-1)
    s.push(at(10))
    s.pop()
    assert s.is_late(at(0)) is False
    assert s.push(at(0)) is True
    assert s.pop() == [at(0)]
    assert s.t_read == at(0)


def test_other_negative_delays_are_unordered_too() -> None:
    s = FileTSort(-5)
    s.push(at(4))
    s.push(at(1))
    assert s.pop() == [at(4), at(1)]


# -- ties in time are broken by name ---------------------------------------------------------


def _read_up_to(t: T, delay: int = 0) -> FileTSort:
    s = FileTSort(delay)
    s.push(t)
    s.drain()
    assert s.t_read == t
    return s


def test_same_time_smaller_name_is_late() -> None:
    s = _read_up_to(at(5, "m"))
    assert s.push(at(5, "a")) is False
    assert s.queue == []


def test_same_time_larger_name_is_not_late() -> None:
    s = _read_up_to(at(5, "m"))
    assert s.push(at(5, "z")) is True
    assert s.pop() == [at(5, "z")]


def test_later_time_smaller_name_is_not_late() -> None:
    s = _read_up_to(at(5, "m"))
    assert s.push(at(6, "a")) is True


def test_earlier_time_larger_name_is_late() -> None:
    s = _read_up_to(at(5, "m"))
    assert s.push(at(4, "z")) is False


def test_tie_rule_with_positive_delay() -> None:
    s = _read_up_to(at(5, "m"), delay=10 * MINUTE_MS)
    assert s.push(at(5, "a")) is False
    assert s.push(at(5, "n")) is True
    assert names(s.queue) == ["n"]


def test_equal_times_never_release_with_positive_delay() -> None:
    s = FileTSort(MINUTE_MS)
    for n in ("b", "a", "c"):
        s.push(at(5, n))
    assert s.pop() == []  # tail - head = 0 < delay
    assert names(s.queue) == ["a", "b", "c"]
    assert names(s.drain()) == ["a", "b", "c"]


# -- drain -----------------------------------------------------------------------------------


def test_drain_takes_everything_in_order_and_sets_t_read() -> None:
    s = FileTSort(60 * MINUTE_MS)
    for m in (30, 10, 20):
        s.push(at(m))
    assert s.pop() == []
    assert s.drain() == [at(10), at(20), at(30)]
    assert s.queue == []
    assert s.t_read == at(30)
    assert s.push(at(25)) is False


def test_drain_unordered_keeps_push_order() -> None:
    s = FileTSort(-1)
    for m in (30, 10, 20):
        s.push(at(m))
    assert s.drain() == [at(30), at(10), at(20)]
    assert s.t_read == at(20)


# -- state round trip ------------------------------------------------------------------------


def _saved(s: FileTSort) -> tuple[int, T | None, list[T]]:
    return s.delay_ms, s.t_read, list(s.queue)


def test_round_trip_continues_identically() -> None:
    a = FileTSort(10 * MINUTE_MS)
    for m in (0, 4, 8, 6, 12):
        a.push(at(m))
        a.pop()
    b = FileTSort(*_saved(a))
    for t in (at(2), at(1), at(30), at(3)):
        assert a.push(t) == b.push(t)
        assert a.pop() == b.pop()
        assert (a.t_read, a.queue) == (b.t_read, b.queue)
    assert a.drain() == b.drain()


def test_constructor_sorts_an_unsorted_queue() -> None:
    s = FileTSort(10 * MINUTE_MS, at(0), [at(12), at(4), at(8, "b"), at(8, "a")])
    assert s.queue == [at(4), at(8, "a"), at(8, "b"), at(12)]
    assert s.pop() == []  # 12 - 4 < 10
    s.push(at(14))
    assert s.pop() == [at(4)]


def test_constructor_with_delay_zero_sorts_queue() -> None:
    s = FileTSort(0, None, [at(3), at(1), at(2)])
    assert s.pop() == [at(1), at(2), at(3)]


def test_constructor_keeps_push_order_when_unordered() -> None:
    s = FileTSort(-1, at(50), [at(3), at(1), at(2)])
    assert s.queue == [at(3), at(1), at(2)]
    assert s.pop() == [at(3), at(1), at(2)]


def test_restored_t_read_decides_lateness() -> None:
    s = FileTSort(10 * MINUTE_MS, at(7, "x"), [])
    assert s.push(at(7, "w")) is False
    assert s.push(at(7, "y")) is True
    assert s.push(at(6)) is False


def test_restored_t_read_is_not_lowered_by_a_queued_file() -> None:
    s = FileTSort(0, at(5), [at(9)])
    assert s.pop() == [at(9)]
    assert s.t_read == at(9)


# -- randomized arrival orders against an independent model ---------------------------------


class Model:
    """The rule, written independently: times are integer minutes, T = (minute, name)."""

    def __init__(self, delay_ms: int) -> None:
        self.delay_ms = delay_ms
        self.t_read: tuple[int, str] | None = None
        self.waiting: list[tuple[int, str]] = []  # push order, never kept sorted

    def push(self, t: tuple[int, str]) -> bool:
        if self.delay_ms >= 0 and self.t_read is not None and t < self.t_read:
            return False
        self.waiting.append(t)
        return True

    def _take(self, t: tuple[int, str]) -> tuple[int, str]:
        self.waiting.remove(t)
        self.t_read = t
        return t

    def pop(self) -> list[tuple[int, str]]:
        if self.delay_ms < 0:
            return self.drain()
        out = []
        while self.waiting:
            head = min(self.waiting)
            newest = max(m for m, _ in self.waiting)
            if (newest - head[0]) * MINUTE_MS < self.delay_ms:
                break
            out.append(self._take(head))
        return out

    def drain(self) -> list[tuple[int, str]]:
        if self.delay_ms < 0:
            return [self._take(t) for t in list(self.waiting)]
        return [self._take(min(self.waiting)) for _ in range(len(self.waiting))]

    def queue(self) -> list[tuple[int, str]]:
        return list(self.waiting) if self.delay_ms < 0 else sorted(self.waiting)


def key(t: T) -> tuple[int, str]:
    return (int((t.time - EPOCH) / dt.timedelta(minutes=1)), t.name)


def keys(ts: list[T]) -> list[tuple[int, str]]:
    return [key(t) for t in ts]


DELAYS = st.sampled_from([-1, 0, 1, 90_000, MINUTE_MS, 3 * MINUTE_MS, 5 * MINUTE_MS, 10 * MINUTE_MS, 30 * MINUTE_MS])

# Files: (minute, unique name). Few minutes so that times repeat; names drawn independently of
# times (and of push order) so that ties are broken both ways.
NAMES = st.integers(0, 999).map(lambda k: f"f{k:03d}")
FILES = st.lists(st.tuples(st.integers(0, 25), NAMES), max_size=30, unique_by=lambda f: f[1])

# One step per file: push it, then pop 0..2 times (0 = same batch as the next file; 2 = a scan
# that found nothing new), then maybe save the state and build a new sorter from it.
STEPS = st.lists(
    st.tuples(st.integers(0, 25), NAMES, st.integers(0, 2), st.booleans()),
    max_size=30,
    unique_by=lambda f: f[1],
)


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[int, list[tuple[int, str]], list[int], list[bool], int]:
    delay = draw(DELAYS)
    steps = draw(STEPS)
    seed = draw(st.integers(0, 2**16))
    files = [(m, n) for m, n, _, _ in steps]
    return delay, files, [p for *_, p, _ in steps], [r for *_, r in steps], seed


def _restore(s: FileTSort, rng: random.Random) -> FileTSort:
    """Save the fields and build a new sorter from them (the queue shuffled when ordered)."""
    queue = list(s.queue)
    if s.delay_ms >= 0:
        rng.shuffle(queue)
    return FileTSort(s.delay_ms, s.t_read, queue)


def _run(delay, files, pops, restarts, seed):
    """Run implementation and model side by side; return (late, taken) of the implementation."""
    rng = random.Random(seed)
    s, m = FileTSort(delay), Model(delay)
    late: list[tuple[int, str]] = []
    taken: list[tuple[int, str]] = []
    for (minute, name), n_pops, restart in zip(files, pops, restarts):
        t = at(minute, name)
        queued = s.push(t)
        assert queued == m.push((minute, name)), (t, keys(s.queue), s.t_read)
        if not queued:
            late.append(key(t))
        for _ in range(n_pops):
            got = keys(s.pop())
            assert got == m.pop()
            taken += got
            if delay >= 0 and s.queue:  # pop stopped: the window is shorter than the delay
                assert (s.queue[-1].time - s.queue[0].time) / dt.timedelta(milliseconds=1) < delay
        assert keys(s.queue) == m.queue()
        assert (key(s.t_read) if s.t_read else None) == m.t_read
        if restart:
            s = _restore(s, rng)
    got = keys(s.drain())
    assert got == m.drain()
    taken += got
    assert s.queue == []
    assert (key(s.t_read) if s.t_read else None) == m.t_read
    return late, taken


@settings(max_examples=300, deadline=None)
@given(scenarios())
def test_random_arrivals_match_model(scenario) -> None:
    _run(*scenario)


@settings(max_examples=100, deadline=None)
@given(scenarios())
def test_every_file_is_late_or_taken_exactly_once(scenario) -> None:
    delay, files, *_ = scenario
    late, taken = _run(*scenario)
    assert sorted(late + taken) == sorted(files)
    assert len(set(late + taken)) == len(files)


@settings(max_examples=100, deadline=None)
@given(scenarios().filter(lambda sc: sc[0] >= 0))
def test_ordered_taken_sequence_strictly_increases(scenario) -> None:
    _, taken = _run(*scenario)
    assert all(a < b for a, b in zip(taken, taken[1:]))


@settings(max_examples=100, deadline=None)
@given(FILES, st.lists(st.integers(0, 2), max_size=30), st.integers(0, 2**16))
def test_unordered_nothing_late_and_push_order_kept(files, pops, seed) -> None:
    pops = (pops + [0] * len(files))[: len(files)]
    late, taken = _run(-1, files, pops, [False] * len(files), seed)
    assert late == []
    assert taken == files


@settings(max_examples=100, deadline=None)
@given(DELAYS.filter(lambda d: d >= 0), FILES)
def test_ordered_pop_stops_only_when_window_is_short(delay, files) -> None:
    """After every pop the queue's time span is below the delay (else pop would have taken)."""
    s = FileTSort(delay)
    for minute, name in files:
        s.push(at(minute, name))
        s.pop()
        if s.queue:
            span_ms = (s.queue[-1].time - s.queue[0].time) / dt.timedelta(milliseconds=1)
            assert span_ms < delay
        assert s.queue == sorted(s.queue)


@settings(max_examples=100, deadline=None)
@given(FILES)
def test_delay_zero_leaves_nothing_queued_after_a_pop(files) -> None:
    s = FileTSort(0)
    for minute, name in files:
        s.push(at(minute, name))
        s.pop()
        assert s.queue == []
