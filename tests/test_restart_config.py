"""A restart may change the configuration (issue #21, format gaps): the file format and its
errors, the writer's round trip, the oracle judging by the policy in force at each instant,
and a gateway declaring it cannot (`restart_config`, skipped whole)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from check_logs import edit, find, messages

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


# -- an old policy's boundary that the stop came before (found by generated seeds) ----------

def _run(text: str, gateway: ReferenceGateway | None = None) -> tuple[str, RunModel, dict[str, str]]:
    result = run_scenario(load_text(text, "x.yaml"), gateway or ReferenceGateway(), "reference")
    failing = {name: v.violations[0].message for name, v in result.verdicts.items() if v.status == "fail"}
    return outcome(result), RunModel.build(result.records), failing


def _head(watcher: str, reset: str) -> str:
    return (f"name: x\nzone: UTC\nstart: 2026-06-16T15:25\nconfig:\n  reset: {reset}\n  watcher_interval: {watcher}\n"
            "chats:\n  carol: {}\nevents:\n")


EAGER_CUT = _head("5m", "{mode: idle, idle_minutes: 15}") + (
    "  - message: carol\n  - sigterm: true\n    at: '15:43'\n"  # idle past 15:40, its end owed by 15:45: the stop came first
    "  - restart: true\n    at: '15:44'\n    config: {reset: {mode: daily, at_hour: 21}}\n  - advance: 8h\n")


def test_an_end_the_stop_came_before_is_judged_again_by_the_new_policy() -> None:
    """The old policy's idle boundary (15:40) fell before the SIGTERM (15:43), but its end was not
    owed until 15:45: the restarted gateway, with daily-at-21 now, keeps the session until 21:00.
    Before the fix the oracle owed the old end by 15:49 (restart plus latency) and failed the
    reference."""
    verdict, m, failing = _run(EAGER_CUT)
    assert verdict == "pass", failing
    [seg] = m.segments["carol"]
    assert (seg.reason, m.at(seg.boundary)) == ("daily", "21:00")


def test_an_end_owed_before_the_stop_still_counts() -> None:
    """Both ways: stopped at 15:50, past the 15:45 the eager end was owed by, the old boundary
    stands (the reference ended s1 at its 15:45 tick); a gateway whose watcher never ends a
    session is held to it."""
    owed = EAGER_CUT.replace("at: '15:43'", "at: '15:50'").replace("at: '15:44'", "at: '15:51'")
    verdict, m, failing = _run(owed)
    assert verdict == "pass", failing
    assert [(seg.reason, m.at(seg.boundary)) for seg in m.segments["carol"]] == [("idle", "15:40")]

    class NoWatcher(ReferenceGateway):
        def watched(self, route):  # type: ignore[no-untyped-def]
            return False

    _, _, failing = _run(owed, NoWatcher())
    assert "I1" in failing and "reached its idle boundary at 15:40" in failing["I1"], failing


LAZY_CUT = _head("lazy", "{mode: idle, idle_minutes: 30}") + (
    "  - message: carol\n  - crash: true\n    at: '16:30'\n"  # idle past 15:55; lazy: owed at the next message
    "  - restart: true\n    at: '16:31'\n    config: {reset: {mode: none}}\n  - message: carol\n    at: '16:40'\n")


def test_a_lazy_end_not_yet_owed_at_a_crash_follows_the_new_policy() -> None:
    """Lazy, the end the old policy found (15:55) is owed only before the next message, which
    comes after a restart that brought `none`: the message lands in the same session. Both
    ways: a gateway still judging by the old policy at that message ends the session there,
    which the new policy does not justify."""
    verdict, m, failing = _run(LAZY_CUT)
    assert verdict == "pass", failing
    assert [(seg.session, seg.boundary) for seg in m.segments["carol"]] == [("s1", None)]
    _, _, failing = _run(LAZY_CUT, make("restart-keeps-old-policy"))
    assert set(failing) >= {"I1", "I6"}, failing


def test_a_message_at_the_stops_instant_is_judged_by_the_old_policy() -> None:
    """A message at the very instant of the SIGTERM, before it, came under the old policy (none):
    the new one (idle 1m) finds the entry past only from the stop on. Before the fix the oracle
    compared instants alone and sent the message to a new session."""
    text = _head("5m", "{mode: none}") + (
        "  - message: carol\n  - message: carol\n    at: '15:26:17'\n  - sigterm: true\n"
        "  - restart: true\n    at: '15:26:41'\n    config: {reset: {mode: idle, idle_minutes: 1}}\n  - advance: 10m\n")
    verdict, m, failing = _run(text)
    assert verdict == "pass", failing
    assert [len(seg.turns) for seg in m.segments["carol"]] == [2]


def test_an_end_a_crash_cut_short_and_the_restart_finished_counts() -> None:
    """A message past the old boundary began the rotation; a crash point fired inside it, and
    the restart (bringing `none`) finished the end: the gateway acted on the old boundary, and
    the new policy does not undo that."""
    text = _head("5m", "{mode: idle, idle_minutes: 1}") + (
        "  - message: carol\n  - crash_at: {point: route-rotated, hit: 1, restart_after: 55s}\n    at: '15:26:30'\n"
        "  - message: carol\n  - restart: true\n    at: '15:26:47'\n    config: {reset: {mode: none}}\n")
    verdict, m, failing = _run(text)
    assert verdict == "pass", failing
    assert [seg.reason for seg in m.segments["carol"]] == ["idle"]  # t2 died with the process (never admitted)


def test_ends_of_earlier_lives_do_not_count_as_acting_on_the_old_boundary() -> None:
    """Lazy; two /resumes past boundaries reopen s1 twice, each delivering the end of the life
    before it; the third life's idle boundary (20:48:20) passes, a crash, and the restart brings
    idle 60m for DMs: t2 (20:52:02) belongs in s1. Before the fix the second life's end, delivered
    at the second /resume, was read as the gateway having ended the third (generated seed 7831)."""
    text = ("name: x\nzone: UTC\nstart: 2026-01-06T20:29:57.999\nconfig:\n  reset: {mode: idle, idle_minutes: 5}\n"
            "  watcher_interval: lazy\nchats:\n  alice: {}\nevents:\n  - message: alice\n"
            "  - {command: /resume, chat: alice, after: 6m12s}\n  - {command: /resume, chat: alice, after: 7m10s}\n"
            "  - {crash: true, after: 7m26s}\n  - restart: true\n    config: {reset_by_chat_type: {dm: {mode: idle, idle_minutes: 60}}}\n"
            "    after: 1m\n  - {message: alice, after: 17s}\n")
    verdict, m, failing = _run(text)
    assert verdict == "pass", failing
    assert [seg.session for seg in m.segments["alice"]] == ["s1", "s1", "s1"]
    last = m.segments["alice"][-1]
    assert [t.id for t in last.turns] == ["t2"] and m.at(last.boundary) == "21:52:03"  # idle 60m after t2, by the new policy


# Dense seed 795 with crash points, shrunk: a /resume cut by a crash point is handed over again
# at the restart, whose step finishes the end of s2's first life and then reopens s2 (a second
# life, idle 5 minutes). Its old-policy boundary (16:16:39) is not yet owed at the SIGTERM
# (16:18:10), so the restart's new policy (daily at 18:00) judges it. The oracle took the end of
# s2's first life, in the step before, for the gateway acting on the second's boundary.
RESUMED_LIFE = """name: resumed-life
start: '2026-04-04T16:00:51'
config: {reset: default, watcher_interval: 5m}
chats:
  bob: {platform: discord, chat_type: group, user: u2, chat_id: alice}
