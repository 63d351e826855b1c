"""What every section of a table definition is built from: the strict, frozen model base and
the parsers of sizes and counts that several sections share."""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict

_SIZE = re.compile(r"^([0-9]+) *(B|KB|MB|GB|TB)?$", re.IGNORECASE)
_SIZE_UNITS = {"B": 1, "KB": 1 << 10, "MB": 1 << 20, "GB": 1 << 30, "TB": 1 << 40}


class Strict(BaseModel):
    """The base of every definition model: unknown keys are errors and values are frozen."""

    model_config = ConfigDict(extra="forbid", frozen=True, arbitrary_types_allowed=True)


def parse_size(value: Any) -> int:
    """A size in bytes from an integer or ``<int><unit>`` (B, KB, MB, GB, TB; 1 KB = 1024 B)."""
    if isinstance(value, bool):
        raise ValueError(f"expected a size such as '64MB', got {value!r}")
    if isinstance(value, int):
        n = value
    elif isinstance(value, str) and (m := _SIZE.fullmatch(value)):
        n = int(m.group(1)) * _SIZE_UNITS[(m.group(2) or "B").upper()]
    else:
        raise ValueError(f"expected a size such as '64MB' (units B, KB, MB, GB, TB), got {value!r}")
    if n < 1:
        raise ValueError(f"must be at least 1 byte, got {value!r}")
    return n


def positive_int(v: Any) -> int:
    """A whole number >= 1 (not a bool, not a float)."""
    if isinstance(v, bool) or not isinstance(v, int) or v < 1:
        raise ValueError(f"must be a whole number >= 1, got {v!r}")
    return v
