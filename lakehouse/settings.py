"""Where the project and the warehouse are, and which Spark to use.

Precedence: command-line flags > environment (LAKEHOUSE_PROJECT, LAKEHOUSE_WAREHOUSE,
LAKEHOUSE_MASTER, LAKEHOUSE_REMOTE) > the project's ``[tool.lakehouse]`` table in its
``pyproject.toml`` (``warehouse``, ``master``, ``remote``, ``spark`` settings and the ``s3`` store,
see lakehouse.objectstore) > defaults (current directory, <project>/warehouse, local[*], no remote:
the project's Spark Connect server when one runs, else Spark in-process).
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lakehouse.errors import ConfigError
from lakehouse.objectstore import S3, is_s3, normalize_uri

PROJECT_KEYS = ("warehouse", "master", "remote", "spark", "s3")
"""The keys of a project's ``[tool.lakehouse]`` table."""
PRIVATE_FOLDER = ".lakehouse"
"""The project's private folder (mode 0700): the Spark Connect server's and the command host's
records, sockets and logs."""


def private_folder(project: Path) -> Path:
    """The project's private folder, created readable by the user alone."""
    d = project / PRIVATE_FOLDER
    d.mkdir(mode=0o700, exist_ok=True)
    os.chmod(d, 0o700)
    return d


@dataclass(frozen=True)
class Settings:
    """Resolved settings of one lakehouse invocation."""

    project: Path
    """The project folder holding tables/, migrations/ and queries/."""
    warehouse: str
    """The warehouse root: a local path or an object store URI (``s3://bucket/prefix``; s3a: is written s3:)."""
    master: str
    """The Spark master URL, local[*] by default."""
    remote: str | None = None
    """A Spark Connect server to use (``sc://host:port/;token=...``), or None: the project's own
    server when one runs (``lakehouse server start``), else Spark in this process."""
    s3: S3 | None = None
    """How to reach the object store of an ``s3://`` warehouse (None: a local warehouse)."""
    spark_settings: tuple[tuple[str, str], ...] = ()
    """The project's Spark settings: ``[tool.lakehouse.spark]``, then LAKEHOUSE_SPARK_CONF's,
    then ``--conf``'s (each wins over the one before)."""

    def spark_conf(self) -> dict[str, str]:
        """The Spark settings this project adds to lakehouse's: the object store's, then its own."""
        return {**(self.s3.spark_conf() if self.s3 else {}), **dict(self.spark_settings)}

    @property
    def tables_dir(self) -> Path:
        """``<project>/tables``: one YAML definition per table."""
        return self.project / "tables"

    @property
    def migrations_dir(self) -> Path:
        """``<project>/migrations``: the migration scripts, applied in order."""
        return self.project / "migrations"

    @property
    def queries_dir(self) -> Path:
        """``<project>/queries``: saved queries, one ``.sql`` file each."""
        return self.project / "queries"

    @classmethod
    def resolve(
        cls,
        project: str | os.PathLike[str] | None = None,
        warehouse: str | None = None,
        master: str | None = None,
        env: dict[str, str] | None = None,
        remote: str | None = None,
        conf: list[str] | tuple[str, ...] = (),
    ) -> "Settings":
        """Build settings from flags (``conf``: ``--conf spark.KEY=VALUE`` items), then the
        environment, then the project's ``[tool.lakehouse]`` table, then defaults."""
        env = dict(os.environ) if env is None else env
        project_raw = project or env.get("LAKEHOUSE_PROJECT") or "."
        project_path = Path(project_raw).expanduser().resolve()
        if not project_path.is_dir():
            raise ConfigError(f"project directory {project_raw!r} does not exist")
        table = project_config(project_path)
        configured = table.get("warehouse")
        if configured and ":" not in configured and not Path(configured).expanduser().is_absolute():
            configured = str(project_path / configured)  # relative to the project, not to the shell
        warehouse_raw = warehouse or env.get("LAKEHOUSE_WAREHOUSE") or configured or str(project_path / "warehouse")
        master_raw = master or env.get("LAKEHOUSE_MASTER") or table.get("master") or "local[*]"
        remote_raw = remote or env.get("LAKEHOUSE_REMOTE") or table.get("remote") or None
        if remote_raw is not None and not remote_raw.startswith("sc://"):
            raise ConfigError(f"remote {remote_raw!r}: a Spark Connect URL starts with sc:// (sc://host:15002)")
        uri = normalize_warehouse(warehouse_raw)
        s3 = S3.resolve(table.get("s3", {}), env) if is_s3(uri) else None
        env_conf = split_spark_conf(env.get("LAKEHOUSE_SPARK_CONF") or "", "LAKEHOUSE_SPARK_CONF")
        spark = {**table["spark"], **parse_spark_conf(env_conf, "LAKEHOUSE_SPARK_CONF"),
                 **parse_spark_conf(list(conf), "--conf")}
        return cls(project=project_path, warehouse=uri, master=master_raw, remote=remote_raw, s3=s3,
                   spark_settings=tuple(sorted(spark.items())))


