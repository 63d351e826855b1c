"""The command host's child (lakehouse.cli.host, lakehouse.cli.hosting): a fork of the host that
becomes the command's process (its caller's signals, streams, folder, environment, umask, priority
and limits) and runs the command.

``LAKEHOUSE_CRASH_AT=hosted_start`` (or a pause there, ``LAKEHOUSE_PAUSE_AT``) stops a hosted
command once it has become the caller's and before it starts: tests signal and kill it there.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from typing import Any


def become(request: dict[str, Any], fds: list[int], added: dict[str, str], mask: Any, host_pid: int) -> None:
    """In the forked child of the host ``host_pid``: become the command's process (signals, streams,
    folder, environment, umask, priority, limits; ``mask``: the signal mask to take back, ``added``:
    the variables the host's imports set) and run the command; ends the process."""
    import ctypes
    import io
    import resource
    import tempfile
    import traceback

    for s in (signal.SIGCHLD, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2,
              signal.SIGWINCH):
        signal.signal(s, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:  # the host's death takes the command with it (Linux); checked once more below
        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL))  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    os.setsid()  # its own process group: the host and its caller signal it (and what it starts) as one
    signal.pthread_sigmask(signal.SIG_SETMASK, mask)  # what arrived since the fork is handled now, as the command's
    if os.getppid() != host_pid:
        os._exit(1)  # the host died before the line above
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    streams = request.get("streams") or [None, None, None]
    made: list[Any] = []
    for target, info in enumerate(streams):
        info = info or {}
        raw = io.FileIO(target, "r" if target == 0 else "w", closefd=False)
        unbuffered = bool(info.get("write_through")) and target > 0  # python -u, PYTHONUNBUFFERED
        layer: Any = raw if unbuffered else io.BufferedReader(raw) if target == 0 else io.BufferedWriter(raw)
        made.append(io.TextIOWrapper(layer, encoding=info.get("encoding") or "utf-8",
                                     errors=info.get("errors") or "strict",
                                     line_buffering=bool(info.get("line_buffering")), write_through=unbuffered))
    sys.stdin, sys.stdout, sys.stderr = made
    sys.__stdin__, sys.__stdout__, sys.__stderr__ = made  # type: ignore[misc,assignment]
    os.environ.clear()
    os.environ.update({str(k): str(v) for k, v in (request.get("env") or {}).items()})
    for k, v in added.items():
        os.environ.setdefault(k, v)
    time.tzset()
    tempfile.tempdir = None
    os.umask(int(request.get("umask", 0o22)))
    try:
        os.setpriority(os.PRIO_PROCESS, 0, int(request.get("nice", 0)))
    except OSError:  # a caller less nice than the host: the host's (only a privileged process may raise it)
        pass
    for name, (soft, hard) in (request.get("limits") or {}).items():
        which = getattr(resource, name, None)
        if which is None:
            continue
        try:
            resource.setrlimit(which, (soft, hard))
        except (OSError, ValueError):  # a hard limit above the host's: the host's, the caller's soft below it
            own_hard = resource.getrlimit(which)[1]
            low = soft if own_hard == resource.RLIM_INFINITY or (soft != resource.RLIM_INFINITY and soft <= own_hard) \
                else own_hard
            try:
                resource.setrlimit(which, (low, own_hard))
            except (OSError, ValueError):
                pass
    argv = [str(a) for a in request.get("argv") or []]
    sys.argv = ["lakehouse", *argv]
    from lakehouse import crashpoints
    from lakehouse.cli import _exit, cli

    try:
        os.chdir(str(request.get("cwd")))
        crashpoints.reached("hosted_start")
        cli(args=argv, prog_name="lakehouse")
        code: object = 0
    except SystemExit as e:
        code = e.code
    except KeyboardInterrupt:  # a Ctrl-C before the command took it over: ended by it, as a process is
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
        code = 1
    except BaseException:  # noqa: BLE001 - as the interpreter would: the traceback, status 1
        traceback.print_exc()
        code = 1
    _exit(code)
