"""The object store settings (lakehouse.objectstore) and the project's [tool.lakehouse] table: pure,
no server. What reaches a real S3 API is in tests/test_s3.py."""

from __future__ import annotations

import json
import os
import string

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lakehouse.errors import ConfigError
from lakehouse.objectstore import S3, is_s3, normalize_uri
from lakehouse.settings import Settings


@pytest.fixture(autouse=True)
def no_aws_profile(tmp_path, monkeypatch):
    """No AWS config file of the machine's user: the region defaults are this file's to set."""
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    monkeypatch.delenv("AWS_PROFILE", raising=False)


SECRET = "wJalrXUtnFEMI-never-in-output"
AWS = {"AWS_ACCESS_KEY_ID": "AKIDEXAMPLE", "AWS_SECRET_ACCESS_KEY": SECRET, "AWS_SESSION_TOKEN": SECRET + "-token"}


@pytest.mark.parametrize("uri,expected", [
    ("s3://lake", "s3://lake"), ("s3a://lake/wh/", "s3://lake/wh"), ("s3n://my.lake-1/a/b", "s3://my.lake-1/a/b"),
    ("S3A://lake/x", "s3://lake/x"),
])
def test_s3_uris_are_written_one_way(uri, expected):
    assert is_s3(uri) and normalize_uri(uri) == expected


@pytest.mark.parametrize("uri", ["s3://", "s3://ab", "s3://Lake", "s3://-lake", "s3://la..ke", "s3://lake_1",
                                 "s3://" + "a" * 64, "s3://lake/a//b", "s3://lake/../x", "s3://lake/./x",
                                 "s3://lake//a", "s3://192.168.1.1/x", "s3://lake/a b", "s3://lake/a#b",
                                 "s3://lake/a?b", "s3://lake/%2e%2e/x", "s3://lake/a\\b", "s3://lake/a\tb"])
def test_bad_s3_uris_are_refused_by_name(uri):
    with pytest.raises(ConfigError) as e:
        normalize_uri(uri)
    assert repr(uri) in str(e.value) and "\n" not in str(e.value)


@given(st.text(alphabet=string.printable + "äß/.", max_size=30), st.text(max_size=20))
def test_any_uri_is_refused_or_normalised_to_a_canonical_s3_uri(bucket, prefix):
    uri = f"s3a://{bucket}/{prefix}"
    try:
        out = normalize_uri(uri)
    except ConfigError as e:
        assert "\n" not in str(e) and str(e).startswith(f"warehouse {uri!r}")
        return
    assert out.startswith("s3://") and not out.endswith("/") and normalize_uri(out) == out
    name = out[5:].split("/", 1)[0]
    assert 3 <= len(name) <= 63 and set(name) <= set(string.ascii_lowercase + string.digits + ".-")


def test_the_standard_variables_alone_are_enough_and_a_loopback_endpoint_means_path_style():
    for host in ("127.0.0.1:9000", "localhost:9000", "[::1]:9000", "minio.localhost"):
        s3 = S3.resolve({}, {"AWS_ENDPOINT_URL": f"http://{host}", "AWS_REGION": "eu-west-1", **AWS})
        assert s3 == S3(endpoint=f"http://{host}", region="eu-west-1", path_style=True)
        assert not s3.secure
    aws = S3.resolve({}, {"AWS_DEFAULT_REGION": "ap-south-1"})
    assert aws == S3(endpoint=None, region="ap-south-1", path_style=False) and aws.secure
    r2 = S3.resolve({}, {"AWS_ENDPOINT_URL": "https://acct.r2.cloudflarestorage.com/"})
    assert r2.endpoint == "https://acct.r2.cloudflarestorage.com" and not r2.path_style and r2.region == "us-east-1"
    # an S3-only endpoint wins over the general one, the project's table over both
    both = {"AWS_ENDPOINT_URL": "http://10.0.0.1:1", "AWS_ENDPOINT_URL_S3": "http://10.0.0.2:2"}
    assert S3.resolve({}, both).endpoint == "http://10.0.0.2:2"
    mine = S3.resolve({"endpoint": "https://s3.example.com", "region": "x-1", "path_style": True}, both)
    assert mine == S3(endpoint="https://s3.example.com", region="x-1", path_style=True)
    assert S3.resolve({"path_style": False}, {"AWS_ENDPOINT_URL": "http://127.0.0.1:9"}).path_style is False


