"""Generated scenarios per second: the `sessiongate fuzz` machinery over N seeds on the reference.

Each seed is generated (`sim.generate.scenario_for_seed`), run against a fresh reference
gateway and judged by every check, on worker processes exactly as `sessiongate fuzz -n W`
does (`conformance.search.fuzz.run_seed` through `in_order`). Pool start-up is part of the time.

Run: python bench/sweep.py [--seeds N] [-n W] [--quick] [--profile long]. Default 2,000 seeds
on 2 workers; `--seeds 10000` is the full figure. The default profile's seeds have 20-200
events (mean 111); `--profile long` gives 180-220, the ~200 events the target is stated in.
The last line is `scenarios/s: X.X`.
"""

from __future__ import annotations

import argparse
import resource
import tempfile
import time

from common import machine

from conformance.search.fuzz import SeedTask, in_order, run_seed, seed_chunk
from sim.weights import PROFILE_NAMES


def cpu_seconds() -> float:
    """CPU time of this process and of its finished children (the pool's workers)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def sweep(seeds: int, workers: int, out: str, profile: str = "default") -> tuple[float, float, int, int]:
    """(wall seconds, CPU seconds, scenarios run, failures) for seeds 0..N-1 on `workers` processes."""
    tasks = [SeedTask(seed, "reference", profile, out, shrink=False) for seed in range(seeds)]
    start, cpu = time.perf_counter(), cpu_seconds()
    done = failed = 0
    for outcome in in_order(run_seed, tasks, workers, chunksize=seed_chunk(seeds, workers)):
        done += 1
        failed += bool(outcome.failing)
    return time.perf_counter() - start, cpu_seconds() - cpu, done, failed


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=2000, help="seeds 0..N-1 (default 2,000; 10,000 for the full figure)")
    parser.add_argument("-n", "--workers", type=int, default=2, help="worker processes (default 2)")
    parser.add_argument("--quick", action="store_true", help="100 seeds (smoke test)")
    parser.add_argument("--profile", default="default", choices=PROFILE_NAMES,
                        help="generation profile: default (20-200 events, mean 111), long (180-220 events)")
    args = parser.parse_args(argv)
    seeds = 100 if args.quick else args.seeds
    with tempfile.TemporaryDirectory() as out:
        seconds, cpu, done, failed = sweep(seeds, args.workers, out, args.profile)
    rate = done / seconds
    print(machine() + f", profile {args.profile}")
    print(f"{'seeds':>8}{'workers':>9}{'wall':>10}{'CPU':>10}{'CPU/seed':>10}{'scenarios/s':>13}{'failed':>8}")
    print(f"{done:>8,}{args.workers:>9}{seconds:>9.1f}s{cpu:>9.1f}s{cpu / done * 1000:>8.1f}ms{rate:>13.1f}{failed:>8}")
    if seeds < 10_000:
        print(f"10,000 seeds at this rate: {10_000 / rate:.0f}s (target 45 s on an idle machine)")
    print(f"scenarios/s: {rate:.1f}")


if __name__ == "__main__":
    main()
