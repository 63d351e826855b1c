"""Erasing from a table's rejects (step 5 of a delete): the rejected rows whose record holds a
row the delete erases.

A reject keeps its record as read: a JSON object (JSON Lines and Parquet inputs, rows given to
the Python API, late rows), or a CSV line. A record is matched:

- **by key** (a keys delete): it parses into the key's columns, typed, and the key is one given;
- **by the predicate** (a ``--where`` delete): it parses into every column the predicate reads,
  typed, and the predicate is true for it (``matching``: Spark's semantics, as for live);
- a CSV line is read with the header of its source file, when that file is still there;
- **unmatched** otherwise: its record does not parse, or lacks a column, or a value does not
  read as its column's type (a bad row is in rejects for that very reason). Those are counted
  and reported, never guessed at.

The matched rows leave the table in one metadata-only commit: each data file holding one is
written again without them (a file of its own, in the table's folder) and swapped for it, with
the erasure's SetTransaction (a commit already in the table is not made twice). Nothing here
starts Spark.
"""

from __future__ import annotations

import csv
import decimal
import io
import json
import time
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from lakehouse import delta_log, storage
from lakehouse.archive.state import ERASURE_APP_ID
from lakehouse.definitions import TableDefinition
from lakehouse.erasure.matching import matches
from lakehouse.erasure.predicate import Predicate
from lakehouse.records import BadValue, converter
from lakehouse.storage import join
from lakehouse.times import micros
from lakehouse.warehouse import TablePaths

if TYPE_CHECKING:
    import pyarrow as pa



@dataclass
class RejectsMatch:
    """The rejects a delete erases: per data file (its path as the log names it, and its size),
    the rows' positions in it; and how many records could not be judged."""

    version: int | None
    files: dict[str, tuple[int, list[int]]] = field(default_factory=dict)
    unmatched: int = 0

    @property
    def rows(self) -> int:
        """Rejects rows matched."""
        return sum(len(rows) for _, rows in self.files.values())


def parse_record(record: str | None, source: str | None, headers: dict[str, tuple[list[str], int] | None],
                 at: Any = None) -> dict[str, Any] | None:
    """A reject's record as {column: raw value}: a JSON object as it is, a CSV line with its source
    file's header (``headers`` caches them by source) when the file has not changed since the
    reject (``at``: when it was rejected); None when it does not parse."""
    if not record:
        return None
    text = record.strip()
    if text.startswith("{"):
        try:
            doc = json.loads(text, parse_float=decimal.Decimal)  # (numbers as ingest reads them)
        except ValueError:
            return None
        return doc if isinstance(doc, dict) else None
    if not source:
        return None
    if source not in headers:
        headers[source] = _header(source)
    found = headers[source]
    if found is None:
        return None
    header, modified_ns = found
    if at is not None and modified_ns > micros(at) * 1000:  # written again since: its header may not be the record's
        return None
    try:
        values = next(csv.reader(io.StringIO(record)))
    except (csv.Error, StopIteration):
        return None
    if len(values) != len(header):
        return None
    return {h: (None if v == "" else v) for h, v in zip(header, values)}  # (an empty field is NULL, as ingest has it)


def _header(source: str) -> tuple[list[str], int] | None:
    """The header line of a CSV source file still on hand, and the file's modification time (ns);
    None: gone, or not CSV."""
    if not source.lower().endswith((".csv", ".csv.gz")):
        return None
    info = storage.file_info(source)
    if info is None:
        return None
    import gzip

    try:
        with storage.open_read(source) as raw:
            f = gzip.GzipFile(fileobj=raw) if source.lower().endswith(".gz") else raw
            line = f.readline(1 << 20).decode("utf-8", "replace").lstrip("\ufeff")
        return [h.strip() for h in next(csv.reader([line]))], info.mtime_ns
    except (OSError, EOFError, StopIteration, csv.Error):
        return None


def typed(definition: TableDefinition, doc: dict[str, Any], columns: list[str]) -> dict[str, Any] | None:
    """The values of ``columns`` in a parsed record, each read as its column's type (None when one
    is missing or does not read)."""
    types = {c.name: c.type for c in definition.columns}
    out = {}
    for c in columns:
        if c not in doc or c not in types:
            return None
        try:
            out[c] = None if doc[c] is None else converter(types[c])(doc[c])  # (NULL: JSON null, empty CSV)
        except (BadValue, TypeError, ValueError):
            return None
    return out


