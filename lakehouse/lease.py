"""Leases: one holder at a time of something in the warehouse, across processes and hosts.

A lease is a folder of generation files ``<n>.json`` (holder id, host, pid, expiry); the current
lease is the highest generation. Taking a lease creates the next generation exclusively
(O_CREAT|O_EXCL; on S3 a PUT with If-None-Match), which exactly one process wins; a free (released or expired) lease is taken the
same way, so a crashed holder blocks others only until its expiry (at once on its own machine,
where its pid is seen gone). The holder renews by rewriting its own generation file while it
runs, and checks before each irreversible step that no newer generation exists. It works where
``flock`` means nothing (a shared or network filesystem); on one host an OS lock
(:func:`file_lock`, freed even on SIGKILL) stands in front of it.

The one home of waiting for a lease (:func:`within`), of the table's lease (one job per table
at a time: archive, compaction, VACUUM) and of OS file locks.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING, TypeVar

from lakehouse import storage
from lakehouse.errors import TransientError
from lakehouse.settings import env_flag, env_float
from lakehouse.times import iso_seconds

if TYPE_CHECKING:
    from lakehouse.warehouse import TablePaths

log = logging.getLogger(__name__)
T = TypeVar("T")

LEASE_TTL_SECONDS = 120.0
"""How long a lease lasts without renewal (a crashed holder blocks others this long at most)."""


class LeaseHeld(TransientError):
    """Another process holds the lease (names the holder and its expiry)."""


class LeaseLost(TransientError):
    """The lease expired and another process took it while this one was still running."""


@dataclass(frozen=True)
class LeaseInfo:
    """One generation file of a lease: who holds it, where, until when."""

    generation: int
    holder: str
    host: str
    pid: int
    expires: float
    """Epoch seconds; 0 when released."""
    purpose: str = ""
    node: str = ""
    """Boot id and pid namespace of the holder: where its pid means something."""

    def as_dict(self) -> dict[str, object]:
        """The lease as shown to people and in JSON output."""
        return {"generation": self.generation, "holder": self.holder, "host": self.host, "pid": self.pid,
                "expires": self.expires, "purpose": self.purpose}

    def free(self, now: float) -> bool:
        """Released, expired, or held by a process of this machine that is gone (SIGKILL)."""
        return self.expires <= now or (self.node == _node() and not _alive(self.pid))


_ON_ACQUIRE: list[Callable[[], None]] = []


def on_acquire(callback: Callable[[], None]) -> None:
    """Call ``callback`` each time this process has taken a lease or an OS lock, before it goes
    on (a Spark Connect client fences the jobs of dead clients there: lakehouse.spark.fence)."""
    _ON_ACQUIRE.append(callback)


def _entered() -> None:
    for callback in list(_ON_ACQUIRE):
        callback()


def node() -> str:
    """This machine and pid namespace ("" when unknown): where a pid means one process."""
    return _node()


def node_key() -> str:
    """``node()`` as a short name fit for a file name."""
    import hashlib

    return hashlib.sha256(_node().encode()).hexdigest()[:12]


def alive(pid: int) -> bool:
    """Whether a process of this machine with that pid exists (one of another user counts)."""
    return _alive(pid)


def _node() -> str:
    """This machine and pid namespace (pids are only comparable within one)."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            boot = f.read().strip()
        ns = os.readlink("/proc/self/ns/pid")
    except OSError:
        return ""  # unknown: never judge a holder dead by its pid
    return f"{socket.gethostname()}/{boot}/{ns}"


def _alive(pid: int) -> bool:
    """Whether a process of this machine with that pid exists."""
    if pid <= 0:
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _lease_generations(folder: str) -> list[int]:
    """The generation numbers present in a lease folder, in order."""
    names = storage.list_names(folder)
    return sorted(int(n[:-5]) for n in names if n.endswith(".json") and n[:-5].isdigit())


def read_lease(folder: str) -> LeaseInfo | None:
    """The current (highest generation) lease of a lease folder, or None."""
    for gen in reversed(_lease_generations(folder)):
        path = os.path.join(folder, f"{gen}.json")
        try:
            d = storage.read_json(path)
        except FileNotFoundError:
            continue
        except ValueError:  # not a whole record (a writer killed in an exclusive create without
            # hard links): held as a lease written then would be, until it expires
            info = storage.file_info(path)
            if info is None:
                continue
            return LeaseInfo(gen, "?", "?", 0, info.mtime_ns / 1e9 + LEASE_TTL_SECONDS)
        return LeaseInfo(gen, d["holder"], d["host"], int(d["pid"]), float(d["expires"]), d.get("purpose", ""),
                         d.get("node", ""))
    return None


