"""Conservation on every archive move: the checksum spec and the ledger's arithmetic. Pure.

**The checksum.** A row's hash is Spark's ``xxhash64`` (seed 42) over, for every stored column
in the table's order (the visible columns, then the hidden load column), an is-null flag and
the value; doubles are normalized first (every NaN is one NaN, -0.0 is 0.0), so equal rows hash
equally and a null never trades places with a value unnoticed. The partition column is not
hashed: figures are kept per UTC day. A set of rows has the figures (count, sum of the hashes
modulo 2^64): order-independent, additive (the figures of a union are the sum of the figures of
its parts) and file-layout independent (compaction's sorted rewrite keeps them).

**The books of one day of one run.** With E the day's archive rows at the plan's version and L
the live rows the run takes for that day::

    kept     = E without the rows whose key a live row replaces     replaced = E - kept
    in       = L + kept                                             existing = kept + replaced
    out      = the staged rows read back just before the commit

An erasure's rewrite of a day (``lakehouse delete``) takes no live row and splits E into the
rows it keeps and the rows it deletes (``deleted``): in = kept, existing = kept + deleted, so
rows out = rows in = existing - deleted. Its ledger row carries the erasure's number; the
cutoff is the one committed (an erasure never moves it).

The run commits only when ``in == out`` for every day (rows and checksum), L has the plan's
count and E the archive's count (from the Delta log). The figures go into the archive commit's
``userMetadata`` (``commit_info``) and, right after the commit, into the table's ledger (one
row per run and day). The archive commit is the truth: a ledger row whose cutoff the archive
has not committed is never believed; a missing one is rebuilt from the commit's metadata.

**What verify checks.** Per day, the ledger's latest believed row (``believed``) against the
data now (``data_problems``); each row's own arithmetic (``row_problems``); and the chain
(``chain_problems``): a run's existing rows are what the previous run of that day left.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any

from lakehouse.sql import spark_ident

if TYPE_CHECKING:
    from lakehouse.definitions import TableDefinition

SPEC = "xxhash64-v1"
"""The checksum spec's name, kept with every figure (a later spec never compares with this one)."""
MOD = 1 << 64
LEDGER_APP_ID = "lakehouse.ledger"
"""The ledger table's SetTransaction app id: its version is the last cutoff the ledger holds."""
LEDGER_ERASURE_APP_ID = "lakehouse.ledger.erasure"
"""Its version is the number of the last erasure whose rows the ledger holds."""
COMMIT_INFO_KEY = "lakehouse.ledger"
"""The key of the figures in the archive commit's ``userMetadata`` (a JSON object)."""

KINDS = ("run", "erasure", "recovered", "baseline")
"""How a ledger row came to be: written by the run (or the erasure) that committed it; rebuilt
from the archive commit's metadata after a crash between the commit and the ledger write; or
taken from the data for days archived before the table had a ledger (nothing to vouch for their
past)."""
ZERO = "0" * 16


# -- the checksum spec ----------------------------------------------------------------------------


def stored_columns(d: "TableDefinition") -> list[tuple[str, str]]:
    """The columns a row's hash covers, with their type names: the table's columns in order,
    then the hidden load column (the partition column is the day the figures are kept by)."""
    from lakehouse.definitions import LOAD_COLUMN

    return [*((c.name, c.type.name) for c in d.columns), (LOAD_COLUMN, "string")]


def value_sql(name: str, type_name: str) -> str:
    """A column's value as hashed: doubles normalized (one NaN, no -0.0), others as they are."""
    c = spark_ident(name)
    if type_name == "double":
        return f"CASE WHEN isnan({c}) THEN CAST('NaN' AS DOUBLE) WHEN {c} = 0.0D THEN 0.0D ELSE {c} END"
    return c


def row_hash_sql(columns: Sequence[tuple[str, str]]) -> str:
    """Spark SQL for one row's 64-bit hash over ``(column, type name)`` pairs, in order."""
    if not columns:
        raise ValueError("a row hash needs at least one column")
    args = []
    for name, type_name in columns:
        args.append(f"isnull({spark_ident(name)})")
        args.append(value_sql(name, type_name))
    return f"xxhash64({', '.join(args)})"


def hash_sum_sql(row_hash: str) -> str:
    """Spark SQL summing row hashes without overflow (a signed sum, folded modulo 2^64 later)."""
    return f"sum(CAST({row_hash} AS DECIMAL(20,0)))"