def test_without_a_region_the_aws_profiles_region_is_used(tmp_path, monkeypatch):
    config = tmp_path / "config"
    config.write_text("[default]\nregion = ap-southeast-2\n[profile other]\nregion = sa-east-1\n")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(config))
    for k in ("AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE"):
        monkeypatch.delenv(k, raising=False)
    assert S3.resolve({}, {}).region == "ap-southeast-2"
    assert S3.resolve({}, {"AWS_PROFILE": "other"}).region == "sa-east-1"
    assert S3.resolve({}, {"AWS_PROFILE": "missing"}).region == "us-east-1"
    assert S3.resolve({}, {"AWS_REGION": "eu-north-1"}).region == "eu-north-1"
    config.write_text("[default]\n")
    assert S3.resolve({}, {}).region == "us-east-1"


@pytest.mark.parametrize("conf,env,named", [
    ({"endpoint": "ftp://x"}, {}, "[tool.lakehouse.s3] endpoint"),
    ({"endpoint": "http://"}, {}, "[tool.lakehouse.s3] endpoint"),
    ({"endpoint": "http://h:1/path"}, {}, "[tool.lakehouse.s3] endpoint"),
    ({"endpoint": "http://h:1'; DROP"}, {}, "[tool.lakehouse.s3] endpoint"),
    ({}, {"AWS_ENDPOINT_URL": "localhost:9000"}, "AWS_ENDPOINT_URL"),
    ({"path_style": "yes"}, {}, "[tool.lakehouse.s3] path_style"),
    ({"region": "eu west"}, {}, "[tool.lakehouse.s3] region"),
    ({"region": 3}, {}, "[tool.lakehouse.s3] region"),
    ({"bucket": "x"}, {}, "unknown setting(s) bucket"),
    ({}, {"LAKEHOUSE_S3_PATH_STYLE": "yes"}, "LAKEHOUSE_S3_PATH_STYLE"),
    ({}, {"AWS_ENDPOINT_URL_S3": "nope"}, "AWS_ENDPOINT_URL_S3"),
    ({}, {"AWS_REGION": "eu west"}, "AWS_REGION"),
    ({}, {"AWS_DEFAULT_REGION": "x'y"}, "AWS_DEFAULT_REGION"),
    ({"endpoint": "http://AKID:S3CR3T@127.0.0.1:9000"}, {}, "must not hold credentials"),
    ({"endpoint": "http://h:port"}, {}, "[tool.lakehouse.s3] endpoint"),
])
def test_bad_store_settings_get_one_line_naming_the_setting(conf, env, named):
    with pytest.raises(ConfigError) as e:
        S3.resolve(conf, env)
    assert named in str(e.value) and "\n" not in str(e.value) and "S3CR3T" not in str(e.value)


