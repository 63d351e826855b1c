"""Warehouse paths: local paths and object-store URIs, and the pyarrow filesystem that reaches each
(``lakehouse.storage`` re-exports these; everything else goes through it)."""

from __future__ import annotations

import os

import pyarrow.fs as pafs

from lakehouse import objectstore
from lakehouse.objectstore import is_s3
from lakehouse.storage import s3 as s3io


def is_local(uri: str) -> bool:
    """True for a local path (not an object store URI)."""
    return "://" not in uri


def local_path(uri: str) -> str | None:
    """The local filesystem path of a warehouse location, or None for an object store."""
    if is_local(uri):
        return uri
    if uri.startswith("file://"):
        return uri[len("file://"):]
    return None


def join(base: str, *parts: str) -> str:
    """Join path segments for local paths and URIs alike."""
    return "/".join([base.rstrip("/"), *parts])


def relative(root: str, place: str) -> str:
    """A place under the folder ``root`` as a document under it keeps it (relative: the folder
    copied, moved or synced elsewhere keeps its documents true); any other place as it is."""
    prefix = root.rstrip("/") + "/"
    return place[len(prefix):] if place.startswith(prefix) else place


def under(root: str, place: str) -> str:
    """``relative`` reversed: a relative place of a document under ``root`` where this process
    reaches it; an absolute path or a URI as it is."""
    return place if not place or place.startswith("/") or "://" in place else join(root, place)


def filesystem(uri: str) -> tuple[pafs.FileSystem, str]:
    """A pyarrow filesystem and path for a local path or URI (works on executors too); an S3
    URI reaches the store lakehouse.objectstore describes."""
    if "://" not in uri:
        return pafs.LocalFileSystem(), uri
    if is_s3(uri):
        return s3io.arrow_s3(objectstore.active()), uri.split("://", 1)[1]
    return pafs.FileSystem.from_uri(uri)


def absolute(path: str) -> str:
    """A file's one spelling: a local path made absolute, an S3 URI in its ``s3://`` form (its key
    as given: an input's name may hold what a warehouse prefix may not)."""
    if is_local(path):
        return os.path.abspath(path)
    if is_s3(path):
        return "s3://" + path.split("://", 1)[1]
    return path
