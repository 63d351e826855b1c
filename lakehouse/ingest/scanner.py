"""Listing a landing directory: which files count, their implied time, and when they are complete.

A file counts when its name matches the table's ``ingest.pattern`` and does not start with ``.``
or ``_`` (hidden and in-progress files by convention); sub-folders are not descended into. A file
is complete once its size and modification time are unchanged since the previous scan, or once
its last change is at least ``min_file_age`` old.
"""

from __future__ import annotations

import datetime as dt
import os
import re
from dataclasses import dataclass

from lakehouse import storage
from lakehouse.definitions import IngestSettings
from lakehouse.errors import InputError, first_line
from lakehouse.storage import FileInfo, is_local

UTC = dt.timezone.utc


@dataclass(frozen=True)
class Listed:
    """A candidate file as found by one scan."""

    name: str
    size: int
    mtime_ns: int
    refused: str | None = None
    """Why the file is not read although it is listed (a link out of the landing directory)."""

    @property
    def mtime(self) -> dt.datetime:
        """The file's modification time (UTC, whole microseconds)."""
        return dt.datetime.fromtimestamp(self.mtime_ns // 1000 / 1e6, UTC).replace(
            microsecond=(self.mtime_ns // 1000) % 1_000_000)


def check_source(source: str) -> None:
    """InputError naming the landing directory when it cannot be scanned: a local folder that is
    not there, an object-store prefix whose bucket is not (an empty prefix is an empty landing)."""
    if is_local(source):
        if not os.path.isdir(source):
            raise InputError(f"{source}: no such directory")
        return
    _object_listing(source)


def _object_listing(source: str) -> list[FileInfo]:
    try:
        return storage.list_file_infos(source)
    except FileNotFoundError as e:
        raise InputError(str(e)) from None
    except OSError as e:
        raise InputError(f"{source}: cannot list the landing prefix: {first_line(e, 200)}") from None


def list_source(source: str, settings: IngestSettings) -> list[Listed]:
    """The files of a landing directory that ingest considers, by name. An object-store landing
    prefix is listed (its objects directly under the prefix; no links there)."""
    pattern = re.compile(settings.pattern) if settings.pattern else None
    if not is_local(source):
        return [Listed(f.name, f.size, f.mtime_ns) for f in _object_listing(source)
                if not f.name.startswith((".", "_")) and (pattern is None or pattern.search(f.name))]
    if not os.path.isdir(source):
        raise InputError(f"{source}: no such directory")
    root = os.path.realpath(source)
    out = []
    with os.scandir(source) as it:
        for e in it:
            if e.name.startswith((".", "_")) or (pattern is not None and not pattern.search(e.name)):
                continue
            try:
                if not e.is_file():
                    continue
                st = e.stat()
                refused = None
                name = os.fsencode(e.name).decode("utf-8", "backslashreplace")
                if name != e.name:  # kept under a printable name; never opened
                    refused = f"{name}: the file name is not UTF-8; rename the file to ingest it"
                elif e.is_symlink() and not settings.follow_symlinks:
                    target = os.path.realpath(e.path)
                    if os.path.dirname(target) != root and not target.startswith(root + os.sep):
                        # the target is not named: the message must not reveal what is outside
                        refused = (f"{e.name}: a symbolic link to a file outside the landing directory; "
                                   "not read (set ingest.follow_symlinks: true to allow)")
                if refused:
                    st = e.stat(follow_symlinks=False)  # nothing about a target outside
            except FileNotFoundError:  # removed while we looked
                continue
            out.append(Listed(name, st.st_size, st.st_mtime_ns, refused))
    return sorted(out, key=lambda f: f.name)


def is_complete(f: Listed, previous: list[int] | None, now: dt.datetime, min_age: int | None) -> bool:
    """Whether a file is done being written: unchanged since the previous scan, or old enough."""
    if previous is not None and previous == [f.size, f.mtime_ns]:
        return True
    return min_age is not None and (now - f.mtime) >= dt.timedelta(milliseconds=min_age)


def implied_time(f: Listed, settings: IngestSettings) -> dt.datetime:
    """The time a file stands for; InputError naming the file when its name holds none."""
    if settings.sort_field == "MODIFIED_FILE_TIME":
        return f.mtime
    assert settings.filename_time is not None
    ft = settings.filename_time
    m = re.search(ft.regex, f.name)
    if not m:
        raise InputError(f"{f.name}: no time in the file name (regex {ft.regex!r} does not match)")
    text = m.group(1)
    if text is None:
        raise InputError(f"{f.name}: no time in the file name (the group of regex {ft.regex!r} matched nothing)")
    try:
        t = dt.datetime.strptime(text, ft.format)
    except ValueError as e:
        raise InputError(f"{f.name}: cannot parse the time {text!r} with format {ft.format!r}: {e}") from None
    return t.replace(tzinfo=UTC) if t.tzinfo is None else t.astimezone(UTC)
