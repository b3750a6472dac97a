"""One table per event kind (`sim.kinds.KINDS`): every stage has a handler for every kind, a stage
missing one is refused at import naming the kind and the stage, and `Profile.unsupported` may
name only the table's optional kinds, the settings and the commands."""

from __future__ import annotations

from dataclasses import replace

import pytest

import conformance.harness.events
import sim.generate
import sim.load_events
import sim.shrink
import sim.writer
from conformance.features import EVENT_KINDS, FEATURES
from conformance.harness import values
from conformance.harness.runner import run_scenario
from conformance.transport.wire import profile_from_wire
from reference_impl.gateway import ReferenceGateway
from sim.kinds import COVERED, KINDS, STAGES, KindNotCovered, covered
from sim.loader import load_text
from sim.scenario import EVENT_TYPES
from sim.writer import dump_text

EVERY_KIND = """
name: every-kind
config: {providers: [{name: hindsight}]}
events:
  - message: alice
  - command: /new
    chat: alice
  - delegate: alice
  - advance: 1m
  - sigterm: true
  - restart: true
  - crash: true
  - restart: true
    config: {reset: {mode: idle, idle_minutes: 30}}
  - delete_session: alice
  - delete_parent: alice
  - db_locked: 10s
  - backend_fail: hindsight
    for: 1m
  - backend_slow: hindsight
    for: 1m
    delay: 5s
  - checkpoint: here
  - crash_at: {point: p, hit: 2, restart_after: 5s}
"""


def test_every_stage_handles_every_kind() -> None:
    assert set(STAGES) <= COVERED  # each stage's module checked its handlers when it was imported
    assert list(KINDS) == list(EVENT_TYPES)
    assert {name: kind.type for name, kind in KINDS.items()} == EVENT_TYPES
    stages = {"load": sim.load_events._READERS, "write": sim.writer._WRITERS, "generate": sim.generate._STEPS,
              "shrink": sim.shrink._NAMES, "apply": conformance.harness.events.APPLY}
    assert set(stages) == set(STAGES)
    for handlers in stages.values():
        assert list(handlers) == list(KINDS)


def test_a_stage_without_a_handler_for_a_kind_is_refused_naming_both() -> None:
    handlers = {name: object() for name in KINDS if name != "db_locked"}
    with pytest.raises(KindNotCovered, match="no write handler for event kind 'db_locked'"):
        covered("write", handlers)
    with pytest.raises(KindNotCovered, match="apply handler for 'db_lock', which is no event kind"):
        covered("apply", {**handlers, "db_locked": object(), "db_lock": object()})


def test_a_file_with_every_kind_loads_writes_and_loads_back_alike() -> None:
    scenario = load_text(EVERY_KIND)
    assert [e.kind for e in scenario.events if e.kind != "restart"] == [k for k in KINDS if k != "restart"]
    assert replace(load_text(dump_text(scenario)), source="", header="") == replace(scenario, source="", header="")


def test_unsupported_may_name_the_optional_kinds_the_settings_and_the_commands() -> None:
    assert {name for name, kind in KINDS.items() if kind.optional} == EVENT_KINDS
    assert EVENT_KINDS <= FEATURES
    assert not {"advance", "checkpoint", "crash_at"} & FEATURES  # the harness's own: a gateway cannot lack them
    assert "message" not in FEATURES  # what every scenario drives: a gateway without it would pass by doing nothing
    assert {"muted", "providers", "/resume"} <= FEATURES


class UnknownFeature(ReferenceGateway):
    def profile(self, config):  # type: ignore[no-untyped-def]
        return replace(super().profile(config), unsupported=frozenset({"delegate", "dbl_locked"}))


def test_an_unknown_unsupported_name_is_refused_in_process() -> None:
    result = run_scenario(load_text(EVERY_KIND), UnknownFeature(), "unknown-feature")
    assert result.failure is not None
    assert result.failure.event == "profile"
    assert "bad value in answer to profile: unsupported: unknown name 'dbl_locked'; known: " in result.failure.message


class WithoutMessages(ReferenceGateway):
    def profile(self, config):  # type: ignore[no-untyped-def]
        return replace(super().profile(config), unsupported=frozenset({"message", "command", "delegate"}))


def test_a_gateway_cannot_declare_messages_unsupported() -> None:
    """The laziest gateway: it declared messages (and commands and delegates) unsupported, every
    one was skipped, nothing was judged, and 52 of the 68 catalog scenarios passed. Now its
    profile is refused, in process and over the wire, saying why."""
    result = run_scenario(load_text(EVERY_KIND), WithoutMessages(), "without-messages")
    assert not result.passed and result.failure is not None and result.failure.event == "profile"
    assert "unsupported: 'message' cannot be declared: every gateway takes messages" in result.failure.message
    with pytest.raises(values.BadValue, match="'message' cannot be declared"):
        profile_from_wire({"finalization": "eager", "latency": 0, "crash_durable": True, "sweep_interval": 0,
                           "unsupported": ["message"]})


def test_an_unknown_unsupported_name_is_refused_over_the_wire() -> None:
    with pytest.raises(values.BadValue, match="unsupported: unknown name 'dbl_locked'"):
        profile_from_wire({"finalization": "eager", "latency": 0, "crash_durable": True, "sweep_interval": 0,
                           "unsupported": ["delegate", "dbl_locked"]})
    assert profile_from_wire({"finalization": "eager", "latency": 0, "crash_durable": True, "sweep_interval": 0,
                              "unsupported": ["delegate"]}).unsupported == {"delegate"}
