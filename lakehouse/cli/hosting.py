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

from lakehouse.cli.host import LOG, MODULE, RECORD, SOCKET, _address, code_stamp, identity, running
from lakehouse.errors import LakehouseError
from lakehouse.settings import PRIVATE_FOLDER, private_folder

PRELOAD = (
    "lakehouse.project", "pyspark.sql.connect.session", "pyspark.sql.connect.dataframe",
    "pyspark.sql.connect.functions", "pyspark.sql.functions", "pyarrow.compute", "pyarrow.parquet",
    "pyarrow.dataset", "pandas", "duckdb", "deltalake", "sqlglot", "yaml", "rich",
)
"""Libraries a command imports in its first second (the package's own modules are added)."""
MAX_REQUEST = 16 << 20
"""The largest request (arguments and environment) a host reads."""
START_SECONDS = 120.0
STOP_SECONDS = 30.0
"""How long a stopping host lets the commands it runs finish before it kills them."""


def read_record(project: Path) -> dict[str, Any] | None:
    """The project's host record, or None when there is none (or it is unreadable)."""
    try:
        rec = json.loads((project / PRIVATE_FOLDER / RECORD).read_text())
        return rec if isinstance(rec, dict) else None
    except (OSError, ValueError):
        return None


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
    _kill(proc.pid)
    raise LakehouseError(f"the command host was not ready within {timeout:.0f}s (log: {logfile})")


