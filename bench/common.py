"""Shared helpers for the benchmarks: the machine line, a wall-and-CPU timer, and the log digest.

The digest is the behaviour guard for speed work: a SHA-256 over the observation logs and
verdicts of every catalog scenario on the reference and on every bug-zoo variant, plus
generated seeds on the reference. A speed fix that changes it changed behaviour.

Run: python bench/common.py digest [--seeds N]   (prints one digest per group, then the total)
     python bench/common.py seeds --seeds N     (CPU a judged seed, `judged_seeds`)
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import os
import platform
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from conformance.harness.runner import RunResult

T = TypeVar("T")


def machine() -> str:
    """One line: CPUs, CPU model and Python, for the record beside every figure."""
    model = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{os.cpu_count()} CPUs, {model}, Python {platform.python_version()}"


@dataclass(frozen=True)
class Timing:
    wall: float  # seconds
    cpu: float  # seconds of this process (the machine may be shared: compare both)


def judged_seeds(seeds: int) -> float:
    """Seeds 0..seeds-1 generated, run on the reference and judged as a sweep's worker does
    (`run_seed`), after one warm-up seed: what a seed costs once the modules are compiled and
    the first-use caches filled. The loop's CPU seconds; SystemExit if a seed fails. Runs on
    trees back to a1635a5 (whose fuzz module was `conformance.fuzz`)."""
    import tempfile

    try:
        from conformance.search.fuzz import SeedTask, run_seed
    except ImportError:  # a1635a5
        from conformance.fuzz import SeedTask, run_seed  # type: ignore[no-redef]

    with tempfile.TemporaryDirectory() as out:
        if run_seed(SeedTask(0, "reference", "default", out, shrink=False)).failing:
            raise SystemExit("seed 0 failed on the reference")
        start = time.process_time()
        for seed in range(seeds):
            if run_seed(SeedTask(seed, "reference", "default", out, shrink=False)).failing:
                raise SystemExit(f"seed {seed} failed on the reference")
        return time.process_time() - start


def timed(fn: Callable[[], T]) -> tuple[Timing, T]:
    """Wall and CPU seconds of one call (after a collection, so garbage from before is not billed)."""
    gc.collect()
    wall, cpu = time.perf_counter(), time.process_time()
    value = fn()
    return Timing(time.perf_counter() - wall, time.process_time() - cpu), value


def feed_digest(digest: Any, result: RunResult) -> None:
    """Add one run's observation log and verdicts to a hashlib `digest`: the unit of every
    behaviour digest (this one's groups, bench/mutation.py's per-scenario digests)."""
    digest.update(result.log_text().encode())
    for verdict in result.verdicts.values():
        digest.update(repr(verdict).encode())


def log_digests(seeds: int = 100) -> dict[str, str]:
    """group -> SHA-256 of its logs and verdicts: catalog on the reference, catalog on each variant, seeds."""
    from conformance.harness.registry import resolve
    from conformance.harness.runner import run_scenario
    from conformance.harness.suite import catalog_paths
    from reference_impl.variants import VARIANTS
    from sim.generate import scenario_for_seed
    from sim.loader import load_file

    def digest_of(runs: list[RunResult]) -> str:
        digest = hashlib.sha256()
        for result in runs:
            feed_digest(digest, result)
        return digest.hexdigest()

    catalog = [load_file(path) for path in catalog_paths()]
    out: dict[str, str] = {}
    for gateway in ["reference", *(f"reference:{name}" for name in VARIANTS)]:
        make = resolve(gateway)
        out[f"catalog on {gateway}"] = digest_of([run_scenario(s, make(), gateway) for s in catalog])
    make = resolve("reference")
    out[f"seeds 0:{seeds} on reference"] = digest_of([run_scenario(scenario_for_seed(seed), make(), "reference") for seed in range(seeds)])
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="bench helpers")
    parser.add_argument("what", choices=["digest", "machine", "seeds"])
    parser.add_argument("--seeds", type=int, default=100, help="generated seeds in the digest, or judged (default 100)")
    args = parser.parse_args(argv)
    if args.what == "machine":
        print(machine())
        return
    if args.what == "seeds":  # `judged_seeds`: bench/sweep.py --against runs it in each tree
        print(f"ms a seed: {judged_seeds(args.seeds) * 1000 / args.seeds:.4f}")
        return
    digests = log_digests(args.seeds)
    for group, value in digests.items():
        print(f"{value[:16]}  {group}")
    total = hashlib.sha256("".join(digests.values()).encode()).hexdigest()
    print(f"total: {total}")


if __name__ == "__main__":
    main()
