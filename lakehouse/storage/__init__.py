"""Storage: every read, write, listing and deletion of a file or folder on a warehouse path.

A warehouse path is a local path or a URI of an object store (``s3://bucket/key``, ...). Local
paths take the operating system's calls (durable: fsync before rename, the folder fsynced after);
other URIs go through pyarrow's filesystems, which also run on Spark's executors; an S3 path reaches
the store lakehouse.objectstore describes, and what must be exclusive (a create that only one of
several writers may win, an append to a log) is a conditional PUT (If-None-Match / If-Match), the
one thing S3 makes atomic besides a whole PUT (``lakehouse.storage.s3``). Nothing else in
lakehouse opens, lists or deletes files on a warehouse path; Delta tables themselves are read
through ``lakehouse.delta_log`` and written by Spark or delta-rs.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO, Any

import pyarrow as pa
import pyarrow.fs as pafs

from lakehouse import objectstore
from lakehouse.objectstore import is_s3
from lakehouse.storage import s3 as s3io
from lakehouse.storage.paths import absolute, filesystem, is_local, join, local_path
from lakehouse.storage.s3 import (
    check_reachable,
    is_transient,
    require_conditional_writes,
    transient,
)

__all__ = ["absolute", "check_reachable", "filesystem", "is_local", "is_transient", "join", "local_path",
           "require_conditional_writes", "transient"]  # with every definition below


# -- reading ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class FileInfo:
    """A file as a listing or a look at it finds it."""

    name: str
    """The file's name in its folder."""
    size: int
    mtime_ns: int
    """Last modification (an object store: when the object was written, to the second or better)."""


def file_info(path: str) -> FileInfo | None:
    """Size and modification time of a file; None when there is no file at ``path`` (missing, or
    a folder)."""
    if is_local(path):
        try:
            st = os.stat(path)
        except (FileNotFoundError, NotADirectoryError):
            return None
        return FileInfo(os.path.basename(path), st.st_size, st.st_mtime_ns) if os.path.isfile(path) else None
    fs, p = filesystem(path)
    info = fs.get_file_info(p)
    if info.type != pafs.FileType.File:
        return None
    return FileInfo(info.base_name, int(info.size or 0), int(info.mtime_ns or 0))


def list_file_infos(folder: str) -> list[FileInfo]:
    """The files directly in an object-store folder (a prefix), with sizes and times, by name; none for
    an empty or absent prefix, FileNotFoundError for a missing bucket (a local folder: ``os.scandir``)."""
    fs, p = filesystem(folder)
    if is_s3(folder):
        bucket = p.split("/", 1)[0]
        if fs.get_file_info(bucket).type == pafs.FileType.NotFound:
            raise FileNotFoundError(f"{folder}: no bucket {bucket}")
    infos = fs.get_file_info(pafs.FileSelector(p.rstrip("/"), recursive=False, allow_not_found=True))
    return sorted((FileInfo(i.base_name, int(i.size or 0), int(i.mtime_ns or 0))
                   for i in infos if i.type == pafs.FileType.File), key=lambda f: f.name)


def open_read(path: str) -> IO[bytes]:
    """A file opened for reading bytes, seekable (an object is read in ranges, buffered by the
    megabyte); FileNotFoundError when it is missing."""
    if is_local(path):
        return open(path, "rb")  # noqa: SIM115 - the caller closes it
    fs, p = filesystem(path)
    try:
        raw = fs.open_input_file(p)
    except (FileNotFoundError, OSError) as e:
        if fs.get_file_info(p).type != pafs.FileType.File:
            raise FileNotFoundError(path) from None
        raise OSError(f"{path}: {e}") from None
    return io.BufferedReader(raw, buffer_size=1 << 20)  # type: ignore[arg-type]


def arrow_input(path: str) -> Any:
    """What pyarrow's readers (Parquet) take for a file: a local path, or an object's random-access
    file (FileNotFoundError when it is missing)."""
    if is_local(path):
        return path
    fs, p = filesystem(path)
    if fs.get_file_info(p).type != pafs.FileType.File:
        raise FileNotFoundError(path)
    return fs.open_input_file(p)


MAP_BYTES = 16 << 20
"""``arrow_buffer`` memory-maps a local file from this size on, and reads a smaller one at once."""


