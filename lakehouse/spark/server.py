"""A project's Spark Connect server, and which Spark a command runs on.

``lakehouse server start`` runs one long-lived Spark driver for a project (a detached process of
this module) with lakehouse's Spark settings (``spark_conf``: the same as a session started in a
command's own process) and Spark Connect's plugin, listening on loopback only and refusing any
client without its pre-shared token. The record of it, ``<project>/.lakehouse/server.json``
(address, pid, token, project, warehouse, master; in a folder only the user can read), is how
every later command of that project finds it: a command then connects in about a second instead
of starting a JVM. Its log is ``<project>/.lakehouse/server.log``.

Which Spark a command uses (``session_for``): ``--remote``/``LAKEHOUSE_REMOTE`` when given (a
cluster's Connect server, which receives the lakehouse package with the session; a server on this
machine imports it from this installation, as ``lakehouse server`` does); else the project's server when its record is sound (the process is
alive, the port answers, it serves the same project and warehouse; otherwise one line on stderr
says why it is not used); else a Spark driver in the command's own process, as without a server.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from lakehouse import objectstore, storage
from lakehouse.errors import ConfigError, LakehouseError
from lakehouse.lease import alive
from lakehouse.settings import PRIVATE_FOLDER, Settings, env, private_folder
from lakehouse.spark.session import active, adopt, connect, current, get_spark, redact

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)
MODULE = "lakehouse.spark.server"
"""This module's name, also when it runs as the server's ``__main__``."""

PLUGIN = "org.apache.spark.sql.connect.SparkConnectPlugin"
TOKEN_VARIABLE = "SPARK_CONNECT_AUTHENTICATE_TOKEN"
"""How Spark Connect's server and client take the pre-shared token (never on a command line)."""
START_SECONDS = 180.0


@dataclass(frozen=True)
class ServerRecord:
    """A running server as ``server.json`` records it."""

    port: int
    pid: int
    token: str
    project: str
    warehouse: str
    master: str
    started: str
    log: str

    @property
    def url(self) -> str:
        """The Spark Connect URL a client uses (``localhost``: gRPC sends a token unencrypted
        only to a local address)."""
        return f"sc://localhost:{self.port}/;token={self.token}"

    @property
    def address(self) -> str:
        """Where it listens, without the token."""
        return f"sc://127.0.0.1:{self.port}"


def record_path(project: Path) -> Path:
    """Where the project's server is recorded."""
    return project / PRIVATE_FOLDER / "server.json"


def scratch_path(project: Path) -> Path:
    """The server JVM's scratch (Spark's local dirs, session artifacts), emptied on each start."""
    return project / PRIVATE_FOLDER / "tmp"


def read_record(project: Path) -> ServerRecord | None:
    """The project's server record, or None when there is none (or it is unreadable)."""
    try:
        doc = storage.read_json(str(record_path(project)))
        return ServerRecord(**{k: doc[k] for k in ServerRecord.__dataclass_fields__})
    except (OSError, ValueError, KeyError, TypeError):
        return None


def problem(rec: ServerRecord, settings: Settings) -> str | None:
    """Why the recorded server cannot serve ``settings`` (gone, another project or warehouse),
    or None when it can."""
    if not server_alive(rec.pid):
        return f"its process {rec.pid} is gone"
    if not _answers(rec.port):
        return f"nothing answers on port {rec.port}"
    if rec.project != str(settings.project):
        return f"it was started for the project {rec.project}"
    if rec.warehouse != settings.warehouse:
        return f"it serves the warehouse {rec.warehouse}, not {settings.warehouse}"
    return None


def server_alive(pid: int) -> bool:
    """The server's process runs (a pid reused by another program does not count)."""
    if not alive(pid):
        return False
    cmdline = Path(f"/proc/{pid}/cmdline")
    if cmdline.exists():  # a pid reused by another program is not our server
        try:
            return MODULE.encode() in cmdline.read_bytes()
        except OSError:
            return False
    return True


def _answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2):
            return True
    except OSError:
        return False


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# -- which Spark a command runs on ----------------------------------------------------------------

