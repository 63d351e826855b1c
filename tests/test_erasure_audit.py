"""The erasures' audit (lakehouse.erasure.audit): a delete recorded twice is one row; its purge
is a second row that wins, also when an older delete is purged after a newer one; a table's
history and the warehouse's; no value of a deleted row is kept."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from lakehouse.erasure.audit import Erasure, history, record

UTC = dt.timezone.utc
T0 = dt.datetime(2026, 11, 28, 10, tzinfo=UTC)


def test_deletes_and_their_purges_are_recorded_once_each(tmp_path: Path) -> None:
    wh = str(tmp_path / "wh")
    one = Erasure("orders", 1, T0, predicate="id = 'a'", rows_live=2, rows_archive=3, days="2026-11-19")
    two = Erasure("orders", 2, T0 + dt.timedelta(hours=1), keys_sha256="ab" * 32, keys=10, rows_rejects=1)
    other = Erasure("clicks", 1, T0 + dt.timedelta(minutes=5), predicate="url = '/x'", rows_staged=4)
    assert record(wh, one) and not record(wh, one)  # (a crash after the record, the delete finished again)
    assert record(wh, two) and record(wh, other)
    purged_at = T0 + dt.timedelta(days=1)
    assert record(wh, Erasure(**{**two.as_dict(), "purged": True, "purged_at": purged_at}))
    assert record(wh, Erasure(**{**one.as_dict(), "purged": True, "purged_at": purged_at}))  # older, later
    assert not record(wh, Erasure(**{**one.as_dict(), "purged": True, "purged_at": purged_at}))
    mine = history(wh, "orders")
    assert [(e.number, e.purged, e.rows) for e in mine] == [(1, True, 5), (2, True, 1)]
    assert mine[0].predicate == "id = 'a'" and mine[1].keys == 10 and mine[1].predicate is None
    assert [e.table_name for e in history(wh)] == ["orders", "clicks", "orders"]
    assert history(str(tmp_path / "none")) == []
