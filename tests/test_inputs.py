"""Pure tests for reading input files into raw records (lakehouse/inputs.py)."""

from __future__ import annotations

import decimal
import gzip
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lakehouse.errors import InputError
from lakehouse.inputs import MAX_RAW, RawRecord, RawReject, detect_format, read_records

COLS = ["id", "n", "note"]


def put(tmp_path: Path, name: str, content: str | bytes) -> str:
    p = tmp_path / name
    if isinstance(content, bytes):
        p.write_bytes(content)
    else:
        with open(p, "w", encoding="utf-8", newline="") as f:
            f.write(content)
    return str(p)


def read(path: str, fmt: str, columns=COLS) -> list:
    return list(read_records(path, fmt, columns))  # type: ignore[arg-type]


def input_error(path: str, fmt: str, columns=COLS) -> str:
    with pytest.raises(InputError) as ei:
        read(path, fmt, columns)
    msg = str(ei.value)
    assert "\n" not in msg
    return msg


# -- detect_format ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name, fmt",
    [("a.csv", "csv"), ("dir/A.CSV", "csv"), ("a.csv.gz", "csv"), ("a.json", "json"), ("a.jsonl", "json"),
     ("a.ndjson", "json"), ("a.jsonl.gz", "json"), ("a.parquet", "parquet"), ("x.y/a.csv", "csv")],
)
def test_detect_format_by_extension(name, fmt):
    assert detect_format(name, None) == fmt


@pytest.mark.parametrize("name, ext", [("a.txt", "'.txt'"), ("a", "'(none)'"), ("a.gz", "'(none)'"),
                                       ("a.txt.gz", "'.txt'")])
def test_detect_format_unknown_extension(name, ext):
    with pytest.raises(InputError) as ei:
        detect_format(name, None)
    assert str(ei.value) == (
        f"{name}: cannot tell the format from the extension {ext}; name it with "
        "--input-format csv|json|parquet (load) or ingest.format (ingest)"
    )


def test_detect_format_explicit_wins():
    assert detect_format("data.txt", "csv") == "csv"
    assert detect_format("data.csv", "json") == "json"


def test_detect_format_explicit_unknown():
    with pytest.raises(InputError) as ei:
        detect_format("data.txt", "xml")
    assert str(ei.value) == "data.txt: unknown format 'xml' (expected csv, json or parquet)"


def test_missing_file(tmp_path):
    p = str(tmp_path / "nope.csv")
    assert input_error(p, "csv") == f"{p}: no such file"


# -- CSV -------------------------------------------------------------------------------------------


def test_csv_records_with_line_numbers(tmp_path):
    p = put(tmp_path, "a.csv", "id,n,note\n1,2,x\n3,4,y\n")
    assert read(p, "csv") == [
        RawRecord(2, {"id": "1", "n": "2", "note": "x"}, "1,2,x"),
        RawRecord(3, {"id": "3", "n": "4", "note": "y"}, "3,4,y"),
    ]


def test_csv_subset_and_order_of_columns(tmp_path):
    p = put(tmp_path, "a.csv", "note,id\nhello,1\n")
    assert read(p, "csv") == [RawRecord(2, {"note": "hello", "id": "1"}, "hello,1")]


def test_csv_quoted_multiline_field_and_blank_lines(tmp_path):
    content = 'id,n,note\n1,2,x\n\n2,3,"multi\nline, with comma"\n3,4,y\n\n\n4,5,"say ""hi"""\n'
    p = put(tmp_path, "a.csv", content)
    recs = read(p, "csv")
    assert [r.line for r in recs] == [2, 4, 6, 9]
    assert all(isinstance(r, RawRecord) for r in recs)
    assert recs[1].values["note"] == "multi\nline, with comma"
    assert recs[3].values["note"] == 'say "hi"'
    assert recs[3].raw == '4,5,"say ""hi"""'


def test_csv_crlf_line_endings(tmp_path):
    p = put(tmp_path, "a.csv", 'id,n\r\n1,2\r\n2,"a\r\nb"\r\n3,4\r\n')
    recs = read(p, "csv")
    assert [(r.line, r.values) for r in recs] == [
        (2, {"id": "1", "n": "2"}), (3, {"id": "2", "n": "a\r\nb"}), (5, {"id": "3", "n": "4"})]


def test_csv_wrong_field_count_rejected_with_line(tmp_path):
    p = put(tmp_path, "a.csv", "id,n,note\n1,2,x\n4,5\n5,6,z,extra\n7,8,w\n")
    out = read(p, "csv")
    assert out == [
        RawRecord(2, {"id": "1", "n": "2", "note": "x"}, "1,2,x"),
        RawReject(3, "4,5", "expected 3 fields as in the header, got 2"),
        RawReject(4, "5,6,z,extra", "expected 3 fields as in the header, got 4"),
        RawRecord(5, {"id": "7", "n": "8", "note": "w"}, "7,8,w"),
    ]


