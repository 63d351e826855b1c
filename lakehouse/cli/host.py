"""The project's command host: while the project's Spark Connect server runs, a command starts
its work in a few hundredths of a second instead of about one (issue 25).

Before a ``lakehouse`` process does any work it imports pyspark's Connect client, pandas, pyarrow,
DuckDB, deltalake, sqlglot and, for ``check``, Great Expectations: about a second of CPU, more
than many commands' work on a server. ``lakehouse server start`` therefore also starts a host
beside the server: a Python process that imports all of that once and waits on a Unix socket in
the project's private folder (``.lakehouse/host.sock``; the folder is the user's alone). A command
(``lakehouse.cli.main``) that finds the host's record (``.lakehouse/host.json``) hands it its
arguments, working folder, environment and its three standard streams (the file descriptors
themselves), and waits. The host forks a child that becomes the command: it reads the user's
stdin and writes to the user's terminal or pipes, in the user's folder and environment, and exits
with the command's status, which the host relays; the command's process then exits with it (or
is ended by the same signal as the child). Signals the command's process receives (Ctrl-C,
SIGTERM, SIGHUP, ...) are passed on to the child; when the command's process dies, the host
kills the child, as a killed process takes its work with it.

A command runs in its own process instead, as without a host: with ``LAKEHOUSE_HOST=off``;
for ``server`` and ``--help``/``--version``; when the host runs other code than the command
would (another interpreter or lakehouse installation, or a module of the package changed since
the host started: one line on stderr says so). The host imports libraries and uses none of them
before it forks (deltalake's runtime, for one, does not survive a fork), and it stops when the
project's server stops or with ``lakehouse server stop``.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import struct
import sys
import time
from pathlib import Path
from typing import Any

from lakehouse.settings import OFF, PRIVATE_FOLDER, env

MODULE = "lakehouse.cli.hosting"
"""The host process's module (lakehouse.cli.hosting: start, stop, its loop and children)."""
RECORD = "host.json"
SOCKET = "host.sock"
LOG = "host.log"
NOT_HOSTED = frozenset({"server"})
"""Commands that always run in their own process: the server's own (they start and stop the host)."""
RELAYED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2)
"""Signals a hosted command's process passes on to the child running the command."""
GLOBAL_WITH_VALUE = frozenset({"--project", "--warehouse", "--master", "--remote", "--conf", "--format"})
"""The root group's options that take a value (lakehouse.cli.cli)."""


# -- the command's side --------------------------------------------------------------------------

def forward(argv: list[str]) -> int | None:
    """Run the command ``argv`` in the project's host when one serves it: the command's exit
    status (negative: ended by that signal), or None when it is to run in this process."""
    flag = env("LAKEHOUSE_HOST")
    if flag is not None and flag.strip().lower() in OFF:
        return None
    project, command = _target(argv)
    if command is None or command in NOT_HOSTED:
        return None
    try:
        cwd = os.getcwd()
    except OSError:  # a working folder removed meanwhile: the command says so itself
        return None
    folder = Path(project or env("LAKEHOUSE_PROJECT") or ".").expanduser().absolute() / PRIVATE_FOLDER
    try:
        rec = json.loads((folder / RECORD).read_text())
    except (OSError, ValueError):
        return None  # no host (the usual case without a server): nothing to say
    why = unusable(rec)
    conn = None
    if why is None:
        try:
            conn = _connect(folder / SOCKET)
        except OSError as e:
            why = f"its socket does not answer ({e.strerror or e})"
    if conn is None:
        print(f"note: not using the command host recorded in {folder / RECORD}: {why}; "
              "the command runs in this process", file=sys.stderr)
        return None
    with conn:
        return _run(conn, argv, cwd)


def _target(argv: list[str]) -> tuple[str | None, str | None]:
    """The ``--project`` value and the command name of a command line (None: no command)."""
    project, i = None, 0
    while i < len(argv):
        arg = argv[i]
        name, eq, value = arg.partition("=")
        if arg == "--":
            return project, None
        if name in GLOBAL_WITH_VALUE:
            if not eq:
                i += 1
                if i == len(argv):
                    return project, None
                value = argv[i]
            if name == "--project":
                project = value
        elif not arg.startswith("-"):
            return project, arg
        elif arg in ("-h", "--help", "--version"):
            return project, None
        i += 1
    return project, None


