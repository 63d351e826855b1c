"""The command host without Spark (lakehouse.cli.host, hosting, hosted): how a command line names
its project and command, a socket in a folder too deep for a socket address, how the command's
process ends as the hosted command ended, and real hosts beside a stand-in for the project's
server: signals at the worst instants (right after the fork, a caller gone right after handing
over, the host killed under a command, Ctrl-Z), the caller's umask, priority and limits, requests
that never arrive or are not requests, a host it must not trust. tests/test_server.py runs
commands through a host beside a real server."""

from __future__ import annotations

import json
import os
import resource
import signal
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lakehouse.cli import host, hosting
from tests.conftest import REPO, wait_until

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
    assert host.project_and_command([*argv, command, *rest]) == (project, command)
    assert host.project_and_command(argv)[1] is None  # no command: --help, --version or a usage error, here


@pytest.mark.parametrize("argv", [["--help"], ["-h"], ["--version"], ["--project", "p", "--help", "tables"], []])
def test_help_and_version_run_in_the_process(argv):
    assert host.project_and_command(argv)[1] is None


def test_a_socket_deeper_than_a_socket_address_allows_is_reached_through_its_folder(tmp_path):
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    deep.mkdir(parents=True)
    path = deep / "host.sock"
    assert len(str(path)) > 108
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listener:
        with host.address(path) as where:
            listener.bind(where)
        listener.listen(1)
        assert path.exists()
        with host.connect(path) as conn:
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


def test_the_code_stamp_passes_over_what_cannot_be_read(tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "a.py").write_text("x = 1\n")
    os.symlink(pkg / "gone.py", pkg / ".#a.py")  # an editor's lock: a link to nowhere
    assert host.code_stamp(str(pkg)) >= os.stat(pkg / "a.py").st_mtime


# -- real hosts beside a stand-in server ---------------------------------------------------------------

def _project(root: Path) -> Path:
    (root / "tables").mkdir(parents=True)
    (root / "tables" / "trips.yaml").write_text((REPO / "tables" / "trips.yaml").read_text())
    return root


class Hosted:
    """A project with a host beside a stand-in for its server (a process whose command line names
    the server's module, without a JVM)."""

    def __init__(self, root: Path) -> None:
        self.root = _project(root)
        self.server = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(900)", "lakehouse.spark.server"])
        self.rec = hosting.start(self.root, self.server.pid)
        self.pid = int(self.rec["pid"])
        self.folder = self.root / ".lakehouse"

    def log(self) -> str:
        return (self.folder / "host.log").read_text()

    def ran(self) -> int:
        """How many commands the host has run to their end."""
        return self.log().count(") ended with status")

    def lakehouse(self, *args: str, env: dict[str, str] | None = None, **kw) -> subprocess.CompletedProcess:
        child = {k: v for k, v in os.environ.items() if not k.startswith("LAKEHOUSE_")}
        child.update(env or {})
        return subprocess.run([sys.executable, "-m", "lakehouse.cli", "--project", str(self.root), *args], env=child,
                              capture_output=True, text=True, timeout=120, **kw)

    def popen(self, *args: str, env: dict[str, str] | None = None, **kw) -> subprocess.Popen:
        """The command as a process of its own, in a process group of its own (as a shell's job: a
        group whose parent is outside it is not orphaned, so Ctrl-Z can stop it)."""
        child = {k: v for k, v in os.environ.items() if not k.startswith("LAKEHOUSE_")}
        child.update(env or {})
        return subprocess.Popen([sys.executable, "-m", "lakehouse.cli", "--project", str(self.root), *args], env=child,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, process_group=0, **kw)

    def hand_over(self, *args: str, env: dict[str, str] | None = None) -> socket.socket:
        """A command's request as a command's process sends it (streams: /dev/null), nothing read back."""
        conn = host.connect(self.folder / "host.sock")
        body = json.dumps({"argv": ["--project", str(self.root), *args], "cwd": str(self.root),
                           "env": {**os.environ, **(env or {})}, "streams": [None, None, None]}).encode()
        null = os.open(os.devnull, os.O_RDWR)
        try:
            socket.send_fds(conn, [struct.pack("!I", len(body))], [null, null, null])
        finally:
            os.close(null)
        conn.sendall(body)
        return conn

    def children(self) -> list[int]:
        out = []
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    if int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1]) == self.pid:
                        out.append(int(entry.name))
                except (OSError, IndexError, ValueError):
                    continue
        return out

    def close(self) -> None:
        self.server.kill()
        self.server.wait()
        hosting.stop(self.root)


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    h = Hosted(tmp_path_factory.mktemp("hosted") / "proj")
    yield h
    h.close()


@pytest.fixture
def own(tmp_path):
    h = Hosted(tmp_path / "proj")
    yield h
    h.close()


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return "gone"


