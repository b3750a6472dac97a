"""A gateway in this process that nothing can stop (it catches the step watchdog's StepTimedOut
and sessiongate's own Interrupted), and worker processes that die: each ends the command with
its verdicts and report, never a hang (before: `run` waited for good, ignored SIGTERM and lost
its report; `fuzz -n 2` waited for good on a worker that had died)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from contextlib import suppress
from pathlib import Path

import pytest

from conformance.harness.runner import run_scenario
from conformance.harness.suite import catalog_paths
from reference_impl import ReferenceGateway
from sim.loader import load_file

ROOT = Path(__file__).parent.parent
FIRST = catalog_paths()[16]  # 17-policy-idle: its first event is a message (line 13)


def sessiongate(tmp_path: Path, *args: str, module: str = "") -> subprocess.Popen[str]:
    if module:
        (tmp_path / "sg_stuck.py").write_text(module, encoding="utf-8")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), str(ROOT)]))
    return subprocess.Popen([sys.executable, "-m", "conformance.cli", *args, "--no-failure-db"], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_a_gateway_that_catches_the_step_interrupt_and_goes_on_ends_the_run_with_its_report(tmp_path: Path) -> None:
    proc = sessiongate(tmp_path, "run", str(FIRST), str(catalog_paths()[0]), "--gateway", "selftest:swallows-interrupts",
                       "--step-timeout", "0.5", "--report", str(tmp_path / "r"))
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 1, err
    lines = out.splitlines()
    assert lines[0] == f"timeout {FIRST.stem}"
    assert lines[1].strip().startswith("gateway timeout at step 1 (message (line 13)): no answer to message (line 13) "
                                       "within 0.5s (wall clock), in process, and the gateway went on after the step was "
                                       "interrupted (it caught StepTimedOut)")
    assert "run it with --isolate" in lines[1]
    assert lines[2:] == ["stopped: the gateway cannot be stopped in this process (1 scenario not run)",
                         f"report written to {tmp_path / 'r'}", "1 scenario, 0 passed, 1 failed (1 timeout)"]
    summary = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert summary["totals"]["timeout"] == 1, summary["totals"]


def test_under_isolate_the_same_gateway_is_killed_and_the_run_goes_on(tmp_path: Path) -> None:
    proc = sessiongate(tmp_path, "run", str(FIRST), str(catalog_paths()[0]), "--gateway", "selftest:swallows-interrupts",
                       "--step-timeout", "1", "--isolate")
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 1, err
    assert out.splitlines()[-1] == "2 scenarios, 0 passed, 2 failed (2 timeouts)"


SWALLOWS = '''
from pathlib import Path
from reference_impl.selftest import SwallowsInterruptsGateway

class Swallows(SwallowsInterruptsGateway):
    def deliver_message(self, message):
        Path("stuck").touch()  # the test signals once the gateway is in its loop
        super().deliver_message(message)
'''


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_one_signal_stops_a_gateway_that_catches_it_with_the_report_of_what_finished(tmp_path: Path, signum: int) -> None:
    """The first signal's Interrupted is caught too; the step watchdog's next tick finds the call
    still running and ends the process with the signal's exit code and the report."""
    proc = sessiongate(tmp_path, "run", str(catalog_paths()[0]), str(FIRST), "--gateway", "sg_stuck:Swallows",
                       "--step-timeout", "2", "--report", str(tmp_path / "r"), module=SWALLOWS)
    deadline = time.monotonic() + 60
    while not (tmp_path / "stuck").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.send_signal(signum)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signum, err
    assert out.splitlines() == [f"report written to {tmp_path / 'r'}", "0 scenarios, 0 passed, 0 failed (interrupted)"]
    assert (tmp_path / "r" / "summary.json").exists()


class ReturnsAfterCatching(ReferenceGateway):
    def deliver_message(self, message):  # type: ignore[no-untyped-def]
        with suppress(BaseException):  # the step watchdog's StepTimedOut, swallowed
            time.sleep(2)
        return super().deliver_message(message)


def test_a_step_that_caught_its_interrupt_and_returned_is_still_a_timeout() -> None:
    """Before, the slow step's answer was taken as if on time: the scenario passed."""
    result = run_scenario(load_file(FIRST), ReturnsAfterCatching(), "returns-after-catching", step_timeout=0.4)
    assert result.failure is not None
    assert result.failure.kind == "timeout"
    assert result.failure.describe().endswith("no answer to message (line 13) within 0.4s (wall clock), in process: the "
                                              "step was interrupted, and the gateway caught StepTimedOut and returned")


SEGFAULTS = '''
import ctypes
from reference_impl import ReferenceGateway

class Segfaults(ReferenceGateway):
    def deliver_message(self, message):
        ctypes.string_at(0)
'''


@pytest.mark.parametrize(("gateway", "module", "said"), [
    ("selftest:swallows-interrupts", "", "a worker process exited with status 1 while running seeds"),
    ("sg_stuck:Segfaults", SEGFAULTS, "a worker process was killed by SIGSEGV while running seeds"),
])
def test_fuzz_stops_with_a_resume_line_when_a_worker_dies(tmp_path: Path, gateway: str, module: str, said: str) -> None:
    proc = sessiongate(tmp_path, "fuzz", "--seeds", "0:6", "-n", "2", "--gateway", gateway, "--step-timeout", "0.5",
                       "--out", str(tmp_path / "f"), module=module)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 1, err
    lines = out.splitlines()
    assert f"stopped: {said} (a gateway it could not stop, said above, or a crash of its interpreter)" in lines
    # From the first seed without an outcome: seed 0 on the worker that died, unless the other
    # worker's seed 0 came back (a timeout) first, as it may on a loaded machine.
    done = {int(m.group(1)) for line in lines if (m := re.match(r"(?:FAIL|ERROR|TIMEOUT) gen-(\d+) ", line))}
    first = min(set(range(6)) - done)
    assert re.match(rf"resume: PYTHONPATH=\S+ sessiongate fuzz --seeds {first}:6 ", lines[-1]), lines  # the run's, for sg_stuck


PLUGIN_SWALLOWS = SWALLOWS + '''

class QuickSwallows(Swallows):
    STEP_TIMEOUT = 0.5  # this test's step timeout (the plugin has no option for it)
'''


def test_the_pytest_plugin_says_why_on_the_terminal_when_it_must_end(tmp_path: Path) -> None:
    """Before, pytest hung for good; with only the default last words, they went to pytest's
    capture and the process ended in silence."""
    (tmp_path / "sg_stuck.py").write_text(PLUGIN_SWALLOWS, encoding="utf-8")
    (tmp_path / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), str(ROOT)]))
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:xdist",
                           "--sessiongate-gateway", "sg_stuck:QuickSwallows", "--sessiongate-scenarios", str(FIRST),
                           "--sessiongate-no-failure-db"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"{FIRST.stem}.yaml: gateway timeout at step 1 (message (line 13)): no answer to message (line 13) within " \
           "0.5s (wall clock), in process, and the gateway went on after the step was interrupted" in done.stderr
    assert "sessiongate: the gateway cannot be stopped in this process, so pytest ends here (exit 1)" in done.stderr
