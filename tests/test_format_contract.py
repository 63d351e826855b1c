"""The output contract of every command (issue 25): each command of the CLI, run with
``--format text``, ``json`` and ``csv`` on one small real project, prints what it promises or
refuses the format by name:

- json: stdout is exactly one JSON document;
- csv: stdout parses with the csv module into a header row and rows as wide as it;
- text: exit 0, no Python reprs (``None``, ``{'k': ...}``, ``['x']``) and no epoch cutoff
  without its instant beside it;
- a refused format: exit 2 before the command does anything, stderr naming the format.

The command tree is read from ``lakehouse.cli.cli``: a command added without a run here fails
``test_every_command_is_covered``. The commands run in this process (``cli_in_process``) on the
shared SparkSession, on one project built once for the module.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click
import pytest

from tests.conftest import CLICKS, TRIPS_SMALL, Project, cli_in_process

pytestmark = pytest.mark.spark

FORMATS = ("text", "json", "csv")
NOW = "2026-01-13T00:00:00Z"
"""The clock of the module's archiving (trips: delay 24h, so the cutoff is 2026-01-12)."""
LATER = "2026-01-14T06:00:00Z"
"""A clock at which the jobs of trips are due again."""
DAY = "2026-01-10"
"""An archived day of trips."""
INGEST = """
ingest:
  pattern: '^trips_.*\\.csv$'
  sort_field: TIME_IN_FILENAME
  filename_time: {regex: 'trips_(\\d{8}T\\d{4})', format: '%Y%m%dT%H%M'}
"""

RUNS: dict[str, list[list[str]]] = {
    "migrate": [["migrate"], ["migrate", "--status"], ["migrate", "--dry-run"]],
    "tables": [["tables"]],
    "load": [["load", "trips", "{data}/trips.csv"]],  # loaded by the fixture: skipped, a real run all the same
    "ingest": [["ingest", "trips", "--source", "{data}/landing", "--drain"],
               ["ingest", "trips", "--source", "{data}/landing", "--dry-run"]],
    "ingest-log": [["ingest-log", "trips"]],
    "rejects": [["rejects", "trips"], ["rejects", "clicks"]],
    "query": [["query", "SELECT trip_id, event_time, fare_local FROM trips ORDER BY trip_id"],
              ["query", "SELECT count(*) AS n FROM clicks", "--engine", "duckdb"]],
    "archive": [["archive", "trips", "--now", NOW], ["archive", "trips", "--now", NOW, "--dry-run"],
                ["archive", "clicks", "--dry-run"]],
    "vectors": [["vectors", "trips", "--day", DAY, "--column", "city_id"],
                ["vectors", "trips", "--day", DAY, "--column", "fare_total"]],
    "lookup": [["lookup", "trips", "--day", DAY, "--where", "city_id=1"]],
    "optimize": [["optimize", "trips"], ["optimize", "trips", "--dry-run"]],
    "vacuum": [["vacuum", "trips"]],
    "delete": [["delete", "trips", "--where", "city_id = 99", "--dry-run"],
               ["delete", "trips", "--where", "city_id = 98 AND fare_total > 1000"], ["delete", "--history"]],
    "jobs run": [["jobs", "run", "--table", "trips", "--now", NOW, "--dry-run"],
                 ["jobs", "run", "--now", LATER, "--dry-run"]],
    "jobs serve": [["jobs", "serve", "--table", "clicks"]],  # stopped by SIGTERM once serving (serve_briefly)
    "jobs history": [["jobs", "history"]],
    "producer attach": [["producer", "clicks", "{producer}", "attach", "--bound", "2026-01-12T09:00:00Z"]],
    "producer insert": [["producer", "clicks", "{producer}", "insert", "{data}/clicks.csv"]],
    "producer bound": [["producer", "clicks", "{producer}", "bound", "2026-01-12T11:00:00Z"]],
    "producer heartbeat": [["producer", "clicks", "{producer}", "heartbeat"]],
    "producer detach": [["producer", "clicks", "{producer}", "detach"]],
    "stream": [["stream", "clicks"], ["stream", "clicks", "--events"], ["stream", "trips"]],
    "verify": [["verify", "trips"]],
    "check": [["check", "trips", "--no-docs"], ["check", "trips", "--history"]],
    "lateness": [["lateness", "trips"]],
    "server status": [["server", "status"]],
    "server stop": [["server", "stop"]],  # none runs: "not running"
}
"""Each command of the CLI by its path, with the arguments of cheap real runs on the module's
project (``{data}``: its input files; ``{producer}``: a producer of its own for each format)."""

