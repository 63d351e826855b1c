"""Table definitions: strict, frozen models loaded from tables/<name>.yaml.

Every error names the file, the field and what is wrong, on one line, e.g.
``tables/trips.yaml: columns[2].type: unknown type 'strin' (expected one of ...)``.

The package's modules, from the bottom up:

- ``names``: naming rules and the column names lakehouse reserves (partition, load, hidden).
- ``fields``: the strict model base and the size and count parsers the sections share.
- ``archive``, ``ingest``, ``stream``, ``jobs``, ``quality``: one module per YAML section.
- ``expectations``: which GE expectations exist and their arguments (the ``quality:`` schema).
- ``table``: ``Column`` and ``TableDefinition``.
- ``validate``: a parsed document to a definition, with one-line problems.
- ``load``: the project's ``tables/*.yaml`` files.

The names below are the package's public face; the rest of lakehouse imports them from here.
"""

from lakehouse.definitions.archive import ArchiveSettings
from lakehouse.definitions.fields import parse_size, positive_int
from lakehouse.definitions.ingest import SORT_FIELDS, FilenameTime, IngestSettings
from lakehouse.definitions.jobs import JobsSettings
from lakehouse.definitions.load import get_definition, load_definition, load_definitions
from lakehouse.definitions.names import (
    COLUMN_NAME,
    HIDDEN_PREFIX,
    LOAD_COLUMN,
    PARTITION_COLUMN,
    RESERVED_COLUMNS,
    TABLE_NAME,
)
from lakehouse.definitions.quality import Expectation
from lakehouse.definitions.stream import StreamSettings
from lakehouse.definitions.table import Column, TableDefinition
from lakehouse.definitions.validate import parse_definition

__all__ = [
    "COLUMN_NAME",
    "HIDDEN_PREFIX",
    "LOAD_COLUMN",
    "PARTITION_COLUMN",
    "RESERVED_COLUMNS",
    "SORT_FIELDS",
    "TABLE_NAME",
    "ArchiveSettings",
    "Column",
    "Expectation",
    "FilenameTime",
    "IngestSettings",
    "JobsSettings",
    "StreamSettings",
    "TableDefinition",
    "get_definition",
    "load_definition",
    "load_definitions",
    "parse_definition",
    "parse_size",
    "positive_int",
]