class Lease:
    """A lease on ``folder`` (a local path or an S3 prefix): ``with Lease(folder, what) as lease: ...``.

    Raises ``LeaseHeld`` when another live holder has it. ``check()`` raises ``LeaseLost`` when
    this holder's lease was taken over (call it before irreversible steps)."""

    def __init__(self, folder: str, what: str, ttl: float = LEASE_TTL_SECONDS, purpose: str = "") -> None:
        self.folder = folder
        self.what = what
        self.ttl = ttl
        self.purpose = purpose
        self.holder = uuid.uuid4().hex
        self.generation: int | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lost: str | None = None
        self._lock = threading.Lock()

    def _body(self, expires: float) -> bytes:
        """This holder's generation file, expiring at ``expires``."""
        return json.dumps({"holder": self.holder, "host": socket.gethostname(), "pid": os.getpid(),
                            "expires": expires, "purpose": self.purpose, "node": _node()}).encode()

    def acquire(self) -> Lease:
        """Take the lease (the next generation) or raise ``LeaseHeld`` naming its holder."""
        storage.make_dirs(self.folder)
        for _ in range(20):
            cur = read_lease(self.folder)
            now = time.time()
            if cur is not None and not cur.free(now):
                raise LeaseHeld(
                    f"{self.what}: held by {cur.host} pid {cur.pid} (holder {cur.holder[:8]}"
                    f"{', running ' + cur.purpose if cur.purpose else ''}) until "
                    f"{iso_seconds(cur.expires)}; wait for it to finish "
                    f"(a crashed holder's lease expires by itself; lease files in {self.folder})")
            gen = 1 if cur is None else cur.generation + 1
            if not storage.create_exclusive(os.path.join(self.folder, f"{gen}.json"), self._body(now + self.ttl)):
                continue  # someone else took this generation first: look again
            self.generation = gen
            self._prune(gen)
            self._thread = threading.Thread(target=self._renew_loop, name="lease-renew", daemon=True)
            self._thread.start()
            try:
                _entered()
            except BaseException:
                self.release()
                raise
            return self
        raise LeaseHeld(f"{self.what}: could not take the lease in {self.folder} (too much contention)")

    def _prune(self, gen: int) -> None:
        """Delete the generation files older than the one before ``gen``, and the temporary file
        a writer killed inside its exclusive create may have left (``storage.create_exclusive``)
        once it is older than a lease lasts."""
        for g in _lease_generations(self.folder):
            if g < gen - 1:
                storage.delete(os.path.join(self.folder, f"{g}.json"))
        storage.remove_create_leftovers(self.folder, LEASE_TTL_SECONDS)

    def _write_own(self, expires: float) -> None:
        """Rewrite this holder's generation file atomically (temp file, then rename)."""
        assert self.generation is not None
        storage.write_bytes(os.path.join(self.folder, f"{self.generation}.json"), self._body(expires))

    def check(self) -> None:
        """Raise ``LeaseLost`` unless this process still holds the lease, with time to spare."""
        with self._lock:
            if self._lost:
                raise LeaseLost(self._lost)
            cur = read_lease(self.folder)
            if cur is None or cur.generation != self.generation or cur.holder != self.holder:
                self._lost = (f"{self.what}: the lease was taken over by "
                              f"{'nobody' if cur is None else f'{cur.host} pid {cur.pid}'} while this run "
                              "was under way (it ran longer than the lease without renewing); nothing more "
                              "is committed by this run; run again")
                raise LeaseLost(self._lost)
            if cur.expires - time.time() < self.ttl / 4:
                self._write_own(time.time() + self.ttl)

    def _renew_loop(self) -> None:
        """Renew the lease every third of its time to live until released or lost."""
        while not self._stop.wait(self.ttl / 3):
            try:
                self.check()
            except LeaseLost:
                log.error("%s", self._lost)
                return
            except OSError as e:  # a transient filesystem error: try again at the next tick
                log.warning("%s: could not renew the lease: %s", self.what, e)
                continue
            with self._lock:
                self._write_own(time.time() + self.ttl)

    def release(self) -> None:
        """Stop renewing and mark the lease free for the next taker at once."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        with self._lock:
            cur = read_lease(self.folder)
            if cur is not None and cur.generation == self.generation and cur.holder == self.holder:
                self._write_own(0.0)  # released: free for the next taker at once

    def __enter__(self) -> Lease:  # noqa: PYI034
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


def within(take: Callable[[], T], wait: float, what: str, pause: float = 0.05, max_pause: float = 1.0,
           stop: Callable[[], bool] = lambda: False) -> T:
    """``take()`` until it stops raising ``LeaseHeld``, for at most ``wait`` seconds (pauses grow
    from ``pause`` to ``max_pause``; ``stop()`` ends the wait early). The last ``LeaseHeld``
    propagates when the time is up."""
    deadline = time.monotonic() + wait
    while True:
        try:
            return take()
        except LeaseHeld:
            left = deadline - time.monotonic()
            if left <= 0 or stop():
                raise
            log.info("%s: held by another process; waiting %.1fs", what, min(pause, left))
            time.sleep(min(pause, left))
            pause = min(pause * 2, max_pause)


@contextlib.contextmanager
def file_lock(path: str, busy: Callable[[], str], wait: float = 0.0) -> Iterator[IO[str]]:
    """An exclusive OS lock (``flock``) on the local file ``path``, freed when the holder exits,
    even by SIGKILL; waits up to ``wait`` seconds for another holder, then raises ``LeaseHeld``
    with the message ``busy()``."""
    import fcntl

    with open(path, "a+") as f:
        def take() -> None:
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise LeaseHeld(busy()) from None

        within(take, wait, path, pause=0.2, max_pause=0.2)
        try:
            _entered()
            yield f
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


@contextlib.contextmanager
def exclusive(path: str, what: str, busy: Callable[[], str], wait: float = 0.0) -> Iterator[Lease | None]:
    """One holder of ``path`` at a time across processes: on a local path an OS lock
    (:func:`file_lock`, freed even by SIGKILL); on an object store a lease in the folder ``path``
    (conditional writes, renewed while held; a holder killed on this machine is seen gone at once,
    one elsewhere when its lease expires). Waits up to ``wait`` seconds, then raises ``LeaseHeld``
    with ``busy()``. Yields the lease (None for an OS lock, which cannot be lost): call its
    ``check()`` before an irreversible step."""
    local = storage.local_path(path)
    if local is not None:
        with file_lock(local, busy, wait):
            yield None
        return
    lease = Lease(path, what)
    try:
        within(lease.acquire, wait, what, pause=0.2, max_pause=1.0)
    except LeaseHeld as e:
        raise LeaseHeld(f"{busy()}; {e}") from None
    try:
        yield lease
    finally:
        lease.release()


# -- the table's lease: one job per table at a time ----------------------------------------------

@contextlib.contextmanager
def table_lease(paths: "TablePaths", purpose: str) -> Iterator[Lease | None]:
    """One job per table at a time (archive, compaction, VACUUM): on a local warehouse an OS lock
    on this host (released even on SIGKILL; ``LAKEHOUSE_ARCHIVE_FLOCK=0`` turns it off), and the
    table's lease in the warehouse (across hosts, where flock means nothing, and on an object
    store, whose conditional writes make each generation's create exclusive), renewed while the
    job lasts. Raises ``LeaseHeld`` naming the holder and what it runs."""
    local = storage.local_path(paths.root)
    if local is None:  # an object store: the lease alone, on conditional writes the store must honour
        storage.require_conditional_writes(paths.root)
    state = storage.join(local or paths.root, "_state")
    storage.make_dirs(state)
    what = f"{purpose} {paths.name}: the table's lease"
    with contextlib.ExitStack() as stack:
        if local is not None and env_flag("LAKEHOUSE_ARCHIVE_FLOCK", True):
            def busy() -> str:
                cur = read_lease(os.path.join(state, "table.lease"))
                doing = f" ({cur.purpose}, pid {cur.pid})" if cur is not None and cur.purpose else ""
                return f"{what}: another job on this host holds {state}/table.lock{doing}; wait for it"

            stack.enter_context(file_lock(os.path.join(state, "table.lock"), busy))
        ttl = env_float("LAKEHOUSE_ARCHIVE_LEASE_SECONDS", LEASE_TTL_SECONDS)
        lease = Lease(os.path.join(state, "table.lease"), what, ttl=ttl, purpose=purpose)
        stack.enter_context(lease)
        yield lease