def test_csv_unterminated_quote_is_a_reject(tmp_path):
    p = put(tmp_path, "a.csv", 'id,n\n1,2\n2,"open\n')
    out = read(p, "csv")
    assert out[0] == RawRecord(2, {"id": "1", "n": "2"}, "1,2")
    assert isinstance(out[1], RawReject)
    assert out[1].line == 3
    assert out[1].reason.startswith("bad CSV: ")


def test_csv_bom_header(tmp_path):
    p = put(tmp_path, "a.csv", "\ufeffid,n\n1,2\n".encode("utf-8"))
    assert read(p, "csv") == [RawRecord(2, {"id": "1", "n": "2"}, "1,2")]


def test_csv_header_names_are_stripped(tmp_path):
    p = put(tmp_path, "a.csv", " id , n \n1,2\n")
    assert read(p, "csv")[0].values == {"id": "1", "n": "2"}


def test_csv_values_are_not_stripped(tmp_path):
    p = put(tmp_path, "a.csv", "id,note\n1, x \n")
    assert read(p, "csv")[0].values == {"id": "1", "note": " x "}


def test_csv_empty_fields_are_empty_strings(tmp_path):
    p = put(tmp_path, "a.csv", 'id,n,note\n1,,""\n')
    assert read(p, "csv")[0].values == {"id": "1", "n": "", "note": ""}


def test_csv_duplicate_header_column(tmp_path):
    p = put(tmp_path, "a.csv", "id,n,id\n1,2,3\n")
    assert input_error(p, "csv") == f"{p}: header repeats column 'id'"


def test_csv_unknown_column_names_column_and_file(tmp_path):
    p = put(tmp_path, "a.csv", "id,colour\n1,red\n")
    assert input_error(p, "csv") == f"{p}: unknown column 'colour' (the table has: id, n, note)"


def test_csv_several_unknown_columns(tmp_path):
    p = put(tmp_path, "a.csv", "id,a,b\n1,2,3\n")
    assert input_error(p, "csv") == f"{p}: unknown columns 'a', 'b' (the table has: id, n, note)"


def test_csv_empty_file(tmp_path):
    p = put(tmp_path, "a.csv", "")
    assert input_error(p, "csv") == f"{p}: empty file (a CSV file needs a header row of column names)"


def test_csv_header_only_has_no_records(tmp_path):
    p = put(tmp_path, "a.csv", "id,n\n")
    assert read(p, "csv") == []


def test_csv_gz(tmp_path):
    p = put(tmp_path, "a.csv.gz", gzip.compress(b'id,n\n1,2\n\n2,"x\ny"\n'))
    out = read(p, "csv")
    assert [(r.line, r.values) for r in out] == [(2, {"id": "1", "n": "2"}), (4, {"id": "2", "n": "x\ny"})]


def test_csv_raw_of_multiline_record_is_valid_csv(tmp_path):
    p = put(tmp_path, "a.csv", 'id,n\n2,"x\ny"\n')
    [rec] = read(p, "csv")
    assert rec.raw == '2,"x\ny"'


def test_csv_gz_that_is_not_gzip(tmp_path):
    p = put(tmp_path, "a.csv.gz", b"id,n\n1,2\n")
    assert input_error(p, "csv").startswith(f"{p}: cannot read: ")


def test_csv_not_utf8(tmp_path):
    p = put(tmp_path, "a.csv", b"id,n\n1,\xff\n")
    assert input_error(p, "csv") == f"{p}: line 2: not UTF-8 text (invalid start byte at byte 2 of the line)"


def test_long_raw_record_is_cut(tmp_path):
    p = put(tmp_path, "a.csv", "id,n\n" + "x" * (MAX_RAW + 50) + "\n")
    [rej] = read(p, "csv")
    assert isinstance(rej, RawReject)
    assert rej.raw == "x" * MAX_RAW + "...(cut)"


# -- JSON Lines ------------------------------------------------------------------------------------


def test_json_records_and_line_numbers(tmp_path):
    lines = ['{"id": "1", "n": 2}', "", '{"id": "2", "note": null}', "   ", '{"id": "3", "n": 2.50}']
    p = put(tmp_path, "a.jsonl", "\n".join(lines) + "\n")
    out = read(p, "json")
    assert [(r.line, r.values) for r in out] == [
        (1, {"id": "1", "n": 2}),
        (3, {"id": "2", "note": None}),
        (5, {"id": "3", "n": decimal.Decimal("2.50")}),
    ]
    assert out[0].raw == '{"id": "1", "n": 2}'


