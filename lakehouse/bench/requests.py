"""The object-store requests a benchmark step makes, as the store itself saw them.

Requests are counted on the server's side, so that every client is in the count: Spark's S3A
filesystem and lakehouse's Delta LogStore in the JVM, pyarrow's and deltalake's in Rust and C++,
boto3's. An S3 API server that records the requests it serves (moto's recorder, under
``/moto-api/recorder/``: the loopback trial's and the tests' server) is counted by kind; on a store
that does not (AWS S3: its request metrics or CloudTrail), a benchmark reports no count and says why.
"""

from __future__ import annotations

import contextlib
import json
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Iterator
from urllib.parse import parse_qs, urlsplit

KINDS = ("GET", "HEAD", "LIST", "PUT", "COPY", "DELETE", "POST")
"""The kinds of request counted: object reads, metadata reads, listings, writes (a part of a
multipart upload too), server-side copies, deletes (a bulk delete counts one), and the rest (the
start and end of multipart uploads). Path-style requests, as an S3 API server on loopback takes."""


def kind(method: str, url: str, headers: dict[str, str]) -> str:
    """The kind of one S3 request (one of ``KINDS``), from its method, URL and headers."""
    method = method.upper()
    parts = urlsplit(url)
    query = parse_qs(parts.query, keep_blank_values=True)
    if method == "GET":
        # a path-style listing is GET /bucket?list-type=2 (or the old GET /bucket?prefix=...)
        path = [p for p in parts.path.split("/") if p]
        return "LIST" if "list-type" in query or (len(path) <= 1 and "location" not in query) else "GET"
    if method == "PUT" and any(k.lower() == "x-amz-copy-source" for k in headers):
        return "COPY"
    if method == "POST" and "delete" in query:
        return "DELETE"
    return method if method in KINDS else "POST"


@contextlib.contextmanager
def not_counted() -> Iterator[dict[str, int]]:
    """What :meth:`StoreRequests.counting` is on the local disk: no counts."""
    yield {}


class StoreRequests:
    """The request recorder of the S3 API server at ``endpoint`` (None: AWS's own, which has none)."""

    def __init__(self, endpoint: str | None) -> None:
        self._base = endpoint.rstrip("/") + "/moto-api/recorder/" if endpoint else None
        self.why_not: str | None = None
        """Why requests are not counted (None: they are)."""
        if self._base is None:
            self.why_not = "the store (AWS S3) does not report requests to a client; see its request metrics"
        elif not self._call("reset-recording"):
            self.why_not = f"the S3 API server at {endpoint} records no requests (moto's recorder does)"

    def _call(self, action: str) -> bool:
        """One action of the recorder (reset, start, stop); whether it was done."""
        assert self._base is not None
        try:
            with urllib.request.urlopen(urllib.request.Request(self._base + action, method="POST"),  # noqa: S310
                                        timeout=60) as r:
                return bool(r.status == 200)
        except (urllib.error.URLError, OSError):
            return False

    def _recorded(self) -> Counter[str]:
        """The requests recorded, by kind (read line by line: the recording holds the bodies)."""
        assert self._base is not None
        tally = Counter({k: 0 for k in KINDS})
        with urllib.request.urlopen(self._base + "download-recording", timeout=600) as r:  # noqa: S310
            decoder = json.JSONDecoder()
            for raw in r:
                # one entry a line; two handlers' newlines may follow their two entries on one line
                line, at = raw.decode("utf-8", "replace").strip(), 0
                while at < len(line):
                    entry, at = decoder.raw_decode(line, at)
                    tally[kind(entry["method"], entry["url"], entry.get("headers") or {})] += 1
        return tally

    @contextlib.contextmanager
    def counting(self) -> Iterator[dict[str, int]]:
        """Count the requests made inside the block: the dict yielded is filled on leaving it with
        each kind's count and ``total`` (left empty when the store does not count)."""
        counts: dict[str, int] = {}
        if self.why_not is not None:
            yield counts
            return
        self._call("reset-recording")
        self._call("start-recording")
        try:
            yield counts
        finally:
            self._call("stop-recording")
            tally = self._recorded()
            self._call("reset-recording")  # the bodies it kept go
            counts.update({k: tally[k] for k in KINDS}, total=sum(tally.values()))
