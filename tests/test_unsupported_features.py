"""Features a gateway declares it lacks are skipped and said so, never judged; `reset: default`."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest

from conformance.adapter import Profile
from conformance.cli.lines import skipped_note, summary_line
from conformance.features import FEATURES
from conformance.harness.runner import run_scenario
from conformance.harness.suite import outcome
from reference_impl.gateway import ReferenceGateway
from sim.loader import load_text
from sim.scenario import ResetPolicy
from sim.writer import dump_text

BASE = """
name: features
start: 2026-03-02T09:00
config: {reset: RESET}
events:
  - message: alice
  - message: alice
    muted: true
    after: 1m
  - advance: 40m
"""


class Lacking(ReferenceGateway):
    """The reference, declaring it has neither muted messages nor daily_min_idle_minutes."""

    def profile(self, config):  # type: ignore[no-untyped-def]
        return replace(super().profile(config), unsupported=frozenset({"muted", "daily_min_idle_minutes"}))


def test_unknown_feature_names_are_refused() -> None:
    assert {"muted", "daily_min_idle_minutes", "delegate"} <= FEATURES
    from conformance.harness import values

    assert values.profile(Profile(unsupported=frozenset({"muted"}))).unsupported == {"muted"}
    with pytest.raises(values.BadValue, match="unknown name 'mutted'"):
        values.profile(Profile(unsupported=frozenset({"mutted"})))


def test_a_muted_message_is_delivered_plain_and_noted() -> None:
    result = run_scenario(load_text(BASE.replace("RESET", "{mode: idle, idle_minutes: 30}")), Lacking(), "lacking")
    assert [r.d("muted") for r in result.records if r.kind == "message"] == [False, False]
    assert "muted, unsupported: delivered plain" in skipped_note(result)
    assert outcome(result) == "pass"


def test_a_pass_without_the_events_a_gateway_declared_away_says_so_on_the_last_line() -> None:
    """Declaring no crash points took `rotate-before-end-recorded` from 4 catalog failures to none,
    and only each scenario's line said why (an audit of lazy gateways, 2026-12-05): the summary
    line counts such passes by the kinds they skipped."""
    from conformance.harness.suite import catalog_paths
    from reference_impl.variants import VARIANTS
    from sim.loader import load_file

    class NoPoints(VARIANTS["rotate-before-end-recorded"]):  # type: ignore[misc, valid-type]
        def profile(self, config):  # type: ignore[no-untyped-def]
            return replace(super().profile(config), crash_points=frozenset())

    [path] = [p for p in catalog_paths() if "rotate-before-end-recorded" in load_file(p).catches]
    scenario = load_file(path)
    assert outcome(run_scenario(scenario, VARIANTS["rotate-before-end-recorded"](), "v")) == "fail"
    result = run_scenario(scenario, NoPoints(), "v")
    assert outcome(result) == "pass"
    assert "crash_at, a point the gateway does not declare" in skipped_note(result)
    assert summary_line([result]).endswith("; 1 pass skipped events the gateway declares it lacks (crash_at 1)")
    muted = run_scenario(load_text(BASE.replace("RESET", "{mode: idle, idle_minutes: 30}")), Lacking(), "lacking")
    assert summary_line([muted]).endswith("; 1 pass skipped events the gateway declares it lacks (muted 1)")


def test_a_harness_point_skipped_in_process_says_why_and_what_would_fire_it() -> None:
    """Catalog 86's `reply-sent` is the harness's own point, not the gateway's: in process it
    kills only a gateway that declares crash points (one that does not has promised no
    cooperation with an in-step kill). The line said "a point the gateway does not declare",
    which hid that `--isolate` fires it (the sixth audit of lazy gateways: a gateway that
    replied before writing passed 86 in process and failed it under `--isolate`)."""
    from conformance.harness.suite import catalog_paths
    from sim.loader import load_file

    class NoPoints(ReferenceGateway):
        def profile(self, config):  # type: ignore[no-untyped-def]
            return replace(super().profile(config), crash_points=frozenset())

    [path] = [p for p in catalog_paths() if p.name.startswith("86-")]
    result = run_scenario(load_file(path), NoPoints(), "v")
    assert outcome(result) == "pass"
    assert skipped_note(result) == (" (2 events skipped: crash_at reply-sent, the harness's point, in process with no "
                                    "crash point declared: --isolate kills there)")
    [skipped] = [r for r in result.records if r.kind == "skipped" and r.d("event") == "crash_at"][:1]
    assert skipped.d("point") == "reply-sent" and "--isolate kills any" in skipped.d("reason")


def test_a_config_using_an_unsupported_feature_is_skipped_whole() -> None:
    text = BASE.replace("RESET", "{mode: daily, at_hour: 4, daily_min_idle_minutes: 60}")
    result = run_scenario(load_text(text), Lacking(), "lacking")
    assert outcome(result) == "skip"
    assert {v.status for v in result.verdicts.values()} == {"skip"}
    assert "not judged: the scenario uses daily_min_idle_minutes" in skipped_note(result)
    assert summary_line([result]) == "1 scenario, 0 passed, 0 failed, 1 skipped"
    assert outcome(run_scenario(load_text(text), ReferenceGateway(), "reference")) == "pass"


def test_reset_default_round_trips_and_the_reference_reports_its_documented_default() -> None:
    scenario = load_text(BASE.replace("RESET", "default"))
    assert scenario.config.reset_default
    assert replace(load_text(dump_text(scenario)), source="", header="") == replace(scenario, source="", header="")
    result = run_scenario(scenario, ReferenceGateway(), "reference")
    assert result.records[0].d("config")["reset"] == "default"
    assert result.records[0].d("profile")["reset_default"]["mode"] == ResetPolicy().mode
    assert outcome(result) == "pass"


def test_reset_default_is_refused_by_a_gateway_that_reports_no_default() -> None:
    class NoDefault(ReferenceGateway):
        def profile(self, config):  # type: ignore[no-untyped-def]
            return replace(super().profile(config), reset_default=None)

    result = run_scenario(load_text(BASE.replace("RESET", "default")), NoDefault(), "nodefault")
    assert result.failure is not None and result.failure.message.startswith("NotImplementedError")
    assert "reset: default" in result.failure.message
    assert "a gateway without one declares 'reset_default' unsupported" in result.failure.message


def test_a_gateway_without_a_default_policy_declares_it_and_those_scenarios_are_skipped() -> None:
    """Catalog 66 was an error no expectation could cover for a gateway with no default policy."""
    class Declares(ReferenceGateway):
        def profile(self, config):  # type: ignore[no-untyped-def]
            return replace(super().profile(config), reset_default=None, unsupported=frozenset({"reset_default"}))

    result = run_scenario(load_text(BASE.replace("RESET", "default")), Declares(), "declares")
    assert outcome(result) == "skip"
    assert skipped_note(result) == " (not judged: the scenario uses reset_default, which the gateway declares unsupported)"
    assert outcome(run_scenario(load_text(BASE.replace("RESET", "{mode: idle, idle_minutes: 30}")), Declares(), "declares")) == "pass"


def test_reset_takes_a_policy_or_default_only() -> None:
    from sim.document import ScenarioError

    with pytest.raises(ScenarioError, match=re.escape("config.reset: expected a policy like {mode: idle} or 'default', got 'defualt'")):
        load_text(BASE.replace("RESET", "defualt"))


CUT_OFF = """
name: cut-off
start: 2026-03-02T09:00
config: {reset: {mode: none}, turn_latency: 1m}
events:
  - message: alice
  - sigterm: true
    after: STOP
  - restart: true
    after: 1m
  - message: alice
    after: 1m
