"""The names a table definition may use, and the names lakehouse keeps for itself."""

from __future__ import annotations

import re

TABLE_NAME = re.compile(r"^[a-z][a-z0-9_]{0,62}$")
"""What a table name looks like (also the YAML file's name)."""
COLUMN_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,127}$")
"""What a column name looks like."""
PARTITION_COLUMN = "event_date"
"""The partition column every physical table carries: the UTC day of the event time."""
RESERVED_COLUMNS = frozenset({PARTITION_COLUMN})
"""Column names a definition may not use."""
LOAD_COLUMN = "_lh_load"
"""Hidden column of live and archive rows: the load that wrote the row. Archiving uses it to
delete exactly the live rows it archived (rows loaded later stay, whatever their time)."""
HIDDEN_PREFIX = "_lh_"
"""The prefix of lakehouse's hidden columns; no defined column may start with it."""