def columns_text(columns: Sequence[str]) -> str:
    """The ledger's ``columns`` field: the hashed columns, comma-separated."""
    return ",".join(columns)


def columns_of(text: str) -> list[str]:
    """The column names a ledger row's ``columns`` field lists (``columns_text`` reversed)."""
    return [c for c in text.split(",") if c]


def fold(total: Any) -> int:
    """A sum of signed 64-bit hashes (int or Decimal, None for no rows) modulo 2^64."""
    return int(total or 0) % MOD


def hex64(x: int) -> str:
    """A checksum as the 16 hex digits the ledger and commit metadata store."""
    return f"{x % MOD:016x}"


def unhex64(s: str) -> int:
    """A checksum from its 16 hex digits (ValueError naming it when it is not one)."""
    if not isinstance(s, str) or len(s) != 16 or any(ch not in "0123456789abcdefABCDEF" for ch in s):
        raise ValueError(f"not a 64-bit checksum: {s!r}")
    return int(s, 16)


# -- figures ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Figures:
    """The figures of a set of rows: how many, and the sum of their hashes modulo 2^64."""

    rows: int = 0
    checksum: int = 0

    @classmethod
    def of(cls, rows: Any, hash_sum: Any) -> "Figures":
        """Figures from a count and a hash sum as an aggregate returns them (None for no rows)."""
        return cls(int(rows or 0), fold(hash_sum))

    @classmethod
    def of_hashes(cls, hashes: Iterable[int]) -> "Figures":
        """Figures of the given row hashes."""
        n = total = 0
        for h in hashes:
            n += 1
            total += h
        return cls(n, fold(total))

    def __add__(self, other: "Figures") -> "Figures":
        return Figures(self.rows + other.rows, (self.checksum + other.checksum) % MOD)

    def __sub__(self, other: "Figures") -> "Figures":
        return Figures(self.rows - other.rows, (self.checksum - other.checksum) % MOD)

    def text(self) -> str:
        """The figures for a message: ``N rows, checksum <hex>``."""
        return f"{self.rows} rows, checksum {hex64(self.checksum)}"


@dataclass(frozen=True)
class DayInput:
    """What a run takes for one day: live rows, and the day's archive rows kept, replaced (by a
    live row of the same key) or deleted (by an erasure)."""

    live: Figures = Figures()
    kept: Figures = Figures()
    replaced: Figures = Figures()
    deleted: Figures = Figures()

    @property
    def inflow(self) -> Figures:
        """The rows going into the day's batch: live rows taken plus archive rows kept."""
        return self.live + self.kept

    @property
    def existing(self) -> Figures:
        """The day's archive rows before the run: kept, replaced and deleted."""
        return self.kept + self.replaced + self.deleted


def describe_input(i: DayInput) -> str:
    """What a day takes in, for a conservation message (rows by origin and the checksum)."""
    deleted = f", {i.deleted.rows} deleted" if i.deleted.rows else ""
    return (f"in {i.inflow.rows} rows ({i.live.rows} live + {i.kept.rows} kept, {i.replaced.rows} replaced"
            f"{deleted}), checksum {hex64(i.inflow.checksum)}")


def conservation_problems(
    table: str,
    days: Sequence[dt.date],
    inputs: Mapping[dt.date, DayInput],
    outputs: Mapping[dt.date, Figures],
    new_rows: Mapping[dt.date, int],
    archive_rows: Mapping[dt.date, int],
) -> list[str]:
    """Why a run's staged batch must not be committed, one message a day (empty: commit).

    Per planned day: rows in == rows out and checksum in == checksum out; the live rows taken
    are the plan's count, the day's existing rows the archive's count at the plan's version.
    A day staged or taken that was not planned is a problem too."""
    out: list[str] = []
    planned = set(days)
    for d in sorted((set(outputs) | set(inputs)) - planned):
        out.append(f"archive {table}: day {d} was staged but not planned")
    for d in sorted(planned):
        i = inputs.get(d, DayInput())
        o = outputs.get(d, Figures())
        if i.inflow != o:
            out.append(f"archive {table}: day {d}: rows in != rows out: {describe_input(i)}; "
                       f"staged {o.text()}")
        elif i.live.rows != new_rows.get(d, 0):
            out.append(f"archive {table}: day {d}: {i.live.rows} live rows taken, the plan counted "
                       f"{new_rows.get(d, 0)}")
        elif i.existing.rows != archive_rows.get(d, 0):
            deleted = f" + {i.deleted.rows} deleted" if i.deleted.rows else ""
            out.append(f"archive {table}: day {d}: {i.existing.rows} archive rows read "
                       f"({i.kept.rows} kept + {i.replaced.rows} replaced{deleted}), the archive's log counts "
                       f"{archive_rows.get(d, 0)}")
    return out


