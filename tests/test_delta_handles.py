"""Read handles kept per thread (``delta_log._reading``): every read sees every commit made by
any writer, an explicit version reads that version, a table made anew under the same path is
read anew, threads keep their own handles; and a repeated read opens no new handle. Real
delta-rs tables, no Spark."""

from __future__ import annotations

import shutil
import threading
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import write_deltalake

from lakehouse import delta_log


def _rows(n: int, start: int = 0) -> pa.Table:
    return pa.table({"k": pa.array(range(start, start + n), pa.int64()), "day": pa.array(["d"] * n)})


@pytest.fixture
def opens(monkeypatch):
    """The handles opened (each a new read of the log)."""
    made: list[tuple[str, int | None]] = []
    real = delta_log.open_table

    def counted(path, version=None):
        made.append((path, version))
        return real(path, version)

    monkeypatch.setattr(delta_log, "open_table", counted)
    return made


def test_reads_see_every_commit_and_open_once(tmp_path: Path, opens):
    path = str(tmp_path / "t")
    write_deltalake(path, _rows(3), partition_by=["day"])
    assert delta_log.version(path) == 0 and delta_log.row_count(path) == 3
    for i in range(1, 6):  # another writer's commits: each read sees the latest
        write_deltalake(path, _rows(2, 10 * i), mode="append", partition_by=["day"])
        assert delta_log.version(path) == i
        assert delta_log.row_count(path) == 3 + 2 * i
        assert delta_log.scan(path, "SELECT count(*) AS n FROM t").column("n")[0].as_py() == 3 + 2 * i
    assert opens == [(path, None)]  # one handle, brought up to date by the newer commits alone
    # an explicit version is that version's, whatever came after
    assert delta_log.add_actions(path, 0).num_rows == 1 and delta_log.add_actions(path, 2).num_rows == 3
    assert delta_log.add_actions(path, 0).num_rows == 1
    assert delta_log.add_actions(path, 5).num_rows == 6  # the latest handle, at that version
    assert opens == [(path, None), (path, 0), (path, 2)]
    assert delta_log.snapshot(path, "none") == delta_log.Snapshot(5, None)
    write_deltalake(path, _rows(1, 99), mode="append", partition_by=["day"])
    assert delta_log.version(path) == 6  # the shared handle moves on: version 5 is opened anew
    assert delta_log.add_actions(path, 5).num_rows == 6 and delta_log.add_actions(path, 6).num_rows == 7
    assert opens == [(path, None), (path, 0), (path, 2), (path, 5)]
    delta_log.forget_handles()  # as a new process: every read opens anew
    assert delta_log.version(path) == 6 and delta_log.add_actions(path, 0).num_rows == 1
    assert opens[4:] == [(path, None), (path, 0)]


@pytest.mark.parametrize("versions", [1, 3, 8])
def test_a_table_made_anew_under_the_same_path_is_read_anew(tmp_path: Path, versions: int):
    """Fewer, as many or more versions than the handle kept: never the old table's state, never
    the new table's commits applied on top of the old one's."""
    path = str(tmp_path / "t")
    for i in range(3):
        write_deltalake(path, _rows(5, 100 * i), mode="append", partition_by=["day"])
    assert (delta_log.version(path), delta_log.row_count(path)) == (2, 15)
    assert delta_log.add_actions(path, 1).num_rows == 2
    shutil.rmtree(path)
    for i in range(versions):
        write_deltalake(path, _rows(1, 1000 + i), mode="append", partition_by=["day"])
    assert (delta_log.version(path), delta_log.row_count(path)) == (versions - 1, versions)
    assert sorted(delta_log.scan(path, "SELECT k FROM t").column("k").to_pylist()) == list(range(1000, 1000 + versions))
    if versions > 1:
        assert delta_log.add_actions(path, 1).num_rows == 2 and \
            delta_log.scan(path, "SELECT min(k) AS k FROM t", 1).column("k")[0].as_py() == 1000


def test_threads_keep_their_own_handles_while_a_writer_commits(tmp_path: Path):
    path = str(tmp_path / "t")
    write_deltalake(path, _rows(1), partition_by=["day"])
    seen: dict[int, list[tuple[int, int]]] = {0: [], 1: []}
    errors: list[BaseException] = []
    done = threading.Event()

    def read(k: int) -> None:
        try:
            while not done.is_set():
                s = delta_log.snapshot(path, "app")
                assert s is not None
                seen[k].append((s.version, delta_log.add_actions(path, s.version).num_rows))
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=read, args=(k,)) for k in seen]
    for t in threads:
        t.start()
    for i in range(1, 15):
        write_deltalake(path, _rows(1, i), mode="append", partition_by=["day"])
    done.set()
    for t in threads:
        t.join()
    assert not errors, errors
    for k, reads in seen.items():
        assert reads and all(n == v + 1 for v, n in reads), k  # version v holds v + 1 files
        assert [v for v, _ in reads] == sorted(v for v, _ in reads), k  # never back in time
    assert delta_log.version(path) == 14


def test_a_newer_commit_that_cannot_be_applied_opens_anew(tmp_path: Path, opens):
    """The log cleaned up under a kept handle (its version's commit file gone): a new handle."""
    path = str(tmp_path / "t")
    write_deltalake(path, _rows(1), partition_by=["day"])
    assert delta_log.version(path) == 0
    write_deltalake(path, _rows(1, 1), mode="append", partition_by=["day"])
    delta_log.open_table(path).create_checkpoint()
    (Path(path) / "_delta_log" / f"{0:020d}.json").unlink()
    assert delta_log.version(path) == 1 and delta_log.row_count(path) == 2
    assert opens.count((path, None)) == 3  # the first read, the checkpoint's writer, the new read

