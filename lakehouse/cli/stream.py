"""Commands about streams: the ``producer`` group (attach, insert, bound, heartbeat, detach) and
``stream`` (a table's bound, watermark, staged rows and producers, or its event log)."""

from __future__ import annotations

import datetime as dt
import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import click

from lakehouse.cli.context import Ctx, parse_now
from lakehouse.cli.output import emit, emit_records, fail, format_option, handle_errors
from lakehouse.output import format_timestamp, text_table

if TYPE_CHECKING:
    from lakehouse.ingest.producer import Producer

F = TypeVar("F", bound=Callable[..., Any])
NOW_HELP = "The clock for this operation (ISO 8601; replays and tests)."
"""The help of the streams' --now option."""
EVENT_KEYS = ("kind", "at", "producer", "bound", "rows", "rejected", "detail")
"""The fields of a stream event (the CSV header of ``stream --events``)."""
PRODUCER_KEYS = ("name", "bound", "staged", "lease_expires", "rejected", "attached", "holding")
"""The fields of a producer in ``stream`` (its CSV columns ``producers.<field>``, after the stream's own)."""


def _ts(value: Any) -> str:
    """A timestamp as text, or ``undefined`` when there is none."""
    return format_timestamp(value) if value else "undefined"


@dataclass(frozen=True)
class ProducerRef:
    """What the ``producer`` group hands its commands: the invocation, the table and the producer's name."""

    ctx: Ctx
    table: str
    name: str


@click.group()
@click.argument("table")
@click.argument("name")
@click.pass_context
def producer(ctx: click.Context, table: str, name: str) -> None:
    """Producer NAME of TABLE: attach, insert rows, assert bounds, heartbeat, detach.

    Rows enter live in event-time order: a producer's rows wait (staged) until every attached
    producer's bound has passed them. A row earlier than max(stream bound, the producer's bound)
    minus stream.allowed_lateness is rejected late_row."""
    ctx.obj = ProducerRef(ctx.obj, table, name)


def _producer_doc(ref: ProducerRef, now: str | None) -> dict[str, Any]:
    """The producer's state and its stream's, as the producer commands print them."""
    status = ref.ctx.lakehouse.stream_status(ref.table, parse_now(now))
    mine = next((p for p in status["producers"] if p["name"] == ref.name), None)
    return {"table": ref.table, "producer": ref.name, **(mine or {"attached": False}),
            "stream_bound": status["bound"], "watermark": status["watermark"], "stream_staged": status["staged"]}


def _producer_op(fn: F) -> F:
    """Make ``fn(producer, ...) -> (what it did, extra fields)`` a producer command: --now and
    --format, the producer opened at --now, then its state printed (exit 1 when an insert failed)."""

    @click.option("--now", default=None, help=NOW_HELP)
    @format_option()
    @click.pass_obj
    @handle_errors
    @functools.wraps(fn)
    def wrapper(ref: ProducerRef, *args: Any, now: str | None, fmt: str | None, **kw: Any) -> None:
        from lakehouse.ingest.producer import check_name

        check_name(ref.name)
        at = parse_now(now)
        if at is not None and at > dt.datetime.now(dt.timezone.utc) + dt.timedelta(minutes=1):
            fail(f"{ref.table}: producer {ref.name!r}: --now {now} is ahead of the clock; a lease renewed "
                 "in the future would hold the watermark long after the producer is gone")
        did, extra = fn(ref.ctx.lakehouse.producer(ref.table, ref.name, at), *args, **kw)
        doc = _producer_doc(ref, now)
        doc.update(extra)

        def text() -> None:
            click.echo(f"{doc['table']}: producer {doc['producer']!r} {did}; its bound "
                       f"{_ts(doc.get('bound'))}, {doc.get('staged', 0)} rows staged; stream bound "
                       f"{_ts(doc['stream_bound'])}, watermark {_ts(doc['watermark'])}")

        emit(ref.ctx.fmt(fmt), doc, text)
        if extra.get("insert", {}).get("error"):
            fail(extra["insert"]["error"])

    return wrapper  # type: ignore[return-value]


