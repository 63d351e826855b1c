"""Which Great Expectations expectations exist and which arguments each takes: the schema of
a table definition's ``quality:`` section.

Validating a table's ``quality:`` section must not import Great Expectations on every command (it
takes seconds), so the catalog (expectation name -> arguments, required arguments) is read from
GE's own registry once per installed GE version and cached as JSON next to the venv's other
caches; every later definition load reads the JSON. Types are checked by GE itself when the
suite is built (``lakehouse check``), with the same file-and-field error.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import sys
import tempfile
import threading
import types
import uuid
from dataclasses import dataclass
from functools import lru_cache
from importlib import metadata
from pathlib import Path

INTERNAL = frozenset({"id", "batch_id", "rendered_content", "windows"})
"""Fields every GE expectation has that a user does not set."""
COLUMN_ARGS = ("column", "column_A", "column_B")
"""Arguments that name one column of the table."""
COLUMN_LIST_ARGS = ("column_list", "column_set")
"""Arguments that name several columns of the table."""


@dataclass(frozen=True)
class Spec:
    """One expectation as the catalog knows it: its name and the arguments it takes."""

    name: str
    """The expectation's GE name."""
    args: tuple[str, ...]
    """Every argument a user may set, sorted."""
    required: tuple[str, ...]
    """The arguments without a default, sorted."""


LAZY_MODULES = ("scipy.stats", "altair")
"""Modules Great Expectations imports when it is imported, used only inside the few expectations
that need them (KL divergence and KS tests, and their charts): about a third of GE's import time.
``import_ge`` puts a stand-in for each in ``sys.modules`` first, which imports the module itself on
the first use of one of its names, if any."""
_IMPORTING = threading.RLock()


class _Deferred(types.ModuleType):
    """A stand-in for a module not imported yet: the first name looked up in it imports the module
    (replacing the stand-in in ``sys.modules``); every name is then the module's own. (importlib's
    LazyLoader cannot serve here: a later ``from package import module`` reads the module's
    ``__spec__`` and so loads it at once.)"""

    def __getattr__(self, attr: str) -> object:  # names not set on the stand-in itself
        with _IMPORTING:
            real = self.__dict__.get("_lh_module")
            if real is None:
                if sys.modules.get(self.__name__) is self:
                    del sys.modules[self.__name__]
                real = importlib.import_module(self.__name__)
                self.__dict__["_lh_module"] = real
        return getattr(real, attr)


def import_ge() -> None:
    """Import Great Expectations (and the checkpoint actions lakehouse uses) with stand-ins for
    ``LAZY_MODULES`` that are not imported yet."""
    with _IMPORTING:  # a command's background import (quality.gx.preload) and its validation
        if "great_expectations.checkpoint" in sys.modules:
            return
        for name in LAZY_MODULES:
            if name not in sys.modules and importlib.util.find_spec(name.split(".")[0]) is not None:
                sys.modules[name] = _Deferred(name)
        import great_expectations  # noqa: F401
        from great_expectations.checkpoint import UpdateDataDocsAction  # noqa: F401


def ge_version() -> str:
    """The installed Great Expectations version (``missing`` without one): the cache's key."""
    try:
        return metadata.version("great-expectations")
    except metadata.PackageNotFoundError:
        return "missing"


def cache_dirs() -> list[Path]:
    """Where the cached catalog may be, in the order tried (the venv's, the user's, a temp dir)."""
    return [Path(sys.prefix) / "share" / "lakehouse", Path.home() / ".cache" / "lakehouse",
            Path(tempfile.gettempdir()) / "lakehouse-cache"]


def build() -> dict[str, Spec]:
    """The catalog from GE's registry (imports GE: seconds)."""
    import_ge()
    from great_expectations.expectations.registry import (
        get_expectation_impl,
        list_registered_expectation_implementations,
    )

    out: dict[str, Spec] = {}
    for name in sorted(list_registered_expectation_implementations()):
        fields = get_expectation_impl(name).__fields__
        args = tuple(sorted(k for k in fields if k not in INTERNAL))
        out[name] = Spec(name, args, tuple(sorted(k for k, f in fields.items() if f.required)))
    return out


@lru_cache(maxsize=1)
def catalog() -> dict[str, Spec]:
    """The catalog, from the cache of this GE version when there is one."""
    name = f"ge-expectations-{ge_version()}.json"
    for d in cache_dirs():
        try:
            doc = json.loads((d / name).read_text())
            return {k: Spec(k, tuple(v["args"]), tuple(v["required"])) for k, v in doc.items()}
        except (OSError, ValueError, KeyError, TypeError):
            continue
    specs = build()
    doc = {k: {"args": list(s.args), "required": list(s.required)} for k, s in specs.items()}
    for d in cache_dirs():
        try:
            d.mkdir(parents=True, exist_ok=True)
            tmp = d / f".{name}.{uuid.uuid4().hex[:8]}"
            tmp.write_text(json.dumps(doc, sort_keys=True))
            os.replace(tmp, d / name)
            break
        except OSError:
            continue
    return specs


def problems(index: int, name: str, args: dict[str, object], columns: set[str],
             specs: dict[str, Spec] | None = None) -> list[str]:
    """Why ``quality[index]`` is not a valid expectation for a table with ``columns`` ([] when it is)."""
    import difflib

    specs = catalog() if specs is None else specs
    where = f"quality[{index}].{name}"
    spec = specs.get(name)
    if spec is None:
        close = difflib.get_close_matches(name, list(specs), n=1)
        hint = f" (did you mean {close[0]}?)" if close else " (see Great Expectations' expectation gallery)"
        return [f"quality[{index}]: unknown expectation {name!r}{hint}"]
    out = []
    for a in args:
        if a not in spec.args:
            close = difflib.get_close_matches(a, list(spec.args), n=1)
            hint = f"did you mean {close[0]}?" if close else f"known: {', '.join(spec.args)}"
            shown = a if a.isidentifier() else repr(a)  # a name with a newline stays on one line
            out.append(f"{where}.{shown}: unknown argument ({hint})")
    out += [f"{where}.{a}: required argument is missing" for a in spec.required if a not in args]
    for a in COLUMN_ARGS:
        v = args.get(a)
        if isinstance(v, str) and v not in columns:
            out.append(f"{where}.{a}: unknown column {v!r}")
    for a in COLUMN_LIST_ARGS:
        v = args.get(a)
        if isinstance(v, (list, tuple)):
            out += [f"{where}.{a}: unknown column {c!r}" for c in v if isinstance(c, str) and c not in columns]
    return out
