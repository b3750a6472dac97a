"""One virtual day of a busy gateway, judged by sessiongate, against a Hypothesis state machine.

The day: 100 chats, each sending messages with exponential gaps (mean 300 s) from 00:00 to
24:00 UTC, reset policy `both` (idle 30 min, daily at 04:00), LRU cap 50, watcher every
5 min, replies after 2 s: about 29,000 turns. sessiongate runs it as one scenario against
the reference gateway (real SQLite) and judges it with every check.

The peer, in the same process, is how one would test the same gateway without sessiongate:
a Hypothesis `RuleBasedStateMachine` whose rules are `advance` and `message`, replaying the
same day (a precondition on each rule enables exactly the one the day's next event needs, so
Hypothesis drives the identical timeline), with invariants checked after every step: idle
agents within the cap, every acknowledged turn in the store under its session, at most one
`on_session_end` per session and a finalize after each. It reuses sessiongate's harness
objects (virtual clock, engine, fake LLM, recorders) because the gateway needs them, and
neither the runner nor the checks. Its figure is steps/s: two steps per turn.

Hypothesis ends an example once its choice buffer is 80% full, so its one example covers only
the first few hundred turns. The table therefore also shows sessiongate on exactly those turns,
the machine class driven by a plain loop over the whole day (no Hypothesis engine), with and
without its invariants (without them it is the reference gateway alone: the floor for any
driver), and Hypothesis driving the same rules with nothing in them (its own cost a step,
which no gateway, however fast, takes away). The two lines above the last say what those
floors leave a turn for the two targets.

Run: python bench/gateway_day.py [--quick]. The last line is `ratio vs hypothesis: X.XX`
(sessiongate's turns/s over the day / Hypothesis's steps/s).
"""

from __future__ import annotations

import argparse
import gc
import random
from dataclasses import replace
from typing import Any

from common import machine, timed
from hypothesis import HealthCheck, settings
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule, run_state_machine_as_test

from conformance.adapter import Harness, Inbound, Scheduler
from conformance.harness.runner import run_scenario
from conformance.harness.spill import ObservationLog
from conformance.observers import FakeLLM, HookBus, MemoryBackend, Platform, RecordingProvider
from reference_impl import ReferenceGateway
from sim.clock import HOUR, MINUTE, SECOND, VirtualClock
from sim.engine import Engine
from sim.scenario import Chat, GatewayConfig, Message, ResetPolicy, Scenario

SEED = 9
START = 1_767_225_600_000  # 2026-01-01 00:00 UTC
CONFIG = GatewayConfig(
    reset=ResetPolicy(mode="both", idle_minutes=30, at_hour=4),
    cache_cap=50,
    idle_ttl=HOUR,
    watcher_interval=5 * MINUTE,
    turn_latency=2 * SECOND,
)


def gateway_day(chats: int = 100, hours: int = 24, mean_gap: int = 300 * SECOND, seed: int = SEED) -> Scenario:
    """The day as one scenario: each chat's messages at exponential gaps, merged in time order."""
    rng = random.Random(seed)
    end = START + hours * HOUR
    arrivals: list[tuple[int, int]] = []
    for number in range(chats):
        t = START
        while True:
            t += max(1, round(rng.expovariate(1 / mean_gap)))
            if t >= end:
                break
            arrivals.append((t, number))
    arrivals.sort()
    names = [f"c{number:03d}" for number in range(chats)]
    events = tuple(Message(t, chat=names[number], turn=f"t{i}", text="hello") for i, (t, number) in enumerate(arrivals, start=1))
    return Scenario(name=f"gateway-day-{chats}x{hours}h", seed=seed, start=START, config=CONFIG,
                    chats=tuple(Chat(name) for name in names), events=events)


def run_sessiongate(scenario: Scenario) -> int:
    """The whole scenario through the runner and every check; the number of turns judged."""
    result = run_scenario(scenario, ReferenceGateway(), "reference")
    if not result.passed:
        failed = {k: v.summary for k, v in result.verdicts.items() if v.status not in ("pass", "skip")}
        raise SystemExit(f"the reference gateway failed the day: {failed or result.failure}")
    return len(scenario.events)


