"""The durable ingest state of one (table, landing directory): every file seen, the queue, T_read,
and the batches taken but not yet finished.

One JSON document, replaced atomically (temp file, fsync, rename), under
``<warehouse>/<table>/_ingest/<source key>.json``. It is the ingest log, too.

Exactly once: files are assigned to numbered batches in the same save that advances T_read;
a batch commits into live (and rejects) with the Delta SetTransaction (``lakehouse.ingest.<key>``,
batch number), so a batch re-run after a crash is skipped by a table that already holds it; only
then is the batch marked done here. Every run first finishes the batches a crashed run left.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import os
import re
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

from lakehouse import storage
from lakehouse.errors import LakehouseError
from lakehouse.ingest.tsort import T
from lakehouse.lease import LeaseHeld, exclusive
from lakehouse.storage import absolute, is_local, join, write_json
from lakehouse.storage.paths import relative, under
from lakehouse.warehouse import TablePaths

STATUSES = ("queued", "ingested", "late", "failed", "discarded")
"""``discarded``: taken by an insert (``load``, a producer's) that was interrupted before the
stream registered it; nothing of it was taken, and it is never retried (give the file again)."""
FORMAT_VERSION = 1
UTC = dt.timezone.utc


LOAD_SOURCE = "<load>"
"""The source of ``lakehouse load``: files named on the command line (a one-shot ingest)."""


def producer_source(producer: str) -> str:
    """The source of files a producer inserts (``lakehouse producer T NAME insert``); the
    producer ``load`` is ``lakehouse load``'s."""
    return LOAD_SOURCE if producer == "load" else f"<producer:{producer}>"


def producer_of(source: str) -> str:
    """The producer whose inserts a files source holds (``producer_source``'s inverse; ``load``
    for ``lakehouse load``'s)."""
    return "load" if source == LOAD_SOURCE else source[len("<producer:"):-1]


def inbox_folder(root: str, source: str) -> str:
    """Where the Python API writes the rows a producer inserts as data (temporary files) under a
    table's folder ``root``."""
    return join(root, "_stream", "inbox", source_key(source))


def is_files_source(source: str) -> bool:
    """A source of files at hand (load, a producer's inserts), not a landing directory."""
    return source.startswith("<") and source.endswith(">")


def canonical_source(source: str) -> str:
    """A landing directory's one name: its real path (symlinks, ``./x/``, ``x`` all agree)."""
    if is_files_source(source):
        return source
    if not is_local(source):  # an object-store prefix: its one spelling
        return absolute(source).rstrip("/")
    return os.path.realpath(source).rstrip("/") or "/"


def _legacy_key(spelled: str) -> str:
    """The key of a landing directory before sources were known by their real path."""
    full = os.path.abspath(spelled).rstrip("/") or "/"
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", os.path.basename(full))[:40] or "root"
    return f"{name}-{hashlib.sha256(os.fsencode(full)).hexdigest()[:10]}"


def _key_of(d: dict[str, Any]) -> str | None:
    """The key a stored state's commits were made under, when it is not its source's key now."""
    source = d["source"]
    key = d.get("key") or (source_key(source) if is_files_source(source) else _legacy_key(source))
    return None if key == source_key(source) else key


def source_key(source: str) -> str:
    """A stable, readable key for a source: ``load``, or a landing directory's name and a hash of
    its real path."""
    if source == LOAD_SOURCE:
        return "load"
    if is_files_source(source):
        name = producer_of(source)
        slug = re.sub(r"[^A-Za-z0-9_.-]+", "_", name)[:40] or "p"
        return f"producer-{slug}-{hashlib.sha256(name.encode('utf-8', 'surrogatepass')).hexdigest()[:10]}"
    full = canonical_source(source)
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", os.path.basename(full))[:40] or "root"
    return f"{name}-{hashlib.sha256(os.fsencode(full)).hexdigest()[:10]}"


def _ts(t: dt.datetime | None) -> str | None:
    return None if t is None else t.astimezone(UTC).isoformat().replace("+00:00", "Z")


def _parse_ts(s: str | None) -> dt.datetime | None:
    return None if s is None else dt.datetime.fromisoformat(s.replace("Z", "+00:00"))


@dataclass
class FileEntry:
    """One file seen in the landing directory."""

    name: str
    seq: int
    """Order in which files were first seen (within a scan: T order, or name order unordered)."""
    size: int
    mtime_ns: int
    implied_time: dt.datetime | None
    status: str
    rows: int = 0
    rows_rejected: int = 0
    batch: int | None = None
    error: str | None = None
    seen_at: dt.datetime | None = None
    moved_to: str | None = None
    """Where a late file was moved (the late folder), if configured."""
    modified: str | None = None
    """Set when the file changed after it was ingested (it is not reloaded)."""
    path: str | None = None
    """The file's full path when it is not ``<source>/<name>`` (files given to ``load``)."""
    format: str | None = None
    """The input format chosen when the file was taken (``load``; ingest decides per name)."""
    checksum: str | None = None
    """SHA-256 of the content when taken (``load`` skips content it already loaded)."""

    @property
    def t(self) -> T:
        """The file's T: its implied time and name (the order ingest takes files in)."""
        assert self.implied_time is not None
        return T(self.implied_time, self.name)

    def to_json(self) -> dict[str, Any]:
        """The entry as stored in the state document (timestamps as ISO strings)."""
        d = asdict(self)
        d["implied_time"] = _ts(self.implied_time)
        d["seen_at"] = _ts(self.seen_at)
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "FileEntry":
        """An entry from the state document (``to_json`` reversed)."""
        d = dict(d)
        d["implied_time"] = _parse_ts(d.get("implied_time"))
        d["seen_at"] = _parse_ts(d.get("seen_at"))
        return cls(**d)


@dataclass
class Batch:
    """Files taken together into one commit (in queue order), and files that failed when taken."""

    number: int
    files: list[str]
    failed: list[tuple[str, str]] = field(default_factory=list)
    """(file name, reason) of taken files found unreadable while planning the batch."""
    attempts: int = 0
    """Failed attempts to stage the batch (after a few, its files are failed, not retried)."""

    def to_json(self) -> dict[str, Any]:
        """The batch as stored in the state document."""
        return {"number": self.number, "files": self.files, "failed": [list(f) for f in self.failed],
                "attempts": self.attempts}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "Batch":
        """A batch from the state document (``to_json`` reversed)."""
        return cls(d["number"], list(d["files"]), [(a, b) for a, b in d.get("failed", [])],
                   int(d.get("attempts", 0)))


@dataclass
class IngestState:
    """Everything ``ingest`` remembers about one landing directory of one table."""

    table: str
    source: str
    t_read: T | None = None
    next_batch: int = 1
    pending: list[Batch] = field(default_factory=list)
    """Batches taken (T_read already past them) but not yet recorded as done."""
    files: dict[str, FileEntry] = field(default_factory=dict)
    observed: dict[str, list[int]] = field(default_factory=dict)
    """New files not yet known complete: name -> [size, mtime_ns] at the previous scan."""

    key_override: str | None = None
    """The key of a state written before sources were known by their real path (its commits
    carry that key in their SetTransaction app id)."""

    @property
    def key(self) -> str:
        """The key naming this source's state file and its commits (``source_key``, or a legacy key)."""
        return self.key_override or source_key(self.source)

    @property
    def app_id(self) -> str:
        """The Delta SetTransaction app id of this source's commits (live and rejects)."""
        return f"lakehouse.ingest.{self.key}"

    def load_id(self, batch: Batch) -> str:
        """The ``_lh_load`` of a batch's rows: unique in the table (source key, batch number)."""
        if self.source == LOAD_SOURCE:
            return f"load-{batch.number:08d}"
        if is_files_source(self.source):
            return f"{self.key}-{batch.number:08d}"
        return f"ingest-{self.key}-{batch.number:08d}"

    def path_of(self, e: FileEntry) -> str:
        """Where a file seen by this source is."""
        return e.path or join(self.source, e.name)

    def queued(self) -> list[FileEntry]:
        """Files waiting in the queue (not yet taken into a batch), in seen order."""
        return sorted((f for f in self.files.values() if f.status == "queued" and f.batch is None),
                      key=lambda f: f.seq)

    def next_seq(self) -> int:
        """The sequence number the next newly seen file gets."""
        return max((f.seq for f in self.files.values()), default=0) + 1

    def log(self) -> list[FileEntry]:
        """Every file seen, in the order seen."""
        return sorted(self.files.values(), key=lambda f: f.seq)

    def to_json(self) -> dict[str, Any]:
        """The state document written to ``_ingest/<key>.json``."""
        return {
            "format": FORMAT_VERSION,
            "key": self.key,
            "table": self.table,
            "source": self.source,
            "t_read": None if self.t_read is None else [_ts(self.t_read.time), self.t_read.name],
            "next_batch": self.next_batch,
            "pending": [b.to_json() for b in self.pending],
            "files": [f.to_json() for f in self.log()],
            "observed": self.observed,
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "IngestState":
        """A state from its document (``to_json`` reversed)."""
        tr = d.get("t_read")
        files = [FileEntry.from_json(f) for f in d.get("files", [])]
        return cls(
            table=d["table"],
            source=d["source"],
            t_read=None if tr is None else T(_parse_ts(tr[0]), tr[1]),  # type: ignore[arg-type]
            next_batch=int(d.get("next_batch", 1)),
            pending=[Batch.from_json(b) for b in d.get("pending", [])],
            files={f.name: f for f in files},
            observed={k: list(v) for k, v in d.get("observed", {}).items()},
            key_override=_key_of(d),
        )


class StateStore:
    """Where the states of a table's landing directories live."""

    def __init__(self, paths: TablePaths) -> None:
        self.paths = paths
        self.folder = join(paths.root, "_ingest")

    def path(self, source: str) -> str:
        """The state file of ``source``: ``<table>/_ingest/<key>.json``."""
        return join(self.folder, f"{source_key(source)}.json")

    def load(self, source: str) -> IngestState:
        """The state of ``source`` (a fresh one when it has none; a legacy file is renamed first);
        LakehouseError for an unreadable, corrupt or other-format state."""
        path = self.path(source)
        full = canonical_source(source)
        if not is_files_source(source) and not storage.exists(path):
            legacy = join(self.folder, f"{_legacy_key(source)}.json")
            if storage.exists(legacy):  # written before sources were known by their real path
                storage.rename(legacy, path)
        try:
            data = storage.read_json(path)
        except FileNotFoundError:
            return IngestState(self.paths.name, full)
        except (OSError, ValueError) as e:
            raise LakehouseError(f"{path}: unreadable ingest state: {e}") from None
        if not isinstance(data, dict):
            raise LakehouseError(f"{path}: corrupt ingest state: expected a JSON object")
        if data.get("format") != FORMAT_VERSION:
            raise LakehouseError(f"{path}: ingest state format {data.get('format')!r} is not {FORMAT_VERSION}")
        try:
            state = self._decoded(data)
            state.source = full  # the file is named by the real path; the key keeps its commits'
            return state
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise LakehouseError(f"{path}: corrupt ingest state: {e!r}") from None

    def _decoded(self, data: dict[str, Any]) -> IngestState:
        """A state from its document: a file under the table's folder (a producer's inbox), kept
        relative to it, where this process reaches it."""
        state = IngestState.from_json(data)
        for f in state.files.values():
            f.path = f.path and under(self.paths.root, f.path)
        return state

    def save(self, state: IngestState) -> None:
        """Write ``state`` to its file (atomically)."""
        doc = state.to_json()
        for f in doc["files"]:
            f["path"] = f.get("path") and relative(self.paths.root, f["path"])
        write_json(self.path(state.source), doc)

    def all(self) -> list[IngestState]:
        """The states of every landing directory of the table."""
        out = []
        for name in storage.list_names(self.folder):
            if name.endswith(".json") and not name.startswith("."):
                try:
                    out.append(self._decoded(storage.read_json(join(self.folder, name))))
                except (ValueError, KeyError, TypeError, AttributeError) as e:
                    raise LakehouseError(f"{join(self.folder, name)}: corrupt ingest state: {e!r}") from None
        return out

    @contextlib.contextmanager
    def lock(self, source: str, wait: float = 0.0) -> Iterator[None]:
        """One ingest of a source into a table at a time (an OS lock, freed on SIGKILL; on an object
        store a lease); waits up to ``wait`` seconds for another holder to finish."""
        storage.make_dirs(self.folder)
        path = self.path(source) + ".lock"
        what = ("load" if source == LOAD_SOURCE else f"insert by {source[10:-1]}" if is_files_source(source)
                else f"ingest --source {source}")
        busy = (f"{what} into {self.paths.name}: another {what.split()[0]} holds {path}"
                + (f" (waited {wait:.0f}s)" if wait else ""))
        with contextlib.ExitStack() as stack:
            try:
                stack.enter_context(exclusive(path, what, lambda: busy, wait))
            except LeaseHeld:
                raise LakehouseError(busy) from None  # not transient: another ingest runs
            yield
