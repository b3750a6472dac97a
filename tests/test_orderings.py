"""Same-instant orderings (issue #21): an event runs after the timers due at its instant (the
default, as always) or before them (`order: before-timers`); and a record a timer produced
carries its own step ("k.n"), not the previous event's."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from conformance.harness.runner import run_scenario
from conformance.harness.swarm import with_fires
from conformance.observations import Obs, event_of
from reference_impl.registry import reference, variant
from sim.clock import VirtualClock
from sim.document import ScenarioError
from sim.engine import Engine
from sim.generate import scenario_for_seed
from sim.loader import load_file, load_text
from sim.scenario import AFTER_TIMERS, BEFORE_TIMERS, Message
from sim.shrink import shrink
from sim.weights import ORDER_PERCENT
from sim.writer import dump_text

CATALOG = Path(__file__).resolve().parents[1] / "conformance" / "catalog"

# A message 2 s after another meets the first one's answer (turn latency 2 s) at one instant.
BURST = """\
name: burst
start: 2026-03-02T09:00
events:
  - message: alice
  - message: alice
    after: 2s
    order: {order}
"""


def kinds_at(records: list[Obs], t: int) -> list[str]:
    return [r.kind for r in records if r.t == t and r.kind in ("message", "reply", "llm_request")]


def test_run_before_leaves_the_instant_s_callbacks_queued_behind_what_comes_next() -> None:
    engine = Engine(VirtualClock(0))
    seen: list[str] = []
    engine.call_at(5, seen.append, "due at 5")
    engine.call_at(4, seen.append, "due at 4")
    engine.run_before(5)
    assert seen == ["due at 4"] and engine.now == 5
    engine.call_later(0, seen.append, "queued at 5 by the event")  # joins the end of the instant's queue
    engine.run_until(5)
    assert seen == ["due at 4", "due at 5", "queued at 5 by the event"]


def test_order_loads_writes_back_and_defaults_to_after_timers() -> None:
    before = load_text(BURST.format(order="before-timers"))
    assert [e.order for e in before.events] == [AFTER_TIMERS, BEFORE_TIMERS]
    assert "order: before-timers" in dump_text(before)
    assert replace(load_text(dump_text(before)), source="", header="") == replace(before, source="", header="")
    after = load_text(BURST.format(order="after-timers"))
    assert "order" not in dump_text(after)  # the default is left out: old files and new ones read alike
    assert after.events == replace(before, events=tuple(replace(e, order=AFTER_TIMERS) for e in before.events)).events


def test_a_bad_order_names_file_line_and_field() -> None:
    with pytest.raises(ScenarioError) as caught:
        load_text(BURST.format(order="first"), "x.yaml")
    assert str(caught.value) == "x.yaml:7: events[1].order: expected one of after-timers, before-timers, got 'first'"


def test_the_event_meets_the_timer_in_the_order_it_says() -> None:
    t = load_text(BURST.format(order="after-timers")).events[1].t
    after = run_scenario(load_text(BURST.format(order="after-timers")), reference(), "r")
    before = run_scenario(load_text(BURST.format(order="before-timers")), reference(), "r")
    assert kinds_at(list(after.records), t) == ["reply", "message", "llm_request"]  # t1 answered, then t2 starts
    assert kinds_at(list(before.records), t) == ["message", "reply", "llm_request"]  # t2 waits behind t1's answer
    assert after.passed and before.passed


def test_timer_records_carry_their_own_step() -> None:
    result = run_scenario(load_file(CATALOG / "54-tick-then-new-same-instant.yaml"), reference(), "r")
    steps = {(r.kind, r.session): r.step for r in result.records if r.kind in ("reply", "on_session_end", "command")}
    assert steps[("reply", "s1")] == "1.1"  # t1's answer: the first callback after event 1
    assert steps[("on_session_end", "s1")] == "1.2"  # the watcher's tick, before the /new (event 2) at its instant
    assert steps[("command", None)] == 2
    assert event_of("1.2") == 1 and event_of(2) == 2
    first_order = run_scenario(load_file(CATALOG / "55-new-then-tick-same-instant.yaml"), reference(), "r")
    end = next(r for r in first_order.records if r.kind == "on_session_end" and r.session == "s1")
    assert end.step == 2  # the /new noticed the expiry itself, in its own step


PAIRS = [  # (the timers first, the event first, the variant that fails where the order matters, which file it fails)
    ("52-tick-then-message-same-instant", "53-message-then-tick-same-instant", "message-reset-fires-no-hooks", 1),
    ("54-tick-then-new-same-instant", "55-new-then-tick-same-instant", "new-ends-ended-session", 0),
    ("56-restart-then-held-same-instant", "57-held-then-restart-same-instant", "delegate-always-skipped", 0),
]


@pytest.mark.parametrize(("timers_first", "event_first", "bug", "fails"), PAIRS, ids=[p[2] for p in PAIRS])
def test_each_catalog_pair_is_proven_both_ways(timers_first: str, event_first: str, bug: str, fails: int) -> None:
    pair = [load_file(CATALOG / f"{name}.yaml") for name in (timers_first, event_first)]
    plain = [tuple(replace(e, order=AFTER_TIMERS) for e in s.events) for s in pair]
    assert plain[0] == plain[1] and pair[0].config == pair[1].config  # the same scenario but for the order
    assert {e.order for e in pair[0].events} == {AFTER_TIMERS} and BEFORE_TIMERS in {e.order for e in pair[1].events}
    for scenario in pair:
        assert run_scenario(scenario, reference(), "reference").passed, scenario.name
    verdicts = [run_scenario(scenario, variant(bug), bug).passed for scenario in pair]
    assert verdicts == [fails != 0, fails == 0], f"{bug} fails only {pair[fails].name}"


def test_generated_orders_are_drawn_last_in_a_share_of_seeds() -> None:
    with_orders = [s for s in range(2000) if any(e.order == BEFORE_TIMERS for e in scenario_for_seed(s).events)]
    assert with_orders[:4] == [2, 11, 12, 18]  # seeds 0 and 1 keep their files byte for byte
    assert len(with_orders) == 210 and ORDER_PERCENT == 10  # the count docs/scenarios.md states
    seed = with_orders[0]
    scenario = scenario_for_seed(seed)
    assert replace(load_text(dump_text(scenario)), source="", header="") == scenario  # written so a replay is exact


def test_a_crash_point_fired_in_a_timer_arms_in_its_event_s_order() -> None:
    scenario = load_text(BURST.format(order="before-timers"))
    armed = with_fires(scenario, [(2, "p", 1, None)])
    assert [(type(e).__name__, e.order) for e in armed.events] == [
        ("Message", AFTER_TIMERS), ("CrashAt", BEFORE_TIMERS), ("Message", BEFORE_TIMERS)]


def test_shrinking_keeps_an_order_the_failure_needs_and_drops_one_it_does_not() -> None:
    needed = load_file(CATALOG / "53-message-then-tick-same-instant.yaml")

    def fails_i1(s: object) -> bool:
        return run_scenario(s, variant("message-reset-fires-no-hooks"), "v").verdicts["I1"].status == "fail"  # type: ignore[arg-type]

    kept = shrink(needed, fails_i1).scenario
    assert [e.order for e in kept.events if isinstance(e, Message)][-1] == BEFORE_TIMERS
    needless = replace(load_file(CATALOG / "54-tick-then-new-same-instant.yaml"))
    needless = replace(needless, events=tuple(replace(e, order=BEFORE_TIMERS) if isinstance(e, Message) else e
                                              for e in needless.events))

    def fails_double_end(s: object) -> bool:
        return run_scenario(s, variant("new-ends-ended-session"), "v").verdicts["I1"].status == "fail"  # type: ignore[arg-type]

    assert fails_double_end(needless)
    assert {e.order for e in shrink(needless, fails_double_end).scenario.events} == {AFTER_TIMERS}
