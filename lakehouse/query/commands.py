"""Which of Spark's parsed plan nodes are commands (they change or reveal something when run).

A statement's plan is read as text (``EXPLAIN EXTENDED``, on any kind of session), so its nodes
are known by their class names: a node is a command when its name ends in ``Command`` or
``Statement``, or is one of ``OTHER_COMMANDS``: the plan classes of Spark 4.0 and Delta
4.0 that implement Spark's ``Command`` or ``ParsedStatement`` under another name.
tests/test_query_guard_commands.py reads those classes from the JVM and fails when an upgrade
brings one this list lacks.
"""

from __future__ import annotations

OTHER_COMMANDS = frozenset({
    "AddColumns", "AddPartitions", "AlterColumnSyncIdentity", "AlterColumns",
    "AlterTableAddConstraint", "AlterTableClusterBy", "AlterTableCollation",
    "AlterTableDropConstraint", "AlterTableDropFeature", "AlterViewAs", "AlterViewSchemaBinding",
    "AnalyzeColumn", "AnalyzeTable", "AnalyzeTables", "AppendData", "CacheTable",
    "CacheTableAsSelect", "CloneTableBase", "CommentOnNamespace", "CommentOnTable", "CompoundBody",
    "ConvertToDeltaCommandBase", "CreateFunction", "CreateIndex", "CreateNamespace", "CreateTable",
    "CreateTableAsSelect", "CreateTempViewUsing", "CreateUserDefinedFunction", "CreateVariable",
    "CreateView", "DeleteFromTable", "DeleteFromTableWithFilters", "DeltaMergeInto",
    "DeltaReorgTable", "DescribeColumn", "DescribeCommandBase", "DescribeFunction",
    "DescribeNamespace", "DescribeRelation", "DropColumns", "DropFunction", "DropIndex",
    "DropNamespace", "DropPartitions", "DropTable", "DropVariable", "DropView",
    "ExternalCommandExecutor", "InsertIntoHiveTable", "LoadData", "MergeIntoTable",
    "OptimizeTableCommandBase", "OverwriteByExpression", "OverwritePartitionsDynamic",
    "RecoverPartitions", "RefreshFunction", "RefreshResource", "RefreshTable", "RenameColumn",
    "RenamePartitions", "RenameTable", "RepairTable", "ReplaceColumns", "ReplaceData",
    "ReplaceTable", "ReplaceTableAsSelect", "SetCatalogAndNamespace", "SetNamespaceLocation",
    "SetNamespaceProperties", "SetTableLocation", "SetTableProperties", "SetTableSerDeProperties",
    "SetVariable", "SetViewProperties", "ShowColumns", "ShowCreateTable", "ShowFunctions",
    "ShowNamespaces", "ShowPartitions", "ShowTablePartition", "ShowTableProperties", "ShowTables",
    "ShowTablesExtended", "ShowViews", "TruncatePartition", "TruncateTable", "UncacheTable",
    "UnsetTableProperties", "UnsetViewProperties", "UpdateTable", "WriteDelta", "WriteIntoDelta",
})
"""Command plan classes whose names end in neither ``Command`` nor ``Statement``."""


def is_command(node: str) -> bool:
    """Whether the plan node named ``node`` (a class's simple name) is a command."""
    return node.endswith(("Command", "Statement")) or node in OTHER_COMMANDS
