"""The Spark configuration lakehouse starts with, checked without starting Spark."""

from __future__ import annotations

import re
import zipfile
from pathlib import Path

from lakehouse.spark import session


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
