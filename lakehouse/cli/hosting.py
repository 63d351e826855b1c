"""The command host's process (lakehouse.cli.host says what it is for and how a command reaches
it): started by ``lakehouse server start`` beside the project's Spark Connect server, stopped by
``lakehouse server stop`` or when that server is gone.

The process imports what commands import (``PRELOAD`` and every module of the package), records
itself in ``.lakehouse/host.json`` and then runs a loop that uses none of those libraries: it
accepts a command's connection, reads its request (arguments, folder, environment, the three
standard streams' descriptors), forks a child that becomes the command, tells the command's
process the child's pid, and when the child ends sends its status. A command's process that hangs
up before then (killed) gets its child killed.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import select
import signal
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from lakehouse.cli.host import (
    LOG,
    MODULE,
    RECORD,
    SOCKET,
    address,
    code_stamp,
    identity,
    peer_credentials,
    project_and_command,
    read_record,
    running,
    signal_child,
)
from lakehouse.cli.hosted import become
from lakehouse.errors import LakehouseError
from lakehouse.settings import PRIVATE_FOLDER, private_folder
from lakehouse.spark.server import kill_group, server_alive, terminate

PRELOAD = (
    "lakehouse.project", "pyspark.sql.connect.session", "pyspark.sql.connect.dataframe",
    "pyspark.sql.connect.functions", "pyspark.sql.functions", "pyarrow.compute", "pyarrow.parquet",
    "pyarrow.dataset", "pandas", "duckdb", "deltalake", "sqlglot", "yaml", "rich",
)
"""Libraries a command imports in its first second (the package's own modules are added)."""
MAX_REQUEST = 16 << 20
"""The largest request (arguments and environment) a host reads."""
REQUEST_SECONDS = 10.0
"""How long a command's request may take to arrive (it is sent at once)."""
START_SECONDS = 120.0
STOP_SECONDS = 30.0
"""How long a stopping host lets the commands it runs finish before it kills them."""


def status(project: Path) -> str:
    """``running (pid N)``, ``not running``, or why the recorded host is not used."""
    from lakehouse.cli.host import unusable

    rec = read_record(project)
    if rec is None:
        return "not running"
    why = unusable(rec)
    return f"running (pid {rec['pid']})" if why is None else f"not used: {why}"


def start(project: Path, server_pid: int, timeout: float = START_SECONDS) -> dict[str, Any]:
    """Start the project's host (a detached process) for the server ``server_pid`` and wait until
    it is ready; its record. A host left from an earlier server is stopped first."""
    stop(project)
    folder = private_folder(project)
    logfile = folder / LOG
    with open(logfile, "ab") as out:
        os.chmod(logfile, 0o600)
        proc = subprocess.Popen([sys.executable, "-m", MODULE, str(project), str(server_pid)],
                                stdin=subprocess.DEVNULL, stdout=out, stderr=out, start_new_session=True,
                                cwd=str(project))
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        rec = read_record(project)
        if rec is not None and rec.get("pid") == proc.pid:
            return rec
        code = proc.poll()
        if code is not None:
            raise LakehouseError(f"the command host did not start (exit {code}; log: {logfile})")
        time.sleep(0.1)
    kill_group(proc.pid)
    raise LakehouseError(f"the command host was not ready within {timeout:.0f}s (log: {logfile})")


def stop(project: Path, timeout: float = STOP_SECONDS + 10) -> dict[str, Any] | None:
    """Stop the project's host (the commands it runs get SIGTERM, and SIGKILL ``STOP_SECONDS``
    later); its record, or None when none was recorded."""
    rec = read_record(project)
    if rec is None:
        return None
    pid = int(rec.get("pid") or 0)
    if pid:
        terminate(pid, running, timeout)
    current = read_record(project)
    if current is None or current.get("pid") == pid:  # not a record a new host wrote meanwhile
        for name in (RECORD, SOCKET):
            (project / PRIVATE_FOLDER / name).unlink(missing_ok=True)
    return rec


# -- the host process ---------------------------------------------------------------------------------

def _preload() -> dict[str, str]:
    """Import what commands import; the environment variables those imports set (a command's
    process would have them too)."""
    import importlib
    import pkgutil

    import lakehouse

    before = dict(os.environ)
    for name in PRELOAD:
        importlib.import_module(name)
    for info in pkgutil.walk_packages(lakehouse.__path__, "lakehouse."):
        if info.name.endswith("__main__"):
            continue
        try:
            importlib.import_module(info.name)
        except Exception as e:  # noqa: BLE001 - an optional extra missing: commands import it when they run
            print(f"lakehouse: not preloaded {info.name}: {type(e).__name__}: {e}", flush=True)
    from lakehouse.definitions.expectations import import_ge

    import_ge()
    return {k: v for k, v in os.environ.items() if before.get(k) != v}


FORK_CHECK = """
import deltalake, duckdb, pyarrow as pa
try:
    deltalake.DeltaTable("/nonexistent/lakehouse-fork-check")
except deltalake.exceptions.TableNotFoundError:
    pass
duckdb.connect().execute("SELECT 42").fetchall()
pa.compute.sum(pa.array(range(1000)))
"""


def _fork_check() -> None:
    """A forked child can use deltalake, DuckDB and Arrow: nothing the host imported started a
    runtime that a fork leaves broken (deltalake's panics in a child when its parent used it)."""
    pid = os.fork()
    if pid == 0:
        try:
            exec(FORK_CHECK, {})  # noqa: S102 - fixed text above
            os._exit(0)
        except BaseException:  # noqa: BLE001
            os._exit(1)
    _, status = os.waitpid(pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise LakehouseError("a forked child cannot use deltalake, DuckDB or Arrow after the host's imports "
                             f"(status {os.waitstatus_to_exitcode(status)}); the host does not start")


class _Pending:
    """A command's connection whose request is still arriving."""

    def __init__(self, conn: socket.socket) -> None:
        self.conn, self.data = conn, b""
        self.fds: list[int] = []
        self.deadline = time.monotonic() + REQUEST_SECONDS

    def read(self) -> dict[str, Any] | None:
        """Take what arrived; the request once it is whole (ValueError or OSError: a bad one)."""
        if not self.fds and len(self.data) < 4:
            data, fds, _flags, _addr = socket.recv_fds(self.conn, 1 << 16, 3)
            self.fds += fds
        else:
            data = self.conn.recv(1 << 20)
        if not data:
            raise ValueError("the request ended early")
        self.data += data
        if len(self.data) < 4:
            return None
        (size,) = struct.unpack("!I", self.data[:4])
        if size > MAX_REQUEST or len(self.fds) != 3:
            raise ValueError(f"a request of {size} bytes with {len(self.fds)} descriptors")
        if len(self.data) < 4 + size:
            return None
        request = json.loads(self.data[4:4 + size])
        if not isinstance(request, dict):
            raise ValueError("a request that is not an object")
        return request

    def close(self) -> None:
        for fd in self.fds:
            os.close(fd)
        self.fds = []
        self.conn.close()


class _Host:
    """The loop's state: the listening socket, requests arriving, children running."""

    def __init__(self, project: Path, server_pid: int, added: dict[str, str]) -> None:
        self.project, self.server_pid, self.added = project, server_pid, added
        self.folder = private_folder(project)
        self.sock_path = self.folder / SOCKET
        self.listener: socket.socket | None = None
        self.pending: dict[int, _Pending] = {}
        self.children: dict[int, tuple[socket.socket, str]] = {}
        self.hung_up: set[int] = set()
        self.stopping = False
        self.stop_by: float | None = None
        self.wake = os.pipe()  # the signal handlers' wake-up of the loop
        for fd in self.wake:
            os.set_blocking(fd, False)

    def listen(self) -> None:
        self.sock_path.unlink(missing_ok=True)
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        with address(self.sock_path) as where:
            self.listener.bind(where)
        os.chmod(self.sock_path, 0o600)
        self.listener.listen(64)
        self.listener.setblocking(False)

    def begin_stop(self, why: str) -> None:
        """Take no more commands; those running get SIGTERM now and SIGKILL ``STOP_SECONDS`` later."""
        if self.stopping:
            return
        print(f"lakehouse: stopping: {why}", flush=True)
        self.stopping, self.stop_by = True, time.monotonic() + STOP_SECONDS
        if self.listener is not None:
            self.listener.close()
            self.listener = None
        current = read_record(self.project)
        if current is not None and current.get("pid") == os.getpid():
            (self.folder / RECORD).unlink(missing_ok=True)
            self.sock_path.unlink(missing_ok=True)
        for p in list(self.pending.values()):
            _send(p.conn, {"refused": "the host is stopping"})
            p.close()
        self.pending.clear()
        for pid in self.children:
            signal_child(pid, signal.SIGTERM)

    def step(self, wake_r: int) -> None:
        """One turn of the loop: wait up to a second, then reap, take and watch."""
        waiting = [wake_r, *(c.fileno() for pid, (c, _) in self.children.items() if pid not in self.hung_up),
                   *self.pending]
        if self.listener is not None:
            waiting.append(self.listener.fileno())
        poll = select.poll()  # not select(): no limit on descriptor numbers
        for fd in waiting:
            poll.register(fd, select.POLLIN)
        ready = [fd for fd, _ in poll.poll(1000)]
        if wake_r in ready:
            try:
                while os.read(wake_r, 512):
                    pass
            except BlockingIOError:
                pass
        self._hang_ups([fd for fd in ready if fd not in self.pending])
        for fd in ready:
            if fd in self.pending:
                self._arrive(fd)
                self._hang_ups(None)  # a caller gone while the host forked others: its command goes now
        for pid in self.hung_up:  # again each turn until reaped: a child may not have made its group yet
            signal_child(pid, signal.SIGKILL)
        self._reap()
        if self.listener is not None and self.listener.fileno() in ready:
            self._accept()
        now = time.monotonic()
        for fd, p in list(self.pending.items()):
            if now > p.deadline:
                print("lakehouse: a request did not arrive in time", flush=True)
                p.close()
                del self.pending[fd]
        if self.stop_by is not None and now > self.stop_by:
            for pid in self.children:
                signal_child(pid, signal.SIGKILL)

    def _hang_ups(self, ready: list[int] | None) -> None:
        """Kill the commands whose callers hung up (they were killed): of the descriptors ``ready``,
        or of every running command (None: asked now, without waiting)."""
        by_fd = {c.fileno(): pid for pid, (c, _) in self.children.items() if pid not in self.hung_up}
        if ready is None:
            poll = select.poll()
            for fd in by_fd:
                poll.register(fd, select.POLLIN)
            ready = [fd for fd, _ in poll.poll(0)]
        for fd in ready:
            if fd in by_fd:
                self.hung_up.add(by_fd[fd])
                signal_child(by_fd[fd], signal.SIGKILL)

    def _accept(self) -> None:
        assert self.listener is not None
        while True:
            try:
                conn, _ = self.listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as e:  # out of descriptors: those waiting are taken a little later
                print(f"lakehouse: cannot accept a command: {e}", flush=True)
                time.sleep(0.1)
                return
            peer = peer_credentials(conn)
            if peer is not None and peer[1] != os.getuid():
                conn.close()
                continue
            conn.setblocking(False)
            self.pending[conn.fileno()] = _Pending(conn)

    def _arrive(self, fd: int) -> None:
        p = self.pending[fd]
        try:
            request = p.read()
        except (OSError, ValueError, RecursionError) as e:
            print(f"lakehouse: a request could not be read: {e}", flush=True)
            _send(p.conn, {"refused": f"the host could not read the request ({e})"})
            p.close()
            del self.pending[fd]
            return
        if request is None:
            return
        del self.pending[fd]
        try:
            self._start(p.conn, request, p.fds)
        finally:
            for fd_ in p.fds:
                os.close(fd_)
            p.fds = []

    def _start(self, conn: socket.socket, request: dict[str, Any], fds: list[int]) -> None:
        """Fork the command's child, with the host's signals held until the child has its own."""
        name = project_and_command([str(a) for a in request.get("argv") or []])[1] or "?"
        held = {signal.SIGCHLD, signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1,
                signal.SIGUSR2, signal.SIGWINCH}
        for out in (sys.stdout, sys.stderr):  # nothing of the host's log left to reach the command's streams
            out.flush()
        old = signal.pthread_sigmask(signal.SIG_BLOCK, held)
        host_pid = os.getpid()
        try:
            pid = os.fork()
        except OSError as e:  # nothing forked: the caller runs the command itself
            signal.pthread_sigmask(signal.SIG_SETMASK, old)
            print(f"lakehouse: could not start a command: {e}", flush=True)
            _send(conn, {"refused": f"the host could not start it ({e.strerror or e})"})
            conn.close()
            return
        if pid == 0:  # the command: never returns into the loop
            try:
                self._close_for_child(conn)
                become(request, fds, self.added, old, host_pid)
            except KeyboardInterrupt:  # a Ctrl-C before the command began: ended by it, as a process is
                signal.signal(signal.SIGINT, signal.SIG_DFL)
                os.kill(os.getpid(), signal.SIGINT)
            finally:
                os._exit(1)
        signal.pthread_sigmask(signal.SIG_SETMASK, old)
        conn.setblocking(True)
        self.children[pid] = (conn, name)
        _send(conn, {"pid": pid})  # a caller gone already: the loop sees it hang up

    def _close_for_child(self, conn: socket.socket) -> None:
        """In the child: close what is the host's (its socket, requests, other commands' callers)."""
        signal.set_wakeup_fd(-1)
        for fd in self.wake:
            os.close(fd)
        for c in [self.listener, conn, *(c for c, _ in self.children.values())]:
            if c is not None:
                c.close()
        for p in self.pending.values():
            p.close()

    def _reap(self) -> None:
        """Collect ended children and send each one's status to its command's process."""
        while self.children:
            try:
                pid, wait_status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            entry = self.children.pop(pid, None)
            if entry is None:
                continue
            conn, name = entry
            code = os.waitstatus_to_exitcode(wait_status)
            gone = pid in self.hung_up
            self.hung_up.discard(pid)
            print(f"lakehouse: command {name} (pid {pid}) ended with status {code}"
                  + (" (its caller hung up: killed)" if gone else ""), flush=True)
            _send(conn, {"status": code})
            conn.close()


def _send(conn: socket.socket, msg: dict[str, Any]) -> None:
    try:
        conn.sendall(json.dumps(msg).encode() + b"\n")
    except OSError:
        pass


def serve(project: Path, server_pid: int) -> None:
    """The host's loop (see the module doc) until SIGTERM or the server ``server_pid`` is gone."""
    ident = identity()
    stamp = code_stamp(ident["package"])  # before the imports: a change made meanwhile is newer
    added = _preload()
    _fork_check()
    host = _Host(project, server_pid, added)
    host.listen()
    wake_r, wake_w = host.wake
    signal.set_wakeup_fd(wake_w)
    stop_asked: list[str] = []
    signal.signal(signal.SIGCHLD, lambda *_: None)  # wakes the loop (the wakeup fd) to reap
    signal.signal(signal.SIGTERM, lambda *_: stop_asked.append("SIGTERM"))
    signal.signal(signal.SIGINT, lambda *_: stop_asked.append("SIGINT"))
    rec = {"pid": os.getpid(), "identity": ident, "code_stamp": stamp, "server_pid": server_pid,
           "started": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"), "log": str(host.folder / LOG)}
    tmp = host.folder / f".{RECORD}.{os.getpid()}"
    tmp.write_text(json.dumps(rec, indent=2))
    os.chmod(tmp, 0o600)
    os.replace(tmp, host.folder / RECORD)
    print(f"lakehouse: command host ready (pid {os.getpid()}, socket {host.sock_path})", flush=True)
    checked = time.monotonic()
    while not (host.stopping and not host.children):
        if stop_asked:
            host.begin_stop(stop_asked[0])
        try:
            host.step(wake_r)
        except Exception as e:  # noqa: BLE001 - one bad turn must not leave the children without their host
            print(f"lakehouse: error in the loop: {type(e).__name__}: {e}", flush=True)
            time.sleep(0.1)
        if time.monotonic() - checked >= 1.0:
            checked = time.monotonic()
            if not server_alive(server_pid):
                host.begin_stop(f"the Spark Connect server (pid {server_pid}) is gone")
    print("lakehouse: command host stopped", flush=True)


if __name__ == "__main__":  # the detached process of ``start``
    serve(Path(sys.argv[1]), int(sys.argv[2]))
