"""README's function table is the catalog's (lakehouse/query/dialect/catalog.py), and no name is
both translated and refused."""

from __future__ import annotations

from pathlib import Path

from lakehouse.query.dialect.catalog import REFUSED, TRANSLATED, markdown

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_shows_the_function_table():
    text = README.read_text()
    start, end = "<!-- functions: begin -->\n", "<!-- functions: end -->"
    assert text[text.index(start) + len(start):text.index(end)] == markdown()


def test_no_function_is_both_translated_and_refused():
    assert not set(TRANSLATED) & {n.split(" ")[0] for n in REFUSED if "(" not in n}

