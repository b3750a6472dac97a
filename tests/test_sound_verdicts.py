"""Sound verdicts (issue #19): nothing a gateway raises or returns ends or fakes a run, and a
check that crashes is a verdict of its own, never a crash of the run.

Each test here failed on main before the change it covers (docs/reliability.md).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import types
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from conformance.adapter import Harness, Inbound, Profile
from conformance.cli import main
from conformance.cli.replay import timeline
from conformance.harness.runner import run_scenario
from conformance.harness.suite import catalog_paths, run_all
from conformance.observations import DurableState, Resources, StoredSession
from conformance.transport.wire import profile_from_wire
from reference_impl import ReferenceGateway
from sim.clock import HOUR
from sim.loader import load_file, load_text
from sim.scenario import Chat, GatewayConfig, Message, ResetPolicy, Scenario

QUEUED_NEW = """\
name: new-queued-behind-a-failed-reply
start: 2026-03-02T09:00
config: {reset: {mode: idle, idle_minutes: 30}, turn_latency: 1m}
chats: {alice: {}}
events:
  - message: alice
  - command: /new
    chat: alice
    after: 30s
  - message: alice
    at: "09:05"
"""


class ReplyRaises(ReferenceGateway):
    """Fails its first reply: the turn in flight never ends, and /new is queued behind it."""

    def deliver_reply(self, request_id: str, text: str) -> None:
        raise RuntimeError("no reply for you")


def test_a_command_queued_behind_a_turn_the_gateway_failed_is_judged_and_replayed(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    scenario = load_text(QUEUED_NEW, "queued.yaml")
    result = run_scenario(scenario, ReplyRaises(), "reply-raises")
    assert result.failure is not None and result.failure.event == "reply r1"
    assert {v.status for v in result.verdicts.values()} == {"error"}
    lines = timeline(result)
    assert any("command" in line and "/new" in line for line in lines)
    assert lines[-1].split()[2] == "error"


# -- 1. whatever a gateway raises is an error verdict at its step ----------------------------

FIRST, SECOND = catalog_paths()[0], catalog_paths()[16]  # both open with a message at line 12/13
FIRST_MESSAGE = "message (line 12)"


class OddError(BaseException):
    """A BaseException of the gateway's own."""


RAISED: dict[str, BaseException] = {
    "SystemExit(0)": SystemExit(0),
    "SystemExit(3)": SystemExit(3),
    "KeyboardInterrupt": KeyboardInterrupt(),
    "GeneratorExit": GeneratorExit(),
    "OddError": OddError("odd"),
}


@pytest.fixture
def gateway_module(monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
    """A module `sg_sound` for MODULE:FACTORY gateways made in a test."""
    module = types.ModuleType("sg_sound")
    monkeypatch.setitem(sys.modules, "sg_sound", module)
    return module


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, list[str]]:
    code = main(["run", *args])
    return code, capsys.readouterr().out.splitlines()


@pytest.mark.parametrize("name", RAISED)
def test_anything_deliver_message_raises_is_an_error_verdict_and_the_report_is_written(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], gateway_module: types.ModuleType, name: str) -> None:
    raised = RAISED[name]

    class Raises(ReferenceGateway):
        def deliver_message(self, message: Inbound) -> None:
            raise raised

    gateway_module.make = Raises  # type: ignore[attr-defined]
    code, out = run_cli(capsys, str(FIRST), str(SECOND), "--gateway", "sg_sound:make", "--report", str(tmp_path / "r"))
    assert code == 1
    assert out[0] == f"error {FIRST.stem}"
    assert out[1].startswith(f"      gateway error at step 1 ({FIRST_MESSAGE}): {type(raised).__name__}")
    assert out[-1] == "2 scenarios, 0 passed, 2 failed (2 gateway errors)"
    assert json.loads((tmp_path / "r" / "summary.json").read_text())["totals"]["error"] == 2


@pytest.mark.parametrize("name", ["SystemExit(0)", "KeyboardInterrupt"])
def test_a_raising_close_is_the_scenarios_error_and_the_report_is_written(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], gateway_module: types.ModuleType, name: str) -> None:
    raised = RAISED[name]

    class CloseRaises(ReferenceGateway):
        def close(self) -> None:
            super().close()
            raise raised

    gateway_module.make = CloseRaises  # type: ignore[attr-defined]
    code, out = run_cli(capsys, str(FIRST), str(SECOND), "--gateway", "sg_sound:make", "--report", str(tmp_path / "r"))
    assert code == 1
    quiescence = len(load_file(FIRST).events) + 1
    assert out[1].startswith(f"      gateway error at step {quiescence} (close): {type(raised).__name__}")
    assert out[-1] == "2 scenarios, 0 passed, 2 failed (2 gateway errors)"
    assert (tmp_path / "r" / "junit.xml").exists()


def test_a_timer_callback_that_raises_keyboard_interrupt_is_an_error_at_its_step() -> None:
    class TimerInterrupts(ReferenceGateway):
        def start(self, config: GatewayConfig, harness: Harness) -> None:
            super().start(config, harness)
            harness.scheduler.call_at(harness.scheduler.now() + 1000, self.boom)

        def boom(self) -> None:
            raise KeyboardInterrupt

    result = run_scenario(load_file(FIRST), TimerInterrupts(), "timer")
    assert result.failure is not None
    assert result.failure.describe() == "gateway error at step 1.1 (timer): KeyboardInterrupt: "


def test_a_factory_that_raises_system_exit_is_that_scenarios_error(
        capsys: pytest.CaptureFixture[str], gateway_module: types.ModuleType) -> None:
    made: list[int] = []

    def make() -> ReferenceGateway:
        made.append(1)
        if len(made) == 2:
            raise SystemExit(0)
        return ReferenceGateway()

    gateway_module.make = make  # type: ignore[attr-defined]
    code, out = run_cli(capsys, str(FIRST), str(SECOND), "--gateway", "sg_sound:make")
    assert code == 1
    assert out[-3] == "      gateway error at start (profile): FactoryFailed: gateway 'sg_sound:make': its factory raised SystemExit: 0"
    made.clear()
    plain = list(run_all([load_file(FIRST), load_file(SECOND)], make, "plain"))  # a factory not from resolve
    assert [r.failure is None for r in plain] == [True, False]
    assert plain[1].failure is not None and "plain: its factory raised SystemExit: 0" in plain[1].failure.message