def test_a_hosted_command_answers_as_one_in_its_own_process_and_ran_in_the_host(shared):
    assert hosting.status(shared.root) == f"running (pid {shared.pid})" and host.unusable(shared.rec) is None
    for name in ("host.json", "host.sock"):
        assert (os.stat(shared.folder / name).st_mode & 0o777) == 0o600
    for args in (("tables", "--format", "json"), ("tables", "--format", "csv"), ("no-such-command",),
                 ("tables", "--format", "yaml"), ("stream", "trips")):
        before = shared.ran()
        hosted, alone = shared.lakehouse(*args), shared.lakehouse(*args, env={"LAKEHOUSE_HOST": "off"})
        assert (hosted.returncode, hosted.stdout, hosted.stderr) == (alone.returncode, alone.stdout, alone.stderr), args
        assert shared.ran() == before + 1, args  # it ran there (and the one with the host off did not)


def test_a_signal_right_after_the_fork_is_the_commands_not_the_hosts(shared, tmp_path):
    """The host's own SIGTERM and SIGINT handlers (stop) must never catch a command's signal; a
    Ctrl-C before the command began ends it by SIGINT, as it ends a process. (The command pauses
    as it starts, so it cannot be done before the signal lands.)"""
    for i in range(20):
        signum = (signal.SIGTERM, signal.SIGINT)[i % 2]
        with shared.hand_over("tables", env={"LAKEHOUSE_PAUSE_AT": f"hosted_start:30:{tmp_path / str(i)}"}) as conn:
            replies = conn.makefile("rb")
            pid = json.loads(replies.readline())["pid"]
            host.signal_child(pid, signum)  # as a caller relays its signal the moment it knows the pid
            assert json.loads(replies.readline()) == {"status": -signum}, i
    assert hosting.running(shared.pid)


def test_a_caller_gone_right_after_handing_over_takes_the_command_with_it(shared):
    before = shared.log().count("its caller hung up: killed")
    for _ in range(10):
        shared.hand_over("tables").close()  # gone before the host even forked
    wait_until(lambda: shared.log().count("its caller hung up: killed") == before + 10)
    killed = [ln for ln in shared.log().splitlines() if "its caller hung up" in ln][-10:]
    # mostly killed by the host; on a busy machine a quick command may end first, on its own or
    # on its write to the gone caller (seen once in a full run): none outlives its caller
    assert sum(f"status {-signal.SIGKILL} " in ln for ln in killed) >= 5, killed
    assert shared.children() == []


def test_requests_that_never_arrive_or_are_not_requests_block_nothing(shared):
    silent = host.connect(shared.folder / "host.sock")  # says nothing at all
    try:
        for junk in (b"", b"\x00\x00", b"\xff\xff\xff\xff" + b"x" * 100, b"\x00\x00\x00\x05[1,2"):
            with host.connect(shared.folder / "host.sock") as conn:  # no descriptors, a bad length or body
                conn.sendall(junk)
                conn.shutdown(socket.SHUT_WR)
                conn.settimeout(30)
                try:  # refused (or hung up on), never served
                    reply = conn.makefile("rb").read()
                    assert reply == b"" or list(json.loads(reply)) == ["refused"], reply
                except ConnectionResetError:  # hung up on with bytes unread
                    pass
        t0 = time.monotonic()
        p = shared.lakehouse("tables", "--format", "json")
        assert p.returncode == 0 and time.monotonic() - t0 < 8, p.stderr  # not behind the silent one (10 s)
    finally:
        silent.close()
    assert "a request could not be read" in shared.log()


def test_the_callers_umask_priority_and_limits_are_the_commands(shared, tmp_path):
    marker = tmp_path / "paused"
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)

    def caller() -> None:
        os.nice(3)
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(soft, 200), hard))

    proc = shared.popen("tables", env={"LAKEHOUSE_PAUSE_AT": f"hosted_start:3:{marker}"}, umask=0o077,
                        preexec_fn=caller)
    try:
        wait_until(marker.exists)
        [child] = shared.children()
        status = Path(f"/proc/{child}/status").read_text()
        assert "Umask:\t0077" in status
        assert int(Path(f"/proc/{child}/stat").read_text().rsplit(")", 1)[1].split()[16]) == os.nice(0) + 3
        limits = Path(f"/proc/{child}/limits").read_text()
        assert [ln.split()[3] for ln in limits.splitlines() if ln.startswith("Max open files")] == [str(min(soft, 200))]
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
    finally:
        proc.kill()


def test_ctrl_z_stops_the_command_and_fg_continues_it(shared, tmp_path):
    marker = tmp_path / "paused"
    proc = shared.popen("tables", "--format", "json", env={"LAKEHOUSE_PAUSE_AT": f"hosted_start:4:{marker}"})
    try:
        wait_until(marker.exists)
        [child] = shared.children()
        proc.send_signal(signal.SIGTSTP)
        wait_until(lambda: _state(child) == "T" and _state(proc.pid) == "T", 10)
        time.sleep(4.5)  # past the pause: a command that was not stopped would be done by now
        assert _state(child) == "T" and proc.poll() is None
        proc.send_signal(signal.SIGCONT)
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0 and json.loads(out), err
    finally:
        proc.kill()


