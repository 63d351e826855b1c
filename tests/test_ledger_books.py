"""The archive's books, pure: the checksum arithmetic, conservation of a run modelled in Python
(rows in = rows out, upserts accounted), the commit metadata, what verify believes and checks,
and the injected faults on a staged Parquet file (no Spark)."""

from __future__ import annotations

import datetime as dt
import json
import random

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lakehouse import faults
from lakehouse.archive import ledger as L
from lakehouse.errors import ConfigError

H64 = st.integers(min_value=-(1 << 63), max_value=(1 << 63) - 1)
"""A signed 64-bit row hash, as Spark's xxhash64 gives it."""
DAY = dt.date(2026, 11, 18)
DAYS = st.sampled_from([dt.date(2026, 11, 16), dt.date(2026, 11, 17), DAY])


# -- figures ------------------------------------------------------------------------------------


@given(st.lists(H64, max_size=60), st.randoms(use_true_random=False))
def test_figures_do_not_depend_on_order_or_on_how_rows_are_split(hashes, rnd):
    whole = L.Figures.of_hashes(hashes)
    shuffled = list(hashes)
    rnd.shuffle(shuffled)
    assert L.Figures.of_hashes(shuffled) == whole
    cut = rnd.randint(0, len(hashes))
    assert L.Figures.of_hashes(shuffled[:cut]) + L.Figures.of_hashes(shuffled[cut:]) == whole
    assert whole - L.Figures.of_hashes(shuffled[:cut]) == L.Figures.of_hashes(shuffled[cut:])
    assert whole.rows == len(hashes) and 0 <= whole.checksum < L.MOD


@given(st.lists(H64, max_size=40))
def test_a_signed_sum_folds_to_the_unsigned_sum(hashes):
    from decimal import Decimal

    unsigned = sum(h % L.MOD for h in hashes) % L.MOD
    assert L.fold(sum(hashes)) == L.fold(Decimal(sum(hashes))) == unsigned
    assert L.Figures.of(len(hashes), Decimal(sum(hashes))) == L.Figures.of_hashes(hashes)
    assert L.fold(None) == 0 and L.Figures.of(None, None) == L.Figures()


@given(st.lists(H64, min_size=1, max_size=30), st.data())
def test_dropping_duplicating_or_changing_one_row_changes_the_figures(hashes, data):
    before = L.Figures.of_hashes(hashes)
    i = data.draw(st.integers(0, len(hashes) - 1))
    assert L.Figures.of_hashes(hashes[:i] + hashes[i + 1:]) != before
    assert L.Figures.of_hashes(hashes + [hashes[i]]) != before
    other = data.draw(H64.filter(lambda h: h % L.MOD != hashes[i] % L.MOD))
    changed = L.Figures.of_hashes(hashes[:i] + [other] + hashes[i + 1:])
    assert changed.rows == before.rows and changed != before


@given(st.integers(0, L.MOD - 1))
def test_checksums_are_sixteen_hex_digits(x):
    assert len(L.hex64(x)) == 16 and L.unhex64(L.hex64(x)) == x


@pytest.mark.parametrize("bad", ["", "abc", "1" * 17, "zz" * 8, "-" + "1" * 15])
def test_a_bad_checksum_is_refused(bad):
    with pytest.raises(ValueError):
        L.unhex64(bad)


# -- conservation of one run, modelled --------------------------------------------------------------

ROW = st.tuples(st.integers(0, 12), DAYS, H64)
"""(key, day, hash of the row's content)."""


def model_run(existing: list[tuple], live: list[tuple], has_key: bool):
    """A run in Python: the archive rows of the days, the live rows taken; what the run stages
    (with a key, a live row replaces the archived row of its key and day)."""
    taken = {(k, d) for k, d, _ in live}
    kept = [r for r in existing if not has_key or (r[0], r[1]) not in taken]
    replaced = [r for r in existing if has_key and (r[0], r[1]) in taken]
    staged = kept + live
    return kept, replaced, staged


def per_day(rows: list[tuple]) -> dict[dt.date, L.Figures]:
    out: dict[dt.date, L.Figures] = {}
    for _, d, h in rows:
        out[d] = out.get(d, L.Figures()) + L.Figures.of_hashes([h])
    return out


def unique_by_key(rows: list[tuple]) -> list[tuple]:
    seen: dict[tuple, tuple] = {}
    for r in rows:
        seen[(r[0], r[1])] = r
    return list(seen.values())


