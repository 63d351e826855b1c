"""Great Expectations at the edge: the table's ``quality:`` suite run on a Spark DataFrame.

GE reuses lakehouse's one Delta-enabled SparkSession (handed to the data source before GE can
look for one of its own), so it never reconfigures, restarts or stops it. Validation results and
Data Docs live in the warehouse: a file-backed GE project at ``<warehouse>/_quality/gx`` (suites,
results, so the Docs list every run) and the Docs site at ``<warehouse>/_quality/docs``.
"""

from __future__ import annotations

import logging
import os
import warnings
from typing import TYPE_CHECKING, Any

from lakehouse.definitions import Expectation, TableDefinition
from lakehouse.definitions.expectations import import_ge
from lakehouse.errors import DefinitionError
from lakehouse.quality.model import CheckResult

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)
# GE's usage analytics would reach out to the internet on every run: off unless asked for.
os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
SITE = "lakehouse"
SAMPLE = 5


def preload() -> None:
    """Start importing Great Expectations in a background thread (about 2.4 s of Python imports) so
    that a command's Spark work before its validation runs meanwhile; ``validate`` then finds it
    imported, or waits for the rest of it (Python's import lock)."""
    import sys
    import threading

    if "great_expectations" in sys.modules:
        return

    def load() -> None:
        try:
            import_ge()
        except Exception:  # noqa: BLE001 - validate imports it again and reports the problem
            pass

    threading.Thread(target=load, name="lakehouse-gx-import", daemon=True).start()


def quality_root(warehouse: str) -> str:
    """GE's project and Data Docs: in the warehouse when it is a local folder; for an object
    store, in a local folder per warehouse (GE's file project needs a local path)."""
    from lakehouse.storage import is_local

    if is_local(warehouse):
        return os.path.join(warehouse, "_quality")
    import hashlib
    import tempfile

    key = hashlib.sha256(warehouse.encode()).hexdigest()[:12]
    return os.path.join(tempfile.gettempdir(), "lakehouse-quality", key)


def docs_index(warehouse: str) -> str:
    """The Great Expectations data docs' index page of the warehouse's quality runs."""
    return os.path.join(quality_root(warehouse), "docs", "index.html")


def build_expectations(d: TableDefinition, source: str) -> list[Any]:
    """GE expectation objects of the table's suite; a bad argument type is one DefinitionError
    naming the file and field (names and arguments were checked when the definition loaded)."""
    import_ge()
    from great_expectations.expectations.registry import get_expectation_impl

    out = []
    for i, e in enumerate(d.quality):
        try:
            out.append(get_expectation_impl(e.name)(**e.args, meta={"lakehouse_index": i}))
        except Exception as ex:  # noqa: BLE001 - pydantic's ValidationError, GE's own errors
            raise DefinitionError(f"{source}: quality[{i}].{e.name}: {_first_error(ex)}") from None
    return out


def _first_error(ex: Exception) -> str:
    errors = getattr(ex, "errors", None)
    if callable(errors):
        try:
            first = errors()[0]
            loc = ".".join(str(x) for x in first.get("loc", ()) if x != "__root__")
            return f"{loc + ': ' if loc else ''}{first.get('msg')}"
        except Exception:  # noqa: BLE001
            pass
    return (str(ex).strip().splitlines() or [type(ex).__name__])[0]


