"""The Spark driver's class archive (the JVM's AppCDS): the classes Spark and Delta load, parsed
and verified once, mapped by every later driver JVM instead of being loaded again from the jars.

A lakehouse command that needs Spark spends most of its first seconds loading classes; with the
archive a driver starts and runs its first Delta commit in about 60% of the time. ``make setup``
records it once (``python -m lakehouse.warmup``: a real run of lakehouse's own operations with
``-XX:ArchiveClassesAtExit``) into ``<venv>/share/lakehouse/spark-classes.jsa``. A JVM that
cannot use it (another JDK, another class path) starts as if it were not there, silently.
LAKEHOUSE_CLASS_ARCHIVE names another file, or ``off``.
"""

from __future__ import annotations

import sys
from pathlib import Path

from lakehouse.settings import OFF, env

QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"
"""The JVM's own CDS warnings (classes it cannot archive, an archive it cannot map) stay unsaid."""


def default_path() -> Path:
    """Where ``make setup`` records the archive: beside Delta's cached jars in the venv."""
    return Path(sys.prefix) / "share" / "lakehouse" / "spark-classes.jsa"


def path() -> Path | None:
    """The archive a driver starts from, or None (switched off, or not recorded yet)."""
    chosen = env("LAKEHOUSE_CLASS_ARCHIVE")
    if chosen is not None and chosen.strip().lower() in OFF:
        return None
    p = Path(chosen) if chosen else default_path()
    return p if p.is_file() else None


def java_options() -> str:
    """The driver's JVM options that map the archive ("" without one)."""
    p = path()
    return f"-XX:SharedArchiveFile={p} {QUIET}" if p is not None else ""
