"""The read-only guard: ``lakehouse query`` runs exactly one read-only statement.

Allowed: one SELECT / WITH / VALUES query (set operations and subqueries included), SHOW,
DESCRIBE, and EXPLAIN of a query. Refused anywhere in the tree: writes and DDL (INSERT, DELETE,
CREATE, ...), session commands (SET, ADD JAR, USE, ...), DuckDB commands (COPY, ATTACH,
INSTALL/LOAD, PRAGMA), tables outside the project (``parquet.`/x```, ``delta.`/x```, quoted
paths) and table functions that read files (``read_csv``, ``delta_scan``, ``glob``, ...).

The check parses with sqlglot (Spark dialect) and walks the tree. Spark's own parser then
confirms the kind of statement and its tables before Spark runs it (lakehouse.query.spark), so a
parser difference cannot smuggle in a statement that was not checked. Pure: no engine here.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import Literal

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError

from lakehouse.errors import QueryError, first_line

ALLOWED = "SELECT, WITH, VALUES, SHOW, DESCRIBE, EXPLAIN"
_WHY = f"lakehouse query runs one read-only statement ({ALLOWED})"
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

Kind = Literal["query", "show", "describe", "explain"]

# Statement kinds that must not appear anywhere in the tree (a CTE or subquery included).
_STATEMENTS: tuple[type[exp.Expression], ...] = (
    exp.DML, exp.DDL, exp.Command, exp.Set, exp.Pragma, exp.Use, exp.Cache, exp.Uncache,
    exp.Refresh, exp.TruncateTable, exp.LoadData, exp.Transaction, exp.Commit, exp.Rollback,
    exp.Grant, exp.Revoke, exp.Analyze, exp.Install, exp.Export, exp.Attach, exp.Detach,
    exp.Into, exp.Kill, exp.Comment, exp.Lock, exp.Alter, exp.Drop, exp.Describe, exp.Show,
    exp.Summarize,
)
_QUERIES = (exp.Select, exp.SetOperation, exp.Values, exp.Subquery)

# Table functions that only compute rows (no files, no catalog); everything else in FROM is refused.
TABLE_FUNCTIONS = frozenset({
    "range", "explode", "explode_outer", "posexplode", "posexplode_outer", "inline",
    "inline_outer", "stack", "json_tuple",
})
# Functions that read files, run SQL text or reach outside the query, in any position.
FILE_FUNCTIONS = frozenset({
    "read_csv", "read_csv_auto", "read_parquet", "parquet_scan", "read_json", "read_json_auto",
    "read_json_objects", "read_json_objects_auto", "read_ndjson", "read_ndjson_auto",
    "read_ndjson_objects", "read_text", "read_blob", "read_files", "read_xlsx", "delta_scan",
    "iceberg_scan", "iceberg_metadata", "glob", "query", "query_table", "sniff_csv",
    "parquet_metadata", "parquet_schema", "parquet_file_metadata", "parquet_kv_metadata",
    "getenv", "sqlite_scan", "postgres_scan", "mysql_scan", "reflect", "java_method",
    "try_reflect", "http_get", "http_post", "load_aws_credentials",
})
_FILE_PREFIXES = ("read_", "duckdb_", "pragma_")
_FILE_SUFFIXES = ("_scan", "_metadata")
_EXPLAIN_MODES = ("EXTENDED", "CODEGEN", "COST", "FORMATTED")
_FIRST_WORDS = ("SELECT", "WITH", "VALUES", "SHOW", "DESC", "DESCRIBE", "EXPLAIN", "FROM")


@dataclass(frozen=True)
class Checked:
    """A statement that passed the guard."""

    kind: Kind
    tree: exp.Expression | None
    """The query (for EXPLAIN: the explained query; for SHOW: None)."""


def refuse(construct: str, why: str = _WHY) -> QueryError:
    """The QueryError refusing ``construct`` (with why: by default, what a query may be)."""
    return QueryError(f"query: {construct} is not allowed: {why}")


def func_name(node: exp.Expr) -> str:
    """A function's name as written (lower case)."""
    if isinstance(node, exp.Anonymous):
        return str(node.this).lower()
    return node.sql_name().lower()


def parse(sql: str) -> list[exp.Expression]:
    """Parse Spark SQL into statements (sqlglot's fallback warnings silenced)."""
    logger = logging.getLogger("sqlglot")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        return [s for s in sqlglot.parse(sql, read="spark") if s is not None]
    except (ParseError, TokenError) as e:
        _name_forbidden_tokens(sql)
        first = first_line(e)
        raise QueryError(f"query: cannot parse the SQL as Spark SQL: {first}") from None
    finally:
        logger.setLevel(level)


