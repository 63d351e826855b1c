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
for ``server`` and ``--help``/``--version``; with a standard stream closed; and when the host
cannot run it as its own process would (``unusable``, ``_reach``: the host is gone, its folder is
not the user's alone or its socket's other end is not the recorded host, it runs another
interpreter, venv or lakehouse installation or started with other start-up variables, or
lakehouse or an installed package changed since it started: one line on stderr says which). A
Ctrl-Z stops the child, then the command's process, and continuing the command's process
continues the child; a host that dies takes its children with it. The host imports libraries and uses none of them
before it forks (deltalake's runtime, for one, does not survive a fork), and it stops when the
project's server stops or with ``lakehouse server stop``.

A hosted command has its caller's folder, environment, streams, umask, priority and resource
limits (as far as the host's hard limits allow), but the host's cgroup, CPU affinity and no
controlling terminal: run commands that must be confined with ``LAKEHOUSE_HOST=off``.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import struct
import sys
import time
from collections.abc import Iterator
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
RELAYED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2,
           signal.SIGWINCH)
"""Signals a hosted command's process passes on to the child running the command (and what it
started); SIGTSTP (Ctrl-Z) stops the child, then this process, and continues both."""
STARTUP_VARIABLES = ("PYTHON", "LD_", "OMP_", "OPENBLAS_", "MKL_", "ARROW_", "SPARK_CONNECT_", "GRPC_", "LC_", "LANG")
"""Environment variables (by prefix) that Python or a library reads when it starts or is imported:
a host started with other values than a command has cannot run it as its own process would."""
GLOBAL_WITH_VALUE = frozenset({"--project", "--warehouse", "--master", "--remote", "--conf", "--format"})
"""The root group's options that take a value (lakehouse.cli.cli)."""


# -- the command's side --------------------------------------------------------------------------

def forward(argv: list[str]) -> int | None:
    """Run the command ``argv`` in the project's host when one serves it: the command's exit
    status (negative: ended by that signal), or None when it is to run in this process."""
    flag = env("LAKEHOUSE_HOST")
    if flag is not None and flag.strip().lower() in OFF:
        return None
    project, command = project_and_command(argv)
    if command is None or command in NOT_HOSTED:
        return None
    if not all(_is_open(fd) for fd in (0, 1, 2)):
        return None  # a closed standard stream: its number would be the connection's; run as a process would
    try:
        cwd = os.getcwd()
    except OSError:  # a working folder removed meanwhile: the command says so itself
        return None
    root = Path(project or env("LAKEHOUSE_PROJECT") or ".").expanduser().absolute()
    folder = root / PRIVATE_FOLDER
    rec = read_record(root)
    if rec is None:
        return None  # no host (the usual case without a server): nothing to say
    handed: list[bool] = []
    try:
        with _reach(folder, rec) as conn:
            return _run(conn, argv, cwd, handed)
    except Exception as e:  # noqa: BLE001 - anything before the hand-over: the command runs here
        why = str(e) if isinstance(e, _Passed) else f"{type(e).__name__}: {e}"
        if handed:  # the host has the command: running it here too could run it twice
            print(f"error: the command host failed after it took the command ({why}); its outcome is unknown; "
                  f"see {PRIVATE_FOLDER}/{LOG}", file=sys.stderr)
            return 1
        print(f"note: not using the command host recorded in {folder / RECORD}: {why}; "
              "the command runs in this process", file=sys.stderr)
        return None


class _Passed(Exception):
    """Why the host does not run the command; raised only before the command was handed over."""


def project_and_command(argv: list[str]) -> tuple[str | None, str | None]:
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


def read_record(project: Path) -> dict[str, Any] | None:
    """The project's host record, or None when there is none (or it is unreadable)."""
    try:
        rec = json.loads((project / PRIVATE_FOLDER / RECORD).read_text())
        return rec if isinstance(rec, dict) else None
    except (OSError, ValueError):
        return None


def identity() -> dict[str, Any]:
    """What a host must share with a command to run it as the command's own process would: the
    interpreter, its environment (venv), the package, and the variables read at start-up."""
    import lakehouse

    startup = {k: v for k, v in os.environ.items() if k.startswith(STARTUP_VARIABLES)}
    return {"python": os.path.realpath(sys.executable), "prefix": sys.prefix, "version": sys.version,
            "package": os.path.dirname(os.path.realpath(lakehouse.__file__)), "variables": startup}


def code_stamp(package: str) -> float:
    """The newest modification time of the package's modules and of the folder of installed
    packages (an install or upgrade changes its entries)."""
    import sysconfig

    newest = 0.0
    for folder in (sysconfig.get_path("purelib"), sysconfig.get_path("platlib")):
        try:
            newest = max(newest, os.stat(folder).st_mtime)
        except OSError:
            pass
    for root, dirs, files in os.walk(package):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        for f in files:
            if f.endswith(".py"):
                try:
                    newest = max(newest, os.stat(os.path.join(root, f)).st_mtime)
                except OSError:  # an editor's lock link, a file removed meanwhile
                    continue
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
    if not isinstance(ident, dict):
        return "its record is not whole"
    for key, value in mine.items():
        theirs = ident.get(key)
        if key == "variables" and isinstance(theirs, dict) and theirs != value:
            name = sorted(k for k in {*theirs, *value} if theirs.get(k) != value.get(k))[0]
            return f"it started with {name}={theirs.get(name, '')!r}, not {value.get(name, '')!r}"
        if theirs != value:
            return f"it runs another {key} ({theirs})"
    if code_stamp(mine["package"]) > stamp:
        return ("lakehouse or a package it uses changed since it started (`lakehouse server stop`, then `start`, "
                "to restart it)")
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


def _reach(folder: Path, rec: dict[str, Any]) -> socket.socket:
    """A connection to the recorded host, checked: the folder is the user's alone, the host can run
    the command, and the socket's other end is that host's process. Raises _Passed."""
    st = os.stat(folder)
    if st.st_uid != os.getuid() or st.st_mode & 0o077:
        raise _Passed(f"its folder {folder} is not the user's alone")
    why = unusable(rec)
    if why is not None:
        raise _Passed(why)
    try:
        conn = connect(folder / SOCKET)
    except OSError as e:
        raise _Passed(f"its socket does not answer ({e.strerror or e})") from None
    peer = peer_credentials(conn)
    if peer is not None and peer != (int(rec["pid"]), os.getuid()):
        conn.close()
        raise _Passed("its socket is not the recorded host's")
    return conn


def peer_credentials(conn: socket.socket) -> tuple[int, int] | None:
    """The (pid, uid) of the process at the other end of a Unix socket (None where the system
    does not tell)."""
    option = getattr(socket, "SO_PEERCRED", None)
    if option is None:
        return None
    pid, uid, _gid = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, option, struct.calcsize("3i")))
    return pid, uid


