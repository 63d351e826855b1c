"""The loads ledger: when rows entered live, and from which producer (``lakehouse lateness``).

Live rows carry only their load id (``_lh_load``: the insert, i.e. a load or ingest batch or a
producer's insert); the time they were loaded is recorded here, in ``<table>/_stream/loads.jsonl``,
one JSON line per release of the stream (THE only path into live)::

    {"release": 7, "at": <micros>, "loads": [{"load": "load-00000003", "producer": "load",
                                              "after": <micros|null>, "upto": <micros>, "rows": 1000}],
     "watermark": <micros|null>}

A release commits, per insert, the staged rows with ``after < event time <= upto``; a row of live
or the archive with load id L and event time t was therefore loaded by the one release whose
entry for L has ``after < t <= upto``, at ``at``: the wall clock just before the release's
commit into live (not a producer's injected ``--now``, so that it compares with the archive's
commit times, which are wall clock too).

Why a ledger and not a hidden column: a column would change the schema of every existing live
and archive table (a migration, the drift checks, the archive's rewrite and sort order) for a
value that is the same for all rows of a release; one line per release costs nothing on the
write path. Soundness: the line is written (appended, fsync) before the release's commit, and a
reader takes only releases live has committed (the stream's SetTransaction version), the last
line of a release winning: a release re-committed after a crash writes its line again. Rows
loaded before the ledger existed have no load time and are counted as such.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from lakehouse.storage import join, lines
from lakehouse.warehouse import TablePaths

if TYPE_CHECKING:
    import pyarrow as pa

LEDGER_FILE = "loads.jsonl"
APP_ID = "lakehouse.stream"
"""The SetTransaction app id of release commits into live (version: the release number)."""


def ledger_path(paths: TablePaths) -> str:
    """``<warehouse>/<table>/_stream/loads.jsonl``."""
    return join(paths.root, "_stream", LEDGER_FILE)


def record(paths: TablePaths, release: int, at: int, loads: list[dict[str, Any]], watermark: int | None = None) -> None:
    """Append a release's line (before its commit into live): ``loads`` holds one
    ``{load, producer, after, upto, rows}`` per insert the release takes rows of; ``watermark``:
    the table's watermark once the release is in (micros; the change feed shows it)."""
    lines.append_json_lines(ledger_path(paths), [{"release": int(release), "at": int(at), "loads": loads,
                                                  "watermark": watermark}])


def last_committed(paths: TablePaths) -> int:
    """The last release live has committed (the stream's SetTransaction version; 0: none)."""
    from lakehouse import delta_log

    return delta_log.txn_version(paths.live, APP_ID) or 0


def releases(paths: TablePaths, committed: int | None = None) -> dict[int, dict[str, Any]]:
    """The recorded releases live has committed (release number -> line; the last line of a
    number wins). ``committed``: the stream's SetTransaction version in live (read when None)."""
    committed = last_committed(paths) if committed is None else committed
    out: dict[int, dict[str, Any]] = {}
    for doc in lines.read_json_lines(ledger_path(paths)):
        try:
            n = int(doc["release"])
        except (KeyError, TypeError, ValueError):
            continue
        if n <= committed:
            out[n] = doc
    return out


SCHEMA_FIELDS = (("load", "string"), ("producer", "string"), ("after", "int64"), ("upto", "int64"),
                 ("loaded_at", "int64"), ("release", "int64"), ("rows", "int64"))


def read(paths: TablePaths, committed: int | None = None) -> "pa.Table":
    """One row per (release, load): load, producer, after, upto (event-time micros), loaded_at
    (micros) and release, of the committed releases."""
    import pyarrow as pa

    rows = [{"load": e.get("load"), "producer": e.get("producer"), "after": e.get("after"), "upto": e.get("upto"),
             "loaded_at": doc["at"], "release": n, "rows": e.get("rows")}
            for n, doc in sorted(releases(paths, committed).items()) for e in doc.get("loads", [])]
    schema = pa.schema([(name, getattr(pa, kind)()) for name, kind in SCHEMA_FIELDS])
    return pa.Table.from_pylist(rows, schema=schema)
