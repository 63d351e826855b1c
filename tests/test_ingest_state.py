"""Pure tests for the durable ingest state (lakehouse/ingest/state.py): save / load round trips,
bad state files, source keys, the per-source lock, queue and log views. No Spark."""

from __future__ import annotations

import datetime as dt
import fcntl
import hashlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from lakehouse.errors import LakehouseError
from lakehouse.ingest.state import Batch, FileEntry, IngestState, StateStore, source_key
from lakehouse.ingest.tsort import T
from lakehouse.warehouse import TablePaths

UTC = dt.timezone.utc
SAFE_KEY = re.compile(r"^[A-Za-z0-9_.-]{1,40}-[0-9a-f]{10}$")


@pytest.fixture
def store(tmp_path: Path) -> StateStore:
    return StateStore(TablePaths(str(tmp_path / "warehouse"), "trips"))


def entry(name: str, seq: int, status: str = "queued", **kw) -> FileEntry:
    base = dict(size=10 * seq, mtime_ns=1_700_000_000_000_000_000 + seq,
                implied_time=dt.datetime(2024, 5, 1, 0, seq, tzinfo=UTC))
    base.update(kw)
    return FileEntry(name=name, seq=seq, status=status, **base)  # type: ignore[arg-type]


def full_state(source: str) -> IngestState:
    """A state with every field set (and every optional field of a file entry both set and None)."""
    files = [
        FileEntry("trips_3.csv", 3, 300, 1_700_000_000_123_456_789,
                  dt.datetime(2024, 5, 1, 12, 0, 0, 123456, tzinfo=UTC), "ingested", rows=1000, rows_rejected=7,
                  batch=4, error=None, seen_at=dt.datetime(2024, 5, 2, 8, 9, 10, 654321, tzinfo=UTC),
                  moved_to=None, modified="size 300 -> 310 at 2024-05-03T00:00:00Z"),
        FileEntry("trips_1.csv", 1, 100, -5, None, "failed", error="trips_1.csv: not UTF-8 text (at byte 9)"),
        FileEntry("trips_0 late é.csv", 2, 0, 1, dt.datetime(2024, 4, 30, 23, 0, tzinfo=UTC), "late",
                  seen_at=dt.datetime(2024, 5, 1, tzinfo=dt.timezone(dt.timedelta(hours=2))),
                  moved_to="late/trips_0 late é.csv"),
        FileEntry("trips_4.csv", 5, 400, 2, dt.datetime(2024, 5, 1, 13, tzinfo=UTC), "queued", batch=6),
        FileEntry("trips_5.csv", 4, 500, 3, dt.datetime(2024, 5, 1, 14, tzinfo=UTC), "queued"),
    ]
    return IngestState(
        table="trips",
        source=source,
        t_read=T(dt.datetime(2024, 5, 1, 13, 0, 0, 1, tzinfo=UTC), "trips_4.csv"),
        next_batch=7,
        pending=[Batch(5, []), Batch(6, ["trips_4.csv", "x.csv"], [("x.csv", "x.csv: empty file"),
                                                                     ("y, z.csv", "unknown column 'q'")])],
        files={f.name: f for f in files},
        observed={"trips_6.csv": [12, 1_700_000_000_000_000_001], "trips_7.csv": [0, 0]},
    )


# -- save / load --------------------------------------------------------------------------------


def test_round_trip_keeps_every_field(store, tmp_path):
    src = str(tmp_path / "landing")
    state = full_state(src)
    store.save(state)
    back = store.load(src)
    assert back == state
    assert back.t_read == state.t_read and isinstance(back.t_read, T)
    assert back.pending[1].failed == [("x.csv", "x.csv: empty file"), ("y, z.csv", "unknown column 'q'")]
    assert back.files["trips_1.csv"].implied_time is None and back.files["trips_1.csv"].seen_at is None
    assert back.files["trips_3.csv"].seen_at == dt.datetime(2024, 5, 2, 8, 9, 10, 654321, tzinfo=UTC)
    assert back.files["trips_3.csv"].implied_time.utcoffset() == dt.timedelta(0)
    assert back.files["trips_0 late é.csv"].seen_at == dt.datetime(2024, 4, 30, 22, tzinfo=UTC)
    assert back.observed == state.observed


def test_round_trip_twice_gives_the_same_document(store, tmp_path):
    src = str(tmp_path / "landing")
    store.save(full_state(src))
    first = Path(store.path(src)).read_bytes()
    store.save(store.load(src))
    assert Path(store.path(src)).read_bytes() == first
    assert json.loads(first)["format"] == 1


