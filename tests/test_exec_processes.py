"""No process a run started outlives it: an exec gateway's child is ended with its whole process
group (what the child started itself too) on a step timeout, when it dies, at the end of the
scenario, when it is dropped, and when sessiongate is interrupted; a gateway run inside a gateway
child joins that child's group. And a child that printed something that is not protocol is told
so, whichever way the race between its exit and the parent's write went.

Each child records its pid (and its own children's) in a file, so the test can look for them after.
"""

from __future__ import annotations

import gc
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conformance.harness.runner import RunResult, run_scenario
from conformance.harness.suite import catalog_paths
from conformance.transport import child as child_process
from conformance.transport import exec_gateway
from conformance.transport.exec_gateway import ExecGateway
from conformance.transport.isolation import isolated
from sim.loader import load_file

ROOT = Path(__file__).resolve().parent.parent
FIRST = catalog_paths()[0]  # 01-idle-expiry…: opens with a message at line 12
FIRST_MESSAGE = "message (line 12)"

CHILD = '''
import json, os, subprocess, sys, time
PIDS = sys.argv[1]
def record(pid):
    with open(PIDS, "a") as f:
        f.write(f"{pid}\\n")
def send(message):
    sys.stdout.write(json.dumps(message) + "\\n")
    sys.stdout.flush()
def helper(**pipes):
    """A process of the child's own, as a real gateway might start (a server, a worker)."""
    record(subprocess.Popen(["sleep", "77"], stdin=subprocess.DEVNULL, **pipes).pid)
quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
record(os.getpid())
VALUES = {"hello": {"version": 1}, "durable_state": {"sessions": [], "routing": []}, "resources": {"cached": [], "running": 0},
          "profile": {"finalization": "lazy", "latency": 0, "crash_durable": False, "sweep_interval": 0}}
for line in sys.stdin:
    op = json.loads(line)["op"]
    if op == "start":
%(on_start)s
    if op == "deliver_message":
%(on_message)s
    send({"done": True, "value": VALUES.get(op)})
'''

HANG = "while True: time.sleep(0.05)"


def child(tmp_path: Path, on_start: str = "pass", on_message: str = "pass") -> tuple[list[str], Path]:
    """argv of a protocol child that runs `on_start`/`on_message` at those ops, and its pid file."""
    indent = "        "
    script = tmp_path / "child.py"
    script.write_text(CHILD % {"on_start": indent + on_start.replace("\n", "\n" + indent),
                               "on_message": indent + on_message.replace("\n", "\n" + indent)}, encoding="utf-8")
    pids = tmp_path / "pids"
    return [sys.executable, str(script), str(pids)], pids


def recorded(pids: Path) -> list[int]:
    return [int(line) for line in pids.read_text().split()] if pids.exists() else []


def alive(pid: int) -> bool:
    """Running, not a zombie: a killed grandchild is reparented to pid 1, which may reap it late."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    except OSError:  # no /proc: ask the kernel
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def still_alive(pids: list[int], within: float = 3.0) -> list[int]:
    """The pids still running after `within` seconds (SIGKILL takes effect at once, but asynchronously)."""
    deadline = time.monotonic() + within
    while (left := [pid for pid in pids if alive(pid)]) and time.monotonic() < deadline:
        time.sleep(0.02)
    return left


@pytest.fixture
def reaper():
    """Pids to end after the test whatever happened, so a failing test leaves nothing behind."""
    pids: list[int] = []
    yield pids
    for pid in pids:
        if alive(pid):
            os.kill(pid, signal.SIGKILL)


def run(gateway: object) -> RunResult:
    return run_scenario(load_file(FIRST), gateway, "child")  # type: ignore[arg-type]


# -- every way a child ends takes what it started --------------------------------------------


def test_a_step_timeout_kills_what_the_child_started(tmp_path: Path, reaper: list[int]) -> None:
    argv, pids = child(tmp_path, on_message=f"helper()\n{HANG}")  # the helper shares the child's stdout
    result = run(ExecGateway(argv, step_timeout=1.0))
    reaper += recorded(pids)
    assert result.failure is not None and (result.failure.kind, result.failure.event) == ("timeout", FIRST_MESSAGE)
    assert len(recorded(pids)) == 2
    assert still_alive(recorded(pids)) == []


def test_a_hello_timeout_kills_what_a_shell_started(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, reaper: list[int]) -> None:
    """The audit's case, `exec:sh -c 'sleep 77; true'`, with a start-up allowance of 1 s instead of 30."""
    monkeypatch.setattr(exec_gateway, "STARTUP_TIMEOUT", 1.0)
    pids = tmp_path / "pids"
    result = run(ExecGateway(["sh", "-c", f'echo $$ > {pids}; sleep 77 & echo $! >> {pids}; wait'], step_timeout=1.0))
    reaper += recorded(pids)
    assert result.failure is not None
    assert (result.failure.kind, result.failure.message) == (
        "timeout", "start-up handshake: no answer to hello within 1s (wall clock); the process was killed")
    assert len(recorded(pids)) == 2
    assert still_alive(recorded(pids)) == []


