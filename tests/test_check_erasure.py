"""``lakehouse check`` beside ``lakehouse delete --purge`` (a check takes no lease): a delete that
erases from the table after the versions a check read leaves no value of the erased rows in what
the check records, whether it commits (and purges) while the check validates or just before the
check's results are appended. A scan of every file under the warehouse finds none afterwards."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pytest

from lakehouse.audit import check as check_module
from lakehouse.audit.check import WITHHELD
from lakehouse.quality import gx
from tests.conftest import Project
from tests.test_delete import COLUMNS
from tests.test_delete_purge import CHECKED, VICTIM, holders, victim

pytestmark = pytest.mark.spark
UTC = dt.timezone.utc


@pytest.fixture
def checked(spark: Any, project: Project, tmp_path: Path) -> tuple[Project, Path]:
    """sales with the price check: two victims archived, one in live; their price fails the check
    (their values are its samples). The keys file of the victims."""
    project.table(CHECKED)
    project.create("sales")
    lh = project.lh
    rows = [[f"s{i}", i % 5, float(i), f"2026-11-{16 + i % 3:02d}T{i % 12:02d}:00:00Z"] for i in range(30)]
    lh.load("sales", [project.csv("a.csv", COLUMNS, rows + [victim(1, "2026-11-16T05:00:00Z"),
                                                             victim(2, "2026-11-17T06:00:00Z"),
                                                             victim(3, "2026-11-18T07:00:00Z")])])
    lh.archive("sales", now=dt.datetime(2026, 11, 18, 12, tzinfo=UTC))  # 16, 17 archived; 18 in live
    keys = tmp_path / "victims.txt"
    keys.write_text("\n".join(f"{VICTIM}{n:03d}" for n in range(1, 4)) + "\n")
    return project, keys


def test_a_delete_during_a_check_leaves_none_of_its_rows_values_in_what_the_check_records(
        checked: tuple[Project, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    project, keys = checked
    lh = project.lh
    real = gx.docs_index
    ran: list[Any] = []

    def docs_index(warehouse: str) -> str:  # the check has validated the rows it read: a delete now
        if not ran:
            ran.append(lh.delete("sales", keys=str(keys), purge=True))
        return real(warehouse)

    monkeypatch.setattr(gx, "docs_index", docs_index)
    rep = lh.check("sales")
    assert ran and ran[0].rows == 3
    assert not rep.ok  # the outcomes of what it read stay: the victims failed the price check
    failed = [c for c in rep.checks if not c.ok]
    assert failed and all(c.unexpected_count for c in failed)
    assert all(c.sample == [] and c.observed is None and WITHHELD in c.detail for c in rep.checks)
    assert holders(Path(project.settings.warehouse)) == {}
    monkeypatch.undo()
    again = lh.check("sales")
    assert again.ok and not any(WITHHELD in c.detail for c in again.checks)


def test_a_delete_purged_just_before_a_checks_results_are_recorded_leaves_none_either(
        checked: tuple[Project, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    project, keys = checked
    lh = project.lh
    real = check_module.record

    def record(warehouse: str, report: Any, trigger: str) -> None:  # past the check's first look
        lh.delete("sales", keys=str(keys), purge=True)
        real(warehouse, report, trigger)

    monkeypatch.setattr(check_module, "record", record)
    assert not lh.check("sales").ok
    assert holders(Path(project.settings.warehouse)) == {}
    history = lh.check_history("sales")
    assert history and all(r["sample"] == [] and r["observed"] is None for r in history)
    assert any(not r["ok"] and r["unexpected_count"] for r in history)  # its outcomes stay on record


def test_a_check_beside_a_delete_under_way_in_another_process_records_outcomes_only(
        checked: tuple[Project, Path], tmp_path: Path) -> None:
    from tests.conftest import cli, wait_until

    project, keys = checked
    lh = project.lh
    marker = tmp_path / "saved"
    bg = cli(project, "delete", "sales", "--keys", str(keys), "--purge", background=True,
             env={"LAKEHOUSE_PAUSE_AT": f"erase_after_save:20:{marker}"})
    try:
        wait_until(marker.exists, 120)  # saved, nothing erased yet: the rows are all still there
        rep = lh.check("sales")
        assert not rep.ok and all(c.sample == [] and c.observed is None and c.detail == WITHHELD for c in rep.checks)
    finally:
        out, err = bg.communicate(timeout=300)
    assert bg.returncode == 0, err
    assert holders(Path(project.settings.warehouse)) == {}
    assert lh.check("sales").ok
