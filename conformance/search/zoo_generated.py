"""`sessiongate zoo --generated`: hunt each bug-zoo variant with generated scenarios.

For every variant, seeds are tried in order until one fails a check that the reference
passes on the same seed; that seed, the seconds it took to find and the size of the shrunk
scenario (shrunk keeping the variant failing and the reference passing) are printed.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass
from pathlib import Path

from conformance.harness.runner import run_scenario
from conformance.search.fuzz import Shrinking, factory, failing, guarded, in_order, parse_seeds, parse_workers, shrink_and_write
from sim.generate import PROFILES, scenario_for_seed
from sim.writer import dump_text


@dataclass(frozen=True)
class ZooTask:
    variant: str
    seeds: range
    profile: str
    out: str


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
        scenario = scenario_for_seed(seed, task.profile)
        result = run_scenario(scenario, make(), gateway)
        bad = failing(result)
        if not bad:
            continue
        clean = [check for check in bad if check not in _reference_failing(seed, task.profile)]
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


def cmd_zoo_generated(args: argparse.Namespace) -> int:
    from reference_impl.variants import VARIANTS

    seeds = parse_seeds(args.seeds)
    tasks = [ZooTask(name, seeds, args.profile, args.out) for name in VARIANTS]
    caught = 0
    for outcome in in_order(hunt_variant, tasks, parse_workers(args.workers)):
        if outcome.seed is None:
            print(f"NOT CAUGHT {outcome.variant:<40} in seeds {args.seeds} ({outcome.seconds:.1f}s)")
            continue
        caught += 1
        shrunk = outcome.shrunk
        size = ""
        if shrunk is not None:
            size = f"shrunk to {shrunk.events} event{'s' if shrunk.events != 1 else ''}"
            size += "" if shrunk.reproduces else " (the file does not reproduce; the in-memory shrink did)"
        print(f"caught     {outcome.variant:<40} seed {outcome.seed:<5} {outcome.check}  after {outcome.seconds:.1f}s  {size}", flush=True)
    print(f"{len(tasks)} variants, {caught} caught")
    return 0 if caught == len(tasks) else 1


def add_zoo_generated(zoo: argparse.ArgumentParser) -> None:
    """`zoo --generated`: hunt each variant with generated scenarios instead of the catalog."""
    zoo.add_argument("--generated", action="store_true", help="use generated scenarios (seeds) instead of the catalog")
    zoo.add_argument("--seeds", default="0:200", help="with --generated: seeds A:B (default 0:200)")
    zoo.add_argument("--profile", default="default", choices=sorted(PROFILES))
    zoo.add_argument("-j", "-n", "--jobs", dest="workers", help="with --generated: worker processes, or 'auto'")
    zoo.add_argument("--out", default="zoo-generated", help="with --generated: where shrunk scenarios go")
    catalog = zoo.get_default("func")

    def dispatch(args: argparse.Namespace) -> int:
        if args.generated and args.paths:
            from conformance.cli import UsageError

            raise UsageError("zoo: --generated hunts with seeds; scenario paths are for checking their catches:")
        return guarded(cmd_zoo_generated)(args) if args.generated else int(catalog(args))

    zoo.set_defaults(func=dispatch)
