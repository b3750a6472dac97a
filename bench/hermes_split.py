"""Whose CPU a Hermes run spends: Hermes's own work, or the harness's.

Profiles the catalog on Hermes with py-spy and sorts every busy sample by the frames on its
stack. The figure it exists for is the floor under issue #8's speed target: the share of busy
samples doing Hermes's own work, times the CPU a scenario costs, is what a scenario would
cost if the adapter, runner, clock and checks cost nothing.

    python bench/hermes_split.py [--passes 4]       # in the Hermes virtualenv, with py-spy
    python bench/hermes_split.py --profile hermes.raw --cpu-ms 77.0   # an existing profile

The profiled child imports Hermes, runs one warm-up scenario, then the catalog `--passes`
times; a second child does the same without py-spy for the CPU a scenario costs. Both see
only Hermes in steady state (the reference gateway, imports and start-up would count as
harness time against a per-scenario CPU figure that leaves them out).

Classes, by the innermost Hermes frame on the stack and what it calls:
  Hermes alone                  Hermes frames, nothing of sessiongate's below them
  Hermes work done by a seam    a seam doing what Hermes asked, cheaper or through a gate:
                                its config deep copy, its YAML parse, its SQL
  virtual time                  freezegun: entering and leaving it, moving it, Hermes reading it
  runner and checks             the runner, the log and every check (and the run's one GC pass)
  the adapter's other work      event-loop driving, the fake LLM, zero-time sleeps, the inline
                                executor, durable-state reads
  no Python frame               native time py-spy could not attribute (left out of the shares)
Samples whose leaf is a wait (a thread blocked on a condition or `select`) are not busy and are
dropped; so is import time (`_find_and_load`). The first two are Hermes's own work; the next two
are what the issue itself asks of any harness (freezegun, every check).
"""

from __future__ import annotations

import argparse
import collections
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path

HERMES = ("gateway/", "hermes_state", "hermes_cli/", "run_agent", "agent/", "tools/", "plugins/", "utils.py",
          "model_tools", "hermes_constants", "hermes_logging", "toolsets", "cron/", "hermes_time")
HARNESS = ("conformance/", "freezegun/", "sim/")
WAITS = ("Condition.wait", "EpollSelector.select", "Event.wait", "Thread.join", "_wait_for_tstate_lock",
         "Lock.acquire")
REQUESTED = frozenset({"_copy_config", "_fast_safe_load", "_sessiondb_init", "_GatedConnection.execute",
                       "_GatedConnection.executemany", "_GatedConnection.executescript", "_GatedConnection.commit",
                       "_GatedConnection.cursor", "_GatedConnection.__getattr__"})
CLOCK = ("freezegun/", "conformance/adapters/hermes/clock.py")
ADAPTER = "conformance/adapters/"
CLASSES = ("Hermes alone", "Hermes work done by a seam", "virtual time", "runner and checks", "the adapter's other work",
           "no Python frame")
OWN = CLASSES[:2]  # Hermes's own work
ASKED = CLASSES[:4]  # ... and what any harness the issue describes must spend


def _frame(text: str) -> tuple[str, str]:
    """'name (path/to/file.py:12)' -> (name, path relative to site-packages or the repo)."""
    name, _, where = text.partition(" (")
    path = where.rsplit(":", 1)[0].split("site-packages/")[-1]
    for root in HARNESS:
        if f"/{root}" in path:
            path = root + path.split(f"/{root}", 1)[1]
    return name.strip(), path


def classify(stack: str) -> str | None:
    """The class of one sample's stack (frames outermost first, ';'-separated); None if not busy."""
    if "_find_and_load" in stack:
        return None
    frames = [_frame(f) for f in stack.split(";")]
    if frames[-1][0].startswith(WAITS):
        return None
    inner = max((i for i, (_, path) in enumerate(frames) if path.startswith(HERMES)), default=None)
    if inner is None:
        if any(path.startswith(CLOCK) for _, path in frames):
            return "virtual time"
        ours = [path for _, path in frames if path.startswith(HARNESS)]
        return "the adapter's other work" if ours and ours[-1].startswith(ADAPTER) else "runner and checks"
    seams = [(name, path) for name, path in frames[inner + 1:] if path.startswith(HARNESS)]
    if not seams:
        return "Hermes alone"
    name, path = seams[0]
    if name in REQUESTED:
        return "Hermes work done by a seam"
    return "virtual time" if path.startswith(CLOCK) else "the adapter's other work"