# -- ledger rows ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class LedgerRow:
    """One day of one archiving run or erasure, as the ledger table holds it (checksums as 16
    hex digits)."""

    cutoff: int
    day: dt.date
    rows_live: int
    rows_kept: int
    rows_replaced: int
    rows_out: int
    checksum_live: str
    checksum_kept: str
    checksum_replaced: str
    checksum_in: str
    checksum_out: str
    archive_version: int
    previous_cutoff: int | None = None
    kind: str = "run"
    run_id: str = ""
    spec: str = SPEC
    columns: str = ""
    recorded: dt.datetime | None = None
    rows_deleted: int = 0
    checksum_deleted: str = ZERO
    erasure: int = 0
    """The erasure that wrote the row (0: an archiving run); with ``cutoff``, the row's place."""

    @property
    def live(self) -> Figures:
        """The live rows the run took for the day."""
        return Figures(self.rows_live, unhex64(self.checksum_live))

    @property
    def kept(self) -> Figures:
        """The day's archive rows the run kept (no live row replaced their key)."""
        return Figures(self.rows_kept, unhex64(self.checksum_kept))

    @property
    def replaced(self) -> Figures:
        """The day's archive rows replaced by live rows of the same key."""
        return Figures(self.rows_replaced, unhex64(self.checksum_replaced))

    @property
    def inflow(self) -> Figures:
        """The rows the run put into the day's batch (live + kept)."""
        return Figures(self.rows_live + self.rows_kept, unhex64(self.checksum_in))

    @property
    def out(self) -> Figures:
        """The rows the run staged and read back before its commit."""
        return Figures(self.rows_out, unhex64(self.checksum_out))

    @property
    def deleted(self) -> Figures:
        """The day's archive rows an erasure deleted."""
        return Figures(self.rows_deleted, unhex64(self.checksum_deleted))

    @property
    def existing(self) -> Figures:
        """The day's archive rows before the run (kept + replaced + deleted)."""
        return self.kept + self.replaced + self.deleted

    def record(self) -> dict[str, Any]:
        """The row as a record of the ledger table (one value per field)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_record(cls, r: Mapping[str, Any]) -> "LedgerRow":
        """A row from a ledger table record (fields the row does not know are ignored)."""
        names = {f.name for f in fields(cls)}
        added: dict[str, Any] = {"rows_deleted": 0, "checksum_deleted": ZERO, "erasure": 0}  # null in older ledgers
        return cls(**{k: (added[k] if v is None and k in added else v) for k, v in r.items() if k in names})


LEDGER_FIELDS = tuple(f.name for f in fields(LedgerRow))


def ledger_row(
    cutoff: int, day: dt.date, i: DayInput, out: Figures, archive_version: int, *,
    previous_cutoff: int | None = None, kind: str = "run", run_id: str = "", columns: Sequence[str] = (),
    recorded: dt.datetime | None = None, erasure: int = 0,
) -> LedgerRow:
    """The ledger row of one day of a run, from its input and output figures."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    return LedgerRow(
        cutoff=int(cutoff), day=day, rows_live=i.live.rows, rows_kept=i.kept.rows, rows_replaced=i.replaced.rows,
        rows_out=out.rows, checksum_live=hex64(i.live.checksum), checksum_kept=hex64(i.kept.checksum),
        checksum_replaced=hex64(i.replaced.checksum), checksum_in=hex64(i.inflow.checksum),
        checksum_out=hex64(out.checksum), archive_version=int(archive_version), previous_cutoff=previous_cutoff,
        kind=kind, run_id=run_id, columns=columns_text(columns), recorded=recorded,
        rows_deleted=i.deleted.rows, checksum_deleted=hex64(i.deleted.checksum), erasure=int(erasure),
    )


