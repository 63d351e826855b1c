"""Committing to Delta tables safely: bounded retries of optimistic-concurrency conflicts and
SetTransaction idempotence (a commit replayed after a crash is skipped by a table that already
holds it).

The one home of these helpers: loads, ingest batches, archiving runs and migrations all commit
through them.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import random
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from lakehouse.errors import CommitConflict, TransientError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from lakehouse.warehouse import TablePaths

log = logging.getLogger(__name__)
T = TypeVar("T")
MAX_ATTEMPTS = 8


def is_conflict(e: BaseException) -> bool:
    """True for Delta's optimistic-concurrency conflicts, which a retry can resolve."""
    try:
        from delta.exceptions import (
            ConcurrentAppendException,
            ConcurrentDeleteDeleteException,
            ConcurrentDeleteReadException,
            ConcurrentTransactionException,
            ConcurrentWriteException,
            MetadataChangedException,
            ProtocolChangedException,
        )

        kinds: tuple[type[BaseException], ...] = (
            ConcurrentAppendException, ConcurrentDeleteDeleteException, ConcurrentDeleteReadException,
            ConcurrentTransactionException, ConcurrentWriteException, MetadataChangedException,
            ProtocolChangedException,
        )
        if isinstance(e, kinds):
            return True
    except ImportError:  # pragma: no cover
        pass
    text = f"{type(e).__name__} {e}"
    return "DELTA_CONCURRENT" in text or "ConcurrentAppendException" in text or "DELTA_METADATA_CHANGED" in text


def with_retries(what: str, fn: Callable[[], T], attempts: int = MAX_ATTEMPTS) -> tuple[T, int]:
    """Run a Delta commit, retrying conflicts with jittered backoff; (result, attempts used)."""
    for attempt in range(1, attempts + 1):
        try:
            return fn(), attempt
        except Exception as e:
            if not is_conflict(e):
                raise
            if attempt == attempts:
                raise CommitConflict(
                    f"{what}: still conflicting with concurrent writers after {attempts} attempts: "
                    f"{str(e).splitlines()[0]}"
                ) from None
            pause = min(5.0, 0.2 * 2 ** (attempt - 1)) * (0.5 + random.random())
            log.warning("%s: conflict with a concurrent commit (attempt %d/%d), retrying in %.1fs",
                        what, attempt, attempts, pause)
            time.sleep(pause)
    raise AssertionError("unreachable")


SESSION_CONF = threading.RLock()
"""Held while a commit relies on session-wide Spark settings (SetTransaction, commit metadata):
threads of one process (two producers of an application) commit one at a time."""


@contextlib.contextmanager
def idempotent(spark: "SparkSession", txn: tuple[str, int] | None) -> Iterator[None]:
    """Make the Delta writes inside (MERGE, append) record the SetTransaction ``txn`` = (app id,
    version) in their commit; Delta skips such a write when the table already holds that
    version for the app id (a batch replayed after a crash is not applied twice)."""
    if txn is None:
        yield
        return
    with SESSION_CONF:
        spark.conf.set("spark.databricks.delta.write.txnAppId", txn[0])
        spark.conf.set("spark.databricks.delta.write.txnVersion", str(txn[1]))
        try:
            yield
        finally:
            spark.conf.unset("spark.databricks.delta.write.txnAppId")
            spark.conf.unset("spark.databricks.delta.write.txnVersion")


# -- the per-table lease ------------------------------------------------------------------------
#
# One archiving run per table at a time, also across hosts and where ``flock`` means nothing (a
# shared or network filesystem): a lease recorded in the warehouse. A lease is a folder of
# generation files ``<n>.json`` (holder id, host, pid, expiry); the current lease is the highest
# generation. Taking a lease creates the next generation with O_CREAT|O_EXCL, which exactly one
# process wins; a free (released or expired) lease is taken the same way, so a crashed holder
# blocks others only until its expiry (at once on its own machine, where its pid is seen gone).
# The holder renews by rewriting its own generation file while it runs, and checks before each
# irreversible step that no newer generation exists.

LEASE_TTL_SECONDS = 120.0
"""How long a lease lasts without renewal (a crashed holder blocks others this long at most)."""


class LeaseHeld(TransientError):
    """Another process holds the lease (names the holder and its expiry)."""


class LeaseLost(TransientError):
    """The lease expired and another process took it while this one was still running."""


@dataclass(frozen=True)
class LeaseInfo:
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
        return {"generation": self.generation, "holder": self.holder, "host": self.host, "pid": self.pid,
                "expires": self.expires, "purpose": self.purpose}

    def free(self, now: float) -> bool:
        """Released, expired, or held by a process of this machine that is gone (SIGKILL)."""
        return self.expires <= now or (self.node == _node() and not _alive(self.pid))


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
    try:
        names = os.listdir(folder)
    except FileNotFoundError:
        return []
    return sorted(int(n[:-5]) for n in names if n.endswith(".json") and n[:-5].isdigit())