def test_round_trip_of_an_empty_state(store, tmp_path):
    src = str(tmp_path / "landing")
    empty = store.load(src)
    store.save(empty)
    assert store.load(src) == empty == IngestState("trips", src)


def test_state_file_lives_under_the_table_ingest_folder(store, tmp_path):
    src = str(tmp_path / "landing")
    assert store.path(src) == f"{tmp_path}/warehouse/trips/_ingest/{source_key(src)}.json"
    store.save(IngestState("trips", src))
    assert os.path.isfile(store.path(src))


def test_missing_state_loads_an_empty_state_with_the_absolute_source(store, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    state = store.load("landing/")
    assert state == IngestState("trips", str(tmp_path / "landing"))
    assert state.t_read is None and state.next_batch == 1
    assert state.pending == [] and state.files == {} and state.observed == {}
    assert not os.path.exists(store.folder)  # loading writes nothing


def test_relative_and_absolute_source_share_one_state(store, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    store.save(full_state(str(tmp_path / "landing")))
    assert store.load("landing") == store.load(str(tmp_path / "landing") + "/") == full_state(
        str(tmp_path / "landing"))


def test_save_leaves_no_temp_files(store, tmp_path):
    for i in range(3):
        store.save(full_state(str(tmp_path / f"landing{i}")))
    store.save(full_state(str(tmp_path / "landing0")))
    names = sorted(os.listdir(store.folder))
    assert names == sorted(f"{source_key(str(tmp_path / f'landing{i}'))}.json" for i in range(3))


def test_save_replaces_the_previous_state(store, tmp_path):
    src = str(tmp_path / "landing")
    store.save(full_state(src))
    store.save(IngestState("trips", src, next_batch=42))
    assert store.load(src) == IngestState("trips", src, next_batch=42)


CORRUPT = [
    ("not json", b"{not json"),
    ("truncated", b'{"format": 1, "table": "trips", "sou'),
    ("empty file", b""),
    ("binary", b"\xff\xfe\x00garbage"),
    ("wrong format version", b'{"format": 2, "table": "trips", "source": "/x"}'),
    ("no format", b'{"table": "trips", "source": "/x"}'),
    ("missing table", b'{"format": 1, "source": "/x"}'),
    ("file entry missing fields", b'{"format": 1, "table": "t", "source": "/x", "files": [{"name": "a"}]}'),
    ("file entry unknown field", b'{"format": 1, "table": "t", "source": "/x", "files": [{"name": "a", "seq": 1, '
                                 b'"size": 1, "mtime_ns": 1, "status": "queued", "colour": "red"}]}'),
    ("bad t_read", b'{"format": 1, "table": "t", "source": "/x", "t_read": 5}'),
    ("bad timestamp", b'{"format": 1, "table": "t", "source": "/x", "t_read": ["yesterday", "a"]}'),
    ("bad batch", b'{"format": 1, "table": "t", "source": "/x", "pending": [{"files": []}]}'),
]


@pytest.mark.parametrize("data", [c[1] for c in CORRUPT], ids=[c[0] for c in CORRUPT])
def test_corrupt_or_wrong_format_state_is_an_error_naming_the_file(store, tmp_path, data):
    src = str(tmp_path / "landing")
    os.makedirs(store.folder)
    Path(store.path(src)).write_bytes(data)
    with pytest.raises(LakehouseError) as ei:
        store.load(src)
    msg = str(ei.value)
    assert msg.startswith(f"{store.path(src)}: ")
    assert "\n" not in msg


NOT_AN_OBJECT = [("list", b"[]"), ("null", b"null"), ("string", b'"state"'),
                 ("observed a list", b'{"format": 1, "table": "t", "source": "/x", "observed": [1]}')]


@pytest.mark.parametrize("data", [c[1] for c in NOT_AN_OBJECT], ids=[c[0] for c in NOT_AN_OBJECT])
def test_state_that_is_not_a_json_object_is_an_error_naming_the_file(store, tmp_path, data):
    src = str(tmp_path / "landing")
    os.makedirs(store.folder)
    Path(store.path(src)).write_bytes(data)
    with pytest.raises(LakehouseError) as ei:
        store.load(src)
    assert str(ei.value).startswith(f"{store.path(src)}: ")


def test_all_lists_the_states_of_every_source(store, tmp_path):
    assert store.all() == []
    states = [full_state(str(tmp_path / "a")), IngestState("trips", str(tmp_path / "b"), next_batch=3),
              IngestState("trips", str(tmp_path / "c d"))]
    for s in states:
        store.save(s)
    with store.lock(str(tmp_path / "a")):
        got = store.all()  # a lock file is no state
    assert sorted(got, key=lambda s: s.source) == sorted(states, key=lambda s: s.source)


def test_all_with_a_corrupt_state_names_the_file(store, tmp_path):
    store.save(IngestState("trips", str(tmp_path / "a")))
    bad = Path(store.folder) / "zz-0000000000.json"
    bad.write_text('{"format": 1}')
    with pytest.raises(LakehouseError) as ei:
        store.all()
    assert str(ei.value).startswith(f"{bad}: corrupt ingest state")


# -- source_key ---------------------------------------------------------------------------------


def test_source_key_is_stable_and_readable(tmp_path):
    src = str(tmp_path / "landing")
    assert source_key(src) == source_key(src) == source_key(src + "/") == source_key(src + "//")
    assert source_key(src) == source_key(str(tmp_path / "x" / ".." / "landing"))
    assert source_key(src).startswith("landing-")
    assert SAFE_KEY.match(source_key(src))


def test_source_key_is_a_known_value():
    # a saved state is found again only if the key never changes between versions
    digest = hashlib.sha256(b"/data/landing/trips").hexdigest()[:10]
    assert source_key("/data/landing/trips") == f"trips-{digest}"


def test_source_key_differs_for_different_paths():
    paths = ["/a/landing", "/b/landing", "/a/landing2", "/a/land ing", "/a/land_ing", "/a/Landing", "/", "/x"]
    keys = [source_key(p) for p in paths]
    assert len(set(keys)) == len(keys)


@pytest.mark.parametrize("name", [
    "with spaces", "ünïcødé 日本", "..", "...", ".hidden", "a/../b", "x" * 300, "é" * 200, "tab\there",
    "new\nline", "semi;colon|pipe*?<>", "'quotes\"", "-dash", "a:b", "\\back\\slash",
])
def test_source_key_is_filesystem_safe_for_hostile_names(tmp_path, name):
    src = os.path.join(str(tmp_path), name)
    key = source_key(src)
    assert SAFE_KEY.match(key), key
    assert key not in (".", "..") and "/" not in key and "\x00" not in key
    assert len(key.encode()) <= 51
    (tmp_path / f"{key}.json.lock").write_text("ok")  # a usable file name
    store = StateStore(TablePaths(str(tmp_path / "wh"), "trips"))
    store.save(IngestState("trips", os.path.abspath(src)))
    assert store.load(src).source == os.path.abspath(src).rstrip("/")


def test_source_key_of_the_root_directory():
    assert re.match(r"^root-[0-9a-f]{10}$", source_key("/"))


def test_source_key_of_a_non_utf8_path(tmp_path):
    name = os.fsdecode(b"landing-\xff")
    assert SAFE_KEY.match(source_key(os.path.join(str(tmp_path), name)))


# -- lock ---------------------------------------------------------------------------------------


def test_lock_refuses_a_second_holder_and_names_the_lock_file(store, tmp_path):
    src = str(tmp_path / "landing")
    lock_path = store.path(src) + ".lock"
    with store.lock(src):
        assert os.path.isfile(lock_path)
        with pytest.raises(LakehouseError) as ei:
            with store.lock(src):
                pytest.fail("a second holder got the lock")
        assert lock_path in str(ei.value)
        assert "trips" in str(ei.value) and src in str(ei.value)
        with open(lock_path, "a+") as f:  # an independent open file: the OS lock is held
            with pytest.raises(BlockingIOError):
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)


def test_lock_is_released_after_the_with_block(store, tmp_path):
    src = str(tmp_path / "landing")
    with store.lock(src):
        pass
    with open(store.path(src) + ".lock", "a+") as f:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        fcntl.flock(f, fcntl.LOCK_UN)
    with store.lock(src):
        pass


def test_lock_is_released_when_the_block_raises(store, tmp_path):
    src = str(tmp_path / "landing")
    with pytest.raises(RuntimeError):
        with store.lock(src):
            raise RuntimeError("boom")
    with store.lock(src):
        pass


def test_locks_of_different_sources_are_independent(store, tmp_path):
    with store.lock(str(tmp_path / "a")), store.lock(str(tmp_path / "b")):
        pass


def test_lock_held_by_another_process_is_refused(store, tmp_path):
    src = str(tmp_path / "landing")
    with store.lock(src):
        code = (
            "import sys\n"
            "from lakehouse.ingest.state import StateStore\n"
            "from lakehouse.warehouse import TablePaths\n"
            "from lakehouse.errors import LakehouseError\n"
            f"s = StateStore(TablePaths({store.paths.warehouse!r}, 'trips'))\n"
            "try:\n"
            f"    with s.lock({src!r}):\n"
            "        sys.exit(3)\n"
            "except LakehouseError as e:\n"
            "    print(e)\n"
            "    sys.exit(0)\n"
        )
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        assert store.path(src) + ".lock" in r.stdout


# -- views --------------------------------------------------------------------------------------


def test_queued_is_queued_files_without_a_batch_in_seen_order():
    files = [entry("c", 3), entry("a", 5), entry("b", 1), entry("d", 2, "ingested"), entry("e", 4, batch=9),
             entry("f", 6, "late"), entry("g", 7, "failed")]
    s = IngestState("trips", "/x", files={f.name: f for f in files})
    assert [f.name for f in s.queued()] == ["b", "c", "a"]


def test_log_is_every_file_in_seen_order():
    files = [entry("c", 3), entry("a", 5, "late"), entry("b", 1, "failed"), entry("d", 2, "ingested")]
    s = IngestState("trips", "/x", files={f.name: f for f in files})
    assert [f.name for f in s.log()] == ["b", "d", "c", "a"]
    assert s.next_seq() == 6
    assert IngestState("trips", "/x").next_seq() == 1
    assert IngestState("trips", "/x").queued() == [] == IngestState("trips", "/x").log()


def test_saved_files_are_in_seen_order(store, tmp_path):
    src = str(tmp_path / "landing")
    store.save(full_state(src))
    doc = json.loads(Path(store.path(src)).read_text(encoding="utf-8"))
    assert [f["seq"] for f in doc["files"]] == [1, 2, 3, 4, 5]
    assert [f.name for f in store.load(src).log()] == [f.name for f in full_state(src).log()]


def test_key_app_id_and_load_id():
    s = IngestState("trips", "/data/landing")
    assert s.key == source_key("/data/landing")
    assert s.app_id == f"lakehouse.ingest.{s.key}"
    assert s.load_id(Batch(12, [])) == f"ingest-{s.key}-00000012"
    assert entry("a", 1).t == T(dt.datetime(2024, 5, 1, 0, 1, tzinfo=UTC), "a")


def test_files_under_the_tables_folder_are_kept_relative_and_read_where_the_folder_is(tmp_path: Path) -> None:
    """A producer's inbox file (under the table's folder) is named relative to it in the document,
    so a warehouse moved elsewhere reads its own; a file given from outside stays absolute."""
    import shutil

    from lakehouse import storage
    from lakehouse.ingest.state import producer_source

    here = StateStore(TablePaths(str(tmp_path / "a" / "warehouse"), "trips"))
    source = producer_source("app")
    inbox = storage.join(here.paths.root, "_stream", "inbox", "k", "rows-1.parquet")
    state = IngestState("trips", source)
    state.files = {"rows-1.parquet": entry("rows-1.parquet", 1, path=inbox),
                   "given.csv": entry("given.csv", 2, path="/data/given.csv"),
                   "plain.csv": entry("plain.csv", 3)}
    here.save(state)
    doc = json.loads(Path(here.path(source)).read_text())
    assert {f["name"]: f["path"] for f in doc["files"]} == {
        "rows-1.parquet": "_stream/inbox/k/rows-1.parquet", "given.csv": "/data/given.csv", "plain.csv": None}
    assert here.load(source).files["rows-1.parquet"].path == inbox
    shutil.move(str(tmp_path / "a"), str(tmp_path / "b"))
    there = StateStore(TablePaths(str(tmp_path / "b" / "warehouse"), "trips"))
    got = there.load(source).files
    assert got["rows-1.parquet"].path == storage.join(there.paths.root, "_stream", "inbox", "k", "rows-1.parquet")
    assert got["given.csv"].path == "/data/given.csv" and got["plain.csv"].path is None
    [every] = there.all()
    assert every.files["rows-1.parquet"].path == got["rows-1.parquet"].path


@pytest.mark.parametrize("root", ["/w/t", "/w/t/", "s3://bucket/lake/t"])
def test_relative_and_under_are_inverse_for_places_under_a_folder(root: str) -> None:
    from lakehouse import storage
    from lakehouse.storage.paths import relative, under

    for rel in ("_staging/x", "_stream/inbox/k/a b.parquet", "deep/er/file"):
        place = storage.join(root, rel)
        assert relative(root, place) == rel and under(root, rel) == place
    for other in ("/elsewhere/x", "s3://other/x", "/w/tt/x"):  # not under it: as they are
        assert relative(root, other) == other and under(root, other) == other
    assert under(root, "") == ""