def match(definition: TableDefinition, paths: TablePaths, predicate: Predicate | None = None,
          keys: pa.Table | None = None, version: int | None = None) -> RejectsMatch:
    """The rejects rows the delete erases (by ``keys`` or ``predicate``), at ``version`` (the
    latest by default), per data file."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from lakehouse.definitions import PARTITION_COLUMN

    snap = delta_log.snapshot(paths.rejects, ERASURE_APP_ID, version)
    if snap is None:
        return RejectsMatch(None)
    result = RejectsMatch(snap.version)
    actions = delta_log.add_actions(paths.rejects, snap.version)
    key = list(definition.primary_key)
    wanted = {tuple(r[k] for k in key) for r in keys.select(key).to_pylist()} if keys is not None else set()
    if keys is not None:
        needed = key
    else:
        cols = set(predicate.columns) if predicate is not None else set()
        if PARTITION_COLUMN in cols:  # the day of the event time
            cols = (cols - {PARTITION_COLUMN}) | {definition.event_time}
        needed = sorted(cols)
    headers: dict[str, tuple[list[str], int] | None] = {}
    for rel, size in zip(actions.column("path").to_pylist(), actions.column("size_bytes").to_pylist()):
        fs, where = storage.filesystem(delta_log.file_uri(paths.rejects, rel))
        t = pq.read_table(where, filesystem=fs, columns=["record", "source", "at"])
        parsed: list[tuple[int, dict[str, Any]]] = []
        for i, (record, source, at) in enumerate(zip(t.column("record").to_pylist(), t.column("source").to_pylist(),
                                                      t.column("at").to_pylist())):
            if record is None:
                continue  # a file rejected whole: no row of the table in it
            doc = parse_record(record, source, headers, at)
            values = None if doc is None else typed(definition, doc, needed)
            if values is None:
                result.unmatched += 1
                continue
            parsed.append((i, values))
        hits: list[int] = []
        if keys is not None:
            hits = [i for i, v in parsed if tuple(v[k] for k in key) in wanted]
        elif predicate is not None and parsed:
            schema = pa.schema([(c.name, c.type.arrow()) for c in definition.columns])
            rows = pa.Table.from_pylist([{c: v.get(c) for c in schema.names} for _, v in parsed], schema=schema)
            mask = matches(definition, predicate, rows).to_pylist()
            hits = [i for (i, _), m in zip(parsed, mask) if m]
        if hits:
            result.files[rel] = (int(size or 0), hits)
    return result


def erase_matching(definition: TableDefinition, paths: TablePaths, number: int, predicate: Predicate | None = None,
                   keys: pa.Table | None = None, attempts: int = 5) -> tuple[int, int]:
    """Match and erase (``match``, ``erase``) at the latest version, matching again when rejects
    were appended in between; (rows erased, records unmatched)."""
    for attempt in range(attempts):
        found = match(definition, paths, predicate, keys)
        try:
            return erase(paths, found, number)
        except delta_log.StaleVersion:
            if attempt == attempts - 1:
                raise
    raise AssertionError("unreachable")


METADATA_KEY = "lakehouse.erasure"
"""The key of an erasure's figures in its rejects commit's ``userMetadata``: number, rows, unmatched."""


def erase(paths: TablePaths, found: RejectsMatch, number: int) -> tuple[int, int]:
    """Commit the rejects without the rows ``found`` holds (one commit, SetTransaction
    (``lakehouse.erasure``, ``number``), its figures in ``userMetadata``; nothing when nothing
    matched): (rows erased, records unmatched). When the table holds the erasure already,
    nothing is done and its commit's figures are returned."""
    import json

    import pyarrow as pa
    import pyarrow.parquet as pq

    from lakehouse.archive.stats import FileStats

    if (delta_log.txn_version(paths.rejects, ERASURE_APP_ID) or 0) >= number:
        info = delta_log.txn_commit_info(paths.rejects, ERASURE_APP_ID, number) or {}
        try:
            doc = json.loads(info.get("userMetadata") or "{}").get(METADATA_KEY) or {}
            return int(doc.get("rows") or 0), int(doc.get("unmatched") or 0)
        except (ValueError, AttributeError, TypeError):
            return 0, 0
    if not found.files or found.version is None:
        return 0, found.unmatched
    removed: list[tuple[str, int, dict[str, str | None] | None]] = []
    added: list[delta_log.NewFile] = []
    for rel, (size, rows) in sorted(found.files.items()):
        fs, where = storage.filesystem(delta_log.file_uri(paths.rejects, rel))
        t = pq.read_table(where, filesystem=fs)
        drop = set(rows)
        keep = t.filter(pa.array([i not in drop for i in range(t.num_rows)]))
        removed.append((rel, size, None))
        if keep.num_rows:
            name = f"part-erased-{int(number)}-{uuid.uuid4().hex}.snappy.parquet"
            target = join(paths.rejects, name)
            with storage.open_write(target) as out:
                pq.write_table(keep, out, compression="snappy")
            stats = FileStats({f.name: f.type for f in keep.schema})
            stats.add(keep)
            added.append(delta_log.NewFile(name, storage.size(target), {}, stats.json(), int(time.time() * 1000)))
    figures = {"number": int(number), "rows": found.rows, "unmatched": found.unmatched}
    delta_log.rewrite_files(paths.rejects, found.version, removed, added, txn=(ERASURE_APP_ID, int(number)),
                            user_metadata=json.dumps({METADATA_KEY: figures}, separators=(",", ":")))
    return found.rows, found.unmatched
