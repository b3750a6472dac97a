"""The engine's contract: (time, insertion) order, the clock at `until`, cancellable timers,
the event budget, and named random streams that are stable and independent."""

from __future__ import annotations

import random
from heapq import heappop, heappush

import pytest

from sim.clock import VirtualClock
from sim.engine import Engine, EventBudgetExceeded, derive_seed

START = 1_000_000


def make_engine(budget: int | None = None) -> Engine:
    return Engine(VirtualClock(START), seed=7, budget=budget)


def test_events_run_by_time_then_insertion_order() -> None:
    engine = make_engine()
    fired: list[str] = []
    for when, name in [(30, "c1"), (10, "a1"), (30, "c2"), (20, "b1"), (10, "a2"), (30, "c3")]:
        engine.call_at(START + when, fired.append, name)
    engine.run_until(START + 100)
    assert fired == ["a1", "a2", "b1", "c1", "c2", "c3"]


def test_events_added_at_the_current_time_run_after_those_already_due() -> None:
    engine = make_engine()
    fired: list[str] = []

    def first() -> None:
        fired.append("first")
        engine.call_later(0, fired.append, "added by first")
        engine.call_at(START, fired.append, "in the past, clamped to now")

    engine.call_at(START + 5, first)
    engine.call_at(START + 5, fired.append, "second")
    engine.run_until(START + 5)
    assert fired == ["first", "second", "added by first", "in the past, clamped to now"]


def test_order_matches_a_plain_time_then_sequence_heap() -> None:
    """Chained wake-ups with many ties (delays 0..3) fire exactly as a (time, seq) heap orders them."""
    delays = random.Random(1).choices(range(4), k=400)

    expected: list[tuple[int, int]] = []
    queue: list[tuple[int, int, int, int]] = []  # (time, seq, process, next delay index)
    seq = 0
    for process in range(40):
        seq += 1
        heappush(queue, (delays[process * 10], seq, process, 1))
    while queue:
        now, _, process, index = heappop(queue)
        expected.append((now, process))
        if index < 10:
            seq += 1
            heappush(queue, (now + delays[process * 10 + index], seq, process, index + 1))

    engine = Engine(VirtualClock(0))
    fired: list[tuple[int, int]] = []

    def wake(process: int, index: int) -> None:
        fired.append((engine.now, process))
        if index < 10:
            engine.call_later(delays[process * 10 + index], wake, process, index + 1)

    for process in range(40):
        engine.call_later(delays[process * 10], wake, process, 1)
    engine.run_until(10_000)
    assert fired == expected


def test_run_until_leaves_the_clock_at_until_and_later_events_queued() -> None:
    engine = make_engine()
    fired: list[int] = []
    engine.call_at(START + 10, lambda: fired.append(engine.now))
    engine.call_at(START + 500, lambda: fired.append(engine.now))
    engine.run_until(START + 100)
    assert fired == [START + 10]
    assert engine.now == START + 100
    assert engine.peek() == START + 500
    engine.run_until(START + 50)  # the past: nothing runs and time stays put
    assert engine.now == START + 100


def test_step_runs_one_event_and_moves_the_clock_to_it() -> None:
    engine = make_engine()
    fired: list[str] = []
    engine.call_at(START + 7, fired.append, "a")
    engine.call_at(START + 7, fired.append, "b")
    assert engine.step()
    assert (fired, engine.now, engine.peek()) == (["a"], START + 7, START + 7)
    assert engine.step()
    assert not engine.step()
    assert fired == ["a", "b"]


def test_a_callback_that_steps_the_engine_neither_repeats_nor_loses_events() -> None:
    engine = make_engine()
    fired: list[str] = []

    def reentrant() -> None:
        fired.append("reentrant")
        engine.step()

    engine.call_at(START + 1, reentrant)
    engine.call_at(START + 1, fired.append, "taken by the nested step")
    engine.call_at(START + 1, fired.append, "third")
    engine.run_until(START + 2)
    assert fired == ["reentrant", "taken by the nested step", "third"]


def test_an_event_that_raises_leaves_the_rest_queued() -> None:
    engine = make_engine()
    fired: list[str] = []

    def boom() -> None:
        raise ValueError("boom")

    engine.call_at(START + 3, boom)
    engine.call_at(START + 3, fired.append, "after boom")
    with pytest.raises(ValueError, match="boom"):
        engine.run_until(START + 10)
    assert engine.peek() == START + 3
    engine.run_until(START + 10)
    assert fired == ["after boom"]
    assert engine.processed == 2


def test_cancelled_timers_do_not_fire() -> None:
    engine = make_engine()
    fired: list[str] = []
    kept = engine.timer(START + 10, fired.append, "kept")
    dropped = engine.timer(START + 10, fired.append, "dropped")
    dropped.cancel()
    engine.run_until(START + 20)
    assert fired == ["kept"]
    assert (kept.when, kept.cancelled, dropped.cancelled) == (START + 10, False, True)


def test_timer_in_the_past_fires_now() -> None:
    engine = make_engine()
    fired: list[int] = []
    handle = engine.timer(START - 5, lambda: fired.append(engine.now))
    engine.run_until(START)
    assert (handle.when, fired) == (START, [START])


def test_budget_raises_when_exceeded() -> None:
    engine = make_engine(budget=5)

    def forever() -> None:
        engine.call_later(1, forever)

    engine.call_later(1, forever)
    with pytest.raises(EventBudgetExceeded, match="budget of 5"):
        engine.run_until(START + 1_000)
    assert engine.processed == 6


def test_budget_counts_stepped_events_too() -> None:
    engine = make_engine(budget=2)
    for offset in range(3):
        engine.call_at(START + offset, lambda: None)
    assert engine.step() and engine.step()
    with pytest.raises(EventBudgetExceeded):
        engine.step()


def test_rng_streams_are_stable_across_processes() -> None:
    """Hard-coded draws: the stream comes from sha256 of 'seed/name', never from hash()."""
    assert derive_seed(7, "latency") == 15886326119617741932
    stream = make_engine().rng("latency")
    assert [stream.random() for _ in range(3)] == [0.5281837355101476, 0.24864833102872996, 0.04915185919276788]


def test_rng_streams_are_independent_of_each_other() -> None:
    engine = make_engine()
    first = engine.rng("latency")
    baseline = [first.random() for _ in range(5)]

    other = engine.rng("failures")
    for _ in range(100):  # heavy use of another stream, before and between draws
        other.random()
    latency = engine.rng("latency")
    draws = []
    for _ in range(5):
        draws.append(latency.random())
        other.random()
    assert draws == baseline
    assert [engine.rng("failures").random() for _ in range(5)] != baseline
    assert Engine(VirtualClock(0), seed=8).rng("latency").random() != baseline[0]
