"""The command host without Spark (lakehouse.cli.host, lakehouse.cli.hosting): how a command line
names its project and command, a socket in a folder too deep for a socket address, how the
command's process ends as the hosted command ended, and a real host's life beside a stand-in for
the project's server (tests/test_server.py runs commands through a host beside a real server)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lakehouse.cli import host, hosting
from tests.conftest import REPO

WITH_VALUE = sorted(host.GLOBAL_WITH_VALUE)
token = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\0"), min_size=1, max_size=12)


@given(st.lists(st.one_of(st.tuples(st.sampled_from(WITH_VALUE), token, st.booleans()),
                          st.sampled_from(["-v", "-vv", "--verbose"])), max_size=6),
       st.from_regex(r"[a-z][a-z-]{0,12}", fullmatch=True), st.lists(token, max_size=4))
def test_the_project_and_the_command_are_read_as_click_reads_them(options, command, rest):
    argv, project = [], None
    for opt in options:
        if isinstance(opt, tuple):
            name, value, joined = opt
            argv += [f"{name}={value}"] if joined else [name, value]  # a value may look like anything
            if name == "--project":
                project = value
        else:
            argv.append(opt)
    assert host._target([*argv, command, *rest]) == (project, command)
    assert host._target(argv)[1] is None  # no command: --help, --version or a usage error, here


@pytest.mark.parametrize("argv", [["--help"], ["-h"], ["--version"], ["--project", "p", "--help", "tables"], []])
def test_help_and_version_run_in_the_process(argv):
    assert host._target(argv)[1] is None


def test_a_socket_deeper_than_a_socket_address_allows_is_reached_through_its_folder(tmp_path):
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    deep.mkdir(parents=True)
    path = deep / "host.sock"
    assert len(str(path)) > 108
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listener:
        listener.bind(host._address(path))
        listener.listen(1)
        assert path.exists()
        with host._connect(path) as conn:
            peer, _ = listener.accept()
            conn.sendall(b"x")
            assert peer.recv(1) == b"x"
            peer.close()


@pytest.mark.parametrize("status", [0, 3, -signal.SIGTERM, -signal.SIGKILL, -signal.SIGINT])
def test_the_command_process_ends_as_the_hosted_command_ended(status):
    code = f"from lakehouse.cli.host import exit_as\nprint('said', flush=False)\nexit_as({status})\n"
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert p.returncode == status
    assert p.stdout == "said\n"  # flushed before it ended


def _stand_in(tmp_path: Path) -> subprocess.Popen:
    """A process the host takes for the project's Spark Connect server (its command line names
    the server's module), without a JVM."""
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)", "lakehouse.spark.server"])


def _project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    (root / "tables").mkdir(parents=True)
    (root / "tables" / "trips.yaml").write_text((REPO / "tables" / "trips.yaml").read_text())
    return root


def _lakehouse(root: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    child = {k: v for k, v in os.environ.items() if not k.startswith("LAKEHOUSE_")}
    child.update(env or {})
    return subprocess.run([sys.executable, "-m", "lakehouse.cli", "--project", str(root), *args], env=child,
                          capture_output=True, text=True, timeout=120)


def test_a_host_serves_while_its_server_runs_and_shrugs_off_a_bad_request(tmp_path):
    root = _project(tmp_path)
    server = _stand_in(tmp_path)
    try:
        rec = hosting.start(root, server.pid)
        assert hosting.status(root) == f"running (pid {rec['pid']})"
        assert host.unusable(rec) is None
        hosted = _lakehouse(root, "tables", "--format", "json")
        alone = _lakehouse(root, "tables", "--format", "json", env={"LAKEHOUSE_HOST": "off"})
        assert hosted.returncode == alone.returncode == 0, hosted.stderr
        assert hosted.stdout == alone.stdout and hosted.stderr == alone.stderr
        for junk in (b"", b"\x00\x00", b"\xff\xff\xff\xff" + b"x" * 100, b"\x00\x00\x00\x05[1,2"):
            with host._connect(root / ".lakehouse" / "host.sock") as conn:  # no descriptors, a bad length or body
                conn.sendall(junk)
                conn.shutdown(socket.SHUT_WR)
                conn.settimeout(30)
                try:
                    assert conn.recv(100) == b""  # hung up on, not served
                except ConnectionResetError:  # hung up on with bytes unread
                    pass
        again = _lakehouse(root, "tables", "--format", "json")
        assert again.returncode == 0 and again.stdout == alone.stdout
        server.kill()  # the server gone: the host stops within a second or two, and cleans up
        server.wait()
        deadline = time.monotonic() + 30
        while hosting.running(rec["pid"]) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not hosting.running(rec["pid"])
        assert not (root / ".lakehouse" / "host.json").exists() and not (root / ".lakehouse" / "host.sock").exists()
        assert hosting.status(root) == "not running"
        assert "command host" not in _lakehouse(root, "tables").stderr
        log = (root / ".lakehouse" / "host.log").read_text()
        assert "command host ready" in log and "is gone; stopping" in log and "a request could not be read" in log
    finally:
        server.kill()
        hosting.stop(root)


def test_stop_ends_the_host_and_a_killed_host_is_noticed_with_one_line(tmp_path):
    root = _project(tmp_path)
    server = _stand_in(tmp_path)
    try:
        rec = hosting.start(root, server.pid)
        assert hosting.stop(root) == rec and not hosting.running(rec["pid"])
        assert hosting.stop(root) is None
        rec = hosting.start(root, server.pid)
        os.kill(rec["pid"], signal.SIGKILL)  # its record and socket stay behind
        deadline = time.monotonic() + 10
        while hosting.running(rec["pid"]) and time.monotonic() < deadline:
            time.sleep(0.05)
        p = _lakehouse(root, "tables", "--format", "json")
        assert p.returncode == 0 and json.loads(p.stdout), p.stderr
        notes = [ln for ln in p.stderr.splitlines() if "command host" in ln]
        assert len(notes) == 1 and f"its process {rec['pid']} is gone" in notes[0]
        assert hosting.status(root).startswith("not used: its process")
    finally:
        server.kill()
        hosting.stop(root)
