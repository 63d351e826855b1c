"""The ``quality:`` section of a table YAML: GE expectations by their GE names and arguments,
validated strictly when the definition loads (no Spark; GE's registry through the cached
catalog), each problem one line naming the file and the field."""

from __future__ import annotations

import string
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lakehouse.definitions import expectations, parse_definition
from lakehouse.errors import DefinitionError
from tests.conftest import REPO

BASE = {"name": "t", "columns": [{"name": "fare", "type": "double"}, {"name": "city", "type": "int"},
                                 {"name": "ts", "type": "timestamp"}], "event_time": "ts"}


def parse(quality, **archive):
    doc = {**BASE, "quality": quality}
    if archive:
        doc["archive"] = archive
    return parse_definition(doc, "tables/t.yaml")


def error(quality) -> str:
    with pytest.raises(DefinitionError) as e:
        parse(quality)
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith("tables/t.yaml: ")
    return msg


def test_list_and_mapping_forms_and_labels():
    a = parse([{"expect_column_values_to_be_between": {"column": "fare", "min_value": 0}},
               "expect_table_row_count_to_be_between",
               {"expect_column_pair_values_a_to_be_greater_than_b": {"column_A": "fare", "column_B": "city"}}])
    assert [e.label() for e in a.quality] == ["expect_column_values_to_be_between(fare)",
                                              "expect_table_row_count_to_be_between",
                                              "expect_column_pair_values_a_to_be_greater_than_b(fare, city)"]
    b = parse({"expect_column_values_to_not_be_null": [{"column": "fare"}, {"column": "city"}],
               "expect_compound_columns_to_be_unique": {"column_list": ["city", "event_date"]}})
    assert [e.label() for e in b.quality] == ["expect_column_values_to_not_be_null(fare)",
                                              "expect_column_values_to_not_be_null(city)",
                                              "expect_compound_columns_to_be_unique(city, event_date)"]
    assert parse(None).quality == () and parse([], checks="before_commit").archive.checks == "before_commit"


def test_problems_name_the_field():
    assert error([{"expect_column_values_to_be_betwen": {"column": "fare"}}]) == (
        "tables/t.yaml: quality[0]: unknown expectation 'expect_column_values_to_be_betwen' "
        "(did you mean expect_column_values_to_be_between?)")
    assert "quality[1].expect_column_values_to_be_between.min_valu: unknown argument (did you mean min_value?)" in error(
        ["expect_table_row_count_to_be_between", {"expect_column_values_to_be_between": {"column": "fare", "min_valu": 0}}])
    assert "quality[0].expect_column_values_to_be_between.column: required argument is missing" in error(
        [{"expect_column_values_to_be_between": {"min_value": 0}}])
    assert "quality[0].expect_column_values_to_not_be_null.column: unknown column 'fares'" in error(
        [{"expect_column_values_to_not_be_null": {"column": "fares"}}])
    assert "quality[0].expect_compound_columns_to_be_unique.column_list: unknown column 'x'" in error(
        [{"expect_compound_columns_to_be_unique": {"column_list": ["fare", "x"]}}])
    assert "quality: item 0: expected one" in error([{"a": 1, "b": 2}])
    assert "quality: item 0 ('expect_column_values_to_not_be_null'): the arguments must be a mapping" in error(
        [{"expect_column_values_to_not_be_null": "fare"}])
    assert "quality: must be a list" in error("expect_column_values_to_not_be_null")
    with pytest.raises(DefinitionError, match=r"archive.checks: Input should be 'off' or 'before_commit'"):
        parse([], checks="always")


def test_the_catalog_is_gx_s_registry_and_cached():
    from great_expectations.expectations.registry import list_registered_expectation_implementations

    specs = expectations.catalog()
    assert set(specs) == set(list_registered_expectation_implementations())
    assert "mostly" in specs["expect_column_values_to_not_be_null"].args
    assert specs["expect_column_values_to_be_in_set"].required == ("column", "value_set")
    assert any((d / f"ge-expectations-{expectations.ge_version()}.json").is_file() for d in expectations.cache_dirs())


NAMES = sorted(expectations.catalog())
hostile = st.text(alphabet=string.ascii_letters + string.digits + "_-. /\\'\"\n\t\u00e9\u202e", min_size=1, max_size=30)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(
    st.tuples(st.sampled_from(NAMES), st.dictionaries(hostile, st.integers(), max_size=3)),
    st.tuples(hostile, st.dictionaries(st.sampled_from(["column", "min_value"]), st.sampled_from(["fare", "zz", 1]),
                                       max_size=2)),
), min_size=1, max_size=4))
def test_any_entry_loads_or_is_one_line_naming_its_index(entries):
    """A generated quality: section either loads (every name known, every argument known, the
    required ones given, the columns real) or fails with one line that names the first bad
    entry's index; it never crashes with anything else."""
    specs = expectations.catalog()
    cols = {"fare", "city", "ts", "event_date"}
    want_ok = [not expectations.problems(i, n, a, cols, specs) for i, (n, a) in enumerate(entries)]
    quality = [{n: a} for n, a in entries]
    if all(want_ok):
        assert len(parse(quality).quality) == len(entries)
        return
    msg = error(quality)
    first = want_ok.index(False)
    assert f"quality[{first}]" in msg


def test_ge_project_is_in_a_local_warehouse_or_a_local_folder_per_object_store(tmp_path):
    import tempfile

    from lakehouse.quality.gx import docs_index, quality_root

    assert quality_root(str(tmp_path)) == str(tmp_path / "_quality")
    assert docs_index(str(tmp_path)) == str(tmp_path / "_quality" / "docs" / "index.html")
    a, b = quality_root("s3a://bucket/wh"), quality_root("s3a://bucket/other")
    assert a.startswith(tempfile.gettempdir()) and a != b and "://" not in a


def test_great_expectations_imports_with_stand_ins_that_load_their_module_on_first_use():
    """scipy.stats and altair (GE's KL-divergence and KS-test expectations) are not imported with
    GE; their first use imports them, and every later name is the module's own."""
    code = """
import sys
from lakehouse.definitions.expectations import LAZY_MODULES, import_ge
import_ge()
import great_expectations.expectations.core.expect_column_kl_divergence_to_be_less_than as kl
from great_expectations.expectations.metrics.column_aggregate_metrics import column_bootstrapped_ks_test_p_value as ks
assert [type(sys.modules[m]).__name__ for m in LAZY_MODULES] == ["_Deferred", "_Deferred"], sys.modules["altair"]
assert round(float(kl.stats.entropy([0.5, 0.5], [0.25, 0.75])), 6) == 0.143841
assert ks.stats.kstest is sys.modules["scipy.stats"].kstest and type(sys.modules["scipy.stats"]).__name__ == "module"
assert kl.alt.Chart.__module__.startswith("altair.") and type(sys.modules["altair"]).__name__ == "module"
print("ok")
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
    assert out.stdout.strip() == "ok", out.stderr[-2000:]