def books(existing, live, staged, kept, replaced):
    days = sorted({d for _, d, _ in existing} | {d for _, d, _ in live})
    lv, kp, rp, st_ = per_day(live), per_day(kept), per_day(replaced), per_day(staged)
    inputs = {d: L.DayInput(lv.get(d, L.Figures()), kp.get(d, L.Figures()), rp.get(d, L.Figures())) for d in days}
    new_rows = {d: f.rows for d, f in lv.items()}
    archive_rows = {d: f.rows for d, f in per_day(existing).items()}
    return days, inputs, st_, new_rows, archive_rows


@settings(max_examples=200)
@given(st.lists(ROW, max_size=25), st.lists(ROW, max_size=25), st.booleans())
def test_a_clean_run_balances_with_upserts_accounted(existing, live, has_key):
    if has_key:  # a key is unique within the archive and within live
        existing, live = unique_by_key(existing), unique_by_key(live)
    kept, replaced, staged = model_run(existing, live, has_key)
    days, inputs, outputs, new_rows, archive_rows = books(existing, live, staged, kept, replaced)
    assert L.conservation_problems("t", days, inputs, outputs, new_rows, archive_rows) == []
    for d in days:
        i, o = inputs[d], outputs.get(d, L.Figures())
        assert i.inflow == o and i.existing.rows == archive_rows.get(d, 0)
        assert o.rows == i.live.rows + i.existing.rows - i.replaced.rows  # rows in = rows out, upserts accounted
        assert i.replaced.rows <= i.live.rows or not has_key


@settings(max_examples=200)
@given(st.lists(ROW, max_size=20), st.lists(ROW, min_size=1, max_size=20), st.booleans(),
       st.sampled_from(faults.FAULTS), st.data())
def test_a_damaged_staged_batch_is_refused_naming_table_day_and_figures(existing, live, has_key, fault, data):
    if has_key:
        existing, live = unique_by_key(existing), unique_by_key(live)
    kept, replaced, staged = model_run(existing, live, has_key)
    i = data.draw(st.integers(0, len(staged) - 1))
    k, d, h = staged[i]
    if fault == "drop_row":
        staged = staged[:i] + staged[i + 1:]
    elif fault == "dup_row":
        staged = staged + [staged[i]]
    else:
        staged = staged[:i] + [(k, d, (h + data.draw(st.integers(1, L.MOD - 1))) % L.MOD)] + staged[i + 1:]
    days, inputs, outputs, new_rows, archive_rows = books(existing, live, staged, kept, replaced)
    problems = L.conservation_problems("trips", days, inputs, outputs, new_rows, archive_rows)
    assert len(problems) == 1, problems
    msg = problems[0]
    assert msg.startswith(f"archive trips: day {d}: rows in != rows out: in ") and "\n" not in msg
    assert f"checksum {L.hex64(inputs[d].inflow.checksum)}" in msg
    assert f"staged {outputs.get(d, L.Figures()).rows} rows" in msg


def test_counts_against_the_plan_and_unplanned_days():
    live, kept = L.Figures.of_hashes([1, 2]), L.Figures.of_hashes([3])
    i = L.DayInput(live, kept, L.Figures.of_hashes([9]))
    out = live + kept
    ok = L.conservation_problems("t", [DAY], {DAY: i}, {DAY: out}, {DAY: 2}, {DAY: 2})
    assert ok == []
    assert "2 live rows taken, the plan counted 3" in L.conservation_problems("t", [DAY], {DAY: i}, {DAY: out},
                                                                               {DAY: 3}, {DAY: 2})[0]
    assert "2 archive rows read (1 kept + 1 replaced), the archive's log counts 5" in L.conservation_problems(
        "t", [DAY], {DAY: i}, {DAY: out}, {DAY: 2}, {DAY: 5})[0]
    other = dt.date(2026, 1, 1)
    assert L.conservation_problems("t", [DAY], {DAY: i}, {DAY: out, other: out}, {DAY: 2}, {DAY: 2}) == [
        f"archive t: day {other} was staged but not planned"]
    missing = L.conservation_problems("t", [DAY], {DAY: i}, {}, {DAY: 2}, {DAY: 2})
    assert missing and "staged 0 rows" in missing[0]


# -- the spec's SQL -------------------------------------------------------------------------------------


