"""A misbehaving gateway gets a verdict, never takes sessiongate down, and the run goes on.

The self-test gateways (reference_impl/selftest.py) and throwaway child processes that break the
wire protocol (docs/protocol.md) in each way a real one might. docs/reliability.md tabulates these.
"""

from __future__ import annotations

import _thread
import json
import os
import signal
import sys
import threading
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conformance.cli import main
from conformance.harness.registry import resolve
from conformance.harness.runner import RunResult, run_scenario
from conformance.harness.suite import catalog_paths, run_all
from conformance.transport.exec_gateway import ExecGateway
from reference_impl import ReferenceGateway
from sim.loader import load_file

CATALOG = catalog_paths()
FIRST, SECOND = CATALOG[0], CATALOG[16]  # 01-idle-expiry…, 17-policy-idle: both open with a message at line 12/13
FIRST_MESSAGE = "message (line 12)"


def run_two(gateway: str) -> list[RunResult]:
    return list(run_all([load_file(FIRST), load_file(SECOND)], resolve(gateway), gateway))


@pytest.fixture
def spawned(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The process ids of every child started."""
    pids: list[int] = []
    original = ExecGateway._spawn

    def spawn(self: ExecGateway) -> None:
        original(self)
        assert self.proc is not None
        pids.append(self.proc.pid)

    monkeypatch.setattr(ExecGateway, "_spawn", spawn)
    return pids


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


# -- the self-test gateways ------------------------------------------------------------------


def test_raise_is_an_error_naming_step_and_event_and_the_run_goes_on(capsys: pytest.CaptureFixture[str]) -> None:
    first, second = run_two("selftest:raise")
    for result in (first, second):
        assert result.failure is not None and result.failure.kind == "error"
        assert result.failure.step == 1
        assert result.failure.message == "RuntimeError: selftest: this gateway raises on every message"
        assert "selftest.py:" in " ".join(result.failure.traceback)
        assert {v.status for v in result.verdicts.values()} == {"error"}
    assert first.failure.event == FIRST_MESSAGE
    assert main(["run", str(FIRST), str(SECOND), "--gateway", "selftest:raise"]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[:3] == [
        f"error {FIRST.stem}",
        f"      gateway error at step 1 ({FIRST_MESSAGE}): RuntimeError: selftest: this gateway raises on every message",
        out[2],
    ]
    assert out[2].startswith("      at ") and "selftest.py:" in out[2] and "in deliver_message" in out[2]
    assert out[-1] == "2 scenarios, 0 passed, 2 failed (2 gateway errors)"


def test_raise_in_a_child_process_carries_the_childs_traceback() -> None:
    result = run_scenario(load_file(FIRST), resolve("exec")(f"{sys.executable} -m conformance.transport.exec_server selftest:raise"))
    assert result.failure is not None and result.failure.kind == "error"
    assert (result.failure.step, result.failure.event) == (1, FIRST_MESSAGE)
    assert any("in deliver_message" in line for line in result.failure.traceback)


def test_hang_is_a_timeout_the_child_is_killed_and_the_run_goes_on(spawned: list[int]) -> None:
    first, second = run_two("selftest:hang")
    for result in (first, second):
        assert result.failure is not None and result.failure.kind == "timeout"
        assert result.failure.step == 1
        assert result.failure.message == "no answer to deliver_message within 2s (wall clock); the process was killed"
        assert {v.status for v in result.verdicts.values()} == {"timeout"}
    assert len(spawned) == 2 and all(gone(pid) for pid in spawned)


def test_runaway_timers_hit_the_event_budget() -> None:
    result = run_scenario(load_file(FIRST), resolve("selftest:runaway")(), "selftest:runaway", budget=20_000)
    assert result.failure is not None and result.failure.kind == "timeout"
    assert "event budget of 20000 exceeded" in result.failure.message
    assert result.failure.message.endswith("the gateway schedules work without end")
    assert {v.status for v in result.verdicts.values()} == {"timeout"}


def test_leaky_threads_fail_i7() -> None:
    result = run_scenario(load_file(FIRST), resolve("selftest:leaky-threads")(), "selftest:leaky-threads")
    assert result.failure is None
    assert result.verdicts["I7"].status == "fail"
    assert "1 thread the gateway started was still running" in result.verdicts["I7"].summary
    assert all(v.status == "pass" for c, v in result.verdicts.items() if c != "I7")


class LeavesARawThread(ReferenceGateway):
    """Starts a thread with `_thread` (as C code might), which `threading` does not list; it
    ends it at the final stop only when `ends` is set."""

    def __init__(self, ends: bool) -> None:
        super().__init__()
        self.ends, self.raw_done = ends, threading.Event()

    def start(self, config: Any, harness: Any) -> None:
        super().start(config, harness)
        _thread.start_new_thread(self.raw_done.wait, ())

    def sigterm(self) -> None:
        super().sigterm()
        if self.ends:
            self.raw_done.set()


@pytest.mark.parametrize("ends", [False, True], ids=["left", "ended"])
def test_a_thread_threading_does_not_list_is_counted_too(ends: bool) -> None:
    gateway = LeavesARawThread(ends)
    try:
        result = run_scenario(load_file(FIRST), gateway, "raw-thread")
    finally:
        gateway.raw_done.set()
    assert result.failure is None
    if ends:
        assert {v.status for v in result.verdicts.values()} == {"pass"}
    else:
        assert result.verdicts["I7"].summary.endswith("1 thread the gateway started was still running")


class Wanders(ReferenceGateway):
    """Does what a daemon does at start-up: changes to `/` and installs its own signal handlers."""

    def start(self, config: Any, harness: Any) -> None:
        super().start(config, harness)
        os.chdir("/")
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
        signal.signal(signal.SIGINT, lambda *_: None)


def test_a_gateway_that_changes_directory_and_signals_leaves_them_as_they_were(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Found 2026-12-05: the report of a run whose gateway changed to `/` was written to /out."""
    monkeypatch.chdir(tmp_path)
    module = types.ModuleType("sg_wanders")
    module.make = Wanders  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "sg_wanders", module)
    handlers = {signum: signal.getsignal(signum) for signum in (signal.SIGTERM, signal.SIGPIPE, signal.SIGINT)}
    assert main(["run", "--gateway", "sg_wanders:make", "-q", "--report", "out", "--no-failure-db", str(FIRST)]) == 0
    assert Path.cwd() == tmp_path and (tmp_path / "out" / "junit.xml").is_file()
    assert {signum: signal.getsignal(signum) for signum in handlers} == handlers
    result = run_scenario(load_file(FIRST), Wanders(), "wanders")
    assert result.failure is None and Path.cwd() == tmp_path
    assert {signum: signal.getsignal(signum) for signum in handlers} == handlers