def test_the_harnesss_own_sigint_still_stops_the_run(capsys: pytest.CaptureFixture[str],
                                                      gateway_module: types.ModuleType) -> None:
    ctrl_c = signal.raise_signal  # the real one: what the gateway calls during a run refuses it (a signal to itself)

    class Signals(ReferenceGateway):
        def deliver_message(self, message: Inbound) -> None:
            ctrl_c(signal.SIGINT)  # a real Ctrl-C, arriving while the gateway runs

    gateway_module.make = Signals  # type: ignore[attr-defined]
    code, out = run_cli(capsys, str(FIRST), str(SECOND), "--gateway", "sg_sound:make")
    assert code == 130
    assert out == ["0 scenarios, 0 passed, 0 failed (interrupted)"]
    # As a library, too: Ctrl-C is not the gateway's error. Under Python's own handler, set here:
    # once in CI (2026-12-02) the handler this xdist worker held then was not it, and the
    # signal went unseen (not reproduced in two full runs since; what left it is not known).
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            run_scenario(load_file(FIRST), Signals(), "signals")
    finally:
        signal.signal(signal.SIGINT, previous)


# -- 2. answers are validated as over exec ----------------------------------------------------


def profile_gateway(answer: object) -> ReferenceGateway:
    class Claims(ReferenceGateway):
        def profile(self, config: GatewayConfig) -> Profile:
            return answer  # type: ignore[return-value]

    return Claims()


BAD_PROFILES: dict[str, tuple[object, str]] = {
    "sometimes": (Profile("sometimes", 0), "finalization: expected 'eager' or 'lazy', got 'sometimes'"),  # type: ignore[arg-type]
    "negative": (Profile("eager", -1), "latency: expected a non-negative int, got -1"),
    "bool-latency": (Profile("eager", True), "latency: expected a non-negative int, got True"),
    "float-sweep": (Profile("eager", 0, sweep_interval=2.5), "sweep_interval: expected a non-negative int, got 2.5"),  # type: ignore[arg-type]
    "int-durable": (Profile("eager", 0, crash_durable=1), "crash_durable: expected a bool, got 1"),  # type: ignore[arg-type]
    "unknown-kind": (Profile("eager", 0, unsupported=frozenset({"teleport"})), "unsupported: unknown name 'teleport'; known: "),
    "a-dict": ({"finalization": "eager"}, "expected a Profile, got dict {'finalization': 'eager'}"),
    "policy-mode": (Profile("eager", 0, reset_default=ResetPolicy("sometimes")),  # type: ignore[arg-type]
                    "reset_default.mode: expected 'idle' or 'daily' or 'both' or 'none', got 'sometimes'"),
    "policy-minutes": (Profile("eager", 0, reset_default=ResetPolicy("idle", -5)),
                       "reset_default.idle_minutes: expected a non-negative int, got -5"),
    # the harness's own point: its hits would count twice, once passed by the gateway
    "harness-point": (Profile("eager", 0, crash_points=frozenset({"reply-sent", "mine"})),
                      "crash_points: 'reply-sent' is the harness's own (HARNESS_POINTS, passed by the harness itself)"),
}


@pytest.mark.parametrize("name", BAD_PROFILES)
def test_a_profile_that_does_not_parse_is_refused_at_start_as_over_exec(tmp_path: Path, name: str) -> None:
    answer, why = BAD_PROFILES[name]
    result = run_scenario(load_file(FIRST), profile_gateway(answer), name)
    assert result.failure is not None and (result.failure.step, result.failure.event) == (0, "profile")
    assert result.failure.message.startswith(f"bad value in answer to profile: {why}")
    assert {v.status for v in result.verdicts.values()} == {"error"}
    if isinstance(answer, Profile):  # over the wire, the same validator says the same
        from conformance.harness.values import BadValue

        detail = answer.to_detail() if name != "unknown-kind" else {**answer.to_detail(), "unsupported": ["teleport"]}
        with pytest.raises(BadValue, match=re.escape(why)):
            profile_from_wire(detail)


def test_a_profile_with_a_set_of_unsupported_kinds_is_taken_as_a_frozenset() -> None:
    result = run_scenario(load_file(FIRST), profile_gateway(Profile("eager", 300_000, unsupported={"crash"})), "set")  # type: ignore[arg-type]
    assert result.failure is None and result.profile.unsupported == frozenset({"crash"})


class Answers(ReferenceGateway):
    """Answers `method` with `value` from the `after`-th call on."""

    method, value, after = "resources", None, 1

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def resources(self) -> Resources:
        return self._answer("resources", super().resources)

    def durable_state(self) -> DurableState:
        return self._answer("durable_state", super().durable_state)

    def _answer(self, method: str, real: Any) -> Any:
        if method != self.method:
            return real()
        self.calls += 1
        return self.value if self.calls >= self.after else real()


GARBAGE: dict[str, tuple[str, object, str]] = {
    "resources-none": ("resources", None, "expected a Resources, got NoneType None"),
    "resources-busy-int": ("resources", Resources((("s1", 1),), 1),  # type: ignore[arg-type]
                           "cached[0]: expected a (session, busy) pair of a str and a bool, got ('s1', 1)"),
    "resources-negative": ("resources", Resources((), -1), "running: expected a non-negative int, got -1"),
    "state-dict": ("durable_state", {}, "expected a DurableState, got dict {}"),
    "state-twice": ("durable_state", DurableState((StoredSession("s1", None, ()), StoredSession("s1", None, ()))),
                    "sessions[1]: session 's1' is listed twice"),
    "state-routing": ("durable_state", DurableState((), (("alice", 7),)),  # type: ignore[arg-type]
                      "routing[0]: expected a (chat, session) pair of str, got ('alice', 7)"),
}


