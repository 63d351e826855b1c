"""The guard's list of Spark's command plan classes (lakehouse.query.commands) is complete for the
Spark and Delta this project pins: every class of their jars that implements Spark's ``Command``
or ``ParsedStatement`` is a command by ``is_command``. An upgrade that brings a new command under
a new name fails here until the list has it."""

from __future__ import annotations

import glob
import os
import zipfile

import pytest

from lakehouse.query.commands import OTHER_COMMANDS, is_command


@pytest.mark.spark
def test_every_command_class_of_spark_and_delta_is_known(spark):
    import pyspark

    from lakehouse.spark.session import delta_jars

    jvm = spark._jvm
    loader = jvm.java.lang.Thread.currentThread().getContextClassLoader()
    bases = [jvm.java.lang.Class.forName(f"org.apache.spark.sql.catalyst.plans.logical.{t}", False, loader)
             for t in ("Command", "ParsedStatement")]
    jars = glob.glob(os.path.join(os.path.dirname(pyspark.__file__), "jars", "spark-*.jar")) + delta_jars()
    assert any("spark-catalyst" in j for j in jars) and any("delta-spark" in j for j in jars)
    found: set[str] = set()
    for jar in jars:
        for entry in zipfile.ZipFile(jar).namelist():
            if not entry.endswith(".class") or "$" in entry or not entry.startswith(("org/apache/spark/sql/", "io/delta/")):
                continue
            try:
                cls = jvm.java.lang.Class.forName(entry[:-6].replace("/", "."), False, loader)
            except Exception:  # noqa: BLE001 - a class whose dependencies are absent is no plan
                continue
            if not cls.isInterface() and any(b.isAssignableFrom(cls) for b in bases):
                found.add(str(cls.getSimpleName()))
    assert len(found) > 150  # the scan did reach the plan classes
    assert sorted(n for n in found if not is_command(n)) == []
    # and the list names nothing that is not such a class (no stale entries)
    assert sorted(OTHER_COMMANDS - found) == []


def test_a_query_node_is_no_command():
    for node in ("Project", "Aggregate", "CTE", "UnresolvedRelation", "Join", "Sort", "GlobalLimit",
                 "LocalRelation", "Window", "SubqueryAlias", "Filter", "Union", "Generate", "OneRowRelation"):
        assert not is_command(node)
    for node in ("InsertIntoStatement", "SetCommand", "CacheTable", "DropTable", "MergeIntoTable", "DeltaMergeInto"):
        assert is_command(node)
