"""S3 for lakehouse.storage: the store's clients, and what S3 makes atomic besides a whole PUT: a
PUT that succeeds only while the object is absent (If-None-Match: *) or unchanged (If-Match: its
ETag). Also the checks a warehouse on S3 gets before lakehouse writes to it: the bucket answers
(credentials, endpoint, bucket), and the store honours both conditions.
"""

from __future__ import annotations

import functools
import time
import uuid
from typing import Any

import pyarrow.fs as pafs

from lakehouse import objectstore
from lakehouse.errors import ConfigError, TransientError
from lakehouse.objectstore import S3, is_s3


@functools.lru_cache(maxsize=4)
def arrow_s3(s3: S3) -> pafs.FileSystem:
    """pyarrow's filesystem of the store (made once per store and process)."""
    return s3.arrow_filesystem()


@functools.lru_cache(maxsize=4)
def client(s3: S3) -> Any:
    """A boto3 client of the store (conditional writes, which pyarrow does not make)."""
    import boto3
    from botocore.config import Config

    return boto3.client("s3", endpoint_url=s3.endpoint, region_name=s3.region,
                        config=Config(s3={"addressing_style": "path" if s3.path_style else "virtual"},
                                      retries={"max_attempts": 5, "mode": "standard"}))


def bucket_key(uri: str) -> tuple[str, str]:
    """An ``s3://`` URI's bucket and key."""
    bucket, _, key = uri.split("://", 1)[1].partition("/")
    return bucket, key


def delete_prefix(bucket: str, prefix: str) -> None:
    """Delete every object under ``prefix`` (a listing, then a thousand keys a request)."""
    if not prefix.strip("/"):
        raise ValueError(f"s3://{bucket}: refusing to delete every object of a bucket")
    c = client(objectstore.active())
    for page in c.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        keys = [{"Key": o["Key"]} for o in page.get("Contents", [])]
        if keys:
            errors = c.delete_objects(Bucket=bucket, Delete={"Objects": keys, "Quiet": True}).get("Errors", [])
            if errors:
                e = errors[0]
                raise OSError(f"s3://{bucket}/{e.get('Key')}: not deleted: {e.get('Code')} {e.get('Message')} "
                              f"({len(errors)} key(s) not deleted)")


def put(path: str, data: bytes) -> None:
    """One PUT of a whole object."""
    bucket, key = bucket_key(path)
    client(objectstore.active()).put_object(Bucket=bucket, Key=key, Body=data)


def copy(src: str, dest: str) -> None:
    """A copy of one object made by the store (CopyObject: up to 5 GB)."""
    sb, sk = bucket_key(src)
    db, dk = bucket_key(dest)
    client(objectstore.active()).copy_object(Bucket=db, Key=dk, CopySource={"Bucket": sb, "Key": sk})


def put_if(path: str, data: bytes, etag: str | None) -> bool:
    """One PUT of ``path`` on S3 that succeeds only while the object is as seen: absent
    (``etag`` None) or with that ETag. False when another writer changed it first (412); a write
    of the same key in flight (409) is waited out and tried again; other errors propagate."""
    from botocore.exceptions import ClientError

    bucket, key = bucket_key(path)
    cond = {"IfNoneMatch": "*"} if etag is None else {"IfMatch": etag}
    for attempt in range(10):
        try:
            client(objectstore.active()).put_object(Bucket=bucket, Key=key, Body=data, **cond)
            return True
        except ClientError as e:
            code = e.response.get("Error", {}).get("Code", "")
            status = e.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            if code == "PreconditionFailed" or status == 412:
                return False
            if code != "ConditionalRequestConflict":
                raise
            time.sleep(0.05 * 2 ** attempt)
    raise TransientError(f"{path}: other writers kept a conditional write of it in flight (409 ten times); try again")


def get_with_etag(path: str) -> tuple[bytes, str] | None:
    """An S3 object's bytes and ETag, or None when it does not exist."""
    from botocore.exceptions import ClientError

    bucket, key = bucket_key(path)
    try:
        got = client(objectstore.active()).get_object(Bucket=bucket, Key=key)
    except ClientError as e:
        if e.response.get("Error", {}).get("Code") in ("NoSuchKey", "404"):
            return None
        raise
    return got["Body"].read(), got["ETag"]


_REACHED: set[tuple[S3, str]] = set()


