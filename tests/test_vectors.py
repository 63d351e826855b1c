"""Vector files (lakehouse.archive.vectors): names, which file is current, garbage, atomic IPC
writes, listing; and the pure planning helpers (lakehouse.archive.plan). No engine."""

from __future__ import annotations

import datetime as dt
import json
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.ipc as ipc
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lakehouse.archive import rle
from lakehouse.archive.plan import (
    MAX_CUTOFF,
    MIN_CUTOFF,
    ArchivePlan,
    cutoff_time,
    day_of,
    new_cutoff,
)
from lakehouse.archive.vectors import (
    RUNS_FOLDER,
    AtomicIpcWriter,
    Encoding,
    VectorFile,
    current,
    day_runs,
    delete,
    garbage,
    list_files,
    parse_name,
    read,
    stale_days,
    vector_name,
)
from lakehouse.durations import Duration
from lakehouse.errors import LakehouseError

UTC = dt.timezone.utc
EPOCH = dt.datetime(1970, 1, 1, tzinfo=UTC)
DAY = dt.date(2026, 11, 20)

# -- names ---------------------------------------------------------------------------------------


def test_vector_name_is_day_dash_cutoff():
    assert vector_name(DAY, 1795169700) == "20261120-1795169700"
    assert vector_name(dt.date(2026, 1, 2), 0) == "20260102-0"


def test_parse_name_reads_day_and_cutoff():
    assert parse_name("20261120-1795169700") == (DAY, 1795169700, 0)
    assert parse_name("20260102-0") == (dt.date(2026, 1, 2), 0, 0)
    assert parse_name("20240229-7") == (dt.date(2024, 2, 29), 7, 0)
    assert parse_name("19691231--3600") == (dt.date(1969, 12, 31), -3600, 0)
    assert parse_name("00010101--62135596800") == (dt.date(1, 1, 1), -62135596800, 0)
    assert parse_name("09991231-5") == (dt.date(999, 12, 31), 5, 0)


def test_vector_names_are_eight_digits_for_every_year():
    assert vector_name(dt.date(999, 12, 31), 5) == "09991231-5"
    assert vector_name(dt.date(1, 1, 1), -62135596800) == "00010101--62135596800"
    assert vector_name(dt.date(9999, 12, 31), 253402300799) == "99991231-253402300799"
    assert vector_name(dt.date(1969, 12, 31), -1) == "19691231--1"


@pytest.mark.parametrize(
    "name",
    [
        "",
        "20261120",
        "20261120-",
        "-1795169700",
        "2026112-5",
        "202611200-5",
        "20261320-5",  # month 13
        "20261131-5",  # 31 November
        "20230229-5",  # not a leap year
        "20261120-12a",
        "20261120---5",
        "20261120--0",
        "20261120-05",  # one name per cutoff: no leading zeros
        "20261120--05",
        "00000101-5",  # year 0
        "9991231-5",  # 7 digits
        "20261120-+5",
        "20261120-5.arrow",
        "20261120_5",
        "x20261120-5",
        " 20261120-5",
        "20261120-5 ",
        "2026-11-20-5",
        ".20261120-5",
        ".20261120-5.tmp-0123abcd",
        "_SUCCESS",
        "part-00000.parquet",
    ],
)
def test_parse_name_rejects_junk_and_temp_names(name):
    assert parse_name(name) is None


@pytest.mark.parametrize("name", ["20261120-5\n", "20261120-\uff15", "20261120-\u0665"])
def test_parse_name_rejects_newline_and_non_ascii_digits(name):
    assert parse_name(name) is None


@settings(max_examples=500, deadline=None)
@given(st.dates(), st.integers(MIN_CUTOFF, MAX_CUTOFF))
def test_names_round_trip(day, cutoff):
    """Every date 0001-01-01..9999-12-31 and every cutoff of those years (negative before
    1970): eight-digit days, and the name sorts the cutoff back exactly."""
    name = vector_name(day, cutoff)
    assert len(name.split("-", 1)[0]) == 8
    assert parse_name(name) == (day, cutoff, 0)