def project_config(project: Path) -> dict[str, Any]:
    """The project's ``[tool.lakehouse]`` table (``spark`` always there, as strings); unknown keys
    and values of the wrong kind are refused, naming the file and the key."""
    path = project / "pyproject.toml"
    if not path.is_file():
        return {"spark": {}}
    try:
        doc = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        raise ConfigError(f"{path}: not readable TOML ({e})") from None
    conf = doc.get("tool", {}).get("lakehouse", {})
    if not isinstance(conf, dict):
        raise ConfigError(f"{path}: [tool.lakehouse] must be a table")
    unknown = sorted(set(conf) - set(PROJECT_KEYS))
    if unknown:
        raise ConfigError(f"{path}: [tool.lakehouse] has unknown key(s) {', '.join(unknown)} "
                          f"(known: {', '.join(PROJECT_KEYS)})")
    for key in ("warehouse", "master", "remote"):
        if key in conf and (not isinstance(conf[key], str) or not conf[key].strip()):
            raise ConfigError(f"{path}: [tool.lakehouse] {key} must be a non-empty string")
    for key in ("spark", "s3"):
        if key in conf and not isinstance(conf[key], dict):
            raise ConfigError(f"{path}: [tool.lakehouse.{key}] must be a table")
    spark = conf.get("spark", {})
    bad = [k for k, v in spark.items() if not k.startswith("spark.") or isinstance(v, (dict, list))]
    if bad:
        raise ConfigError(f"{path}: [tool.lakehouse.spark] {bad[0]!r}: keys are Spark settings (spark.*) "
                          "with a string, number or boolean value")
    conf["spark"] = {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in spark.items()}
    return conf


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
    if is_s3(uri):
        return normalize_uri(uri)
    if "://" in uri:
        return uri.rstrip("/")
    return str(Path(uri).expanduser().resolve())


def is_local(uri: str) -> bool:
    """True when the warehouse is a local folder (not an object store URI)."""
    return "://" not in uri


# -- the environment: every LAKEHOUSE_* variable, read here and nowhere else -----------------------

ENVIRONMENT: dict[str, str] = {
    "LAKEHOUSE_PROJECT": "the project folder (a --project flag wins)",
    "LAKEHOUSE_WAREHOUSE": "the warehouse path or URI (a --warehouse flag wins)",
    "LAKEHOUSE_MASTER": "the Spark master URL (a --master flag wins; default local[*])",
    "LAKEHOUSE_REMOTE": "a Spark Connect server every command uses, sc://host:port (a --remote flag wins; default: the project's own server when one runs)",
    "LAKEHOUSE_JARS": "where Delta's jars are cached (default <venv>/share/lakehouse/jars)",
    "LAKEHOUSE_LOG_LEVEL": "Spark's log level (default ERROR; -v makes it WARN, -vv INFO)",
    "LAKEHOUSE_JAVA_OPTS": "extra JVM options for the Spark driver",
    "LAKEHOUSE_CLASS_ARCHIVE": "the Spark driver's class archive (default <venv>/share/lakehouse/spark-classes.jsa; off: none)",
    "LAKEHOUSE_SHUFFLE_PARTITIONS": "spark.sql.shuffle.partitions on a local master (default 4)",
    "LAKEHOUSE_DRIVER_MEMORY": "spark.driver.memory on a local master (default 2g)",
    "LAKEHOUSE_SPARK_CONF": "more Spark settings, spark.KEY=VALUE separated by spaces, applied after lakehouse's own",
    "LAKEHOUSE_HOST": "0/false/no/off: commands never run in the project's command host (default: they do while it runs)",
    "LAKEHOUSE_DEBUG": "set: an unexpected error prints its traceback instead of one line",
    "LAKEHOUSE_ARCHIVE_FLOCK": "0/false/no/off: no OS lock next to the table's lease (default on)",
    "LAKEHOUSE_ARCHIVE_LEASE_SECONDS": "how long a table's lease lasts without renewal (default 120)",
    "LAKEHOUSE_JOBS_BACKOFF_SECONDS": "first pause between attempts of a failing job (default 5)",
    "LAKEHOUSE_JOBS_LEASE_WAIT_SECONDS": "how long a jobs round waits for a table's lease (default 60)",
    "LAKEHOUSE_JOBS_RETRY_SECONDS": "how long a failed job waits before the next round retries it (default 60)",
    "LAKEHOUSE_CRASH_AT": "tests: the crash point at which the process kills itself",
    "LAKEHOUSE_SERVER_CONF": "internal: the Spark settings `server start` hands its server (JSON)",
    "LAKEHOUSE_SERVER_OWNER": "tests: a pid; the Spark Connect server stops when that process is gone",
    "LAKEHOUSE_PAUSE_AT": "tests: <point>:<seconds>:<file>, a pause at a crash point",
    "LAKEHOUSE_FAULT": "tests: damage an archiving run's staged data (drop_row, dup_row, change_value)",
}
"""Every environment variable lakehouse reads, with what it sets."""