class GatewayDay(RuleBasedStateMachine):
    """The day as a user would test the gateway with Hypothesis: rules feed it, invariants
    hold after every step. `day` is set on a subclass; `steps` counts rules run (all examples)."""

    day: Scenario
    steps = 0
    messages = 0

    def __init__(self) -> None:
        super().__init__()
        day = self.day
        self.events: list[Message] = [e for e in day.events if isinstance(e, Message)]
        self.times = [e.t for e in self.events] + [day.end + day.config.horizon()]  # then quiescence
        self.chats = {chat.name: chat for chat in day.chats}
        self.clock = VirtualClock(day.start, day.zone)
        self.engine = Engine(self.clock, seed=day.seed)
        self.log = ObservationLog(self.clock.now)
        self.gateway = ReferenceGateway()
        recorder = MemoryBackend("recorder", self.log, self.clock.now)
        llm = FakeLLM(self.log, self.engine, day.config.turn_latency, self.gateway.deliver_reply)
        self.gateway.start(day.config, Harness(self.clock, Scheduler(self.engine), llm, Platform(self.log),
                                               RecordingProvider(self.log, recorder), {"recorder": recorder},
                                               HookBus(self.log), self.log))
        self.next = 0  # the next message; time has reached it iff `arrived`
        self.arrived = False
        self.read = {"stored": 0, "ends": 0}  # log records each invariant has read
        self.ended: set[str] = set()
        self.finalized: set[str] = set()

    def _new(self, reader: str) -> list[Any]:
        records = self.log.records[self.read[reader]:]
        self.read[reader] = len(self.log.records)
        return records

    @precondition(lambda self: not self.arrived and self.next < len(self.times))
    @rule()
    def advance(self) -> None:
        """Let virtual time run to the next message (replies, watcher ticks, sweeps), or past
        every boundary after the last one."""
        type(self).steps += 1
        self.engine.run_until(self.times[self.next])
        if self.next == len(self.events):
            self.next += 1  # quiescence reached: nothing more to do
        else:
            self.arrived = True

    @precondition(lambda self: self.arrived)
    @rule()
    def message(self) -> None:
        type(self).steps += 1
        type(self).messages = max(type(self).messages, self.next + 1)
        event = self.events[self.next]
        self.gateway.deliver_message(Inbound(self.chats[event.chat], f"[{event.turn}] {event.text}"))
        self.next, self.arrived = self.next + 1, False

    @invariant()
    def idle_agents_within_cap(self) -> None:
        idle = sum(1 for _session, busy in self.gateway.resources().cached if not busy)
        assert idle <= self.day.config.cache_cap, f"{idle} idle agents cached"

    @invariant()
    def acknowledged_turns_stored(self) -> None:
        for record in self._new("stored"):
            if record.kind == "reply":
                (count,) = self.gateway.store.db.execute(
                    "SELECT COUNT(*) FROM messages WHERE session_id = ? AND turn_id = ? AND role = 'user'",
                    (record.session, record.turns[0]),
                ).fetchone()
                assert count == 1, f"{record.turns[0]} stored {count} times in {record.session}"

    @invariant()
    def sessions_end_once_then_finalize(self) -> None:
        for record in self._new("ends"):
            if record.kind == "on_session_end":
                assert record.session not in self.ended, f"{record.session} ended twice"
                self.ended.add(record.session)
            elif record.kind == "on_session_finalize":
                assert record.session in self.ended and record.session not in self.finalized, record.session
                self.finalized.add(record.session)

    def teardown(self) -> None:
        self.gateway.sigterm()


def machine_for(day: Scenario) -> type[GatewayDay]:
    return type("GatewayDayMachine", (GatewayDay,), {"day": day, "steps": 0, "messages": 0})


def run_hypothesis(day: Scenario) -> tuple[int, int]:
    """Hypothesis drives the machine (one example): the steps it ran and the turns they
    covered. It ends an example itself once its choice buffer nears full (8K choices), so it
    covers a prefix of the day."""
    factory = machine_for(day)
    run_state_machine_as_test(factory, settings=settings(
        max_examples=1, stateful_step_count=2 * len(day.events) + 1, derandomize=True, deadline=None,
        database=None, suppress_health_check=list(HealthCheck)))
    return factory.steps, factory.messages


class EmptyDay(GatewayDay):
    """The day's machine with no gateway and no engine behind its rules, and invariants that
    check nothing: what Hypothesis itself costs a step. Even a gateway that cost nothing
    could not make its steps faster."""

    def __init__(self) -> None:
        RuleBasedStateMachine.__init__(self)
        self.events = [e for e in self.day.events if isinstance(e, Message)]
        self.times = [e.t for e in self.events] + [self.day.end]
        self.chats = {chat.name: chat for chat in self.day.chats}
        self.engine = self.gateway = _Nothing()
        self.next, self.arrived = 0, False

    @invariant()
    def idle_agents_within_cap(self) -> None:
        pass

    @invariant()
    def acknowledged_turns_stored(self) -> None:
        pass

    @invariant()
    def sessions_end_once_then_finalize(self) -> None:
        pass

    def teardown(self) -> None:
        pass