@producer.command("attach")
@click.option("--bound", "bound", default=None, help="Assert this bound on attaching (ISO 8601).")
@_producer_op
def producer_attach(p: Producer, bound: str | None) -> tuple[str, dict[str, Any]]:
    """Attach (at the stream's bound, or --bound if later); attaching again renews the lease."""
    p.attach(parse_now(bound))
    return "attached", {}


@producer.command("insert")
@click.argument("files", nargs=-1, required=True)
@click.option("--input-format", "input_format", type=click.Choice(["csv", "json", "parquet"]), default=None,
              help="Input file format (default: from each file's extension; .gz allowed).")
@click.option("--force", is_flag=True, help="Insert files whose content this producer inserted before.")
@_producer_op
def producer_insert(p: Producer, files: tuple[str, ...], input_format: str | None, force: bool) -> tuple[str, dict[str, Any]]:
    """Insert the rows of FILES (one batch); late rows and bad rows go to rejects."""
    r = p.insert_files(list(files), input_format, force=force)
    d = r.as_dict()
    if r.files_rejected_now:  # printed with the rest, then exit 1 (as `load`)
        first = r.files_rejected_now[0]
        d["error"] = f"{first.error}; the file is in `lakehouse rejects {p.definition.name}`"
    return (f"inserted {d['rows_loaded']} rows ({d['rows_late']} late, {d['rows_rejected']} rejected in all)"
            + "".join(f"; {f.source}: skipped: {f.skipped}" for f in r.files_skipped), {"insert": d})


@producer.command("bound")
@click.argument("ts")
@_producer_op
def producer_bound(p: Producer, ts: str) -> tuple[str, dict[str, Any]]:
    """Promise that no later row of this producer is earlier than TS."""
    p.bound(parse_now(ts))
    return f"asserted bound {ts}", {}


@producer.command("heartbeat")
@_producer_op
def producer_heartbeat(p: Producer) -> tuple[str, dict[str, Any]]:
    """Renew the producer's lease (it keeps holding the watermark)."""
    p.heartbeat()
    return "renewed its lease", {}


@producer.command("detach")
@_producer_op
def producer_detach(p: Producer) -> tuple[str, dict[str, Any]]:
    """Detach: the producer stops holding the watermark; its staged rows go when it passes them."""
    p.detach()
    return "detached", {}


@click.command()
@click.argument("table")
@click.option("--events", is_flag=True, help="List attach/detach/expiry/bound/insert/release events instead.")
@click.option("--now", default=None, help=NOW_HELP)
@format_option()
@click.pass_obj
@handle_errors
def stream(obj: Ctx, table: str, events: bool, now: str | None, fmt: str | None) -> None:
    """TABLE's stream: its bound, watermark, staged rows and producers (or --events)."""
    if events:
        _stream_events(obj, table, fmt)
        return
    doc = obj.lakehouse.stream_status(table, parse_now(now))
    doc.pop("table", None)

    def text() -> None:
        click.echo(f"{table}: bound {_ts(doc['bound'])}, watermark {_ts(doc['watermark'])}, "
                   f"{doc['staged']} rows staged")
        for p in doc["producers"]:
            state = "holding" if p["holding"] else ("attached, lease expired" if p["attached"] else "detached")
            click.echo(f"  {p['name']}: {state}; bound {_ts(p['bound'])}, "
                       f"{p['staged']} staged, {p['rejected']} rejected late"
                       + (f", lease until {format_timestamp(p['lease_expires'])}" if p["lease_expires"] else ""))

    emit(obj.fmt(fmt), doc, text, table="producers", keys=PRODUCER_KEYS)


def _stream_events(obj: Ctx, table: str, fmt: str | None) -> None:
    """``stream --events``: the stream's event log, oldest first."""
    docs = obj.lakehouse.stream_events(table)

    def text() -> None:
        if not docs:
            click.echo(f"{table}: no stream events")
            return
        text_table(("at", "kind", "producer", "detail"),
                   ([format_timestamp(d["at"]), d["kind"], d["producer"] or "-",
                     "; ".join(x for x in (f"bound {format_timestamp(d['bound'])}" if d["bound"] else "",
                                           f"{d['rows']} rows" if d["rows"] is not None else "",
                                           f"{d['rejected']} late" if d["rejected"] else "", d["detail"] or "") if x)]
                    for d in docs))

    emit_records(obj.fmt(fmt), docs, EVENT_KEYS, text)
