"""The package's shape: import-linter's contracts hold, every module has a layer, and they fail
on a new circle or upward import (checked on a copy of the package with one import added)."""

from __future__ import annotations

import pkgutil
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import lakehouse
from tests.conftest import REPO

PACKAGE = Path(lakehouse.__file__).parent
MAX_LINES = 500


def _lint_imports(root: Path) -> subprocess.CompletedProcess[str]:
    """import-linter on the package found under ``root`` with the contracts of ``root``."""
    exe = Path(sys.executable).with_name("lint-imports")
    return subprocess.run([str(exe), str(root / "pyproject.toml"), "--no-cache"], cwd=root,
                          env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"}, capture_output=True,
                          text=True, timeout=300)


def _layers() -> list[str]:
    cfg = tomllib.loads((REPO / "pyproject.toml").read_text())
    (layers,) = [c["layers"] for c in cfg["tool"]["importlinter"]["contracts"] if c["type"] == "layers"]
    return [m.strip() for layer in layers for m in layer.replace(":", "|").split("|")]


def test_every_module_of_the_package_has_a_layer():
    named = set(_layers())
    tops = {f"lakehouse.{m.name}" for m in pkgutil.iter_modules([str(PACKAGE)])}
    missing = sorted(t for t in tops if t not in named and not any(n.startswith(t + ".") for n in named))
    assert not missing, f"add these to the layers contract in pyproject.toml: {missing}"


def test_no_module_is_over_500_lines():
    big = {str(p.relative_to(PACKAGE)): n for p in PACKAGE.rglob("*.py")
           if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert not big, f"modules over {MAX_LINES} lines: {big}"


@pytest.fixture(scope="module")
def package_copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("shape")
    shutil.copytree(PACKAGE, root / "lakehouse", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "pyproject.toml", root / "pyproject.toml")
    return root


def test_the_contracts_hold(package_copy: Path):
    r = _lint_imports(package_copy)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]


@pytest.mark.parametrize(("module", "line", "broken"), [
    ("errors.py", "from lakehouse import cli  # noqa", "Layers"),  # the bottom importing the top
    ("stream/model.py", "import pyspark  # noqa", "Pure core"),  # the pure core starting an engine
    ("archive/plan.py", "from lakehouse.query import split  # noqa", "Layers"),  # a circle: query imports archive
    ("jobs/vacuum.py", "import deltalake  # noqa", "deltalake"),  # Delta's log read outside delta_log
    ("query/guard.py", "if False:\n    from lakehouse.project import Lakehouse  # noqa", "Layers"),  # type-only, upward
])
def test_a_new_upward_import_or_circle_fails(package_copy: Path, module: str, line: str, broken: str):
    path = package_copy / "lakehouse" / module
    original = path.read_text()
    path.write_text(original + "\n" + line + "\n")
    try:
        r = _lint_imports(package_copy)
    finally:
        path.write_text(original)
    assert r.returncode != 0, r.stdout[-2000:]
    failed = [line for line in r.stdout.splitlines() if line.rstrip().endswith("BROKEN")]
    assert any(broken.lower() in f.lower() for f in failed), r.stdout[-3000:]
