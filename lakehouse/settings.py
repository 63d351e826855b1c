"""Where the project and the warehouse are, and which Spark master to use.

Precedence: command-line flags > environment (LAKEHOUSE_PROJECT, LAKEHOUSE_WAREHOUSE,
LAKEHOUSE_MASTER) > defaults (current directory, <project>/warehouse, local[*]).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from lakehouse.errors import ConfigError


@dataclass(frozen=True)
class Settings:
    """Resolved settings of one lakehouse invocation."""

    project: Path
    """The project folder holding tables/, migrations/ and queries/."""
    warehouse: str
    """The warehouse root: a local path or a Hadoop URI (file:, s3a:, abfss:, ...)."""
    master: str
    """The Spark master URL, local[*] by default."""

    @property
    def tables_dir(self) -> Path:
        return self.project / "tables"

    @property
    def migrations_dir(self) -> Path:
        return self.project / "migrations"

    @property
    def queries_dir(self) -> Path:
        return self.project / "queries"

    @classmethod
    def resolve(
        cls,
        project: str | os.PathLike[str] | None = None,
        warehouse: str | None = None,
        master: str | None = None,
        env: dict[str, str] | None = None,
    ) -> "Settings":
        """Build settings from flags, then the environment, then defaults."""
        env = dict(os.environ) if env is None else env
        project_raw = project or env.get("LAKEHOUSE_PROJECT") or "."
        project_path = Path(project_raw).expanduser().resolve()
        if not project_path.is_dir():
            raise ConfigError(f"project directory {project_raw!r} does not exist")
        warehouse_raw = warehouse or env.get("LAKEHOUSE_WAREHOUSE") or str(project_path / "warehouse")
        master_raw = master or env.get("LAKEHOUSE_MASTER") or "local[*]"
        return cls(project=project_path, warehouse=normalize_warehouse(warehouse_raw), master=master_raw)


_GLOB = set("*?[]{}\\")


def normalize_warehouse(uri: str) -> str:
    """Make a local warehouse path absolute (``file:/x``, ``file:///x`` and ``file://localhost/x``
    are local paths too); leave URIs with another scheme as they are. Glob characters are refused:
    Spark and Hadoop expand them in paths, so such a warehouse would read other folders' data."""
    if not uri.strip():
        raise ConfigError("warehouse must not be empty")
    if any(ch in uri for ch in "\n\r\x00"):
        raise ConfigError(f"warehouse {uri!r}: control characters are not allowed in a path")
    bad = sorted(_GLOB.intersection(uri))
    if bad:
        raise ConfigError(f"warehouse {uri!r}: the characters {' '.join(bad)} are not allowed "
                          "(Spark would expand them as a glob pattern); choose another folder name")
    if uri.startswith("file:"):
        rest = uri[len("file:"):]
        if rest.startswith("//"):
            rest = rest[2:]
            rest = rest[len("localhost"):] if rest.startswith("localhost/") else rest
            if not rest.startswith("/"):
                raise ConfigError(f"warehouse {uri!r}: a file: URI names a folder on this machine "
                                  "(file:/x, file:///x or file://localhost/x), not on another host")
        if not rest.startswith("/"):
            raise ConfigError(f"warehouse {uri!r}: a file: URI needs an absolute path (file:/x)")
        return str(Path(rest).resolve())
    if "://" in uri:
        return uri.rstrip("/")
    return str(Path(uri).expanduser().resolve())


def is_local(uri: str) -> bool:
    """True when the warehouse is a local folder (not an object store URI)."""
    return "://" not in uri


def spark_master(master: str | None = None) -> str:
    """The Spark master to use: ``master`` (the --master flag), else LAKEHOUSE_MASTER, else local[*]."""
    return master or os.environ.get("LAKEHOUSE_MASTER") or "local[*]"


def debug_tracebacks() -> bool:
    """True when LAKEHOUSE_DEBUG is set: the command line shows an unexpected error's traceback."""
    return bool(os.environ.get("LAKEHOUSE_DEBUG"))


def default_spark_log_level(level: str) -> None:
    """Make ``level`` the JVM's log level for Spark sessions started from now on, unless
    LAKEHOUSE_LOG_LEVEL already names one (the command line's -v)."""
    os.environ.setdefault("LAKEHOUSE_LOG_LEVEL", level)