def check_reachable(uri: str) -> None:
    """Refuse, in one line naming the setting to fix, a warehouse whose bucket cannot be reached:
    no credentials, an endpoint that does not answer, no such bucket, access denied. One request
    (HEAD of the bucket) per bucket and process; nothing for a local path."""
    if not is_s3(uri):
        return
    from botocore.config import Config
    from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError

    s3 = objectstore.active()
    bucket, _ = bucket_key(uri)
    if (s3, bucket) in _REACHED:
        return
    import boto3

    store = f"the object store at {s3.endpoint} (AWS_ENDPOINT_URL, or endpoint in [tool.lakehouse.s3])" \
        if s3.endpoint else f"AWS S3 in {s3.region} (AWS_REGION)"
    try:
        client = boto3.session.Session().client(
            "s3", endpoint_url=s3.endpoint, region_name=s3.region,
            config=Config(s3={"addressing_style": "path" if s3.path_style else "virtual"},
                          connect_timeout=5, read_timeout=20, retries={"max_attempts": 2}))
        # a listing of the warehouse's own prefix: credentials limited to that prefix suffice
        client.list_objects_v2(Bucket=bucket, Prefix=bucket_key(uri)[1].rstrip("/") + "/", MaxKeys=1)
    except NoCredentialsError:
        raise ConfigError(f"warehouse {uri}: no AWS credentials found (set AWS_ACCESS_KEY_ID and "
                          "AWS_SECRET_ACCESS_KEY, or AWS_PROFILE, or run where an instance role provides them)") from None
    except ClientError as e:
        status = e.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        why = {404: f"no bucket {bucket!r} there (create it, or fix the warehouse URI)",
               403: f"access to bucket {bucket!r} denied for the credentials of the AWS chain",
               301: f"bucket {bucket!r} is in another region (set AWS_REGION)",
               400: "the request was refused (check the region, AWS_REGION)"}.get(status or 0, f"HTTP {status}")
        raise ConfigError(f"warehouse {uri}: {store}: {why}") from None
    except (BotoCoreError, ValueError) as e:  # no connection, a timeout, a bad endpoint or profile
        raise ConfigError(f"warehouse {uri}: cannot reach {store}: {str(e).splitlines()[0][:200]}") from None
    _REACHED.add((s3, bucket))


_CHECKED: set[tuple[S3, str]] = set()


def require_conditional_writes(uri: str) -> None:
    """Refuse, by name, a store that ignores conditional writes: a second create of one object
    (If-None-Match: *) and a replace of a changed one (If-Match: a stale ETag) must both fail.
    Leases, exclusive creates and appended logs depend on them. Checked once per bucket and
    process, with a probe object beside the bucket's data (``.lakehouse-probe/``), then deleted."""
    if not is_s3(uri):
        return
    s3 = objectstore.active()
    bucket, _ = bucket_key(uri)
    if (s3, bucket) in _CHECKED:
        return
    probe = f"s3://{bucket}/.lakehouse-probe/{uuid.uuid4().hex}"
    try:
        created = put_if(probe, b"1", None)
        again = put_if(probe, b"2", None)
        stale = put_if(probe, b"3", '"0"')  # an ETag the object does not have
    finally:
        pb, pk = bucket_key(probe)
        client(s3).delete_object(Bucket=pb, Key=pk)
    if not created or again or stale:
        raise ConfigError(f"object store {s3.endpoint or 'AWS S3'} (bucket {bucket}) does not honour conditional "
                          "writes (PUT with If-None-Match: * or If-Match), which lakehouse needs for leases and "
                          "logs; use a store that does (AWS S3, MinIO, R2, Ceph 19+)")
    _CHECKED.add((s3, bucket))


TRANSIENT = ("NETWORK_CONNECTION", "SLOW_DOWN", "SERVICE_UNAVAILABLE", "INTERNAL_FAILURE", "REQUEST_TIMEOUT",
             "THROTTLING", "curlCode", "HTTP response code: 5", "Connection reset", "Connection refused",
             "timed out", "Timeout")
"""What a moment of the store or the network looks like in pyarrow's S3 errors (it retried
already): no connection, no answer, throttling, a 5xx."""


def transient(path: str, e: BaseException) -> TransientError | None:
    """A read of ``path`` on an object store that failed with ``e`` for a moment of the store or
    the network (:data:`TRANSIENT`): the error to raise instead, so that the file is read again by
    the next run rather than failed for good. None for anything else: a missing, refused, corrupt
    or truncated file (failed, with why), and any local file."""
    import gzip

    if not is_s3(path) or not isinstance(e, OSError) or isinstance(e, (FileNotFoundError, PermissionError,
                                                                         gzip.BadGzipFile)):
        return None
    text = str(e)
    if not any(marker in text for marker in TRANSIENT):
        return None
    return TransientError(f"{path}: {TRANSIENT_READ} (tried again by the next run): "
                          f"{text.splitlines()[0][:200] if text else type(e).__name__}")


TRANSIENT_READ = "the object store failed to answer a read"
"""The words of :func:`transient`'s error, found in a Spark task's failure too."""


def is_transient(e: BaseException) -> bool:
    """Whether a failure (here, or in a Spark task, where it arrives as text) is a moment to wait
    out: a TransientError, or a task that failed with :func:`transient`'s error."""
    return isinstance(e, TransientError) or TRANSIENT_READ in str(e)
