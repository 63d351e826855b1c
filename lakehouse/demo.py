"""The end-to-end demo: generate trips, migrate, load (with upserts and bad rows), query on both
engines, and say whether they agree."""

from __future__ import annotations

import csv
import datetime as dt
import json
import os
import random
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from lakehouse import output
from lakehouse.errors import LakehouseError
from lakehouse.storage import is_local

CITIES = {  # city_id: (currency, local units per USD, base fare)
    1: ("USD", 1.0, 3.0),
    5: ("EUR", 0.92, 2.8),
    18: ("BRL", 5.1, 2.0),
    23: ("INR", 83.0, 1.2),
    42: ("MXN", 17.2, 1.8),
}
VEHICLES = ("economy", "comfort", "xl", "moto")
FIELDS = ("trip_id", "city_id", "driver_id", "rider_id", "status", "vehicle_type", "distance_km",
          "duration_s", "surge", "fx_rate", "fare_local", "fare_total", "currency", "is_pool", "event_time")


@dataclass
class DemoFiles:
    """The demo's generated input files and what they hold (rows, bad rows, upserts)."""

    files: list[Path]
    rows_written: int
    bad_rows: int
    upserts: int


def _trip(rng: random.Random, i: int, start: dt.datetime, day_seconds: int) -> dict[str, Any]:
    city = rng.choice(list(CITIES))
    currency, per_usd, base = CITIES[city]
    # Busier in the evening, some trips late at night.
    t = start + dt.timedelta(seconds=rng.randrange(day_seconds))
    distance = round(rng.lognormvariate(1.3, 0.7), 2)
    surge = rng.choice((1.0, 1.0, 1.0, 1.2, 1.5, 2.0))
    fare_usd = round((base + 1.1 * distance) * surge, 2)
    return {
        "trip_id": f"T{i:08d}",
        "city_id": city,
        "driver_id": rng.randrange(1000, 1400),
        "rider_id": rng.randrange(100_000, 200_000),
        "status": 1,
        "vehicle_type": rng.choice(VEHICLES),
        "distance_km": distance,
        "duration_s": int(distance * rng.uniform(90, 240)),
        "surge": surge,
        "fx_rate": round(1 / per_usd, 6),
        "fare_local": f"{fare_usd * per_usd:.2f}",
        "fare_total": fare_usd,
        "currency": currency,
        "is_pool": rng.random() < 0.1,
        "event_time": output.format_timestamp(t),
    }


