"""The notebooks of notebooks/ run top to bottom on a fresh warehouse, and print what they should.

Every ``notebooks/*.ipynb`` is executed (a new notebook is picked up by the glob) in a kernel of
the running venv (tests/notebook_runner.py): a copy of it in a temporary working folder, with
TMPDIR there too, so the project each notebook makes with ``tempfile.mkdtemp`` is cleaned up with
the test. A cell that raises fails the test with its source and error. Then the values the
cells printed are checked: per notebook, the relations in CHECKS below (a notebook without an
entry is only run), and every code cell's printed output against the committed notebook's, with
what varies run to run masked by the rule of ``notebook_runner.mask`` (durations, paths, today's
timestamps, ids). ``make notebooks`` re-executes them in place for their committed outputs.
"""

from __future__ import annotations

import difflib
import re
import shutil
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import suite_server
from tests.notebook_runner import NOTEBOOKS, CellFailed, Run, execute, mask, printed

PATHS = sorted(NOTEBOOKS.glob("*.ipynb"))


def grab(text: str, pattern: str) -> tuple[str, ...]:
    """The groups of the first match of ``pattern`` in what the notebook printed."""
    m = re.search(pattern, text)
    assert m, f"the notebook did not print a line matching {pattern!r}; it printed:\n{text}"
    return m.groups()


def num(text: str, pattern: str) -> int:
    (value,) = grab(text, pattern)
    return int(value)


def check_quickstart(text: str, run: Run) -> None:
    assert grab(text, r"migrations applied: (\S+)") == ("0001_create_trips",)
    rows_in, loaded, rejected = map(int, grab(text, r"input rows (\d+) = loaded (\d+) \+ rejected (\d+): True"))
    assert rows_in == loaded + rejected and loaded > 0 and rejected > 0
    assert num(text, r"rows loaded: (\d+)") == loaded
    assert num(text, r"rows rejected: (\d+)") == rejected
    assert grab(text, r"days archived: (.*)") == ("2026-03-01, 2026-03-02",)
    archived = num(text, r"rows archived: (\d+)")
    live_before, live_after, archive = map(int, grab(text, r"live (\d+) = live (\d+) \+ archive (\d+): True"))
    assert archived == archive > 0 and live_before == live_after + archive and live_after > 0
    before = num(text, r"rows before archiving: (\d+)")
    assert before == live_before == num(text, r"rows after archiving: (\d+)")
    assert num(text, r"split view by hand on DuckDB: (\d+) rows") == before
    grab(text, r"engines agree: (True)")
    checks = num(text, r"verify: (\d+) checks, 0 failed")
    assert checks >= 10 and "FAIL" not in text


def check_archive_internals(text: str, run: Run) -> None:
    loaded = re.findall(r"(\w+): (\d+) input rows: (\d+) loaded, (\d+) rejected; rows archived: (\d+)", text)
    assert [t for t, *_ in loaded] == ["trips", "trips_by_driver"]
    assert len({tuple(rest) for _, *rest in loaded}) == 1  # the same rows in both tables
    assert num(text, r"city_id runs: (\d+)") == 5
    grab(text, r"every city_id run end is a status run end: (True)")
    grab(text, r"every status run end is a driver_id run end: (True)")
    grab(text, r"vector files decode to the day's rows: (True)")
    by_hand = tuple(map(int, grab(text, r"lookup by hand: \[(\d+), (\d+)\) = (\d+) records")))
    api = tuple(map(int, grab(text, r"lh\.lookup: \[(\d+), (\d+)\) = (\d+) records")))
    assert by_hand == api and api[2] == api[1] - api[0] > 0
    assert num(text, r"SQL count on spark: (\d+)") == num(text, r"SQL count on duckdb: (\d+)") == api[2]
    parquet, vector, raw = (num(text, rf"{w} bytes: (\d+)") for w in ("parquet", "vector file", "raw arrow"))
    assert 0 < parquet < vector < raw * 1.1
    city = grab(text, r"trips: runs city_id=(\d+), status=(\d+), driver_id=(\d+) \(total (\d+)\); "
                      r"sort-column vector bytes (\d+)")
    driver = grab(text, r"trips_by_driver: runs driver_id=(\d+), status=(\d+), city_id=(\d+) \(total (\d+)\); "
                        r"sort-column vector bytes (\d+)")
    c, d = list(map(int, city)), list(map(int, driver))
    assert c[2] == d[2]  # the last sort column: one run per distinct combination, in either order
    assert c[3] < d[3] and c[4] < d[4]  # low cardinality first: fewer runs, smaller vector files
    assert run.images() >= 2