def identity() -> dict[str, str]:
    """What a host must share with a command to run it: the interpreter and the package."""
    import lakehouse

    return {"python": os.path.realpath(sys.executable), "version": sys.version,
            "package": os.path.dirname(os.path.realpath(lakehouse.__file__))}


def code_stamp(package: str) -> float:
    """The newest modification time of the package's modules."""
    newest = 0.0
    for root, dirs, files in os.walk(package):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        for f in files:
            if f.endswith(".py"):
                newest = max(newest, os.stat(os.path.join(root, f)).st_mtime)
    return newest


def unusable(rec: dict[str, Any]) -> str | None:
    """Why the recorded host cannot run this process's command, or None when it can."""
    try:
        pid, ident, stamp = int(rec["pid"]), rec["identity"], float(rec["code_stamp"])
    except (KeyError, TypeError, ValueError):
        return "its record is not whole"
    if not running(pid):
        return f"its process {pid} is gone"
    mine = identity()
    if ident != mine:
        other = next(k for k in mine if ident.get(k) != mine[k])
        return f"it runs another {other} ({ident.get(other)})"
    if code_stamp(mine["package"]) > stamp:
        return "lakehouse's code changed since it started (`lakehouse server stop`, then `start`, to restart it)"
    return None


def running(pid: int) -> bool:
    """Whether ``pid`` is a running host (a pid reused by another program is not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return False  # not the user's: not the user's host
    try:
        return MODULE.encode() in Path(f"/proc/{pid}/cmdline").read_bytes()
    except FileNotFoundError:
        return sys.platform != "linux"  # no /proc to ask: the pid is taken for the host
    except OSError:
        return False


def _connect(path: Path) -> socket.socket:
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(_address(path))
    except OSError:
        conn.close()
        raise
    return conn


def _address(path: Path) -> str:
    """The socket's address: its path, or, past the length a socket address allows, the same file
    through this process's /proc entry of its folder (Linux)."""
    text = str(path)
    if len(text.encode()) < 100 or not os.path.isdir("/proc/self/fd"):
        return text
    fd = os.open(path.parent, os.O_RDONLY)  # kept open while the process lives: connect needs it
    return f"/proc/self/fd/{fd}/{path.name}"


def _run(conn: socket.socket, argv: list[str], cwd: str) -> int:
    """Hand the command to the host and wait for its status (see the module doc)."""
    streams = [{"encoding": s.encoding, "errors": s.errors, "line_buffering": s.line_buffering}
               if s is not None else None for s in (sys.stdin, sys.stdout, sys.stderr)]
    body = json.dumps({"argv": argv, "cwd": cwd, "env": dict(os.environ), "streams": streams}).encode()
    fds = [_open_or_null(fd) for fd in (0, 1, 2)]
    child: list[int] = []
    pending: list[int] = []

    def relay(signum: int, _frame: Any) -> None:
        if not child:
            pending.append(signum)
            return
        try:
            os.kill(child[0], signum)
        except ProcessLookupError:
            pass

    for s in RELAYED:
        signal.signal(s, relay)
    socket.send_fds(conn, [struct.pack("!I", len(body))], fds)
    conn.sendall(body)
    replies = conn.makefile("rb")
    for line in replies:
        msg = json.loads(line)
        if "pid" in msg:
            child.append(int(msg["pid"]))
            for signum in pending:
                relay(signum, None)
        elif "status" in msg:
            return int(msg["status"])
    where = f" (pid {child[0]})" if child else ""
    print(f"error: the command host ended while it ran the command{where}; its outcome is unknown "
          f"(see {PRIVATE_FOLDER}/{LOG})", file=sys.stderr)
    return 1


def _open_or_null(fd: int) -> int:
    try:
        os.fstat(fd)
        return fd
    except OSError:  # a closed standard stream: the child gets /dev/null, as reading or writing nothing
        return os.open(os.devnull, os.O_RDWR)


def exit_as(status: int) -> None:
    """End this process as the hosted command ended: its exit status, or its signal."""
    for out in (sys.stdout, sys.stderr):
        try:
            out.flush()
        except (OSError, ValueError):
            pass
    if status < 0:
        try:
            signal.signal(-status, signal.SIG_DFL)
        except (OSError, ValueError):  # SIGKILL, SIGSTOP: no handler to take back
            pass
        os.kill(os.getpid(), -status)
        time.sleep(1)  # a signal that does not end a process by default (none relayed here)
        status = 128 - status
    os._exit(status)