def split(lines: Iterable[str]) -> collections.Counter[str]:
    """Busy samples per class, from py-spy raw lines ('frame;frame;... COUNT')."""
    counts: collections.Counter[str] = collections.Counter()
    for line in lines:
        stack, _, count = line.rstrip("\n").rpartition(" ")
        kind = classify(stack) if stack.strip() else "no Python frame"
        if kind is not None:
            counts[kind] += int(count)
    return counts


def run_catalog(passes: int) -> None:
    """The profiled child: warm up, then the catalog `passes` times; prints CPU ms a scenario."""
    from conformance.adapters.hermes import patches as hermes_patches

    hermes_patches.install()
    from conformance.harness.registry import resolve
    from conformance.harness.runner import run_scenario
    from conformance.harness.suite import catalog_paths
    from sim.loader import load_file

    scenarios = [load_file(path) for path in catalog_paths()]
    make = resolve("hermes")
    run_scenario(scenarios[0], make(), "hermes")
    cpu = time.process_time()
    for _ in range(passes):
        for scenario in scenarios:
            run_scenario(scenario, make(), "hermes")
    print(f"{1000 * (time.process_time() - cpu) / (passes * len(scenarios)):.2f}")


def profile(passes: int, raw: Path) -> float:
    """py-spy the child into `raw`, then time the child without it: CPU ms a scenario."""
    spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    if not Path(spy).exists():
        raise SystemExit("bench/hermes_split.py: py-spy not found (pip install py-spy)")
    child = [sys.executable, __file__, "--run-catalog", str(passes)]
    subprocess.run([spy, "record", "-r", "500", "--gil", "-f", "raw", "-o", str(raw), "--", *child],
                   check=True, capture_output=True)
    done = subprocess.run(child, check=True, capture_output=True, text=True)
    return float(done.stdout.split()[-1])


def report(counts: collections.Counter[str], cpu_ms: float | None) -> None:
    busy = sum(counts.values())
    for kind in CLASSES:
        print(f"{100 * counts[kind] / busy:5.1f}%  {kind}")
    attributed = busy - counts["no Python frame"]
    own = sum(counts[k] for k in OWN) / attributed
    asked = sum(counts[k] for k in ASKED) / attributed
    print(f"Hermes's own work: {100 * own:.1f}% of attributed busy samples; with virtual time, runner and checks: "
          f"{100 * asked:.1f}%")
    if cpu_ms:
        print(f"CPU a catalog scenario: {cpu_ms:.1f} ms ({1000 / cpu_ms:.1f} scenarios/s)")
        print(f"  Hermes's own work alone: {own * cpu_ms:.1f} ms ({1000 / (own * cpu_ms):.1f} scenarios/s)")
        print(f"  with virtual time, runner and checks: {asked * cpu_ms:.1f} ms "
              f"({1000 / (asked * cpu_ms):.1f} scenarios/s)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--passes", type=int, default=4, help="catalog passes profiled (default 4)")
    parser.add_argument("--profile", help="analyse this py-spy raw profile (-f raw) instead of making one")
    parser.add_argument("--cpu-ms", type=float, help="with --profile: CPU per scenario, measured without py-spy")
    parser.add_argument("--run-catalog", type=int, metavar="PASSES", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.run_catalog is not None:
        run_catalog(args.run_catalog)
        return
    if args.profile:
        path, cpu_ms = Path(args.profile), args.cpu_ms
    else:
        path = Path(tempfile.mkdtemp(prefix="hermes-split-")) / "hermes.raw"
        cpu_ms = profile(args.passes, path)
        print(f"profile: {path}")
    with path.open(encoding="utf-8") as raw:
        counts = split(raw)
    if not sum(counts.values()):
        raise SystemExit(f"{path}: no busy samples")
    report(counts, cpu_ms)


if __name__ == "__main__":
    main()