def connect(path: Path) -> socket.socket:
    """A connection to the host's socket at ``path``."""
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        with address(path) as where:
            conn.connect(where)
    except OSError:
        conn.close()
        raise
    return conn


@contextlib.contextmanager
def address(path: Path) -> Iterator[str]:
    """The socket's address while in the block: its path, or, past the length a socket address
    allows, the same file through this process's /proc entry of its folder (Linux)."""
    text = str(path)
    if len(text.encode()) < 100 or not os.path.isdir("/proc/self/fd"):
        yield text
        return
    fd = os.open(path.parent, os.O_RDONLY)
    try:
        yield f"/proc/self/fd/{fd}/{path.name}"
    finally:
        os.close(fd)


def _run(conn: socket.socket, argv: list[str], cwd: str, handed: list[bool]) -> int:
    """Hand the command to the host and wait for its status (see the module doc); ``handed``
    gets an entry once the host has the whole request. Raises _Passed when the host did not take
    the command."""
    import resource

    streams = [{"encoding": s.encoding, "errors": s.errors, "line_buffering": s.line_buffering,
                "write_through": getattr(s, "write_through", False)}
               if s is not None else None for s in (sys.stdin, sys.stdout, sys.stderr)]
    mask = os.umask(0o22)
    os.umask(mask)
    limits = {name: resource.getrlimit(getattr(resource, name)) for name in LIMITS if hasattr(resource, name)}
    body = json.dumps({"argv": argv, "cwd": cwd, "env": dict(os.environ), "streams": streams, "umask": mask,
                       "nice": os.getpriority(os.PRIO_PROCESS, 0), "limits": limits}).encode()
    child: list[int] = []
    pending: list[int] = []

    def relay(signum: int, _frame: Any) -> None:
        if child:
            signal_child(child[0], signum)
        else:
            pending.append(signum)

    def stop(_signum: int, _frame: Any) -> None:  # Ctrl-Z: the child first, then this process
        if not child:  # not forked yet: both stop once the child is known
            pending.append(signal.SIGTSTP)
            return
        signal_child(child[0], signal.SIGSTOP)
        signal.signal(signal.SIGTSTP, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTSTP)  # here until SIGCONT
        signal.signal(signal.SIGTSTP, stop)
        signal_child(child[0], signal.SIGCONT)

    saved = {s: signal.signal(s, relay) for s in RELAYED}
    saved[signal.SIGTSTP] = signal.signal(signal.SIGTSTP, stop)

    def passed(why: str) -> _Passed:
        """The command runs here after all: this process's own handlers back, and the signals
        that came meanwhile delivered to it."""
        for s, handler in saved.items():
            signal.signal(s, handler)
        for signum in pending:
            os.kill(os.getpid(), signum)
        handed.clear()
        return _Passed(why)

    try:
        socket.send_fds(conn, [struct.pack("!I", len(body))], [0, 1, 2])
        conn.sendall(body)
        handed.append(True)
    except OSError as e:
        raise passed(f"it hung up ({e.strerror or e})") from None
    try:
        for line in conn.makefile("rb"):
            msg = json.loads(line)
            if "pid" in msg:
                child.append(int(msg["pid"]))
                for signum in pending:
                    (stop if signum == signal.SIGTSTP else relay)(signum, None)
            elif "status" in msg:
                return int(msg["status"])
            elif "refused" in msg:  # nothing ran (the host could not start a child)
                raise passed(str(msg["refused"]))
    except (OSError, ValueError):
        pass
    where = f" (pid {child[0]})" if child else ""
    print(f"error: the command host ended while it ran the command{where}, and the command with it; "
          f"see {PRIVATE_FOLDER}/{LOG}", file=sys.stderr)
    return 1


LIMITS = ("RLIMIT_AS", "RLIMIT_CORE", "RLIMIT_CPU", "RLIMIT_DATA", "RLIMIT_FSIZE", "RLIMIT_NOFILE", "RLIMIT_NPROC",
          "RLIMIT_STACK")
"""The resource limits a hosted command takes from its caller (as far as they are the host's or lower)."""


def signal_child(pid: int, signum: int) -> None:
    """Signal a hosted command: its process group (the child and what it started), or the child
    alone before it has made that group."""
    try:
        os.killpg(pid, signum)
    except ProcessLookupError:
        try:
            os.kill(pid, signum)
        except ProcessLookupError:
            pass


def _is_open(fd: int) -> bool:
    try:
        os.fstat(fd)
        return True
    except OSError:
        return False


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