REFUSED = {"demo": ("json", "csv"), "jobs serve": ("json", "csv")}
"""Commands that refuse formats by name: the demo is a narrative for people; ``jobs serve`` logs
its rounds on stderr until it is stopped (``jobs history`` is the record)."""

EXEMPT = {
    "demo": "a text run is the whole end-to-end demo (minutes); its json and csv are refused (checked)",
    "bench archive": "even the smallest run takes tens of seconds",
    "bench backfill": "even the smallest run takes tens of seconds",
    "bench ingest": "even the smallest run takes tens of seconds (a fixed warm-up of 6,000 rows)",
    "bench stream": "even the smallest run takes tens of seconds",
    "bench compact": "even the smallest run takes tens of seconds",
    "bench incremental": "even the smallest run takes tens of seconds; tests/test_bench_runs.py runs it in process",
    "bench delete": "even the smallest run takes tens of seconds; tests/test_bench_runs.py runs it in process",
    "bench memory": "starts two JVMs of its own; tests/test_bench_runs.py runs it in process",
    "bench query": "even the smallest run takes tens of seconds; tests/test_bench_runs.py runs it in process",
    "bench groups": "even the smallest run archives and scans on two engines; tests/test_bench_runs.py runs it in process",
    "bench open": "even the smallest run (--commits 14 --rounds 1) takes 25 seconds",
    "bench age": "even the smallest run archives two layouts; tests/test_bench_runs.py runs it, in csv too",
    "bench cli": "starts a server and runs the tour in a scratch project; tests/test_bench_cli.py runs it and parses its JSON",
    "server start": "starts a long-lived Spark Connect server (a JVM); tests/test_server.py starts one and parses its JSON",
}
"""Commands not run for real here, and why. Each still shows that it accepts every format or
refuses it by name (``test_exempt_commands_take_every_format``); every bench prints its figures
through the one ``emit_fields``, whose three forms ``test_bench_figures_in_every_format`` parses."""


def command_paths(group: click.Group, prefix: str = "") -> Iterator[str]:
    """The path of every command under ``group`` (``jobs run``), groups descended into."""
    for name, command in group.commands.items():
        path = f"{prefix}{name}"
        if isinstance(command, click.Group):
            yield from command_paths(command, f"{path} ")
        else:
            yield path


def test_every_command_is_covered():
    from lakehouse.cli import cli

    paths = set(command_paths(cli))
    assert paths == set(RUNS) | set(EXEMPT), (
        f"commands without a run in RUNS or a reason in EXEMPT: {sorted(paths - set(RUNS) - set(EXEMPT))}; "
        f"gone: {sorted(set(RUNS) | set(EXEMPT) - paths)}")
    assert not set(RUNS) & set(EXEMPT)


@pytest.fixture(scope="module")
def proj(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Project:
    """trips (loaded, one bad row rejected, archived at NOW, its jobs run once) and clicks (a
    stream table with a producer's rows) ."""
    p = Project(tmp_path_factory.mktemp("formats") / "proj")
    p.table(TRIPS_SMALL + INGEST).table(CLICKS).create("trips", "clicks")
    p.csv("trips.csv", ["trip_id", "city_id", "status", "fx_rate", "fare_total", "fare_local", "event_time"], [
        ["a", 1, 2, 1.0, 10.5, "10.50", "2026-01-10T10:15:00.123456Z"],
        ["b", 1, 2, 1.0, "oops", "1.00", "2026-01-10T11:00:00Z"],
        ["c", 5, 2, 0.92, 7.25, "7.25", "2026-01-11T00:00:00.25Z"],
        ["d", 5, 3, None, 3.0, "3.00", "2026-01-11T01:00:00Z"],
    ])
    p.csv("clicks.csv", ["user_id", "url", "at"], [[1, "/a", "2026-01-12T10:00:00Z"], [2, "/b", "2026-01-12T10:30:00Z"]])
    landing = p.root / "data" / "landing"
    landing.mkdir()
    (landing / "trips_20260112T1000.csv").write_text("trip_id,city_id,status,event_time\ni1,1,2,2026-01-12T10:00:00Z\n")
    p.lh.load("trips", [str(p.root / "data" / "trips.csv")])
    from lakehouse.records import parse_timestamp

    outcomes = p.lh.jobs_run("trips", now=parse_timestamp(NOW))
    assert all(o.as_dict()["outcome"] in (None, "succeeded") for o in outcomes), [o.as_dict() for o in outcomes]
    return p


def invocations() -> Iterator[Any]:
    for path, runs in RUNS.items():
        for args in runs:
            for fmt in FORMATS:
                yield pytest.param(path, args, fmt, id=f"{' '.join(args)}-{fmt}")


def serve_briefly(p: Project, *args: str) -> Any:
    """``jobs serve`` in this process, sent SIGTERM once it serves (its own handler installed): it
    finishes the running job and exits 0. Until the test has restored the previous handler, a
    SIGTERM meets a harmless one; none is sent after the command returned."""
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: None)
    harmless = signal.getsignal(signal.SIGTERM)
    done = threading.Event()

    def stop() -> None:
        deadline = time.monotonic() + 120
        while not done.wait(0.05):
            if signal.getsignal(signal.SIGTERM) is not harmless:
                os.kill(os.getpid(), signal.SIGTERM)
                return
            if time.monotonic() > deadline:  # serving without its handler: interrupt it (exit 1, the test fails)
                os.kill(os.getpid(), signal.SIGINT)
                return

    stopper = threading.Thread(target=stop, daemon=True)
    stopper.start()
    try:
        return cli_in_process(p, *args)
    finally:
        done.set()
        stopper.join()
        signal.signal(signal.SIGTERM, previous)


