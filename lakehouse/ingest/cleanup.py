"""Removing finished staging (the vacuum job, and a delete's purge): the staging folders of
batches their source has finished and no stream segment still reads, of inserts interrupted
before the stream registered them (discarded, as the producer's next insert would), and, for a
purge, the producers' inbox files such an interrupted insert left.

Each source is handled under its own lock (a source being ingested right now is skipped and
named: its run cleans up after itself), so a batch in flight never loses its staging."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field

from lakehouse import storage
from lakehouse.errors import LakehouseError
from lakehouse.storage import disk_usage, join, remove_tree
from lakehouse.warehouse import TablePaths

INBOX_GRACE_S = 60.0
"""An inbox file younger than this may be an insert's in flight (written before its lock is
taken): a purge leaves it."""


@dataclass
class Cleanup:
    """What was (or would be) removed: staging folders, inbox files, and the busy sources."""

    staging: list[str] = field(default_factory=list)
    staging_bytes: int = 0
    inbox: list[str] = field(default_factory=list)
    busy_sources: list[str] = field(default_factory=list)


def finished_staging(paths: TablePaths, execute: bool, archive: bool = True, inbox: bool = False) -> Cleanup:
    """Find (and, when ``execute``, remove) finished staging of the table: ingest and load batches
    (``archive``: also archive runs' staging, when the caller holds the table's lease; ``inbox``:
    also inbox files interrupted inserts left)."""
    from lakehouse.ingest.batch import discard, registered
    from lakehouse.ingest.state import StateStore, inbox_folder, is_files_source
    from lakehouse.stream.store import StreamStore

    out = Cleanup()
    folder = paths.staging
    names = storage.list_names(folder)

    def referenced() -> set[str]:
        """The staging the stream still reads, as of now (read under the source's lock: a batch
        of that source registered a moment ago is in it)."""
        try:
            return {os.path.basename(p.rstrip("/")) for p in StreamStore(paths).referenced()}
        except Exception:  # noqa: BLE001 - unreadable stream state: keep every ingest staging
            return {n for n in names if n.startswith("ingest-")}

    store = StateStore(paths)
    done: list[str] = [join(folder, n) for n in names if archive and n.startswith("archive-")]
    for state in store.all():
        prefix = f"ingest-{state.key}-"
        mine = [n for n in names if n.startswith(prefix) and n[len(prefix):].isdigit()]
        box = inbox_folder(paths.root, state.source) if inbox and is_files_source(state.source) else None
        if not mine and box is None:
            continue
        try:
            with store.lock(state.source):
                fresh = store.load(state.source)
                if execute and is_files_source(fresh.source):  # inserts interrupted before registration
                    for batch in [b for b in fresh.pending if not registered(paths, fresh, b)]:
                        name = f"{prefix}{batch.number:08d}"
                        if name in mine:
                            out.staging_bytes += disk_usage(join(folder, name))[1]
                            out.staging.append(join(folder, name))
                            mine.remove(name)
                        discard(paths, store, fresh, batch)
                pending = {b.number for b in fresh.pending}
                needed = referenced()
                finished = [n for n in mine if int(n[len(prefix):]) < fresh.next_batch
                            and int(n[len(prefix):]) not in pending and n not in needed]
                out.staging_bytes += sum(disk_usage(join(folder, n))[1] for n in finished)
                if execute:
                    for n in finished:
                        remove_tree(join(folder, n))
                out.staging += [join(folder, n) for n in finished]
                if box is not None:
                    out.inbox += _stale_inbox(box, execute)
        except LakehouseError:  # the source is being ingested right now: its run cleans up
            out.busy_sources.append(state.source)
    out.staging_bytes += sum(disk_usage(p)[1] for p in done)
    out.staging += done
    if execute:
        for p in done:
            remove_tree(p)
    return out


def _stale_inbox(box: str, execute: bool) -> list[str]:
    """Inbox entries (a file, or a Spark frame's folder) written before the grace (under the
    source's lock: no insert of it is registering)."""
    found = []
    limit = (time.time() - INBOX_GRACE_S) * 1e9
    for name in storage.list_names(box):
        entry = join(box, name)
        files = [entry] if storage.is_file(entry) else storage.list_files(entry)
        infos = [storage.file_info(f) for f in files]
        if all(i is None or i.mtime_ns < limit for i in infos):
            found.append(entry)
            if execute and storage.is_file(entry):
                storage.delete(entry)
            elif execute:
                remove_tree(entry)
    return found