@settings(max_examples=300, deadline=None)
@given(st.datetimes(min_value=dt.datetime(1, 1, 2), max_value=dt.datetime(9999, 12, 30)))
def test_cutoffs_before_1970_round_trip_through_names_and_times(now):
    cutoff = new_cutoff(now, Duration.parse("24h"))
    assert (cutoff < 0) == (now < dt.datetime(1970, 1, 2))
    assert cutoff_time(cutoff) <= now.replace(tzinfo=UTC) - dt.timedelta(days=1) < cutoff_time(cutoff + 1)
    day = day_of(cutoff_time(cutoff))
    assert parse_name(vector_name(day, cutoff)) == (day, cutoff, 0)


def test_a_cutoff_before_year_one_is_refused():
    with pytest.raises(LakehouseError, match="before 0001-01-01"):
        new_cutoff(dt.datetime(1, 1, 1, 12, tzinfo=UTC), Duration.parse("24h"))


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="0123456789-.abx", max_size=24))
def test_parsed_ascii_names_are_canonical_or_zero_padded(name):
    """Whatever parse_name accepts is a day and a cutoff written as vector_name writes them
    (modulo leading zeros of the cutoff)."""
    parsed = parse_name(name)
    if parsed is not None:
        day, cutoff, generation = parsed
        d, rest = name.split("-", 1)
        c, _, g = rest.partition(".")
        assert d == f"{day.year:04d}{day.month:02d}{day.day:02d}" and int(c) == cutoff and int(g or 0) == generation
        assert c == str(cutoff) and g == (str(generation) if generation else "")  # canonical: one name per run


# -- current and garbage -------------------------------------------------------------------------


def vf(column: str, day: dt.date, cutoff: int, generation: int = 0) -> VectorFile:
    return VectorFile(column, day, cutoff, f"/w/t/vectors/{column}/{vector_name(day, cutoff, generation)}", generation)


D1, D2 = dt.date(2026, 11, 19), dt.date(2026, 11, 20)


def test_current_picks_the_largest_cutoff_not_above_committed():
    files = [vf("c", D1, 100), vf("c", D1, 200), vf("c", D1, 300)]
    assert current(files, (200, 0)) == {("c", D1): vf("c", D1, 200)}
    assert current(files, (250, 0)) == {("c", D1): vf("c", D1, 200)}
    assert current(files, (300, 0)) == {("c", D1): vf("c", D1, 300)}
    assert current(files, (10_000, 0)) == {("c", D1): vf("c", D1, 300)}
    assert current(files, (99, 0)) == {}


def test_current_is_per_column_and_day():
    files = [
        vf("city_id", D1, 100),  # day 1 not rewritten by the run at 200: stays current
        vf("city_id", D2, 100),
        vf("city_id", D2, 200),
        vf("status", D1, 100),
        vf("status", D2, 200),
        vf("status", D2, 300),  # written by a run that never committed
    ]
    cur = current(files, (200, 0))
    assert cur == {
        ("city_id", D1): vf("city_id", D1, 100),
        ("city_id", D2): vf("city_id", D2, 200),
        ("status", D1): vf("status", D1, 100),
        ("status", D2): vf("status", D2, 200),
    }
    assert sorted(garbage(files, (200, 0)), key=lambda f: (f.column, f.day, f.cutoff)) == [
        vf("city_id", D2, 100),
        vf("status", D2, 300),
    ]


def test_a_day_never_mixes_runs():
    """A column whose file of the day's latest run is missing (being cleaned, or not written by
    that run) gets no file rather than one of an older run."""
    files = [vf("city_id", D1, 100), vf("city_id", D1, 200), vf("status", D1, 100)]
    assert current(files, (200, 0)) == {("city_id", D1): vf("city_id", D1, 200)}
    assert set(garbage(files, (200, 0))) == {vf("city_id", D1, 100), vf("status", D1, 100)}
    assert day_runs(files, (200, 0)) == {D1: (200, 0)} and day_runs(files, (150, 0)) == {D1: (100, 0)}


def test_current_does_not_depend_on_listing_order():
    files = [vf("c", D1, 300), vf("c", D1, 100), vf("c", D1, 200)]
    for perm in (files, files[::-1], [files[1], files[0], files[2]]):
        assert current(perm, (250, 0)) == {("c", D1): vf("c", D1, 200)}