@pytest.mark.parametrize("name", GARBAGE)
def test_garbage_from_durable_state_or_resources_is_an_error_at_its_step(name: str) -> None:
    method, value, why = GARBAGE[name]
    gateway = type(name, (Answers,), {"method": method, "value": value, "after": 2 if method == "resources" else 1})()
    result = run_scenario(load_file(FIRST), gateway, name)
    assert result.failure is not None
    assert result.failure.step >= 1 and result.failure.event == method
    assert result.failure.message == f"bad value in answer to {method}: {why}"


def test_a_session_rebound_in_place_after_a_snapshot_is_read_again() -> None:
    """The runner takes a session it checked before as unchanged while it holds the same messages
    tuple (and parent): a gateway that hands out the same `StoredSession` with a field rebound
    through `object.__setattr__` is judged on what it holds now, not on the last snapshot."""

    class Rebinds(ReferenceGateway):
        handed: dict[str, StoredSession] = {}

        def durable_state(self) -> DurableState:
            state = super().durable_state()
            sessions = []
            for s in state.sessions:
                old = self.handed.get(s.id)
                if old is None:
                    old = self.handed[s.id] = StoredSession(s.id, s.parent, s.messages)
                else:  # the one handed out before, its messages now s1's first row only
                    object.__setattr__(old, "messages", s.messages[:1] if s.id == "s1" else s.messages)
                sessions.append(old)
            return DurableState(tuple(sessions), state.routing)

    scenario = load_text("name: rebinds\nchats: {alice: {}}\nevents:\n  - message: alice\n"
                         "  - checkpoint: one\n    at: '09:30'\n  - checkpoint: two\n    at: '10:00'\n", "rebinds.yaml")
    gateway = Rebinds()
    gateway.handed = {}
    result = run_scenario(scenario, gateway, "rebinds")
    rows = {r.d("label"): r.d("sessions")["s1"]["rows"] for r in result.records if r.kind == "durable" and "s1" in r.d("sessions")}
    assert len(rows["one"]) == 2 and len(rows["two"]) == 1 and len(rows["final"]) == 1  # the reply row gone: seen
    assert result.failure is None and result.verdicts["I2"].status == "fail"


# -- 3. each scenario its own config and chats ------------------------------------------------


def test_the_default_reset_policy_is_not_one_shared_object() -> None:
    assert GatewayConfig().reset is not GatewayConfig().reset
    assert Scenario("a").config is not Scenario("b").config


def test_a_gateway_that_mutates_its_config_changes_nothing_the_harness_holds() -> None:
    class Mutates(ReferenceGateway):
        def profile(self, config: GatewayConfig) -> Profile:
            object.__setattr__(config.reset, "mode", "idle")
            object.__setattr__(config.reset, "idle_minutes", 1)
            return super().profile(config)

    default = Scenario("default-policy", chats=(Chat("alice"),),
                       events=(Message(HOUR, chat="alice", turn="t1", text="hi"),))
    first = run_scenario(default, Mutates(), "mutates")
    second = run_scenario(replace(default, name="again"), ReferenceGateway(), "reference")
    for result in (first, second):
        assert result.records[0].d("config")["reset"]["mode"] == "none"
    assert default.config.reset == ResetPolicy()


def test_a_gateway_that_mutates_a_chat_sees_a_fresh_one_on_its_next_call() -> None:
    seen: list[str] = []

    class MutatesChat(ReferenceGateway):
        def deliver_message(self, message: Inbound) -> None:
            seen.append(message.chat.platform)
            super().deliver_message(message)
            object.__setattr__(message.chat, "platform", "mutated")

    scenario = load_file(SECOND)
    result = run_scenario(scenario, MutatesChat(), "mutates-chat")
    assert len(seen) > 1 and set(seen) == {"telegram"}  # as a child process decodes each call's chat
    assert {chat.platform for chat in scenario.chats} == {"telegram"}
    assert result.passed


# -- 4. a check that raises is a checker-error verdict; the run goes on ------------------------


def broken_check(model: object) -> None:
    raise ZeroDivisionError("the check divided by zero")


def test_a_check_that_raises_is_a_checker_error_and_every_report_shows_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    import conformance.checks as checks

    monkeypatch.setitem(checks.CHECKS, "I3", broken_check)
    code, out = run_cli(capsys, str(FIRST), str(SECOND), "--report", str(tmp_path / "r"), "--table")
    assert code == 4
    assert out[0] == f"checker-error {FIRST.stem}"
    assert out[1].startswith("      I3 checker error in I3: ZeroDivisionError: the check divided by zero (test_sound_verdicts.py:")
    assert out[-1] == "2 scenarios, 0 passed, 0 failed, 2 checker errors (a sessiongate bug)"
    assert "  .  .  !  .  .  .  .  ." in out[-4]
    summary = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert summary["totals"]["checker-error"] == 2
    assert summary["scenarios"][0]["outcome"] == "checker-error"
    assert summary["scenarios"][0]["verdicts"]["I3"]["status"] == "checker-error"
    assert summary["scenarios"][0]["verdicts"]["I1"]["status"] == "pass"  # the other checks still judged
    junit = (tmp_path / "r" / "junit.xml").read_text()
    assert junit.count('type="checker-error"') == 2 and 'errors="2"' in junit
    assert "checker error in I3" in (tmp_path / "r" / "report.html").read_text()
    assert main(["report", str(tmp_path / "r")]) == 4  # re-judged from the saved logs: the same
    capsys.readouterr()


