"""A Spark standalone cluster for the tests: a master and one worker with two cores on free loopback
ports, started with pyspark's own ``spark-class`` (no Spark installation besides the package).

``python -m tests.spark_cluster --owner PID --folder DIR`` starts both, prints the master's URL on
the first line of standard output once the worker has registered, and stops them when the
process ``--owner`` is gone (or on SIGTERM). The worker runs with this process's environment: the
machines of a cluster hold their own credentials for the object store (an instance role; here the
AWS variables of the suite's S3 server).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

START_SECONDS = 120.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _workers(ui_port: int) -> int:
    """How many workers the master counts alive (its web UI's JSON; 0 while it is not up)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{ui_port}/json/", timeout=2) as r:
            return int(json.load(r).get("aliveworkers", 0))
    except (OSError, ValueError):
        return 0


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--owner", type=int, required=True)
    parser.add_argument("--folder", required=True)
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--memory", default="2g")
    args = parser.parse_args()
    import pyspark

    home = os.path.dirname(pyspark.__file__)
    folder = Path(args.folder)
    folder.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "SPARK_HOME": home, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable,
           "SPARK_WORKER_DIR": str(folder / "work"), "SPARK_LOG_DIR": str(folder)}
    env.pop("SPARK_CONF_DIR", None)
    port, ui, worker_ui = _free_port(), _free_port(), _free_port()
    url = f"spark://127.0.0.1:{port}"
    spark_class = os.path.join(home, "bin", "spark-class")
    procs = [subprocess.Popen([spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                               "--port", str(port), "--webui-port", str(ui)], env=env, stdin=subprocess.DEVNULL,
                              stdout=open(folder / "master.log", "ab"), stderr=subprocess.STDOUT)]  # noqa: SIM115
    procs.append(subprocess.Popen([spark_class, "org.apache.spark.deploy.worker.Worker", url, "--host", "127.0.0.1",
                                   "--cores", str(args.cores), "--memory", args.memory, "--webui-port", str(worker_ui),
                                   "--work-dir", str(folder / "work")], env=env, stdin=subprocess.DEVNULL,
                                  stdout=open(folder / "worker.log", "ab"), stderr=subprocess.STDOUT))  # noqa: SIM115
    stopping = False

    def stop(*_: object) -> None:
        nonlocal stopping
        stopping = True

    def owner_gone() -> bool:
        try:
            os.kill(args.owner, 0)
        except ProcessLookupError:
            return True
        return False

    signal.signal(signal.SIGTERM, stop)
    try:  # whatever happens here (the owner gone while starting, a closed stdout), both go
        deadline = time.monotonic() + START_SECONDS
        while _workers(ui) < 1 and not stopping:
            if time.monotonic() > deadline or any(p.poll() is not None for p in procs) or owner_gone():
                print(f"the cluster did not start (logs in {folder})", flush=True)
                stopping = True
                break
            time.sleep(0.5)
        else:
            print(url, flush=True)
        while not stopping and not owner_gone():
            time.sleep(1)
    finally:
        for p in reversed(procs):
            p.terminate()
        for p in procs:
            try:
                p.wait(20)
            except subprocess.TimeoutExpired:
                p.kill()

if __name__ == "__main__":
    main()
