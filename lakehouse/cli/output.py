"""The command line's one output layer: the ``--format`` option, a result printed as JSON, CSV or
text, and errors as one ``error: ...`` line on stderr with exit 1.

With ``--format json`` stdout holds exactly one JSON document; logs and progress go to stderr.

With ``--format csv`` stdout holds one table: a header row, then the data rows (values as in
JSON: timestamps ISO 8601, decimals in full; an empty cell is null). One rule for every command:

- a list of records (``tables``, ``rejects``, ``jobs history``, ``query``): one row a record, a
  column a field; a nested value (a list, a document) is one cell of its JSON text;
- a single document (``archive``, ``lookup``, ``vacuum``, ``migrate``): one row; a nested
  document's fields are columns named ``outer.inner`` (``live.files_before``), a list is one
  cell of its JSON text;
- a document that holds a table (``stream``'s producers, ``vectors``' runs or values,
  ``verify``'s and ``check``'s checks, ``lateness``' sources): one row an entry of that list,
  its fields as columns ``<list>.<field>``, after the document's other fields (as in a single
  document) repeated on every row; an empty list gives one row with those columns empty.

So nothing of the JSON document is left out. A command whose output has no such form (``demo``,
a narrative; ``jobs serve``, which logs rounds until stopped) refuses the format by name before
it does anything: a usage error (exit 2), ``--format csv is not available for 'demo' (use text)``.

Text is for people: no Python reprs, timestamps as ISO 8601 (``format_timestamp``), and an epoch
cutoff always with its instant beside it (``cutoff_text``).
"""

from __future__ import annotations

import contextlib
import functools
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import click

from lakehouse.errors import LakehouseError
from lakehouse.output import (
    csv_document,
    csv_records,
    csv_text,
    dumps,
    format_timestamp,
    inline_text,
    print_table,
)
from lakehouse.settings import debug_tracebacks

if TYPE_CHECKING:
    import pyarrow as pa

F = TypeVar("F", bound=Callable[..., Any])
FORMATS = ("text", "table", "json", "csv")
"""The output formats (``table`` is another name for ``text``)."""
CUTOFF_FIELDS = frozenset({"cutoff", "previous_cutoff"})
"""Fields that hold an archive cutoff (epoch seconds): text shows the instant beside them."""


