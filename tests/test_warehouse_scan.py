"""Reading Delta data without Spark must never abort the interpreter at exit.

A pyarrow dataset scan over delta-rs's filesystem left threads that killed the process with
"terminate called without an active exception" (SIGABRT) after a correct answer was printed, in
about two runs of three (delta-io/delta-rs#2184); `lakehouse rejects` failed that way in CI.
"""

from __future__ import annotations

import datetime as dt
import subprocess
import sys

import pyarrow as pa
import pytest
from deltalake import write_deltalake

from lakehouse import delta_log

UTC = dt.timezone.utc


@pytest.fixture()
def table(tmp_path):
    path = str(tmp_path / "t")
    times = [dt.datetime(2026, 1, 1 + h // 24, h % 24, tzinfo=UTC) for h in range(48)]
    data = pa.table({
        "event_time": pa.array(times, pa.timestamp("us", tz="UTC")),
        "event_date": pa.array([t.date() for t in times]),
        "note": pa.array([f"row {i}" for i in range(48)]),
    })
    write_deltalake(path, data, mode="overwrite", partition_by=["event_date"])
    return path


def test_scan_reads_all_rows_and_filters(table):
    assert delta_log.scan(table).num_rows == 48
    assert sorted(delta_log.scan(table).column("note").to_pylist()) == sorted(f"row {i}" for i in range(48))
    cutoff = int(dt.datetime(2026, 1, 1, 12, tzinfo=UTC).timestamp())
    n = delta_log.scan(table, f"SELECT count(*) AS n FROM t WHERE event_time < to_timestamp_seconds({cutoff})")
    assert n.column("n")[0].as_py() == 12
    assert delta_log.row_count(table) == 48


def test_scan_of_an_old_version(table):
    write_deltalake(table, delta_log.scan(table).slice(0, 1).cast(delta_log.scan(table).schema), mode="append")
    assert delta_log.scan(table).num_rows == 49
    assert delta_log.scan(table, version=0).num_rows == 48


def test_processes_that_read_data_exit_cleanly(table):
    code = ("import sys; from lakehouse import delta_log; "
            "print(len(delta_log.scan(sys.argv[1]).to_pylist()))")
    for _ in range(8):
        p = subprocess.run([sys.executable, "-c", code, table], capture_output=True, text=True, timeout=120)
        assert (p.returncode, p.stdout.strip(), p.stderr) == (0, "48", "")