def stop(project: Path, timeout: float = STOP_SECONDS + 10) -> dict[str, Any] | None:
    """Stop the project's host; its record, or None when none was recorded."""
    rec = read_record(project)
    if rec is None:
        return None
    pid = int(rec.get("pid") or 0)
    if pid and running(pid):
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        deadline = time.monotonic() + timeout
        while running(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        if running(pid):
            _kill(pid)
    for name in (RECORD, SOCKET):
        (project / PRIVATE_FOLDER / name).unlink(missing_ok=True)
    return rec


def _kill(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


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


def serve(project: Path, server_pid: int) -> None:
    """The host's loop (see the module doc) until SIGTERM or the server ``server_pid`` is gone."""
    from lakehouse.spark.server import _alive as server_alive

    added = _preload()
    folder = private_folder(project)
    sock_path = folder / SOCKET
    sock_path.unlink(missing_ok=True)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(_address(sock_path))
    os.chmod(sock_path, 0o600)
    listener.listen(64)
    listener.setblocking(False)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    stopping: list[bool] = []
    signal.signal(signal.SIGCHLD, lambda *_: None)  # wakes the loop (the wakeup fd) to reap
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    signal.signal(signal.SIGINT, lambda *_: stopping.append(True))
    ident = identity()
    rec = {"pid": os.getpid(), "identity": ident, "code_stamp": code_stamp(ident["package"]),
           "server_pid": server_pid, "started": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
           "log": str(folder / LOG)}
    tmp = folder / f".{RECORD}.{os.getpid()}"
    tmp.write_text(json.dumps(rec, indent=2))
    os.chmod(tmp, 0o600)
    os.replace(tmp, folder / RECORD)
    print(f"lakehouse: command host ready (pid {os.getpid()}, socket {sock_path})", flush=True)
    children: dict[int, socket.socket] = {}
    hung_up: set[int] = set()
    checked = time.monotonic()
    stop_by: float | None = None
    open_listener: socket.socket | None = listener
    while True:
        if stopping and open_listener is not None:
            open_listener.close()
            open_listener = None
            current = read_record(project)
            if current is not None and current.get("pid") == os.getpid():
                (folder / RECORD).unlink(missing_ok=True)
                sock_path.unlink(missing_ok=True)
            stop_by = time.monotonic() + STOP_SECONDS
        if stopping and not children:
            break
        if stop_by is not None and time.monotonic() > stop_by:
            for pid in children:
                _kill(pid)
        watched = {c.fileno(): pid for pid, c in children.items() if pid not in hung_up}
        waiting = [wake_r, *watched] + ([open_listener] if open_listener is not None else [])
        ready, _, _ = select.select(waiting, [], [], 1.0)
        if wake_r in ready:
            try:
                while os.read(wake_r, 512):
                    pass
            except BlockingIOError:
                pass
        for fd in ready:
            if isinstance(fd, int) and fd in watched:  # the command's process hung up: it was killed
                hung_up.add(watched[fd])
                _kill(watched[fd])
        _reap(children, hung_up)
        if open_listener is not None and open_listener in ready:
            _accept(open_listener, children, added, [wake_r, wake_w])
        if time.monotonic() - checked >= 1.0:
            checked = time.monotonic()
            if not server_alive(server_pid) and not stopping:
                print(f"lakehouse: the Spark Connect server (pid {server_pid}) is gone; stopping", flush=True)
                stopping.append(True)
    print("lakehouse: command host stopped", flush=True)


def _reap(children: dict[int, socket.socket], hung_up: set[int]) -> None:
    """Collect ended children and send each one's status to its command's process."""
    while children:
        try:
            pid, wait_status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        conn = children.pop(pid, None)
        hung_up.discard(pid)
        if conn is None:
            continue
        code = os.waitstatus_to_exitcode(wait_status)
        try:
            conn.sendall(json.dumps({"status": code}).encode() + b"\n")
        except OSError:
            pass
        conn.close()


def _accept(listener: socket.socket, children: dict[int, socket.socket], added: dict[str, str],
            own_fds: list[int]) -> None:
    """Take every waiting command: read its request, fork its child."""
    while True:
        try:
            conn, _ = listener.accept()
        except (BlockingIOError, InterruptedError):
            return
        try:
            request, fds = _receive(conn)
        except (OSError, ValueError) as e:
            print(f"lakehouse: a request could not be read: {e}", flush=True)
            conn.close()
            continue
        pid = os.fork()
        if pid == 0:  # the command: never returns into the loop
            try:
                for c in [listener, conn, *children.values()]:
                    c.close()
                for fd in own_fds:
                    os.close(fd)
                _become(request, fds, added)
            finally:
                os._exit(1)
        for fd in fds:
            os.close(fd)
        children[pid] = conn
        try:
            conn.sendall(json.dumps({"pid": pid}).encode() + b"\n")
        except OSError:  # gone already: the loop sees it hang up
            pass


def _receive(conn: socket.socket) -> tuple[dict[str, Any], list[int]]:
    """A command's request and its three standard streams' descriptors."""
    conn.setblocking(True)
    conn.settimeout(10)
    head, fds, _flags, _addr = socket.recv_fds(conn, 4, 3)
    try:
        head += _exactly(conn, 4 - len(head))
        (size,) = struct.unpack("!I", head)
        if size > MAX_REQUEST or len(fds) != 3:
            raise ValueError(f"a request of {size} bytes with {len(fds)} descriptors")
        request = json.loads(_exactly(conn, size))
        if not isinstance(request, dict):
            raise ValueError("a request that is not an object")
    except BaseException:
        for fd in fds:
            os.close(fd)
        raise
    conn.settimeout(None)
    return request, list(fds)


def _exactly(conn: socket.socket, n: int) -> bytes:
    out = b""
    while len(out) < n:
        chunk = conn.recv(min(n - len(out), 1 << 20))
        if not chunk:
            raise ValueError("the request ended early")
        out += chunk
    return out


def _become(request: dict[str, Any], fds: list[int], added: dict[str, str]) -> None:
    """In the forked child: become the command's process (streams, folder, environment, signals)
    and run the command; ends the process."""
    import io
    import tempfile
    import traceback

    signal.set_wakeup_fd(-1)
    for s in (signal.SIGCHLD, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2):
        signal.signal(s, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    os.setsid()  # its own process group: the host kills it (and what it starts) as one
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    streams = request.get("streams") or [None, None, None]
    made = []
    for target, info in enumerate(streams):
        info = info or {}
        raw = io.FileIO(target, "r" if target == 0 else "w", closefd=False)
        buffered = io.BufferedReader(raw) if target == 0 else io.BufferedWriter(raw)
        made.append(io.TextIOWrapper(buffered, encoding=info.get("encoding") or "utf-8",  # type: ignore[arg-type]
                                     errors=info.get("errors") or "strict",
                                     line_buffering=bool(info.get("line_buffering"))))
    sys.stdin, sys.stdout, sys.stderr = made
    sys.__stdin__, sys.__stdout__, sys.__stderr__ = made  # type: ignore[misc]
    os.environ.clear()
    os.environ.update({str(k): str(v) for k, v in (request.get("env") or {}).items()})
    for k, v in added.items():
        os.environ.setdefault(k, v)
    time.tzset()
    tempfile.tempdir = None
    argv = [str(a) for a in request.get("argv") or []]
    sys.argv = ["lakehouse", *argv]
    from lakehouse.cli import _exit, cli

    try:
        os.chdir(str(request.get("cwd")))
        cli(args=argv, prog_name="lakehouse")
        code: object = 0
    except SystemExit as e:
        code = e.code
    except BaseException:  # noqa: BLE001 - as the interpreter would: the traceback, status 1
        traceback.print_exc()
        code = 1
    _exit(code)


if __name__ == "__main__":  # the detached process of ``start``
    serve(Path(sys.argv[1]), int(sys.argv[2]))