def generate(folder: Path, rows: int, days: int, end: dt.date, seed: int = 7) -> DemoFiles:
    """Write a realistic trips data set: one CSV per UTC day, a JSON Lines file of status
    updates (upserts of earlier trips), a Parquet file, and some deliberately bad rows."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = random.Random(seed)
    folder.mkdir(parents=True, exist_ok=True)
    per_day = max(1, rows // days)
    files: list[Path] = []
    trips: list[dict[str, Any]] = []
    bad = 0
    written = 0
    for d in range(days):
        day = end - dt.timedelta(days=days - 1 - d)
        start = dt.datetime(day.year, day.month, day.day, tzinfo=dt.timezone.utc)
        day_trips = [_trip(rng, len(trips) + k, start, 86_400) for k in range(per_day)]
        trips.extend(day_trips)
        path = folder / f"trips_{day:%Y%m%d}T0000.csv"
        with path.open("w", newline="", encoding="utf-8") as f:
            w = csv.writer(f)
            w.writerow(FIELDS)
            for k, t in enumerate(day_trips):
                w.writerow(["true" if v is True else "false" if v is False else v for v in (t[c] for c in FIELDS)])
                written += 1
                if k % 997 == 500:  # a few bad lines per file, each with a different problem
                    kind = (k // 997 + d) % 4
                    row = [t[c] for c in FIELDS]
                    if kind == 0:
                        row[FIELDS.index("fare_total")] = "12,50"
                    elif kind == 1:
                        row[FIELDS.index("trip_id")] = ""
                    elif kind == 2:
                        row[FIELDS.index("event_time")] = "yesterday noon"
                    else:
                        row = row[:5]
                    w.writerow(row)
                    written += 1
                    bad += 1
        files.append(path)
    # Status updates: most accepted trips complete, some are cancelled; a few complete twice
    # in the same file (the later line wins).
    updates = folder / f"trips_{end:%Y%m%d}T2300_updates.jsonl"
    n_up = 0
    with updates.open("w", encoding="utf-8") as f:
        for t in trips:
            r = rng.random()
            if r < 0.85:
                u = dict(t, status=2)
            elif r < 0.95:
                u = dict(t, status=3, fare_total=0.0, fare_local="0.00")
            else:
                continue
            f.write(json.dumps(u) + "\n")
            n_up += 1
            written += 1
            if r < 0.01:
                u2 = dict(u, fare_total=round(u["fare_total"] + 1.0, 2))
                f.write(json.dumps(u2) + "\n")
                n_up += 1
                written += 1
        f.write('{"trip_id": "T99999999", "city_id": 1, "event_time": \n')  # truncated line
        f.write('{"trip_id": "T99999998", "city_id": "five", "event_time": "2026-01-01T00:00:00Z"}\n')
        written += 2
        bad += 2
    files.append(updates)
    # Requests that were never accepted, as Parquet.
    requested = []
    for k in range(max(1, rows // 20)):
        day = end - dt.timedelta(days=rng.randrange(days))
        start = dt.datetime(day.year, day.month, day.day, tzinfo=dt.timezone.utc)
        t = _trip(rng, 50_000_000 + k, start, 86_400)
        t.update(status=0, driver_id=None, distance_km=None, duration_s=None, fare_total=None, fare_local=None)
        requested.append(t)
    table = pa.table({c: [r[c] for r in requested] for c in FIELDS})
    ppath = folder / f"trips_{end:%Y%m%d}T2330_requests.parquet"
    pq.write_table(table, ppath)
    files.append(ppath)
    written += len(requested)
    return DemoFiles(files, written, bad, n_up)


def late_file(folder: Path, end: dt.date, days: int, seed: int = 8) -> Path:
    """A file for an early hour that shows up after later files were taken: set aside as late."""
    rng = random.Random(seed)
    day = end - dt.timedelta(days=days - 1)
    start = dt.datetime(day.year, day.month, day.day, 12, tzinfo=dt.timezone.utc)
    path = folder / f"trips_{day:%Y%m%d}T1200_late.csv"
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(FIELDS)
        for k in range(20):
            t = _trip(rng, 90_000_000 + k, start, 3600)
            w.writerow(["true" if v is True else "false" if v is False else v for v in (t[c] for c in FIELDS)])
    return path


def _is_lakehouse_warehouse(path: Path) -> bool:
    return all(
        (p / "live").exists() or p.name in ("_lakehouse", "_quality", "_demo_input") or p.name.startswith(".")
        for p in path.iterdir()
    )


def run_demo(lh: Any, reset: bool, rows: int, days: int) -> bool:
    """Run the demo; True when both engines agreed on every saved query."""
    started = time.monotonic()
    wh = lh.settings.warehouse
    if not is_local(wh):
        raise LakehouseError(f"the demo writes local files; {wh} is not a local folder")
    whp = Path(wh)
    if whp.exists() and any(whp.iterdir()):
        if not reset:
            raise LakehouseError(f"warehouse {wh} is not empty; pass --reset to start the demo afresh")
        if not _is_lakehouse_warehouse(whp):
            raise LakehouseError(f"refusing to reset {wh}: it holds files that are not lakehouse tables")
        import shutil

        shutil.rmtree(whp)
    whp.mkdir(parents=True, exist_ok=True)
    say = click.echo
    say(click.style("== lakehouse demo", bold=True) + f"  project {lh.settings.project}  warehouse {wh}")

    end = dt.datetime.now(dt.timezone.utc).date() - dt.timedelta(days=1)
    data = generate(whp / "_demo_input", rows, days, end)
    say(f"\n-- generated {data.rows_written} input rows in {len(data.files)} files "
        f"({data.upserts} status updates, {data.bad_rows} deliberately bad rows)")
    for f in data.files:
        say(f"   {f.relative_to(whp)}  ({os.path.getsize(f) // 1024} KiB)")

    say("\n-- migrate")
    m = lh.migrate()
    for name in m.applied:
        say(f"   applied {name}")
    if m.drift:
        raise LakehouseError(f"drift after migrating: {m.drift[0]}")

    landing = str(whp / "_demo_input")
    hold = lh.definition("trips").ingest.ingress_delay_interval
    say(f"\n-- ingest --source {Path(landing).relative_to(whp)} (files in implied-time order, "
        f"hold-back window {hold}: later files win)")

    def show(r: Any) -> None:
        for b in r.batches:
            say(f"   batch {b.number}: {', '.join(b.files)}: {b.rows} rows, {b.rows_rejected} rejected, {b.seconds:.1f}s")
        for name in r.late:
            say(f"   {name}: LATE (its time is before the last file taken): set aside, not loaded")
        if r.waiting:
            say(f"   {r.waiting} file(s) held back in the queue (newest - oldest < {hold})")

    show(lh.ingest("trips", landing))
    late = late_file(whp / "_demo_input", end, days)
    say(f"   ... {late.name} arrives late; then the end of the stream (--drain)")
    show(lh.ingest("trips", landing, drain=True))
    entries = lh.ingest_log("trips")
    loaded = sum(e["rows"] for e in entries)
    rejected = sum(e["rows_rejected"] for e in entries)
    say(f"   ingest-log: {len(entries)} files: "
        + ", ".join(f"{n} {s}" for s, n in sorted(Counter(e['status'] for e in entries).items())))
    say(f"   rows in {data.rows_written} = loaded {loaded} + rejected {rejected}: "
        + ("ok" if data.rows_written == loaded + rejected else "MISMATCH"))

    rj = lh.rejects("trips")
    say(f"\n-- rejects ({len(rj)}), first few:")
    for r in rj[:5]:
        say(f"   {Path(r['source']).name}:{r['line']}  {r['reason']}")

    say("\n-- tables")
    for s in lh.tables():
        say(f"   {s.name}: live_rows={s.live_rows} archive_rows={s.archive_rows} rejects={s.rejects} cutoff={s.cutoff}")

    before = lh.query("SELECT count(*) AS n, sum(fare_total) AS fares FROM trips", "duckdb").to_pylist()[0]
    say("\n-- archive (cutoff = now - 24h): older live rows move into sorted, run-length-encoded day batches")
    r = lh.archive("trips")
    say(f"   cutoff {r.plan.previous_cutoff} -> {r.plan.cutoff} ({output.format_timestamp(_utc(r.plan.cutoff))}); "
        f"{r.rows_archived} rows into {len(r.plan.days)} day(s), {r.vector_files} vector files, {r.seconds:.1f}s")
    for s in lh.tables():
        say(f"   {s.name}: live_rows={s.live_rows} archive_rows={s.archive_rows} cutoff={s.cutoff}")
    after = lh.query("SELECT count(*) AS n, sum(fare_total) AS fares FROM trips", "duckdb").to_pylist()[0]
    say(f"   the split view counts every trip once: {before['n']} rows before, {after['n']} after "
        + ("(same)" if before["n"] == after["n"] else "(DIFFERENT)"))
    split = lh.query(
        "SELECT event_date, count(*) AS trips FROM trips GROUP BY event_date ORDER BY event_date", "duckdb").to_pylist()
    from lakehouse import delta_log
    from lakehouse.archive.state import read_snapshot

    p = lh.paths("trips")
    snap = read_snapshot(p.archive)
    cutoff = snap.cutoff if snap else None
    per_day = "SELECT event_date, count(*) AS n FROM t {} GROUP BY event_date"
    arch = {r["event_date"]: r["n"] for r in delta_log.scan(p.archive, per_day.format("")).to_pylist()}
    livep = {r["event_date"]: r["n"] for r in delta_log.scan(
        p.live, per_day.format(f"WHERE event_time >= to_timestamp_seconds({cutoff})")).to_pylist()}
    say(f"   {'day':<12} {'archive':>8} {'live >= cutoff':>15} {'view':>8}")
    for row in split:
        a, lv = arch.get(row["event_date"], 0), livep.get(row["event_date"], 0)
        say(f"   {row['event_date'].isoformat():<12} {a:>8} {lv:>15} {row['trips']:>8}")
    archived_days = sorted({d for d in r.plan.days})
    if archived_days:
        day = archived_days[0]
        dv = lh.vectors("trips", day, "city_id")
        say(f"\n-- vector file {Path(dv.file).relative_to(whp)} (city_id runs: value, count, accumulative)")
        for run in dv.table.to_pylist():
            say(f"   {run['value']!s:>6} {run['count']:>6} {run['accumulative_count']:>6}")
        rng, touched = lh.lookup("trips", day, ["city_id=5", "status=2"])
        check = lh.query(f"SELECT count(*) AS n FROM trips WHERE event_date = DATE'{day}' AND city_id = 5 AND status = 2",
                         "spark").to_pylist()[0]["n"]
        say(f"\n-- lookup city_id=5, status=2 on {day}: records [{rng.start}, {rng.end}) = {rng.count} trips "
            f"by binary search ({touched} vector entries read); SQL on Spark counts {check}")

    say("\n-- saved queries on Spark and DuckDB")
    all_ok = True
    for q in lh.saved_queries():
        s, d, cmp = lh.compare_engines(q.sql)
        all_ok &= cmp.equal
        verdict = click.style("engines agree", fg="green") if cmp.equal else click.style(f"ENGINES DIFFER: {cmp.detail}", fg="red")
        say(f"\n   queries/{q.path.name}: {s.num_rows} rows, {verdict}")
        output.print_table(s.slice(0, 8))
    say("\n-- verify: the same checks on Spark and DuckDB")
    checks = lh.verify("trips")
    for c in checks:
        say(f"   {'ok  ' if c.ok else 'FAIL'} {c.name}" + (f": {c.detail}" if c.detail else ""))
    all_ok &= all(c.ok for c in checks)
    all_ok &= quality_demo(lh, say)
    all_ok &= stream_demo(lh, say, end)
    all_ok &= jobs_demo(lh, say)
    say(click.style("\n== summary", bold=True))
    st = {s.name: s for s in lh.tables()}["trips"]
    say(f"   rows loaded {loaded}, rejected {rejected}; {st.live_rows} live + {st.archive_rows} archived rows (upserts merged)")
    say(f"   tables: {', '.join(s.name for s in lh.tables())}; data in {wh}")
    say(f"   saved queries: {len(lh.saved_queries())}, " + ("all agree on Spark and DuckDB" if all_ok else "SOME DISAGREE"))
    say(f"   took {time.monotonic() - started:.0f}s.  Try: .venv/bin/lakehouse query \"SELECT * FROM trips LIMIT 5\" --engine duckdb")
    return all_ok


def quality_demo(lh: Any, say: Any) -> bool:
    """lakehouse check: the built-in invariants and the trips suite (tables/trips.yaml, quality:)."""
    say("\n-- check: data quality (Great Expectations suite from tables/trips.yaml + built-in invariants)")
    report = lh.check("trips")
    for c in report.checks:
        n = "" if c.unexpected_count is None or c.ok else f": {c.unexpected_count} unexpected, e.g. {c.sample[:2]}"
        say(f"   {'ok  ' if c.ok else 'FAIL'} {c.kind:<11} {c.name}{n}")
    say(f"   Data Docs: {report.docs}")
    return bool(report.ok)


def _pings(rng: random.Random, gateway: str, start: dt.datetime, minutes: int, per_minute: int) -> list[dict[str, Any]]:
    """GPS pings of one gateway's drivers over ``minutes`` minutes from ``start``."""
    base = {"gw-eu": (5, 48.85, 2.35, 1000), "gw-us": (1, 40.71, -74.0, 2000)}[gateway]
    out = []
    for m in range(minutes):
        for _ in range(per_minute):
            out.append({"driver_id": base[3] + rng.randrange(40), "city_id": base[0],
                        "lat": round(base[1] + rng.uniform(-0.1, 0.1), 5), "lon": round(base[2] + rng.uniform(-0.1, 0.1), 5),
                        "speed_kmh": round(rng.uniform(0, 80), 1), "gateway": gateway,
                        "event_time": start + dt.timedelta(minutes=m, seconds=rng.randrange(60))})
    return out


