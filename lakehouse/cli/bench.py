"""The ``bench`` group: benchmarks that measure lakehouse against a plain baseline in the same
run (archive, backfill, ingest, stream, compact, open). They use their own scratch warehouse,
never the project's."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from lakehouse.cli.context import Ctx
from lakehouse.cli.output import emit, emit_fields, format_option, handle_errors, steps


@click.group()
def bench() -> None:
    """Benchmarks that compare against a baseline in the same run."""


def sampling_options(repeats: int) -> Callable[[Any], Any]:
    """``--repeats`` (default ``repeats``) and ``--warmup/--no-warmup``, as every benchmark
    measured by ``bench.sampling`` takes them."""
    def wrap(f: Any) -> Any:
        f = click.option("--warmup/--no-warmup", default=True, show_default=True,
                         help="One untimed run of each side first.")(f)
        return click.option("--repeats", type=int, default=repeats, show_default=True,
                            help="Timed runs of each side (interleaved).")(f)
    return wrap


def plot_option(what: str) -> Callable[[Any], Any]:
    """``--plot FILE``: also draw ``what`` as a PNG file (``draw``)."""
    return click.option("--plot", "plot_path", type=click.Path(dir_okay=False), default=None,
                        help=f"Also draw {what} as a PNG file.")


def draw(doc: dict[str, Any], plot_path: str | None, plotter: str) -> None:
    """When ``plot_path`` is given, draw ``doc`` there with ``lakehouse.bench.plot``'s
    ``plotter`` and name the file in ``doc["plot"]``."""
    if plot_path:
        from lakehouse.bench import plot

        doc["plot"] = str(getattr(plot, plotter)(doc, plot_path))


@bench.command("archive")
@click.option("--rows", "sizes", type=click.IntRange(min=1), multiple=True, default=(1_000_000,), show_default=True,
              help="Rows of generated trips (repeatable: one set of runs per size, e.g. --rows 1000000 --rows "
                   "3000000 --rows 10000000).")
@click.option("--days", type=click.IntRange(min=1), default=5, show_default=True)
@click.option("--repeats", type=click.IntRange(min=1), default=3, show_default=True,
              help="Timed runs of each side, after a warm-up, interleaved.")
@click.option("--warmup/--no-warmup", default=True, show_default=True,
              help="One untimed run of each side on a small table first.")
@click.option("--staged", is_flag=True, help="Also time archive runs on the earlier staged path (before vs after "
                                              "the one-pass archive, in the same run).")
@click.option("--warehouse", "store", metavar="s3://BUCKET/PREFIX",
              help="Also on this object store (scratch tables in a prefix of their own under it, removed "
                   "at the end): both ratios, and the store's requests per archived day.")
@click.option("--plot", type=click.Path(dir_okay=False, writable=True), metavar="FILE.png",
              help="Also draw the ratio against rows and the archive run's steps into this PNG file.")
@format_option()
@click.pass_obj
@handle_errors
def bench_archive_cmd(obj: Ctx, sizes: tuple[int, ...], days: int, repeats: int, warmup: bool, staged: bool,
                      store: str | None, plot: str | None, fmt: str | None) -> None:
    """Archive generated trips (with and without the books) vs a plain sorted Delta write of the
    same rows: medians, spreads and ratios of REPEATS interleaved runs a side."""
    from lakehouse.bench import bench_archive
    from lakehouse.objectstore import is_s3
    from lakehouse.settings import Settings

    if store is None and obj.warehouse and is_s3(obj.warehouse):
        store = obj.warehouse  # `lakehouse --warehouse s3://... bench archive`: the same
    settings = None
    if store is not None:
        if not is_s3(store):
            raise click.BadParameter(f"{store!r} is not an object-store URI (s3://bucket/prefix); without "
                                     "--warehouse the bench runs on a scratch folder of the local disk",
                                     param_hint="--warehouse")
        settings = Settings.resolve(obj.project, store, obj.master, remote=obj.remote, conf=obj.conf)
    f = obj.fmt(fmt)
    with steps(f) as report:
        doc = bench_archive(settings.master if settings else obj.spark_master, sorted(set(sizes)), days, repeats,
                            settings, report, warmup, staged)
    if plot:
        from lakehouse.bench.plot import plot_archive

        doc["plot"] = str(plot_archive(doc, plot))
    render_archive(f, doc)


def render_archive(fmt: str, doc: dict[str, Any]) -> None:
    """``bench archive``'s figures: a text table (a row a store and size: each side's median and
    spread, the ratios), JSON, or CSV (a row a store and size, as ``emit`` makes it)."""
    from lakehouse.output import text_table

    runs = [(s["store"], s) for s in doc["runs"]]

    def side(s: dict[str, Any], name: str) -> str:
        v = s["sides"][name]
        return f"{v['median_s']:.2f} ±{100 * (v['spread'] or 0) / 2:.0f}%"

    def text() -> None:
        text_table(("store", "rows", "archive s", "no books s", "sorted write s", "ratio", "range", "books"),
                   ([store, f"{s['rows']:,}", side(s, "archive"), side(s, "archive_without_books"),
                     side(s, "baseline_sorted_delta_write"), f"{s['ratio_archive_to_baseline']['median']:.2f}x",
                     f"{s['ratio_archive_to_baseline']['low']:.2f}-{s['ratio_archive_to_baseline']['high']:.2f}",
                     f"{s['ratio_books']['median']:.2f}x"] for store, s in runs),
                   right={"rows", "archive s", "no books s", "sorted write s", "ratio", "range", "books"},
                   title=f"median of {doc['repeats']} runs a side (± half the spread), {doc['days']} days")
        for store, s in runs:
            click.echo(f"{store} {s['rows']:,} rows, archive steps (median s): "
                       + ", ".join(f"{k} {v:.2f}" for k, v in s["archive_steps_seconds"].items()))
            if "archive_staged" in s["sides"]:
                click.echo(f"{store} {s['rows']:,} rows, staged path: {side(s, 'archive_staged')} s, "
                           f"{s['ratio_staged_to_baseline']['median']:.2f}x the sorted write; one pass / staged "
                           f"{s['ratio_one_pass_to_staged']['median']:.2f}x")
            if "requests" in s and s["requests"]["counted"]:
                click.echo(f"{store} {s['rows']:,} rows, requests per archived day: archive "
                           f"{s['requests']['archive']['per_day']}, sorted write "
                           f"{s['requests']['baseline_sorted_delta_write']['per_day']}")
        if doc.get("plot"):
            click.echo(f"plot: {doc['plot']}")

    emit(fmt, doc, text, table="runs", keys=("store", "rows"))


@bench.command("backfill")
@click.option("--rows", type=int, default=200_000, show_default=True)
@click.option("--days", type=int, default=2500, show_default=True)
@sampling_options(repeats=3)
@format_option()
@click.pass_obj
@handle_errors
def bench_backfill_cmd(obj: Ctx, rows: int, days: int, repeats: int, warmup: bool, fmt: str | None) -> None:
    """A backfill of DAYS days archived in one run vs a plain sorted, partitioned Delta write."""
    from lakehouse.bench import bench_backfill

    f = obj.fmt(fmt)
    with steps(f) as report:
        doc = bench_backfill(obj.spark_master, rows, days, repeats=repeats, warmup=warmup, report=report)
    emit_fields(f, doc)


@bench.command("ingest")
@click.option("--small-files", type=int, default=1000, show_default=True)
@click.option("--small-rows", type=int, default=1000, show_default=True, help="Rows per small file.")
@click.option("--big-mb", type=int, default=1024, show_default=True, help="Size of the big file (MB).")
@click.option("--blocks-per-batch", type=int, default=256, show_default=True)
@sampling_options(repeats=3)
@format_option()
@click.pass_obj
@handle_errors
def bench_ingest_cmd(obj: Ctx, small_files: int, small_rows: int, big_mb: int, blocks_per_batch: int,
                     repeats: int, warmup: bool, fmt: str | None) -> None:
    """Ingest many small files and one big file vs Spark's file streaming source (availableNow)."""
    from lakehouse.bench import bench_ingest

    f = obj.fmt(fmt)
    with steps(f) as report:
        doc = bench_ingest(obj.spark_master, small_files, small_rows, big_mb, blocks_per_batch, repeats=repeats,
                           warmup=warmup, report=report)
    emit_fields(f, doc)