def test_nothing_is_current_before_the_first_commit():
    files = [vf("c", D1, 100), vf("d", D2, 5)]
    assert current(files, None) == {}
    junk = sorted(garbage(files, None), key=lambda f: f.cutoff)
    assert junk == [vf("d", D2, 5), vf("c", D1, 100)]


def test_garbage_uncommitted_and_superseded():
    files = [vf("c", D1, 100), vf("c", D1, 200), vf("c", D1, 300), vf("c", D2, 300)]
    # committed 200: 100 superseded, 300 (both days) uncommitted
    assert set(garbage(files, (200, 0))) == {vf("c", D1, 100), vf("c", D1, 300), vf("c", D2, 300)}
    # committed 300: only the superseded ones
    assert set(garbage(files, (300, 0))) == {vf("c", D1, 100), vf("c", D1, 200)}
    assert garbage([], (300, 0)) == []
    # an iterator is fine (read once)
    assert set(garbage(iter(files), (300, 0))) == {vf("c", D1, 100), vf("c", D1, 200)}


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(["a", "b"]), st.sampled_from([D1, D2]), st.integers(0, 6)),
        unique=True,
        max_size=20,
    ),
    st.none() | st.integers(-1, 7),
)
def test_current_and_garbage_partition_the_files(specs, committed):
    files = [vf(c, d, k) for c, d, k in specs]
    cur = current(files, None if committed is None else (committed, 0))
    junk = garbage(files, None if committed is None else (committed, 0))
    assert set(cur.values()) | set(junk) == set(files)
    assert not set(cur.values()) & set(junk)
    for (column, day), f in cur.items():
        assert (f.column, f.day) == (column, day)
        assert committed is not None and f.cutoff <= committed
        # one run per day: every column of the day comes from the day's latest committed run
        assert f.cutoff == max(k for c, d, k in specs if d == day and k <= committed)
    for f in junk:
        run = max((k for c, d, k in specs if d == f.day and committed is not None and k <= committed),
                  default=None)
        assert committed is None or f.cutoff > committed or run > f.cutoff


def test_an_erasures_generation_comes_after_its_cutoff_and_before_the_next():
    """An erasure rewrites days at the unchanged cutoff under its number: its files are current
    once the archive commits that number, never before; an archiving run's later cutoff wins."""
    files = [vf("c", D1, 100), vf("c", D1, 100, 1), vf("c", D2, 100), vf("c", D1, 100, 2)]
    assert current(files, (100, 0)) == {("c", D1): vf("c", D1, 100), ("c", D2): vf("c", D2, 100)}
    assert current(files, (100, 1))[("c", D1)] == vf("c", D1, 100, 1)
    assert set(garbage(files, (100, 1))) == {vf("c", D1, 100), vf("c", D1, 100, 2)}  # superseded, uncommitted
    later = [*files, vf("c", D1, 200)]
    assert current(later, (200, 2))[("c", D1)] == vf("c", D1, 200) and day_runs(later, (200, 2))[D2] == (100, 0)
    assert parse_name(vector_name(D1, -3600, 12)) == (D1, -3600, 12) and vector_name(D1, 7, 3).endswith("-7.3")
    for bad in ("20261119-7.0", "20261119-7.", "20261119-7.01", "20261119-7.-1"):
        assert parse_name(bad) is None


# -- atomic writes, listing, reading -------------------------------------------------------------

SCHEMA = rle.run_schema(pa.int32())


def runs_table() -> pa.Table:
    (t,) = rle.encode([pa.array([1, 1, 1, 5, 5, 18, 18], pa.int32())])
    return t


def test_atomic_writer_publishes_only_on_commit(tmp_path: Path):
    root = str(tmp_path / "vectors")
    w = AtomicIpcWriter(root, "city_id", DAY, 1795169700, SCHEMA)
    final = Path(root) / "city_id" / "20261120-1795169700"
    assert w.final == str(final)
    temp = Path(w.temp)
    assert temp.parent == final.parent and temp.name.startswith(".")
    w.write(runs_table())
    # before commit: only the temporary file exists, and it is invisible as a vector file
    assert not final.exists()
    assert temp.exists()
    files, temps = list_files(root)
    assert files == [] and temps == [str(temp)]
    path = w.commit()
    assert path == str(final)
    assert final.exists() and not temp.exists()
    with pa.memory_map(path, "r") as src:
        table = ipc.open_file(src).read_all()
    assert table.schema == SCHEMA
    assert table.equals(runs_table())
    assert read(path).equals(runs_table())
    files, temps = list_files(root)
    assert files == [VectorFile("city_id", DAY, 1795169700, str(final), 0)] and temps == []


