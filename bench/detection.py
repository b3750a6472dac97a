"""How fast generated scenarios catch each bug-zoo variant, and how small the catch shrinks.

For every variant in `reference_impl.variants`, `sessiongate zoo --generated`'s own hunt
(`conformance.search.zoo_generated.hunt_variant`) tries seeds in order until one fails a check the
reference passes on the same seed, then shrinks it keeping that difference. Reported per
variant: the seed, how many seeds it took, the check, seconds until caught (generation, runs
of the variant and of the reference, judging) and seconds spent shrinking, and the events
before and after shrinking. Variants are spread over worker processes like `-j N`.

Run: python bench/detection.py [--seeds A:B] [--profile P] [-n W] [--quick]. The last lines are
`median seeds to catch: N` (load-independent) and `median detection: X.XXs` (over the
variants caught); `--profile dense` against the default says which mix catches bugs sooner.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from dataclasses import dataclass

from common import machine

from conformance.cli.args import parse_seeds
from conformance.search.fuzz import in_order
from conformance.search.zoo_generated import ZooOutcome, ZooTask, hunt_variant


@dataclass(frozen=True)
class Timed:
    outcome: ZooOutcome
    total: float  # seconds of the whole hunt, shrinking included


def timed_hunt(task: ZooTask) -> Timed:
    start = time.monotonic()
    outcome = hunt_variant(task)
    return Timed(outcome, time.monotonic() - start)


def main(argv: list[str] | None = None) -> None:
    from reference_impl.variants import VARIANTS
    from sim.weights import PROFILE_NAMES

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="0:200", help="seeds A:B to hunt with (default 0:200, as zoo --generated)")
    parser.add_argument("-n", "--workers", type=int, default=2, help="worker processes (default 2)")
    parser.add_argument("--quick", action="store_true", help="3 variants only (smoke test)")
    parser.add_argument("--profile", default="default", choices=PROFILE_NAMES, help="the generator's profile (default default)")
    parser.add_argument("--crash-points", action="store_true", help="crash each variant inside steps too (fuzz --crash-points)")
    args = parser.parse_args(argv)
    seeds = parse_seeds(args.seeds)
    names = list(VARIANTS)[:3] if args.quick else list(VARIANTS)
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as out:
        results = list(in_order(timed_hunt, [ZooTask(name, seeds, args.profile, out, args.crash_points) for name in names], args.workers))
    wall = time.perf_counter() - start
    print(machine())
    print(f"{'variant':<40}{'seed':>6}{'tried':>6}  {'check':<6}{'caught':>9}{'shrink':>9}  events")
    caught: list[float] = []
    tried: list[int] = []
    for result in results:
        o = result.outcome
        if o.seed is None:
            print(f"{o.variant:<40}{'-':>6}{len(seeds):>6}  {'-':<6}{'never':>9}{'':>9}  not caught in seeds {args.seeds}")
            continue
        caught.append(o.seconds)
        tried.append(o.seed - seeds.start + 1)
        size = f"{o.shrunk.original} -> {o.shrunk.events}" if o.shrunk else "?"
        print(f"{o.variant:<40}{o.seed:>6}{o.seed - seeds.start + 1:>6}  {o.check:<6}{o.seconds:>8.2f}s"
              f"{result.total - o.seconds:>8.2f}s  {size}")
    print(f"{len(caught)} of {len(results)} variants caught (profile {args.profile}); {wall:.1f}s wall on {args.workers} workers")
    print(f"median seeds to catch: {statistics.median(tried) if tried else float('nan'):g}")
    print(f"median detection: {statistics.median(caught) if caught else float('nan'):.2f}s")


if __name__ == "__main__":
    main()