class _Nothing:
    """Takes any call and does nothing."""

    def __getattr__(self, name: str) -> Any:
        return lambda *args: None


def run_hypothesis_empty(day: Scenario) -> int:
    """Hypothesis drives `EmptyDay` as it drives the day's machine: the steps it ran."""
    factory = type("EmptyDayMachine", (EmptyDay,), {"day": day, "steps": 0, "messages": 0})
    run_state_machine_as_test(factory, settings=settings(
        max_examples=1, stateful_step_count=2 * len(day.events) + 1, derandomize=True, deadline=None,
        database=None, suppress_health_check=list(HealthCheck)))
    return factory.steps


def run_manual(day: Scenario, invariants: bool = True) -> int:
    """The machine class driven by a plain loop over the whole day: each step's rule, then
    every invariant (as Hypothesis calls them). Cyclic GC paused, as in the runner. Without
    the invariants it is the gateway alone with the harness objects it needs (clock, engine,
    fake LLM, recorders): what any driver of it pays before it checks anything."""
    factory = machine_for(day)
    state = factory()
    rules = (state.advance, state.message)
    checks = (state.idle_agents_within_cap, state.acknowledged_turns_stored,
              state.sessions_end_once_then_finalize) if invariants else ()
    gc.disable()
    try:
        for _ in range(2 * len(day.events) + 1):
            rules[state.arrived]()
            for check in checks:
                check()
        state.teardown()
    finally:
        gc.enable()
    return factory.steps


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="3 virtual hours instead of 24 (smoke test)")
    args = parser.parse_args(argv)
    hours = 3 if args.quick else 24
    day = gateway_day(hours=hours)
    ours, turns = timed(lambda: run_sessiongate(day))
    theirs, (steps, covered) = timed(lambda: run_hypothesis(day))
    prefix = replace(day, name=f"{day.name}-prefix", events=day.events[:covered])
    ours_prefix, _ = timed(lambda: run_sessiongate(prefix))
    manual, manual_steps = timed(lambda: run_manual(day))
    bare, bare_steps = timed(lambda: run_manual(day, invariants=False))
    empty, empty_steps = timed(lambda: run_hypothesis_empty(day))
    prefix_hours = (prefix.end - day.start) / HOUR
    rows = [
        ("sessiongate", turns, 0, ours, hours),
        ("hypothesis", covered, steps, theirs, prefix_hours),
        ("sessiongate, same turns", covered, 0, ours_prefix, prefix_hours),
        ("machine, plain loop", turns, manual_steps, manual, hours),
        ("gateway alone, plain loop", turns, bare_steps, bare, hours),
        ("hypothesis, rules empty", 0, empty_steps, empty, 0),
    ]
    print(machine())
    print(f"{day.name}: {turns:,} turns, 100 chats, both (idle 30m, daily 04:00), LRU cap 50; hypothesis covers the first "
          f"{covered:,} turns ({steps:,} steps, one example)")
    print(f"{'driver':<25}{'turns':>8}{'steps':>8}{'wall':>9}{'CPU':>9}{'turns/s':>10}{'steps/s':>10}{'sim h/wall s':>14}")
    for name, n, k, t, h in rows:
        steps_column = (f"{k:>8,}", f"{k / t.wall:>10,.0f}") if k else (" " * 8, " " * 10)
        turns_column = (f"{n:>8,}", f"{n / t.wall:>10,.0f}", f"{h / t.wall:>14,.1f}") if n else (" " * 8, " " * 10, "")
        print(f"{name:<25}{turns_column[0]}{steps_column[0]}{t.wall:>8.2f}s{t.cpu:>8.2f}s{turns_column[1]}"
              f"{steps_column[1]}{turns_column[2]}")
    rate = turns / ours.wall
    print(f"a turn: {ours.wall / turns * 1e6:.0f} µs in sessiongate; the gateway alone takes "
          f"{bare.wall / turns * 1e6:.0f} µs; 20,000 turns/s is 50 µs a turn")
    print(f"a 10x ratio needs a whole turn (gateway, SQLite, harness, checks) in {empty.wall / empty_steps / 10 * 1e6:.1f} µs "
          f"or less: Hypothesis alone takes {empty.wall / empty_steps * 1e6:.0f} µs a step")
    print(f"ratio vs hypothesis, same turns: {covered / ours_prefix.wall / (steps / theirs.wall):.2f}")
    print(f"ratio vs hypothesis: {rate / (steps / theirs.wall):.2f}")


if __name__ == "__main__":
    main()
