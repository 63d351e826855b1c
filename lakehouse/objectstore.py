"""The object store a warehouse lives on, and what each engine needs to reach it.

A warehouse is a local folder or an S3 URI, ``s3://bucket/prefix`` (``s3a://`` and ``s3n://`` are
accepted and become ``s3://``). Where the store answers and how to address it comes from the
project's ``[tool.lakehouse.s3]`` table in ``pyproject.toml`` (``endpoint``, ``region``,
``path_style``), else from the standard AWS variables (``AWS_ENDPOINT_URL_S3``,
``AWS_ENDPOINT_URL``, ``AWS_REGION``, ``AWS_DEFAULT_REGION``); an endpoint on an IP address or
``localhost`` means path-style access unless ``path_style`` (or ``LAKEHOUSE_S3_PATH_STYLE``) says otherwise. Credentials always come
from the standard AWS chain (environment, profile, instance role) of each engine: lakehouse never
reads, stores, logs or prints them.

:class:`S3` turns those settings into each engine's configuration: Spark's (hadoop-aws), deltalake's
``storage_options``, pyarrow's filesystem and DuckDB's (the httpfs and aws extensions from the
package index, and a secret that names the credential chain, not the credentials).
"""

from __future__ import annotations

import ipaddress
import os
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any
from urllib.parse import urlsplit

from lakehouse.errors import ConfigError

SCHEMES = {"s3": "s3", "s3a": "s3", "s3n": "s3"}
"""The URI schemes of an S3 warehouse and the one lakehouse writes them as."""

SETTINGS = ("endpoint", "region", "path_style")
"""The keys of ``[tool.lakehouse.s3]``."""

LOG_STORE = "lakehouse.delta.ConditionalPutLogStore"
"""The Delta LogStore of s3:// tables in Spark: each commit one PUT with If-None-Match: *, which
only one of several writers of a version wins (Delta 4.0's S3SingleDriverLogStore lets a second
driver silently replace a commit)."""
DUCKDB_EXTENSIONS = ("httpfs", "aws")
"""The DuckDB extensions (from the package index) that read S3 with the AWS credential chain."""

PATH_STYLE_VARIABLE = "LAKEHOUSE_S3_PATH_STYLE"
"""``true`` or ``false``: path-style access, when ``[tool.lakehouse.s3]`` does not say. Exported with
the endpoint to the processes a command starts and to a cluster's executors, so that lakehouse code
in a Spark task addresses the store as the driver does (the AWS variables have no such setting)."""

DEFAULT_REGION = "us-east-1"
"""The region requests are signed for when nothing names one (S3-compatible stores accept it)."""


def is_s3(uri: str) -> bool:
    """True for an S3 URI (``s3://``, ``s3a://``, ``s3n://``)."""
    return uri.split("://", 1)[0].lower() in SCHEMES if "://" in uri else False


def normalize_uri(uri: str) -> str:
    """An S3 URI as lakehouse writes it: ``s3://bucket/prefix`` without a trailing slash. Refuses,
    by name, a URI without a valid bucket name."""
    scheme, _, rest = uri.partition("://")
    if scheme.lower() not in SCHEMES:
        raise ConfigError(f"warehouse {uri!r}: not an S3 URI (s3://bucket/prefix)")
    bucket, _, prefix = rest.partition("/")
    if not _valid_bucket(bucket):
        raise ConfigError(f"warehouse {uri!r}: {bucket!r} is not an S3 bucket name (3-63 characters: "
                          "lower-case letters, digits, dots and hyphens, starting and ending with a letter or digit)")
    if prefix.startswith("/"):
        raise ConfigError(f"warehouse {uri!r}: an empty segment after the bucket is not allowed")
    prefix = prefix.rstrip("/")
    if prefix and any(part in ("", ".", "..") for part in prefix.split("/")):
        raise ConfigError(f"warehouse {uri!r}: empty, '.' or '..' segments are not allowed in the prefix")
    bad = sorted({c for c in prefix if c in _UNSAFE or c.isspace() or not c.isprintable()})
    if bad:
        raise ConfigError(f"warehouse {uri!r}: the characters {' '.join(map(repr, bad))} are not allowed in the "
                          "prefix (engines read them as URL syntax or escapes); choose another name")
    return f"s3://{bucket}/{prefix}" if prefix else f"s3://{bucket}"


_UNSAFE = set("?#%\\{}[]*'\"<>^`|")
"""Characters an engine reads as URL syntax, an escape or a glob in a key prefix."""


def _valid_bucket(name: str) -> bool:
    if not 3 <= len(name) <= 63 or not all(c in _BUCKET_CHARS for c in name):
        return False
    try:
        ipaddress.ip_address(name)
        return False  # S3 refuses bucket names formatted as IP addresses
    except ValueError:
        pass
    return name[0].isalnum() and name[-1].isalnum() and ".." not in name


_BUCKET_CHARS = set("abcdefghijklmnopqrstuvwxyz0123456789.-")