def test_the_row_hash_flags_nulls_and_normalizes_doubles_in_column_order():
    sql = L.row_hash_sql([("a", "string"), ("x", "double"), ("_lh_load", "string")])
    assert sql.startswith("xxhash64(isnull(`a`), `a`, isnull(`x`), CASE WHEN isnan(`x`)")
    assert sql.endswith("isnull(`_lh_load`), `_lh_load`)")
    assert "CAST('NaN' AS DOUBLE)" in sql and "WHEN `x` = 0.0D THEN 0.0D" in sql
    assert L.row_hash_sql([("we`ird", "int")]) == "xxhash64(isnull(`we``ird`), `we``ird`)"
    assert L.hash_sum_sql("h") == "sum(CAST(h AS DECIMAL(20,0)))"
    with pytest.raises(ValueError):
        L.row_hash_sql([])


def test_stored_columns_are_the_table_columns_then_the_load():
    import yaml

    from lakehouse.definitions import TableDefinition
    from tests.conftest import TRIPS_SMALL

    d = TableDefinition.model_validate(yaml.safe_load(TRIPS_SMALL))
    cols = L.stored_columns(d)
    assert [c for c, _ in cols] == [*d.column_names, "_lh_load"]
    assert dict(cols)["fx_rate"] == "double" and dict(cols)["fare_local"] == "decimal"
    assert L.columns_of(L.columns_text([c for c, _ in cols])) == [c for c, _ in cols]


# -- commit metadata and ledger rows ---------------------------------------------------------------

FIG = st.builds(L.Figures, st.integers(0, 10**12), st.integers(0, L.MOD - 1))
DAY_INPUT = st.builds(L.DayInput, FIG, FIG, FIG)
COMMIT = st.builds(
    L.CommitFigures,
    st.integers(0, 2**40), st.one_of(st.none(), st.integers(0, 2**40)), st.text("0123456789abcdef", max_size=12),
    st.lists(st.sampled_from(["trip_id", "city_id", "_lh_load"]), min_size=1, max_size=3).map(tuple),
    st.dictionaries(st.dates(dt.date(1, 1, 1), dt.date(9999, 12, 31)), st.tuples(DAY_INPUT, FIG), max_size=5)
    .map(lambda m: tuple((d, i, o) for d, (i, o) in sorted(m.items()))),
)


@given(COMMIT)
def test_commit_metadata_round_trips(f):
    text = L.commit_info(f)
    assert "\n" not in text
    body = json.loads(text)[L.COMMIT_INFO_KEY]
    assert body["rows_out"] == sum(o.rows for _, _, o in f.days)
    assert body["rows_in"] == sum(i.inflow.rows for _, i, _ in f.days)
    assert L.parse_commit_info(text) == f


@pytest.mark.parametrize("text", [None, "", "fix-up by hand", "{}", '{"lakehouse.ledger": 3}',
                                  '{"lakehouse.ledger": {"cutoff": 1}}', 42, "{not json lakehouse.ledger"])
def test_other_commit_metadata_carries_no_figures(text):
    assert L.parse_commit_info(text) is None


@given(COMMIT, st.integers(0, 10**6))
def test_ledger_rows_balance_and_round_trip(f, version):
    balanced = L.CommitFigures(f.cutoff, f.previous_cutoff, f.run_id, f.columns,
                               tuple((d, i, i.inflow) for d, i, _ in f.days))
    for r in balanced.rows(version):
        assert L.row_problems(r) == [] and r.archive_version == version and r.kind == "run"
        assert L.LedgerRow.from_record({**r.record(), "unknown": 1}) == r
        assert r.out == r.inflow and r.existing == r.kept + r.replaced


def test_a_tampered_ledger_row_is_reported():
    r = L.ledger_row(100, DAY, L.DayInput(L.Figures.of_hashes([5]), L.Figures.of_hashes([7])),
                     L.Figures.of_hashes([5, 7]), 3)
    assert L.row_problems(r) == []
    from dataclasses import replace

    assert "out 3 rows" in L.row_problems(replace(r, rows_out=3))[0]
    assert "is not live + kept" in L.row_problems(replace(r, checksum_in=L.hex64(1)))[0]
    assert "not a 64-bit checksum" in L.row_problems(replace(r, checksum_out="xyz"))[0]
    with pytest.raises(ValueError):
        L.ledger_row(1, DAY, L.DayInput(), L.Figures(), 1, kind="guess")


# -- what verify believes -----------------------------------------------------------------------------