def test_stale_days_from_sidecars_or_file_metadata(tmp_path: Path):
    """One answer for archive, compaction and verify: a day is stale when its run was written
    under another encoding (sidecar first, else the file's own metadata), without an encoding,
    unreadable, or missing while the table wants vector files."""
    root = str(tmp_path / "vectors")
    now = Encoding(("city_id",), ("city_id",))
    old = Encoding(("fare",), ("city_id", "fare"))
    d = [DAY + dt.timedelta(days=i) for i in range(6)]

    def write(day: dt.date, cutoff: int, enc: Encoding | None) -> str:
        w = AtomicIpcWriter(root, "city_id", day, cutoff, SCHEMA, encoding=enc)
        w.write(runs_table())
        return w.commit()

    write(d[0], 10, now)
    write(d[1], 10, old)  # the sidecar of run 10 says "now"; the file's own says otherwise: sidecar wins
    write(d[2], 20, old)  # no sidecar for run 20: the file's metadata
    write(d[3], 20, None)  # no sidecar, no metadata: written before encodings were recorded
    Path(write(d[4], 20, now)).write_bytes(b"not arrow")  # unreadable
    write(d[0], 30, old)  # uncommitted (above the committed cutoff): not read
    (Path(root) / RUNS_FOLDER).mkdir()
    (Path(root) / RUNS_FOLDER / "10.json").write_text(json.dumps({"cutoff": 10, "encoding": now.key()}))
    got = stale_days(root, now, (25, 0), d)
    assert set(got) == {d[2], d[3], d[4], d[5]}, got
    assert got[d[2]].startswith("written under sort columns [fare]")
    assert got[d[3]] == "written before encodings were recorded"
    assert got[d[4]].startswith("unreadable")
    assert got[d[5]] == "no vector files"
    assert stale_days(root, now, (25, 0)) == {k: v for k, v in got.items() if k != d[5]}  # by default: days with files
    assert stale_days(root, Encoding(("city_id",), ()), (25, 0), [d[5]]) == {}  # no vectors wanted: none missing
    assert stale_days(root, now, None, d[:2]) == {d[0]: "no vector files", d[1]: "no vector files"}


def test_atomic_writer_writes_several_tables_and_casts(tmp_path: Path):
    root = str(tmp_path / "vectors")
    w = AtomicIpcWriter(root, "fare", DAY, 7, pa.schema([pa.field("value", pa.float64())]))
    w.write(pa.table({"value": pa.array([1.5, None], pa.float64())}))
    w.write(pa.table({"value": pa.array([], pa.float64())}))  # empty: skipped
    w.write(pa.table({"value": pa.array([3], pa.int64())}))  # cast to the file's schema
    path = w.commit()
    t = ipc.open_file(path).read_all()
    assert t.schema == pa.schema([pa.field("value", pa.float64())])
    assert t.column("value").to_pylist() == [1.5, None, 3.0]


def test_atomic_writer_commit_without_rows_is_a_valid_empty_file(tmp_path: Path):
    root = str(tmp_path / "vectors")
    path = AtomicIpcWriter(root, "c", DAY, 1, SCHEMA).commit()
    t = ipc.open_file(path).read_all()
    assert t.num_rows == 0 and t.schema == SCHEMA


def test_atomic_writer_abort_removes_the_temp(tmp_path: Path):
    root = str(tmp_path / "vectors")
    w = AtomicIpcWriter(root, "c", DAY, 9, SCHEMA)
    w.write(runs_table())
    temp = Path(w.temp)
    assert temp.exists()
    w.abort()
    assert not temp.exists()
    assert not Path(w.final).exists()
    assert list_files(root) == ([], [])
    assert os.listdir(Path(root) / "c") == []


