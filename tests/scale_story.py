"""One story of lakehouse commands, told on any warehouse: the s3 tests tell it on the S3 server
and on a local warehouse and compare every answer (``--format json``), byte for byte once what
differs by nature (the places, the instants) is blanked.

``python -m tests.scale_story --project P --warehouse W --data D --inputs I --landing L`` runs the
story in this process (one Spark, made by the first command that needs one) and prints a JSON
list: per command its arguments, exit code, and output (a JSON document, or the text).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

SQL = ("SELECT city_id, status, count(*) AS trips, sum(fare_local) AS fares, min(event_time) AS first "
       "FROM trips GROUP BY city_id, status ORDER BY city_id, status")
PINGS_SQL = "SELECT gateway, count(*) AS n, max(event_time) AS last FROM driver_pings GROUP BY gateway ORDER BY gateway"
END = dt.date(2026, 11, 20)
"""The last day of the story's data."""
LOADED = "trips_20261118T0000.csv"
"""Loaded from this machine."""
IN_STORE = "trips_20261119T0000.csv"
"""Loaded from where the data is kept (``--inputs``: a bucket, or a local folder)."""
LANDED = ("trips_20261120T0000.csv", "trips_20261120T2300_updates.jsonl", "trips_20261120T2330_requests.parquet")
"""Ingested from the landing directory (a prefix in a bucket, or a local folder)."""
RUNNING_CLOCK = ("cutoff", "previous_cutoff", "next_due", "files_before", "files_after")
"""Keys blanked in the output of ``jobs run --now``: its clock starts at --now and runs on in real
time, so a cutoff it computes differs by the seconds the jobs before took; and a vacuum's file
counts are of everything under the table's folder (Delta's log, and the checksum files a local
disk has and a bucket has not). ``optimize`` and ``vacuum`` before it count the data files."""
BLANKED = ("applied_at", "at", "lease_until", "lease_expires", "attached_at", "seconds", "started", "finished",
           "duration_s", "elapsed_s", "timings", "data_docs", "run_id", "ran_at", "checked_at",
           "table_bytes_before", "table_bytes_after", "bytes_before", "bytes_after")
"""Keys whose values differ between two tellings by nature: instants, durations, and the compressed
size of data files (rows carry their load's id, which holds the hash of the landing directory's
path: another path compresses a byte or two apart). Row and file counts are compared."""


def make_data(folder: Path) -> dict[str, Path]:
    """The story's input files (the demo's trips, and pings of two gateways), by name."""
    from lakehouse.demo import generate

    files = {p.name: p for p in generate(folder, rows=3000, days=3, end=END).files}
    for gateway, driver in (("gw-eu", 1), ("gw-us", 2)):
        lines = ["driver_id,city_id,lat,lon,speed_kmh,gateway,event_time"]
        start = dt.datetime(2026, 11, 20, 10, tzinfo=dt.timezone.utc)
        for m in range(30):
            t = start + dt.timedelta(minutes=m)
            lines.append(f"{driver * 100 + m % 7},{driver},48.{m},2.{m},{30 + m},{gateway},{t:%Y-%m-%dT%H:%M:%SZ}")
        path = folder / f"pings_{gateway}.csv"
        path.write_text("\n".join(lines) + "\n")
        files[path.name] = path
    return files