"""


class NoRestartRecovery(ReferenceGateway):
    """The reference, declaring it cannot restart after a stop that cut a turn off (OpenClaw 2026.9.6)."""

    def profile(self, config):  # type: ignore[no-untyped-def]
        return replace(super().profile(config), unsupported=frozenset({"restart_after_cut_off_turn"}))


def test_a_restart_after_a_cut_off_turn_is_a_feature_of_the_timeline() -> None:
    from conformance.features import scenario_features
    from conformance.harness.suite import catalog_paths
    from sim.loader import load_file

    assert "restart_after_cut_off_turn" in FEATURES
    assert "restart_after_cut_off_turn" in scenario_features(load_text(CUT_OFF.replace("STOP", "30s")))
    assert "restart_after_cut_off_turn" not in scenario_features(load_text(CUT_OFF.replace("STOP", "2m")))  # answered by then
    flagged = [p.stem.split("-")[0] for p in catalog_paths() if "restart_after_cut_off_turn" in scenario_features(load_file(p))]
    assert flagged == ["27", "41", "103"]


def test_a_stop_at_a_replys_own_instant_cuts_it_off_only_when_it_runs_first() -> None:
    """`fuzz --fit` on OpenClaw 2026.9.6 (dense seeds 2 and 5): a SIGTERM at the very instant a
    reply was due, ordered before the timers, cut the turn off, yet the timeline was read as
    not cutting it (`until > t` only), and OpenClaw's restart failed its recovery claim. A
    `/stop` at that instant abandons the turn: nothing is owed after it."""
    from conformance.features import scenario_features

    at_reply = CUT_OFF.replace("after: STOP", "after: 1m\n    order: ORDER")
    assert "restart_after_cut_off_turn" in scenario_features(load_text(at_reply.replace("ORDER", "before-timers")))
    assert "restart_after_cut_off_turn" not in scenario_features(load_text(at_reply.replace("ORDER", "after-timers")))
    stopped = CUT_OFF.replace("  - sigterm: true\n    after: STOP", "  - command: /stop\n    chat: alice\n    after: 30s\n"
                              "  - sigterm: true\n    order: before-timers")
    assert "restart_after_cut_off_turn" not in scenario_features(load_text(stopped))


HELD_THEN_CUT = """
name: held-then-cut
start: 2026-03-02T09:00
config: {reset: {mode: none}, turn_latency: 1m}
events:
  - sigterm: true
  - message: alice
    after: 1m
  - restart: true
    after: 10m
  - STOP: true
    after: 30s
  - restart: true
    after: 1m