def test_rewriting_the_same_name_replaces_the_file(tmp_path: Path):
    """A re-run with the same cutoff (after a crash) overwrites its own earlier file."""
    root = str(tmp_path / "vectors")
    w = AtomicIpcWriter(root, "c", DAY, 9, SCHEMA)
    w.write(runs_table().slice(0, 1))
    w.commit()
    w = AtomicIpcWriter(root, "c", DAY, 9, SCHEMA)
    w.write(runs_table())
    path = w.commit()
    assert read(path).equals(runs_table())
    files, temps = list_files(root)
    assert len(files) == 1 and temps == []


def test_two_writers_use_different_temp_names(tmp_path: Path):
    root = str(tmp_path / "vectors")
    a = AtomicIpcWriter(root, "c", DAY, 9, SCHEMA)
    b = AtomicIpcWriter(root, "c", DAY, 9, SCHEMA)
    assert a.temp != b.temp and a.final == b.final
    a.abort()
    b.abort()


def test_list_files_finds_files_and_temp_leftovers(tmp_path: Path):
    root = tmp_path / "vectors"
    for column, names in {
        "city_id": ["20261119-100", "20261120-100", "20261120-200", ".20261120-300.tmp-abcd1234"],
        "status": ["20261120-200", "junk.txt", "20261131-5", ".hidden"],
    }.items():
        (root / column).mkdir(parents=True)
        for n in names:
            (root / column / n).write_bytes(b"x")
    (root / "20261120-1").write_bytes(b"x")  # not inside a column folder
    (root / "status" / "deeper").mkdir()
    (root / "status" / "deeper" / "20261120-1").write_bytes(b"x")  # too deep
    (root / "empty_column").mkdir()
    (root / "city_id" / ".hidden_folder").mkdir()  # a folder is never a leftover file to delete
    (root / "city_id" / "20261121-100").mkdir()  # nor a vector file, whatever its name
    (root / "_id").mkdir()  # a column may start with "_"
    (root / "_id" / "20261120-200").write_bytes(b"x")
    (root / "_runs").mkdir()  # the runs' sidecars: no column
    (root / "_runs" / "200.json").write_bytes(b"{}")
    (root / "_runs" / "20261120-200").write_bytes(b"x")
    (root / ".hidden_column").mkdir()
    (root / ".hidden_column" / "20261120-200").write_bytes(b"x")
    files, temps = list_files(str(root))
    assert sorted(files, key=lambda f: (f.column, f.day, f.cutoff)) == [
        VectorFile("_id", D2, 200, str(root / "_id" / "20261120-200")),
        VectorFile("city_id", D1, 100, str(root / "city_id" / "20261119-100")),
        VectorFile("city_id", D2, 100, str(root / "city_id" / "20261120-100")),
        VectorFile("city_id", D2, 200, str(root / "city_id" / "20261120-200")),
        VectorFile("status", D2, 200, str(root / "status" / "20261120-200")),
    ]
    assert sorted(temps) == sorted(
        [str(root / "city_id" / ".20261120-300.tmp-abcd1234"), str(root / "status" / ".hidden")]
    )
    # cleanup of what a committed cutoff of 200 makes garbage, plus the temps
    junk = [f.path for f in garbage(files, (200, 0))]
    assert junk == [str(root / "city_id" / "20261120-100")]
    assert delete(junk + temps, str(root)) == 3
    assert delete(junk, str(root)) == 0  # already gone: not an error
    files, temps = list_files(str(root))
    assert len(files) == 4 and temps == []
    assert list_files(str(root), ["_id", "status"])[0] == [VectorFile("_id", D2, 200, str(root / "_id" / "20261120-200")),
                                                         VectorFile("status", D2, 200, str(root / "status" / "20261120-200"))]
    # one day's files: those the whole listing has for that day, whatever else is in the folders
    for day in (D1, D2, dt.date(2026, 11, 21), dt.date(2020, 11, 20)):
        whole = [f for f in list_files(str(root))[0] if f.day == day]
        assert list_files(str(root), day=day)[0] == whole
        assert list_files(str(root), ["city_id"], day)[0] == [f for f in whole if f.column == "city_id"]


