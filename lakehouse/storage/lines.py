"""JSON-lines logs on a warehouse path (a stream's events, its release ledger): appended whole,
read back skipping what a crash cut short. On S3, which has no appends, an append is a read and a
conditional PUT of the longer object."""

from __future__ import annotations

import json
import os
import time
from typing import Any

from lakehouse import storage
from lakehouse.errors import TransientError
from lakehouse.storage import s3 as s3io


def append_json_lines(path: str, docs: list[Any]) -> None:
    """Append JSON documents to a local JSON-lines log, one per line, and fsync: they are whole
    once this returns. A line a crash cut short stays apart (a newline goes before the first
    new line); :func:`read_json_lines` skips it."""
    if not docs:
        return
    lines = b"".join(json.dumps(d, separators=(",", ":")).encode("utf-8") + b"\n" for d in docs)
    if storage.is_s3(path):  # no appends on S3: read, add, put if nobody wrote in between, else again
        s3io.require_conditional_writes(path)
        for attempt in range(50):
            seen = s3io.get_with_etag(path)
            old = b"" if seen is None else seen[0]
            sep = b"\n" if old and not old.endswith(b"\n") else b""
            if s3io.put_if(path, old + sep + lines, None if seen is None else seen[1]):
                return
            now = s3io.get_with_etag(path)  # refused: another writer's append, or our own that landed
            if now is not None and now[0].startswith(old + sep + lines):  # (its answer lost), perhaps
                return  # followed by others' appends: a log only grows
            time.sleep(min(0.01 * 2 ** attempt, 0.5))
        raise TransientError(f"{path}: too many writers appending at once (50 attempts); try again")
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "ab+") as f:
        f.seek(0, os.SEEK_END)
        if f.tell():
            f.seek(f.tell() - 1)
            if f.read(1) != b"\n":
                f.write(b"\n")
        f.write(lines)
        f.flush()
        os.fsync(f.fileno())


def read_json_lines(path: str, tail_bytes: int | None = None) -> list[Any]:
    """The documents of a JSON-lines log, oldest first, skipping lines that are not JSON (cut
    short by a crash); only those in the last ``tail_bytes`` when given ([] when missing)."""
    if storage.is_s3(path):
        try:
            data = storage.read_bytes(path)
        except FileNotFoundError:
            return []
        data = data if tail_bytes is None else data[-tail_bytes:]
    else:
        try:
            with open(path, "rb") as f:
                if tail_bytes is not None:
                    f.seek(0, os.SEEK_END)
                    f.seek(max(0, f.tell() - tail_bytes))
                data = f.read()
        except FileNotFoundError:
            return []
    out = []
    for line in data.split(b"\n"):
        try:
            out.append(json.loads(line))
        except ValueError:
            continue
    return out
