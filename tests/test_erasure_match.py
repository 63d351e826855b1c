"""A delete's predicate matches the same rows on DuckDB over Arrow rows (lakehouse.erasure.matching:
staged rows, rejects) as on Spark (live, the archive): hostile values (NULLs, NaN, -0.0, unicode,
times at day boundaries, decimals, empty strings) under predicates of every kind, generated ones
included. A NULL condition keeps the row on both."""

from __future__ import annotations

import datetime as dt
import decimal
import random
from typing import Any

import pyarrow as pa
import pytest

from lakehouse.definitions.validate import parse_definition
from lakehouse.erasure.matching import matches
from lakehouse.erasure.predicate import parse

pytestmark = pytest.mark.spark
UTC = dt.timezone.utc
ORDERS = parse_definition({
    "name": "orders",
    "columns": [{"name": "id", "type": "string", "nullable": False}, {"name": "shop", "type": "int"},
                {"name": "amount", "type": "decimal(10,2)"}, {"name": "score", "type": "double"},
                {"name": "vip", "type": "boolean"}, {"name": "at", "type": "timestamp", "nullable": False},
                {"name": "birthday", "type": "date"}],
    "primary_key": ["id"], "event_time": "at"}, "orders.yaml")
PREDICATES = [
    "id = 'a'", "id IN ('a', 'ü', '')", "shop <> 1", "shop IS NULL", "NOT (shop > 2)", "shop BETWEEN 1 AND 3",
    "amount >= 10.5", "amount IS NOT NULL AND amount < 0", "score > 0", "isnan(score)", "score = 0",
    "vip", "NOT vip", "vip IS NULL OR shop = 2", "at < TIMESTAMP '2026-11-20 00:00:00'",
    "event_date = DATE '2026-11-19'", "hour(at) = 23", "birthday < DATE '2000-01-01'", "lower(id) LIKE 'x%'",
"length(id) = 0", "coalesce(shop, 0) = 0", "concat(id, '-', shop) = 'a-1'",
    "to_date(at) = birthday", "CASE WHEN shop > 1 THEN vip ELSE NOT vip END", "date_format(at, 'yyyy-MM') = '2026-11'",
    "cast(shop AS string) = '1'", "abs(score) > 1e300", "id >= 'b'", "shop % 2 = 1",
]


def hostile(n: int = 60, seed: int = 3) -> pa.Table:
    rng = random.Random(seed)
    base = dt.datetime(2026, 11, 19, 23, 59, 59, tzinfo=UTC)
    ids = ["a", "b", "c", "", "ü", "x'y", "X", "é", "a b", "%"]
    rows = []
    for i in range(n):
        rows.append({
            "id": f"{rng.choice(ids)}{i if i > 9 else ''}" if i > 9 else ids[i],
            "shop": rng.choice([None, 0, 1, 2, 3, -1, 2**31 - 1]),
            "amount": rng.choice([None, decimal.Decimal("0.00"), decimal.Decimal("10.50"), decimal.Decimal("-3.25"),
                                  decimal.Decimal("99999999.99")]),
            "score": rng.choice([None, 0.0, -0.0, float("nan"), float("inf"), 1.5, -2.0, 1e308]),
            "vip": rng.choice([None, True, False]),
            "at": base + dt.timedelta(microseconds=rng.choice([0, 1, 10**6, -10**6, 3600 * 10**6, -86400 * 10**6])),
            "birthday": rng.choice([None, dt.date(1999, 12, 31), dt.date(2026, 11, 20), dt.date(1, 1, 1)]),
        })
    schema = pa.schema([(c.name, c.type.arrow()) for c in ORDERS.columns])
    return pa.Table.from_pylist(rows, schema=schema)


def spark_ids(spark: Any, rows: pa.Table, text: str) -> list[str]:
    p = parse(ORDERS, text)
    df = spark.createDataFrame(rows).selectExpr("*", "to_date(at) AS event_date")  # (Arrow: NULLs stay NULLs)
    df.createOrReplaceTempView("orders")
    return sorted(r["id"] for r in spark.sql(p.query()).collect())


def duck_ids(rows: pa.Table, text: str) -> list[str]:
    mask = matches(ORDERS, parse(ORDERS, text), rows)
    return sorted(rows.filter(mask).column("id").to_pylist())


@pytest.fixture(scope="module")
def rows() -> pa.Table:
    return hostile()


@pytest.mark.parametrize("text", PREDICATES)
def test_duckdb_over_arrow_matches_what_spark_matches(spark: Any, rows: pa.Table, text: str) -> None:
    assert duck_ids(rows, text) == spark_ids(spark, rows, text), text


def test_generated_predicates_match_alike(spark: Any, rows: pa.Table) -> None:
    rng = random.Random(11)
    atoms = [p for p in PREDICATES if " OR " not in p and "CASE" not in p]
    for _ in range(25):
        a, b = rng.sample(atoms, 2)
        text = rng.choice(["({}) AND ({})", "({}) OR ({})", "NOT (({}) AND ({}))", "({}) OR NOT ({})"]).format(a, b)
        assert duck_ids(rows, text) == spark_ids(spark, rows, text), text


def test_a_predicate_duckdb_cannot_evaluate_as_spark_does_is_refused_before_anything(rows: pa.Table) -> None:
    from lakehouse.erasure.matching import check
    from lakehouse.errors import InputError

    with pytest.raises(InputError, match="RLIKE is refused") as e:
        check(ORDERS, "id RLIKE '^[a-c]$'")
    assert "\n" not in str(e.value)
    assert check(ORDERS, "id = 'a'").columns == {"id"}


def test_no_rows_match_nothing_and_a_row_without_event_date_gets_it(rows: pa.Table) -> None:
    empty = rows.slice(0, 0)
    assert len(matches(ORDERS, parse(ORDERS, "id = 'a'"), empty)) == 0
    mask = matches(ORDERS, parse(ORDERS, "event_date = DATE '2026-11-19'"), rows)
    assert len(mask) == rows.num_rows and mask.true_count > 0