def test_list_files_with_a_trailing_slash_and_a_file_uri(tmp_path: Path):
    root = tmp_path / "vectors"
    (root / "c").mkdir(parents=True)
    (root / "c" / "20261120-5").write_bytes(b"x")
    want = [VectorFile("c", D2, 5, str(root / "c" / "20261120-5"))]
    assert list_files(str(root) + "/")[0] == want
    files, _ = list_files(root.as_uri())
    assert [(f.column, f.day, f.cutoff) for f in files] == [("c", D2, 5)]
    assert files[0].path.endswith("/c/20261120-5")


def test_list_files_of_a_missing_folder_is_empty(tmp_path: Path):
    assert list_files(str(tmp_path / "nope")) == ([], [])


def test_vector_file_round_trip_with_lookup(tmp_path: Path):
    """Runs written through the atomic writer, read back (memory-mapped), searched."""
    rows = [(1, 0, 1.0), (1, 0, 1.0), (1, 1, None), (5, 0, 1.0), (5, 0, 1.0),
            (18, 0, 1.2), (18, 0, 1.3)]
    types = [pa.int32(), pa.int32(), pa.float64()]
    names = ["city_id", "status", "fx_rate"]
    arrays = [pa.array([r[k] for r in rows], t) for k, t in enumerate(types)]
    tables = rle.encode(arrays, batch_size=2)
    root = str(tmp_path / "vectors")
    for name, typ, t in zip(names, types, tables):
        w = AtomicIpcWriter(root, name, DAY, 42, rle.run_schema(typ))
        w.write(t)
        w.commit()
    files, _ = list_files(root)
    cur = current(files, (42, 0))
    cols = [rle.RunColumn(read(cur[(n, DAY)].path)) for n in names]
    assert rle.lookup(cols, [18, 0, 1.3], 7) == rle.Range(6, 7)
    assert [rle.decode(read(cur[(n, DAY)].path)).to_pylist() for n in names] == [
        [r[k] for r in rows] for k in range(3)
    ]


# -- plan ----------------------------------------------------------------------------------------


def test_new_cutoff_whole_seconds_rounded_down():
    now = dt.datetime(2026, 11, 20, 10, 15, 0, 999_999, tzinfo=UTC)
    day_before = dt.datetime(2026, 11, 19, 10, 15, tzinfo=UTC)
    assert new_cutoff(now, Duration.parse("24h")) == int(day_before.timestamp())
    assert new_cutoff(now, Duration.parse("0s")) == 1795169700
    assert new_cutoff(now, Duration.parse("1s")) == 1795169699
    assert new_cutoff(now, Duration.parse("500ms")) == 1795169700
    assert new_cutoff(now, Duration.parse("1000ms")) == 1795169699
    exact = dt.datetime(2026, 11, 20, 10, 15, tzinfo=UTC)
    assert new_cutoff(exact, Duration.parse("0s")) == 1795169700
    assert new_cutoff(exact, Duration.parse("1ms")) == 1795169699
    assert isinstance(new_cutoff(now, Duration.parse("2h")), int)


def test_new_cutoff_naive_is_utc_and_offsets_convert():
    naive = dt.datetime(2026, 11, 20, 10, 15, 30)
    aware = naive.replace(tzinfo=UTC)
    plus2 = dt.datetime(2026, 11, 20, 12, 15, 30, tzinfo=dt.timezone(dt.timedelta(hours=2)))
    d = Duration.parse("10m")
    assert new_cutoff(naive, d) == new_cutoff(aware, d) == new_cutoff(plus2, d) == 1795169730 - 600


def test_new_cutoff_does_not_depend_on_the_process_time_zone(monkeypatch):
    import time

    if not hasattr(time, "tzset"):
        pytest.skip("no tzset")
    naive = dt.datetime(2026, 11, 20, 10, 15, 30)
    try:
        monkeypatch.setenv("TZ", "America/New_York")
        time.tzset()
        assert new_cutoff(naive, Duration.parse("0s")) == 1795169730
    finally:
        monkeypatch.undo()
        time.tzset()