class LowersTheRecursionLimit(ReferenceGateway):
    def deliver_message(self, *args: Any) -> None:
        sys.setrecursionlimit(60)
        super().deliver_message(*args)


class BlocksAlarms(ReferenceGateway):
    def start(self, *args: Any) -> None:
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})
        signal.signal(signal.SIGALRM, signal.SIG_IGN)
        super().start(*args)


def test_a_gateway_that_lowers_the_recursion_limit_or_blocks_alarms_leaves_them_as_they_were() -> None:
    """Found by the audit of hostile gateways (2026-12-05): a limit of 60 set in a call made the
    checks fail with a bare RecursionError and lost the report; SIGALRM blocked by one scenario
    left the next one's hang with no step timeout, and the run hung."""
    limit, mask, alarm = sys.getrecursionlimit(), signal.pthread_sigmask(signal.SIG_BLOCK, ()), signal.getsignal(signal.SIGALRM)
    lowered = run_scenario(load_file(FIRST), LowersTheRecursionLimit(), "lowers")
    # its own next call may overflow (how deep the stack is depends on the runner: pytest-xdist
    # adds frames): then that is its error at the step; the checks judge either way
    assert lowered.failure is None or "RecursionError" in lowered.failure.message
    assert len(lowered.verdicts) == 9 and "checker-error" not in {v.status for v in lowered.verdicts.values()}
    assert sys.getrecursionlimit() == limit
    blocked = run_scenario(load_file(FIRST), BlocksAlarms(), "blocks")
    assert blocked.failure is None
    assert signal.pthread_sigmask(signal.SIG_BLOCK, ()) == mask and signal.getsignal(signal.SIGALRM) == alarm