def baseline_row(cutoff: int, day: dt.date, out: Figures, archive_version: int, columns: Sequence[str],
                 recorded: dt.datetime | None = None) -> LedgerRow:
    """A day archived before the ledger: what it holds now, as if kept whole."""
    return ledger_row(cutoff, day, DayInput(kept=out), out, archive_version, kind="baseline", columns=columns,
                      recorded=recorded)


# -- the figures in the archive commit's metadata --------------------------------------------------

DAY_FIELDS = ("rows_live", "rows_kept", "rows_replaced", "rows_out",
              "checksum_live", "checksum_kept", "checksum_replaced", "checksum_out",
              "rows_deleted", "checksum_deleted")
OPTIONAL_FIELDS = ("rows_deleted", "checksum_deleted")
"""Day fields a commit made before erasures existed does not carry (read as none deleted)."""


@dataclass(frozen=True)
class CommitFigures:
    """The ledger's figures of one archive commit, as its ``userMetadata`` carries them."""

    cutoff: int
    previous_cutoff: int | None
    run_id: str
    columns: tuple[str, ...]
    days: tuple[tuple[dt.date, DayInput, Figures], ...]
    spec: str = SPEC
    erasure: int = 0
    """The erasure that made the commit (0: an archiving run)."""

    def rows(self, archive_version: int, kind: str | None = None,
             recorded: dt.datetime | None = None) -> list[LedgerRow]:
        """One ledger row per day of the commit, at archive version ``archive_version`` (kind:
        ``run`` or ``erasure`` by default)."""
        kind = kind or ("erasure" if self.erasure else "run")
        return [ledger_row(self.cutoff, d, i, o, archive_version, previous_cutoff=self.previous_cutoff, kind=kind,
                           run_id=self.run_id, columns=self.columns, recorded=recorded, erasure=self.erasure)
                for d, i, o in self.days]


def commit_info(f: CommitFigures) -> str:
    """The archive commit's ``userMetadata``: one JSON object, the figures under COMMIT_INFO_KEY."""
    days = {
        d.isoformat(): [i.live.rows, i.kept.rows, i.replaced.rows, o.rows,
                        hex64(i.live.checksum), hex64(i.kept.checksum), hex64(i.replaced.checksum), hex64(o.checksum),
                        i.deleted.rows, hex64(i.deleted.checksum)]
        for d, i, o in f.days
    }
    body = {
        "spec": f.spec, "cutoff": f.cutoff, "previous_cutoff": f.previous_cutoff, "run_id": f.run_id,
        "columns": list(f.columns),
        "rows_in": sum(i.inflow.rows for _, i, _ in f.days),
        "rows_replaced": sum(i.replaced.rows for _, i, _ in f.days),
        "rows_out": sum(o.rows for _, _, o in f.days),
        "fields": list(DAY_FIELDS), "days": days,
    }
    if f.erasure:
        body["erasure"] = f.erasure
        body["rows_deleted"] = sum(i.deleted.rows for _, i, _ in f.days)
    return json.dumps({COMMIT_INFO_KEY: body}, separators=(",", ":"), sort_keys=True)


def parse_commit_info(text: Any) -> CommitFigures | None:
    """The figures in a commit's ``userMetadata``; None when it holds none (another writer's
    commit, compaction, a run from before the ledger) or they do not parse."""
    if not isinstance(text, str) or COMMIT_INFO_KEY not in text:
        return None
    try:
        body = json.loads(text)[COMMIT_INFO_KEY]
        names = body["fields"]
        pos = {name: names.index(name) for name in DAY_FIELDS if name in names or name not in OPTIONAL_FIELDS}
        days = []
        for day, v in sorted(body["days"].items()):
            deleted = (Figures(int(v[pos["rows_deleted"]]), unhex64(v[pos["checksum_deleted"]]))
                       if "rows_deleted" in pos and "checksum_deleted" in pos else Figures())
            i = DayInput(Figures(int(v[pos["rows_live"]]), unhex64(v[pos["checksum_live"]])),
                         Figures(int(v[pos["rows_kept"]]), unhex64(v[pos["checksum_kept"]])),
                         Figures(int(v[pos["rows_replaced"]]), unhex64(v[pos["checksum_replaced"]])), deleted)
            days.append((dt.date.fromisoformat(day), i, Figures(int(v[pos["rows_out"]]), unhex64(v[pos["checksum_out"]]))))
        prev = body.get("previous_cutoff")
        return CommitFigures(int(body["cutoff"]), None if prev is None else int(prev), str(body.get("run_id", "")),
                             tuple(str(c) for c in body["columns"]), tuple(days), str(body["spec"]),
                             int(body.get("erasure") or 0))
    except (ValueError, KeyError, TypeError, IndexError, AttributeError):
        return None