def env(name: str, default: str | None = None) -> str | None:
    """The value of the LAKEHOUSE_* variable ``name`` (an empty value counts as unset)."""
    if name not in ENVIRONMENT:
        raise KeyError(f"{name} is not a lakehouse environment variable (add it to settings.ENVIRONMENT)")
    return os.environ.get(name) or default


def env_float(name: str, default: float) -> float:
    """A numeric LAKEHOUSE_* variable; a value that is not a number is refused with its name."""
    raw = env(name)
    if raw is None:
        return default
    try:
        return float(raw)
    except ValueError:
        raise ConfigError(f"{name}={raw!r}: not a number of seconds") from None


OFF = ("0", "false", "no", "off")
"""The values that switch a LAKEHOUSE_* setting off."""


def env_flag(name: str, default: bool) -> bool:
    """A LAKEHOUSE_* switch: 0/false/no/off turn it off, anything else on."""
    raw = env(name)
    if raw is None:
        return default
    return raw.strip().lower() not in OFF


def parse_spark_conf(items: list[str], where: str) -> dict[str, str]:
    """Spark settings typed as ``spark.KEY=VALUE`` items; one that is not is refused, naming
    ``where`` it came from and the item."""
    conf: dict[str, str] = {}
    for item in items:
        key, eq, value = item.partition("=")
        if not eq or not key.startswith("spark.") or key == "spark." or not value:
            shown = repr(key) if eq else "an item without '='"  # never the value: it may be a secret
            raise ConfigError(f"{where}: {shown} is not spark.KEY=VALUE")
        conf[key] = value
    return conf


def split_spark_conf(text: str, where: str) -> list[str]:
    """The items of a list of Spark settings separated by spaces, quoted as in a shell when a value
    holds spaces (``spark.executor.extraJavaOptions='-Xss4m -XX:+UseG1GC'``)."""
    import shlex

    try:
        return shlex.split(text)
    except ValueError as e:
        raise ConfigError(f"{where}: {e} (quote a value with spaces as in a shell)") from None


def env_spark_conf() -> dict[str, str]:
    """The Spark settings LAKEHOUSE_SPARK_CONF names (``spark.KEY=VALUE`` separated by spaces)."""
    return parse_spark_conf(split_spark_conf(env("LAKEHOUSE_SPARK_CONF") or "", "LAKEHOUSE_SPARK_CONF"),
                            "LAKEHOUSE_SPARK_CONF")


def set_env(name: str, value: str) -> None:
    """Set a LAKEHOUSE_* variable for this process and the processes it starts (the CLI's -v)."""
    if name not in ENVIRONMENT:
        raise KeyError(f"{name} is not a lakehouse environment variable")
    os.environ[name] = value


def spark_master(master: str | None = None) -> str:
    """The Spark master: the flag, else LAKEHOUSE_MASTER, else local[*]."""
    return master or env("LAKEHOUSE_MASTER") or "local[*]"


def debug_tracebacks() -> bool:
    """True when LAKEHOUSE_DEBUG is set: the command line shows an unexpected error's traceback."""
    return env("LAKEHOUSE_DEBUG") is not None


def default_spark_log_level(level: str) -> None:
    """Make ``level`` the JVM's log level for Spark sessions started from now on, unless
    LAKEHOUSE_LOG_LEVEL already names one (the command line's -v)."""
    if env("LAKEHOUSE_LOG_LEVEL") is None:
        set_env("LAKEHOUSE_LOG_LEVEL", level)