def test_each_engine_gets_the_store_and_none_gets_the_credentials(monkeypatch):
    for k, v in AWS.items():
        monkeypatch.setenv(k, v)
    s3 = S3.resolve({}, {"AWS_ENDPOINT_URL": "http://127.0.0.1:9000", **AWS})
    spark = s3.spark_conf()
    assert spark["spark.hadoop.fs.s3a.endpoint"] == "http://127.0.0.1:9000"
    assert spark["spark.hadoop.fs.s3a.path.style.access"] == "true"
    assert spark["spark.hadoop.fs.s3a.connection.ssl.enabled"] == "false"
    assert spark["spark.hadoop.fs.s3.impl"] == "org.apache.hadoop.fs.s3a.S3AFileSystem"
    opts = s3.storage_options()
    assert opts["AWS_ENDPOINT_URL"] == "http://127.0.0.1:9000" and opts["AWS_ALLOW_HTTP"] == "true"
    assert opts["AWS_VIRTUAL_HOSTED_STYLE_REQUEST"] == "false"
    secret = s3.duckdb_secret()
    assert "PROVIDER credential_chain" in secret and "ENDPOINT '127.0.0.1:9000'" in secret
    assert "URL_STYLE 'path'" in secret and "USE_SSL false" in secret
    fs = s3.arrow_filesystem()
    assert type(fs).__name__ == "S3FileSystem"
    everything = json.dumps([spark, opts, secret, repr(s3), repr(fs)])
    for value in AWS.values():
        assert value not in everything
    aws = S3(region="eu-central-1").spark_conf()
    assert "spark.hadoop.fs.s3a.endpoint" not in aws and aws["spark.hadoop.fs.s3a.endpoint.region"] == "eu-central-1"


def _project(tmp_path, toml: str):
    (tmp_path / "pyproject.toml").write_text(toml)
    return tmp_path


def test_the_project_table_sets_warehouse_master_spark_and_store_under_flags_and_variables(tmp_path):
    root = _project(tmp_path, """
[project]
name = "mine"

[tool.lakehouse]
warehouse = "s3a://lake/prod/"
master = "spark://10.0.0.5:7077"
spark = {"spark.executor.memory" = "8g", "spark.sql.adaptive.enabled" = true, "spark.executor.cores" = 4}

[tool.lakehouse.s3]
endpoint = "http://127.0.0.1:9000"
region = "eu-west-1"
""")
    s = Settings.resolve(root, env={})
    assert (s.warehouse, s.master) == ("s3://lake/prod", "spark://10.0.0.5:7077")
    assert s.s3 == S3(endpoint="http://127.0.0.1:9000", region="eu-west-1", path_style=True)
    conf = s.spark_conf()
    assert conf["spark.executor.memory"] == "8g" and conf["spark.sql.adaptive.enabled"] == "true"
    assert conf["spark.executor.cores"] == "4" and conf["spark.hadoop.fs.s3a.endpoint.region"] == "eu-west-1"
    # variables win over the table, flags over both
    s = Settings.resolve(root, env={"LAKEHOUSE_WAREHOUSE": "s3://other", "LAKEHOUSE_MASTER": "local[1]"})
    assert (s.warehouse, s.master) == ("s3://other", "local[1]")
    s = Settings.resolve(root, warehouse=str(tmp_path / "wh"), master="local[2]", env={})
    assert (s.warehouse, s.master, s.s3) == (str(tmp_path / "wh"), "local[2]", None)


def test_a_relative_warehouse_in_the_table_is_relative_to_the_project(tmp_path, monkeypatch):
    (tmp_path / "p").mkdir()
    root = _project(tmp_path / "p", '[tool.lakehouse]\nwarehouse = "data/wh"\n')
    monkeypatch.chdir(tmp_path)
    assert Settings.resolve(root, env={}).warehouse == str(root / "data" / "wh")


@pytest.mark.parametrize("toml,named", [
    ("[tool.lakehouse]\nwarehous = 'x'\n", "unknown key(s) warehous"),
    ("[tool.lakehouse]\nmaster = 3\n", "master must be a non-empty string"),
    ("[tool.lakehouse]\nwarehouse = ''\n", "warehouse must be a non-empty string"),
    ("[tool.lakehouse]\nspark = 'x'\n", "[tool.lakehouse.spark] must be a table"),
    ("[tool.lakehouse.spark]\n'sql.shuffle' = 1\n", "'sql.shuffle'"),
    ("[tool.lakehouse.spark]\n'spark.x' = [1]\n", "'spark.x'"),
    ("[tool.lakehouse.s3]\nendpont = 'http://h:1'\n", "unknown setting(s) endpont"),
    ("[tool.lakehouse\n", "not readable TOML"),
])
def test_a_bad_project_table_gets_one_line_naming_the_file_and_key(tmp_path, toml, named):
    root = _project(tmp_path, toml)
    with pytest.raises(ConfigError) as e:
        Settings.resolve(root, warehouse="s3://lake", env={})
    assert named in str(e.value) and "\n" not in str(e.value)
    assert "pyproject.toml" in str(e.value) or "[tool.lakehouse.s3]" in str(e.value)