def test_an_oracle_that_cannot_read_a_log_names_the_record_and_replay_still_prints(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from conformance.checks import judge
    from conformance.observations import Obs

    result = run_scenario(load_file(FIRST), ReferenceGateway(), "reference")
    index = next(i for i, r in enumerate(result.records) if r.kind == "message")
    damaged = list(result.records)
    damaged[index] = Obs(*damaged[index][:5], (), damaged[index].detail)  # a message with no turn: a damaged log
    verdicts = judge(damaged)
    assert {v.status for v in verdicts.values()} == {"checker-error"}
    assert verdicts["I1"].reason.startswith(f"checker error in the oracle at record {index}: IndexError: ")
    result.records, result.verdicts = damaged, verdicts
    assert any("message" in line for line in timeline(result))
    from reports import write_all

    write_all([result], str(tmp_path / "r"), "reference")  # the HTML section, without a timeline
    assert "the oracle could not read this log" in (tmp_path / "r" / "report.html").read_text()


# -- 7. a determinism divergence is reported at its step and the run goes on -------------------

DRAWN = iter(range(1_000_000))  # process-wide: the second run of a scenario draws other numbers


class DivergesAtTheThirdMessage(ReferenceGateway):
    """Deterministic until its third message, then it notes a number it should not have."""

    def __init__(self) -> None:
        super().__init__()
        self.messages = 0

    def deliver_message(self, message: Inbound) -> None:
        self.messages += 1
        if self.messages == 3:
            self.h.note("drawn", number=next(DRAWN))
        super().deliver_message(message)


def test_a_determinism_divergence_is_reported_at_its_step_and_the_run_goes_on(
        capsys: pytest.CaptureFixture[str], gateway_module: types.ModuleType) -> None:
    gateway_module.make = DivergesAtTheThirdMessage  # type: ignore[attr-defined]
    code, out = run_cli(capsys, str(SECOND), str(SECOND), "--gateway", "sg_sound:make", "--check-determinism")
    assert code == 1
    assert out[0] == f"error {SECOND.stem}"
    assert out[1].startswith("      gateway error at step 3 (determinism): nondeterministic gateway")
    assert '"kind":"note"' in out[1] and '"step":3' in out[1]
    assert out[-1] == "2 scenarios, 0 passed, 2 failed (2 gateway errors)"  # not stopped as "cannot start"


# -- in a child process (--isolate), the same verdicts and messages ---------------------------

ISOLATED_MODULE = '''
from conformance.adapter import Profile
from reference_impl import ReferenceGateway


class Exits(ReferenceGateway):
    def deliver_message(self, message):
        raise SystemExit(0)


class Sometimes(ReferenceGateway):
    def profile(self, config):
        return Profile("sometimes", 0)
'''


@pytest.mark.parametrize("factory", ["Exits", "Sometimes"])
def test_an_isolated_gateway_gets_the_verdict_and_message_it_gets_in_process(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, factory: str) -> None:
    from conformance.transport.isolation import isolated

    (tmp_path / "sg_isolated.py").write_text(ISOLATED_MODULE, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    import sg_isolated  # type: ignore[import-not-found]

    here = run_scenario(load_file(FIRST), getattr(sg_isolated, factory)(), factory)
    there = run_scenario(load_file(FIRST), isolated(f"sg_isolated:{factory}", env={"PYTHONPATH": str(tmp_path)}), factory)
    assert here.failure is not None and there.failure is not None
    assert there.failure.describe() == here.failure.describe()


def test_an_exception_whose_message_raises_is_still_an_error_verdict() -> None:
    class Unprintable(Exception):
        def __str__(self) -> str:
            raise RuntimeError("no words")

    class Raises(ReferenceGateway):
        def deliver_message(self, message: Inbound) -> None:
            raise Unprintable

    result = run_scenario(load_file(FIRST), Raises(), "unprintable")
    assert result.failure is not None
    assert result.failure.message == "Unprintable: <its message raised RuntimeError>"


def test_replay_prints_the_timeline_of_a_log_cut_short_by_a_gateway_error(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], gateway_module: types.ModuleType) -> None:
    (tmp_path / "queued.yaml").write_text(QUEUED_NEW, encoding="utf-8")
    gateway_module.make = ReplyRaises  # type: ignore[attr-defined]
    assert main(["replay", str(tmp_path / "queued.yaml"), "--gateway", "sg_sound:make"]) == 1
    out = capsys.readouterr().out.splitlines()
    assert any("command" in line and "/new" in line for line in out)
    assert out[-3] == "error new-queued-behind-a-failed-reply"
    assert out[-2] == "      gateway error at step 2.1 (reply r1): RuntimeError: no reply for you"


def test_the_profile_check_is_driven_by_the_fields_types() -> None:
    """A field added to Profile later (`reply_within: int | None = None`) is checked, and may be left out on the wire."""
    from conformance.harness.values import BadValue, _field, profile_from_fields

    hint = int | None
    assert _field("reply_within", hint, None) is None and _field("reply_within", hint, 60_000) == 60_000
    with pytest.raises(BadValue, match=r"reply_within: expected a non-negative int or None, got -1"):
        _field("reply_within", hint, -1)
    wire = {"finalization": "lazy", "latency": 0, "crash_durable": False, "sweep_interval": 0}
    assert profile_from_fields(wire) == Profile("lazy", 0, False, 0)  # `unsupported` (no kinds) may be left out


def test_fuzz_exits_4_on_a_checker_error(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """As run, replay and report do: a check that raised is sessiongate's bug, above any finding."""
    import conformance.checks as checks

    monkeypatch.setitem(checks.CHECKS, "I3", broken_check)
    assert main(["fuzz", "--seeds", "0:2", "--out", str(tmp_path), "--no-shrink", "--findings-ok"]) == 4
    capsys.readouterr()


# -- 7. the harness's own exceptions, and what a gateway hands over, cannot end a run -----------


def _control(name: str) -> BaseException:
    from conformance.harness.calls import Died, GatewayFailure, GatewayRaised
    from conformance.harness.errors import Interrupted
    from sim.engine import EventBudgetExceeded

    return {"Interrupted": Interrupted(signal.SIGINT), "Died": Died("flush"),
            "GatewayRaised": GatewayRaised(GatewayFailure("error", 0, "start", "forged")),
            "EventBudgetExceeded": EventBudgetExceeded("forged")}[name]


@pytest.mark.parametrize("name", ["Interrupted", "Died", "GatewayRaised", "EventBudgetExceeded"])
@pytest.mark.parametrize("method", ["deliver_message", "sigterm"])
def test_the_harnesss_control_exceptions_raised_by_a_gateway_are_its_error_at_its_step(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], gateway_module: types.ModuleType, name: str,
        method: str) -> None:
    """Only the harness's own signal handler stops a run; a gateway that raises `Interrupted`,
    `Died`, `GatewayRaised` or `EventBudgetExceeded` itself is one more gateway error."""

    def raises(self: ReferenceGateway, *args: Any) -> None:
        raise _control(name)

    gateway_module.make = type("Raises", (ReferenceGateway,), {method: raises})  # type: ignore[attr-defined]
    code, out = run_cli(capsys, str(FIRST), str(SECOND), "--gateway", "sg_sound:make", "--report", str(tmp_path / "r"))
    assert code == 1
    where = FIRST_MESSAGE if method == "deliver_message" else "sigterm"
    assert re.match(rf"      gateway error at step [\d.]+ \({re.escape(where)}\): {name}", out[1]), out[1]
    assert out[-1] == "2 scenarios, 0 passed, 2 failed (2 gateway errors)"
    assert json.loads((tmp_path / "r" / "summary.json").read_text())["totals"]["error"] == 2


class Explodes(list):  # type: ignore[type-arg]
    """A sequence whose every use is a BaseException: run only where the gateway's error can be caught."""

    def __iter__(self) -> Any:
        raise SystemExit(0)

    def __len__(self) -> int:
        raise KeyboardInterrupt


class ExplodingProfile(Profile):
    @property  # type: ignore[misc]
    def finalization(self) -> Any:
        raise SystemExit(0)


EXPLODING: dict[str, tuple[str, Any]] = {
    "durable_state": ("durable_state", lambda real: DurableState(Explodes(real.sessions), real.routing)),  # type: ignore[arg-type]
    "resources": ("resources", lambda real: Resources(Explodes(real.cached), real.running)),  # type: ignore[arg-type]
    "profile": ("profile", lambda real: object.__new__(ExplodingProfile)),
}


@pytest.mark.parametrize("name", EXPLODING)
def test_an_answer_whose_own_methods_raise_a_base_exception_is_an_error_at_its_step(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], gateway_module: types.ModuleType, name: str) -> None:
    """Checking an answer runs its methods (a list subclass's `__iter__`, a property): what they
    raise, SystemExit(0) included, is the gateway's error at that step, never a green exit."""
    method, make = EXPLODING[name]

    def answer(self: Any, *args: Any) -> Any:
        real = getattr(ReferenceGateway, method)(self, *args)
        self.calls = getattr(self, "calls", 0) + 1
        return make(real) if self.calls > 1 or method != "resources" else real  # resources: past the start

    gateway_module.make = type("Answers", (ReferenceGateway,), {method: answer})  # type: ignore[attr-defined]
    code, out = run_cli(capsys, str(FIRST), str(SECOND), "--gateway", "sg_sound:make", "--report", str(tmp_path / "r"))
    assert code == 1
    assert re.match(rf"      gateway error at (step [\d.]+ |start )\({method}\): bad value in answer to {method}: "
                    r"(SystemExit|KeyboardInterrupt)", out[1]), out[1]
    if method == "profile":  # at start: the gateway cannot start, and the run says so after one scenario
        assert out[-1] == "1 scenario, 0 passed, 1 failed (1 gateway error)"
    else:
        assert out[-1] == "2 scenarios, 0 passed, 2 failed (2 gateway errors)"


