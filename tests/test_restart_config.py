"""A restart may change the configuration (issue #21, format gaps): the file format and its
errors, the writer's round trip, the oracle judging by the policy in force at each instant,
and a gateway declaring it cannot (`restart_config`, skipped whole)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from conformance.checks.model import RunModel
from conformance.cli.lines import skipped_note
from conformance.harness.runner import run_scenario
from conformance.harness.suite import catalog_paths, outcome
from reference_impl.gateway import ReferenceGateway
from reference_impl.variants import make
from sim.document import ScenarioError
from sim.loader import load_file, load_text
from sim.scenario import ConfigChange, ResetPolicy, Restart
from sim.writer import dump_text

# Events start on line 8.
HEAD = "name: x\nstart: 2026-03-02T09:00\nconfig:\n  reset: {mode: idle, idle_minutes: 30}\nchats:\n  alice: {}\nevents:\n"
CHANGES = next(p for p in catalog_paths() if p.stem == "58-restart-changes-policy")


def test_a_restart_config_loads_and_round_trips() -> None:
    text = HEAD + ("  - sigterm: true\n  - restart: true\n    config:\n      reset: {mode: none}\n"
                   "      reset_by_chat_type: {group: {mode: daily, at_hour: 5}}\n")
    scenario = load_text(text, "x.yaml")
    restart = scenario.events[1]
    assert isinstance(restart, Restart)
    assert restart.change == ConfigChange(reset=ResetPolicy("none"),
                                          reset_by_chat_type=(("group", ResetPolicy("daily", at_hour=5)),))
    assert replace(load_text(dump_text(scenario), "x.yaml"), source="x.yaml") == scenario
    changed = restart.change.apply(scenario.config)
    assert (changed.reset.mode, changed.reset_by_chat_type, changed.reset_by_platform) == ("none", restart.change.reset_by_chat_type, ())


@pytest.mark.parametrize(("events", "message"), [
    ("  - restart: true\n    config: {cache_cap: 3}\n",
     "x.yaml:9: events[0].config.cache_cap: only the reset policy can change at a restart: reset, reset_by_platform, reset_by_chat_type"),
    ("  - restart: true\n    config: {reset: default}\n",
     "x.yaml:9: events[0].config.reset: expected a policy like {mode: none}, got 'default'"),
    ("  - restart: true\n    config: {reset: {mode: sometimes}}\n",
     "x.yaml:9: events[0].config.reset.mode: expected one of idle, daily, both, none, got 'sometimes'"),
    ("  - restart: true\n    config: {}\n",
     "x.yaml:9: events[0].config: expected at least one of reset, reset_by_platform, reset_by_chat_type"),
    ("  - sigterm: true\n    config: {reset: {mode: none}}\n",
     "x.yaml:9: events[0].config: only a restart can change the configuration"),
])
def test_a_bad_restart_config_names_file_line_and_field(events: str, message: str) -> None:
    with pytest.raises(ScenarioError) as caught:
        load_text(HEAD + events, "x.yaml")
    assert str(caught.value) == message


def test_the_oracle_judges_by_the_policy_in_force() -> None:
    """58: idle 30m until the SIGTERM at 09:10, none from then on (the restart at 09:15 brought it)."""
    result = run_scenario(load_file(CHANGES), ReferenceGateway(), "reference")
    assert outcome(result) == "pass"
    m = RunModel.build(result.records)
    stop = next(r.t for r in result.records if r.kind == "sigterm")
    assert [(m.policy("alice", t).mode) for t in (stop - 1, stop, stop + 1)] == ["idle", "none", "none"]
    assert [(seg.session, seg.boundary) for seg in m.segments["alice"]] == [("s1", None)]
    restart = next(r for r in result.records if r.kind == "restart")
    assert restart.d("config")["reset"] == {"mode": "none"}


def test_the_variant_keeping_the_old_policy_fails() -> None:
    result = run_scenario(load_file(CHANGES), make("restart-keeps-old-policy"), "reference:restart-keeps-old-policy")
    assert {name for name, v in result.verdicts.items() if v.status == "fail"} == {"I1", "I6"}


class CannotReconfigure(ReferenceGateway):
    def profile(self, config):  # type: ignore[no-untyped-def]
        return replace(super().profile(config), unsupported=frozenset({"restart_config"}))


def test_a_gateway_that_cannot_change_its_config_at_a_restart_is_not_judged() -> None:
    result = run_scenario(load_file(CHANGES), CannotReconfigure(), "cannot")
    assert outcome(result) == "skip"
    assert "not judged: the scenario uses restart_config" in skipped_note(result)
    plain = load_text(HEAD + "  - sigterm: true\n  - restart: true\n", "x.yaml")
    assert outcome(run_scenario(plain, CannotReconfigure(), "cannot")) == "pass"  # a plain restart is judged as ever