@bench.command("stream")
@click.option("--batches", type=int, default=16, show_default=True, help="Batches (hours of event time).")
@click.option("--rows", type=int, default=50_000, show_default=True, help="Rows per batch (split among producers).")
@click.option("--inserts", type=int, default=20, show_default=True, help="One-row inserts timed for the fixed cost.")
@sampling_options(repeats=3)
@plot_option("rows per second and the insert's cost")
@format_option()
@click.pass_obj
@handle_errors
def bench_stream_cmd(obj: Ctx, batches: int, rows: int, inserts: int, repeats: int, warmup: bool,
                     plot_path: str | None, fmt: str | None) -> None:
    """An insert's fixed cost, and rows per second through 1 and 4 producers (insert + release)
    vs plain loads of the same rows."""
    from lakehouse.bench import bench_stream

    f = obj.fmt(fmt)
    with steps(f) as report:
        doc = bench_stream(obj.spark_master, batches, rows, repeats=repeats, inserts=inserts, warmup=warmup,
                           report=report)
    draw(doc, plot_path, "plot_stream")
    emit_fields(f, doc)


@bench.command("incremental")
@click.option("--rows", type=int, default=3_100_000, show_default=True, help="Rows over DAYS + 1 days.")
@click.option("--days", type=int, default=30, show_default=True, help="Days archived before the new one.")
@sampling_options(repeats=3)
@plot_option("the sides and the new day's archive steps")
@format_option()
@click.pass_obj
@handle_errors
def bench_incremental_cmd(obj: Ctx, rows: int, days: int, repeats: int, warmup: bool, plot_path: str | None,
                          fmt: str | None) -> None:
    """Archiving one new day into DAYS archived days vs that day's plain sorted Delta write and
    vs archiving every day at once."""
    from lakehouse.bench import bench_incremental

    f = obj.fmt(fmt)
    with steps(f) as report:
        doc = bench_incremental(obj.spark_master, rows, days, repeats=repeats, warmup=warmup, report=report)
    draw(doc, plot_path, "plot_incremental")
    emit_fields(f, doc)