def arrow_buffer(path: str) -> Any:
    """A whole file as a pyarrow buffer (Arrow IPC readers take it): a small local file read at
    once (a memory map costs several times that in system calls for a file of a few kilobytes), a
    large one memory-mapped (nothing is read up front), an object in one GET (``read_bytes``).
    FileNotFoundError when it is missing."""
    local = local_path(path)
    if local is None:
        return pa.py_buffer(read_bytes(path))
    if os.path.getsize(local) >= MAP_BYTES:
        return pa.memory_map(local, "r")
    with open(local, "rb") as f:
        return pa.py_buffer(f.read())


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
    """A whole file (raises FileNotFoundError when it is missing); on S3 one GET of one version
    (pyarrow's reader looks the size up first, then reads ranges: of a newer version, if another
    writer replaced the object in between)."""
    if is_local(path):
        with open(path, "rb") as f:
            return f.read()
    if is_s3(path):
        got = s3io.get_with_etag(path)
        if got is None:
            raise FileNotFoundError(path)
        return got[0]
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


def list_names(folder: str, files_only: bool = False) -> list[str]:
    """The names of a folder's entries (``files_only``: its files), sorted ([] without the folder)."""
    if is_local(folder):
        try:
            with os.scandir(folder) as entries:
                return sorted(e.name for e in entries if not files_only or e.is_file())
        except (FileNotFoundError, NotADirectoryError):
            return []
    fs, p = filesystem(folder)
    infos = fs.get_file_info(pafs.FileSelector(p, recursive=False, allow_not_found=True))
    return sorted(i.base_name for i in infos if not files_only or i.type == pafs.FileType.File)


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


