"""Vector files: ``<warehouse>/<table>/vectors/<column>/<YYYYMMDD>-<cutoff>[.<generation>]``
(Arrow IPC files).

A file belongs to a run: an archiving run writes its days' files under its cutoff (generation
0), an erasure (``lakehouse delete``) rewrites days at the unchanged cutoff under its own
number (the generation). Runs are ordered by (cutoff, generation), and the archive commits both
(the cutoff, and the number of the last erasure: two SetTransactions). A day's current file for
a column is the one of the largest run not above the committed one: a run writes its files
before it commits, so files of a run that never committed are above it and never read; the next
run removes them, and superseded files of earlier runs. A file appears whole or not at all
(``lakehouse.storage.AtomicFile``: a temporary name starting with '.' on a local disk, one PUT on
an object store).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import threading
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import NamedTuple

import pyarrow as pa
import pyarrow.ipc as ipc

from lakehouse import storage
from lakehouse.storage import filesystem, join

NAME = re.compile(r"([0-9]{8})-(-?[1-9][0-9]*|0)(?:\.([1-9][0-9]*))?")
"""``YYYYMMDD-<cutoff>[.<generation>]``: the day zero-padded to 8 digits (years 0001..9999), the
cutoff in whole epoch seconds, negative before 1970 (``19691231--3600``), without leading zeros;
an erasure's generation after a dot (none: 0, an archiving run's)."""

Run = tuple[int, int]
"""A run's place in the order of runs: (cutoff, generation)."""


def run_of(cutoff: int | None, generation: int = 0) -> Run | None:
    """The run a committed archive names (None before any cutoff)."""
    return None if cutoff is None else (int(cutoff), int(generation))


def run_name(run: Run) -> str:
    """A run as vector file names and sidecars write it: ``<cutoff>`` or ``<cutoff>.<generation>``."""
    return f"{int(run[0])}" + (f".{int(run[1])}" if run[1] else "")


_PART = re.compile(r"part-([0-9]+)-.*?\.c([0-9]+)(?:\.[^/]*)?$")


def batch_order(paths: Iterable[str]) -> list[str]:
    """The files of an archive day in the order of the day's batch (what record ``i`` of a vector
    file refers to): a day is written by one Spark task, whose files Spark numbers ``.c000``,
    ``.c001``, ... in the order it writes them (Delta gives each file its own uuid, so names do
    not sort that way); then by task and path for anything else."""
    def key(p: str) -> tuple[int, int, str]:
        m = _PART.search(p.rsplit("/", 1)[-1])
        return (int(m.group(1)), int(m.group(2)), p) if m else (1 << 62, 0, p)

    return sorted(paths, key=key)


def day_digits(day: dt.date) -> str:
    """``YYYYMMDD``, zero-padded for every year (``%Y`` does not pad years below 1000)."""
    return f"{day.year:04d}{day.month:02d}{day.day:02d}"


def vector_name(day: dt.date, cutoff: int, generation: int = 0) -> str:
    """A vector file's name: ``YYYYMMDD-<cutoff>[.<generation>]`` (``parse_name`` reverses it)."""
    return f"{day_digits(day)}-{run_name((cutoff, generation))}"


def parse_name(name: str) -> tuple[dt.date, int, int] | None:
    """(day, cutoff, generation) of a vector file name; None for anything else (temp files,
    strays)."""
    m = NAME.fullmatch(name)
    if not m:
        return None
    digits = m.group(1)
    try:
        day = dt.date(int(digits[:4]), int(digits[4:6]), int(digits[6:]))
    except ValueError:
        return None
    return day, int(m.group(2)), int(m.group(3) or 0)


class VectorFile(NamedTuple):
    """A vector file found under ``vectors/``: its column, day, the run's cutoff, its URI and
    the run's generation (a tuple: a listing makes one per file, tens of thousands in an old
    table)."""

    column: str
    day: dt.date
    cutoff: int
    path: str
    generation: int = 0

    @property
    def run(self) -> Run:
        """The run that wrote it: (cutoff, generation)."""
        return self.cutoff, self.generation


