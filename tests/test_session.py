"""The Spark configuration lakehouse starts with, checked without starting Spark."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from lakehouse.spark import session
from tests.conftest import FAST_JVM


def test_log4j_configuration_is_a_file_that_exists() -> None:
    conf = session.spark_conf("local[2]")
    (path,) = re.findall(r"-Dlog4j\.configurationFile=file:(\S+)", conf["spark.driver.extraJavaOptions"])
    assert Path(path).is_file(), path
    assert "rootLogger.level" in Path(path).read_text()


def test_package_zip_for_executors_holds_the_whole_package() -> None:
    with zipfile.ZipFile(session._package_zip()) as z:
        names = set(z.namelist())
    for module in ("lakehouse/__init__.py", "lakehouse/spark/session.py", "lakehouse/archive/encode.py",
                   "lakehouse/jvm/log4j2.properties"):
        assert module in names, module


def test_small_job_settings_apply_to_local_masters_only() -> None:
    assert session.spark_conf("local[2]")["spark.sql.shuffle.partitions"]
    assert "spark.sql.shuffle.partitions" not in session.spark_conf("spark://127.0.0.1:7077")


def test_a_cluster_merges_shuffle_partitions_by_size_not_by_cores(monkeypatch) -> None:
    monkeypatch.delenv("LAKEHOUSE_SPARK_CONF", raising=False)
    for master in ("spark://10.0.0.5:7077", "yarn", "k8s://https://10.0.0.1:6443"):
        conf = session.spark_conf(master)
        assert conf["spark.sql.adaptive.enabled"] == "true"
        assert conf["spark.sql.adaptive.coalescePartitions.parallelismFirst"] == "false"
    assert "spark.sql.adaptive.coalescePartitions.parallelismFirst" not in session.spark_conf("local[2]")
    monkeypatch.setenv("LAKEHOUSE_SPARK_CONF", "spark.sql.adaptive.coalescePartitions.parallelismFirst=true")
    assert session.spark_conf("yarn")["spark.sql.adaptive.coalescePartitions.parallelismFirst"] == "true"


def test_spark_conf_from_the_environment_wins_and_bad_items_are_refused_by_name(monkeypatch) -> None:
    from lakehouse.errors import ConfigError

    monkeypatch.setenv("LAKEHOUSE_SPARK_CONF", "spark.sql.shuffle.partitions=7  spark.a.b=x=y")
    for master in ("local[2]", "spark://127.0.0.1:7077"):
        conf = session.spark_conf(master)
        assert conf["spark.sql.shuffle.partitions"] == "7" and conf["spark.a.b"] == "x=y"
        assert conf["spark.sql.session.timeZone"] == "UTC"  # lakehouse's own stay
    for bad, shown in (("spark.sql.x", "an item without '='"), ("sql.x=1", "'sql.x'"), ("spark.=1", "'spark.'"),
                       ("spark.x=", "'spark.x'"), ("=1", "''"), ("fs.s3a.secret.key=S3CR3T", "'fs.s3a.secret.key'")):
        monkeypatch.setenv("LAKEHOUSE_SPARK_CONF", f"spark.ok=1 {bad}")
        with pytest.raises(ConfigError) as e:
            session.spark_conf("local[1]")
        assert str(e.value) == f"LAKEHOUSE_SPARK_CONF: {shown} is not spark.KEY=VALUE"  # never the value
    monkeypatch.setenv("LAKEHOUSE_SPARK_CONF", "   ")
    assert "spark.ok" not in session.spark_conf("local[1]")


def test_jars_the_user_names_are_kept_beside_deltas() -> None:
    delta = ["/j/delta-spark.jar", "/j/delta-storage.jar"]
    assert session.with_jars({"a": "1"}, delta) == {"a": "1", "spark.jars": ",".join(delta)}
    mine = {"spark.jars": "/x/hadoop-aws.jar,/j/delta-storage.jar"}
    assert session.with_jars(mine, delta)["spark.jars"] == ",".join([*delta, "/x/hadoop-aws.jar"])
    assert session.with_jars(mine, []) == mine
    assert session.with_jars({"spark.jars": "", "a": "1"}, []) == {"a": "1"}


def test_class_archive_options_follow_the_setting(tmp_path, monkeypatch) -> None:
    from lakehouse.spark import class_archive

    monkeypatch.setenv("LAKEHOUSE_CLASS_ARCHIVE", "off")
    assert class_archive.path() is None and class_archive.java_options() == ""
    monkeypatch.setenv("LAKEHOUSE_CLASS_ARCHIVE", str(tmp_path / "missing.jsa"))
    assert class_archive.java_options() == ""  # not recorded (yet): Spark starts as before
    archive = tmp_path / "mine.jsa"
    archive.write_bytes(b"")
    monkeypatch.setenv("LAKEHOUSE_CLASS_ARCHIVE", str(archive))
    opts = class_archive.java_options()
    assert f"-XX:SharedArchiveFile={archive}" in opts
    assert opts in session.spark_conf("local[1]")["spark.driver.extraJavaOptions"]


@pytest.mark.slow
@pytest.mark.spark
def test_a_spark_driver_maps_the_class_archive_setup_recorded(tmp_path) -> None:
    """make setup records the archive (python -m lakehouse.warmup); a driver started as lakehouse
    starts one loads Spark's and Delta's classes from it, not from the jars."""
    from lakehouse.spark import class_archive

    assert class_archive.default_path().is_file(), "make setup records the class archive"
    log = tmp_path / "classes.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAKEHOUSE_")}
    env["LAKEHOUSE_JAVA_OPTS"] = f"{FAST_JVM} -Xlog:class+load=info:file={log}"
    code = ("from lakehouse.spark.session import get_spark; s = get_spark('local[1]'); "
            "s.sql('CREATE TABLE t (a INT) USING delta LOCATION \\'%s\\''); print(s.range(3).count())" % (tmp_path / "t"))
    p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0 and p.stdout.strip().endswith("3"), p.stderr[-2000:]
    loaded = log.read_text()
    for cls in ("org.apache.spark.sql.SparkSession ", "org.apache.spark.sql.delta.DeltaLog "):
        line = next(x for x in loaded.splitlines() if cls in x)
        assert "shared objects file" in line, line


def test_s3_jars_come_from_what_make_s3_recorded_or_are_refused_naming_the_fix(tmp_path, monkeypatch) -> None:
    from lakehouse.errors import ConfigError

    monkeypatch.setenv("LAKEHOUSE_JARS", str(tmp_path / "jars"))
    with pytest.raises(ConfigError) as e:
        session.s3_jars()
    assert "not resolved yet" in str(e.value) and "run `make s3`" in str(e.value)
    aws, bundle = tmp_path / "hadoop-aws-3.4.1.jar", tmp_path / "bundle-2.24.6.jar"
    (tmp_path / "jars-s3").mkdir()
    (tmp_path / "jars-s3" / "classpath.txt").write_text(f"{aws},{bundle}\n")
    aws.write_bytes(b"")
    with pytest.raises(ConfigError) as e:
        session.s3_jars()
    assert f"missing: {bundle}" in str(e.value)
    bundle.write_bytes(b"")
    store = tmp_path / "jars-s3" / session.LOG_STORE_JAR  # the LogStore make s3 compiles
    with pytest.raises(ConfigError) as e:
        session.s3_jars()
    assert f"missing: {store}" in str(e.value)
    store.write_bytes(b"")
    assert session.s3_jars() == [str(aws), str(bundle), str(store)]


def test_the_package_zip_for_executors_is_gone_when_its_process_ends(tmp_path):
    code = "from lakehouse.spark.session import _package_zip; print(_package_zip())"
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    made = Path(p.stdout.strip())
    assert p.returncode == 0 and made.name == "lakehouse.zip" and made.parent.parent == tmp_path, p.stderr
    assert not made.parent.exists()