class AtomicFile:
    """A file written in pieces that appears whole under its name on :meth:`commit`, or not at all
    (:meth:`abort`); a file-like sink (pyarrow's writers take it). Local: a temporary file beside
    it, fsynced, renamed, the folder fsynced. An object store, where an upload shows only once
    complete but a failed writer's close would complete it: the bytes are kept in memory up to
    ``SPILL``, then go on to a temporary object of the writer's own; ``commit`` is one PUT of the
    bytes (or a copy of the temporary object), ``abort`` drops them (or deletes only its own
    temporary object): nothing partial shows under the name, and a failed writer never touches it."""

    SPILL = 64 << 20

    def __init__(self, path: str) -> None:
        self.path = path
        folder, name = os.path.split(path)
        self.temp = f"{folder}/.{name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        """The temporary file (local), or the temporary object once the bytes outgrow memory."""
        self._memory: io.BytesIO | None = None
        self._out: Any = None
        self._at = 0
        self.closed = False
        if is_local(path):
            os.makedirs(folder or ".", exist_ok=True)
            self._out = open(self.temp, "wb")  # noqa: SIM115 - closed by commit or abort
        else:
            self._memory = io.BytesIO()

    def write(self, data: Any) -> int:
        """Append bytes; how many."""
        n = len(memoryview(data).cast("B"))
        if self._memory is not None:
            self._memory.write(data)
            if self._memory.tell() > self.SPILL:  # on to a temporary object of this writer's own
                fs, p = filesystem(self.temp)
                self._out = fs.open_output_stream(p)
                self._out.write(self._memory.getvalue())
                self._memory = None
        else:
            self._out.write(data)
        self._at += n
        return n

    def tell(self) -> int:
        return self._at

    def flush(self) -> None:
        """Nothing: the bytes go out on :meth:`commit`."""

    def close(self) -> None:
        """Nothing: :meth:`commit` or :meth:`abort` decides, not a writer closing its sink."""

    def commit(self) -> str:
        """Make the file whole under its name; its path."""
        self.closed = True
        if self._memory is not None:
            _put(self.path, self._memory.getvalue())
            self._memory = None
        elif is_local(self.path):
            self._out.flush()
            os.fsync(self._out.fileno())
            self._out.close()
            os.replace(self.temp, self.path)
            _fsync_folder(os.path.dirname(self.path) or ".")
        else:
            self._out.close()
            rename(self.temp, self.path)
        return self.path

    def abort(self) -> None:
        """Leave nothing: the bytes written so far are dropped."""
        if self.closed:
            return
        self.closed = True
        self._memory = None
        if self._out is not None:
            with contextlib.suppress(Exception):
                self._out.close()
            delete(self.temp)

    def __enter__(self) -> "AtomicFile":
        return self

    def __exit__(self, kind: object, *_: object) -> None:
        if kind is None:
            self.commit()
        else:
            self.abort()


def _put(path: str, data: bytes) -> None:
    """One upload of a whole object (S3: one PUT; another store: through pyarrow)."""
    if is_s3(path):
        return s3io.put(path, data)
    fs, p = filesystem(path)
    with fs.open_output_stream(p) as f:
        f.write(data)


def write_bytes(path: str, data: bytes) -> None:
    """Replace a file atomically and durably: readers see the old content or the new, never a
    mix, and a crash leaves one of them (:class:`AtomicFile`: local, a renamed temporary file;
    an object store, one PUT)."""
    with AtomicFile(path) as f:
        f.write(data)


def write_text(path: str, text: str) -> None:
    """Replace a UTF-8 text file atomically and durably (see :func:`write_bytes`)."""
    write_bytes(path, text.encode("utf-8"))


def write_json(path: str, doc: Any, indent: int | None = None) -> None:
    """Replace a JSON document atomically and durably (see :func:`write_bytes`)."""
    text = json.dumps(doc, indent=indent, separators=None if indent else (",", ":"))
    write_bytes(path, text.encode("utf-8"))


def create_exclusive(path: str, data: bytes) -> bool:
    """Create a file that must not exist yet, with ``data``, durably and whole: exactly one of
    several racing processes wins; False when it already exists. Local: a temporary file of this
    writer's own (fsynced), hard-linked to ``path`` (which fails when it exists), so a writer killed
    at any instant leaves no partial file under the name (without hard links: O_CREAT|O_EXCL, then
    the bytes). S3: a PUT with If-None-Match: *; ``data`` names its writer (a lease's holder), so a
    refused PUT whose object holds exactly ``data`` is this writer's earlier attempt, which landed
    although its answer was lost: created."""
    if is_s3(path):
        s3io.require_conditional_writes(path)
        if s3io.put_if(path, data, None):
            return True
        seen = s3io.get_with_etag(path)
        return seen is not None and seen[0] == data
    folder, name = os.path.split(path)
    os.makedirs(folder or ".", exist_ok=True)
    temp = os.path.join(folder, f".{name}{_EXCLUSIVE_TEMP}{os.getpid()}-{uuid.uuid4().hex[:8]}")
    try:
        with open(temp, "xb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        try:
            os.link(temp, path)
        except FileExistsError:
            return False
        except OSError:  # no hard links here: the bytes after an exclusive create
            return _create_exclusive_in_place(path, data)
        _fsync_folder(folder or ".")
        return True
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp)


_EXCLUSIVE_TEMP = ".tmp-"  # a local exclusive create's temporary file: .<name>.tmp-<pid>-<random>

def remove_create_leftovers(folder: str, older_than: float) -> None:
    """Delete what writers killed in ``create_exclusive`` left in ``folder``, older than ``older_than`` s."""
    if not is_local(folder):
        return
    cutoff = (time.time() - older_than) * 1e9
    for f in list_file_infos(folder):
        if f.name.startswith(".") and _EXCLUSIVE_TEMP in f.name and f.mtime_ns < cutoff:
            delete(os.path.join(folder, f.name))


def _create_exclusive_in_place(path: str, data: bytes) -> bool:
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


def copy_file(src: str, dest: str) -> None:
    """Copy one file (local or object store, either way) to a new file at ``dest``."""
    with open_read(src) as f, open_write(dest) as out:
        shutil.copyfileobj(f, out, 8 << 20)


def rename(src: str, dest: str) -> None:
    """Move a file or folder (local: one atomic rename on the same filesystem)."""
    if is_local(src) and is_local(dest):
        os.makedirs(os.path.dirname(dest) or ".", exist_ok=True)
        os.replace(src, dest)
        return
    if is_s3(src) and is_s3(dest) and is_file(src):  # a copy and a delete (pyarrow's would add folder markers)
        s3io.copy(src, dest)
        delete(src)
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
    if is_s3(path):  # pyarrow would leave a folder marker for the emptied prefix
        from botocore.exceptions import ClientError

        bucket, key = s3io.bucket_key(path)
        client = s3io.client(objectstore.active())
        try:
            client.head_object(Bucket=bucket, Key=key)
        except ClientError as e:
            if e.response.get("ResponseMetadata", {}).get("HTTPStatusCode") == 404:
                return False
            raise
        client.delete_object(Bucket=bucket, Key=key)
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
    if is_s3(path):  # listed and deleted a thousand keys a request, with no folder marker left
        bucket, key = s3io.bucket_key(path)
        s3io.delete_prefix(bucket, key.rstrip("/") + "/" if key else "")
        return
    fs, p = filesystem(path)
    with contextlib.suppress(FileNotFoundError):
        fs.delete_dir(p)


def disk_usage(folder: str) -> tuple[int, int]:
    """(files, bytes) under a folder, recursively ((0, 0) when absent)."""
    files = size = 0
    if not is_local(folder):
        fs, p = filesystem(folder)
        infos = fs.get_file_info(pafs.FileSelector(p.rstrip("/"), recursive=True, allow_not_found=True))
        found = [i for i in infos if i.type == pafs.FileType.File]
        return len(found), sum(int(i.size or 0) for i in found)
    for root, _, names in os.walk(folder):
        for n in names:
            with contextlib.suppress(OSError):
                size += os.path.getsize(os.path.join(root, n))
                files += 1
    return files, size