"""


def test_a_message_held_while_down_is_owed_its_reply_from_the_restart_that_delivers_it() -> None:
    """Sent at 09:01 while down, delivered at the 09:11 restart: a stop 30 s later cuts its turn
    off (timed from its send, it was answered by 09:02 and the stop cut nothing). A stop while
    down is skipped: it cuts nothing."""
    from conformance.features import cuts_off_a_turn_then_restarts

    for stop in ("crash", "sigterm"):
        assert cuts_off_a_turn_then_restarts(load_text(HELD_THEN_CUT.replace("STOP", stop)))
        assert not cuts_off_a_turn_then_restarts(load_text(HELD_THEN_CUT.replace("STOP", stop).replace("after: 30s", "after: 2m")))
    down_twice = HELD_THEN_CUT.replace("STOP", "crash").replace("  - restart: true\n    after: 10m\n", "  - crash: true\n    after: 1s\n")
    assert not cuts_off_a_turn_then_restarts(load_text(down_twice))  # delivered at the last restart: nothing stops after it
    assert outcome(run_scenario(load_text(HELD_THEN_CUT.replace("STOP", "crash")), NoRestartRecovery(), "lacking")) == "skip"


def test_a_restart_after_a_cut_off_turn_is_skipped_when_declared() -> None:
    assert outcome(run_scenario(load_text(CUT_OFF.replace("STOP", "30s")), NoRestartRecovery(), "lacking")) == "skip"
    assert outcome(run_scenario(load_text(CUT_OFF.replace("STOP", "2m")), NoRestartRecovery(), "lacking")) == "pass"


class NoProvidersNoRestartRecovery(ReferenceGateway):
    """Declares neither memory providers nor a restart after a cut-off turn (OpenClaw 2026.9.6)."""

    def profile(self, config):  # type: ignore[no-untyped-def]
        return replace(super().profile(config), unsupported=frozenset({"providers", "restart_after_cut_off_turn"}))


def test_a_scenario_skipped_whole_after_its_providers_were_left_out_is_a_skip() -> None:
    """The providers' `skipped` record comes first; the scenario's skip is still seen (catalog 27)."""
    text = CUT_OFF.replace("STOP", "30s").replace("turn_latency: 1m}", "turn_latency: 1m, providers: [{name: hindsight}]}")
    result = run_scenario(load_text(text), NoProvidersNoRestartRecovery(), "lacking")
    assert [r.d("scope") for r in result.records[1:3]] == ["config", "scenario"]
    assert outcome(result) == "skip" and "restart_after_cut_off_turn" in result.skipped


@pytest.mark.parametrize(("feature", "want"), [("shared_chat_ids", ["60", "105", "108", "116", "122"]),
                                                ("several_providers", ["118"])])
def test_chat_ids_shared_and_several_providers_are_features_of_the_scenario(feature: str, want: list[str]) -> None:
    """Two features a gateway's adapter may not drive (fifty-first session): OpenClaw's drives
    every chat as a DM peer of its own, so chats sharing a chat id passed there by construction;
    Hermes loads one external memory provider, so catalog 118 errored at start. A gateway that
    declares one is skipped on exactly the scenarios that use it."""
    from conformance.features import scenario_features
    from conformance.harness.suite import catalog_paths
    from sim.loader import load_file

    paths = {p.stem.split("-")[0]: p for p in catalog_paths()}
    assert [n for n, p in paths.items() if feature in scenario_features(load_file(p))] == want

    class Lacking(ReferenceGateway):
        def profile(self, config):  # type: ignore[no-untyped-def]
            return replace(super().profile(config), unsupported=frozenset({feature}))

    for number in want:
        assert outcome(run_scenario(load_file(paths[number]), Lacking(), "lacking")) == "skip"
    assert outcome(run_scenario(load_file(paths["01"]), Lacking(), "lacking")) == "pass"
