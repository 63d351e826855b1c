"""Spark SQL on DuckDB with Spark's answer: result types, column names, rewrites, refusals.

Users write Spark SQL (the pipeline's engine is the reference). sqlglot transpiles it to DuckDB,
but the two engines differ in places where a transpiler keeps the syntax and loses the meaning.
The translator walks the checked tree once, derives Spark's type of every expression (the rules
of Spark 4 with ANSI mode on, as lakehouse's session runs it), rewrites the constructs whose
meaning differs so that DuckDB computes Spark's value, and refuses the ones it cannot match,
naming the construct. The result columns carry Spark's names and types.

Modules, bottom up (each imports only those before it):

- ``types``: Spark's types and their rules (decimals, common types, arithmetic), and their
  spelling in sqlglot, DuckDB and Arrow; lakehouse column types as Spark types (COLUMN_TYPES).
- ``refuse``: the refusal error (duck_refuse), the refused constructs, the verified functions
  and the gate that refuses the rest.
- ``names``: Spark's generated names of result columns (spark_name).
- ``casing``: where Spark's case mapping differs from DuckDB's (data), and the macros that follow Spark's.
- ``macros``: the DuckDB macros the rewrites call (MACROS) and how a rewrite writes DuckDB.
- ``infer``: scopes and Spark's type of each expression; the rewrite rule's signature.
- ``casts``, ``numeric``, ``functions``, ``datetimes``, ``calendar``, ``scalars``: the rewrites (and
  the result types of the functions they add), by concern.
- ``catalog``: the function table: every function translated (each compared with Spark by
  tests/test_functions_parity.py), and the floating-point rules.
- ``translate``: the Translator (one query walked, typed and rewritten) and its Translation.
- ``conform``: DuckDB's answer with Spark's column names and types.

Pure: no engine is imported here. Every rule is checked against real Spark by
tests/test_query_parity.py.
"""
