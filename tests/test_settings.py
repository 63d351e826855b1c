"""Settings: warehouse URIs in every local spelling, and paths Spark would glob-expand refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from lakehouse.errors import ConfigError
from lakehouse.settings import Settings, normalize_warehouse


@pytest.mark.parametrize("spelling", ["{p}", "{p}/", "file:{p}", "file://{p}", "file://{p}/", "file://localhost{p}"])
def test_local_warehouse_spellings_are_one_path(tmp_path: Path, spelling: str) -> None:
    assert normalize_warehouse(spelling.format(p=tmp_path)) == str(tmp_path.resolve())


@pytest.mark.parametrize("bad", ["/data/w[1]", "/data/*", "/data/w?", "/data/{a,b}", "file:/data/x]", "s3a://b/w*"])
def test_glob_characters_are_refused_clearly(bad: str) -> None:
    with pytest.raises(ConfigError, match="not allowed.*glob"):
        normalize_warehouse(bad)


@pytest.mark.parametrize("bad", ["", "  ", "/data/w\n", "/data/\x00w"])
def test_empty_and_control_characters_are_refused(bad: str) -> None:
    with pytest.raises(ConfigError):
        normalize_warehouse(bad)


def test_object_store_uris_are_normalised(tmp_path: Path) -> None:
    # issue 19: s3a:// (Hadoop's name) is accepted and written as s3://, which every engine reads
    s = Settings.resolve(tmp_path, "s3a://bucket/wh/", env={})
    assert s.warehouse == "s3://bucket/wh"
    assert Settings.resolve(tmp_path, "abfss://c@acct.dfs.core.windows.net/wh/", env={}).warehouse == \
        "abfss://c@acct.dfs.core.windows.net/wh"
