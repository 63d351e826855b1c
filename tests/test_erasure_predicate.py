"""What ``lakehouse delete`` erases (lakehouse.erasure.predicate), pure: a predicate is one
boolean expression over the table's visible columns, the same at every evaluation; keys files in
their three forms, typed, with one-line errors naming file, line and column."""

from __future__ import annotations

import datetime as dt
import decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lakehouse.definitions.validate import parse_definition
from lakehouse.erasure.predicate import keys_predicate, parse, read_keys, value_sql
from lakehouse.errors import InputError

ORDERS = parse_definition({
    "name": "orders",
    "columns": [{"name": "id", "type": "string", "nullable": False}, {"name": "shop", "type": "int"},
                {"name": "amount", "type": "decimal(10,2)"}, {"name": "at", "type": "timestamp", "nullable": False}],
    "primary_key": ["id"], "event_time": "at"}, "orders.yaml")
LINES = parse_definition({
    "name": "lines",
    "columns": [{"name": "order_id", "type": "long", "nullable": False}, {"name": "line", "type": "int", "nullable": False},
                {"name": "at", "type": "timestamp", "nullable": False}],
    "primary_key": ["order_id", "line"], "event_time": "at"}, "lines.yaml")
CLICKS = parse_definition({
    "name": "clicks", "columns": [{"name": "url", "type": "string"}, {"name": "at", "type": "timestamp", "nullable": False}],
    "event_time": "at"}, "clicks.yaml")


@pytest.mark.parametrize("text, columns", [
    ("id = 'a'", {"id"}),
    ("shop IN (1, 2) AND at < TIMESTAMP '2026-11-20 00:00:00'", {"shop", "at"}),
    ("event_date = DATE '2026-11-19'", {"event_date"}),
    ("lower(id) LIKE 'x%' OR amount IS NULL", {"id", "amount"}),
    ("ID = 'a'", {"id"}),  # columns are found whatever their case
    ("NOT (shop > 3)", {"shop"}),
    ("id = 'a;b' OR id = 'it''s'", {"id"}),  # a semicolon or a quote inside a literal is a value
])
def test_predicates_over_the_visible_columns_are_taken(text: str, columns: set[str]) -> None:
    p = parse(ORDERS, text)
    assert p.columns == columns and p.table == "orders" and p.text == text
    again = parse(ORDERS, p.sql)  # its SQL is a predicate of its own, the same
    assert again.sql == p.sql and again.columns == p.columns
    assert p.query().startswith("SELECT * FROM `orders` WHERE ")


@pytest.mark.parametrize("text, why", [
    ("", "needs a predicate"),
    ("   ", "needs a predicate"),
    ("customer = 'x'", "unknown column 'customer'; orders has id, shop, amount, at, event_date"),
    ("id IN (SELECT id FROM other)", "subquery"),
    ("EXISTS (SELECT 1 FROM orders)", "subquery"),
    ("id = 'a'; DROP TABLE orders", ""),
    ("hash(*) = 0", "* is not allowed"),
    ("1 = 1) UNION SELECT * FROM other WHERE (1 = 1", "one boolean expression"),
    ("count(*) > 1", "aggregate"),
    ("row_number() OVER (ORDER BY at) = 1", "aggregate or window"),
    ("rand() < 0.5", "rand() gives another value"),
    ("at < current_timestamp()", "another value at each evaluation"),
    ("event_date < current_date()", "another value at each evaluation"),
    ("uuid() = id", "another value at each evaluation"),
    ("1 = 1", "reads no column"),
    ("TRUE", "reads no column"),
    ("o.id = 'a'", "without a table"),
    ("id = (SELECT max(id) FROM orders)", "subquery"),
    ("read_parquet('x') IS NULL", ""),
])
def test_bad_predicates_are_refused_in_one_line(text: str, why: str) -> None:
    with pytest.raises(InputError, match="orders") as e:
        parse(ORDERS, text)
    assert why in str(e.value) and "\n" not in str(e.value)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(alphabet=st.sampled_from(list("idshopamountatevent_dte ()',;=<>!%*+-/|&0123456789INOTANDRSELCFWHUMXQ\"`\\.\n")),
               max_size=60))
def test_any_text_is_a_predicate_or_one_line_refusal(text: str) -> None:
    """Hostile text of the predicate's alphabet: taken (a stable single expression over known
    columns) or refused with an InputError of one line; never anything else."""
    try:
        p = parse(ORDERS, text)
    except InputError as e:
        assert "\n" not in str(e)
        return
    assert p.columns and p.columns <= set(ORDERS.visible_columns)
    assert parse(ORDERS, p.sql).sql == p.sql