def story(data: str, inputs: str, landing: str) -> Iterator[list[str]]:
    """The commands, in order (``data``: this machine's folder of the files; ``inputs`` and
    ``landing``: where the other files were put)."""
    yield ["migrate"]
    yield ["load", "trips", f"{data}/{LOADED}", f"{inputs}/{IN_STORE}"]
    yield ["load", "trips", f"{data}/{LOADED}"]  # the same content again: skipped
    yield ["ingest", "trips", "--source", landing, "--drain"]
    yield ["ingest-log", "trips"]
    yield ["query", SQL, "--engine", "duckdb"]
    for gateway in ("gw-eu", "gw-us"):
        yield ["producer", "driver_pings", gateway, "attach"]
    for gateway in ("gw-eu", "gw-us"):
        yield ["producer", "driver_pings", gateway, "insert", f"{data}/pings_{gateway}.csv"]
    for gateway in ("gw-eu", "gw-us"):
        yield ["producer", "driver_pings", gateway, "detach"]
    yield ["stream", "driver_pings"]
    yield ["query", PINGS_SQL, "--engine", "duckdb"]
    yield ["archive", "trips", "--now", "2026-11-20T12:00:00Z"]
    yield ["archive", "trips", "--now", "2026-11-22T00:00:00Z"]
    yield ["query", SQL, "--engine", "duckdb"]
    yield ["query", SQL]
    yield ["query", SQL, "--engine", "duckdb", "--as-of", "1"]
    yield ["rejects", "trips"]
    yield ["vectors", "trips", "--day", "2026-11-19", "--column", "city_id"]
    yield ["optimize", "trips"]
    yield ["vacuum", "trips"]
    yield ["query", SQL, "--engine", "duckdb"]
    # (verify on S3: tests/test_s3.py's kills of archive end with it)
    yield ["check", "trips", "--no-docs"]  # (Data Docs: a local folder, GE's file project, per warehouse)
    yield ["tables"]
    yield ["jobs", "run", "--now", "2026-11-22T01:00:00Z"]  # last: its clock runs on from --now (below)


def blank(doc: Any, places: dict[str, str], keys: tuple[str, ...] = BLANKED) -> Any:
    """A command's output with the places replaced by their names and ``keys`` blanked."""
    if isinstance(doc, dict):
        return {k: "<blank>" if k in keys else blank(v, places, keys) for k, v in doc.items()}
    if isinstance(doc, list):
        return [blank(v, places, keys) for v in doc]
    if isinstance(doc, str):
        for value, name in sorted(places.items(), key=lambda kv: -len(kv[0])):
            doc = doc.replace(value, name)
        return doc
    return doc


def tell(invoke: Callable[[list[str]], tuple[int, str, str]], data: str, inputs: str, landing: str,
         places: dict[str, str]) -> list[dict[str, Any]]:
    """Run the story through ``invoke`` (args -> exit code, stdout, stderr); the outputs, blanked."""
    from lakehouse.ingest.state import source_key

    places = {**places, source_key(landing): "<landing-key>"}  # its state's and its loads' names
    told = []
    for args in story(data, inputs, landing):
        started = time.monotonic()
        code, out, err = invoke(args)
        took = round(time.monotonic() - started, 1)
        try:
            doc: Any = json.loads(out)
        except ValueError:
            doc = out
        keys = BLANKED + RUNNING_CLOCK if args[:2] == ["jobs", "run"] else BLANKED
        told.append({"args": blank(args, places), "code": code, "out": blank(doc, places, keys), "seconds": took,
                     "err": err[-1500:] if code else ""})
    return told


def main() -> None:
    parser = argparse.ArgumentParser()
    for opt in ("--project", "--warehouse", "--data", "--inputs", "--landing"):
        parser.add_argument(opt, required=True)
    a = parser.parse_args()
    from click.testing import CliRunner

    from lakehouse.cli import cli

    def invoke(args: list[str]) -> tuple[int, str, str]:
        r = CliRunner().invoke(cli, ["--project", a.project, "--warehouse", a.warehouse, "--format", "json", *args],
                               prog_name="lakehouse")
        err = r.stderr
        if r.exception is not None and not isinstance(r.exception, SystemExit):
            import traceback

            err += "".join(traceback.format_exception(r.exception))
        return r.exit_code, r.stdout, err

    places = {a.warehouse: "<warehouse>", a.data: "<data>", a.inputs: "<inputs>", a.landing: "<landing>"}
    json.dump(tell(invoke, a.data, a.inputs, a.landing, places), sys.stdout)
    sys.stdout.flush()
    os._exit(0)  # no JVM shutdown to wait for


if __name__ == "__main__":
    main()
