"""A process an in-process gateway starts and never ends is ended when the command is over, with
a one-line warning: it would otherwise outlive the run and, holding sessiongate's stdout, keep
`sessiongate run | tee log` waiting (issue #24). And it fails I7: nothing the gateway started may
run after its final stop (counted by the runner, `conformance.harness.processes`)."""

from __future__ import annotations

import subprocess
import sys
import time
import types
from pathlib import Path

import pytest

from conformance.cli import leftovers, main
from conformance.harness.runner import run_scenario
from reference_impl.gateway import ReferenceGateway
from sim.loader import load_file

ROOT = Path(__file__).resolve().parent.parent
FIRST = ROOT / "conformance" / "catalog" / "01-idle-expiry-end-and-finalize.yaml"
STARTED: list[subprocess.Popen[bytes]] = []


class StartsAServer(ReferenceGateway):
    """Starts a helper process at start-up and never ends it."""

    def start(self, config, harness):  # type: ignore[no-untyped-def]
        super().start(config, harness)
        STARTED.append(subprocess.Popen(["sleep", "300"]))


@pytest.fixture
def gateway_module(monkeypatch: pytest.MonkeyPatch) -> None:
    module = types.ModuleType("sg_leftovers")
    module.make = StartsAServer  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "sg_leftovers", module)


@pytest.mark.usefixtures("gateway_module")
def test_what_an_in_process_gateway_started_is_ended_after_the_run(capsys: pytest.CaptureFixture[str]) -> None:
    STARTED.clear()
    before = set(leftovers.descendants())
    assert main(["run", "--gateway", "sg_leftovers:make", "-q", str(FIRST)]) == 1  # I7 (below)
    err = capsys.readouterr().err
    assert len(STARTED) == 1
    pid = STARTED[0].pid
    assert err == f"warning: the run left 1 process running that the gateway started ({pid} sleep): ended\n"
    assert STARTED[0].wait(timeout=5) == -9
    assert set(leftovers.descendants()) <= before


def test_a_process_running_before_the_command_is_left_alone(capsys: pytest.CaptureFixture[str]) -> None:
    """Only what appeared during the command is the gateway's: a process of the caller's stays."""
    mine = subprocess.Popen(["sleep", "300"])
    try:
        time.sleep(0.05)
        assert main(["run", "-q", str(FIRST)]) == 0
        assert capsys.readouterr().err == ""
        assert mine.poll() is None
    finally:
        mine.kill()
        mine.wait()


def test_descendants_reads_this_process_tree() -> None:
    child = subprocess.Popen(["sleep", "300"])
    try:
        time.sleep(0.05)
        assert leftovers.descendants().get(child.pid) == "sleep"
    finally:
        child.kill()
        child.wait()


def test_descendants_without_children_files_reads_the_whole_table(monkeypatch: pytest.MonkeyPatch) -> None:
    """A kernel without CONFIG_PROC_CHILDREN has no /proc/PID/task/TID/children: every process's stat is read instead."""
    from conformance.harness import processes

    child = subprocess.Popen(["sleep", "300"])
    try:
        time.sleep(0.05)
        fast = processes.descendants()
        monkeypatch.setattr(processes, "_children", lambda pid: None)
        assert processes.descendants() == fast and fast.get(child.pid) == "sleep"
    finally:
        child.kill()
        child.wait()


def test_an_exec_child_kept_for_the_next_scenario_is_not_the_gateways_leftover() -> None:
    """The OpenClaw adapter keeps one exec: child for a whole run; it is ended with its process
    group when its gateway goes, and was reported (and killed) as left running before."""
    from conformance.transport import exec_gateway

    before = leftovers.descendants()
    kept = subprocess.Popen(["sleep", "300"])
    exec_gateway.LIVE_CHILDREN.add(kept.pid)
    try:
        time.sleep(0.05)
        assert leftovers.end_new(before) == {}
        assert kept.poll() is None
    finally:
        exec_gateway.LIVE_CHILDREN.discard(kept.pid)
        kept.kill()
        kept.wait()


class EndsItsServer(ReferenceGateway):
    """Starts a helper at each start and ends it at each stop: `wait` reaps it, or without
    `wait` it is a zombie (which runs nothing) once it has died, within the grace."""

    def __init__(self, reap: bool = True) -> None:
        super().__init__()
        self.reap = reap
        self.helper: subprocess.Popen[bytes] | None = None

    def start(self, config, harness):  # type: ignore[no-untyped-def]
        super().start(config, harness)
        self.helper = subprocess.Popen(["sleep", "300"])
        STARTED.append(self.helper)

    def restart(self, *args):  # type: ignore[no-untyped-def]
        super().restart(*args)
        self.helper = subprocess.Popen(["sleep", "300"])
        STARTED.append(self.helper)

    def sigterm(self) -> None:
        super().sigterm()
        assert self.helper is not None
        self.helper.terminate()
        if self.reap:
            self.helper.wait()


def _end_started() -> None:
    for proc in STARTED:
        proc.kill()
        proc.wait()
    STARTED.clear()


def test_a_process_left_running_after_the_final_stop_fails_i7() -> None:
    STARTED.clear()
    try:
        result = run_scenario(load_file(FIRST), StartsAServer(), "leaves-a-server")
        assert result.failure is None
        assert result.verdicts["I7"].status == "fail"
        assert [v.message for v in result.verdicts["I7"].violations] == [
            "after the final sigterm at 11:41:02 1 process (sleep) the gateway started was still running"]
        assert all(v.status == "pass" for check, v in result.verdicts.items() if check != "I7")
        assert [r.detail for r in result.records if r.kind == "processes"] == [{"running": 1, "names": ["sleep"]}]
    finally:
        _end_started()


@pytest.mark.parametrize("reap", [True, False], ids=["reaped", "zombie"])
def test_a_process_ended_at_the_stop_passes(reap: bool) -> None:
    STARTED.clear()
    try:
        result = run_scenario(load_file(FIRST), EndsItsServer(reap), "ends-its-server")
        assert result.failure is None and len(STARTED) == 1
        assert {v.status for v in result.verdicts.values()} == {"pass"}
        assert [r for r in result.records if r.kind == "processes"] == []
    finally:
        _end_started()
