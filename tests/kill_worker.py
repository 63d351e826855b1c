"""A ``lakehouse`` process started ahead of time, for tests that kill a command at a random instant.

It reaches Spark (the same session the commands will use: the suite's Spark Connect server when
LAKEHOUSE_REMOTE names it, else a Spark of its own) and runs a first small job, prints
``ready``, then reads command lines (a JSON list of arguments each) from standard input and runs
each exactly as ``lakehouse`` would, printing ``done <exit code>`` after each; it exits at the end
of its input. While a command runs, each named crash
point it passes is printed as ``point NAME`` (nothing is killed there): the test picks one of
them at random, waits a random time after it, and kills the whole process group (this process,
and Spark's JVM when it has one; on a server the test then fences the dead client's jobs, as the
next command would). So the instant falls anywhere inside the command's own work (a staging job,
a commit, between two saves), not inside the start of a JVM.
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
    from lakehouse import crashpoints

    def passed(point: str, pid: int | None = None) -> None:
        print(f"point {point}", flush=True)

    crashpoints.reached = passed
    print("ready", flush=True)
    from lakehouse.cli import cli

    for line in sys.stdin:
        if not line.strip():
            break
        code = 0
        try:
            cli.main(args=json.loads(line), prog_name="lakehouse", standalone_mode=True)
        except SystemExit as e:
            code = int(e.code or 0) if not isinstance(e.code, str) else 1
        sys.stdout.flush()
        print(f"done {code}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
