"""Generated scenarios per second: the `sessiongate fuzz` machinery over N seeds on the reference.

Each seed is generated (`sim.generate.scenario_for_seed`), run against a fresh reference
gateway and judged by every check, on worker processes exactly as `sessiongate fuzz -n W`
does (`conformance.search.fuzz.run_seed` through `in_order`). Pool start-up is part of the time.

Run: python bench/sweep.py [--seeds N] [-n W] [--quick] [--profile long]. Default 2,000 seeds
on 2 workers; `--seeds 10000` is the full figure. The default profile's seeds have 20-200
events (mean 111); `--profile long` gives 180-220, the ~200 events the target is stated in.
The last line is `scenarios/s: X.X`.

`--against REV` measures the sweep against another tree instead, as a ratio that the machine's
speed of the hour cancels out of: CPU a seed (seeds 0..N-1, default 1,000, in one process after
a warm-up seed) of this tree and of REV (`git archive`, first on PYTHONPATH), in child processes
taken in turn (each first in every other round), `--rounds` times each (default 3, the best
kept); a seed that fails on the reference stops it. Against a1635a5, whose 10,000-seed sweep
took 60.6 s on the idle machine (docs/performance.md), it also estimates this tree's sweep from
the ratio. Time, not instructions: a tree can run fewer instructions and take longer
(docs/performance.md, the thirty-sixth session). The last line is the estimate, or the ratio
against another REV.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

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


ROOT = Path(__file__).resolve().parents[1]
CALIBRATION = "a1635a5"  # the tree whose idle sweep calibrates the estimates
CALIBRATION_SECONDS = 60.6  # its `--seeds 10000` on the idle 2-vCPU machine (60.6-60.9 s)


def seed_cpu(tree: Path, seeds: int) -> float:
    """CPU milliseconds a seed of the tree at `tree`, in a child process of its own (`common.judged_seeds`,
    which runs on trees back to a1635a5)."""
    env = {**os.environ, "PYTHONHASHSEED": "0",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(tree), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, str(Path(__file__).with_name("common.py")), "seeds", "--seeds", str(seeds)],
                          cwd=tree, env=env, capture_output=True, text=True)
    match = re.search(r"ms a seed: ([\d.]+)", done.stdout)
    if done.returncode or match is None:
        raise SystemExit(f"seeds of {tree} failed:\n{done.stderr[-2000:]}")
    return float(match.group(1))


def extract(rev: str, into: Path) -> str:
    """`rev`'s tree written into `into`; its full commit id."""
    try:
        commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--verify", f"{rev}^{{commit}}"],
                                capture_output=True, text=True, check=True).stdout.strip()
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", commit], capture_output=True, check=True).stdout
    except OSError as err:
        raise SystemExit(f"--against {rev}: git did not run ({err})") from None
    except subprocess.CalledProcessError:
        raise SystemExit(f"--against {rev}: not a commit of the git checkout at {ROOT}") from None
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return commit


def against(rev: str, seeds: int, rounds: int) -> None:
    """This tree's CPU a seed against `rev`'s, taken in turn; the ratio, and the estimate against the calibration tree."""
    with tempfile.TemporaryDirectory() as peer:
        commit = extract(rev, Path(peer))
        ours: list[float] = []
        theirs: list[float] = []
        for round_ in range(rounds):  # each tree first in every other round
            for tree, times in ((ROOT, ours), (Path(peer), theirs))[:: 1 if round_ % 2 == 0 else -1]:
                times.append(seed_cpu(tree, seeds))
    mine, other = min(ours), min(theirs)
    ratio = mine / other
    print(machine())
    print(f"CPU a seed, seeds 0-{seeds - 1}, best of {rounds} taken in turn: this tree {mine:.2f} ms, {rev} {other:.2f} ms")
    print(f"time ratio this tree / {rev}: {ratio:.3f}")
    if commit.startswith(CALIBRATION):
        print(f"10,000 seeds on 2 idle workers, estimated from {CALIBRATION}'s {CALIBRATION_SECONDS} s: "
              f"{CALIBRATION_SECONDS * ratio:.1f} s (target 45 s)")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, help="seeds 0..N-1 (default 2,000, 10,000 for the full figure; with --against 1,000)")
    parser.add_argument("-n", "--workers", type=int, default=2, help="worker processes (default 2)")
    parser.add_argument("--quick", action="store_true", help="100 seeds (smoke test)")
    parser.add_argument("--profile", default="default", choices=PROFILE_NAMES,
                        help="generation profile: default (20-200 events, mean 111), long (180-220 events)")
    parser.add_argument("--against", metavar="REV", help=f"CPU a seed against REV's tree instead (e.g. {CALIBRATION}, the calibration)")
    parser.add_argument("--rounds", type=int, default=3, help="with --against: runs of each tree, taken in turn (default 3)")
    args = parser.parse_args(argv)
    if args.against:
        against(args.against, 20 if args.quick else args.seeds or 1000, 1 if args.quick else args.rounds)
        return
    seeds = 100 if args.quick else args.seeds or 2000
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
