"""One error root for everything lakehouse raises on purpose.

Every message names the table, file, column or job involved and what to do; the CLI prints it
as a single ``error: ...`` line and exits 1.
"""


class LakehouseError(Exception):
    """Root of all expected lakehouse errors."""


class ConfigError(LakehouseError):
    """Bad settings or a bad table definition (names the file and field)."""


class DefinitionError(ConfigError):
    """A table definition in tables/*.yaml is invalid."""


class MigrationError(LakehouseError):
    """A migration could not be discovered, validated or applied."""


class TableNotFound(LakehouseError):
    """A table is not defined, or defined but not created in the warehouse yet."""


class DriftError(LakehouseError):
    """The physical tables in the warehouse do not match tables/*.yaml."""


class InputError(LakehouseError):
    """A whole input file cannot be read (missing, unreadable, unknown columns)."""


class QueryError(LakehouseError):
    """A query failed to parse or run on an engine."""


class QualityGateFailed(LakehouseError):
    """A quality check failed on an archive run's staged batches: the commit is refused (a
    terminal job outcome: the data or the check must change first)."""


class ConservationError(LakehouseError):
    """An archiving run's rows in and rows out differ (count or checksum): nothing was committed."""


class TransientError(LakehouseError):
    """A failure a later attempt can get past: a Delta conflict, a lease held by another job.
    Scheduled jobs retry these with bounded backoff; every other LakehouseError is terminal
    (a bad definition, a failing check): reported once, not retried until something changes."""


class CommitConflict(TransientError):
    """A Delta commit kept conflicting with concurrent writers after all retries."""


def first_line(e: BaseException | str, limit: int | None = None) -> str:
    """The first line of an error's message, or its type's name when it has none: the part of an
    engine's (Spark's, DuckDB's, Great Expectations') multi-line message that goes on one line;
    cut to ``limit`` characters (ending in ...) when given."""
    text = str(e).strip()
    if text:
        line = text.splitlines()[0].strip()
    else:
        line = type(e).__name__ if isinstance(e, BaseException) else ""
    if limit is not None and len(line) > limit:
        line = line[:limit - 3] + "..."
    return line


def one_line(message: str) -> str:
    """A message with every run of whitespace (newlines included) made one space: how the CLI
    prints an error (``error: ...``)."""
    return " ".join(message.split())


_CONFLICTS = frozenset({
    "ConcurrentAppendException", "ConcurrentDeleteDeleteException", "ConcurrentDeleteReadException",
    "ConcurrentTransactionException", "ConcurrentWriteException", "MetadataChangedException",
    "ProtocolChangedException", "StaleVersion",
})
"""Delta's optimistic-concurrency exceptions (delta.exceptions; ``delta_log.StaleVersion`` for
delta-rs commits), by class name: a bottom module does not import Spark's packages to recognise
them."""


def is_conflict(e: BaseException) -> bool:
    """True for Delta's optimistic-concurrency conflicts, which a retry can resolve."""
    if any(c.__name__ in _CONFLICTS for c in type(e).__mro__):
        return True
    text = f"{type(e).__name__} {e}"
    return "DELTA_CONCURRENT" in text or "ConcurrentAppendException" in text or "DELTA_METADATA_CHANGED" in text


def is_transient(e: BaseException) -> bool:
    """Whether a job that failed with ``e`` may succeed when simply tried again."""
    if isinstance(e, TransientError):
        return True
    if isinstance(e, LakehouseError):
        return False
    return is_conflict(e) or isinstance(e, (OSError, TimeoutError))
