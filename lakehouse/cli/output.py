"""The command line's one output layer: the ``--format`` option, a result printed as JSON, CSV or
text, and errors as one ``error: ...`` line on stderr with exit 1.

With ``--format json`` stdout holds exactly one JSON document; logs and progress go to stderr.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import click

from lakehouse.errors import LakehouseError
from lakehouse.output import csv_table, csv_text, dumps, format_timestamp, print_table
from lakehouse.settings import debug_tracebacks

if TYPE_CHECKING:
    import pyarrow as pa

F = TypeVar("F", bound=Callable[..., Any])
FORMATS = ("text", "table", "json", "csv")
"""The output formats (``table`` is another name for ``text``)."""


def format_option(choices: tuple[str, ...] = FORMATS) -> Callable[[F], F]:
    """A command's own ``--format`` option (the root group's ``--format`` applies when it is not given)."""
    return click.option("--format", "fmt", type=click.Choice(choices), default=None, help="Output format.")


def emit(fmt: str, doc: Any, text: Callable[[], None], *, rows: Sequence[Mapping[str, Any]] | None = None,
         keys: Sequence[str] = ()) -> None:
    """Print a command's result in the format ``fmt``: ``doc`` as the one JSON document; ``rows``
    as CSV (the header ``keys`` when there are no rows), for commands with a CSV form; otherwise
    the text that ``text`` prints."""
    if fmt == "json":
        click.echo(dumps(doc))
    elif fmt == "csv" and rows is not None:
        header = tuple(rows[0]) if rows else tuple(keys)
        click.echo(csv_table(header, ([r.get(k) for k in header] for r in rows)), nl=False)
    else:
        text()


def emit_records(fmt: str, records: Sequence[Mapping[str, Any]], keys: Sequence[str], text: Callable[[], None]) -> None:
    """Print a list of records: a JSON list, CSV (header ``keys`` when the list is empty) or text."""
    emit(fmt, records, text, rows=records, keys=keys)


def emit_result(fmt: str, t: pa.Table) -> None:
    """Print a query result: a JSON list of rows, CSV, or a text table with its row count."""
    if fmt == "json":
        click.echo(dumps(t.to_pylist()))
    elif fmt == "csv":
        click.echo(csv_text(t), nl=False)
    else:
        print_table(t)


def emit_fields(fmt: str, doc: Mapping[str, Any]) -> None:
    """Print a document of figures: JSON, or one line a figure (a group's figures indented under it)."""

    def text() -> None:
        width = max([len(k) for k in doc] + [len(k) + 2 for v in doc.values() if isinstance(v, Mapping) for k in v]) + 2
        for k, v in doc.items():
            if isinstance(v, Mapping):
                click.echo(k)
                for k2, v2 in v.items():
                    click.echo(f"  {k2:<{width - 2}} {v2}")
            else:
                click.echo(f"{k:<{width}} {v}")

    emit(fmt, doc, text)


def cutoff_text(cutoff: int) -> str:
    """An archive cutoff (epoch seconds) as the UTC timestamp text output shows."""
    from lakehouse.archive.plan import cutoff_time

    return format_timestamp(cutoff_time(cutoff))


def fail(message: str) -> NoReturn:
    """End the command: one ``error: ...`` line (whitespace folded) on stderr, exit 1."""
    click.echo(f"error: {' '.join(message.split())}", err=True)
    sys.exit(1)


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