events:
- {crash: true}
- restart: true
  config:
    reset_by_chat_type:
      group: {mode: idle, idle_minutes: 5}
  after: 53s
- {message: bob, after: 1m}
- {message: bob, after: 7m44s}
- crash_at: {point: end-recorded, hit: 1, restart_after: 30s}
  after: 41s
- {command: /resume, chat: bob}
- {command: /resume, chat: bob}
- {sigterm: true, after: 7m1s}
- restart: true
  config:
    reset_by_chat_type:
      group: {mode: daily, at_hour: 18, daily_min_idle_minutes: 10}
  after: 52s
"""


def test_a_resumed_lifes_boundary_is_judged_by_the_new_policy_not_kept_by_an_earlier_lifes_end() -> None:
    records = list(run_scenario(load_text(RESUMED_LIFE), ReferenceGateway(), "reference", check=False).records)
    assert messages(records, "I1") == [] and messages(records, "I6") == []
    ends = [(r.t, r.step) for r in records if r.kind == "on_session_end" and r.session == "s2"]
    assert len(ends) == 2 and ends[0][1] == "7.1"  # the first life's, in the restart's step; the second's at 18:04
    # Both ways: the second life ended by the old policy after the restart (at its first tick,
    # 16:24:02) is an end before any boundary of the policy in force.
    second = find(records, "on_session_end", session="s2", nth=1)
    early = edit(records, second, t=records[second].t - 100 * 60_000)  # 18:04:02 -> 16:24:02
    assert messages(early, "I1") == ["session s2 got on_session_end at 16:24:02, before its daily boundary at 18:00 "
                                     "(daily at 18:00 UTC, after 10m quiet; session began 16:11:39)"]