def format_option(refuse: Sequence[str] = (), why: str = "") -> Callable[[F], F]:
    """A command's own ``--format`` option (the root group's ``--format`` applies when it is not
    given). A format in ``refuse`` (``json``, ``csv``), given here or to the root group, is a usage
    error naming it, raised before the command does anything; ``why`` says why, in the help."""
    allowed = [f for f in ("text", "json", "csv") if f not in refuse]

    def check(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
        chosen = value or getattr(ctx.find_root().obj, "global_format", None) or "text"
        chosen = "text" if chosen == "table" else chosen
        if chosen in refuse:
            name = ctx.command_path.split(" ", 1)[-1]
            raise click.UsageError(f"--format {chosen} is not available for '{name}' (use {' or '.join(allowed)})", ctx)
        return value

    help_text = "Output format." if not refuse else f"Output format: {' or '.join(allowed)} ({why or 'no other form'})."
    # eager: checked before the command's other options, so a refusal is the first thing said
    return click.option("--format", "fmt", type=click.Choice(FORMATS), default=None, callback=check, is_eager=True,
                        help=help_text)


def emit(fmt: str, doc: Any, text: Callable[[], None], *, table: str | None = None, keys: Sequence[str] = ()) -> None:
    """Print a command's result in the format ``fmt``: ``doc`` as the one JSON document, as CSV by
    the module's rule (a list of records, headed by ``keys`` first; a single document; or, with
    ``table``, a document holding a table under that key, its entries' fields ``keys`` first), or
    the text that ``text`` prints."""
    if fmt == "json":
        click.echo(dumps(doc))
    elif fmt == "csv":
        if isinstance(doc, Mapping):
            click.echo(csv_document(doc, table, keys), nl=False)
        else:
            click.echo(csv_records(doc, keys), nl=False)
    else:
        text()


def emit_records(fmt: str, records: Sequence[Mapping[str, Any]], keys: Sequence[str], text: Callable[[], None]) -> None:
    """Print a list of records: a JSON list, CSV (header ``keys``, then any other field) or text."""
    emit(fmt, records, text, keys=keys)


def emit_result(fmt: str, t: pa.Table) -> None:
    """Print a query result: a JSON list of rows, CSV, or a text table with its row count."""
    if fmt == "json":
        click.echo(dumps(t.to_pylist()))
    elif fmt == "csv":
        click.echo(csv_text(t), nl=False)
    else:
        print_table(t)


def emit_fields(fmt: str, doc: Mapping[str, Any]) -> None:
    """Print a document of figures: JSON, CSV (one row), or one line a figure (a group's figures
    indented under it, at any depth)."""

    def width(d: Mapping[str, Any], indent: int) -> int:
        return max([indent + len(k) for k in d]
                   + [width(v, indent + 2) for v in d.values() if isinstance(v, Mapping) and v], default=0)

    w = width(doc, 0) + 2

    def lines(d: Mapping[str, Any], indent: int) -> None:
        for k, v in d.items():
            if isinstance(v, Mapping) and v:
                click.echo(" " * indent + k)
                lines(v, indent + 2)
            else:
                click.echo(f"{' ' * indent}{k:<{w - indent}} {field_text(k, v)}")

    emit(fmt, doc, lambda: lines(doc, 0))


def field_text(key: str, value: Any) -> str:
    """A named field's value inside a line of text: a cutoff with its instant (``cutoff_text``),
    anything else as ``inline_text`` shows it."""
    if key in CUTOFF_FIELDS and (value is None or isinstance(value, int)):
        return cutoff_text(value)
    return inline_text(value)


def cutoff_text(cutoff: int | None) -> str:
    """An archive cutoff as text shows it: its epoch seconds and the UTC instant, ``1768176000
    (2026-01-12T00:00:00Z)``; ``none`` before the first archive run."""
    from lakehouse.archive.plan import cutoff_time

    return "none" if cutoff is None else f"{cutoff} ({format_timestamp(cutoff_time(cutoff))})"


def fail(message: str) -> NoReturn:
    """End the command: one ``error: ...`` line (whitespace folded) on stderr, exit 1."""
    click.echo(f"error: {' '.join(message.split())}", err=True)
    sys.exit(1)


@contextlib.contextmanager
def steps(fmt: str) -> Iterator[Callable[[str], None]]:
    """What a long command is doing, as one line on stderr that it updates (rich's status, with
    the seconds since the start; gone at the end): a report function for the work to call. Only
    on a terminal and not under ``--format json``; elsewhere the report says nothing."""
    from rich.console import Console

    console = Console(stderr=True)
    if fmt == "json" or not console.is_terminal:
        yield lambda _: None
        return
    started = time.monotonic()
    with console.status("starting") as status:
        yield lambda what: status.update(f"{what}  [{time.monotonic() - started:.0f} s]")


def handle_errors(fn: F) -> F:
    """Wrap a command: lakehouse errors (and, as a last line of defence, any other exception)
    become one ``error:`` line and exit 1; usage errors stay click's (exit 2)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except LakehouseError as e:
            fail(str(e))
        except KeyboardInterrupt:
            fail("interrupted")
        except (click.exceptions.Exit, click.ClickException):
            raise
        except Exception as e:  # noqa: BLE001 - the last line of defence: one line, exit 1
            if debug_tracebacks():
                raise
            msg = str(e).strip().splitlines()[0] if str(e).strip() else ""
            fail(f"unexpected {type(e).__name__}: {msg} (set LAKEHOUSE_DEBUG=1 for the traceback)")

    return wrapper  # type: ignore[return-value]
