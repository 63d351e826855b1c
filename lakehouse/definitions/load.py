"""Reading a project's table definitions from ``tables/<name>.yaml`` files: strict YAML (a
duplicate key is an error), every problem one line naming the file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from lakehouse.definitions.names import TABLE_NAME
from lakehouse.definitions.table import TableDefinition
from lakehouse.definitions.validate import parse_definition
from lakehouse.errors import DefinitionError, TableNotFound


class _NoDuplicatesLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """A safe YAML loader that refuses duplicate keys instead of keeping the last one (libyaml's
    parser where PyYAML has it: a definition parses in about 2 ms instead of 10)."""


def _construct_mapping(loader: _NoDuplicatesLoader, node: yaml.MappingNode, deep: bool = False) -> dict:
    """A mapping node as a dict; a ConstructorError at the second occurrence of a key."""
    seen: set[Any] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r}", key_node.start_mark
            )
        seen.add(key)
    return loader.construct_mapping(node, deep=deep)


_NoDuplicatesLoader.add_constructor(
    yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping
)


def load_definition(path: Path) -> TableDefinition:
    """Load and validate one tables/<name>.yaml file."""
    source = _display(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise DefinitionError(f"{source}: file not found") from None
    except (OSError, UnicodeDecodeError) as e:
        raise DefinitionError(f"{source}: cannot read: {e}") from None
    try:
        data = yaml.load(text, Loader=_NoDuplicatesLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise DefinitionError(f"{source}: invalid YAML{where}: {problem}") from None
    if data is None:
        raise DefinitionError(f"{source}: the file is empty (expected name, columns, event_time, ...)")
    return parse_definition(data, source, expected_name=path.stem)


def _display(path: Path) -> str:
    """tables/<file> relative to the project where possible, so messages stay short."""
    parts = path.parts
    if len(parts) >= 2 and parts[-2] == "tables":
        return f"tables/{parts[-1]}"
    return str(path)


def load_definitions(tables_dir: Path) -> dict[str, TableDefinition]:
    """All definitions of a project, by table name; a bad file raises naming that file."""
    if not tables_dir.is_dir():
        return {}
    out: dict[str, TableDefinition] = {}
    for path in sorted(tables_dir.iterdir()):
        if path.name.startswith(".") or path.suffix not in (".yaml", ".yml"):
            continue
        d = load_definition(path)
        out[d.name] = d
    return out


def get_definition(tables_dir: Path, name: str) -> TableDefinition:
    """One table's definition; TableNotFound with the known names otherwise."""
    if not TABLE_NAME.fullmatch(name):
        raise TableNotFound(f"bad table name {name!r}: expected ^[a-z][a-z0-9_]{{0,62}}$")
    for suffix in (".yaml", ".yml"):
        path = tables_dir / f"{name}{suffix}"
        if path.exists():
            return load_definition(path)
    known = sorted(p.stem for p in tables_dir.glob("*.y*ml")) if tables_dir.is_dir() else []
    raise TableNotFound(
        f"table {name!r} is not defined (no tables/{name}.yaml); known tables: {', '.join(known) or 'none'}"
    )