class Slippery(str):
    """A str whose hash and equality raise: a log holding it would crash the checks."""

    __slots__ = ()

    def __hash__(self) -> int:
        raise SystemExit(0)

    def __eq__(self, other: object) -> bool:
        raise SystemExit(0)


class SlipperyServices(ReferenceGateway):
    """Hands the harness str subclasses for every id and text, as a gateway's own str types would."""

    def start(self, config: GatewayConfig, harness: Harness) -> None:
        platform, llm, recorder = harness.platform, harness.llm, harness.recorder
        slip = Slippery

        class Wrap:
            def __init__(self, real: Any) -> None:
                self.real = real

            def __getattr__(self, name: str) -> Any:
                method = getattr(self.real, name)
                if not callable(method):
                    return method

                def slippery(a: Any) -> Any:
                    return slip(a) if type(a) is str else [slippery(x) for x in a] if isinstance(a, list) else a

                def call(*args: Any) -> Any:
                    return method(*map(slippery, args))

                return call

        harness = replace(harness, platform=Wrap(platform), llm=Wrap(llm), recorder=Wrap(recorder))  # type: ignore[arg-type]
        super().start(config, harness)


def test_what_a_gateway_hands_the_harness_is_logged_as_plain_values() -> None:
    """A str subclass reaches the log as the str it holds (as over the wire), so no method of the
    gateway's runs when the checks read the log: the verdicts are the reference's own."""
    result = run_scenario(load_file(FIRST), SlipperyServices(), "slippery")
    assert result.failure is None, result.failure
    assert all(v.status == "pass" for v in result.verdicts.values()), result.verdicts
    held = [value for r in result.records for value in r.detail.values() if isinstance(value, str)]
    assert held and {type(value) for value in held} == {str}


class HandsAnInt(ReferenceGateway):
    def send_reply(self, pending: Any) -> None:
        self.h.platform.send_reply(pending.chat.name, 7, pending.reply)  # type: ignore[arg-type]


def test_a_value_of_the_wrong_type_handed_to_the_harness_is_the_gateways_error_at_its_step() -> None:
    result = run_scenario(load_file(FIRST), HandsAnInt(), "hands-an-int")
    assert result.failure is not None
    assert result.failure.message == "bad value handed to platform.send_reply: session: expected a str, got int 7"


class AttributeRaises(ReferenceGateway):
    @property
    def deliver_message(self) -> Any:  # type: ignore[override]
        raise SystemExit(0)


def test_a_gateway_attribute_that_raises_when_looked_up_is_an_error_at_its_step() -> None:
    result = run_scenario(load_file(FIRST), AttributeRaises(), "attribute-raises")
    assert result.failure is not None and result.failure.step == 1
    assert result.failure.message.startswith("SystemExit")
    assert {v.status for v in result.verdicts.values()} == {"error"}