def day_runs(files: Iterable[VectorFile], committed: Run | None) -> dict[dt.date, Run]:
    """Per day, the run whose files readers use: the largest run not above the committed one
    among the day's files (of any column). Every column of a day comes from that one run, never
    from two."""
    out: dict[dt.date, Run] = {}
    if committed is None:
        return out
    for f in files:
        run = f.run
        if run <= committed and (f.day not in out or run > out[f.day]):
            out[f.day] = run
    return out


def current(files: Iterable[VectorFile], committed: Run | None) -> dict[tuple[str, dt.date], VectorFile]:
    """Per (column, day), the file readers use: the one of the day's run (``day_runs``)."""
    files = list(files)
    runs = day_runs(files, committed)
    return {(f.column, f.day): f for f in files if runs.get(f.day) == f.run}


def garbage(files: Iterable[VectorFile], committed: Run | None) -> list[VectorFile]:
    """Files no reader will use: uncommitted (a run above the committed one) or superseded."""
    files = list(files)
    keep = set(current(files, committed).values())
    return [f for f in files if f not in keep]


RUNS_FOLDER = "_runs"
"""Under ``vectors/``: one sidecar per run, ``<run_name>.json``, with the run's encoding."""


def sidecar(vectors_root: str, run: Run) -> str:
    """A run's sidecar: ``vectors/_runs/<cutoff>[.<generation>].json``."""
    return join(vectors_root, RUNS_FOLDER, f"{run_name(run)}.json")


def parse_run_name(stem: str) -> Run | None:
    """A sidecar's run from its name without ``.json`` (None for anything else)."""
    cutoff, _, generation = stem.partition(".")
    try:
        return int(cutoff), int(generation or 0)
    except ValueError:
        return None


def run_encodings(vectors_root: str, runs: Iterable[Run]) -> dict[Run, Encoding | None]:
    """Per run, the encoding its sidecar records (None: no sidecar or an unreadable one)."""
    fs, root = filesystem(join(vectors_root, RUNS_FOLDER))
    out: dict[Run, Encoding | None] = {}
    for r in runs:
        try:
            with fs.open_input_stream(join(root, f"{run_name(r)}.json")) as f:
                out[r] = Encoding.parse(json.loads(f.read())["encoding"])
        except (OSError, ValueError, KeyError, TypeError):
            out[r] = None
    return out


def stale_days(vectors_root: str, want: Encoding, committed: Run | None,
               days: Iterable[dt.date] | None = None, listed: list[VectorFile] | None = None) -> dict[dt.date, str]:
    """The one answer to "which archive days were written under other settings than ``want``",
    with why: their record order or vector set is not today's, so the next archive run re-sorts
    and re-encodes them, compaction leaves them alone and verify skips their order checks.

    ``days``: the archived days to judge (a day there without vector files is stale when the
    table wants vector files); by default every day that has vector files. A run's encoding comes
    from its sidecar, or else from the metadata of one of the day's files. ``listed``: the
    folder's files when the caller listed them already (``list_files``)."""
    files = listed if listed is not None else list_files(vectors_root)[0]
    runs = day_runs(files, committed)
    by_run = run_encodings(vectors_root, set(runs.values()))
    one_file = {f.day: f for f in files if runs.get(f.day) == f.run}
    out: dict[dt.date, str] = {}
    wanted, keys = want.key(), {e: e.key() for e in set(by_run.values()) if e is not None}
    for day in sorted(set(runs if days is None else days)):
        run = runs.get(day)
        if run is None:
            if want.vector_columns:
                out[day] = "no vector files"
            continue
        enc = by_run.get(run)
        if enc is None:
            try:
                enc = encoding_of(read_schema(one_file[day].path))
            except Exception as e:  # noqa: BLE001 - unreadable: stale, with the reason
                out[day] = f"unreadable: {e}"
                continue
        if enc is None:
            out[day] = "written before encodings were recorded"
        elif (keys.get(enc) or enc.key()) != wanted:
            out[day] = f"written under {enc.describe()}; the table now has {want.describe()}"
    return out