def test_a_gateway_module_that_exits_at_import_is_a_usage_error(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """It printed a fake summary and `raise SystemExit(0)` at import: the run exited 0, no report."""
    (tmp_path / "sg_exits_at_import.py").write_text("import os\nos.chdir('/')\nraise SystemExit(0)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    assert main(["run", "--gateway", "sg_exits_at_import:make", "--no-failure-db", str(FIRST)]) == 2
    assert "cannot import 'sg_exits_at_import': SystemExit: 0" in capsys.readouterr().err
    assert Path.cwd() == tmp_path


EXITS_AT_EXIT = """
import atexit, os
from reference_impl.variants import make as variant

atexit.register(lambda: os._exit(0))


def make():
    return variant("never-replies")
"""


@pytest.mark.parametrize("how", ["conformance.cli", "sessiongate"])
def test_a_gateway_exit_handler_cannot_choose_the_exit_status(tmp_path: Path, how: str) -> None:
    """Found by the audit of hostile gateways (2026-12-05): a module that registered
    `atexit.register(lambda: os._exit(0))` made a failing run exit 0: a green CI."""
    import subprocess

    (tmp_path / "sg_exit_handler.py").write_text(EXITS_AT_EXIT, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), *filter(None, [os.environ.get("PYTHONPATH")])])}
    done = subprocess.run([sys.executable, "-m", how, "run", "-q", "--no-failure-db", "--gateway", "sg_exit_handler:make",
                           str(FIRST)], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120, check=False)
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stdout.splitlines()[-1].startswith("1 scenario, 0 passed, 1 failed")
    assert "called os._exit/sys.exit(0): ignored" in done.stderr


FORGES_THE_CHECKS = """
import conformance.checks
from reference_impl.variants import make as variant

conformance.checks.judge = lambda records, *args, **kwargs: {}  # every check passes: nothing to fail


def make():
    return variant("never-replies")
"""


def test_an_isolated_gateway_module_is_imported_in_its_children_only(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """Found by the audit of hostile gateways (2026-12-05): under --isolate the parent imported
    the module too (to fail a bad name early), so one that replaced `conformance.checks.judge`
    at import passed a never-replying gateway: "only the wire protocol reaches the harness"."""
    (tmp_path / "sg_forges_checks.py").write_text(FORGES_THE_CHECKS, encoding="utf-8")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path), *filter(None, [os.environ.get("PYTHONPATH")])]))
    monkeypatch.syspath_prepend(str(tmp_path))
    assert main(["run", "--isolate", "-q", "--no-failure-db", "--gateway", "sg_forges_checks:make", str(FIRST)]) == 1
    assert "sg_forges_checks" not in sys.modules
    assert capsys.readouterr().out.splitlines()[-1].startswith("1 scenario, 0 passed, 1 failed")
    assert main(["run", "--isolate", "--gateway", "sg_forges_checks:nothing", str(FIRST)]) == 2  # still a usage error
    assert "gateway 'sg_forges_checks:nothing': 'sg_forges_checks' has no 'nothing'" in capsys.readouterr().err
    assert "sg_forges_checks" not in sys.modules


def test_a_run_whose_working_directory_is_gone_still_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    gone = tmp_path / "gone"
    gone.mkdir()
    monkeypatch.chdir(gone)
    gone.rmdir()
    result = run_scenario(load_file(FIRST), ReferenceGateway(), "reference")
    assert result.failure is None and {v.status for v in result.verdicts.values()} == {"pass"}