def session_for(settings: Settings) -> "SparkSession":
    """The SparkSession a command of ``settings`` runs on: the session the user made active in
    this process (``session.adopt``: a notebook's, spark-submit's), else the remote it names,
    else the project's running server, else Spark in this process (see the module's docstring).
    A process keeps the session it took first."""
    made = current()
    if made is not None:
        return made
    users = active()
    if users is not None:  # a notebook's or spark-submit's session: the user's settings, checked
        return adopt(users)
    if settings.remote:
        return connect(settings.remote, ship_package=not _on_this_machine(settings.remote))
    rec = read_record(settings.project)
    if rec is not None:
        why = problem(rec, settings)
        if why is None:
            return connect(rec.url, ship_package=False)
        print(f"note: not using the Spark Connect server recorded in {record_path(settings.project)}: "
              f"{why}; starting Spark in this process", file=sys.stderr)
    quiet = env("LAKEHOUSE_LOG_LEVEL") is None  # -v / LAKEHOUSE_LOG_LEVEL: the JVM speaks on stderr
    return get_spark(settings.master, extra_conf=settings.spark_conf(),
                     output=str(private_folder(settings.project) / "spark.log") if quiet else None)


def _on_this_machine(url: str) -> bool:
    """Whether a Spark Connect URL names this machine (its Python workers import lakehouse from
    this installation; a server elsewhere gets the package with the session)."""
    host = url.removeprefix("sc://").split("/", 1)[0].rsplit(":", 1)[0].strip("[]")
    return host in ("localhost", "127.0.0.1", "::1")


def which(settings: Settings) -> dict[str, str | None]:
    """What ``session_for`` would use, without connecting: ``{"spark": "remote"|"server"|
    "in-process", "address": ..., "why": ...}``."""
    if settings.remote:
        return {"spark": "remote", "address": redact(settings.remote), "why": "--remote or LAKEHOUSE_REMOTE"}
    rec = read_record(settings.project)
    if rec is None:
        return {"spark": "in-process", "address": None, "why": "no server runs for this project"}
    why = problem(rec, settings)
    if why is None:
        return {"spark": "server", "address": rec.address, "why": None}
    return {"spark": "in-process", "address": None, "why": f"the recorded server is not used: {why}"}


# -- start, stop -----------------------------------------------------------------------------------

def start(settings: Settings, port: int | None = None, timeout: float = START_SECONDS) -> ServerRecord:
    """Start the project's server (a detached process) and wait until it answers; its record.
    Refuses when one already runs for the project."""
    rec = read_record(settings.project)
    if rec is not None and server_alive(rec.pid) and _answers(rec.port):
        raise LakehouseError(f"a Spark Connect server already runs for this project ({rec.address}, pid {rec.pid}); "
                             "`lakehouse server stop` first")
    private = private_folder(settings.project)
    record_path(settings.project).unlink(missing_ok=True)
    chosen = port or _free_port()
    logfile = private / "server.log"
    env = {**os.environ, TOKEN_VARIABLE: secrets.token_urlsafe(32),  # neither on a command line (ps shows those)
           "LAKEHOUSE_SERVER_CONF": json.dumps(dict(settings.spark_settings))}
    cmd = [sys.executable, "-m", MODULE, str(settings.project), settings.warehouse, settings.master, str(chosen)]
    with open(logfile, "ab") as out:
        os.chmod(logfile, 0o600)
        proc = subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=out,
                                start_new_session=True, cwd=str(settings.project))
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        rec = read_record(settings.project)
        if rec is not None and rec.pid == proc.pid:
            return rec
        code = proc.poll()
        if code is not None:
            raise LakehouseError(f"the Spark Connect server did not start (exit {code}): {_last_line(logfile)} "
                                 f"(log: {logfile})")
        time.sleep(0.2)
    kill_group(proc.pid)
    raise LakehouseError(f"the Spark Connect server did not answer within {timeout:.0f}s (log: {logfile})")


def stop(settings: Settings, timeout: float = 60.0) -> ServerRecord | None:
    """Stop the project's server; its record, or None when none was running."""
    rec = read_record(settings.project)
    if rec is None:
        return None
    terminate(rec.pid, server_alive, timeout)
    record_path(settings.project).unlink(missing_ok=True)
    storage.remove_tree(str(scratch_path(settings.project)))  # a killed server's (a stopped one removed its own)
    return rec


