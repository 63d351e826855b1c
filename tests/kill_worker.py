"""A ``lakehouse`` process started ahead of time, for tests that kill a command at a random instant.

It starts Spark (the same session the command will use), prints ``ready``, reads one command
line (a JSON list of arguments) from standard input, runs it exactly as ``lakehouse`` would, and
exits with its exit code. The test sends the command, waits a random time and kills the whole
process group (this process and Spark's JVM): the instant falls inside the command's own work,
not inside the start of a JVM.
"""

from __future__ import annotations

import json
import os
import sys


def main() -> int:
    from lakehouse.session import get_spark

    get_spark(os.environ["LAKEHOUSE_MASTER"])
    print("ready", flush=True)
    line = sys.stdin.readline()
    if not line.strip():
        return 0
    from lakehouse.cli import cli

    try:
        cli.main(args=json.loads(line), prog_name="lakehouse", standalone_mode=True)
    except SystemExit as e:
        return int(e.code or 0) if not isinstance(e.code, str) else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