def test_a_child_that_exits_mid_step_takes_what_it_started(tmp_path: Path, reaper: list[int]) -> None:
    argv, pids = child(tmp_path, on_message='helper(**quiet)\nsys.stderr.write("giving up\\n")\nsys.exit(3)')
    result = run(ExecGateway(argv, step_timeout=1.0))
    reaper += recorded(pids)
    assert result.failure is not None and result.failure.kind == "error"
    assert result.failure.message == "gateway process exited with status 3: giving up"
    assert still_alive(recorded(pids)) == []


def test_the_end_of_a_scenario_kills_what_the_child_started(tmp_path: Path, reaper: list[int]) -> None:
    argv, pids = child(tmp_path, on_start="helper(**quiet)")
    result = run(ExecGateway(argv, step_timeout=5.0))
    reaper += recorded(pids)
    assert result.failure is None, result.failure
    assert len(recorded(pids)) == 2
    assert still_alive(recorded(pids)) == []


def test_a_gateway_dropped_without_close_takes_its_processes(tmp_path: Path, reaper: list[int]) -> None:
    argv, pids = child(tmp_path, on_start="helper(**quiet)")
    gateway = ExecGateway(argv, step_timeout=5.0)
    gateway.profile(load_file(FIRST).config)
    reaper += recorded(pids)
    assert still_alive(recorded(pids), within=0) != []
    del gateway
    gc.collect()
    assert still_alive(recorded(pids)) == []


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)], ids=["SIGTERM", "SIGINT"])
def test_an_interrupted_run_kills_what_the_child_started(tmp_path: Path, reaper: list[int], signum: int, code: int) -> None:
    argv, pids = child(tmp_path, on_message=f"helper(**quiet)\n{HANG}")
    cli = subprocess.Popen([sys.executable, "-m", "conformance.cli", "run", str(FIRST), "--gateway", f"exec:{shlex.join(argv)}",
                            "--step-timeout", "60"], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # as from a terminal
    try:
        deadline = time.monotonic() + 30
        while len(recorded(pids)) < 2 and time.monotonic() < deadline and cli.poll() is None:
            time.sleep(0.02)
        reaper += recorded(pids)
        assert len(recorded(pids)) == 2, cli.stderr.read() if cli.poll() is not None else "no helper started"
        cli.send_signal(signum)
        out, err = cli.communicate(timeout=30)
    finally:
        cli.kill()
        cli.wait()
    assert cli.returncode == code, err
    assert out.splitlines()[-1] == "0 scenarios, 0 passed, 0 failed (interrupted)"
    assert still_alive(recorded(pids)) == []


# -- a gateway run inside a gateway child ----------------------------------------------------


def test_an_exec_gateway_inside_a_gateway_child_dies_with_it(tmp_path: Path, reaper: list[int]) -> None:
    """`exec_server exec:CMD`: the inner child is in the outer child's group, which the parent kills."""
    argv, pids = child(tmp_path, on_message=HANG)
    outer = ExecGateway([sys.executable, "-m", "conformance.transport.exec_server", f"exec:{shlex.join(argv)}"], step_timeout=1.5)
    result = run(outer)
    reaper += recorded(pids)
    assert result.failure is not None and result.failure.kind == "timeout"
    assert result.failure.message == "no answer to deliver_message within 1.5s (wall clock); the process was killed"
    assert len(recorded(pids)) == 1  # the inner child
    assert still_alive(recorded(pids)) == []


def marked(token: str) -> list[int]:
    """Live processes whose environment holds `token`."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                environ = (entry / "environ").read_bytes()
            except OSError:
                continue
            if token.encode() in environ.split(b"\0") and alive(int(entry.name)):
                found.append(int(entry.name))
    return found


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs /proc")
def test_selftest_hang_isolated_honours_the_step_timeout_and_leaves_no_process(reaper: list[int]) -> None:
    """`selftest:hang` isolates itself with a 2 s timeout; under `--isolate` it used to be a child in a
    child: the inner 2 s cut a longer `--step-timeout` short (an `error`), and the inner child spun on."""
    token = f"SESSIONGATE_TEST_MARK={os.getpid()}-{time.monotonic_ns()}"
    key, value = token.split("=")
    result = run(isolated("selftest:hang", step_timeout=2.5, env={key: value}))
    reaper += marked(token)
    assert result.failure is not None and result.failure.kind == "timeout", result.failure
    assert result.failure.message == "no answer to deliver_message within 2.5s (wall clock); the process was killed"
    deadline = time.monotonic() + 3
    while marked(token) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert marked(token) == []


# -- what a child printed that is not protocol -----------------------------------------------

PRINTED = {
    "garbage": ("echo garbage", "start-up handshake: protocol error: not a JSON line in answer to hello: \"garbage\""),
    "not-an-object": ("echo 42", "start-up handshake: protocol error: expected a JSON object in answer to hello: \"42\""),
    "no-call-done-fail": ("echo '{\"ok\": 1}'",
                          "start-up handshake: protocol error: unexpected line in answer to hello: its keys [\"ok\"], "
                          "none of call, done, fail"),
    "long": ("printf 'x%.0s' $(seq 500); echo",
             f"start-up handshake: protocol error: not a JSON line in answer to hello: \"{'x' * 120}\"…"),
    "unfinished": ("printf garbage",
                   "start-up handshake: gateway process exited with status 0 (its stdout ended in an unfinished line: \"garbage\")"),
    "nothing": ("true", "start-up handshake: gateway process exited with status 0"),
}


@pytest.fixture
def parent_writes_late(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every write to the child waits until it has exited: the race, lost on purpose."""
    original = ExecGateway._send

    def late_send(self: ExecGateway, line: dict[str, object]) -> None:
        assert self.proc is not None
        self.proc.wait()
        original(self, line)

    monkeypatch.setattr(ExecGateway, "_send", late_send)


@pytest.mark.usefixtures("parent_writes_late")
@pytest.mark.parametrize("name", PRINTED)
def test_what_a_child_printed_is_named_when_it_exits_before_the_parent_writes(name: str) -> None:
    """The race `exec:echo garbage` used to lose at random: the child is gone, the write fails."""
    command, message = PRINTED[name]
    result = run(ExecGateway(["sh", "-c", command], step_timeout=1.0))
    assert result.failure is not None
    assert (result.failure.kind, result.failure.event, result.failure.message) == ("error", "profile", message)


def test_exec_echo_garbage_names_the_garbage_every_time() -> None:
    messages = {run(exec_gateway.exec_gateway("echo garbage")).failure.message for _ in range(12)}  # type: ignore[union-attr]
    assert messages == {'start-up handshake: protocol error: not a JSON line in answer to hello: "garbage"'}


@pytest.mark.usefixtures("parent_writes_late")
def test_a_valid_line_left_unread_is_not_blamed() -> None:
    """A child that answered `hello` before it was asked, and exited: it exited, that is all."""
    result = run(ExecGateway(["sh", "-c", "echo '{\"done\": true, \"value\": {\"version\": 1}}'"], step_timeout=1.0))
    assert result.failure is not None and result.failure.message == "start-up handshake: gateway process exited with status 0"


def test_a_chatty_childs_stderr_is_bounded_and_its_tail_quoted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                               reaper: list[int]) -> None:
    """8 MiB of stderr in one step (300 MB was seen) leaves at most STDERR_KEEP on disk; the error
    still quotes the child's last line."""
    monkeypatch.setattr(child_process, "STDERR_POLL", 0.05)
    chatter = 'for i in range(8192):\n    sys.stderr.write("x" * 1023 + "\\n")\nsys.stderr.flush()\ntime.sleep(0.5)\n'
    argv, pids = child(tmp_path, on_message=chatter + 'sys.stderr.write("ValueError: the last word\\n")\nsys.exit(3)')
    gateway = ExecGateway(argv, step_timeout=10.0)
    sizes: list[tuple[int, int]] = []  # the file's size before and after each trim
    trim = gateway._trim_stderr

    def measured() -> None:
        before = os.fstat(gateway._stderr.fileno()).st_size
        trim()
        sizes.append((before, os.fstat(gateway._stderr.fileno()).st_size))

    monkeypatch.setattr(gateway, "_trim_stderr", measured)
    result = run(gateway)
    reaper += recorded(pids)
    assert result.failure is not None
    assert result.failure.message == "gateway process exited with status 3: ValueError: the last word"
    assert max(before for before, _ in sizes) > child_process.STDERR_KEEP  # the bound was needed, and held
    assert max(after for _, after in sizes) <= child_process.STDERR_KEEP
    assert os.fstat(gateway._stderr.fileno()).st_size <= child_process.STDERR_KEEP


def test_a_gateway_kept_to_the_end_closes_its_stderr_file() -> None:
    """OpenClaw's children are kept for the next scenario (`reuse`), in a module's dict, to the
    end of the process: their stderr files were left to the file's own finalizer, and every
    `pytest -n 2` ended with `sys:1: ResourceWarning: unclosed file <_io.BufferedRandom …>`."""
    code = "from conformance.transport.exec_gateway import ExecGateway; kept = ExecGateway(['true'])"
    done = subprocess.run([sys.executable, "-X", "dev", "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and "ResourceWarning" not in done.stderr, done.stderr
    dropped = child_process.ChildProcess(1.0)
    stderr = dropped._stderr
    del dropped
    gc.collect()
    assert stderr.closed