def test_over_exec_a_value_of_the_wrong_type_is_answered_with_the_same_words() -> None:
    """The child's call is refused with the message an in-process gateway's call raises."""
    from conformance.harness.calls import GatewayCalls
    from conformance.transport.exec_gateway import ExecGateway

    calls = GatewayCalls(load_file(FIRST), ReferenceGateway(), "reference", budget=1000)
    server = object.__new__(ExecGateway)
    server.h = calls.harness
    answer = server._serve({"call": "platform.send_reply", "args": {"chat": "alice", "session": 7, "text": "[t1] reply"}})
    assert answer == {"error": "bad value handed to platform.send_reply: session: expected a str, got int 7"}


def test_a_prompt_handed_as_one_text_is_refused_not_read_by_its_last_character() -> None:
    """A gateway author's exec: child sent `"prompt": "[t1] hello"`: its last character was read
    as the user's message, the request carried no turn, and I9 said the LLM was never asked."""
    from conformance.harness.calls import GatewayCalls
    from conformance.transport.exec_gateway import ExecGateway

    calls = GatewayCalls(load_file(FIRST), ReferenceGateway(), "reference", budget=1000)
    server = object.__new__(ExecGateway)
    server.h = calls.harness
    answer = server._serve({"call": "llm.request", "args": {"chat": "alice", "session": "s1", "prompt": "[t1] hello"}})
    assert answer == {"error": "bad value handed to llm.request: prompt: expected a list of texts, the user's message "
                               "last, got str '[t1] hello'"}


FORKS_AND_PRINTS = '''
import os
from reference_impl import ReferenceGateway


class Forks(ReferenceGateway):
    def deliver_message(self, message):
        os.fork()  # both processes go on: the child returns into sessiongate too
        super().deliver_message(message)


class Prints(ReferenceGateway):
    def deliver_message(self, message):
        print("hello from the gateway")
        super().deliver_message(message)
'''


def run_in_a_process(tmp_path: Path, module: str, factory: str) -> subprocess.CompletedProcess[str]:
    """`sessiongate run FIRST SECOND --report` in a process of its own, on gateway `factory` of
    `module` (what it does may end or multiply the process that runs it)."""
    (tmp_path / "sg_own_process.py").write_text(module, encoding="utf-8")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), str(Path(__file__).parent.parent)]))
    return subprocess.run([sys.executable, "-m", "conformance.cli", "run", str(FIRST), str(SECOND), "--gateway",
                           f"sg_own_process:{factory}", "--no-failure-db", "--report", str(tmp_path / "r")],
                          capture_output=True, text=True, env=env, timeout=120)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
@pytest.mark.parametrize("factory", ["Forks", "Prints"])
def test_a_gateway_that_forks_or_prints_leaves_the_verdicts_and_the_report_as_they_are(
        tmp_path: Path, factory: str) -> None:
    """A child forked in a gateway call ends when it returns into sessiongate (before, every
    child ran the rest of the run: each verdict printed many times, reports written over each
    other); what a gateway prints goes to stderr, as an exec: child's does."""
    done = run_in_a_process(tmp_path, FORKS_AND_PRINTS, factory)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [f"pass  {FIRST.stem}", f"pass  {SECOND.stem}", f"report written to {tmp_path / 'r'}",
                                        "2 scenarios, 2 passed, 0 failed"]
    assert json.loads((tmp_path / "r" / "summary.json").read_text())["totals"]["pass"] == 2
    if factory == "Prints":
        assert "hello from the gateway" in done.stderr


# -- 8. a gateway in process that hangs is a timeout at its step -------------------------------


class Hangs(ReferenceGateway):
    """Loops for ever in its first message, swallowing every Exception on the way."""

    def deliver_message(self, message: Inbound) -> None:
        while True:
            try:
                pass
            except Exception:
                continue


def test_a_gateway_that_hangs_in_process_is_a_timeout_and_the_run_and_its_report_go_on(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], gateway_module: types.ModuleType) -> None:
    """Before, an in-process gateway that looped never let the run end: no verdict, no report."""
    gateway_module.make = Hangs  # type: ignore[attr-defined]
    code, out = run_cli(capsys, str(FIRST), str(SECOND), "--gateway", "sg_sound:make", "--step-timeout", "0.4",
                        "--report", str(tmp_path / "r"))
    assert code == 1
    assert out[0] == f"timeout {FIRST.stem}"
    assert out[1] == (f"      gateway timeout at step 1 ({FIRST_MESSAGE}): no answer to {FIRST_MESSAGE} within 0.4s "
                      f"(wall clock), in process: the step was interrupted")
    assert out[-1] == "2 scenarios, 0 passed, 2 failed (2 timeouts)"
    assert json.loads((tmp_path / "r" / "summary.json").read_text())["totals"]["timeout"] == 2


def test_the_watchdog_interrupts_only_a_call_in_progress_at_three_ticks_running() -> None:
    from conformance.harness.watchdog import StepTimedOut, Watch

    watch = Watch()
    for _ in range(5):  # no call in progress: never
        watch.tick(1.0)
    watch.seq, watch.depth = 1, 1
    watch.tick(1.0)
    watch.tick(1.0)
    watch.seq += 1  # the call ended and another began: counted from here
    watch.tick(1.0)
    watch.tick(1.0)
    with pytest.raises(StepTimedOut):
        watch.tick(1.0)


def test_a_gateway_in_a_child_or_an_adapter_with_its_own_limit_is_timed_by_it() -> None:
    from conformance.adapters.openclaw import STEP_TIMEOUT, OpenClawGateway
    from conformance.harness.watchdog import limit_for
    from conformance.transport.exec_gateway import ExecGateway

    class OddLimit(ReferenceGateway):
        @property
        def STEP_TIMEOUT(self) -> float:  # read without running it: `limit_for` looks it up statically
            raise SystemExit(0)

    assert limit_for(object.__new__(ExecGateway), 10.0) is None
    assert limit_for(object.__new__(OpenClawGateway), 10.0) == STEP_TIMEOUT
    assert limit_for(ReferenceGateway(), 10.0) == 10.0 and limit_for(OddLimit(), 3.0) == 3.0