@bench.command("delete")
@click.option("--rows", type=int, default=10_000_000, show_default=True, help="Rows over DAYS days, all archived.")
@click.option("--days", type=int, default=30, show_default=True)
@click.option("--keys", type=int, default=1000, show_default=True, help="Keys erased by each delete.")
@click.option("--few-days", type=int, default=3, show_default=True, help="Days the second delete's keys fall in.")
@sampling_options(repeats=3)
@format_option()
@click.pass_obj
@handle_errors
def bench_delete_cmd(obj: Ctx, rows: int, days: int, keys: int, few_days: int, repeats: int, warmup: bool,
                     fmt: str | None) -> None:
    """Erasing KEYS keys spread over every archived day, and from FEW_DAYS days only, vs archiving
    every day again; files and bytes each delete wrote."""
    from lakehouse.bench import bench_delete

    f = obj.fmt(fmt)
    with steps(f) as report:
        doc = bench_delete(obj.spark_master, rows, days, keys, few_days, repeats=repeats, warmup=warmup,
                           report=report)
    emit_fields(f, doc)


@bench.command("query")
@click.option("--rows", type=int, default=3_000_000, show_default=True)
@click.option("--days", type=int, default=10, show_default=True, help="Days of rows; all but the last archived.")
@click.option("--lookups", type=int, default=200, show_default=True, help="Calls per timed lookup run.")
@sampling_options(repeats=5)
@plot_option("each query's sides and the lookup against the DuckDB scan")
@format_option()
@click.pass_obj
@handle_errors
def bench_query_cmd(obj: Ctx, rows: int, days: int, repeats: int, lookups: int, warmup: bool,
                    plot_path: str | None, fmt: str | None) -> None:
    """Split queries vs one Delta table of the same rows, DuckDB vs Spark, and lookup vs a
    DuckDB scan of the day."""
    from lakehouse.bench import bench_query

    f = obj.fmt(fmt)
    with steps(f) as report:
        doc = bench_query(obj.spark_master, rows, days, repeats=repeats, lookups=lookups, warmup=warmup,
                          report=report)
    draw(doc, plot_path, "plot_query")
    emit_fields(f, doc)