def to_uri(base_uri: str, base_path: str, path: str) -> str:
    """Turn a path pyarrow listed under ``base_path`` back into a URI under ``base_uri``."""
    return base_uri.rstrip("/") + path[len(base_path.rstrip("/")):]


def list_files(vectors_root: str, columns: Iterable[str] | None = None,
               day: dt.date | None = None) -> tuple[list[VectorFile], list[str]]:
    """All vector files under ``vectors/`` (or only those of ``columns``, or of one ``day``), and
    temporary leftovers (paths). Each distinct name is parsed once (a day's name repeats in every
    column); with ``day``, only the names that start with its digits."""
    base = vectors_root.rstrip("/")
    prefix = "" if day is None else day_digits(day) + "-"
    if columns is None:  # every column's folder (a column may start with "_"; RUNS_FOLDER is none)
        columns = [c for c in storage.list_names(vectors_root) if c != RUNS_FOLDER and not c.startswith(".")]
    names: dict[str, tuple[dt.date, int, int] | None] = {}
    files, temps = [], []
    for column in columns:
        folder = f"{base}/{column}/"
        for name in storage.list_names(folder[:-1], files_only=True):
            if name.startswith("."):
                temps.append(folder + name)
                continue
            if not name.startswith(prefix):
                continue
            parsed = names.get(name, ())
            if parsed == ():
                parsed = names[name] = parse_name(name)
            if parsed:
                files.append(VectorFile(column, parsed[0], parsed[1], folder + name, parsed[2]))
    return files, temps


def delete(paths: Iterable[str], vectors_root: str) -> int:
    """Delete the vector files at ``paths`` (URIs; files already gone are skipped); how many went."""
    return sum(1 for uri in paths if storage.delete(uri))


# -- the encoding a file was written under --------------------------------------------------------

META_DAY = b"lakehouse.day"
META_CUTOFF = b"lakehouse.cutoff"
META_ENCODING = b"lakehouse.encoding"


@dataclass(frozen=True)
class Encoding:
    """The archive settings a day's vector files were written under: the sort columns (the
    day's record order and the nesting of the runs) and the columns that got vector files."""

    sort_columns: tuple[str, ...]
    vector_columns: tuple[str, ...]

    def key(self) -> str:
        """The encoding as canonical JSON: equal keys mean equal encodings (stored in file metadata)."""
        return json.dumps({"sort_columns": list(self.sort_columns),
                           "vector_columns": sorted(self.vector_columns)}, separators=(",", ":"))

    @classmethod
    def parse(cls, text: str | bytes | None) -> "Encoding | None":
        """The encoding a key (``key()``) records; None when there is none or it does not parse."""
        if not text:
            return None
        try:
            d = json.loads(text)
            return cls(tuple(d["sort_columns"]), tuple(sorted(d["vector_columns"])))
        except (ValueError, KeyError, TypeError):
            return None

    def describe(self) -> str:
        """The encoding for a message: its sort columns and vector columns."""
        return f"sort columns [{', '.join(self.sort_columns)}], vectors for [{', '.join(self.vector_columns)}]"

    def reads(self, current: "Encoding", column: str) -> str | None:
        """Why a file of ``column`` written under this encoding is wrong under ``current``
        (None when it is right): the record order changed, or the column has no vectors now."""
        if self.sort_columns != current.sort_columns:
            return (f"sorted by [{', '.join(self.sort_columns)}], the table now sorts by "
                    f"[{', '.join(current.sort_columns)}]")
        if column not in current.vector_columns:
            return f"column {column} has no vector files under the current settings"
        if column not in self.vector_columns:
            return f"column {column} had no vector files when the day was archived"
        return None


def file_metadata(day: dt.date, cutoff: int, encoding: Encoding | None) -> dict[bytes, bytes]:
    """A vector file's schema metadata: its day, the run's cutoff and the encoding."""
    out = {META_DAY: day.isoformat().encode(), META_CUTOFF: str(int(cutoff)).encode()}
    if encoding is not None:
        out[META_ENCODING] = encoding.key().encode()
    return out


