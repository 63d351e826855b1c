"""An S3 API server for the tests: moto's, on a free loopback port, printing its endpoint on the
first line of standard output; ``--ignore HEADER`` (repeatable: If-None-Match, If-Match) makes it
ignore that condition, as a store without conditional writes does; conditional writes are decided
one at a time, atomically, as S3 decides them; it stops when the process ``--owner`` is gone."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import tempfile
import threading
import time
from typing import Any


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--owner", type=int, required=True)
    parser.add_argument("--ignore", action="append", default=[], choices=["If-None-Match", "If-Match"])
    args = parser.parse_args()

    # moto's recorder (``lakehouse bench archive`` counts requests with it) keeps its recording in
    # a file of its own, not in the current directory
    recording = tempfile.NamedTemporaryFile(prefix="lakehouse-s3-requests-", suffix=".jsonl", delete=False)
    recording.close()
    os.environ["MOTO_RECORDER_FILEPATH"] = recording.name

    from moto.moto_server.threaded_moto_server import MotoRequestHandler
    from moto.server import DomainDispatcherApplication, create_backend_app
    from werkzeug.serving import make_server

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    app = DomainDispatcherApplication(create_backend_app)

    ignored = ["HTTP_" + h.upper().replace("-", "_") for h in args.ignore]
    # moto checks a write's condition, then writes, without a lock: two conditional PUTs of one key
    # at once could both pass. S3 decides them atomically; so does this server, one at a time.
    atomic = threading.Lock()

    def served(environ: dict[str, Any], start_response: Any) -> Any:
        for name in ignored:
            environ.pop(name, None)
        if environ.get("HTTP_IF_MATCH") or environ.get("HTTP_IF_NONE_MATCH"):
            with atomic:
                return list(app(environ, start_response))
        return app(environ, start_response)

    server = make_server("127.0.0.1", 0, served, True, request_handler=MotoRequestHandler)
    host, port = server.server_address[:2]
    print(f"http://{host}:{port}", flush=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # S3Server.stop: leave no recording behind
    try:
        while True:  # a server that outlives its test run is no use
            time.sleep(1)
            try:
                os.kill(args.owner, 0)
            except ProcessLookupError:
                break
        server.shutdown()
    finally:
        os.remove(recording.name)


if __name__ == "__main__":
    main()