def run(p: Project, path: str, args: list[str], fmt: str, *, root_option: bool = False) -> Any:
    """One invocation: the format as the command's option, or before the command (the root group's)."""
    args = [a.format(data=p.root / "data", producer=f"p-{fmt}") for a in args]
    if path.startswith("producer") and path != "producer attach":  # each format's own producer, attached
        attach = cli_in_process(p, "producer", "clicks", f"p-{fmt}", "attach")
        assert attach.returncode == 0, attach.stderr
    argv = ["--format", fmt, *args] if root_option else [*args, "--format", fmt]
    if path == "jobs serve":  # also when refused: a server that failed to refuse is stopped, not waited for
        return serve_briefly(p, *argv)
    return cli_in_process(p, *argv)


EPOCH = re.compile(r"(?<![\w/.-])1\d{9}(?![\w.])(?! \(\d{4}-\d\d-\d\dT)")
"""Epoch seconds (2001..2286) in text without their instant beside them."""
REPR = re.compile(r"\bNone\b|\{'|\['|\bTrue\b|\bFalse\b|datetime\.|Decimal\(")
"""What a Python repr looks like in text output."""


def covers(header: list[str], doc: Any) -> bool:
    """Whether a CSV header carries every field of the JSON document ``doc`` (a field ``f`` as
    column ``f`` or as columns ``f.<inner>``; of a list, every field of its records)."""
    docs = doc if isinstance(doc, list) else [doc]
    return all(any(h == k or h.startswith(f"{k}.") for h in header) for d in docs for k in d)


def check_output(path: str, fmt: str, r: Any, doc: Any = None) -> None:
    """The format contract for one result (a CSV also against ``doc``, the command's JSON)."""
    where = f"{path} --format {fmt}: exit {r.returncode}\nstdout: {r.stdout}\nstderr: {r.stderr}"
    if fmt in REFUSED.get(path, ()):
        assert r.returncode == 2 and r.stdout == "", where
        assert f"--format {fmt} is not available for '{path}'" in r.stderr, where
        return
    assert r.returncode == 0, where
    if fmt == "json":
        json.loads(r.stdout)  # exactly one document: trailing text is an error
    elif fmt == "csv":
        rows = list(csv.reader(io.StringIO(r.stdout)))
        assert rows and rows[0] and all(rows[0]), where
        assert len(set(rows[0])) == len(rows[0]), where
        assert all(len(row) == len(rows[0]) for row in rows), where
        assert doc is None or covers(rows[0], doc), f"{where}\nthe JSON document: {doc}"
    else:
        assert not REPR.search(r.stdout), where
        assert not EPOCH.search(r.stdout), where


@pytest.mark.parametrize("path, args, fmt", list(invocations()))
def test_every_format(proj: Project, path: str, args: list[str], fmt: str) -> None:
    r = run(proj, path, args, fmt)
    if fmt == "json" and r.returncode == 0:
        SEEN_JSON[path, tuple(args)] = r.stdout
    doc = None
    if fmt == "csv" and fmt not in REFUSED.get(path, ()):  # the JSON of the same run (json runs first)
        seen = SEEN_JSON.get((path, tuple(args))) or run(proj, path, args, "json").stdout
        doc = json.loads(seen)
    check_output(path, fmt, r, doc)


