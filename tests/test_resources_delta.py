"""The optional `resources_delta` hook: the same log as the snapshot-and-diff it replaces, and a
gateway whose changes do not add up to its `resources()` gets an error, never a pass."""

from __future__ import annotations

import random
from typing import Any

import pytest

from conformance.harness import values
from conformance.harness.calls import resources_hook
from conformance.harness.runner import run_scenario
from conformance.harness.suite import catalog_paths
from conformance.observations import Resources
from reference_impl import ReferenceGateway
from sim.clock import HOUR, MINUTE, SECOND
from sim.generate import scenario_for_seed
from sim.loader import load_file
from sim.scenario import Chat, GatewayConfig, Message, ResetPolicy, Scenario


class Snapshots(ReferenceGateway):
    """The reference without the hook: the runner diffs `resources()` after every event."""

    resources_delta = None  # type: ignore[assignment]


def busy_cache(chats: int = 40, cap: int = 6, messages: int = 400, seed: int = 5) -> Scenario:
    """Many chats over a small cache: agents move, load and go at nearly every sample."""
    rng = random.Random(seed)
    start, t = 1_767_225_600_000, 1_767_225_600_000
    events = []
    for i in range(1, messages + 1):
        t += rng.randrange(1, 90) * SECOND
        events.append(Message(t, chat=f"c{rng.randrange(chats):02d}", turn=f"t{i}", text="hello"))
    config = GatewayConfig(reset=ResetPolicy(mode="both", idle_minutes=30, at_hour=4), cache_cap=cap, idle_ttl=HOUR,
                           watcher_interval=5 * MINUTE, turn_latency=2 * SECOND)
    return Scenario(name="busy-cache", seed=seed, start=start, config=config,
                    chats=tuple(Chat(f"c{n:02d}") for n in range(chats)), events=tuple(events))


SCENARIOS = [*((p.stem, lambda p=p: load_file(p)) for p in catalog_paths()),
             *((f"seed-{s}", lambda s=s: scenario_for_seed(s)) for s in range(20)),
             ("busy-cache", busy_cache)]


@pytest.mark.parametrize("make", [m for _n, m in SCENARIOS], ids=[n for n, _m in SCENARIOS])
def test_the_hook_logs_what_the_diff_logs(make: Any) -> None:
    scenario = make()
    hooked = run_scenario(scenario, ReferenceGateway(), "reference")
    diffed = run_scenario(scenario, Snapshots(), "reference")
    assert hooked.log_text() == diffed.log_text()
    assert hooked.verdicts == diffed.verdicts


class ForgetsEvictions(ReferenceGateway):
    """Says nothing of the agents it drops: its changes keep agents `resources()` no longer lists."""

    def resources_delta(self) -> dict[str, Any] | Resources | None:
        change = super().resources_delta()
        if isinstance(change, dict) and "drop" in change and "add" not in change:
            change = {k: v for k, v in change.items() if k != "drop"}
        return change


def test_changes_that_disagree_with_resources_are_the_gateways_error() -> None:
    result = run_scenario(busy_cache(), ForgetsEvictions(), "forgets")
    assert result.failure is not None and result.failure.event == "resources_delta", result.failure
    assert "disagree with resources()" in result.failure.message
    assert all(v.status == "error" for v in result.verdicts.values())


class SaysNothing(ReferenceGateway):
    """The laziest hook: "nothing changed", always. With no record of its cache, I7 would
    examine nothing and pass."""

    def resources_delta(self) -> None:
        return None


class SilentAfterRestart(ReferenceGateway):
    """Right until its first restart, then "nothing changed" for good."""

    restarted = False

    def restart(self, *args: Any) -> None:
        self.restarted = True
        super().restart(*args)

    def resources_delta(self) -> dict[str, Any] | Resources | None:
        return None if self.restarted else super().resources_delta()