def stream_demo(lh: Any, say: Any, day: dt.date) -> bool:
    """Two gateways write driver_pings through rowtime bounds; one stalls, its lease expires, the
    table moves on, its late pings land in rejects; the archive waits for the watermark."""
    from lakehouse.ingest.producer import to_micros

    d = lh.definition("driver_pings")
    say(f"\n-- streams: driver_pings from two gateways (producers); lateness {d.stream.allowed_lateness}, "
        f"lease {d.stream.lease}, archive.clock: {d.archive.clock} (simulated clock, on {day})")
    rng = random.Random(3)
    t0 = dt.datetime.combine(day, dt.time(10, 0), dt.timezone.utc)
    clock = {"now": to_micros(t0)}
    table = lh.table("driver_pings")
    eu = table.producer("gw-eu", clock=lambda: clock["now"])
    us = table.producer("gw-us", clock=lambda: clock["now"])

    def at(minutes: float) -> None:
        clock["now"] = to_micros(t0 + dt.timedelta(minutes=minutes))

    def status(note: str) -> None:
        s = lh.stream_status("driver_pings", t0 + dt.timedelta(microseconds=clock["now"] - to_micros(t0)))
        live = lh.query("SELECT count(*) AS n FROM driver_pings", "duckdb").to_pylist()[0]["n"]
        holders = ", ".join(f"{p['name']} {output.format_timestamp(p['bound'])[11:19] if p['bound'] else '-'}"
                            + ("" if p["holding"] else " (not holding)") for p in s["producers"] if p["attached"])
        mark = output.format_timestamp(s["watermark"])[11:19] if s["watermark"] else "-"
        say(f"   {note:<44} watermark {mark}  live {live:>5}  staged {s['staged']:>4}  [{holders}]")

    at(0)
    eu.attach(t0)
    us.attach(t0)
    status("gw-eu and gw-us attach at 10:00")
    for m in range(0, 6, 2):  # both send two-minute batches
        at(m + 2)
        eu.insert(_pings(rng, "gw-eu", t0 + dt.timedelta(minutes=m), 2, 30))
        us.insert(_pings(rng, "gw-us", t0 + dt.timedelta(minutes=m), 2, 30))
        status(f"both insert 10:{m:02d}-10:{m + 2:02d}")
    for m in range(6, 10, 2):  # gw-us stalls; gw-eu goes on: its pings wait for gw-us's bound
        at(m + 1)
        eu.insert(_pings(rng, "gw-eu", t0 + dt.timedelta(minutes=m), 2, 30))
        status(f"gw-eu inserts 10:{m:02d}-10:{m + 2:02d}; gw-us is silent")
    at(11.5)
    eu.heartbeat()
    status("gw-us's lease (5m) expires: the table moves on")
    at(12)
    eu.insert(_pings(rng, "gw-eu", t0 + dt.timedelta(minutes=10), 2, 30))
    status("gw-eu inserts 10:10-10:12")
    at(12.5)
    late = _pings(rng, "gw-us", t0 + dt.timedelta(minutes=6), 4, 30)
    r = us.insert(late).as_dict()
    status(f"gw-us is back with 10:06-10:10 ({r['rows_late']} late)")
    rejected = [x for x in lh.rejects("driver_pings") if x["reason"] == "late_row"]
    say(f"   rejects: {len(rejected)} late_row pings of {sorted({x['producer'] for x in rejected})}, bound "
        f"{output.format_timestamp(rejected[0]['bound']) if rejected else '-'} (B minus 2m lateness)")
    events = Counter(e["kind"] for e in lh.stream_events("driver_pings"))
    say("   events: " + ", ".join(f"{k} {n}" for k, n in sorted(events.items())))
    # the archive follows the watermark: with delay 1h, nothing of this hour is sealed yet
    now = t0 + dt.timedelta(hours=3)
    res = lh.archive("driver_pings", now=now, dry_run=True).plan
    say(f"   archive at {output.format_timestamp(now)[11:16]} (clock: bound): cutoff = min(now, watermark "
        f"{output.format_timestamp(res.watermark)[11:19] if res.watermark else '-'} - {d.stream.allowed_lateness} lateness) - 1h = "
        f"{output.format_timestamp(_utc(res.cutoff))[11:19]}: {res.rows} rows would be sealed (now - 1h would seal them all)")
    at(14)
    eu.detach()
    us.detach()
    status("both detach: everything staged is released")
    s, d2, cmp = lh.compare_engines("SELECT table_name, bound, watermark, staged FROM lakehouse_watermarks ORDER BY 1")
    say("   lakehouse_watermarks on Spark and DuckDB: " + ("engines agree" if cmp.equal else f"DIFFER: {cmp.detail}"))
    output.print_table(s)
    inserted = 2 * 3 * 60 + 3 * 60 + len(late)
    live = lh.query("SELECT count(*) AS n FROM driver_pings", "duckdb").to_pylist()[0]["n"]
    ok = live + len(rejected) == inserted and cmp.equal
    say(f"   pings in {inserted} = live {live} + late {len(rejected)}: " + ("ok" if ok else "MISMATCH"))
    return ok