SEEN_JSON: dict[tuple[str, tuple[str, ...]], str] = {}
"""The JSON each invocation printed, for its CSV's check."""


@pytest.mark.parametrize("path", sorted(REFUSED))
@pytest.mark.parametrize("fmt", ["json", "csv"])
def test_a_refused_format_is_refused_also_before_the_command(proj: Project, path: str, fmt: str) -> None:
    """``lakehouse --format csv demo``: the root group's format, refused the same way."""
    r = run(proj, path, path.split(), fmt, root_option=True)
    check_output(path, fmt, r)


@pytest.mark.parametrize("path", sorted(EXEMPT))
@pytest.mark.parametrize("fmt", FORMATS)
def test_exempt_commands_take_every_format(tmp_path: Path, path: str, fmt: str) -> None:
    """An exempt command, given the format then a bad value (``--rows nope``; ``--days nope`` for the
    demo), fails on the bad value: the format itself was accepted, or it is refused by name."""
    bad = {"demo": "--days", "bench ingest": "--small-rows", "bench open": "--commits",
           "server start": "--port"}.get(path, "--rows")
    for root_option in (False, True):
        argv = ["--format", fmt, *path.split()] if root_option else [*path.split(), "--format", fmt]
        r = cli_in_process(tmp_path, *argv, bad, "nope")
        assert r.returncode == 2 and r.stdout == "", r
        if fmt in REFUSED.get(path, ()):
            assert f"--format {fmt} is not available for '{path}'" in r.stderr, r.stderr
        else:
            assert f"'{bad}'" in r.stderr and "--format" not in r.stderr, r.stderr


def test_csv_rules(proj: Project) -> None:
    """The CSV of a document holding a table keeps the document's own fields (``stream``'s bound,
    watermark and staged count); a single document is one row, nested fields as ``outer.inner``."""
    r = cli_in_process(proj, "stream", "clicks", "--format", "csv")
    doc = json.loads(cli_in_process(proj, "stream", "clicks", "--format", "json").stdout)
    rows = list(csv.DictReader(io.StringIO(r.stdout)))
    assert rows and {"bound", "watermark", "staged", "producers.name", "producers.bound"} <= set(rows[0])
    assert all((row["bound"], row["watermark"], row["staged"]) == (doc["bound"] or "", doc["watermark"] or "",
                                                                    str(doc["staged"])) for row in rows)
    assert sorted(row["producers.name"] for row in rows) == sorted(p["name"] for p in doc["producers"])
    r = cli_in_process(proj, "optimize", "trips", "--dry-run", "--format", "csv")
    (row,) = list(csv.DictReader(io.StringIO(r.stdout)))
    assert {"table", "live.files_before", "archive.files_before"} <= set(row)
    r = cli_in_process(proj, "vectors", "trips", "--day", DAY, "--column", "city_id", "--format", "csv")
    rows = list(csv.DictReader(io.StringIO(r.stdout)))
    assert list(rows[0]) == ["file", "cutoff", "runs.value", "runs.null", "runs.count", "runs.accumulative_count"]


def test_bench_figures_in_every_format() -> None:
    """The output path of every ``bench`` command (``emit_fields``) on figures shaped like theirs:
    groups within groups, lists, nulls, fractions."""
    from click.testing import CliRunner

    from lakehouse.cli.output import emit_fields

    figures = {"master": "local[2]", "rows": 520, "cutoff": 1768176000, "generate": {"seconds": 0.25, "days": []},
               "ledger": {"rows": 3, "merge_run": {"seconds": 1.5, "ratio": None, "days": ["2026-01-10"]}}}

    @click.command()
    @click.option("--format", "fmt")
    def figures_cmd(fmt: str) -> None:
        emit_fields(fmt, figures)

    for fmt in FORMATS:
        r = CliRunner().invoke(figures_cmd, ["--format", fmt])
        r = type("R", (), {"returncode": r.exit_code, "stdout": r.stdout, "stderr": r.stderr})()
        check_output("bench", fmt, r)
    text = CliRunner().invoke(figures_cmd, ["--format", "text"]).stdout
    assert "    ratio" in text and "1768176000 (2026-01-12T00:00:00Z)" in text, text
    row = next(csv.DictReader(io.StringIO(CliRunner().invoke(figures_cmd, ["--format", "csv"]).stdout)))
    assert row["ledger.merge_run.days"] == '["2026-01-10"]' and row["ledger.merge_run.ratio"] == "", row
