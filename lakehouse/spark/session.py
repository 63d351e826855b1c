"""The one SparkSession of a process, with Delta Lake, UTC and quiet logs.

Delta's JVM jars come from the cache the Makefile fills (.venv/share/lakehouse/jars, resolved
with Maven from lakehouse/jvm/pom.xml) and are handed to Spark with ``spark.jars``; on a machine
without that cache Spark resolves them itself (``spark.jars.packages``, Ivy). The same code runs
on a cluster: pass ``--master`` or set LAKEHOUSE_MASTER.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from lakehouse.errors import ConfigError, first_line
from lakehouse.settings import env, env_spark_conf
from lakehouse.spark import class_archive

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

DELTA_VERSION = "4.0.1"
DELTA_PACKAGE = f"io.delta:delta-spark_2.13:{DELTA_VERSION}"
PACKAGE = Path(__file__).resolve().parent.parent
"""The lakehouse package's folder (its log4j configuration, and the zip shipped to executors)."""
_LOCK = threading.Lock()
_SESSION: "SparkSession | None" = None
_MASTER: str | None = None
"""The process's session and what it reaches: a master URL, or a Spark Connect URL (``sc://``)."""
_ADOPTED = False
"""Whether the process's session is one the user built (``adopt``): never stopped here."""

DELTA_EXTENSION = "io.delta.sql.DeltaSparkSessionExtension"
DELTA_CATALOG = "org.apache.spark.sql.delta.catalog.DeltaCatalog"
_UTC = {"utc", "etc/utc", "gmt", "etc/gmt", "z", "+00:00", "utc+0", "gmt+0", "zulu", "universal", "etc/universal"}


QUERIES_AT_ONCE = 4
"""Small Spark queries a command asks at once (checks, invariants): each is mostly fixed
latency (a round trip, a job's start), so several in flight overlap it."""


def jars_dir() -> Path:
    """Where the Makefile caches Delta's jars (override with LAKEHOUSE_JARS)."""
    cached = env("LAKEHOUSE_JARS")
    if cached:
        return Path(cached)
    return Path(sys.prefix) / "share" / "lakehouse" / "jars"


def delta_jars() -> list[str]:
    """The cached Delta jars, or [] when the cache is missing or for another version."""
    d = jars_dir()
    if not d.is_dir():
        return []
    jars = sorted(str(p) for p in d.glob("*.jar"))
    if not any(Path(j).name == f"delta-spark_2.13-{DELTA_VERSION}.jar" for j in jars):
        return []
    return jars


S3A = "org.apache.hadoop.fs.s3a.S3AFileSystem"
"""hadoop-aws's file system, which lakehouse.objectstore names for s3:// paths."""


LOG_STORE_JAR = "lakehouse-delta-s3.jar"
"""lakehouse's Delta LogStore for S3 (lakehouse/jvm/src), compiled by ``make s3``."""


def s3_jars(logstore_only: bool = False) -> list[str]:
    """hadoop-aws and the AWS SDK bundle as ``make s3`` recorded them (paths in Maven's local
    repository), and the LogStore it built (``lakehouse-delta-s3.jar``; alone with
    ``logstore_only``: the user brings hadoop-aws); refused, naming the fix, when they were not
    made or have gone."""
    folder = jars_dir().parent / "jars-s3"
    try:
        jars = [j for j in (folder / "classpath.txt").read_text().strip().split(",") if j]
    except FileNotFoundError:
        jars = []
    if jars or logstore_only:
        jars = [*([] if logstore_only else jars), str(folder / LOG_STORE_JAR)]
    missing = [j for j in jars if not Path(j).is_file()]
    if not jars or missing:
        raise ConfigError(f"an s3:// warehouse needs hadoop-aws, the AWS SDK bundle and lakehouse's S3 LogStore on Spark's class path "
                          f"({'missing: ' + missing[0] if missing else 'not resolved yet'}); run `make s3`")
    return jars