def check_operations(text: str, run: Run) -> None:
    assert grab(text, r"migrations applied: (\S+)") == ("0001_create_tables",)
    # producers: gateway-us holds the watermark, so gateway-eu's rows wait staged
    eu_in, eu_staged = map(int, grab(text, r"gateway-eu inserted (\d+) rows, (\d+) of them staged"))
    assert eu_in == eu_staged > 0
    staged, live = map(int, grab(text, r"after gateway-eu's insert: bound -, watermark 03-02 00:00:00, "
                                       r"staged (\d+), live (\d+)"))
    assert (staged, live) == (eu_in, 0)
    us_in = num(text, r"gateway-us inserted (\d+) rows\n")
    bound, mark, staged, live = grab(text, r"after gateway-us's insert: bound (\S+ \S+), watermark (\S+ \S+), "
                                           r"staged (\d+), live (\d+)")
    assert bound == mark and 0 < int(staged) < eu_in and int(staged) + int(live) == eu_in + us_in
    assert grab(text, r"after gateway-us's bound 06:30: .*staged (\d+)") == ("0",)
    assert grab(text, r"gateway-us inserted (\d+) rows, (\d+) late") == ("40", "1")
    assert grab(text, r"after gateway-us's heartbeat:.*\n.*gateway-eu: .*, (attached, not holding)\n.*gateway-us: .*, "
                      r"(holding)")
    eu_back, eu_late = map(int, grab(text, r"gateway-eu inserted (\d+) rows, (\d+) late"))
    assert eu_back + eu_late == 60 and eu_late > 0
    b, w, staged, live_end = grab(text, r"both detached: bound (\S+ \S+), watermark (\S+ \S+), staged (\d+), live (\d+)")
    assert b == w and staged == "0"
    eu, us, accepted, late = map(int, grab(text, r"rows accepted: gateway-eu (\d+) \+ gateway-us (\d+) = (\d+); "
                                                 r"rejected late: (\d+)"))
    assert eu == eu_in + eu_back and us == us_in + 40 and accepted == eu + us == int(live_end) and late == 1 + eu_late
    grab(text, r"live rows \d+ = accepted \d+: (True)")
    events = dict((k, int(n)) for k, n in re.findall(r"(\w+) (\d+)", grab(text, r"events: (.*)")[0]))
    assert events["attach"] == events["detach"] == 2 and events["expiry"] == 1 and events["insert"] == 4
    # jobs: a dry run records nothing; each job once per slot
    planned = num(text, r"archive +due: True \(never ran\); watermark .* -> cutoff .*; (\d+) rows")
    assert num(text, r"attempts recorded by the dry run: (\d+)") == 0
    assert num(text, r"archive +succeeded: (\d+) rows") == planned > 0
    assert [num(text, rf"round at {t}: (\d+) jobs ran") for t in ("08:00", "08:10", "09:00")] == [4, 0, 2]
    assert grab(text, r"attempts on record: (\d+), succeeded: (\d+)") == ("6", "6")
    # quality: the negative fares fail their expectation, nothing else fails
    assert grab(text, r"checks: (\d+), failed: (\d+); report ok: (\w+)")[1:] == ("1", "False")
    assert num(text, r"expect_column_values_to_be_between\(fare_total\): ok False, unexpected (\d+)") == 3
    sent = grab(text, r"negative fares sent: \[(.*)\]")[0]
    assert sorted(re.findall(r"'trip_id': '([^']+)'", grab(text, r"sample: (.*)")[0])) == re.findall(r"'([^']+)'", sent)
    grab(text, r"data docs: warehouse/_quality/docs/index.html \(index exists: (True)\)")
    # lateness: known arrivals, the late path waits, then is archived
    assert grab(text, r"web: (\d+) rows loaded, (\d+) rejected late") == ("3000", "0")
    assert grab(text, r"mobile: (\d+) rows loaded, (\d+) rejected late") == ("3000", "4")
    waiting = tuple(map(int, grab(text, r"late path before the second run: (\d+) rows, waiting (\d+), archived (\d+)")))
    archived = tuple(map(int, grab(text, r"late path after the second run: (\d+) rows, waiting (\d+), archived (\d+)")))
    n = waiting[0]
    assert 150 < n < 450 and waiting == (n, n, 0) and archived == (n, 0, n)
    assert grab(text, r"rows: (\d+), rejected late: (\d+)") == ("6000", "4")
    covers, suggested = grab(text, r"archive.delay 2h covers ([\d.]+)% of the rows; .*suggested archive.delay (\w+) \(longer\)")
    assert 90 < float(covers) < 99 and suggested == "5h"
    assert run.images() >= 2