@dataclass(frozen=True)
class S3:
    """How to reach an S3 store: its endpoint (None: AWS's own), region and addressing."""

    endpoint: str | None = None
    """``http(s)://host[:port]`` of an S3-compatible store, or None for AWS S3."""
    region: str = DEFAULT_REGION
    """The region requests are signed for."""
    path_style: bool = False
    """Path-style requests (``endpoint/bucket/key``) instead of virtual-hosted ones."""

    @classmethod
    def resolve(cls, conf: dict[str, Any], env: dict[str, str]) -> "S3":
        """The settings from ``[tool.lakehouse.s3]`` (``conf``), else the standard AWS variables.
        An unknown key or a value of the wrong kind is refused, naming it."""
        unknown = sorted(set(conf) - set(SETTINGS))
        if unknown:
            raise ConfigError(f"[tool.lakehouse.s3]: unknown setting(s) {', '.join(unknown)} "
                              f"(known: {', '.join(SETTINGS)})")
        where, endpoint = _first(conf, env, "endpoint", ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"))
        if endpoint is not None:
            endpoint = _endpoint(str(endpoint), where)
        where, region = _first(conf, env, "region", ("AWS_REGION", "AWS_DEFAULT_REGION"))
        if region is None:
            where, region = "the AWS profile's region", _profile_region(env) or DEFAULT_REGION
        if not isinstance(region, str) or not _REGION.fullmatch(region):
            raise ConfigError(f"{where} {region!r}: not a region name (e.g. eu-west-1)")
        path_style = conf.get("path_style")
        if path_style is None and env.get(PATH_STYLE_VARIABLE):
            if env[PATH_STYLE_VARIABLE].strip().lower() not in ("true", "false"):
                raise ConfigError(f"{PATH_STYLE_VARIABLE} {env[PATH_STYLE_VARIABLE]!r}: true or false")
            path_style = env[PATH_STYLE_VARIABLE].strip().lower() == "true"
        if path_style is None:
            path_style = endpoint is not None and _is_local_host(urlsplit(endpoint).hostname or "")
        elif not isinstance(path_style, bool):
            raise ConfigError(f"[tool.lakehouse.s3] path_style {path_style!r}: true or false")
        return cls(endpoint=endpoint, region=region, path_style=path_style)

    @property
    def secure(self) -> bool:
        """Whether requests go over TLS (an ``http://`` endpoint does not)."""
        return self.endpoint is None or self.endpoint.startswith("https://")

    # -- each engine's configuration ------------------------------------------------------------

    def spark_conf(self) -> dict[str, str]:
        """hadoop-aws's settings as Spark settings; ``s3://`` is served by S3A like ``s3a://``.
        Credentials: the AWS SDK's default chain (environment, profile, container, instance)."""
        conf = {
            "spark.hadoop.fs.s3.impl": "org.apache.hadoop.fs.s3a.S3AFileSystem",
            # Delta commits with a conditional PUT (lakehouse/jvm/src/.../ConditionalPutLogStore.java):
            # of two processes committing one version, one wins, the other retries; never lost
            "spark.delta.logStore.s3.impl": LOG_STORE,
            "spark.delta.logStore.s3a.impl": LOG_STORE,
            "spark.hadoop.fs.s3a.aws.credentials.provider":
                "software.amazon.awssdk.auth.credentials.DefaultCredentialsProvider",
            "spark.hadoop.fs.s3a.endpoint.region": self.region,
            "spark.hadoop.fs.s3a.path.style.access": str(self.path_style).lower(),
        }
        if self.endpoint is not None:
            conf["spark.hadoop.fs.s3a.endpoint"] = self.endpoint
            conf["spark.hadoop.fs.s3a.connection.ssl.enabled"] = str(self.secure).lower()
            conf["spark.executorEnv.AWS_ENDPOINT_URL_S3"] = self.endpoint  # lakehouse code in tasks
        conf["spark.executorEnv.AWS_REGION"] = self.region
        conf[f"spark.executorEnv.{PATH_STYLE_VARIABLE}"] = str(self.path_style).lower()
        return conf

    def storage_options(self) -> dict[str, str]:
        """deltalake's ``storage_options`` (credentials from the environment or instance)."""
        opts = {"AWS_REGION": self.region, "AWS_VIRTUAL_HOSTED_STYLE_REQUEST": str(not self.path_style).lower()}
        if self.endpoint is not None:
            opts["AWS_ENDPOINT_URL"] = self.endpoint
            if not self.secure:
                opts["AWS_ALLOW_HTTP"] = "true"
        return opts

    def arrow_filesystem(self) -> Any:
        """A pyarrow S3 filesystem for this store (credentials from the default chain). Its writes
        open lazily: a file smaller than a part is then one PUT when it is closed, where an eager
        open makes it a multipart upload of three requests."""
        import pyarrow.fs as pafs

        if self.endpoint is None:
            return pafs.S3FileSystem(region=self.region, force_virtual_addressing=not self.path_style,
                                     allow_delayed_open=True)
        parts = urlsplit(self.endpoint)
        return pafs.S3FileSystem(region=self.region, endpoint_override=parts.netloc, scheme=parts.scheme,
                                 force_virtual_addressing=not self.path_style, allow_delayed_open=True)

    def duckdb_secret(self) -> str:
        """The DuckDB statement that lets a connection with the :data:`DUCKDB_EXTENSIONS` read this
        store: a temporary secret that names the credential chain, not the credentials."""
        parts = [f"TYPE s3, PROVIDER credential_chain, REGION '{self.region}'",
                 f"URL_STYLE '{'path' if self.path_style else 'vhost'}'"]
        if self.endpoint is not None:
            host = urlsplit(self.endpoint)
            parts.append(f"ENDPOINT '{host.netloc}'")
            parts.append(f"USE_SSL {str(self.secure).lower()}")
        return f"CREATE OR REPLACE TEMPORARY SECRET lakehouse_s3 ({', '.join(parts)})"


def _profile_region(env: dict[str, str]) -> str | None:
    """The region of the AWS profile (``AWS_PROFILE``, else the default one) in the AWS config
    files, as the AWS SDKs read it; None when none names one."""
    try:
        import botocore.session
    except ImportError:  # pragma: no cover - boto3 is a dependency
        return None
    session = botocore.session.Session(profile=env.get("AWS_PROFILE") or None)
    try:
        region = session.get_config_variable("region")
    except Exception:  # noqa: BLE001 - an unreadable or unknown profile: no region from it
        return None
    return str(region) if region else None


_REGION = re.compile(r"[a-z0-9][a-z0-9-]{0,62}")
"""A region name as AWS and the S3-compatible stores spell them (us-east-1, auto, garage)."""


def _first(conf: dict[str, Any], env: dict[str, str], key: str, variables: tuple[str, ...]) -> tuple[str, Any]:
    """The first of ``[tool.lakehouse.s3] key`` and ``variables`` that is set: its name and value."""
    if conf.get(key) not in (None, ""):
        return f"[tool.lakehouse.s3] {key}", conf[key]
    for name in variables:
        if env.get(name):
            return name, env[name]
    return f"[tool.lakehouse.s3] {key}", None


def _endpoint(raw: str, where: str) -> str:
    parts = urlsplit(raw.strip())
    try:
        parts.port  # noqa: B018 - a port that is not a number raises
    except ValueError:
        parts = urlsplit("")
    if "@" in parts.netloc:  # credentials in a URL would reach logs and Spark's settings
        raise ConfigError(f"{where}: an endpoint URL must not hold credentials (user:secret@); "
                          "give them through the AWS variables or a profile")
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.path not in ("", "/") \
            or parts.query or parts.fragment or "'" in raw or any(c.isspace() for c in raw.strip()):
        raise ConfigError(f"{where} {raw!r}: not an endpoint URL (http://host:port or https://host)")
    return f"{parts.scheme}://{parts.netloc}"


def _is_local_host(host: str) -> bool:
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


_ACTIVE: S3 | None = None


def use(s3: S3 | None) -> None:
    """Make ``s3`` the store this process's warehouse paths reach (lakehouse.storage and the
    engines read it); None goes back to the standard AWS variables alone. The store's endpoint
    and region also go into this process's standard AWS variables, which the processes it starts
    (Spark's Python workers among them) inherit, so lakehouse code in a Spark task reaches the
    same store (on a cluster, ``spark_conf`` hands them to the executors)."""
    global _ACTIVE, _EXPORTED
    _ACTIVE = s3
    if _EXPORTED is None:  # the variables as the process found them, before any export
        _EXPORTED = {name: os.environ.get(name) for name in ("AWS_REGION", "AWS_ENDPOINT_URL_S3", PATH_STYLE_VARIABLE)}
    wanted = dict(_EXPORTED)
    if s3 is not None:
        wanted["AWS_REGION"] = s3.region
        wanted[PATH_STYLE_VARIABLE] = str(s3.path_style).lower()
        if s3.endpoint is not None:
            wanted["AWS_ENDPOINT_URL_S3"] = s3.endpoint
    for name, value in wanted.items():  # another store (or none) later: no stale endpoint stays
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


_EXPORTED: dict[str, str | None] | None = None


def configured() -> S3 | None:
    """The store set by :func:`use` (a project whose warehouse is on S3), else None."""
    return _ACTIVE


def active() -> S3:
    """The store set by :func:`use`, else the one the standard AWS variables describe (as on a
    Spark executor, which inherits the driver's environment)."""
    if _ACTIVE is not None:
        return _ACTIVE
    return _from_variables(tuple(os.environ.get(name, "") for name in _VARIABLES))


_VARIABLES = ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL", "AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE",
              "AWS_CONFIG_FILE", PATH_STYLE_VARIABLE)
"""The standard AWS variables a store's settings depend on."""


@lru_cache(maxsize=8)
def _from_variables(values: tuple[str, ...]) -> S3:
    """The store those variables' values describe (resolved once per set of values: the AWS
    profile's region is read from a file)."""
    return S3.resolve({}, {k: v for k, v in zip(_VARIABLES, values, strict=True) if v})
