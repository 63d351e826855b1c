"""Execute the notebooks of ``notebooks/`` top to bottom, each in a kernel of its own.

Used by tests/test_notebooks.py (a copy of each notebook, run in a temporary folder) and by
``make notebooks`` (``python -m tests.notebook_runner --inplace notebooks/*.ipynb``), which
re-executes them in place so that their committed outputs come from a real run.

The kernel is ``python3`` as the running interpreter sees it: jupyter_client starts the native
kernel with ``sys.executable``, so a notebook runs in the project's venv. It imports lakehouse
from this repository (first on its PYTHONPATH), runs local Spark on two cores with the
quick-start JVM options of the tests, and never sees the caller's LAKEHOUSE_* settings.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.conftest import (  # the tests' small local Spark, quick-start JVM
    FAST_JVM,
    MASTER,
    SMALL_JOBS,
)

REPO = Path(__file__).resolve().parent.parent
NOTEBOOKS = REPO / "notebooks"
CELL_TIMEOUT = 600
"""Seconds one cell may take before the run fails."""
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


@dataclass
class CellFailed(Exception):
    """A code cell raised: which one, its source and the error (without terminal colours)."""

    notebook: str
    index: int
    source: str
    error: str

    def __str__(self) -> str:
        return (f"{self.notebook}: cell {self.index + 1} (counting every cell from 1) raised\n--- cell source ---\n{self.source}\n"
                f"--- error ---\n{self.error}")


@dataclass
class Run:
    notebook: Any
    """The executed notebook (nbformat.NotebookNode) with its outputs."""
    seconds: float

    def code_cells(self) -> list[Any]:
        return [c for c in self.notebook.cells if c.cell_type == "code"]

    def text(self) -> str:
        """Everything the code cells printed (streams and plain-text results), in order. A
        stream's consecutive outputs are one text: the kernel sends what a cell prints in pieces,
        as it flushes (under load a ``print`` may be cut between two of them)."""
        parts: list[str] = []
        for cell in self.code_cells():
            stream = None  # the stream of the cell's previous output, if it was one
            for out in cell.get("outputs", []):
                if out.output_type == "stream" and out.name == stream:
                    parts[-1] += out.text
                elif out.output_type == "stream":
                    parts.append(out.text)
                elif out.output_type in ("execute_result", "display_data"):
                    parts.append(out.get("data", {}).get("text/plain", ""))
                stream = out.name if out.output_type == "stream" else None
        return "\n".join(parts)

    def images(self) -> int:
        """How many PNG images (plots) the outputs hold."""
        return sum(1 for c in self.code_cells() for o in c.get("outputs", [])
                   if "image/png" in o.get("data", {}))


# What may differ between two runs of the same notebook, masked before comparing a committed
# notebook's printed values with a fresh run's (tests/test_notebooks.py). The rule: durations (a
# number with a unit of time), absolute paths, wall-clock timestamps of today (the notebooks' data
# and their injected clocks are fixed dates; the time a row was rejected or a job recorded is the
# run's), hexadecimal ids (uuids, Spark application ids), memory addresses, and a job's bytes
# before and after (a warehouse's size: Delta's logs and Spark's parallel writes vary by a few
# bytes). Anything else a cell prints is a value the notebook shows its reader, and must match.
_MASKS = [
    (re.compile(r"(?<![\w.])(?:/[\w.@+-]+)+/?"), "<path>"),
    (re.compile(r"\b\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:?\d{2})?"), "<timestamp>"),
    (re.compile(r"\b0x[0-9a-f]+\b"), "<address>"),
    (re.compile(r"\b[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}\b"), "<id>"),
    (re.compile(r"\b(?:local|app)-\d+(?:-\d+)?\b"), "<app>"),
    (re.compile(r"\b\d+(?:\.\d+)?(?:e-?\d+)? ?(?:ms|sec|seconds|min|minutes)\b"), "<duration>"),
    (re.compile(r"\b(?:\d+(?:\.\d+)?[dhms])+\b"), "<duration>"),
    (re.compile(r"\bbytes \d+ -> \d+"), "bytes <size> -> <size>"),
]


def mask(text: str, fixed: tuple[str, ...] = ()) -> str:
    """``text`` with what varies run to run masked (see _MASKS); timestamps that start with one
    of ``fixed`` (the notebook's own dates, e.g. ``2026-03-0``) are kept."""
    out = _ANSI.sub("", text)
    for pattern, name in _MASKS:
        if name == "<timestamp>":
            out = pattern.sub(lambda m: m.group(0) if m.group(0).startswith(fixed) else name, out)
        else:
            out = pattern.sub(name, out)
    return out


def printed(nb: Any) -> list[str]:
    """What each code cell printed (streams and plain-text results), one string per code cell."""
    out = []
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        parts = []
        for o in cell.get("outputs", []):
            if o.output_type == "stream":
                parts.append(o.text)
            elif o.output_type in ("execute_result", "display_data"):
                parts.append(o.get("data", {}).get("text/plain", ""))
        out.append("".join(parts))
    return out


def kernel_env(tmpdir: Path, remote: str | None = None) -> dict[str, str]:
    """The kernel's environment: the caller's, without LAKEHOUSE_*, with this repository first
    on PYTHONPATH, a small local Spark, and ``tmpdir`` as TMPDIR (where a notebook makes its
    project with ``tempfile.mkdtemp``). With ``remote`` (a Spark Connect URL) the notebook's
    lakehouse reaches Spark through that server (``LAKEHOUSE_REMOTE``), as a user's does once a
    server runs, and its kernel starts no JVM."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAKEHOUSE_")}
    env["TMPDIR"] = str(tmpdir)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])])
    env.update(LAKEHOUSE_MASTER=MASTER, LAKEHOUSE_JAVA_OPTS=FAST_JVM, LAKEHOUSE_SHUFFLE_PARTITIONS="2",
               LAKEHOUSE_SPARK_CONF=SMALL_JOBS,
               PYDEVD_DISABLE_FILE_VALIDATION="1")
    if remote is not None:
        env["LAKEHOUSE_REMOTE"] = remote
    return env


def execute(path: Path, cwd: Path, tmpdir: Path, save: Path | None = None, check_prefix: bool = True,
            remote: str | None = None) -> Run:
    """Run the notebook at ``path`` with ``cwd`` as the kernel's working folder and ``tmpdir``
    as its TMPDIR; write the executed notebook to ``save`` when given. Raises CellFailed when a
    cell raises.

    ``check_prefix``: first run a cell (not kept) asserting the kernel's ``sys.prefix`` is this
    interpreter's, i.e. the notebook runs in the project's venv. ``remote``: see kernel_env."""
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    nb = nbformat.read(path, as_version=4)
    probe = None
    if check_prefix:
        probe = nbformat.v4.new_code_cell(f"import sys\nassert sys.prefix == {sys.prefix!r}, sys.prefix")
        nb.cells.insert(0, probe)
    client = NotebookClient(
        nb, kernel_name="python3", timeout=CELL_TIMEOUT, record_timing=False,
        resources={"metadata": {"path": str(cwd)}},
        # the JVM's and the kernel's own stderr stay out of the notebook (Spark's start-up chatter)
        extra_arguments=["--IPKernelApp.capture_fd_output=False"],
    )
    started = time.monotonic()
    try:
        client.execute(env=kernel_env(tmpdir, remote))
    except CellExecutionError:
        failed = _failed_cell(nb)
        if failed is None:
            raise
        index, cell = failed
        raise CellFailed(path.name, index - (probe is not None), cell.source, _error(cell)) from None
    finally:
        if probe is not None and nb.cells and nb.cells[0] is probe:
            nb.cells.pop(0)
    seconds = time.monotonic() - started
    nb.metadata.pop("widgets", None)
    if save is not None:
        nbformat.write(nb, save)
    return Run(nb, seconds)


def _failed_cell(nb: Any) -> tuple[int, Any] | None:
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "code" and any(o.output_type == "error" for o in cell.get("outputs", [])):
            return i, cell
    return None


def _error(cell: Any) -> str:
    for o in cell.outputs:
        if o.output_type == "error":
            return _ANSI.sub("", "\n".join(o.traceback)) or f"{o.ename}: {o.evalue}"
    return "(no error output)"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Execute notebooks top to bottom (a kernel each).")
    ap.add_argument("notebooks", nargs="*", type=Path, help="default: notebooks/*.ipynb")
    ap.add_argument("--inplace", action="store_true", help="write the outputs back into each notebook")
    args = ap.parse_args(argv)
    paths = args.notebooks or sorted(NOTEBOOKS.glob("*.ipynb"))
    for p in paths:
        print(f">> executing {p}", file=sys.stderr, flush=True)
        with tempfile.TemporaryDirectory(prefix="lakehouse-notebook-") as tmp:
            try:
                run = execute(p.resolve(), p.resolve().parent, Path(tmp), save=p if args.inplace else None,
                              check_prefix=False)
            except CellFailed as e:
                print(e, file=sys.stderr)
                return 1
        print(f"   {len(run.code_cells())} code cells in {run.seconds:.1f}s"
              + (", written back" if args.inplace else ""), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
