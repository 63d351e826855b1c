"""Cutting a Delta table's history at a version (an erasure's purge): what it held before is gone.

A Delta log keeps copies of row values apart from the data files: each add action's statistics
(minimum and maximum values per column), a ``DELETE``'s predicate in its commit info, the same in
checkpoints and in Spark's ``.crc`` files. Purging a deleted row's bytes therefore means the log
from before the delete goes too. ``cut`` commits a marker (nothing but a SetTransaction), writes
the checkpoint of that version, then removes every commit file, checksum file and checkpoint of
an earlier version: the table is read from the marker on, exactly as before (the checkpoint holds
the whole snapshot), and no version before it can be read any more (``query --as-of`` says why).
Then ``drop_unreferenced`` removes the data files no version from the marker on reads.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass

from lakehouse.storage import filesystem, join

TMP_AGE_NS = 300 * 10**9
"""A temporary file in the log older than this was left by a killed writer (a younger one may be
a commit in flight)."""
_VERSIONED = re.compile(r"^\.?(\d{20})\.(json|crc|checkpoint\..*?)(\.crc)?$")
"""A log file of one version: its commit, Spark's checksum, a checkpoint (classic, multi-part,
v2), and the hidden ``.crc`` checksum file Hadoop writes beside each on a local disk."""


@dataclass(frozen=True)
class Cut:
    """What a cut did: the marker's version (the first readable one now) and the log files removed."""

    version: int
    removed: int


def cut(path: str, txn: tuple[str, int], user_metadata: str | None = None) -> Cut:
    """Commit the marker ``txn`` (app id, version), checkpoint it, and remove the log before it.
    Run where no other writer commits to the table meanwhile."""
    from lakehouse.delta_log import _commit_actions, open_table, version

    read = version(path)
    assert read is not None, path
    marker = _commit_actions(path, read, [], [], txn, user_metadata)
    open_table(path, marker).create_checkpoint()
    return Cut(marker, drop_before(path, marker))


def cut_and_drop(path: str, txn: tuple[str, int]) -> tuple[Cut, int, int]:
    """``cut`` at a marker ``txn``, then the data files no version from it reads removed: the
    cut, and the (files, bytes) removed."""
    started_ms = int(time.time() * 1000)
    c = cut(path, txn)
    return (c, *drop_unreferenced(path, started_ms))


def cut_at(path: str, version: int, txn: tuple[str, int]) -> Cut:
    """Cut a table's history right after ``version`` (a delete's last commit there): the
    checkpoint of the next version, then the log before it removed; time travel to that version
    or any later one keeps working. When ``version`` is the latest, as ``cut`` (a marker first)."""
    from lakehouse.delta_log import open_table
    from lakehouse.delta_log import version as latest

    if version >= (latest(path) or 0):
        return cut(path, txn)
    first = version + 1
    have = first_readable(path)
    if have is not None and have >= first:  # cut there or later already (an earlier purge)
        return Cut(have, 0)
    open_table(path, first).create_checkpoint()
    return Cut(first, drop_before(path, first))


def drop_before(path: str, first: int) -> int:
    """Remove the log files (commits, checksums, checkpoints, their hidden checksum files) of
    versions before ``first``, and temporary files writers killed mid-commit left (they hold
    whole commits); how many. The checkpoint of ``first`` must exist."""
    import pyarrow.fs as pafs

    from lakehouse.delta_log import forget_handles

    fs, root = filesystem(join(path, "_delta_log"))
    removed = 0
    for info in fs.get_file_info(pafs.FileSelector(root, allow_not_found=True)):
        if info.type != pafs.FileType.File:
            continue
        m = _VERSIONED.match(info.base_name)
        stale = m is not None and int(m.group(1)) < first
        left = ".tmp" in info.base_name and (info.mtime_ns or 0) < time.time_ns() - TMP_AGE_NS
        if stale or left:  # (a temporary file: a commit or checkpoint a killed writer left half-made)
            fs.delete_file(info.path)
            removed += 1
    forget_handles()  # a kept read handle would replay the commits just removed
    return removed


def drop_unreferenced(path: str, before_ms: int) -> tuple[int, int]:
    """Remove the data files of a Delta table (and their hidden checksum files) that its latest
    version does not reference and that were written before ``before_ms`` (a writer's file not
    committed yet is newer); (files, bytes) removed. After ``cut``, no readable version
    references them."""
    import pyarrow.fs as pafs

    from lakehouse.delta_log import add_actions
    from lakehouse.delta_log.commit_files import file_uri

    fs, root = filesystem(path)
    live = {filesystem(file_uri(path, p))[1] for p in add_actions(path).column("path").to_pylist()}
    files = bytes_ = 0
    for info in fs.get_file_info(pafs.FileSelector(root, recursive=True, allow_not_found=True)):
        rel = info.path[len(root):].lstrip("/")
        if (info.type != pafs.FileType.File or rel.startswith("_") or info.base_name.startswith((".", "_"))
                or info.path in live or info.mtime_ns is None or info.mtime_ns // 1_000_000 >= before_ms):
            continue
        fs.delete_file(info.path)
        files += 1
        bytes_ += info.size or 0
        folder = info.path[: len(info.path) - len(info.base_name)]
        checksum = f"{folder}.{info.base_name}.crc"
        if fs.get_file_info(checksum).type == pafs.FileType.File:
            fs.delete_file(checksum)
    return files, bytes_


def first_readable(path: str) -> int | None:
    """The oldest version the log can still rebuild (None: no log)."""
    from lakehouse.delta_log.commit_files import commits

    found = commits(path)
    return found[0].version if found else None
