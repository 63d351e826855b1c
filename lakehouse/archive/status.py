"""The outcome of a table's last archiving runs (``_state/archive-status.json``), for
``lakehouse tables``: the last success, and the failing step and error of the last failure."""

from __future__ import annotations

import datetime as dt
import json
import logging

from lakehouse import storage
from lakehouse.errors import LakehouseError
from lakehouse.storage import join

log = logging.getLogger(__name__)

STATUS_FILE = "archive-status.json"
"""The status file's name in the table's ``_state`` folder."""


def status_path(root: str) -> str:
    """``<warehouse>/<table>/_state/archive-status.json``."""
    return join(root, "_state", STATUS_FILE)


def read_status(root: str) -> dict | None:
    """The recorded outcome of the table's archiving runs (None when never recorded)."""
    try:
        doc = storage.read_json(status_path(root))
    except (FileNotFoundError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


def write_status(root: str, doc: dict) -> None:
    """Record the outcome atomically."""
    storage.write_text(status_path(root), json.dumps(doc, default=str, sort_keys=True))


def _now() -> str:
    """The wall clock in UTC, to the second, ISO 8601."""
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def record_failure(root: str, table: str, step: str, run_id: str, e: BaseException) -> None:
    """Keep the failing step and its error (counting repeated failures of the same step);
    never raises, so the run's own error is never hidden."""
    try:
        before = read_status(root) or {}
        last = before.get("last_error") or {}
        same = last.get("step") == step
        message = (str(e).strip().splitlines() or [type(e).__name__])[0]
        if not isinstance(e, LakehouseError):
            message = f"{type(e).__name__}: {message}"
        write_status(
            root,
            {
                **before,
                "last_error": {
                    "step": step,
                    "error": message[:2000],
                    "run_id": run_id,
                    "at": _now(),
                    "failures": int(last.get("failures", 0)) + 1 if same else 1,
                    "since": last.get("since") if same and last.get("since") else _now(),
                },
            },
        )
    except Exception:  # noqa: BLE001 - never hide the run's own error
        log.warning("archive %s: could not record the failure", table, exc_info=True)


def record_success(root: str, table: str, run_id: str, cutoff: int | None) -> None:
    """Record a run that finished (clearing the last failure) with the cutoff it left."""
    try:
        before = read_status(root) or {}
        before.pop("last_error", None)
        write_status(
            root,
            {**before, "last_success": {"run_id": run_id, "cutoff": cutoff, "at": _now()}},
        )
    except Exception:  # noqa: BLE001
        log.warning("archive %s: could not record the outcome", table, exc_info=True)
