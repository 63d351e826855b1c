"""An S3 API server for the tests: moto's, on a free loopback port, printing its endpoint on the
first line of standard output; ``--no-conditions`` makes it ignore If-None-Match and If-Match (a
store without conditional writes); it stops when the process ``--owner`` is gone."""

from __future__ import annotations

import argparse
import logging
import os
import threading
import time
from typing import Any


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--owner", type=int, required=True)
    parser.add_argument("--no-conditions", action="store_true")
    args = parser.parse_args()

    from moto.moto_server.threaded_moto_server import MotoRequestHandler
    from moto.server import DomainDispatcherApplication, create_backend_app
    from werkzeug.serving import make_server

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    app = DomainDispatcherApplication(create_backend_app)

    def without_conditions(environ: dict[str, Any], start_response: Any) -> Any:
        environ.pop("HTTP_IF_NONE_MATCH", None)
        environ.pop("HTTP_IF_MATCH", None)
        return app(environ, start_response)

    server = make_server("127.0.0.1", 0, without_conditions if args.no_conditions else app, True,
                         request_handler=MotoRequestHandler)
    host, port = server.server_address[:2]
    print(f"http://{host}:{port}", flush=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    while True:  # a server that outlives its test run is no use
        time.sleep(1)
        try:
            os.kill(args.owner, 0)
        except ProcessLookupError:
            break
    server.shutdown()


if __name__ == "__main__":
    main()
