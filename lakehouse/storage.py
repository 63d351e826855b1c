"""Storage: every read, write, listing and deletion of a file or folder on a warehouse path.

A warehouse path is a local path or a URI of an object store (``s3a://``, ``s3://``, ...). Local
paths take the operating system's calls (durable: fsync before rename, the folder fsynced after);
other URIs go through pyarrow's filesystems, which also run on Spark's executors. Nothing else in
lakehouse opens, lists or deletes files on a warehouse path; Delta tables themselves are read
through ``lakehouse.delta_log`` and written by Spark or delta-rs.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import uuid
from collections.abc import Iterator
from typing import IO, Any

import pyarrow.fs as pafs

_HADOOP_SCHEMES = {"s3a": "s3", "s3n": "s3"}
"""Hadoop's names for the stores pyarrow knows as s3."""


def is_local(uri: str) -> bool:
    """True for a local path (not an object store URI)."""
    return "://" not in uri


def local_path(uri: str) -> str | None:
    """The local filesystem path of a warehouse location, or None for an object store."""
    if is_local(uri):
        return uri
    if uri.startswith("file://"):
        return uri[len("file://"):]
    return None


def join(base: str, *parts: str) -> str:
    """Join path segments for local paths and URIs alike."""
    return "/".join([base.rstrip("/"), *parts])


def filesystem(uri: str) -> tuple[pafs.FileSystem, str]:
    """A pyarrow filesystem and path for a local path or URI (works on executors too)."""
    if "://" not in uri:
        return pafs.LocalFileSystem(), uri
    scheme = uri.split("://", 1)[0]
    if scheme in _HADOOP_SCHEMES:
        uri = _HADOOP_SCHEMES[scheme] + uri[len(scheme):]
    return pafs.FileSystem.from_uri(uri)


# -- reading ------------------------------------------------------------------------------------

def exists(path: str) -> bool:
    """Whether a file or folder exists at ``path``."""
    if is_local(path):
        return os.path.exists(path)
    fs, p = filesystem(path)
    return fs.get_file_info(p).type != pafs.FileType.NotFound


def is_file(path: str) -> bool:
    """Whether a file exists at ``path``."""
    if is_local(path):
        return os.path.isfile(path)
    fs, p = filesystem(path)
    return fs.get_file_info(p).type == pafs.FileType.File


def size(path: str) -> int:
    """A file's size in bytes (0 when it does not exist)."""
    if is_local(path):
        try:
            return os.path.getsize(path)
        except OSError:
            return 0
    fs, p = filesystem(path)
    info = fs.get_file_info(p)
    return int(info.size or 0) if info.type == pafs.FileType.File else 0


def read_bytes(path: str) -> bytes:
    """A whole file (raises FileNotFoundError when it is missing)."""
    if is_local(path):
        with open(path, "rb") as f:
            return f.read()
    fs, p = filesystem(path)
    if fs.get_file_info(p).type == pafs.FileType.NotFound:
        raise FileNotFoundError(path)
    with fs.open_input_stream(p) as f:
        return bytes(f.read())


def read_text(path: str) -> str:
    """A whole UTF-8 text file (raises FileNotFoundError when it is missing)."""
    return read_bytes(path).decode("utf-8")


def read_json(path: str) -> Any:
    """A JSON document (FileNotFoundError when missing, ValueError when not JSON)."""
    return json.loads(read_bytes(path))


def list_names(folder: str) -> list[str]:
    """The names of the entries of a folder, sorted ([] when the folder does not exist)."""
    if is_local(folder):
        try:
            return sorted(os.listdir(folder))
        except (FileNotFoundError, NotADirectoryError):
            return []
    fs, p = filesystem(folder)
    infos = fs.get_file_info(pafs.FileSelector(p, recursive=False, allow_not_found=True))
    return sorted(i.base_name for i in infos)


def list_files(folder: str) -> list[str]:
    """Every file below a folder, recursively, as paths under ``folder`` ([] when missing)."""
    if is_local(folder):
        out: list[str] = []
        for root, _dirs, files in os.walk(folder):
            out.extend(os.path.join(root, f) for f in files)
        return sorted(out)
    fs, p = filesystem(folder)
    infos = fs.get_file_info(pafs.FileSelector(p, recursive=True, allow_not_found=True))
    base = folder.rstrip("/")
    return sorted(base + i.path[len(p.rstrip("/")):] for i in infos if i.type == pafs.FileType.File)