def test_the_watchdogs_ticks_change_nothing_in_a_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """Ticking every 0.1 s through a run leaves its log and verdicts byte for byte as without.
    The real tick runs each time, but with no strike carried over from the tick before: on a
    loaded machine one step can take longer than 0.2 s of wall clock, and interrupting a slow
    step is the watchdog's job (tested above), not what this test is about."""
    from conformance.harness.watchdog import Watch

    monkeypatch.syspath_prepend(str(Path(__file__).parent.parent / "bench"))
    import gateway_day  # type: ignore[import-not-found]

    scenario = gateway_day.gateway_day(hours=4)
    ticks = []
    real = Watch.tick

    def tick(self: Watch, limit: float) -> None:
        ticks.append(limit)
        self.strikes = 0
        real(self, limit)

    monkeypatch.setattr(Watch, "tick", tick)
    ticked = run_scenario(scenario, ReferenceGateway(), "reference", step_timeout=0.2)
    assert len(ticks) >= 2  # the run outlasted two ticks
    quiet = run_scenario(scenario, ReferenceGateway(), "reference", step_timeout=None)
    assert ticked.log_text() == quiet.log_text() and ticked.verdicts == quiet.verdicts


EXITS = '''
import os
import threading
from reference_impl import ReferenceGateway


class Exits(ReferenceGateway):
    def deliver_message(self, message):
        os._exit(0)


class ThreadExits(ReferenceGateway):
    def deliver_message(self, message):
        thread = threading.Thread(target=os._exit, args=(0,))
        thread.start()
        thread.join()
        super().deliver_message(message)
'''


@pytest.mark.parametrize(("factory", "where"), [("Exits", FIRST_MESSAGE), ("ThreadExits", "thread")])
def test_os_exit_in_a_gateway_is_its_error_and_never_a_green_exit(tmp_path: Path, factory: str, where: str) -> None:
    """Before, `os._exit(0)` in an in-process gateway ended sessiongate with status 0 and no
    report: a green CI (Hermes has an `os._exit` backstop in its shutdown)."""
    done = run_in_a_process(tmp_path, EXITS, factory)
    assert done.returncode == 1, done.stderr
    out = done.stdout.splitlines()
    assert out[1] == (f"      gateway error at step 1 ({where}): os._exit(0) called in process"
                      f"{' by a thread the gateway started' if factory == 'ThreadExits' else ''}: sessiongate goes on")
    assert out[-1] == "2 scenarios, 0 passed, 2 failed (2 gateway errors)"
    assert json.loads((tmp_path / "r" / "summary.json").read_text())["totals"]["error"] == 2
    assert "Traceback" not in done.stderr


SIGNALS_ITSELF = '''
import _thread
import os
import signal
import threading
from reference_impl import ReferenceGateway


class Terms(ReferenceGateway):
    def deliver_message(self, message):
        os.kill(os.getpid(), signal.SIGTERM)


class Kills(ReferenceGateway):
    def deliver_message(self, message):
        os.kill(os.getpid(), signal.SIGKILL)


class GroupTerms(ReferenceGateway):
    def deliver_message(self, message):
        os.killpg(0, signal.SIGTERM)


class RaisesSigint(ReferenceGateway):
    def deliver_message(self, message):
        signal.raise_signal(signal.SIGINT)


class InterruptsMain(ReferenceGateway):
    def deliver_message(self, message):
        _thread.interrupt_main()


class ThreadTerms(ReferenceGateway):
    def deliver_message(self, message):
        thread = threading.Thread(target=os.kill, args=(os.getpid(), signal.SIGTERM))
        thread.start()
        thread.join()
        super().deliver_message(message)


class SignalsItsChild(ReferenceGateway):
    def deliver_message(self, message):
        os.kill(os.getpid(), 0)  # is it alive: no signal sent
        super().deliver_message(message)
'''


@pytest.mark.parametrize(("factory", "what"), [
    ("Terms", "os.kill(its own pid, SIGTERM)"), ("Kills", "os.kill(its own pid, SIGKILL)"),
    ("GroupTerms", "os.killpg(0, SIGTERM)"), ("RaisesSigint", "signal.raise_signal(SIGINT)"),
    ("InterruptsMain", "_thread.interrupt_main(SIGINT)"), ("ThreadTerms", "os.kill(its own pid, SIGTERM)")])
def test_a_signal_a_gateway_sends_its_own_process_is_its_error(tmp_path: Path, factory: str, what: str) -> None:
    """The audit of hostile gateways (2026-12-05) left these: in process, a gateway's SIGTERM or
    SIGINT to itself read as sessiongate told to stop (the run ended early, exit 143 or 130),
    and a SIGKILL ended it with no report at all. Each is now the gateway's error at its step."""
    done = run_in_a_process(tmp_path, SIGNALS_ITSELF, factory)
    assert done.returncode == 1, done.stderr
    out = done.stdout.splitlines()
    where = "thread" if factory == "ThreadTerms" else FIRST_MESSAGE
    assert out[1] == (f"      gateway error at step 1 ({where}): {what} called in process"
                      f"{' by a thread the gateway started' if factory == 'ThreadTerms' else ''}: sessiongate goes on")
    assert out[-1] == "2 scenarios, 0 passed, 2 failed (2 gateway errors)"
    assert json.loads((tmp_path / "r" / "summary.json").read_text())["totals"]["error"] == 2


def test_signal_zero_to_itself_is_no_signal(tmp_path: Path) -> None:
    done = run_in_a_process(tmp_path, SIGNALS_ITSELF, "SignalsItsChild")
    assert done.returncode == 0, done.stdout + done.stderr


REBINDS = '''
import builtins
import json
import sys

import conformance.checks as checks
from conformance.harness.verdict import Verdict
from reference_impl.variants import make


def _never_replies(rebind):
    gateway = make("never-replies")  # fails every scenario on its own
    deliver = gateway.deliver_message

    def deliver_message(message):
        rebind()
        return deliver(message)

    gateway.deliver_message = deliver_message
    return gateway


def _exit_zero(*args, **kwargs):
    raise SystemExit(0)


def Print():
    return _never_replies(lambda: setattr(builtins, "print", _exit_zero))


def Isinstance():
    return _never_replies(lambda: setattr(builtins, "isinstance", lambda value, kind: False))


def Checks():
    return _never_replies(lambda: checks.CHECKS.update((c, lambda m, c=c: Verdict(c, "pass", examined=1)) for c in checks.CHECKS))


def _exits_at_judge(frame, event, arg):
    if event == "call" and frame.f_code.co_name == "judge":
        raise SystemExit(0)


def Trace():
    return _never_replies(lambda: sys.settrace(_exits_at_judge))


def Json():
    return _never_replies(lambda: setattr(json, "dumps", lambda *args, **kwargs: "{}"))
'''