def encoding_of(table: pa.Table | pa.Schema) -> Encoding | None:
    """The encoding recorded in a vector file's schema metadata (None for files written before
    encodings were recorded)."""
    schema = table.schema if isinstance(table, pa.Table) else table
    return Encoding.parse((schema.metadata or {}).get(META_ENCODING))


def read_schema(path: str) -> pa.Schema:
    """A vector file's schema (with its metadata) without reading its record batches."""
    fs, p = filesystem(path)
    with fs.open_input_file(p) as f:
        return ipc.open_file(f).schema


class AtomicIpcWriter:
    """Writes an Arrow IPC file that appears whole under its name on ``commit``, or not at all
    (``abort``): through :class:`lakehouse.storage.AtomicFile`."""

    def __init__(self, vectors_root: str, column: str, day: dt.date, cutoff: int, schema: pa.Schema,
                 encoding: Encoding | None = None, generation: int = 0) -> None:
        schema = schema.with_metadata({**(schema.metadata or {}), **file_metadata(day, cutoff, encoding)})
        self.final = filesystem(join(vectors_root, column, vector_name(day, cutoff, generation)))[1]
        self._file = storage.AtomicFile(join(vectors_root, column, vector_name(day, cutoff, generation)))
        self.temp = self._file.temp
        self._writer = ipc.new_file(self._file, schema)
        self.schema = schema

    def write(self, table: pa.Table) -> None:
        """Append ``table``'s rows (cast to the file's schema when it differs; empty tables skipped)."""
        if table.num_rows:
            if table.schema.remove_metadata() != self.schema.remove_metadata():
                table = table.cast(self.schema)
            self._writer.write_table(table.replace_schema_metadata(self.schema.metadata))

    def commit(self) -> str:
        """Close the file and make it whole under its name; its path (as its filesystem names it)."""
        self._writer.close()
        self._file.commit()
        return self.final

    def abort(self) -> None:
        """Drop the file: nothing is left under its name, or anywhere."""
        try:
            self._writer.close()
        finally:
            self._file.abort()


def read(path: str) -> pa.Table:
    """A vector file as a table (read whole, or memory-mapped when large: ``storage.arrow_buffer``)."""
    return ipc.open_file(storage.arrow_buffer(path)).read_all()


KEPT_BYTES = 64 << 20
"""How much of the vector files ``read_kept`` keeps in memory, least recently used out first."""
_kept: OrderedDict[tuple[str, int, int, int], tuple[pa.Table, int]] = OrderedDict()
_kept_bytes = 0
_kept_lock = threading.Lock()


def read_kept(path: str) -> pa.Table:
    """``read``, kept in memory for the process's next queries (``KEPT_BYTES``). A local file is
    known by its inode, size and modification time, so a file written again under its name is
    read again; an object is read anew every time (its listing gives no such identity)."""
    local = storage.local_path(path)
    if local is None:
        return read(path)
    st = os.stat(local)
    key = (path, st.st_ino, st.st_size, st.st_mtime_ns)
    global _kept_bytes
    with _kept_lock:
        found = _kept.get(key)
        if found is not None:
            _kept.move_to_end(key)
            return found[0]
    table = read(path)
    size = st.st_size  # the table's buffers are slices of the file read whole (nbytes costs 80 us)
    with _kept_lock:
        if key not in _kept:
            _kept[key] = (table, size)
            _kept_bytes += size
        while _kept_bytes > KEPT_BYTES and len(_kept) > 1:
            _kept_bytes -= _kept.popitem(last=False)[1][1]
    return table


def kept_files() -> int:
    """How many vector files ``read_kept`` holds."""
    with _kept_lock:
        return len(_kept)


def forget_kept() -> None:
    """Drop every vector file ``read_kept`` holds (a benchmark's cold runs)."""
    global _kept_bytes
    with _kept_lock:
        _kept.clear()
        _kept_bytes = 0