def spark_conf(master: str, java_options: str = "") -> dict[str, str]:
    """The Spark configuration lakehouse runs with (without the jars): its own settings, then
    LAKEHOUSE_SPARK_CONF's; ``java_options`` go to the driver's JVM after lakehouse's own."""
    log4j = PACKAGE / "jvm" / "log4j2.properties"
    level = (env("LAKEHOUSE_LOG_LEVEL") or "ERROR").upper()
    java_opts = f"-Dlog4j.configurationFile=file:{log4j} -Dlakehouse.log.level={level}"
    for extra in (class_archive.java_options(), env("LAKEHOUSE_JAVA_OPTS"), java_options):
        if extra:  # LAKEHOUSE_JAVA_OPTS: e.g. a faster start for short-lived test runs
            java_opts += " " + extra
    conf = {
        "spark.app.name": "lakehouse",
        "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
        "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
        "spark.sql.session.timeZone": "UTC",
        "spark.driver.extraJavaOptions": java_opts + " -Duser.timezone=UTC",
        "spark.executor.extraJavaOptions": "-Duser.timezone=UTC",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.warehouse.dir": str(Path(os.environ.get("TMPDIR", "/tmp")) / "lakehouse-spark-warehouse"),
        "spark.databricks.delta.schema.autoMerge.enabled": "false",
        # Staged Parquet is also read by pyarrow (vector files): standard micros, not INT96.
        "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
        # PySpark's DataFrame query context: when on, every Column a Python call builds (F.col,
        # .alias, .cast, ...) first records its Python call site in the JVM (F.col: 19 Py4J round
        # trips instead of 3; an archive run's 998 -> 564). lakehouse's errors are one line.
        "spark.python.sql.dataFrameDebugging.enabled": "false",
        # Compiled query code is cached by its source; Spark keeps 100 entries, fewer than one
        # `verify` and one `check` generate, so a long-lived server compiled the same queries again
        # at every command (a seventh of its CPU in a profile of repeated `verify` runs).
        "spark.sql.codegen.cache.maxEntries": "1000",
    }
    if master.startswith("local"):
        # Small local jobs: few shuffle partitions and snapshot partitions start much faster.
        conf["spark.sql.shuffle.partitions"] = env("LAKEHOUSE_SHUFFLE_PARTITIONS") or "4"
        # Parallel file listing (Delta's VACUUM, big folders) makes one task per unit: Spark's
        # 10,000 cost minutes on a laptop.
        conf["spark.sql.sources.parallelPartitionDiscovery.parallelism"] = "8"
        conf["spark.databricks.delta.snapshotPartitions"] = "2"
        conf["spark.driver.memory"] = env("LAKEHOUSE_DRIVER_MEMORY") or "2g"
    else:
        # A cluster: Spark's 200 shuffle partitions stay the ceiling, and adaptive execution (on by
        # default) merges them by size (64 MB each) instead of keeping one per core: a few
        # megabytes run as one task, a big day as many.
        conf["spark.sql.adaptive.enabled"] = "true"
        conf["spark.sql.adaptive.coalescePartitions.enabled"] = "true"
        conf["spark.sql.adaptive.coalescePartitions.parallelismFirst"] = "false"
    conf.update(env_spark_conf())  # the user's settings win over lakehouse's
    return conf


def with_jars(conf: dict[str, str], jars: list[str]) -> dict[str, str]:
    """``conf`` with ``jars`` (Delta's) first in spark.jars, before the jars it already names
    (LAKEHOUSE_SPARK_CONF's, e.g. hadoop-aws for an object store)."""
    named = [j for j in conf.get("spark.jars", "").split(",") if j.strip()]
    both = [*jars, *(j for j in named if j not in jars)]
    return {**conf, "spark.jars": ",".join(both)} if both else {k: v for k, v in conf.items() if k != "spark.jars"}


def get_spark(master: str = "local[*]", java_options: str = "",
              extra_conf: dict[str, str] | None = None, output: str | None = None) -> "SparkSession":
    """The process's SparkSession with Delta, built on first use and reused afterwards
    (``java_options``: more options for the driver's JVM, used when it starts; ``extra_conf``:
    more Spark settings, e.g. the Connect server's; ``output``: a file that takes what the JVM
    itself prints, its start-up banner and log lines, instead of standard error)."""
    global _SESSION, _MASTER
    with _LOCK:
        if _SESSION is not None:
            if master != _MASTER:
                log.warning("Spark already runs with master %s; ignoring %s", _MASTER, master)
            return _SESSION
        try:
            from pyspark.sql import SparkSession
        except ImportError as e:  # pragma: no cover - packaging problem
            raise ConfigError(f"pyspark is not installed ({e}); run `make demo` or `make test`") from None
        if master.startswith("local"):
            os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        builder = SparkSession.builder.master(master)
        delta = delta_jars()
        conf = {**spark_conf(master, java_options), **(extra_conf or {})}
        if not delta:
            log.warning("Delta jars not cached in %s; resolving %s with Ivy", jars_dir(), DELTA_PACKAGE)
            named = [p for p in conf.get("spark.jars.packages", "").split(",") if p.strip()]
            conf["spark.jars.packages"] = ",".join([DELTA_PACKAGE, *named])  # the user's kept
        own_aws = "hadoop-aws" in conf.get("spark.jars", "") + conf.get("spark.jars.packages", "")
        on_s3 = conf.get("spark.hadoop.fs.s3.impl") == S3A  # lakehouse.objectstore's settings: an S3 warehouse
        s3 = s3_jars(logstore_only=own_aws) if on_s3 else []  # the user's own hadoop-aws is kept instead
        for k, v in with_jars(conf, [*delta, *s3]).items():
            builder = builder.config(k, v)
        try:
            with _jvm_output(output):
                spark = builder.getOrCreate()
        except Exception as e:  # noqa: BLE001 - Py4J and the JVM raise many kinds; one line for all
            where = f" (the JVM's output: {output})" if output else ""
            raise ConfigError(f"cannot start Spark (master {master}): {first_line(e)}{where}") from None
        spark.sparkContext.setLogLevel((env("LAKEHOUSE_LOG_LEVEL") or "ERROR").upper())
        if not master.startswith("local"):
            # Executors run lakehouse code (vector encoding): ship the package with the job.
            spark.sparkContext.addPyFile(_package_zip())
        _quiet_query_context()
        _SESSION, _MASTER = spark, master
        return spark