def run_rows(history: list[tuple[int, dict[dt.date, tuple[list[int], list[int], list[int]]]]], version0: int = 1):
    """Ledger rows of consecutive runs: per run (cutoff, {day: (live, kept, replaced) hashes})."""
    out = []
    for n, (cutoff, days) in enumerate(history):
        for d, (lv, kp, rp) in days.items():
            i = L.DayInput(L.Figures.of_hashes(lv), L.Figures.of_hashes(kp), L.Figures.of_hashes(rp))
            out.append(L.ledger_row(cutoff, d, i, i.inflow, version0 + n, columns=["a", "_lh_load"]))
    return out


def test_believed_takes_each_days_last_committed_write():
    rows = run_rows([(100, {DAY: ([1, 2], [], [])}), (200, {DAY: ([3], [1, 2], [])}),
                     (300, {DAY: ([4], [1, 2, 3], [])})])
    assert L.believed(rows, None) == {}
    assert L.believed(rows, 99) == {}
    assert L.believed(rows, 250)[DAY].cutoff == 200  # the run of 300 is not committed: never believed
    assert L.believed(rows, 300)[DAY].cutoff == 300
    assert L.believed(list(reversed(rows)), 10**9)[DAY].cutoff == 300


def test_the_chain_from_run_to_run():
    good = run_rows([(100, {DAY: ([1, 2], [], [])}), (200, {DAY: ([3, 9], [1], [2])})])
    assert L.chain_problems(good, 200) == []
    bad = run_rows([(100, {DAY: ([1, 2], [], [])}), (200, {DAY: ([3], [1], [])})])  # row 2 vanished between runs
    problems = L.chain_problems(bad, 200)
    assert len(problems) == 1 and "the run of cutoff 200 found 1 rows" in problems[0] and "left 2 rows" in problems[0]
    assert L.chain_problems(bad, 150) == []  # the later run is not committed
    assert L.chain_problems(good + good, 200) == []  # the same rows twice (two writers without the lease)
    from dataclasses import replace

    assert L.chain_problems([bad[0], replace(bad[1], columns="a,b,_lh_load")], 200) == []  # columns added
    assert L.chain_problems([bad[0], replace(bad[1], kind="baseline")], 200) == []


def test_data_against_the_ledger():
    rows = L.believed(run_rows([(100, {DAY: ([1, 2], [], [])})]), 100)
    assert L.data_problems("t", rows, {DAY: L.Figures.of_hashes([2, 1])}) == []
    (msg,) = L.data_problems("t", rows, {DAY: L.Figures.of_hashes([1])})
    assert msg == (f"t: day {DAY} holds 1 rows, checksum {L.hex64(1)}; the ledger (run of cutoff 100, archive version 1) "
                   f"says 2 rows, checksum {L.hex64(3)}")
    assert "holds 0 rows" in L.data_problems("t", rows, {})[0]
    other = dt.date(2026, 1, 2)
    assert L.data_problems("t", rows, {DAY: L.Figures.of_hashes([1, 2]), other: L.Figures.of_hashes([5])}) == [
        f"t: day {other} holds 1 rows, checksum {L.hex64(5)} and has no ledger row"]


# -- injected faults on a staged file (pyarrow only) -------------------------------------------------


def staged_file(tmp_path) -> str:
    t = pa.table({"k": ["a", "b", "c"], "v": [1.0, 2.0, None], "_lh_load": ["l1", "l1", "l2"],
                  "at": pa.array([1, 2, 3], pa.timestamp("us", tz="UTC"))})
    p = tmp_path / "part-0.parquet"
    pq.write_table(t, p)
    return str(p)


@pytest.mark.parametrize("fault,want", [
    ("drop_row", {"k": ["a", "b"], "_lh_load": ["l1", "l1"]}),
    ("dup_row", {"k": ["a", "b", "c", "c"], "_lh_load": ["l1", "l1", "l2", "l2"]}),
    ("change_value", {"k": ["a", "b", "c"], "_lh_load": ["l1", "l1", "fault"]}),
])
def test_faults_damage_the_first_staged_file(tmp_path, monkeypatch, fault, want):
    path = staged_file(tmp_path)
    untouched = str(tmp_path / "other.parquet")
    pq.write_table(pq.read_table(path), untouched)
    monkeypatch.setenv(faults.ENV, fault)
    done = faults.damage_staging({DAY: [path], dt.date(2026, 11, 19): [untouched]})
    assert done == f"{fault} in {path} (day {DAY})"
    t = pq.read_table(path).to_pydict()
    assert {k: t[k] for k in want} == want
    assert pq.read_table(path).schema.field("at").type == pa.timestamp("us", tz="UTC")
    assert pq.read_table(untouched).num_rows == 3