# -- what verify believes and checks ----------------------------------------------------------------


def _order(r: LedgerRow) -> tuple[int, int]:
    return (r.cutoff, r.archive_version)


def believed(rows: Iterable[LedgerRow], committed: int | None) -> dict[dt.date, LedgerRow]:
    """Per day, the ledger row of the day's last write: the latest row whose cutoff the archive
    has committed (rows of later cutoffs are never believed)."""
    out: dict[dt.date, LedgerRow] = {}
    if committed is None:
        return out
    for r in rows:
        if r.cutoff > committed:
            continue
        cur = out.get(r.day)
        if cur is None or _order(r) > _order(cur):
            out[r.day] = r
    return out


def row_problems(r: LedgerRow) -> list[str]:
    """A ledger row's own arithmetic: in = live + kept = out."""
    out = []
    try:
        if r.inflow != r.live + r.kept:
            out.append(f"day {r.day} (cutoff {r.cutoff}): checksum in {r.checksum_in} is not live + kept")
        elif r.inflow != r.out:
            out.append(f"day {r.day} (cutoff {r.cutoff}): in {r.inflow.text()}, out {r.out.text()}")
        if min(r.rows_live, r.rows_kept, r.rows_replaced, r.rows_out) < 0:
            out.append(f"day {r.day} (cutoff {r.cutoff}): a negative row count")
    except ValueError as e:
        out.append(f"day {r.day} (cutoff {r.cutoff}): {e}")
    return out


def chain_problems(rows: Iterable[LedgerRow], committed: int | None) -> list[str]:
    """Each believed row started from what the day's previous row left (same spec and columns;
    a baseline starts a chain afresh): a change between two runs did not go through the books."""
    by_day: dict[dt.date, dict[tuple[int, int], LedgerRow]] = {}
    for r in rows:  # one row per day, cutoff and erasure (two writers racing without the lease may both write it)
        if committed is not None and r.cutoff <= committed:
            cur = by_day.setdefault(r.day, {}).get((r.cutoff, r.erasure))
            if cur is None or _order(r) > _order(cur):
                by_day[r.day][(r.cutoff, r.erasure)] = r
    out = []
    for day in sorted(by_day):
        chain = sorted(by_day[day].values(), key=_order)
        for prev, cur in zip(chain, chain[1:]):
            if cur.kind == "baseline" or (prev.spec, prev.columns) != (cur.spec, cur.columns):
                continue
            try:
                if cur.existing != prev.out:
                    out.append(f"day {day}: the {_what(cur)} found {cur.existing.text()}, the {_what(prev)} "
                               f"left {prev.out.text()}")
            except ValueError as e:
                out.append(f"day {day} (cutoff {cur.cutoff}): {e}")
    return out


def _what(r: LedgerRow) -> str:
    """A ledger row's writer, for a message: ``run of cutoff C`` or ``erasure N (cutoff C)``."""
    return f"erasure {r.erasure} (cutoff {r.cutoff})" if r.erasure else f"run of cutoff {r.cutoff}"


def data_problems(table: str, rows: Mapping[dt.date, LedgerRow], data: Mapping[dt.date, Figures]) -> list[str]:
    """The believed row of every day against the day's data now (``data``: figures per day over
    that row's columns)."""
    out = []
    for day in sorted(set(rows) | set(data)):
        r = rows.get(day)
        have = data.get(day, Figures())
        if r is None:
            out.append(f"{table}: day {day} holds {have.text()} and has no ledger row")
            continue
        try:
            want = r.out
        except ValueError as e:
            out.append(f"{table}: day {day}: {e}")
            continue
        if have != want:
            out.append(f"{table}: day {day} holds {have.text()}; the ledger ({r.kind} of cutoff {r.cutoff}, "
                       f"archive version {r.archive_version}) says {want.text()}")
    return out
