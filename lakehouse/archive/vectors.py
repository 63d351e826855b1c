"""Vector files: ``<warehouse>/<table>/vectors/<column>/<YYYYMMDD>-<cutoff>`` (Arrow IPC files).

A day's current file for a column is the one with the largest cutoff not above the archive's
committed cutoff: a run writes its files before it commits, so files of a run that never
committed carry a larger cutoff and are never read; the next run removes them, and superseded
files of earlier runs. Writes go to a temporary name (starting with '.') and are renamed.
"""

from __future__ import annotations

import datetime as dt
import re
import uuid
from collections.abc import Iterable
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.ipc as ipc

from lakehouse.warehouse import join

NAME = re.compile(r"([0-9]{8})-([0-9]+)")


def vector_name(day: dt.date, cutoff: int) -> str:
    return f"{day:%Y%m%d}-{cutoff}"


def parse_name(name: str) -> tuple[dt.date, int] | None:
    """(day, cutoff) of a vector file name; None for anything else (temp files, strays)."""
    m = NAME.fullmatch(name)
    if not m:
        return None
    try:
        day = dt.datetime.strptime(m.group(1), "%Y%m%d").date()
    except ValueError:
        return None
    return day, int(m.group(2))


@dataclass(frozen=True)
class VectorFile:
    column: str
    day: dt.date
    cutoff: int
    path: str


def current(files: Iterable[VectorFile], committed: int | None) -> dict[tuple[str, dt.date], VectorFile]:
    """Per (column, day), the file readers use: the largest cutoff <= the committed cutoff."""
    out: dict[tuple[str, dt.date], VectorFile] = {}
    if committed is None:
        return out
    for f in files:
        if f.cutoff > committed:
            continue
        key = (f.column, f.day)
        if key not in out or f.cutoff > out[key].cutoff:
            out[key] = f
    return out


def garbage(files: Iterable[VectorFile], committed: int | None) -> list[VectorFile]:
    """Files no reader will use: uncommitted (cutoff above the committed one) or superseded."""
    files = list(files)
    keep = set(current(files, committed).values())
    return [f for f in files if f not in keep]


def filesystem(uri: str) -> tuple[pafs.FileSystem, str]:
    """A pyarrow filesystem and path for a local path or URI (works on executors too)."""
    if "://" not in uri:
        return pafs.LocalFileSystem(), uri
    scheme = uri.split("://", 1)[0]
    if scheme in _HADOOP_SCHEMES:  # Hadoop's names for the stores pyarrow knows as s3
        uri = _HADOOP_SCHEMES[scheme] + uri[len(scheme):]
    return pafs.FileSystem.from_uri(uri)


_HADOOP_SCHEMES = {"s3a": "s3", "s3n": "s3"}


def to_uri(base_uri: str, base_path: str, path: str) -> str:
    """Turn a path pyarrow listed under ``base_path`` back into a URI under ``base_uri``."""
    return base_uri.rstrip("/") + path[len(base_path.rstrip("/")):]


def list_files(vectors_root: str) -> tuple[list[VectorFile], list[str]]:
    """All vector files under ``vectors/``, and temporary leftovers (paths)."""
    fs, root = filesystem(vectors_root)
    info = fs.get_file_info(pafs.FileSelector(root, recursive=True, allow_not_found=True))
    files, temps = [], []
    for i in info:
        if i.type != pafs.FileType.File:
            continue
        rel = i.path[len(root.rstrip("/")) + 1:]
        parts = rel.split("/")
        if len(parts) != 2:
            continue
        column, name = parts
        if name.startswith("."):
            temps.append(to_uri(vectors_root, root, i.path))
            continue
        parsed = parse_name(name)
        if parsed:
            files.append(VectorFile(column, parsed[0], parsed[1], to_uri(vectors_root, root, i.path)))
    return files, temps


def delete(paths: Iterable[str], vectors_root: str) -> int:
    n = 0
    for uri in paths:
        fs, p = filesystem(uri)
        try:
            fs.delete_file(p)
            n += 1
        except FileNotFoundError:
            pass
    return n


class AtomicIpcWriter:
    """Writes an Arrow IPC file under a temporary name and renames it on ``commit``."""

    def __init__(self, vectors_root: str, column: str, day: dt.date, cutoff: int, schema: pa.Schema) -> None:
        self.fs, root = filesystem(vectors_root)
        folder = join(root, column)
        self.fs.create_dir(folder, recursive=True)
        name = vector_name(day, cutoff)
        self.final = join(folder, name)
        self.temp = join(folder, f".{name}.tmp-{uuid.uuid4().hex[:8]}")
        self._sink = self.fs.open_output_stream(self.temp)
        self._writer = ipc.new_file(self._sink, schema)
        self.schema = schema

    def write(self, table: pa.Table) -> None:
        if table.num_rows:
            self._writer.write_table(table.cast(self.schema) if table.schema != self.schema else table)

    def commit(self) -> str:
        self._writer.close()
        self._sink.close()
        self.fs.move(self.temp, self.final)
        return self.final

    def abort(self) -> None:
        try:
            self._writer.close()
            self._sink.close()
        finally:
            try:
                self.fs.delete_file(self.temp)
            except FileNotFoundError:
                pass


def read(path: str) -> pa.Table:
    """A vector file as a table (memory-mapped when local: nothing is decoded up front)."""
    fs, p = filesystem(path)
    if isinstance(fs, pafs.LocalFileSystem):
        return ipc.open_file(pa.memory_map(p, "r")).read_all()
    with fs.open_input_file(p) as f:
        return ipc.open_file(f).read_all()