def _quiet_query_context() -> None:
    """pyspark logs every SQL or DataFrame error as a JSON document of the error, its plan and its
    JVM stack on stderr before lakehouse turns it into one line: logged with -v only."""
    from pyspark.logger import PySparkLogger

    level = logging.NOTSET if env("LAKEHOUSE_LOG_LEVEL") is not None else logging.CRITICAL
    for name in ("SQLQueryContextLogger", "DataFrameQueryContextLogger"):
        PySparkLogger.getLogger(name).setLevel(level)


@contextlib.contextmanager
def _jvm_output(output: str | None) -> Iterator[None]:
    """Start the JVM with its standard output on our standard error (or both on the file
    ``output``): Delta prints to the console (VACUUM's "Deleted N files ..."), and stdout holds
    nothing but the command's output (one JSON document with --format json)."""
    try:
        sys.stdout.flush()
        sys.stderr.flush()
        saved = os.dup(1), os.dup(2)
    except (OSError, ValueError):  # no usable stdout (embedded): leave it be
        yield
        return
    target = None
    try:
        if output is not None:
            Path(output).parent.mkdir(parents=True, exist_ok=True)
            target = os.open(output, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
            os.dup2(target, 2)
        os.dup2(2, 1)
        yield
    finally:
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in (*saved, target):
            if fd is not None:
                os.close(fd)


def connect(url: str, ship_package: bool) -> "SparkSession":
    """The process's session as a client of the Spark Connect server at ``url`` (``sc://...``,
    with its token), made on first use and reused afterwards. ``ship_package``: add the lakehouse
    package to the session's artifacts, for a server whose Python workers cannot import it."""
    global _SESSION, _MASTER
    with _LOCK:
        if _SESSION is not None:
            if url != _MASTER:
                log.warning("Spark already runs on %s; ignoring %s", redact(_MASTER or ""), redact(url))
            return _SESSION
        try:
            import pyspark.sql.connect.session  # noqa: F401 - the client's packages (grpcio, ...)
            from pyspark.sql import SparkSession
        except ImportError as e:  # pragma: no cover - packaging problem
            raise ConfigError(f"the Spark Connect client is not installed ({e}); run `make setup`") from None
        try:
            # pyspark's own builder: it also switches pyspark.sql.functions to Connect for the
            # process (SPARK_CONNECT_MODE_ENABLED), so a process uses one kind of session
            spark = SparkSession.builder.remote(url).getOrCreate()
            spark.conf.set("spark.sql.session.timeZone", "UTC")
        except Exception as e:  # noqa: BLE001 - gRPC and the server raise many kinds; one line for all
            raise ConfigError(f"cannot reach the Spark Connect server {redact(url)}: {first_line(e)}") from None
        if ship_package:
            spark.addArtifacts(_package_zip(), pyfile=True)
        from lakehouse.spark import fence

        fence.Registration(spark, url)
        fence.fence(url)  # a dead command's job still running there ends before this one starts
        _quiet_query_context()
        _SESSION, _MASTER = spark, url  # type: ignore[assignment]
        return spark  # type: ignore[return-value]


def redact(url: str) -> str:
    """A Spark Connect URL without its token (for messages and logs)."""
    import re

    return re.sub(r"(;token=)[^;]*", r"\1***", url)


def current() -> "SparkSession | None":
    """The process's session when one was made (by ``get_spark`` or ``connect``), else None."""
    return _SESSION


def is_connect(spark: "SparkSession") -> bool:
    """Whether ``spark`` is a Spark Connect session (no SparkContext, no JVM in this process)."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def sees_local_files(spark: "SparkSession") -> bool:
    """Whether the session's tasks can open this machine's files: its master is ``local`` and its
    driver runs here (in this process, or a Connect server on this host). On a cluster, or a
    Connect server elsewhere, a file on this machine must first be copied where executors reach it."""
    if not (spark.conf.get("spark.master", None) or "").startswith("local"):
        return False
    if not is_connect(spark):
        return True
    host = (spark.conf.get("spark.driver.host", None) or "").strip("[]").lower()
    return host in {"", "localhost", "::1", socket.gethostname().lower(), socket.getfqdn().lower()} or host.startswith("127.")


def parallelism(spark: "SparkSession") -> int:
    """How many tasks the session runs at once (at least 1): Spark's default parallelism, read
    from the SparkContext of a classic session; on a Connect session from
    ``spark.default.parallelism``, else the ``local[N]`` of its master, else 8."""
    if not is_connect(spark):
        return max(1, int(spark.sparkContext.defaultParallelism))
    conf = spark.conf
    value = conf.get("spark.default.parallelism", None)
    if value:
        return max(1, int(value))
    master = conf.get("spark.master", None) or ""
    inside = master[len("local["):-1] if master.startswith("local[") else ""
    if inside.isdigit():
        return max(1, int(inside))
    if master in ("local", "local[*]") or inside.startswith("*"):
        return max(1, os.cpu_count() or 1)
    return 8


def stop_spark() -> None:
    """Stop the process's session (tests and the CLI's exit); a session the user built
    (``adopt``) is only let go of, never stopped."""
    global _SESSION, _MASTER, _ADOPTED
    with _LOCK:
        if _SESSION is not None and not _ADOPTED:
            _SESSION.stop()  # of a Connect session: the client only, the server goes on
        _SESSION, _MASTER, _ADOPTED = None, None, False


def delta_problems(spark: "SparkSession") -> list[str]:
    """What a session lacks for lakehouse (empty when nothing): Delta's SQL extension and catalog
    (static settings, fixed when the session was built) and UTC as its session time zone (UTC
    days are the tables' days)."""
    conf = spark.conf
    out = []
    extensions = [e.strip() for e in (conf.get("spark.sql.extensions", None) or "").split(",")]
    if DELTA_EXTENSION not in extensions:
        out.append(f"spark.sql.extensions lacks {DELTA_EXTENSION}")
    if (conf.get("spark.sql.catalog.spark_catalog", None) or "") != DELTA_CATALOG:
        out.append(f"spark.sql.catalog.spark_catalog is not {DELTA_CATALOG}")
    zone = conf.get("spark.sql.session.timeZone", None) or ""
    if zone.strip().lower() not in _UTC:
        out.append(f"spark.sql.session.timeZone is {zone or 'unset'}, not UTC")
    return out


def adopt(spark: "SparkSession") -> "SparkSession":
    """Run lakehouse on a session the user built (a notebook's, ``spark-submit``'s, a cluster's):
    checked once (``delta_problems``: one ConfigError line naming every missing setting), then
    the process's session. lakehouse never stops it or changes its configuration (its commits set
    and unset Delta's per-write settings); on a cluster it adds
    the lakehouse package for the executors' Python (archiving encodes vector files there)."""
    global _SESSION, _MASTER, _ADOPTED
    with _LOCK:
        if _SESSION is spark:
            return spark
    problems = delta_problems(spark)
    if problems:
        raise ConfigError(f"the SparkSession given cannot run lakehouse: {'; '.join(problems)} (build it with "
                          "Delta Lake's settings, e.g. delta.configure_spark_with_delta_pip, and "
                          "spark.sql.session.timeZone=UTC)")
    if not is_connect(spark):
        if not (spark.conf.get("spark.master", None) or "local").startswith("local"):
            spark.sparkContext.addPyFile(_package_zip())
        _quiet_query_context()
    with _LOCK:
        if _SESSION is not None and not _ADOPTED and _SESSION is not spark:
            log.warning("lakehouse's own session is replaced by the session given")
        _SESSION, _MASTER, _ADOPTED = spark, spark.conf.get("spark.master", None), True
    return spark


def active() -> "SparkSession | None":
    """The session the user made active in this process (a notebook's, ``spark-submit``'s), if any:
    a classic session's or a Spark Connect client's."""
    from pyspark.sql import SparkSession

    found = SparkSession.getActiveSession()
    if found is None:
        try:
            from pyspark.sql.connect.session import SparkSession as ConnectSession

            found = ConnectSession.getActiveSession()  # type: ignore[assignment]
        except ImportError:  # pragma: no cover - the Connect client's packages are missing
            return None
    return found


def _package_zip() -> str:
    """The lakehouse package as a zip for ``addPyFile`` or ``addArtifacts`` (built once per session),
    in a temporary folder removed when the process ends (Spark serves the file to executors from
    there while the session lives)."""
    import atexit
    import shutil
    import tempfile

    pkg = PACKAGE
    folder = tempfile.mkdtemp(prefix="lakehouse-pkg-")
    atexit.register(shutil.rmtree, folder, True)
    return shutil.make_archive(str(Path(folder) / "lakehouse"), "zip", root_dir=pkg.parent, base_dir=pkg.name)