def test_json_floats_keep_their_literal(tmp_path):
    p = put(tmp_path, "a.jsonl", '{"n": 0.1}\n{"n": 1e2}\n')
    vals = [r.values["n"] for r in read(p, "json")]
    assert vals == [decimal.Decimal("0.1"), decimal.Decimal("1E+2")]
    assert all(isinstance(v, decimal.Decimal) for v in vals)


def test_json_invalid_line_is_a_reject_with_line_number(tmp_path):
    p = put(tmp_path, "a.jsonl", '{"id": "1"}\n{bad\n{"id": "3"}\n')
    out = read(p, "json")
    assert out[0] == RawRecord(1, {"id": "1"}, '{"id": "1"}')
    assert isinstance(out[1], RawReject)
    assert out[1].line == 2
    assert out[1].raw == "{bad"
    assert out[1].reason.startswith("invalid JSON: Expecting property name")
    assert out[2] == RawRecord(3, {"id": "3"}, '{"id": "3"}')


@pytest.mark.parametrize("text, kind", [("[1, 2]", "list"), ('"x"', "str"), ("5", "int"), ("null", "NoneType"),
                                        ("true", "bool")])
def test_json_non_object_is_a_reject(tmp_path, text, kind):
    p = put(tmp_path, "a.jsonl", '{"id": "1"}\n' + text + "\n")
    out = read(p, "json")
    assert out[1] == RawReject(2, text, f"expected a JSON object, got {kind}")


def test_json_unknown_key_names_line_and_column(tmp_path):
    p = put(tmp_path, "a.jsonl", '{"id": "1"}\n\n{"id": "2", "colour": "red"}\n')
    assert input_error(p, "json") == f"{p}: line 3: unknown column 'colour' (the table has: id, n, note)"


def test_json_several_unknown_keys(tmp_path):
    p = put(tmp_path, "a.jsonl", '{"a": 1, "id": "2", "b": 2}\n')
    assert input_error(p, "json") == f"{p}: line 1: unknown columns 'a', 'b' (the table has: id, n, note)"


def test_json_crlf(tmp_path):
    p = put(tmp_path, "a.json", '{"id": "1"}\r\n{"id": "2"}\r\n')
    out = read(p, "json")
    assert [(r.line, r.values, r.raw) for r in out] == [(1, {"id": "1"}, '{"id": "1"}'),
                                                        (2, {"id": "2"}, '{"id": "2"}')]


def test_json_gz(tmp_path):
    p = put(tmp_path, "a.jsonl.gz", gzip.compress(b'{"id": "1"}\n{"id": 2}\n'))
    assert [r.values for r in read(p, "json")] == [{"id": "1"}, {"id": 2}]


def test_json_empty_file_has_no_records(tmp_path):
    p = put(tmp_path, "a.jsonl", "")
    assert read(p, "json") == []


# -- Parquet ---------------------------------------------------------------------------------------


def test_parquet_records_numbered_from_one(tmp_path):
    p = str(tmp_path / "a.parquet")
    pq.write_table(pa.table({"id": ["a", "b", "c"], "n": pa.array([1, None, 3], pa.int32())}), p)
    out = read(p, "parquet")
    assert [(r.line, r.values) for r in out] == [
        (1, {"id": "a", "n": 1}), (2, {"id": "b", "n": None}), (3, {"id": "c", "n": 3})]
    assert json.loads(out[1].raw) == {"id": "b", "n": None}


def test_parquet_many_row_groups_keep_counting(tmp_path):
    p = str(tmp_path / "a.parquet")
    pq.write_table(pa.table({"id": [str(i) for i in range(12_000)]}), p, row_group_size=5_000)
    out = read(p, "parquet")
    assert len(out) == 12_000
    assert out[-1].line == 12_000 and out[-1].values == {"id": "11999"}
    assert [r.line for r in out] == list(range(1, 12_001))


def test_parquet_unknown_column(tmp_path):
    p = str(tmp_path / "a.parquet")
    pq.write_table(pa.table({"id": ["a"], "colour": ["red"]}), p)
    assert input_error(p, "parquet") == f"{p}: unknown column 'colour' (the table has: id, n, note)"


def test_parquet_not_parquet(tmp_path):
    p = put(tmp_path, "a.parquet", "hello, world")
    assert input_error(p, "parquet").startswith(f"{p}: not a readable Parquet file: ")