def jobs_demo(lh: Any, say: Any) -> bool:
    """A round of ``jobs run``: archive, compaction and VACUUM of every table, then the history."""
    import pyarrow as pa

    from lakehouse.jobs.compact import human_bytes
    from lakehouse.jobs.runner import interval
    from lakehouse.jobs.schedule import slot_start
    from lakehouse.layout import layout

    say("\n-- jobs run: one round of the scheduled jobs (archive every archive.interval; compact_live, "
        "compact_archive and vacuum every jobs.<name>), as cron or `jobs serve` would run it")

    def sizes() -> dict[tuple[str, str], tuple[int, int]]:
        out = {}
        for t in sorted(lh.definitions()):
            for part in ("live", "archive"):
                f, b, _ = layout(getattr(lh.paths(t), part)).totals()
                out[(t, part)] = (f, b)
        return out

    q = "SELECT count(*) AS n, count(DISTINCT trip_id) AS k FROM trips"
    answer = lh.query(q, "duckdb").to_pylist()
    before, moment = sizes(), dt.datetime.now(dt.timezone.utc)
    time.sleep(1.0)  # the round's commits come after ``moment``
    outcomes = lh.jobs_run()
    failed = 0
    for o in outcomes:
        d = o.as_dict()
        if d["ran"]:
            failed += d["outcome"] != "succeeded"
            run = o.runs[-1]
            say(f"   {d['table']:<13} {d['job']:<16} {d['outcome']} in {run.seconds:.1f}s: {run.rows} rows, "
                f"files {run.files_before} -> {run.files_after}, "
                f"{human_bytes(run.bytes_before)} -> {human_bytes(run.bytes_after)}"
                + (f": {d['error']}" if d["error"] else ""))
        else:
            say(f"   {d['table']:<13} {d['job']:<16} {'busy' if d['busy'] else 'not due'}: {d['busy'] or d['why']}")
    after = sizes()
    say("   data files (Delta log) before -> after the round:")
    for (t, part), (f0, b0) in before.items():
        f1, b1 = after[(t, part)]
        say(f"     {t + '/' + part:<22} {f0:>4} files {human_bytes(b0):>9} -> {f1:>4} files {human_bytes(b1):>9}")
    same = lh.query(q, "duckdb").to_pylist() == answer
    then = lh.query(q, "duckdb", as_of=moment).to_pylist() == answer
    say(f"   trips answers the same after the round: {'yes' if same else 'NO'}; "
        f"query --as-of {output.format_timestamp(moment)} (before the round) too: {'yes' if then else 'NO'}")
    again = lh.jobs_run()
    repeated = [o for o in again if o.ran and o.runs and o.decision.last is not None
                and o.decision.last.outcome == "succeeded" and o.decision.last.started
                >= slot_start(o.runs[-1].started, interval(lh.definition(o.decision.table), o.decision.job))]
    say(f"   a second round right away: {sum(1 for o in again if o.ran)} jobs ran, none twice in a slot of its interval"
        + ("" if not repeated else " (REPEATED!)"))
    say("\n-- jobs history (a Delta table in the warehouse: _lakehouse/jobs; DuckDB reads it too)")
    runs = lh.jobs_history()
    output.print_table(pa.table({
        "started": [output.format_timestamp(r.started)[:19] for r in runs],
        "table": [r.table_name for r in runs], "job": [r.job for r in runs], "outcome": [r.outcome for r in runs],
        "attempt": [r.attempt for r in runs], "seconds": [round(r.seconds, 1) for r in runs],
        "rows": [r.rows for r in runs], "files": [f"{r.files_before} -> {r.files_after}" for r in runs],
        "bytes": [f"{human_bytes(r.bytes_before)} -> {human_bytes(r.bytes_after)}" for r in runs],
    }))
    return failed == 0 and same and then and not repeated


def _utc(cutoff: int) -> dt.datetime:
    return dt.datetime.fromtimestamp(cutoff, dt.timezone.utc)

