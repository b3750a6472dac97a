"""`fuzz --crash-points`: which declared crash points fire in a generated run, and the `crash_at`
events that replay those fires from a file."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from conformance.adapter import HARNESS_POINTS, Harness
from sim.scenario import Advance, CrashAt, Scenario


class _InFlight(Protocol):
    """What the swarm reads of the run it fires in (`conformance.harness.runner.Run`)."""

    event_step: int
    harness: Harness


# `fuzz --crash-points`: FoundationDB's swarm. Each declared point is enabled with
# SWARM_ENABLE_PERCENT, then fires at each hit with a per-point chance from SWARM_FIRE_PERCENT;
# at most SWARM_MAX_FIRES fires a run, so a run ends and each fire stays one event to shrink.
SWARM_ENABLE_PERCENT = 50
SWARM_FIRE_PERCENT = (2, 10, 30, 100)
SWARM_MAX_FIRES = 2
# The harness's own points (`HARNESS_POINTS`) draw from a stream of their own and fire at most
# once a run, beside the budget above: a reply is the commonest hit of all, and sharing the
# budget let `reply-sent` spend it before a rarer point came by (crash-forgets-commands was
# caught in 3 of seeds 0-299 so, 9 without the harness's points and 9 with this).
SWARM_MAX_HARNESS_FIRES = 1
SWARM_DOWNTIME_SECONDS = (5, 60)  # a fired point's process is back this long after (as a crash/restart pair is)


class Swarm:
    """Which crash points fire in one generated run, drawn from the seed's own random stream
    (`derive_seed(seed, 'crash-points')`: generation's stream is untouched, so a seed's
    scenario is the same with crash points on or off). Each fire is kept as (step, point, hit)
    so `with_fires` can write it down as a `crash_at` event: the file replays it exactly."""

    def __init__(self, seed: int, declared: frozenset[str]) -> None:
        import random

        from sim.engine import derive_seed

        own = random.Random(derive_seed(seed, "crash-points"))
        harness = random.Random(derive_seed(seed, "crash-points/harness"))
        self._rngs = {point: harness if point in HARNESS_POINTS else own for point in declared}
        self.enabled: dict[str, int] = {}
        for point in sorted(declared):
            rng = self._rngs[point]
            on = rng.randrange(100) < SWARM_ENABLE_PERCENT
            chance = SWARM_FIRE_PERCENT[rng.randrange(len(SWARM_FIRE_PERCENT))]
            if on:
                self.enabled[point] = chance
        self.fires: list[tuple[int, str, int, int | None]] = []
        self._left = {own: SWARM_MAX_FIRES, harness: SWARM_MAX_HARNESS_FIRES}
        self.run: _InFlight | None = None

    def __call__(self, point: str) -> tuple[bool, int | None]:
        chance = self.enabled.get(point)
        if chance is None:
            return False, None
        rng = self._rngs[point]
        if not self._left[rng] or rng.randrange(100) >= chance:
            return False, None
        assert self.run is not None
        self._left[rng] -= 1
        down = rng.randint(*SWARM_DOWNTIME_SECONDS) * 1000
        self.fires.append((self.run.event_step, point, self.run.harness.points.since[point], down))
        return True, down


def with_fires(scenario: Scenario, fires: Sequence[tuple[int, str, int, int | None]]) -> Scenario:
    """`scenario` with each fire written as the `crash_at` that arms it: just before the
    event whose step it fired in, or whose timers' (a hit counts from the start of that event;
    a fire in quiescence counts from the start of the last event), in that event's order among
    the timers of its instant (so it arms before the same callbacks the event came before)."""
    from dataclasses import replace

    events = list(scenario.events)
    for inserted, (step, point, hit, down) in enumerate(fires):
        index = min(step, len(scenario.events)) - 1 + inserted
        where = events[index]  # the event whose step, or whose timers' step, the point fired in
        if isinstance(where, Advance):  # it calls the gateway nothing: arm just after it (a file
            index += 1  # cannot say 'advance 0', which a crash_at before it would make of it)
        events.insert(index, CrashAt(where.t, point=point, hit=hit, restart_after=down, order=where.order))
    return replace(scenario, events=tuple(events))

