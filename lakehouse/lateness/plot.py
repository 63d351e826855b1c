"""The lateness histogram (``lakehouse lateness --plot FILE.png``), drawn on a matplotlib Figure
of its own and saved as PNG: no pyplot, no display needed, and the process's backend is left as
it is (a notebook's inline plots keep working after it)."""

from __future__ import annotations

from typing import Any

import numpy as np

from lakehouse.errors import LakehouseError
from lakehouse.lateness.core import Profile, human


def _scale(seconds: float) -> tuple[str, float]:
    """The unit the x axis is drawn in."""
    for name, size in (("days", 86400.0), ("hours", 3600.0), ("minutes", 60.0)):
        if seconds >= 2 * size:
            return name, size
    return "seconds", 1.0


def write_png(profile: Profile, path: str, bins: int = 60) -> None:
    """A histogram of lateness per source (stacked), with the current and the suggested archive
    delay marked; LakehouseError naming the file when it cannot be written."""
    from matplotlib.figure import Figure

    names = [n for n, d in profile.by_source.items() if d.total]
    values = [profile.by_source[n].values for n in names]
    counts = [np.diff(profile.by_source[n].cumulative, prepend=0) for n in names]
    low = min([0.0, *(float(v[0]) for v in values)])
    top = max([1.0, *(float(v[-1]) for v in values), float(profile.delay["current_seconds"] or 0),
               float(profile.delay["suggested_seconds"] or 0)])
    unit, size = _scale(top)
    fig = Figure(figsize=(9, 5), dpi=100)
    ax: Any = fig.add_subplot(1, 1, 1)
    if names:
        edges = np.linspace(low / size, top / size * 1.02, bins + 1)
        ax.hist([v / size for v in values], bins=edges, weights=counts, stacked=True, label=names)
    marks = [("current archive.delay " + str(profile.delay["current"]), profile.delay["current_seconds"], "tab:red", "--")]
    if profile.delay["suggested"] is not None:
        marks.append((f"suggested {profile.delay['suggested']} (covers {profile.fraction:g})",
                      profile.delay["suggested_seconds"], "tab:green", "-"))
    for text, seconds, color, style in marks:
        ax.axvline(float(seconds) / size, color=color, linestyle=style, label=text)
    ax.set_xlabel(f"lateness: load time - event time ({unit})")
    ax.set_ylabel("rows")
    late = profile.late_path
    ax.set_title(f"{profile.table}: {profile.rows} rows, p50 {human(profile.percentiles.get('p50'))}, "
                 f"p99 {human(profile.percentiles.get('p99'))}, max {human(profile.percentiles.get('max'))}; "
                 f"{late['rows']} on the late path", fontsize=10)
    ax.legend(fontsize=8)
    fig.tight_layout()
    try:
        fig.savefig(path, format="png")
    except OSError as e:
        raise LakehouseError(f"lateness {profile.table}: cannot write the plot to {path}: {e.strerror or e}") from None