def terminate(pid: int, running: Callable[[int], bool], timeout: float, poll: float = 0.05) -> None:
    """End a detached process of the project (the server, the command host): SIGTERM, up to
    ``timeout`` seconds for it to finish (``running`` says whether it still does), then SIGKILL
    to its process group."""
    if not running(pid):
        return
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + timeout
    while running(pid) and time.monotonic() < deadline:
        time.sleep(poll)
    if running(pid):
        kill_group(pid)


def kill_group(pid: int) -> None:
    """SIGKILL a detached process and its process group."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _last_line(logfile: Path) -> str:
    try:
        lines = [ln for ln in logfile.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return "no log"
    errors = [ln for ln in lines if "rror" in ln or "xception" in ln]
    return (errors or lines or ["no output"])[-1].strip()


# -- the server process ------------------------------------------------------------------------------

def connect_conf(port: int) -> dict[str, str]:
    """The Spark settings that make a driver a Spark Connect server on loopback ``port``."""
    return {
        "spark.plugins": PLUGIN,
        "spark.connect.grpc.binding.address": "127.0.0.1",
        "spark.connect.grpc.binding.port": str(port),
    }


def serve(project: str, warehouse: str, master: str, port: int) -> None:
    """Run the server in this process until SIGTERM: start Spark with the Connect plugin and the
    Spark settings ``start`` resolved (the store's, the project's, LAKEHOUSE_SPARK_CONF's, --conf's),
    wait until the port answers, write the record, and remove it when stopped."""
    token = os.environ.get(TOKEN_VARIABLE)
    if not token:
        raise ConfigError(f"{TOKEN_VARIABLE} is not set: the server refuses to run without a token")
    stopping = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopping.set())
    signal.signal(signal.SIGINT, lambda *_: stopping.set())
    # the JVM's scratch (Spark's local dirs, session artifacts) in the project's private folder,
    # emptied on each start: a server killed outright leaves nothing behind in the system's /tmp
    scratch = scratch_path(Path(project))
    storage.remove_tree(str(scratch))
    scratch.mkdir(mode=0o700, parents=True)
    quoted = '"' + str(scratch).replace("\\", "\\\\").replace('"', '\\"') + '"'  # Spark splits options like a shell
    settings = Settings.resolve(project, warehouse, master)
    objectstore.use(settings.s3)  # the store's variables for the server's Python workers
    project_conf = {**settings.spark_conf(), **json.loads(env("LAKEHOUSE_SERVER_CONF") or "{}")}
    spark = get_spark(master, java_options=f"-Djava.io.tmpdir={quoted}",
                      extra_conf={**project_conf, **connect_conf(port), "spark.local.dir": str(scratch)})
    deadline = time.monotonic() + 60
    while not _answers(port):
        if time.monotonic() > deadline:
            raise LakehouseError(f"Spark started but nothing listens on port {port}")
        time.sleep(0.1)
    rec = ServerRecord(port=port, pid=os.getpid(), token=token, project=project, warehouse=warehouse,
                       master=master, started=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
                       log=str(Path(project) / PRIVATE_FOLDER / "server.log"))
    path = record_path(Path(project))
    storage.write_json(str(path), asdict(rec), indent=2)
    os.chmod(path, 0o600)
    print(f"lakehouse: Spark Connect server on {rec.address} (pid {rec.pid}, master {master})", flush=True)
    owner = env("LAKEHOUSE_SERVER_OWNER")  # tests: a server that outlives its suite is no use
    try:
        while not stopping.wait(1.0):
            if owner is not None and not alive(int(owner)):
                break
    finally:
        current = read_record(Path(project))
        if current is not None and current.pid == os.getpid():
            path.unlink(missing_ok=True)
        spark.stop()
        storage.remove_tree(str(scratch))
        print("lakehouse: Spark Connect server stopped", flush=True)


if __name__ == "__main__":  # the detached process of ``start``
    serve(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]))