def test_the_callers_python_settings_and_a_host_it_cannot_trust_are_passed_over(shared, tmp_path):
    p = shared.lakehouse("tables", "--format", "json", env={"PYTHONWARNINGS": "ignore::DeprecationWarning"})
    notes = [ln for ln in p.stderr.splitlines() if ln.startswith("note: not using the command host")]
    assert p.returncode == 0 and len(notes) == 1 and "it started with PYTHONWARNINGS" in notes[0], p.stderr
    # a folder of another project naming this host's pid, with a socket that is not the host's
    fake = _project(tmp_path / "fake")
    folder = fake / ".lakehouse"
    folder.mkdir(mode=0o700)
    (folder / "host.json").write_text(json.dumps(shared.rec))
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    with host.address(folder / "host.sock") as where:
        listener.bind(where)
    listener.listen(1)
    try:
        child = {k: v for k, v in os.environ.items() if not k.startswith("LAKEHOUSE_")}
        run = [sys.executable, "-m", "lakehouse.cli", "--project", str(fake), "tables", "--format", "json"]
        p = subprocess.run(run, env=child, capture_output=True, text=True, timeout=120)
        assert p.returncode == 0 and "its socket is not the recorded host's" in p.stderr, p.stderr
        os.chmod(folder, 0o755)
        p = subprocess.run(run, env=child, capture_output=True, text=True, timeout=120)
        assert p.returncode == 0 and "is not the user's alone" in p.stderr, p.stderr
    finally:
        listener.close()


def test_a_killed_host_takes_its_running_commands_with_it_and_is_noticed(own, tmp_path):
    marker = tmp_path / "paused"
    proc = own.popen("tables", env={"LAKEHOUSE_PAUSE_AT": f"hosted_start:30:{marker}"})
    try:
        wait_until(marker.exists)
        [child] = own.children()
        os.kill(own.pid, signal.SIGKILL)
        out, err = proc.communicate(timeout=30)
        assert proc.returncode == 1 and "the command host ended while it ran the command" in err, err
        wait_until(lambda: not Path(f"/proc/{child}").exists() or _state(child) == "Z", 10)  # killed with its host
    finally:
        proc.kill()
    p = own.lakehouse("tables", "--format", "json")
    notes = [ln for ln in p.stderr.splitlines() if "command host" in ln]
    assert p.returncode == 0 and len(notes) == 1 and f"its process {own.pid} is gone" in notes[0], p.stderr
    assert hosting.status(own.root).startswith("not used: its process")


def test_stop_and_a_server_gone_end_the_host_and_its_commands(own, tmp_path):
    marker = tmp_path / "paused"
    proc = own.popen("tables", env={"LAKEHOUSE_PAUSE_AT": f"hosted_start:30:{marker}"})
    try:
        wait_until(marker.exists)
        assert hosting.stop(own.root) == own.rec and not hosting.running(own.pid)
        out, err = proc.communicate(timeout=30)  # the command got SIGTERM, as the host stopped
        assert proc.returncode == -signal.SIGTERM, err
    finally:
        proc.kill()
    assert hosting.stop(own.root) is None and hosting.status(own.root) == "not running"
    assert "command host" not in own.lakehouse("tables").stderr
    rec = hosting.start(own.root, own.server.pid)
    own.server.kill()  # the server gone: the host stops within a second or two, and cleans up
    own.server.wait()
    wait_until(lambda: not hosting.running(rec["pid"]), 30)
    assert not (own.folder / "host.json").exists() and not (own.folder / "host.sock").exists()
    assert "is gone" in own.log()


def test_ctrl_z_before_the_child_is_known_stops_both_once_it_is(shared, tmp_path):
    """The caller gets SIGTSTP while its child is still starting (it may not have read the child's
    pid yet): neither goes on until continued."""
    marker = tmp_path / "paused"
    proc = shared.popen("tables", "--format", "json", env={"LAKEHOUSE_PAUSE_AT": f"hosted_start:3:{marker}"})
    try:
        wait_until(lambda: len(shared.children()) == 1 or proc.poll() is not None)
        proc.send_signal(signal.SIGTSTP)
        [child] = shared.children()
        wait_until(lambda: _state(child) == "T" and _state(proc.pid) == "T", 10)
        time.sleep(3.5)  # past the pause
        assert _state(child) == "T"
        proc.send_signal(signal.SIGCONT)
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0 and json.loads(out), err
    finally:
        proc.kill()


def test_a_command_with_a_closed_standard_stream_runs_as_its_own_process(shared):
    """A closed stdout would make the connection to the host take its number: such a command is
    not hosted, and answers as it would without a host."""
    before = shared.ran()
    for redirect in ("1>&-", "2>&-", "0<&-"):
        sh = f"{sys.executable} -m lakehouse.cli --project '{shared.root}' tables --format json {redirect}; echo rc=$?"
        hosted = subprocess.run(["sh", "-c", sh], capture_output=True, text=True, timeout=120)
        alone = subprocess.run(["sh", "-c", f"LAKEHOUSE_HOST=off {sh}"], capture_output=True, text=True, timeout=120)
        assert (hosted.stdout, hosted.stderr) == (alone.stdout, alone.stderr), redirect
    assert shared.ran() == before