def restarts_then_busy() -> Scenario:
    """A short run (far under VERIFY_EVERY samples) whose agents load only after a restart."""
    from sim.scenario import Restart, Sigterm

    base = busy_cache(chats=3, cap=2, messages=6)
    last = base.events[-1].t
    tail = [Sigterm(last + MINUTE), Restart(last + 2 * MINUTE),
            *(Message(last + (3 + i) * MINUTE, chat=f"c0{i % 3}", turn=f"t{7 + i}", text="hello") for i in range(4))]
    return Scenario(name="restarts-then-busy", seed=base.seed, start=base.start, config=base.config,
                    chats=base.chats, events=(*base.events, *tail))


@pytest.mark.parametrize(("gateway", "make"), [(SaysNothing, lambda: load_file(catalog_paths()[0])),
                                               (SaysNothing, busy_cache),
                                               (SilentAfterRestart, restarts_then_busy)],
                         ids=["catalog-01", "busy-cache", "after-restart"])
def test_a_hook_that_says_nothing_is_the_gateways_error(gateway: type[ReferenceGateway], make: Any) -> None:
    scenario = make()
    assert run_scenario(scenario, ReferenceGateway(), "reference").failure is None
    result = run_scenario(scenario, gateway(), "silent")
    assert result.failure is not None and result.failure.event == "resources_delta", result.failure
    assert "disagree with resources()" in result.failure.message
    assert all(v.status == "error" for v in result.verdicts.values())


class Garbage(ReferenceGateway):
    def resources_delta(self) -> Any:
        return {"drop": "s1"}


def test_a_bad_change_is_an_error_naming_the_hook() -> None:
    result = run_scenario(load_file(catalog_paths()[0]), Garbage(), "garbage")
    assert result.failure is not None
    assert result.failure.message == "bad value in answer to resources_delta: drop: expected a list of session ids, got 's1'"


def test_a_change_is_copied_and_its_empty_parts_left_out() -> None:
    drop = ["s1"]
    change = values.resources_change({"drop": drop, "busy": [], "add": [("s2", True)], "running": 2})
    assert change == {"drop": ["s1"], "add": [["s2", True]], "running": 2}
    assert change["drop"] is not drop
    assert values.resources_change(None) is None
    with pytest.raises(values.BadValue, match="unknown key 'cached'"):
        values.resources_change({"cached": []})
    with pytest.raises(values.BadValue, match=r"add\[0\]"):
        values.resources_change({"add": [["s2", 1]]})


class SaysLess(ReferenceGateway):
    def resources(self) -> Resources:
        return Resources()


def test_a_subclass_that_redefines_resources_is_diffed_not_hooked() -> None:
    assert resources_hook(ReferenceGateway()) is not None
    assert resources_hook(SaysLess()) is None  # its inherited changes would not be what it says
    assert resources_hook(Snapshots()) is None


class SaysEveryMove(ReferenceGateway):
    """A hook that says more than which agents came and went: every agent it listed last
    dropped and every one it lists now added again, in the cache's order, each flag once more in
    `busy` or `idle`. Moves and flips are not the log's: it logs what the diff logs."""

    said: tuple[tuple[str, bool], ...] = ()

    def resources_delta(self) -> dict[str, Any]:
        now = self.resources()
        change = {"drop": [sid for sid, _busy in self.said], "add": [[sid, busy] for sid, busy in now.cached],
                  "busy": [sid for sid, busy in now.cached if busy], "idle": [sid for sid, busy in now.cached if not busy],
                  "running": now.running}
        self.said = now.cached
        return change


@pytest.mark.parametrize("make", [busy_cache, restarts_then_busy, lambda: scenario_for_seed(3)],
                         ids=["busy-cache", "restarts-then-busy", "seed-3"])
def test_a_hook_that_says_moves_and_flags_logs_what_the_diff_logs(make: Any) -> None:
    scenario = make()
    said = run_scenario(scenario, SaysEveryMove(), "reference")
    assert said.failure is None, said.failure
    assert said.log_text() == run_scenario(scenario, Snapshots(), "reference").log_text()
    assert [r.detail for r in said.records if r.kind == "resources"][1:] and all(
        set(r.detail) <= {"drop", "add", "running"} for r in said.records[2:] if r.kind == "resources")