@pytest.mark.parametrize(("factory", "what"), [("Print", "builtins.print"), ("Isinstance", "builtins.isinstance"),
                                               ("Checks", "conformance.checks.CHECKS"), ("Trace", "sys.settrace"),
                                               ("Json", "json.dumps")])
def test_a_gateway_that_rebinds_what_sessiongate_runs_on_fails_and_is_put_back(
        tmp_path: Path, factory: str, what: str) -> None:
    """The fourth audit of hostile gateways: a gateway that never replies rebound `print` to
    raise SystemExit(0) (exit 0, no verdict, no report), `isinstance` to lie (a traceback), or
    the checks to pass (every scenario green). Each is now its error, the report written, and
    what it rebound is put back before the next scenario is run or any verdict given."""
    done = run_in_a_process(tmp_path, REBINDS, factory)
    assert done.returncode == 1, done.stderr
    out = done.stdout.splitlines()
    assert out[1].startswith("      gateway error at step ") and f"the gateway rebound {what} in process (put back)" in out[1]
    assert out[-1] == "2 scenarios, 0 passed, 2 failed (2 gateway errors)"
    assert json.loads((tmp_path / "r" / "summary.json").read_text())["totals"]["error"] == 2


ENDS_ITSELF = '''
import os
import posix

from reference_impl import ReferenceGateway


class PosixExit(ReferenceGateway):
    def deliver_message(self, message):
        posix._exit(0)


class Aborts(ReferenceGateway):
    def deliver_message(self, message):
        os.abort()


class Execs(ReferenceGateway):
    def deliver_message(self, message):
        os.execv("/bin/true", ["true"])
'''


@pytest.mark.parametrize(("factory", "what"), [("PosixExit", "os._exit(0)"), ("Aborts", "os.abort()"),
                                               ("Execs", "os.execv('/bin/true', …)")])
def test_a_gateway_that_ends_or_replaces_its_process_another_way_is_its_error(
        tmp_path: Path, factory: str, what: str) -> None:
    """The fourth audit of hostile gateways: `posix._exit(0)` and `os.execv` in process ended
    the run with exit 0 and no report (a green CI); `os.abort()` ended it with 134, no report."""
    done = run_in_a_process(tmp_path, ENDS_ITSELF, factory)
    assert done.returncode == 1, done.stderr
    out = done.stdout.splitlines()
    assert out[1] == f"      gateway error at step 1 ({FIRST_MESSAGE}): {what} called in process: sessiongate goes on"
    assert out[-1] == "2 scenarios, 0 passed, 2 failed (2 gateway errors)"


CLOSES_FILES = '''
import os

from reference_impl import ReferenceGateway


class Closes(ReferenceGateway):
    def deliver_message(self, message):
        os.closerange(3, 1 << 16)
        super().deliver_message(message)
'''


def test_a_gateway_that_closes_every_file_above_stderr_leaves_the_verdicts_and_the_report(tmp_path: Path) -> None:
    """The fourth audit of hostile gateways: `os.closerange(3, …)` took the copies of stdout and
    stderr the runner keeps to put them back, and the run ended in a traceback (EBADF) with no
    verdict. The reference's store is in memory, so it goes on and passes."""
    done = run_in_a_process(tmp_path, CLOSES_FILES, "Closes")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "2 scenarios, 2 passed, 0 failed"
    assert json.loads((tmp_path / "r" / "summary.json").read_text())["totals"]["pass"] == 2


LEAKS = '''
from reference_impl import ReferenceGateway


class Leaks(ReferenceGateway):
    answered = 0

    def deliver_message(self, message):
        type(self).answered += 1  # a count kept on the class: the next scenario's instance starts from it
        if type(self).answered <= 1:
            super().deliver_message(message)
'''


def test_a_gateway_that_sets_state_on_its_class_is_its_error_and_the_next_scenario_starts_clean(tmp_path: Path) -> None:
    """The fourth audit of hostile gateways (and the audit before it): what an in-process gateway
    sets on its class is there for the next scenario's fresh instance; a method replaced so failed
    every later scenario, `--check-determinism` blaming a real clock. Now each scenario's class is
    put back as it was, and a change is that scenario's error."""
    done = run_in_a_process(tmp_path, LEAKS, "Leaks")
    assert done.returncode == 1, done.stderr
    out = done.stdout.splitlines()
    leak = ("the gateway rebound Leaks.answered in process (put back): set on its class, it would leak into the next "
            "scenario; --isolate runs a gateway in a child")
    assert out[1].endswith(leak) and out[3].endswith(leak), out
    assert out[-1] == "2 scenarios, 0 passed, 2 failed (2 gateway errors)"


LIMITS_FILES = '''
import resource

from reference_impl import ReferenceGateway


class NoFiles(ReferenceGateway):
    def deliver_message(self, message):
        resource.setrlimit(resource.RLIMIT_FSIZE, (0, resource.RLIM_INFINITY))
        super().deliver_message(message)
'''


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX resource limits")
def test_a_file_size_limit_a_gateway_leaves_does_not_lose_the_report(tmp_path: Path) -> None:
    """The fourth audit of hostile gateways: an `RLIMIT_FSIZE` of 0 set in a gateway call was
    still in force when the report was written (`File too large`, a traceback, no report). The
    process's limits and umask after a run are the ones before it."""
    done = run_in_a_process(tmp_path, LIMITS_FILES, "NoFiles")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "2 scenarios, 2 passed, 0 failed"
    assert json.loads((tmp_path / "r" / "summary.json").read_text())["totals"]["pass"] == 2