def test_faults_unarmed_or_unknown(tmp_path, monkeypatch):
    path = staged_file(tmp_path)
    monkeypatch.delenv(faults.ENV, raising=False)
    assert faults.damage_staging({DAY: [path]}) is None and pq.read_table(path).num_rows == 3
    monkeypatch.setenv(faults.ENV, "lose_everything")
    with pytest.raises(ConfigError, match="LAKEHOUSE_FAULT='lose_everything': not a fault; one of drop_row"):
        faults.armed()


def test_model_sanity():
    rnd = random.Random(7)
    existing = [(k, DAY, rnd.getrandbits(63)) for k in range(5)]
    live = [(k, DAY, rnd.getrandbits(63)) for k in (3, 4, 7)]
    kept, replaced, staged = model_run(existing, live, True)
    assert len(kept) == 3 and len(replaced) == 2 and len(staged) == 6


# -- the ledger table and the commits' metadata on storage (delta-rs, no Spark) ---------------------


def fake_archive_commit(path: str, meta: str | None, version_rows: int = 1) -> None:
    """An archive-like commit written with delta-rs, with ``meta`` as its userMetadata."""
    from deltalake import CommitProperties, write_deltalake

    props = CommitProperties(custom_metadata={"userMetadata": meta}) if meta is not None else None
    write_deltalake(path, pa.table({"x": list(range(version_rows))}), mode="append", commit_properties=props)


def figures_of(cutoff: int, day: dt.date, hashes: list[int]) -> L.CommitFigures:
    i = L.DayInput(live=L.Figures.of_hashes(hashes))
    return L.CommitFigures(cutoff, None, "r", ("a", "_lh_load"), ((day, i, i.inflow),))


def test_ledger_rows_round_trip_and_a_cutoff_is_written_once(tmp_path):
    from lakehouse.archive import ledger_table
    from lakehouse.warehouse import TablePaths

    paths = TablePaths(str(tmp_path), "t")
    assert ledger_table.read_rows(paths) == [] and ledger_table.ledger_cutoff(paths) is None
    rows = figures_of(100, DAY, [1, 2, 3]).rows(7)
    assert ledger_table.append(paths, rows, 100)
    got = ledger_table.read_rows(paths)
    assert [{**r.record(), "recorded": None} for r in got] == [r.record() for r in rows]
    assert got[0].recorded is not None and ledger_table.ledger_cutoff(paths) == 100
    assert not ledger_table.append(paths, rows, 100) and not ledger_table.append(paths, [], 90)  # replays skip
    assert ledger_table.append(paths, [], 200) and ledger_table.ledger_cutoff(paths) == 200  # a run with no days
    assert len(ledger_table.read_rows(paths)) == 1


def test_figures_are_found_in_the_archive_commits_newest_back_to_the_ledgers_cutoff(tmp_path):
    from lakehouse.archive import ledger_table
    from lakehouse.warehouse import TablePaths

    paths = TablePaths(str(tmp_path), "t")
    fake_archive_commit(paths.archive, None)  # created before the ledger
    fake_archive_commit(paths.archive, L.commit_info(figures_of(100, DAY, [1])))  # version 1
    fake_archive_commit(paths.archive, "a note by hand")  # another writer
    fake_archive_commit(paths.archive, None)  # compaction
    fake_archive_commit(paths.archive, L.commit_info(figures_of(200, DAY, [1, 2])))  # version 4
    fake_archive_commit(paths.archive, L.commit_info(figures_of(300, DAY, [1, 2, 3])))  # version 5
    found = ledger_table.committed_figures(paths, None, 300)
    assert [(v, f.cutoff) for v, f in found] == [(1, 100), (4, 200), (5, 300)]
    assert [(v, f.cutoff) for v, f in ledger_table.committed_figures(paths, 100, 300)] == [(4, 200), (5, 300)]
    assert [(v, f.cutoff) for v, f in ledger_table.committed_figures(paths, 100, 250)] == [(4, 200)]
    assert ledger_table.committed_figures(paths, 300, 300) == [] and ledger_table.committed_figures(paths, 1, None) == []
    rows, reached, _ = ledger_table.pending_rows(paths, 200, 300)
    assert reached == 300 and [(r.cutoff, r.kind, r.archive_version, r.rows_out) for r in rows] == [(300, "recovered", 5, 3)]
    assert ledger_table.pending_rows(paths, 300, 300) == ([], None, 0)