@settings(max_examples=300, deadline=None)
@given(
    st.datetimes(min_value=dt.datetime(1970, 1, 2), max_value=dt.datetime(2200, 1, 1)),
    st.integers(0, 400).map(lambda s: Duration(s * 1000)) | st.sampled_from(
        [Duration.parse(x) for x in ("24h", "2d", "90s", "10m", "2h")]
    ),
)
def test_new_cutoff_is_floor_of_now_minus_delay(now, delay):
    """Exact reference in integer arithmetic (whole-second delays)."""
    limit = now.replace(tzinfo=UTC) - dt.timedelta(milliseconds=delay.millis)
    want = (limit - EPOCH) // dt.timedelta(seconds=1)
    assert new_cutoff(now, delay) == want
    assert cutoff_time(want) <= limit < cutoff_time(want + 1)


@pytest.mark.parametrize(
    "now, ms, want",
    [
        (dt.datetime(2038, 9, 3, 5, 36, 19, 904_000, tzinfo=UTC), 904, 2167104979),
        (dt.datetime(2004, 10, 12, 23, 40, 7, 679_000, tzinfo=UTC), 679, 1097624407),
    ],
)
def test_new_cutoff_with_millisecond_delays_is_exact(now, ms, want):
    assert new_cutoff(now, Duration.parse(f"{ms}ms")) == want


def test_cutoff_time_and_day_of():
    assert cutoff_time(1795169700) == dt.datetime(2026, 11, 20, 10, 15, tzinfo=UTC)
    assert cutoff_time(0) == EPOCH
    assert day_of(dt.datetime(2026, 11, 20, 23, 59, 59, tzinfo=UTC)) == D2
    assert day_of(dt.datetime(2026, 11, 21, 0, 30, tzinfo=dt.timezone(dt.timedelta(hours=2)))) == D2
    minus2 = dt.timezone(dt.timedelta(hours=-2))
    assert day_of(dt.datetime(2026, 11, 20, 23, 30, tzinfo=minus2)) == dt.date(2026, 11, 21)
    assert day_of(dt.datetime(2026, 11, 20, 23, 59)) == D2  # naive is UTC


def plan(previous: int | None, cutoff: int) -> ArchivePlan:
    return ArchivePlan("trips", dt.datetime(2026, 11, 20, tzinfo=UTC), previous, cutoff, 3, None)


def test_archive_plan_advances():
    assert plan(None, 0).advances
    assert plan(None, 1795169700).advances
    assert plan(100, 101).advances
    assert not plan(100, 100).advances
    assert not plan(100, 99).advances


def test_archive_plan_as_dict():
    now = dt.datetime(2026, 11, 20, tzinfo=UTC)
    p = ArchivePlan("trips", now, 100, 200, 3, 4, days=(D1, D2), rows=5)
    d = p.as_dict()
    assert d["advances"] is True
    assert d["days"] == ["2026-11-19", "2026-11-20"]
    got = (d["previous_cutoff"], d["cutoff"], d["live_version"], d["archive_version"], d["rows"])
    assert got == (100, 200, 3, 4, 5)
    assert plan(200, 200).as_dict()["advances"] is False


def test_kept_vector_files_are_read_anew_when_their_file_changes(tmp_path: Path, monkeypatch):
    """``read_kept`` serves a file from memory while it is the same file (inode, size, time);
    a file written again under the name is read anew; the memory held stays under its bound."""
    from lakehouse.archive import vectors

    vectors.forget_kept()
    root = str(tmp_path / "vectors")

    def write(day: dt.date, values: list[int]) -> str:
        w = AtomicIpcWriter(root, "a", day, 100, rle.run_schema(pa.int64()))
        w.write(rle.encode([pa.array(values, pa.int64())])[0])
        return w.commit()

    path = write(dt.date(2026, 11, 1), [1, 1, 2])
    first = vectors.read_kept(path)
    assert vectors.read_kept(path) is first
    os.utime(path, ns=(1, 1))
    again = vectors.read_kept(path)
    assert again is not first and again.equals(first)
    path = write(dt.date(2026, 11, 1), [5, 6, 7, 8])
    assert vectors.read_kept(path).column("value").to_pylist() == [5, 6, 7, 8]
    monkeypatch.setattr(vectors, "KEPT_BYTES", 1)
    for d in range(2, 6):
        vectors.read_kept(write(dt.date(2026, 11, d), [d]))
    assert vectors.kept_files() == 1
    vectors.forget_kept()
    assert vectors.kept_files() == 0
