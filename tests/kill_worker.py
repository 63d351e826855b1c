"""A ``lakehouse`` process started ahead of time, for tests that kill a command at a random instant.

It reaches Spark (the same session the commands will use: the suite's Spark Connect server when
LAKEHOUSE_REMOTE names it, else a Spark of its own) and runs a first small job, prints
``ready``, then reads command lines (a JSON list of arguments each) from standard input and runs
each exactly as ``lakehouse`` would, printing ``done <exit code>`` after each; it exits at the end
of its input. While a command runs, each named crash point it passes is printed as
``point NAME`` (nothing is killed there). A command line may also be ``{"args": [...], "kill":
[POINT, SECONDS]}``: the test picked a point (or ``start``) and a random wait; when the command
passes that point this process arms a timer that kills its whole process group (this process,
and Spark's JVM when it has one; on a server the test then fences the dead client's jobs, as the
next command would) that many seconds later. The timer runs in this process, so a wait of a few
milliseconds lands inside a step of a few milliseconds (a commit through delta-rs, a save): the
instant falls anywhere inside the command's own work, not inside the start of a JVM, and not
after the work because a pipe was slow.
"""

from __future__ import annotations

import json
import os
import sys


def main() -> int:
    import tempfile

    import lakehouse.cli  # noqa: F401 - imported now, not in the command's time
    from lakehouse.spark.session import connect, get_spark

    remote = os.environ.get("LAKEHOUSE_REMOTE")
    spark = connect(remote, ship_package=False) if remote else get_spark(os.environ["LAKEHOUSE_MASTER"])
    with tempfile.TemporaryDirectory() as tmp:  # a first job (code paths compiled), not in the command's time
        spark.range(100).selectExpr("id", "cast(id as string) s").write.format("delta").save(os.path.join(tmp, "t"))
        spark.read.format("delta").load(os.path.join(tmp, "t")).count()
    import signal
    import threading

    from lakehouse import crashpoints

    armed: dict[str, object] = {}

    def arm(seconds: float) -> None:
        timer = threading.Timer(seconds, lambda: os.killpg(os.getpgrp(), signal.SIGKILL))
        timer.daemon = True
        armed["timer"] = timer
        timer.start()

    def passed(point: str, pid: int | None = None) -> None:
        print(f"point {point}", flush=True)
        if armed.get("at") == point and "timer" not in armed:
            arm(float(armed["after"]))  # type: ignore[arg-type]

    crashpoints.reached = passed
    print("ready", flush=True)
    from lakehouse.cli import cli

    for line in sys.stdin:
        if not line.strip():
            break
        code = 0
        doc = json.loads(line)
        args = doc if isinstance(doc, list) else doc["args"]
        armed.clear()
        if isinstance(doc, dict) and doc.get("kill"):
            armed["at"], armed["after"] = doc["kill"]
            if armed["at"] == "start":
                arm(float(armed["after"]))  # type: ignore[arg-type]
        try:
            cli.main(args=args, prog_name="lakehouse", standalone_mode=True)
        except SystemExit as e:
            code = int(e.code or 0) if not isinstance(e.code, str) else 1
        timer = armed.get("timer")
        if timer is not None:
            timer.cancel()  # type: ignore[attr-defined]
        sys.stdout.flush()
        print(f"done {code}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
