"""Injected faults: damage a job's staged data on purpose, to prove its checks refuse the commit.

Set ``LAKEHOUSE_FAULT=<fault>`` in a job's environment (like ``LAKEHOUSE_CRASH_AT``, for tests).
An archiving run applies it to its staged batch after staging and before the conservation check
that precedes the commit, to the first staged file of the first day:

- ``drop_row``: the file's last row is removed;
- ``dup_row``: the file's last row is written twice (the order stays sorted);
- ``change_value``: the last row's load id is changed (same count, other content).

Unset, this costs one dictionary look-up.
"""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING

from lakehouse.errors import ConfigError
from lakehouse.settings import env

if TYPE_CHECKING:
    import pyarrow as pa

ENV = "LAKEHOUSE_FAULT"
FAULTS = ("drop_row", "dup_row", "change_value")


def armed() -> str | None:
    """The fault armed in this process's environment (None when none is); ConfigError for an
    unknown one."""
    fault = env(ENV)
    if fault is not None and fault not in FAULTS:
        raise ConfigError(f"{ENV}={fault!r}: not a fault; one of {', '.join(FAULTS)}")
    return fault


def damage_rows(t: pa.Table, fault: str, hash_column: str | None = None) -> pa.Table:
    """``t`` with ``fault`` applied to its last row (``t`` itself when it has none). With
    ``hash_column`` (rows carrying their hash, as the one-pass archive's do) a changed row's hash
    changes with it, as a hash of the changed content would."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from lakehouse.definitions import LOAD_COLUMN

    if t.num_rows == 0:
        return t
    last = t.slice(t.num_rows - 1)
    if fault == "drop_row":
        return t.slice(0, t.num_rows - 1)
    if fault == "dup_row":
        return pa.concat_tables([t, last])
    is_last = pa.array([k == t.num_rows - 1 for k in range(t.num_rows)])
    for name, value in ((LOAD_COLUMN, "fault"),) + (((hash_column, None),) if hash_column else ()):
        i = t.schema.get_field_index(name)
        col = t.column(i)
        changed = pc.bit_wise_xor(col, pa.scalar(1, col.type)) if value is None else pa.scalar(value, col.type)
        t = t.set_column(i, t.field(i), pc.if_else(is_last, changed, col))
    return t


def damage_staging(files: dict[dt.date, list[str]]) -> str | None:
    """Apply the armed fault to the first staged file of the first day; what was done, or None."""
    fault = armed()
    if fault is None or not files:
        return None
    import pyarrow.fs as pafs
    import pyarrow.parquet as pq

    from lakehouse.storage import filesystem

    day = min(files)
    path = files[day][0]
    fs, p = filesystem(path)
    with fs.open_input_file(p) as f:
        t = pq.read_table(f, coerce_int96_timestamp_unit="us")
    if t.num_rows == 0:
        return None
    t = damage_rows(t, fault)
    with fs.open_output_stream(p) as f:
        pq.write_table(t, f)
    folder, name = p.rsplit("/", 1)
    crc = f"{folder}/.{name}.crc"  # Hadoop's local checksum of the old bytes would stop the read
    if fs.get_file_info(crc).type == pafs.FileType.File:
        fs.delete_file(crc)
    return f"{fault} in {path} (day {day})"
