"""Delta's log read commit by commit, from its commit files: the versions a log can still
rebuild and their commit times, the commits that raised an app id's SetTransaction, the data
files one commit added. (Snapshots, scans and writes are delta-rs's: ``lakehouse.delta_log``.)"""

from __future__ import annotations

import datetime as dt
import json
import re
from dataclasses import dataclass
from typing import Any

from lakehouse.storage import filesystem, join
from lakehouse.times import from_millis

_COMMIT = re.compile(r"^(\d{20})\.json$")
_CHECKPOINT = re.compile(r"^(\d{20})\.checkpoint(\.[^/]*)?\.(parquet|json)$")  # classic, multi-part, v2


def file_uri(table_path: str, file_path: str) -> str:
    """A data file's path as an add action names it (a URI reference, URL-encoded: a partition
    value's ``%`` is ``%25`` there), made the full path or URI of the file."""
    from urllib.parse import unquote

    if "://" in file_path:
        return file_path
    file_path = unquote(file_path)
    if file_path.startswith("/"):
        return file_path
    return f"{table_path.rstrip('/')}/{file_path}"


@dataclass(frozen=True)
class Commit:
    """A readable version of a Delta table and its commit timestamp (milliseconds)."""

    version: int
    ms: int

    @property
    def at(self) -> dt.datetime:
        """The commit timestamp as an aware UTC datetime."""
        return from_millis(self.ms)


def commits(path: str) -> list[Commit]:
    """The versions of a Delta table its log can still rebuild, oldest first, with Delta's commit
    timestamps: commit file modification times, made strictly increasing (what Delta's
    ``DESCRIBE HISTORY`` shows and ``timestampAsOf`` uses)."""
    import pyarrow.fs as pafs

    fs, root = filesystem(join(path, "_delta_log"))
    found: dict[int, int] = {}
    checkpoints = []
    for info in fs.get_file_info(pafs.FileSelector(root, allow_not_found=True)):
        if info.type != pafs.FileType.File:
            continue
        m = _COMMIT.match(info.base_name)
        if m and info.mtime_ns is not None:
            found[int(m.group(1))] = info.mtime_ns // 1_000_000
        m = _CHECKPOINT.match(info.base_name)
        if m:
            checkpoints.append(int(m.group(1)))
    out, prev = [], None
    for v in sorted(found):
        ms = found[v] if prev is None or found[v] > prev else prev + 1
        out.append(Commit(v, ms))
        prev = ms
    # Without commit 0 the log starts at its oldest checkpoint (older commits were cleaned up).
    start = 0 if 0 in found else min(checkpoints, default=None)
    if start is None:
        return []
    return [c for c in out if c.version >= start]


@dataclass(frozen=True)
class TxnCommit:
    """A commit that recorded a SetTransaction of one app id: when, and the version it set."""

    version: int
    ms: int
    txn: int


def txn_commits(path: str, app_id: str, found: list[Commit] | None = None) -> list[TxnCommit]:
    """The commits that raised ``app_id``'s transaction version, oldest first, as far back as the
    commit files go (a commit only in a checkpoint now is not seen: see :func:`snapshot`)."""
    fs, root = filesystem(join(path, "_delta_log"))
    out: list[TxnCommit] = []
    for c in commits(path) if found is None else found:
        text = _commit_text(fs, root, c.version)
        if text is None:
            continue  # only in a checkpoint now (the commit file was cleaned up)
        for line in text.splitlines():
            if '"txn"' not in line:
                continue
            txn = json.loads(line).get("txn") or {}
            if txn.get("appId") == app_id and (not out or int(txn["version"]) > out[-1].txn):
                out.append(TxnCommit(c.version, c.ms, int(txn["version"])))
    return out


def txn_commit_info(path: str, app_id: str, version: int) -> dict[str, Any] | None:
    """The ``commitInfo`` of the commit that recorded ``app_id``'s SetTransaction at ``version``
    (its ``operationMetrics``, ``userMetadata``), searched newest first; None when no commit file
    holds it (never committed, or cleaned up after a checkpoint)."""
    fs, root = filesystem(join(path, "_delta_log"))
    for c in reversed(commits(path)):
        text = _commit_text(fs, root, c.version)
        if text is None:
            continue
        info: dict[str, Any] = {}
        hit = False
        for line in text.splitlines():
            if '"txn"' in line:
                txn = json.loads(line).get("txn") or {}
                hit = hit or (txn.get("appId") == app_id and int(txn.get("version", -1)) == int(version))
            elif '"commitInfo"' in line:
                info = json.loads(line).get("commitInfo") or {}
        if hit:
            return {**info, "version": c.version}
    return None


@dataclass(frozen=True)
class AddedFile:
    """A data file one commit added (its full path or URI, partition values and size)."""

    path: str
    partition: dict[str, str | None]
    size: int


def added_files(path: str, version: int) -> list[AddedFile] | None:
    """The data files commit ``version`` added as a change of data (``dataChange``; compaction's
    rewrites are not), read from its commit file; None when the commit file is gone (cleaned up
    after a checkpoint, or never there)."""
    fs, root = filesystem(join(path, "_delta_log"))
    text = _commit_text(fs, root, int(version))
    if text is None:
        return None
    out = []
    for line in text.splitlines():
        if '"add"' not in line:
            continue
        add = json.loads(line).get("add")
        if add and add.get("dataChange", True):
            out.append(AddedFile(file_uri(path, add["path"]), dict(add.get("partitionValues") or {}),
                                 int(add.get("size") or 0)))
    return out


def _commit_text(fs: Any, root: str, version: int) -> str | None:
    """The commit file of ``version`` in the log folder ``root`` (None when it is not there)."""
    try:
        with fs.open_input_stream(f"{root}/{version:020d}.json") as f:
            return str(f.read().decode("utf-8"))
    except (FileNotFoundError, OSError):
        return None