def erasure_figures(cutoff: int, number: int, day, kept: list[int], deleted: list[int]) -> L.CommitFigures:
    i = L.DayInput(kept=L.Figures.of_hashes(kept), deleted=L.Figures.of_hashes(deleted))
    return L.CommitFigures(cutoff, cutoff, "e", ("a", "_lh_load"), ((day, i, i.inflow),), erasure=number)


def test_an_erasures_figures_keep_the_books_rows_out_are_rows_in_less_the_deleted():
    run = figures_of(100, DAY, [1, 2, 3]).rows(5)[0]
    erased = erasure_figures(100, 7, DAY, [1, 3], [2]).rows(6)[0]
    assert (erased.kind, erased.erasure, erased.cutoff, erased.rows_deleted) == ("erasure", 7, 100, 1)
    assert erased.existing == run.out and erased.out.rows == run.out.rows - erased.deleted.rows
    assert L.row_problems(erased) == [] and L.chain_problems([run, erased], 100) == []
    assert L.believed([run, erased], 100)[DAY] == erased  # the later archive version
    later = figures_of(200, DAY, [1, 3]).rows(9)[0]
    later = L.LedgerRow(**{**later.record(), "rows_kept": 2, "checksum_kept": later.checksum_live, "rows_live": 0,
                           "checksum_live": L.ZERO})
    assert L.chain_problems([run, erased, later], 200) == []
    # an erasure whose deleted rows are not what the previous write left breaks the chain
    wrong = erasure_figures(100, 7, DAY, [1, 3], [4]).rows(6)[0]
    assert "erasure 7 (cutoff 100) found 3 rows" in L.chain_problems([run, wrong], 100)[0]
    # the commit's metadata carries the erasure and its deleted rows; a commit from before erasures parses
    f = erasure_figures(100, 7, DAY, [1, 3], [2])
    assert L.parse_commit_info(L.commit_info(f)) == f
    old = json.loads(L.commit_info(figures_of(100, DAY, [1])))
    body = old[L.COMMIT_INFO_KEY]
    body["fields"] = body["fields"][:8]
    body["days"] = {k: v[:8] for k, v in body["days"].items()}
    parsed = L.parse_commit_info(json.dumps(old))
    assert parsed is not None and parsed.erasure == 0 and parsed.days[0][1].deleted == L.Figures()
    assert L.LedgerRow.from_record({**run.record(), "rows_deleted": None, "checksum_deleted": None,
                                    "erasure": None}) == run  # a row of a ledger from before erasures


def test_an_erasures_ledger_rows_are_written_once_at_the_committed_cutoff_and_found_in_the_commits(tmp_path):
    from lakehouse.archive import ledger_table
    from lakehouse.warehouse import TablePaths

    paths = TablePaths(str(tmp_path), "t")
    assert ledger_table.append(paths, figures_of(100, DAY, [1, 2]).rows(1), 100)
    rows = erasure_figures(100, 3, DAY, [1], [2]).rows(2)
    assert ledger_table.append(paths, rows, 100, erasure=3) and ledger_table.ledger_place(paths) == (100, 3)
    assert not ledger_table.append(paths, rows, 100, erasure=3) and not ledger_table.append(paths, rows, 100, 2)
    assert ledger_table.append(paths, [], 200) and ledger_table.ledger_place(paths) == (200, 3)
    assert sorted((r.cutoff, r.erasure) for r in ledger_table.read_rows(paths)) == [(100, 0), (100, 3)]

    fake_archive_commit(paths.archive, L.commit_info(figures_of(100, DAY, [1, 2])))  # version 0
    fake_archive_commit(paths.archive, L.commit_info(erasure_figures(100, 3, DAY, [1], [2])))  # version 1
    fake_archive_commit(paths.archive, L.commit_info(erasure_figures(100, 4, DAY, [], [1])))  # version 2
    found = ledger_table.committed_figures(paths, 100, 100, after_erasure=3)
    assert [(v, f.erasure) for v, f in found] == [(2, 4)]
    pending, _, erasure = ledger_table.pending_rows(paths, 100, 100, 0)
    assert erasure == 4 and [(r.archive_version, r.erasure, r.kind) for r in pending] == [(1, 3, "recovered"),
                                                                                         (2, 4, "recovered")]
    assert ledger_table.committed_figures(paths, 100, 100) == []  # no erasure asked for