# -- writing ------------------------------------------------------------------------------------

def make_dirs(folder: str) -> None:
    """Create a folder and its parents (object stores have no folders: nothing to do)."""
    if is_local(folder):
        os.makedirs(folder, exist_ok=True)


def _fsync_folder(folder: str) -> None:
    """Make a rename in ``folder`` durable (best effort: not every filesystem allows it)."""
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def write_bytes(path: str, data: bytes) -> None:
    """Replace a file atomically and durably: readers see the old content or the new, never a
    mix, and a crash leaves one of them (local: temporary file, fsync, rename, fsync of the
    folder; an object store's PUT is atomic by itself)."""
    if not is_local(path):
        fs, p = filesystem(path)
        with fs.open_output_stream(p) as f:
            f.write(data)
        return
    folder = os.path.dirname(path) or "."
    os.makedirs(folder, exist_ok=True)
    tmp = os.path.join(folder, f".{os.path.basename(path)}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    _fsync_folder(folder)


def write_text(path: str, text: str) -> None:
    """Replace a UTF-8 text file atomically and durably (see :func:`write_bytes`)."""
    write_bytes(path, text.encode("utf-8"))


def write_json(path: str, doc: Any, indent: int | None = None) -> None:
    """Replace a JSON document atomically and durably (see :func:`write_bytes`)."""
    text = json.dumps(doc, indent=indent, separators=None if indent else (",", ":"))
    write_bytes(path, text.encode("utf-8"))


def create_exclusive(path: str, data: bytes) -> bool:
    """Create a local file that must not exist yet (O_CREAT|O_EXCL: exactly one of several
    racing processes wins), with ``data``, durably; False when it already exists."""
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
        return False
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    return True


def append_json_lines(path: str, docs: list[Any]) -> None:
    """Append JSON documents to a local JSON-lines log, one per line, and fsync: they are whole
    once this returns. A line a crash cut short stays apart (a newline goes before the first
    new line); :func:`read_json_lines` skips it."""
    if not docs:
        return
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "a+", encoding="utf-8") as f:
        f.seek(0, os.SEEK_END)
        if f.tell():
            f.seek(f.tell() - 1)
            if f.read(1) != "\n":
                f.write("\n")
        for d in docs:
            f.write(json.dumps(d, separators=(",", ":")) + "\n")
        f.flush()
        os.fsync(f.fileno())


def read_json_lines(path: str, tail_bytes: int | None = None) -> list[Any]:
    """The documents of a JSON-lines log, oldest first, skipping lines that are not JSON (cut
    short by a crash); only those in the last ``tail_bytes`` when given ([] when missing)."""
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


@contextlib.contextmanager
def open_write(path: str) -> Iterator[IO[bytes]]:
    """A binary stream that writes a new file at ``path`` (local or object store)."""
    if is_local(path):
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        with open(path, "wb") as f:
            yield f
        return
    fs, p = filesystem(path)
    with fs.open_output_stream(p) as out:
        yield out  # type: ignore[misc]


def rename(src: str, dest: str) -> None:
    """Move a file or folder (local: one atomic rename on the same filesystem)."""
    if is_local(src) and is_local(dest):
        os.makedirs(os.path.dirname(dest) or ".", exist_ok=True)
        os.replace(src, dest)
        return
    fs, s = filesystem(src)
    _, d = filesystem(dest)
    fs.move(s, d)


# -- deleting -----------------------------------------------------------------------------------

def delete(path: str) -> bool:
    """Delete one file; False when there was none."""
    if is_local(path):
        try:
            os.remove(path)
        except FileNotFoundError:
            return False
        return True
    fs, p = filesystem(path)
    try:
        fs.delete_file(p)
    except FileNotFoundError:
        return False
    return True


def remove_tree(path: str) -> None:
    """Delete a folder and everything under it (nothing when it does not exist)."""
    if is_local(path):
        shutil.rmtree(path, ignore_errors=True)
        return
    fs, p = filesystem(path)
    with contextlib.suppress(FileNotFoundError):
        fs.delete_dir(p)


def disk_usage(folder: str) -> tuple[int, int]:
    """(files, bytes) under a local folder, recursively ((0, 0) when absent or remote)."""
    files = size = 0
    if not is_local(folder):
        return files, size
    for root, _, names in os.walk(folder):
        for n in names:
            with contextlib.suppress(OSError):
                size += os.path.getsize(os.path.join(root, n))
                files += 1
    return files, size