def read_lease(folder: str) -> LeaseInfo | None:
    """The current (highest generation) lease of a lease folder, or None."""
    for gen in reversed(_lease_generations(folder)):
        try:
            with open(os.path.join(folder, f"{gen}.json")) as f:
                d = json.load(f)
        except FileNotFoundError:
            continue
        except ValueError:  # being written by O_EXCL create right now: treat as held
            return LeaseInfo(gen, "?", "?", 0, time.time() + LEASE_TTL_SECONDS)
        return LeaseInfo(gen, d["holder"], d["host"], int(d["pid"]), float(d["expires"]), d.get("purpose", ""),
                         d.get("node", ""))
    return None


class Lease:
    """A lease on ``folder`` (a local path): ``with Lease(folder, what) as lease: ...``.

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
        return json.dumps({"holder": self.holder, "host": socket.gethostname(), "pid": os.getpid(),
                            "expires": expires, "purpose": self.purpose, "node": _node()}).encode()

    def acquire(self) -> Lease:
        os.makedirs(self.folder, exist_ok=True)
        for _ in range(20):
            cur = read_lease(self.folder)
            now = time.time()
            if cur is not None and not cur.free(now):
                raise LeaseHeld(
                    f"{self.what}: held by {cur.host} pid {cur.pid} (holder {cur.holder[:8]}"
                    f"{', running ' + cur.purpose if cur.purpose else ''}) until "
                    f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(cur.expires))}; wait for it to finish "
                    f"(a crashed holder's lease expires by itself; lease files in {self.folder})")
            gen = 1 if cur is None else cur.generation + 1
            path = os.path.join(self.folder, f"{gen}.json")
            try:
                fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                continue  # someone else took this generation first: look again
            try:
                os.write(fd, self._body(now + self.ttl))
                os.fsync(fd)
            finally:
                os.close(fd)
            self.generation = gen
            self._prune(gen)
            self._thread = threading.Thread(target=self._renew_loop, name="lease-renew", daemon=True)
            self._thread.start()
            return self
        raise LeaseHeld(f"{self.what}: could not take the lease in {self.folder} (too much contention)")

    def _prune(self, gen: int) -> None:
        for g in _lease_generations(self.folder):
            if g < gen - 1:
                try:
                    os.remove(os.path.join(self.folder, f"{g}.json"))
                except FileNotFoundError:
                    pass

    def _write_own(self, expires: float) -> None:
        """Rewrite this holder's generation file atomically (temp file, then rename)."""
        assert self.generation is not None
        tmp = os.path.join(self.folder, f".{self.generation}.{self.holder}.tmp")
        with open(tmp, "wb") as f:
            f.write(self._body(expires))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, os.path.join(self.folder, f"{self.generation}.json"))

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


# -- the table's lease: one job per table at a time ----------------------------------------------

def _flock_enabled() -> bool:
    return os.environ.get("LAKEHOUSE_ARCHIVE_FLOCK", "1").strip().lower() not in ("0", "false", "no", "off")


def local_path(uri: str) -> str | None:
    """The local filesystem path of a warehouse location, or None for an object store."""
    from lakehouse.settings import is_local

    if is_local(uri):
        return uri
    if uri.startswith("file://"):
        return uri[len("file://"):]
    return None


@contextlib.contextmanager
def table_lease(paths: "TablePaths", purpose: str) -> Iterator[Lease | None]:
    """One job per table at a time (archive, compaction, VACUUM): an OS lock on this host
    (released even on SIGKILL; ``LAKEHOUSE_ARCHIVE_FLOCK=0`` turns it off) and the table's lease
    in the warehouse (across hosts and where flock means nothing), renewed while the job lasts.
    Raises ``LeaseHeld`` naming the holder and what it runs."""
    import fcntl

    local = local_path(paths.root)
    if local is None:
        log.warning("%s %s: the warehouse is not a local path; no lease (run one job per table)", purpose, paths.name)
        yield None  # object stores: the scheduler runs one job per table; Delta's conflict checks back it up
        return
    state = os.path.join(local, "_state")
    os.makedirs(state, exist_ok=True)
    what = f"{purpose} {paths.name}: the table's lease"
    with contextlib.ExitStack() as stack:
        if _flock_enabled():
            f = stack.enter_context(open(os.path.join(state, "table.lock"), "a+"))
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                cur = read_lease(os.path.join(state, "table.lease"))
                doing = f" ({cur.purpose}, pid {cur.pid})" if cur is not None and cur.purpose else ""
                raise LeaseHeld(f"{what}: another job on this host holds {state}/table.lock{doing}; "
                                "wait for it") from None
            stack.callback(fcntl.flock, f, fcntl.LOCK_UN)
        ttl = float(os.environ.get("LAKEHOUSE_ARCHIVE_LEASE_SECONDS", str(LEASE_TTL_SECONDS)))
        lease = Lease(os.path.join(state, "table.lease"), what, ttl=ttl, purpose=purpose)
        stack.enter_context(lease)
        yield lease
