"""Scenarios per second per core with the Hermes adapter, against the reference gateway.

The real hermes-agent gateway (`conformance.adapters.hermes`) runs the catalog and generated
seeds, judged by every check, serially in this process; its peer, in the same process, is the
reference gateway on the same scenarios. Hermes's import (about 2 s) is measured once, on its
own, and a warm-up pass of one catalog scenario on each gateway runs before the clocks start,
so the rates are what a worker that has already imported Hermes sustains. CPU time is this
process's (Hermes's agent threads included): the figure that holds on a shared machine.

Run in a virtualenv with hermes-agent (docs/hermes.md):
  python bench/hermes.py [--seeds N] [--breakdown] [--quick]
The last line is `ratio hermes/reference, scenarios per CPU second: X.XXXX`.
"""

from __future__ import annotations

import argparse
import collections
import functools
import sys
import time
from collections.abc import Callable
from importlib import metadata
from typing import Any

from common import Timing, machine, timed

from conformance.harness.registry import resolve
from conformance.harness.runner import run_scenario
from conformance.harness.suite import catalog_paths
from sim.generate import scenario_for_seed
from sim.loader import load_file
from sim.scenario import Message, Scenario

TARGET = 20.0  # scenarios per CPU second (issue #8)
CALLS = ("start", "restart", "deliver_message", "deliver_reply", "deliver_command", "tick", "sigterm", "crash",
         "durable_state", "resources", "delete_session_row")  # what the runner calls on the adapter


def import_hermes() -> Timing:
    """Wall and CPU seconds to import Hermes and install the seams (once per process)."""
    wall, cpu = time.perf_counter(), time.process_time()
    from conformance.adapters.hermes import patches as hermes_patches

    hermes_patches.install()
    return Timing(time.perf_counter() - wall, time.process_time() - cpu)


def run_all(gateway: str, scenarios: list[Scenario]) -> Timing:
    make = resolve(gateway)
    timing, _ = timed(lambda: [run_scenario(s, make(), gateway) for s in scenarios])
    return timing


def breakdown(scenarios: list[Scenario]) -> dict[str, tuple[int, float]]:
    """adapter call -> (calls, CPU seconds) over one more Hermes pass; the rest is the runner and checks."""
    from conformance.adapters.hermes import HermesGateway

    spent: dict[str, list[float]] = collections.defaultdict(lambda: [0, 0.0])
    originals = {name: getattr(HermesGateway, name) for name in CALLS}

    def counted(name: str, method: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(method)
        def call(*args: Any) -> Any:
            cpu = time.process_time()
            try:
                return method(*args)
            finally:
                spent[name][0] += 1
                spent[name][1] += time.process_time() - cpu
        return call

    for name, method in originals.items():
        setattr(HermesGateway, name, counted(name, method))
    try:
        total = run_all("hermes", scenarios).cpu
    finally:
        for name, method in originals.items():
            setattr(HermesGateway, name, method)
    out = {name: (int(n), cpu) for name, (n, cpu) in spent.items()}
    out["runner and checks"] = (len(scenarios), total - sum(cpu for _, cpu in out.values()))
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=10, help="generated seeds 0..N-1 (default 10; ~90 turns each)")
    parser.add_argument("--breakdown", action="store_true", help="one more Hermes pass: CPU per adapter call")
    parser.add_argument("--quick", action="store_true", help="8 catalog scenarios and 1 seed (smoke test)")
    args = parser.parse_args(argv)
    try:
        version = metadata.version("hermes-agent")
    except metadata.PackageNotFoundError:
        sys.exit("bench/hermes.py needs hermes-agent in this environment (docs/hermes.md)")
    catalog = [load_file(path) for path in catalog_paths()]
    seeds = 1 if args.quick else args.seeds
    groups = {"catalog": catalog[:8] if args.quick else catalog}
    if seeds:
        groups[f"seeds 0:{seeds}"] = [scenario_for_seed(seed) for seed in range(seeds)]

    imported = import_hermes()
    for gateway in ("hermes", "reference"):  # warm-up: lazy imports and first-use caches
        run_all(gateway, catalog[:1])
    print(machine() + f", hermes-agent {version}")
    print(f"import Hermes + install seams: {imported.wall:.2f}s wall, {imported.cpu:.2f}s CPU (once per process)")
    print(f"{'gateway':<10}{'scenarios':<14}{'n':>4}{'turns':>7}{'wall':>9}{'CPU':>9}"
          f"{'CPU/scen':>10}{'CPU/turn':>10}{'scen/s/core':>13}")
    totals = {"hermes": 0.0, "reference": 0.0}
    count = 0
    for label, scenarios in groups.items():
        turns = sum(isinstance(e, Message) for s in scenarios for e in s.events)
        count += len(scenarios)
        for gateway in ("hermes", "reference"):
            timing = run_all(gateway, scenarios)
            totals[gateway] += timing.cpu
            print(f"{gateway:<10}{label:<14}{len(scenarios):>4}{turns:>7}{timing.wall:>8.2f}s{timing.cpu:>8.2f}s"
                  f"{timing.cpu / len(scenarios) * 1000:>8.1f}ms{timing.cpu / max(turns, 1) * 1000:>8.2f}ms"
                  f"{len(scenarios) / timing.cpu:>13.2f}")
    if args.breakdown:
        scenarios = [s for group in groups.values() for s in group]
        print(f"Hermes CPU by adapter call ({len(scenarios)} scenarios, inclusive of the Hermes code each call runs)")
        for name, (calls, cpu) in sorted(breakdown(scenarios).items(), key=lambda item: -item[1][1]):
            print(f"  {name:<20}{calls:>8} calls{cpu:>8.2f}s{cpu / len(scenarios) * 1000:>9.1f}ms/scen")
    hermes_rate, reference_rate = count / totals["hermes"], count / totals["reference"]
    print(f"all {count} scenarios: hermes {hermes_rate:.2f}/s per core (target {TARGET:.0f}), "
          f"reference {reference_rate:.1f}/s per core")
    print(f"ratio hermes/reference, scenarios per CPU second: {hermes_rate / reference_rate:.4f}")


if __name__ == "__main__":
    main()