@bench.command("groups")
@click.option("--rows", type=int, default=10_000_000, show_default=True)
@click.option("--days", type=int, default=30, show_default=True, help="Days of rows; all but the last archived.")
@click.option("--spark", "with_spark", is_flag=True, help="Time both ways on Spark too.")
@sampling_options(repeats=5)
@format_option()
@click.pass_obj
@handle_errors
def bench_groups_cmd(obj: Ctx, rows: int, days: int, with_spark: bool, repeats: int, warmup: bool,
                     fmt: str | None) -> None:
    """Group counts and sums from the archive's run lengths vs DuckDB's scan of the archive."""
    from lakehouse.bench import bench_groups

    f = obj.fmt(fmt)
    with steps(f) as report:
        doc = bench_groups(obj.spark_master, rows, days, repeats=repeats, warmup=warmup, spark=with_spark,
                           report=report)
    emit_fields(f, doc)


@bench.command("memory")
@click.option("--rows", type=int, default=7_500_000, show_default=True, help="Rows of the one day.")
@click.option("--driver-memory-mb", type=int, default=512, show_default=True, help="The JVM of each side.")
@click.option("--repeats", type=int, default=1, show_default=True, help="Runs of each side (interleaved).")
@format_option()
@click.pass_obj
@handle_errors
def bench_memory_cmd(obj: Ctx, rows: int, driver_memory_mb: int, repeats: int, fmt: str | None) -> None:
    """One day several times Spark's memory archived vs its plain sorted Delta write, each in a
    process of its own with a small driver; seconds, spill and peak memory."""
    from lakehouse.bench import bench_memory

    f = obj.fmt(fmt)
    with steps(f) as report:
        doc = bench_memory(obj.spark_master, rows, driver_memory_mb, repeats=repeats, report=report)
    emit_fields(f, doc)


@bench.command("compact")
@click.option("--batches", type=int, default=1000, show_default=True, help="Ingest batches (one small file each).")
@click.option("--rows", type=int, default=200, show_default=True, help="Rows per batch.")
@format_option()
@click.pass_obj
@handle_errors
def bench_compact_cmd(obj: Ctx, batches: int, rows: int, fmt: str | None) -> None:
    """Live's files and bytes before and after optimize on a table of many ingest batches, and
    query times on both engines before (the baseline) and after."""
    from lakehouse.bench import bench_compact

    emit_fields(obj.fmt(fmt), bench_compact(obj.spark_master, batches, rows))


@bench.command("open")
@click.option("--commits", type=int, default=2000, show_default=True, help="Commits of the long table.")
@click.option("--rounds", type=int, default=5, show_default=True, help="Opens of each table per engine (median).")
@format_option()
@click.pass_obj
@handle_errors
def bench_open_cmd(obj: Ctx, commits: int, rounds: int, fmt: str | None) -> None:
    """Open a table of COMMITS commits vs the same rows in one commit, on Spark, DuckDB and delta-rs."""
    from lakehouse.bench import bench_open

    emit_fields(obj.fmt(fmt), bench_open(obj.spark_master, commits, rounds))


@bench.command("age")
@click.option("--rows", type=click.IntRange(min=1), default=1_000_000, show_default=True,
              help="Trips of every layout.")
@click.option("--days", "days", type=click.IntRange(min=1), multiple=True, default=(25, 250, 2500), show_default=True,
              help="A layout: the UTC days the rows are laid over (repeatable).")
@click.option("--operation", "only", multiple=True, metavar="NAME", help="Time only this operation (repeatable).")
@sampling_options(repeats=3)
@plot_option("each operation's seconds per layout and its ratio")
@format_option()
@click.pass_obj
@handle_errors
def bench_age_cmd(obj: Ctx, rows: int, days: tuple[int, ...], only: tuple[str, ...], repeats: int, warmup: bool,
                  plot_path: str | None, fmt: str | None) -> None:
    """The day-to-day operations on the same rows laid over few and many days (a table's age):
    each one's time per layout and the ratio of the most days to the fewest, against the goals."""
    from lakehouse.bench import bench_age

    f = obj.fmt(fmt)
    with steps(f) as report:
        doc = bench_age(obj.spark_master, rows, days, repeats=repeats, warmup=warmup, only=only, report=report)
    draw(doc, plot_path, "plot_age")
    render_age(f, doc)


