"""The ``quality:`` section of a table definition: Great Expectations expectations by their GE
names and arguments (which names and arguments exist is ``lakehouse.definitions.expectations``)."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from lakehouse.definitions.expectations import COLUMN_ARGS, COLUMN_LIST_ARGS
from lakehouse.definitions.fields import Strict


class Expectation(Strict):
    """One Great Expectations expectation of the ``quality:`` section: its GE name and arguments."""

    name: str
    """The expectation's GE name, e.g. ``expect_column_values_to_not_be_null``."""
    args: dict[str, Any] = Field(default_factory=dict)
    """Its arguments by name, as GE takes them."""

    def label(self) -> str:
        """``expect_column_values_to_be_between(fare_total)``: how results name it."""
        cols = [self.args[k] for k in COLUMN_ARGS if isinstance(self.args.get(k), str)]
        cols += [", ".join(map(str, self.args[k])) for k in COLUMN_LIST_ARGS
                 if isinstance(self.args.get(k), (list, tuple))]
        return f"{self.name}({', '.join(cols)})" if cols else self.name


def parse_expectations(v: Any) -> Any:
    """``quality:`` as a list of ``{expect_name: {args}}`` entries, or a mapping of expectation
    name to its arguments (or to a list of argument mappings, to use one expectation twice)."""
    if v is None:
        return ()
    if isinstance(v, dict):
        v = [{k: a} for k, args in v.items() for a in (args if isinstance(args, list) else [args])]
    if not isinstance(v, (list, tuple)):
        raise ValueError("must be a list of {expect_name: {argument: value, ...}} entries")
    out = []
    for i, item in enumerate(v):
        if isinstance(item, Expectation):
            out.append(item)
            continue
        if isinstance(item, str):
            item = {item: {}}
        if not isinstance(item, dict) or len(item) != 1:
            raise ValueError(f"item {i}: expected one {{expect_name: {{argument: value, ...}}}} mapping, got {item!r}")
        ((name, args),) = item.items()
        if args is None:
            args = {}
        if not isinstance(name, str) or not isinstance(args, dict):
            raise ValueError(f"item {i} ({name!r}): the arguments must be a mapping, got {args!r}")
        if not all(isinstance(k, str) for k in args):
            raise ValueError(f"item {i} ({name!r}): argument names must be strings")
        out.append(Expectation(name=name, args=args))
    return tuple(out)
