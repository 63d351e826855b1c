"""Cutting a Delta table's history at a version (an erasure's purge): what it held before is gone.

A Delta log keeps copies of row values apart from the data files: each add action's statistics
(minimum and maximum values per column), a ``DELETE``'s predicate in its commit info, the same in
checkpoints and in Spark's ``.crc`` files. Purging a deleted row's bytes therefore means the log
from before the delete goes too. ``cut`` commits a marker (nothing but a SetTransaction), writes
the checkpoint of that version, then removes every commit file, checksum file and checkpoint of
an earlier version: the table is read from the marker on, exactly as before (the checkpoint holds
the whole snapshot), and no version before it can be read any more (``query --as-of`` says why).
Then ``vacuum`` with no retention removes the data files no version from the marker on reads.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from lakehouse.storage import filesystem, join

_VERSIONED = re.compile(r"^\.?(\d{20})\.(json|crc|checkpoint\..*)$")


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


def drop_before(path: str, first: int) -> int:
    """Remove the log files (commits, checksums, checkpoints, their hidden checksum files) of
    versions before ``first``; how many. The checkpoint of ``first`` must exist."""
    import pyarrow.fs as pafs

    fs, root = filesystem(join(path, "_delta_log"))
    removed = 0
    for info in fs.get_file_info(pafs.FileSelector(root, allow_not_found=True)):
        if info.type != pafs.FileType.File:
            continue
        m = _VERSIONED.match(info.base_name)
        if m and int(m.group(1)) < first:
            fs.delete_file(info.path)
            removed += 1
    return removed


def first_readable(path: str) -> int | None:
    """The oldest version the log can still rebuild (None: no log)."""
    from lakehouse.delta_log.commit_files import commits

    found = commits(path)
    return found[0].version if found else None