_FORBIDDEN_WORDS = frozenset({
    "INSERT", "DELETE", "UPDATE", "MERGE", "CREATE", "DROP", "ALTER", "TRUNCATE", "ATTACH",
    "DETACH", "COPY", "INSTALL", "LOAD", "PRAGMA", "SET", "RESET", "CALL", "USE", "GRANT",
    "EXPORT", "IMPORT", "VACUUM", "CHECKPOINT", "TRANSFORM", "MAP", "REDUCE", "EXECUTE",
    "DECLARE", "OPTIMIZE", "RESTORE", "CONVERT", "GENERATE",
})


def _name_forbidden_tokens(sql: str) -> None:
    """For SQL sqlglot cannot parse: refuse by name what it holds that the guard never allows."""
    from sqlglot.tokens import TokenType

    try:
        tokens = sqlglot.Dialect.get_or_raise("spark").tokenize(sql)
    except TokenError:
        return
    for i, t in enumerate(tokens):
        if t.token_type in (TokenType.STRING, TokenType.IDENTIFIER):
            continue
        word = t.text.upper()
        following = tokens[i + 1] if i + 1 < len(tokens) else None
        is_call = following is not None and following.token_type == TokenType.L_PAREN
        if word in _FORBIDDEN_WORDS and i > 0 and not (word in ("MAP", "TRANSFORM") and is_call):
            raise refuse(f"{word} inside a query")
        name = t.text.lower()
        if is_call and (
                name in FILE_FUNCTIONS or name.startswith(_FILE_PREFIXES)
                or name.endswith(_FILE_SUFFIXES)):
            raise refuse(f"{name}()", "it reads files or reaches outside the query; "
                         "queries read only the project's tables")


def check(sql: str) -> Checked:
    """Check that ``sql`` is one read-only statement; raise QueryError naming what is not."""
    try:
        tokens = sqlglot.Dialect.get_or_raise("spark").tokenize(sql)
    except TokenError:
        tokens = []
    first = tokens[0].text.upper() if tokens else ""
    if first and first not in _FIRST_WORDS and _NAME.match(first):
        # e.g. ATTACH or CALL, which the Spark dialect cannot even parse: name them.
        raise refuse(_lead([t.text for t in tokens]))
    statements = parse(sql)
    if not statements:
        raise QueryError("query: no SQL statement given")
    if len(statements) > 1:
        names = ", ".join(statement_name(s) for s in statements)
        raise refuse(f"more than one statement ({names})")
    return _check_statement(statements[0])


def statement_name(node: exp.Expression) -> str:
    """How an error names a statement: its leading keyword(s)."""
    if isinstance(node, exp.Command):
        try:
            rest = [t.text for t in sqlglot.Dialect.get_or_raise("spark").tokenize(_command_rest(node))]
        except TokenError:
            rest = []
        return _lead([str(node.this), *rest])
    if isinstance(node, exp.With) or (isinstance(node, _QUERIES) and not isinstance(node, exp.Subquery)):
        return "SELECT"
    if isinstance(node, exp.Alias):  # `INSTALL x`, `TABLE t`, `LIST FILE` parse as a bare alias
        return str(node.this.sql("spark")).upper()
    if isinstance(node, exp.Column):  # `RESET`
        return node.name.upper()
    key = {
        "truncatetable": "TRUNCATE", "loaddata": "LOAD DATA", "into": "SELECT ... INTO",
        "copy": "COPY", "merge": "MERGE", "setitem": "SET",
    }
    return key.get(node.key, node.key.upper())


def _lead(words: list[str]) -> str:
    """A statement's name from its leading words: ``ADD JAR``, ``SHOW TABLES``, ``DELETE``."""
    words = [w.upper() for w in words]
    if words[0] in ("ADD", "LIST", "CLEAR", "MSCK", "SHOW", "EXPLAIN") and len(words) > 1:
        return " ".join(words[:2])
    return words[0]


def _command_rest(node: exp.Command) -> str:
    """The text after a command's keyword (sqlglot keeps it as a string literal)."""
    rest = node.expression
    if isinstance(rest, exp.Literal):
        return str(rest.this)
    return str(rest or "")


def _check_statement(root: exp.Expression) -> Checked:
    if isinstance(root, exp.Command):
        word = str(root.this).upper()
        if word == "EXPLAIN":
            return _check_explain(_command_rest(root))
        if word == "SHOW":
            return _check_show(_command_rest(root))
        raise refuse(statement_name(root))
    if isinstance(root, exp.Describe):
        target = root.this
        if isinstance(target, exp.Schema) and any(isinstance(e, exp.Literal) for e in target.expressions):
            raise refuse(f"DESCRIBE {target.sql('spark')}",  # IDENTIFIER('...'): a name Spark resolves later
                         "DESCRIBE takes a table's plain name")
        _walk(target)
        return Checked("describe", root)
    if not isinstance(root, _QUERIES):
        raise refuse(statement_name(root))
    _walk(root)
    return Checked("query", root)