def render_age(fmt: str, doc: dict[str, Any]) -> None:
    """``bench age``'s figures: a text table (a row an operation: its median per layout, ratio,
    goal and verdict), JSON, or CSV (a row an operation)."""
    from lakehouse.output import text_table

    def text() -> None:
        layouts = [str(n) for n in doc["days"]]
        text_table(("operation", *(f"{n} days s" for n in layouts), "ratio", "goal", "met"),
                   ([o["operation"], *(f"{o['sides'][n]['median_s']:.2f}" for n in layouts),
                     f"{o['ratio_most_to_fewest_days']['median']:.2f}x", f"{o['goal']:.1f}x",
                     "yes" if o["met"] else "NO"] for o in doc["operations"]),
                   right={*(f"{n} days s" for n in layouts), "ratio", "goal"},
                   title=f"{doc['rows']:,} rows; {doc['repeats']} run(s) each, median")
        click.echo(f"goals met: {doc['goals_met']} of {doc['goals']}")
        if doc.get("plot"):
            click.echo(f"plot: {doc['plot']}")

    emit(fmt, doc, text, table="operations", keys=("operation",))


@bench.command("cli")
@click.option("--rounds", type=click.IntRange(min=1), default=3, show_default=True, help="Runs of each command (median).")
@click.option("--rows", type=click.IntRange(min=1), default=20_000, show_default=True,
              help="Demo trips in the scratch warehouse.")
@click.option("--days", type=click.IntRange(min=2), default=4, show_default=True, help="UTC days of those trips.")
@click.option("--command", "only", multiple=True, metavar="NAME", help="Time only this command (repeatable).")
@click.option("--warmup/--no-warmup", default=True, show_default=True,
              help="One untimed run of each command on the server first (a server runs all day).")
@format_option()
@click.pass_obj
@handle_errors
def bench_cli_cmd(obj: Ctx, rounds: int, rows: int, days: int, only: tuple[str, ...], warmup: bool,
                  fmt: str | None) -> None:
    """Each command of README's tour as a new process: with the project's Spark Connect server,
    without one, and on DuckDB where it applies, against the goals (a scratch copy of the project)."""
    from pathlib import Path

    from lakehouse.bench import bench_cli

    render_cli(obj.fmt(fmt), bench_cli(Path(obj.lakehouse.settings.project), obj.spark_master, rounds, rows, days, only,
                                       warmup))


def render_cli(fmt: str, doc: dict[str, Any]) -> None:
    """``bench cli``'s figures: a text table (a row a command, its goal and verdict), JSON, or CSV
    (a row a command)."""
    from lakehouse.output import text_table

    def text() -> None:
        def cell(v: float | None) -> str:
            return "" if v is None else f"{v:.2f}"

        def goal(r: dict[str, Any]) -> str:
            if r["goal_server_s"] is None and r["goal_no_server_s"] is None:
                return ""
            return " / ".join(cell(g) or "-" for g in (r["goal_server_s"], r["goal_no_server_s"]))

        text_table(("command", "server s", "no server s", "duckdb s", "goal (server / none)", "met"),
                   ([r["command"], cell(r["server_s"]), cell(r["no_server_s"]), cell(r["duckdb_s"]), goal(r),
                     ("yes" if r["met"] else "NO") if goal(r) else ""] for r in doc["commands"]),
                   right={"server s", "no server s", "duckdb s"},
                   title=f"{doc['rounds']} run(s) each, median{', after a warm-up on the server' if doc.get('warmup') else ''}; "
                         f"server start {doc['server_start_s']:.1f} s")
        click.echo(f"goals met: {doc['goals_met']} of {doc['goals']}")

    emit(fmt, doc, text, table="commands", keys=("command",))
