"""Zoo hunting (`sessiongate zoo --generated`): each bug-zoo variant hunted with generated scenarios.

For every variant, seeds are tried in order until one fails a check that the reference
passes on the same seed (with crash points, on the same scenario: the seed with the crashes
the variant's run fired written in as `crash_at` events); that seed, the seconds it took to find and the size of the shrunk
scenario (shrunk keeping the variant failing and the reference passing) are printed.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from conformance.harness.runner import run_scenario
from conformance.search.fuzz import Shrinking, factory, failing, shrink_and_write
from sim.generate import scenario_for_seed
from sim.writer import dump_text


@dataclass(frozen=True)
class ZooTask:
    variant: str
    seeds: range
    profile: str
    out: str
    crash_points: bool = False  # each seed's own swarm of crash points, as `fuzz --crash-points`


@dataclass(frozen=True)
class ZooOutcome:
    variant: str
    seed: int | None = None
    check: str = ""
    seconds: float = 0.0
    shrunk: Shrinking | None = None


_REFERENCE_CACHE: dict[tuple[int, str], dict[str, str]] = {}


def _reference_failing(seed: int, profile: str) -> dict[str, str]:
    key = (seed, profile)
    if key not in _REFERENCE_CACHE:
        result = run_scenario(scenario_for_seed(seed, profile), factory("reference")(), "reference")
        _REFERENCE_CACHE[key] = failing(result)
    return _REFERENCE_CACHE[key]


def hunt_variant(task: ZooTask) -> ZooOutcome:
    """The first seed on which the variant fails a check that the reference passes."""
    gateway = f"reference:{task.variant}"
    make = factory(gateway)
    started = time.monotonic()
    for seed in task.seeds:
        result = run_scenario(scenario_for_seed(seed, task.profile), make(), gateway, crash_points=task.crash_points)
        scenario = result.scenario  # with crash points: the crashes that fired, written in
        bad = failing(result)
        if not bad:
            continue
        control = failing(run_scenario(scenario, factory("reference")(), "reference")) if task.crash_points \
            else _reference_failing(seed, task.profile)
        clean = [check for check in bad if check not in control]
        if not clean:
            continue
        seconds = time.monotonic() - started
        check = clean[0]
        status = result.verdicts[check].status
        out = Path(task.out)
        out.mkdir(parents=True, exist_ok=True)
        path = out / f"{task.variant}-{scenario.name}.yaml"
        path.write_text(dump_text(scenario, f"zoo: {task.variant} fails {check} on seed {seed}"), encoding="utf-8")
        shrunk = shrink_and_write(scenario, path, gateway, check, status, control="reference")
        return ZooOutcome(task.variant, seed, check, seconds, shrunk)
    return ZooOutcome(task.variant, seconds=time.monotonic() - started)