def test_keys_one_per_line_csv_with_a_header_and_parquet(tmp_path: Path) -> None:
    one = tmp_path / "keys.txt"
    one.write_text('a\nb\n\na\nc d\nDoe, John\n"quoted\n')
    assert read_keys(ORDERS, str(one)).column("id").to_pylist() == ["a", "b", "c d", "Doe, John", '"quoted']
    bom = tmp_path / "bom.csv"
    bom.write_bytes("\ufeffid\nz\n".encode())
    assert read_keys(ORDERS, str(bom)).column("id").to_pylist() == ["z"]  # a header, whatever the BOM
    header = tmp_path / "keys.csv"
    header.write_text("id,other\nx,1\ny,2\n")
    assert read_keys(ORDERS, str(header)).column("id").to_pylist() == ["x", "y"]
    two = tmp_path / "lines.csv"
    two.write_text("line,order_id\n1,10\n2,10\n1,11\n")
    t = read_keys(LINES, str(two))
    assert t.to_pylist() == [{"order_id": 10, "line": 1}, {"order_id": 10, "line": 2}, {"order_id": 11, "line": 1}]
    assert t.schema.field("order_id").type == pa.int64()
    pq.write_table(pa.table({"order_id": [5, 5], "line": [1, 1], "x": ["a", "b"]}), tmp_path / "k.parquet")
    assert read_keys(LINES, str(tmp_path / "k.parquet")).to_pylist() == [{"order_id": 5, "line": 1}]


@pytest.mark.parametrize("definition, name, content, why", [
    (LINES, "bad.csv", "order_id,line\n10,1\nten,2\n", "bad.csv: line 3: column 'order_id'"),
    (LINES, "short.csv", "order_id\n10\n", "short.csv: line 1: no column 'line' in the header"),
    (CLICKS, "k.txt", "a\n", "clicks: has no primary key; --keys needs one (use --where)"),
    (LINES, "k.parquet", None, "k.parquet: no column 'line'"),
    (LINES, "broken.parquet", "not parquet", "broken.parquet: not a readable Parquet file"),
])
def test_bad_keys_files_are_refused_naming_file_line_and_column(tmp_path: Path, definition, name: str,
                                                                 content: str | None, why: str) -> None:
    path = tmp_path / name
    if content is None:
        pq.write_table(pa.table({"order_id": [1]}), path)
    else:
        path.write_text(content)
    with pytest.raises(InputError) as e:
        read_keys(definition, str(path))
    assert why in str(e.value) and "\n" not in str(e.value)
    with pytest.raises(InputError, match="no such file"):
        read_keys(ORDERS, str(tmp_path / "missing.txt"))


def test_keys_become_one_predicate_with_typed_literals() -> None:
    t = pa.table({"id": ["a", "it's"]})
    assert keys_predicate(ORDERS, t) == "`id` IN ('a', 'it\\'s')"  # Spark's escape (it reads 'it''s' as its)
    hostile = pa.table({"id": ["x\\", ") OR TRUE --"]})
    p = parse(ORDERS, keys_predicate(ORDERS, hostile))
    tree = __import__("sqlglot").parse_one(p.sql, read="spark")
    assert [v.this for v in tree.expressions] == ["x\\", ") OR TRUE --"]  # two values, not a condition
    assert keys_predicate(ORDERS, pa.table({"id": pa.array([], pa.string())})) == "FALSE"
    two = pa.table({"order_id": [1, 2], "line": [3, 4]})
    assert keys_predicate(LINES, two) == "(`order_id` = 1 AND `line` = 3) OR (`order_id` = 2 AND `line` = 4)"
    assert value_sql(dt.datetime(2026, 11, 20, 10, tzinfo=dt.timezone(dt.timedelta(hours=2)))) == \
        "TIMESTAMP '2026-11-20 08:00:00'"
    assert value_sql(dt.date(2026, 1, 2)) == "DATE '2026-01-02'"
    assert value_sql(decimal.Decimal("1.50")) == "1.50" and value_sql(float("nan")) == "CAST('nan' AS DOUBLE)"
    for p in (keys_predicate(ORDERS, t), keys_predicate(LINES, two)):
        assert parse(ORDERS if "`id`" in p else LINES, p).sql  # a predicate the checker takes
