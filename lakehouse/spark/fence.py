"""Fencing the Spark work of dead Spark Connect clients.

A command killed while a Spark Connect server runs one of its jobs does not stop that job: the
server finishes it after the client is gone (a staging write, a Delta commit). Had the next
command started meanwhile, the dead command's job would land in the middle of its recovery. So
every Spark Connect client of this machine registers its server-side session in a private
folder (``~/.cache/lakehouse/connect/<server>/<node>-<pid>.json``, removed when the process ends
normally), and before work that must not meet a dead command's job (on connecting, and on taking
any lease or lock: ``lakehouse.lease.on_acquire``) a client fences every registered client of
this machine whose process is gone: it joins that session, interrupts its operations, waits until
each has ended (reattaching to its result stream until the server closes it), releases the
session and removes the entry; then it clears the server's cache (what a killed ``check``
cached). Clients of other machines cannot be judged by their pid and are left alone (their
leases expire instead).
"""

from __future__ import annotations

import atexit
import hashlib
import json
import logging
import os
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lakehouse import lease, storage
from lakehouse.errors import first_line

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

DRAIN_SECONDS = 120.0
"""How long a fence waits for one dead client's operation to end."""
_LOCK = threading.Lock()


def folder(url: str) -> Path:
    """The registry of one server's clients on this machine (private to the user)."""
    endpoint = url.removeprefix("sc://").split("/", 1)[0].split(";", 1)[0]
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "lakehouse" / "connect"
    d = base / hashlib.sha256(endpoint.encode()).hexdigest()[:16]
    d.mkdir(parents=True, exist_ok=True, mode=0o700)
    return d


class Registration:
    """This process's entry in its server's registry, while its session lives."""

    def __init__(self, spark: SparkSession, url: str) -> None:
        client: Any = getattr(spark, "client")  # noqa: B009 - a Connect session's client
        self.url = url
        self.path = folder(url) / f"{lease.node_key()}-{os.getpid()}.json"
        doc = {"pid": os.getpid(), "node": lease.node(), "session_id": client._session_id,
               "user_id": client._user_id or ""}
        storage.write_json(str(self.path), doc)
        atexit.register(self.remove)
        def on_lock() -> None:
            fence(url)

        lease.on_acquire(on_lock)

    def remove(self) -> None:
        """Leave the registry (a process that ends normally has no job left on the server)."""
        self.path.unlink(missing_ok=True)


def fence(url: str) -> int:
    """Interrupt, and wait out, the operations of every registered client of this machine whose
    process is gone; the number of dead clients fenced."""
    with _LOCK:
        here = lease.node()
        fenced = 0
        for entry in sorted(folder(url).glob("*.json")):
            try:
                doc = json.loads(entry.read_text())
            except (OSError, ValueError):
                continue
            if doc.get("node") != here or not here or doc.get("pid") == os.getpid() or lease.alive(int(doc["pid"])):
                continue
            try:
                _stop_session(url, str(doc["session_id"]), str(doc.get("user_id") or ""))
            except Exception as e:  # noqa: BLE001 - the server may have forgotten the session: nothing runs
                log.info("fencing the session of dead client pid %s: %s", doc.get("pid"), first_line(e))
            entry.unlink(missing_ok=True)
            fenced += 1
        if fenced:
            try:
                _clear_cache(url)
            except Exception as e:  # noqa: BLE001 - a cache left behind costs memory, not answers
                log.warning("could not clear the cache of dead clients on %s: %s", url, first_line(e))
        return fenced


def _clear_cache(url: str) -> None:
    """Clear the server's cache. What a dead client cached (``lakehouse check`` caches the rows in
    scope) would stay until the server stops: Spark's cache is the server's, not the session's
    (and the session may be gone already). Only checks cache, and only to go faster, so all of it
    goes: a check running meanwhile reads its tables again."""
    import pyspark.sql.connect.proto as pb2
    from pyspark.sql.connect.client.core import DefaultChannelBuilder, SparkConnectClient

    client = SparkConnectClient(DefaultChannelBuilder(url))
    try:
        relation = pb2.Relation()
        relation.catalog.clear_cache.SetInParent()
        client.to_table(pb2.Plan(root=relation), {})
        client.release_session()
    finally:
        client.close()


def _stop_session(url: str, session_id: str, user_id: str) -> None:
    """Join a dead client's session, interrupt its operations, wait for each to end, release it."""
    import pyspark.sql.connect.proto as pb2
    from pyspark.sql.connect.client.core import DefaultChannelBuilder, SparkConnectClient

    client = SparkConnectClient(DefaultChannelBuilder(f"{url.rstrip('/')}{'' if ';' in url else '/'};session_id={session_id}"),
                                user_id=user_id or None)
    try:
        interrupted = client.interrupt_all() or []
        for op in interrupted:
            started = time.monotonic()
            req = pb2.ReattachExecuteRequest(session_id=session_id, user_context=pb2.UserContext(user_id=user_id),
                                             operation_id=op)
            try:  # the stream ends (or fails: canceled, unknown) once the operation has ended
                for _ in client._stub.ReattachExecute(req, metadata=client._builder.metadata(),
                                                      timeout=DRAIN_SECONDS):
                    pass
            except Exception:  # noqa: BLE001 - OPERATION_CANCELED is the normal end
                pass
            log.info("fenced operation %s of a dead client's session %s (%.1fs)", op, session_id,
                     time.monotonic() - started)
        client.release_session()
    finally:
        client.close()