def _check_explain(rest: str) -> Checked:
    tokens = sqlglot.Dialect.get_or_raise("spark").tokenize(rest)
    if tokens and tokens[0].text.upper() in _EXPLAIN_MODES:
        rest = rest[tokens[0].end + 1:]
        tokens = tokens[1:]
    if tokens and tokens[0].text.upper() not in ("SELECT", "WITH", "VALUES", "FROM", "("):
        raise refuse(f"EXPLAIN {_lead([t.text for t in tokens])}",
                     "EXPLAIN is allowed for queries only (SELECT, WITH, VALUES)")
    inner = parse(rest)
    if len(inner) != 1:
        raise refuse("EXPLAIN of more than one statement" if inner else "an empty EXPLAIN")
    if not isinstance(inner[0], _QUERIES):
        raise refuse(f"EXPLAIN {statement_name(inner[0])}",
                     "EXPLAIN is allowed for queries only (SELECT, WITH, VALUES)")
    _walk(inner[0])
    return Checked("explain", inner[0])


def _check_show(rest: str) -> Checked:
    # Spark's SHOW commands only read the catalog; plain words only (no strings, no paths).
    words = rest.split()
    tokens = sqlglot.Dialect.get_or_raise("spark").tokenize(rest)
    if not words or len(tokens) != len(words) or not all(_NAME.match(w) for w in words):
        raise refuse(f"SHOW {rest.strip()[:40]}",
                     "SHOW takes plain names only, e.g. SHOW TABLES or SHOW COLUMNS IN trips")
    return Checked("show", None)


def _walk(tree: exp.Expression) -> None:
    for node in tree.walk():
        if isinstance(node, _STATEMENTS):
            raise refuse(f"{statement_name(node)} inside a query")
        if isinstance(node, exp.QueryTransform):  # SELECT TRANSFORM(...) USING 'script'
            raise refuse("TRANSFORM ... USING", "it runs an external script")
        if isinstance(node, exp.Table):
            _check_table(node)
        elif isinstance(node, exp.Func):
            name = func_name(node)
            if name in FILE_FUNCTIONS or name.startswith(_FILE_PREFIXES) or name.endswith(_FILE_SUFFIXES):
                raise refuse(f"{name}()", "it reads files or reaches outside the query; "
                             "queries read only the project's tables")


def _check_table(t: exp.Table) -> None:
    if isinstance(t.this, exp.Func):
        name = func_name(t.this)
        if name not in TABLE_FUNCTIONS:
            raise refuse(f"table function {name}()", "queries read only the project's tables "
                         f"(table functions allowed: {', '.join(sorted(TABLE_FUNCTIONS))})")
        return
    if not isinstance(t.this, exp.Identifier):
        raise refuse(f"FROM {t.sql('spark')}", "queries read only the project's tables")
    if t.args.get("db") or t.args.get("catalog"):
        raise refuse(f"path-qualified table {t.sql('spark')}",
                     "queries read only the project's tables, by name")
    if not _NAME.match(t.name):
        raise refuse(f"table {t.sql('spark')}", "a table name is a plain name, not a path")


def tables_read(checked: Checked) -> set[str]:
    """The (lower-case) names of the tables a checked statement reads: for a query or EXPLAIN
    the tables of its FROM clauses at any depth, CTE names excluded (a CTE that reads a table
    of its own name reads the table); for DESCRIBE its table; for SHOW none."""
    from sqlglot.errors import SqlglotError
    from sqlglot.optimizer.scope import traverse_scope

    tree = checked.tree
    if tree is None:
        return set()
    if isinstance(tree, exp.Describe):
        t = tree.this
        return {t.name.lower()} if isinstance(t, exp.Table) and t.name else set()
    try:
        found = [src for scope in traverse_scope(tree) for src in scope.sources.values()
                 if isinstance(src, exp.Table)]
    except SqlglotError:  # a shape scopes do not cover: every table name (may include a CTE's)
        found = list(tree.find_all(exp.Table))
    return {t.name.lower() for t in found if isinstance(t.this, exp.Identifier) and t.name}


def names_read(checked: Checked) -> set[str] | None:
    """Every (lower-case) table name a checked query mentions, CTE names and all: what an
    engine must register for it (a superset of ``tables_read``); None (every view) for SHOW,
    DESCRIBE and EXPLAIN, whose targets Spark's parse does not show as relations."""
    tree = checked.tree
    if tree is None or checked.kind != "query":
        return None
    return {t.name.lower() for t in tree.find_all(exp.Table) if t.name}