def test_a_gateway_that_swaps_stdout_does_not_take_the_output_with_it() -> None:
    from reference_impl import ReferenceGateway

    class Swapping(ReferenceGateway):
        def start(self, config: object, harness: object) -> None:
            sys.stdout = sys.stderr = open(os.devnull, "w")  # noqa: SIM115 - left open, as a careless gateway would
            super().start(config, harness)  # type: ignore[arg-type]

    stdout, stderr = sys.stdout, sys.stderr
    result = run_scenario(load_file(FIRST), Swapping(), "swapping")
    assert (sys.stdout, sys.stderr) == (stdout, stderr)
    assert result.passed


def test_nondeterminism_is_reported_with_the_first_divergence(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", str(FIRST), "--gateway", "selftest:nondeterministic", "--check-determinism"]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"error {FIRST.stem}"  # printed once, after both runs
    assert out[1].startswith("      gateway error at step 1 (determinism): nondeterministic gateway")
    assert "two runs diverge at record 4: " in out[1] and '"kind":"llm_request"' in out[1]
    assert out[-1] == "1 scenario, 0 passed, 1 failed (1 gateway error)"


def test_a_deterministic_gateway_passes_the_determinism_check(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", str(FIRST), "--check-determinism"]) == 0
    assert capsys.readouterr().out.splitlines() == [f"pass  {FIRST.stem}", "1 scenario, 1 passed, 0 failed"]


# -- children that break the protocol --------------------------------------------------------

CHILD = '''
import json, os, sys, time
def send(message):
    sys.stdout.write(json.dumps(message) + "\\n")
    sys.stdout.flush()
VALUES = {"hello": {"version": 1}, "durable_state": {"sessions": [], "routing": []}, "resources": {"cached": [], "running": 0},
          "profile": {"finalization": "lazy", "latency": 0, "crash_durable": False, "sweep_interval": 0}}
VALUES.update(%(values)s)
for line in sys.stdin:
    op = json.loads(line)["op"]
    if op == "deliver_message":
%(misbehave)s
    send({"done": True, "value": VALUES.get(op)})
'''

# name: (misbehaviour on the first message, changed answers, failure kind, event, message)
MISBEHAVING = {
    "prints-garbage": ('print("hello from a stray print", flush=True)\ncontinue', {}, "error", FIRST_MESSAGE,
                       "protocol error: not a JSON line in answer to deliver_message: \"hello from a stray print\""),
    "prints-a-list": ('print("[1, 2]", flush=True)\ncontinue', {}, "error", FIRST_MESSAGE,
                      "protocol error: expected a JSON object in answer to deliver_message"),
    "answers-nonsense": ('send({"ok": 1})\ncontinue', {}, "error", FIRST_MESSAGE,
                         'protocol error: unexpected line in answer to deliver_message: its keys ["ok"], none of call, done, fail'),
    "exits-mid-step": ('sys.stderr.write("giving up\\n")\nsys.exit(3)', {}, "error", FIRST_MESSAGE,
                       "gateway process exited with status 3: giving up"),
    "closes-stdout-and-lingers": ("os.close(1)\ntime.sleep(60)", {}, "error", FIRST_MESSAGE,
                                  "gateway process closed its stdout without exiting, and was killed"),
    "closes-stdin-and-lingers": ('os.close(0)\nsend({"call": "note", "args": {"what": "x"}})\ntime.sleep(60)', {}, "error",
                                 FIRST_MESSAGE, "gateway process closed its stdin without exiting, and was killed"),
    "hangs": ("while True: pass", {}, "timeout", FIRST_MESSAGE,
              "no answer to deliver_message within 1s (wall clock); the process was killed"),
    "calls-without-end": ('while True:\n    send({"call": "note", "args": {"what": "chatter"}})\n    sys.stdin.readline()', {},
                          "timeout", FIRST_MESSAGE, "no answer to deliver_message within 1s (wall clock); the process was killed"),
    "endless-line": ('sys.stdout.write("x" * (65 << 20))\nsys.stdout.flush()\ntime.sleep(60)', {}, "error", FIRST_MESSAGE,
                     "protocol error: a line longer than 64 MiB in answer to deliver_message"),
    "bad-call": ('send({"call": "llm.request", "args": {"chat": "alice"}})\nprint(sys.stdin.readline(), file=sys.stderr)\n'
                 'send({"fail": {"message": "harness refused llm.request"}})\ncontinue', {}, "error", FIRST_MESSAGE,
                 "harness refused llm.request"),
    "wrong-version": ("pass", {"hello": {"version": 3}}, "error", "profile", "does not speak protocol version 2"),
    "bad-resources": ("pass", {"resources": {"cached": "lots", "running": 0}}, "error", "resources",
                      "protocol error: bad value in answer to resources: cached: expected a sequence of (session, busy) pairs, got 'lots'"),
    "bad-profile": ("pass", {"profile": {"finalization": "eager"}}, "error", "profile",
                    "protocol error: bad value in answer to profile: latency: missing"),
}


def child_script(tmp_path: Path, misbehave: str, values: dict[str, object]) -> Path:
    body = "\n".join("        " + line for line in misbehave.splitlines())
    path = tmp_path / "child.py"
    path.write_text(CHILD % {"misbehave": body, "values": repr(values)}, encoding="utf-8")
    return path


@pytest.mark.parametrize("name", MISBEHAVING)
def test_a_child_that_breaks_the_protocol_gets_a_verdict(tmp_path: Path, spawned: list[int], name: str) -> None:
    misbehave, values, kind, event, message = MISBEHAVING[name]
    script = child_script(tmp_path, misbehave, values)
    timeout = 10.0 if name == "endless-line" else 1.0  # 65 MiB through a pipe can take a loaded machine over 1 s
    result = run_scenario(load_file(FIRST), ExecGateway([sys.executable, str(script)], step_timeout=timeout), name)
    assert result.failure is not None, result.log_text()
    assert (result.failure.kind, result.failure.event) == (kind, event)
    assert message in result.failure.message
    assert {v.status for v in result.verdicts.values()} == {kind}
    assert all(gone(pid) for pid in spawned)


def test_a_command_that_cannot_start_is_an_error() -> None:
    result = run_scenario(load_file(FIRST), ExecGateway(["/nonexistent/gateway"]), "missing")
    assert result.failure is not None and result.failure.kind == "error"
    assert result.failure.message == "cannot start /nonexistent/gateway: No such file or directory"


def test_memory_cap_turns_a_runaway_allocation_into_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    script = child_script(tmp_path, "hoard = []\nwhile True: hoard.append(bytearray(1 << 20))", {})
    code = main(["run", str(FIRST), str(SECOND), "--gateway", f"exec:{sys.executable} {script}", "--memory-mb", "200"])
    out = capsys.readouterr().out.splitlines()
    assert code == 1
    assert out[0] == f"error {FIRST.stem}"
    assert out[1].startswith(f"      gateway error at step 1 ({FIRST_MESSAGE}): gateway process exited with status 1")
    assert "MemoryError" in out[1]
    assert out[-1] == "2 scenarios, 0 passed, 2 failed (2 gateway errors)"


def test_memory_cap_on_an_isolated_python_gateway(tmp_path: Path) -> None:
    (tmp_path / "hoarder.py").write_text(
        "from reference_impl.gateway import ReferenceGateway\n\n"
        "class Hoarder(ReferenceGateway):\n"
        "    def deliver_message(self, message):\n"
        "        hoard = []\n"
        "        while True:\n"
        "            hoard.append(bytearray(1 << 20))\n",
        encoding="utf-8",
    )
    from conformance.transport.isolation import isolated

    gateway = isolated("hoarder:Hoarder", memory_mb=200, env={"PYTHONPATH": str(tmp_path)})
    result = run_scenario(load_file(FIRST), gateway, "hoarder")
    assert result.failure is not None and result.failure.kind == "error"
    assert (result.failure.step, result.failure.event) == (1, FIRST_MESSAGE)
    assert "MemoryError" in result.failure.message


def test_the_hermes_home_is_emptied_while_a_late_writer_finishes(tmp_path: Path) -> None:
    """A writer still adding files as the tree is removed (seen once on hermes-agent 0.13.0)."""
    import threading
    from contextlib import suppress

    from conformance.adapters.hermes.home import remove_tree

    tree = tmp_path / "sessions"
    tree.mkdir()
    for n in range(200):
        (tree / f"old-{n}.json").write_text("{}")
    stop = threading.Event()

    def write() -> None:
        n = 0
        while not stop.is_set():
            with suppress(FileExistsError, FileNotFoundError):  # the tree went between two calls
                tree.mkdir(exist_ok=True)
                (tree / f"late-{n}.json").write_text("{}")
            n += 1
            stop.wait(0.001)

    writer = threading.Thread(target=write)
    writer.start()
    try:
        remove_tree(tree)
    finally:
        stop.set()
        writer.join()
    remove_tree(tree)
    assert not tree.exists()


@pytest.fixture
def flaky_factory() -> Iterator[str]:
    """A gateway name whose factory makes a reference gateway, except the second time it is
    called: then it raises (as a factory that runs out of file handles, or whose install went)."""
    import types

    from reference_impl import ReferenceGateway

    made = []

    def flaky() -> ReferenceGateway:
        made.append(1)
        if len(made) == 2:
            raise RuntimeError("out of file handles")
        return ReferenceGateway()

    module = types.ModuleType("sg_flaky_factory")
    module.make = flaky  # type: ignore[attr-defined]
    sys.modules["sg_flaky_factory"] = module
    try:
        yield "sg_flaky_factory:make"
    finally:
        del sys.modules["sg_flaky_factory"]


def test_a_factory_that_fails_after_the_first_scenario_errors_that_scenario_and_keeps_the_report(tmp_path, capsys,
                                                                                                 flaky_factory):
    code = main(["run", "--gateway", flaky_factory, "--report", str(tmp_path / "r"), *map(str, CATALOG[:3])])
    printed = capsys.readouterr()
    out = printed.out.splitlines()
    assert code == 1, printed.err
    assert out[-1] == "3 scenarios, 2 passed, 1 failed (1 gateway error)"
    assert out[2] == ("      gateway error at start (profile): FactoryFailed: gateway 'sg_flaky_factory:make': "
                      "its factory raised RuntimeError: out of file handles")
    assert out[3].startswith("      at ") and out[3].endswith(" in flaky")  # the trace reaches the factory's line
    assert json.loads((tmp_path / "r" / "summary.json").read_text())["totals"]["error"] == 1


def test_a_factory_that_fails_after_the_first_seed_errors_that_seed_and_fuzz_goes_on(tmp_path, capsys, flaky_factory):
    """As `run` does: a factory that fails once some seeds have run (an OpenClaw install removed
    under a running fuzz did) makes that seed a gateway error, and the run goes on to its
    summary. fuzz stopped there with a usage error, its summary and resume line lost."""
    code = main(["fuzz", "--seeds", "0:3", "--gateway", flaky_factory, "--out", str(tmp_path / "f"), "--no-failure-db"])
    printed = capsys.readouterr()
    out = printed.out.splitlines()
    assert code == 1, printed.err
    assert out[0] == ("ERROR gen-1  gateway error at start (profile): FactoryFailed: gateway 'sg_flaky_factory:make': "
                      "its factory raised RuntimeError: out of file handles")
    assert out[-1] == "3 scenarios, 2 passed, 1 failed", out


TIMER_CHILD = '''
import json, sys
def send(message):
    sys.stdout.write(json.dumps(message) + "\\n")
    sys.stdout.flush()
VALUES = {"hello": {"version": 1}, "durable_state": {"sessions": [], "routing": []}, "resources": {"cached": [], "running": 0},
          "profile": {"finalization": "lazy", "latency": 0, "crash_durable": False, "sweep_interval": 0}}
for line in sys.stdin:
    request = json.loads(line)
    op = request["op"]
    if op == "start":
        send({"call": "scheduler.call_at", "args": {"when": request["now"] + 1000}})
        sys.stdin.readline()
    if op == "fire_timer":
        send({"fail": {"message": "boom in fire_timer", "traceback": ["    at fire_timer (gw.js:7:3)", "boom in fire_timer"]}})
        continue
    send({"done": True, "value": VALUES.get(op)})
'''


TIMER_MODULE = '''
from reference_impl import ReferenceGateway


class TimerRaises(ReferenceGateway):
    """Schedules a timer that raises a second after start."""

    def start(self, config, harness):
        super().start(config, harness)
        harness.scheduler.call_at(harness.scheduler.now() + 1000, self.boom)

    def boom(self):
        raise RuntimeError("boom in a timer")
'''


@pytest.mark.parametrize("how", ["in-process", "isolated", "exec"])
def test_a_timer_callback_that_raises_is_an_error_at_its_step_and_the_run_goes_on(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, how: str) -> None:
    (tmp_path / "sg_timer_raises.py").write_text(TIMER_MODULE, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))  # in process, and below for the isolated child
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")])))
    if how == "exec":
        script = tmp_path / "child.py"
        script.write_text(TIMER_CHILD, encoding="utf-8")
        gateway, message = f"exec:{sys.executable} {script}", "boom in fire_timer"
    else:
        gateway, message = "sg_timer_raises:TimerRaises", "RuntimeError: boom in a timer"
    args = ["run", str(FIRST), str(SECOND), "--gateway", gateway, "--report", str(tmp_path / "r")]
    code = main([*args, "--isolate"] if how == "isolated" else args)
    out = capsys.readouterr().out.splitlines()
    assert code == 1
    assert out[0] == f"error {FIRST.stem}" and out[1] == f"      gateway error at step 1.1 (timer): {message}"
    assert out[-1] == "2 scenarios, 0 passed, 2 failed (2 gateway errors)"
    assert (tmp_path / "r" / "junit.xml").exists()
    if how == "exec":  # a stack from another language is shown without its own "at"
        assert out[2] == "      at fire_timer (gw.js:7:3)"


def test_run_stops_when_the_gateway_cannot_start(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["run", str(FIRST), str(SECOND), "--gateway", "exec:false", "--report", str(tmp_path / "r")])
    out = capsys.readouterr().out.splitlines()
    assert code == 1
    assert out[-3] == f"stopped: the gateway failed before the first event of {FIRST.stem}; it cannot start (1 scenario not run)"
    assert out[-1] == "1 scenario, 0 passed, 1 failed (1 gateway error)"
    assert (tmp_path / "r" / "junit.xml").exists()


class _Text(str):
    """A str subclass whose repr lies: its characters are what counts."""

    def __repr__(self) -> str:
        return "'GARBAGE'"


class StoresStrSubclasses(ReferenceGateway):
    def durable_state(self) -> Any:
        from conformance.observations import DurableState, StoredMessage, StoredSession

        state = super().durable_state()
        return DurableState(tuple(StoredSession(_Text(s.id), s.parent, tuple(
            StoredMessage(_Text(m.role), _Text(m.content), _Text(m.visibility)) for m in s.messages)) for s in state.sessions),
            state.routing)


def test_a_durable_state_of_str_subclasses_is_read_as_their_characters() -> None:
    """Found by the audit of hostile gateways (2026-12-05): the right content in a `str` subclass
    was refused with a message that showed it right (`content='[t1] hello'`), where every value
    the gateway hands the harness is kept as its characters."""
    result = run_scenario(load_file(FIRST), StoresStrSubclasses(), "str-subclasses")
    assert result.failure is None and {v.status for v in result.verdicts.values()} == {"pass"}


KILLS_ITSELF = """
import os, signal
from reference_impl import ReferenceGateway


class make(ReferenceGateway):
    def deliver_message(self, *args):
        os.kill(os.getpid(), signal.SIGKILL)
"""


def test_an_isolated_child_that_dies_silent_is_not_quoted_by_a_warning_of_ours(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Found by the audit of hostile gateways (2026-12-05): every warm child printed runpy's
    "found in sys.modules" RuntimeWarning, and a child killed before writing anything else was
    reported by it: `killed by signal 15: <frozen runpy>:128: RuntimeWarning: …`."""
    from conformance.transport.isolation import isolated

    (tmp_path / "sg_kills_itself.py").write_text(KILLS_ITSELF, encoding="utf-8")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path), *filter(None, [os.environ.get("PYTHONPATH")])]))
    result = run_scenario(load_file(FIRST), isolated("sg_kills_itself:make"), "sg_kills_itself:make")
    assert result.failure is not None and result.failure.message == "gateway process killed by signal 9", result.failure


TAKES_STDOUT = """
import os, sys
from reference_impl import ReferenceGateway


DONE = []


class make(ReferenceGateway):
    def deliver_message(self, *args):
        if not DONE:  # once: a second os.close(1) would be its own error
            DONE.append(1)
            HOW
        super().deliver_message(*args)
"""


@pytest.mark.parametrize("how", ["sys.__stdout__.close()", "os.close(1)",
                                 "os.dup2(os.open(os.devnull, os.O_WRONLY), 1); os.dup2(os.open(os.devnull, os.O_WRONLY), 2)"])
def test_a_gateway_that_closes_or_redirects_stdout_leaves_the_verdicts_printed(tmp_path: Path, how: str) -> None:
    """Found by the audit of hostile gateways (2026-12-05): the verdicts went unprinted, and the
    run ended in a traceback (`I/O operation on closed file`, `Bad file descriptor`) or silent."""
    import subprocess

    (tmp_path / "sg_takes_stdout.py").write_text(TAKES_STDOUT.replace("HOW", how), encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), *filter(None, [os.environ.get("PYTHONPATH")])])}
    done = subprocess.run([sys.executable, "-m", "conformance.cli", "run", "--no-failure-db", "--gateway", "sg_takes_stdout:make",
                           str(FIRST), str(catalog_paths()[1])], capture_output=True, text=True, env=env, cwd=tmp_path,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines()[-1].startswith("2 scenarios, 2 passed, 0 failed"), done.stdout
    assert "Traceback" not in done.stderr


SILENCES_THE_ALARM = """
import signal
from reference_impl import ReferenceGateway


class make(ReferenceGateway):
    def deliver_message(self, *args):
        signal.HOW
        while True:
            pass
"""


@pytest.mark.parametrize("how", ["signal(signal.SIGALRM, signal.SIG_IGN)", "setitimer(signal.ITIMER_REAL, 0)",
                                 "pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})"])
def test_a_gateway_that_silences_the_step_watchdog_and_hangs_still_ends_with_its_report(tmp_path: Path, how: str) -> None:
    """Found by the audit of hostile gateways (2026-12-05): SIGALRM ignored, its timer cancelled
    or the signal blocked, then a loop: no tick came, and the run hung for good with no report.
    The ticks' backstop thread (`watchdog._Backstop`) ends it as a stuck gateway's run ends."""
    import subprocess

    (tmp_path / "sg_silences.py").write_text(SILENCES_THE_ALARM.replace("HOW", how), encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), *filter(None, [os.environ.get("PYTHONPATH")])])}
    done = subprocess.run([sys.executable, "-m", "conformance.cli", "run", "--no-failure-db", "--step-timeout", "1",
                           "--gateway", "sg_silences:make", "--report", "out", str(FIRST)],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120, check=False)
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stdout.splitlines()[-1] == "1 scenario, 0 passed, 1 failed (1 timeout)"
    if "sigmask" not in how:  # a blocked SIGALRM still reaches another thread, and its tick runs: a plain timeout
        assert "no tick of the step watchdog came (SIGALRM ignored, blocked or cancelled by the gateway" in done.stdout
    assert (tmp_path / "out" / "junit.xml").is_file()