def _context(warehouse: str) -> Any:
    import great_expectations as gx

    root = quality_root(warehouse)
    os.makedirs(root, exist_ok=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ctx = gx.get_context(mode="file", project_root_dir=root)
    from great_expectations.data_context.types.base import ProgressBarsConfig

    bars = ctx.variables.progress_bars
    if bars is None or (bars.get("globally", True) if isinstance(bars, dict) else bars.globally):
        ctx.variables.progress_bars = ProgressBarsConfig(globally=False, metric_calculations=False)
        ctx.variables.save()  # no progress bars on stderr: our logs stay readable
    sites = ctx.config.data_docs_sites or {}
    for name in [n for n in sites if n != SITE]:
        ctx.delete_data_docs_site(name)  # GE's default site under gx/uncommitted: one site only
    docs = os.path.join(root, "docs")
    site = (ctx.config.data_docs_sites or {}).get(SITE)
    if site is not None and (site.get("store_backend") or {}).get("base_directory") != docs:
        ctx.delete_data_docs_site(SITE)  # a warehouse moved or copied: its Docs go where it is now
        site = None
    if site is None:
        ctx.add_data_docs_site(SITE, {
            "class_name": "SiteBuilder",
            "store_backend": {"class_name": "TupleFilesystemStoreBackend",
                              "base_directory": docs},
            "site_index_builder": {"class_name": "DefaultSiteIndexBuilder"},
        })
    return ctx


def validate(spark: "SparkSession", df: "DataFrame", d: TableDefinition, warehouse: str, suite_name: str,
             source: str, docs: bool = True, cache: bool = False) -> list[CheckResult]:
    """Run the table's expectations on ``df`` (a GE checkpoint: one run when no row is unexpected,
    see below); one CheckResult per expectation. ``cache``: ``df`` is worth reading once into
    Spark's cache when GE asks it for the unexpected rows (a query per expectation)."""
    import_ge()
    import great_expectations as gx
    from great_expectations.checkpoint import UpdateDataDocsAction

    expectations = build_expectations(d, source)
    if not expectations:
        return []
    ctx = _context(warehouse)
    ds = ctx.data_sources.add_or_update_spark(name="lakehouse", persist=False)
    ds._spark = spark  # ours: GE must not build, reconfigure or restart a session
    asset = next((a for a in ds.assets if a.name == suite_name), None) or ds.add_dataframe_asset(name=suite_name)
    batch_def = next((b for b in asset.batch_definitions if b.name == "frame"), None) \
        or asset.add_batch_definition_whole_dataframe("frame")
    suite = gx.ExpectationSuite(name=suite_name, expectations=expectations)
    suite = ctx.suites.add_or_update(suite)
    vd = ctx.validation_definitions.add_or_update(gx.ValidationDefinition(name=suite_name, data=batch_def, suite=suite))

    def run(fmt: dict[str, Any], actions: list[Any]) -> Any:
        cp = ctx.checkpoints.add_or_update(gx.Checkpoint(
            name=suite_name, validation_definitions=[vd], result_format=fmt, actions=actions))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return cp.run(batch_parameters={"dataframe": df})

    # First the counts alone: no unexpected values or keys, so no query per expectation for them
    # (two each, GE asks them whatever the counts). Only when a count is not 0 (or a check fails
    # or raises) are they asked for, in a second run that replaces the first in the results.
    result = run({"result_format": "SUMMARY", "partial_unexpected_count": 0}, [])
    if all(r.success and not (r.result or {}).get("unexpected_count") and not _raised(r)
           for vr in result.run_results.values() for r in vr.results):
        if docs:
            from great_expectations.data_context.types.resource_identifiers import (
                ExpectationSuiteIdentifier,
            )

            ctx.build_data_docs(site_names=[SITE], resource_identifiers=[
                *result.run_results, ExpectationSuiteIdentifier(name=suite_name)])
    else:
        for key in result.run_results:
            ctx.validation_results_store.remove_key(key)
        fmt: dict[str, Any] = {"result_format": "SUMMARY", "partial_unexpected_count": SAMPLE}
        if d.primary_key:
            fmt["unexpected_index_column_names"] = list(d.primary_key)
        if cache:
            df = df.persist()
        try:
            result = run(fmt, [UpdateDataDocsAction(name="docs", site_names=[SITE])] if docs else [])
        finally:
            if cache:
                df.unpersist()
    out: dict[int, CheckResult] = {}
    for vr in result.run_results.values():
        for r in vr.results:
            i = int((r.expectation_config.meta or {}).get("lakehouse_index", len(out)))
            out[i] = _result(d.quality[i], r)
    return [out[i] for i in sorted(out)]


def _raised(r: Any) -> bool:
    """Whether GE's result ``r`` of one expectation says its computation raised."""
    err = (r.exception_info or {}) if isinstance(r.exception_info, dict) else {}
    return bool(err.get("raised_exception") or any(
        isinstance(v, dict) and v.get("raised_exception") for v in err.values()))


def _result(e: Expectation, r: Any) -> CheckResult:
    res = dict(r.result or {})
    err = (r.exception_info or {}) if isinstance(r.exception_info, dict) else {}
    raised = _raised(r)
    message = err.get("exception_message") or next(
        (v.get("exception_message") for v in err.values() if isinstance(v, dict) and v.get("exception_message")), None)
    sample = res.get("partial_unexpected_index_list") or res.get("partial_unexpected_list") or []
    return CheckResult(
        name=e.label(), kind="expectation", ok=bool(r.success) and not raised,
        observed=_jsonable(res.get("observed_value")),
        unexpected_count=res.get("unexpected_count"),
        sample=[_jsonable(x) for x in sample[:SAMPLE]],
        detail=f"could not run: {message}" if raised and message else "",
    )


def _jsonable(v: Any) -> Any:
    """GE's values (numpy scalars among them) in the contract's JSON form."""
    from lakehouse.output import json_value

    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if hasattr(v, "item") and not isinstance(v, (str, bytes)):  # numpy scalars
        v = v.item()
    return json_value(v)


def forget_validations(warehouse: str, table: str) -> int:
    """Remove ``table``'s validation results from GE's store and their Data Docs pages (a
    delete's purge: their unexpected values may show erased rows), then build the Docs' index
    again from what is left; files removed. The next ``check`` writes them anew."""
    from lakehouse.storage import list_files, remove_tree

    root = quality_root(warehouse)
    folders = [os.path.join(root, "gx", "uncommitted", "validations", table),
               os.path.join(root, "docs", "validations", table)]
    removed = sum(len(list_files(f)) for f in folders)
    if not removed:
        return 0
    for f in folders:
        remove_tree(f)
    import_ge()
    _context(warehouse).build_data_docs(site_names=[SITE])
    return removed