def test_spark_settings_come_from_the_table_then_the_variable_then_conf_flags(tmp_path):
    root = _project(tmp_path, '[tool.lakehouse.spark]\n"spark.a" = "table"\n"spark.b" = "table"\n"spark.c" = "table"\n')
    s = Settings.resolve(root, env={"LAKEHOUSE_SPARK_CONF": "spark.b=env spark.c=env"},
                         conf=["spark.c=flag", "spark.d=x=y"])
    assert dict(s.spark_settings) == {"spark.a": "table", "spark.b": "env", "spark.c": "flag", "spark.d": "x=y"}
    assert s.spark_conf() == dict(s.spark_settings)  # a local warehouse: no store settings
    with pytest.raises(ConfigError) as e:
        Settings.resolve(root, env={}, conf=["spark.ok=1", "executor.memory=2g"])
    assert str(e.value) == "--conf: 'executor.memory' is not spark.KEY=VALUE"
    quoted = Settings.resolve(root, env={"LAKEHOUSE_SPARK_CONF": "spark.b=1 spark.executor.extraJavaOptions='-Xss4m -XX:+UseSerialGC'"})
    assert quoted.spark_conf()["spark.executor.extraJavaOptions"] == "-Xss4m -XX:+UseSerialGC"
    with pytest.raises(ConfigError) as e:
        Settings.resolve(root, env={"LAKEHOUSE_SPARK_CONF": "spark.b='secret value"})
    assert str(e.value).startswith("LAKEHOUSE_SPARK_CONF: No closing quotation") and "secret" not in str(e.value)


def test_a_bad_conf_flag_is_a_usage_error_naming_it(tmp_path):
    from click.testing import CliRunner

    from lakehouse.cli import cli

    r = CliRunner().invoke(cli, ["--project", str(tmp_path), "--conf", "spark.x", "tables"])
    assert r.exit_code == 2 and "--conf" in r.output and "an item without '=' is not spark.KEY=VALUE" in r.output


def test_path_style_set_for_a_named_endpoint_reaches_the_commands_processes_and_the_executors(monkeypatch):
    """A store on a host name (MinIO at http://minio:9000) that wants path-style access: the
    project's setting goes to the processes a command starts and to a cluster's executors, where
    lakehouse code finds the store from the variables alone."""
    from lakehouse import objectstore

    s3 = S3.resolve({"path_style": True}, {"AWS_ENDPOINT_URL": "http://minio.example:9000"})
    assert s3.path_style and not S3.resolve({}, {"AWS_ENDPOINT_URL": "http://minio.example:9000"}).path_style
    assert s3.spark_conf()["spark.executorEnv.LAKEHOUSE_S3_PATH_STYLE"] == "true"
    for name in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "LAKEHOUSE_S3_PATH_STYLE"):
        monkeypatch.delenv(name, raising=False)
    try:
        objectstore.use(s3)
        executor = {k: v for k, v in os.environ.items() if k.startswith(("AWS_", "LAKEHOUSE_S3"))}
        assert S3.resolve({}, executor) == s3
        assert S3.resolve({}, {**executor, "LAKEHOUSE_S3_PATH_STYLE": "false"}).path_style is False
    finally:
        objectstore.use(None)
    assert "LAKEHOUSE_S3_PATH_STYLE" not in os.environ