def check_pyspark(text: str, run: Run) -> None:
    backfill = num(text, r"backfill inserted (\d+) rows")
    assert num(text, r"archived (\d+) rows") == backfill == 400
    rows, by_query = map(int, grab(text, r"rows: (\d+) = query: (\d+)"))
    assert rows == by_query == backfill
    assert grab(text, r"views: (.*)") == ("clicks, lakehouse_watermarks",)
    assert num(text, r"duckdb: (\d+) rows") == backfill
    # the pipeline's watermark is its bound; the table's follows it; rows above it wait staged
    first = grab(text, r"after file 1: watermark (\S+), staged (\d+)")
    assert first[1] == "40"
    w2, staged2, b2 = grab(text, r"after file 2: watermark (\S+), staged (\d+), pipeline bound (\S+), attached True")
    assert w2 == b2 == "09:17" and 0 < int(staged2) < 80  # 09:17:30 = 09:19:30 less 2 minutes
    w3, b3 = grab(text, r"after file 3: watermark (\S+), staged \d+, pipeline bound (\S+), attached True")
    assert w3 == b3 == "09:37"
    late = re.findall(r"\((\d+), 'late_row', '(\S+)'\)", grab(text, r"rejects: (.*)")[0])
    assert late == [("2001", "09:36"), ("2002", "09:36"), ("2003", "09:36")]  # the bound less a minute
    assert grab(text, r"stopped: +watermark \S+, staged (\d+), .*attached (\w+)") == ("0", "False")
    releases = re.findall(r"^ +(\d+) +(backfill|clicks-pipeline) +(\d+) ", text, re.M)
    assert sum(int(n) for _, p, n in releases if p == "clicks-pipeline") == 120  # every row once, less the late
    assert [r for r, _, _ in releases] == [str(i) for i in range(1, len(releases) + 1)]
    grab(text, r"hourly counts from the feed = a batch query over the split view: (True)")


CHECKS: dict[str, Callable[[str, Run], None]] = {
    "04_pyspark": check_pyspark,
    "01_quickstart": check_quickstart,
    "02_archive_internals": check_archive_internals,
    "03_operations": check_operations,
}


@pytest.fixture(scope="module")
def executed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Every notebook started at once, each in its own kernel (most of a notebook's time is its
    kernel's start and small jobs waiting on each other): name -> (tmp dir, future). The kernels
    reach Spark through the suite's server, as a user's notebook does once ``lakehouse server
    start`` ran (no JVM of their own); ``make notebooks`` runs them on Spark of their own, and
    what they print is the same either way (compared with the committed outputs below)."""
    remote = suite_server()
    pool = ThreadPoolExecutor(max_workers=len(PATHS) or 1)
    out: dict[str, Any] = {}
    for path in PATHS:
        base = tmp_path_factory.mktemp(path.stem)
        work, tmp = base / "work", base / "tmp"
        work.mkdir()
        tmp.mkdir()
        copy = work / path.name
        shutil.copy(path, copy)
        out[path.stem] = (tmp, pool.submit(execute, copy, work, tmp, remote=remote))
    yield out
    pool.shutdown(wait=True)


@pytest.mark.slow
@pytest.mark.parametrize("path", PATHS, ids=[p.stem for p in PATHS])
def test_notebook(path: Path, executed: dict[str, Any]) -> None:
    import nbformat

    committed = nbformat.read(path, as_version=4)
    assert any(c.get("outputs") for c in committed.cells if c.cell_type == "code"), \
        f"{path.name} is committed without outputs: run `make notebooks`"
    tmp, future = executed[path.stem]
    try:
        run = future.result(timeout=1200)
    except CellFailed as e:
        pytest.fail(str(e), pytrace=False)
    assert all(c.execution_count for c in run.code_cells()), "a code cell did not run"
    text = run.text()
    assert str(tmp) not in text, "a notebook printed a temporary path (print paths relative to the project)"
    check = CHECKS.get(path.stem)
    if check is not None:
        check(text, run)
    # what the committed notebook shows its reader is what the code prints today
    fresh, kept = printed(run.notebook), printed(committed)
    assert len(fresh) == len(kept), f"{path.name}: {len(kept)} code cells committed, {len(fresh)} run: `make notebooks`"
    for i, (a, b) in enumerate(zip(kept, fresh)):
        if mask(a) != mask(b):
            diff = "\n".join(difflib.unified_diff(mask(a).splitlines(), mask(b).splitlines(), "committed", "fresh run",
                                                  lineterm="", n=1))
            pytest.fail(f"{path.name}: code cell {i + 1} prints other values than its committed outputs "
                        f"(masked as tests/notebook_runner.py says); run `make notebooks`:\n{diff}", pytrace=False)


def test_every_notebook_is_collected() -> None:
    """The glob finds the notebooks, and every entry of CHECKS names one."""
    stems = {p.stem for p in PATHS}
    assert {"01_quickstart", "02_archive_internals", "03_operations", "04_pyspark"} <= stems
    assert set(CHECKS) <= stems


def test_a_print_the_kernel_sent_in_pieces_reads_as_one_line() -> None:
    import nbformat

    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("print('events:', 'attach 2')")
    cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text="events:"),
                    nbformat.v4.new_output("stream", name="stdout", text=" attach 2\n"),
                    nbformat.v4.new_output("stream", name="stderr", text="warning\n"),
                    nbformat.v4.new_output("execute_result", data={"text/plain": "3"}, execution_count=1),
                    nbformat.v4.new_output("stream", name="stdout", text="after\n")]
    nb.cells = [cell, nbformat.v4.new_code_cell("print('x')")]
    nb.cells[1].outputs = [nbformat.v4.new_output("stream", name="stdout", text="x\n")]
    assert Run(nb, 0.0).text() == "events: attach 2\n\nwarning\n\n3\nafter\n\nx\n"
    assert grab(Run(nb, 0.0).text(), r"events: (.*)") == ("attach 2",)
