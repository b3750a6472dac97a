"""Instruction counts of the harness against the gateway it drives: ratios that load does not move.

Each figure is the difference of two child processes run under `valgrind --tool=cachegrind
--cache-sim=no` (PYTHONHASHSEED=0), so interpreter start-up, imports and first-use caches
cancel out:

- per turn, on bench/gateway_day.py's day (100 chats, cap 50), the 2-hour day minus the 1-hour
  day (1,214 turns): the reference gateway alone driven by a plain loop (the harness objects it
  needs: clock, engine, fake LLM, recorders, the log they write), the same day through
  `run_scenario` without the checks, and with every check;
- per generated seed, `conformance.search.fuzz.run_seed` over seeds 0..N-1 serially minus 0 seeds,
  and the same seeds generated and run without the checks (what a seed costs before judging:
  the reference gateway and the runner; the difference is the checks'). Both children judge
  one warm-up seed first, so a seed is counted as a sweep's worker runs it: its modules
  compiled and its caches filled already (without the warm-up, compiling the checks weighed
  ≈ 9 M instructions on each of 40 seeds).

The 10,000-seed figure is an estimate for an idle machine, made without one: instructions a
seed, times 10,000, over two workers at `--ips` instructions per second and worker. The
default, 8.8e9, is this machine's own idle sweep: commit a1635a5 costs 107.1 M instructions a
seed (seeds 0-39, counted here: `PYTHONPATH=<a1635a5's tree> python bench/instructions.py
--child seeds 40`, minus 0) and its `bench/sweep.py --seeds 10000` ran in 60.6-60.9 s on the
idle 2-vCPU machine (docs/performance.md), pool start-up and result passing included.

`--breakdown` counts the gateway day again with one part left out at a time (a check's verdict
stubbed; every check's, which leaves the model alone; the model and every check; the runner's
resources samples, and the same but the gateway's `resources_delta` hook, asked bare; the final
snapshot): what each part costs a turn, as a share of the gateway's own cost. A check's share is what leaving
it alone out saves (the model's lazily built parts are paid by the first check that asks).

Run: python bench/instructions.py [--quick] [--seeds N] [--ips I] [--breakdown]. One line per
ratio; the last is `harness+checks / gateway instructions per turn: X.XX`.
"""

from __future__ import annotations

import argparse
import functools
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve()


def child(what: str, size: int) -> None:
    """In this process (under valgrind): one workload of `size` (hours of the day, or seeds).
    `SG_BENCH_LEAVE_OUT` (`--breakdown`): the parts left out, comma-separated (not in the child
    of none, which imports nothing to leave out)."""
    unwatched()
    if size:
        leave_out(os.environ.get("SG_BENCH_LEAVE_OUT", ""))
    if what in ("seeds", "seeds-unjudged"):
        seeds(what, size)
        return
    sys.path.insert(0, str(HERE.parent))
    import gateway_day  # the bench next to this one

    from conformance.harness.runner import run_scenario
    from reference_impl import ReferenceGateway

    day = gateway_day.gateway_day(hours=size) if size else None
    if day is None:
        return
    if what == "gateway":
        gateway_day.run_manual(day, invariants=False)
    elif what == "run":
        run_scenario(day, ReferenceGateway(), "reference", check=False)
    elif what == "checked":
        gateway_day.run_sessiongate(day)
    else:
        raise SystemExit(f"unknown workload {what!r}")


def unwatched() -> None:
    """No step watchdog in a counted child: its ticks (SIGALRM every 5 s of wall time, fewer
    steps a tick under valgrind) would add instructions by the machine's load, and one SIGALRM
    valgrind delivered after the run had put back the default handler killed a child (forty-
    seventh session). Trees before the watchdog have nothing to turn off."""
    from contextlib import contextmanager

    try:
        from conformance.harness import runner
    except ImportError:
        return
    if hasattr(runner, "watching"):
        @contextmanager
        def watching(*_args: object) -> Any:
            yield

        runner.watching = watching


PARTS = ("I1", "I2", "I3", "I4", "I5", "I6", "I7", "I8", "I9", "checks", "samples", "sample-work", "final")


RUNNER_PARTS = ("samples", "sample-work", "final")  # counted on the run without checks


def leave_out(parts: str) -> None:
    """Leave `parts` out of this process's runs: a check's verdict stubbed to a pass; `checks`:
    the model and every check; `samples`: the runner's resources sample after each step;
    `sample-work`: the same but the gateway's `resources_delta`, still asked; `final`: the
    final durable snapshot. The run is then no longer judged right: a bench only."""
    names = [p for p in parts.split(",") if p]
    if not names:
        return
    import conformance.checks as checks
    from conformance.harness.calls import GatewayCalls
    from conformance.harness.verdict import Verdict

    for name in names:
        if name in checks.CHECKS:
            checks.CHECKS[name] = functools.partial(_stub_verdict, name)
        elif name == "checks":
            checks.judge = lambda records, strict=False, **_: {c: Verdict(c, "pass", examined=1) for c in checks.CHECKS}
        elif name == "samples":
            GatewayCalls._sample_resources = lambda self: None  # type: ignore[method-assign]
        elif name == "sample-work":
            if "samples" not in names:  # the whole sample left out leaves its hook out too
                GatewayCalls._sample_resources = _hook_alone  # type: ignore[method-assign]
        elif name == "final":
            GatewayCalls._snapshot = _without_final(GatewayCalls._snapshot)  # type: ignore[method-assign]
        else:
            raise SystemExit(f"unknown part {name!r}; known: {', '.join(PARTS)}")


def _hook_alone(self: Any) -> None:
    """A sample of which only the gateway's `resources_delta` is left, asked bare: what the
    runner adds around it (the guard, validation, replay, record, the check every 64th) is out."""
    hook = getattr(self.gateway, "resources_delta", None)
    if hook is not None:
        hook()


def _without_final(snapshot: Callable[[Any, str], None]) -> Callable[[Any, str], None]:
    def taken(self: Any, label: str) -> None:
        if label != "final":
            snapshot(self, label)
    return taken


def _stub_verdict(check: str, _model: object) -> object:
    from conformance.harness.verdict import Verdict

    return Verdict(check, "pass", examined=1)


def seeds(what: str, size: int) -> None:
    """Seeds 0..size-1, after one warm-up seed judged (also in the child of none): what a seed
    costs in a worker that has run seeds before, as a sweep's 10,000 do, without the modules'
    compilation and first-use caches (this environment writes no .pyc: compiling the checks
    alone is ≈ 0.3·10⁹ instructions). `seeds` runs on trees back to a1635a5, the calibration's."""
    from common import judged_seeds  # the bench next to this one

    if what == "seeds":
        judged_seeds(size)
        return
    judged_seeds(0)  # the warm-up seed alone
    from conformance.harness.runner import cyclic_gc_paused, run_scenario
    from reference_impl import ReferenceGateway
    from sim.generate import scenario_for_seed

    for seed in range(size):
        with cyclic_gc_paused():  # as run_seed runs a seed
            run_scenario(scenario_for_seed(seed, "default"), ReferenceGateway(), "reference", check=False)


def instructions(what: str, size: int, left_out: str = "") -> int:
    """Instructions valgrind counted for one child process (`left_out`: `leave_out`'s parts)."""
    env = dict(os.environ, PYTHONHASHSEED="0", SG_BENCH_LEAVE_OUT=left_out)
    done = subprocess.run(["valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null",
                           sys.executable, str(HERE), "--child", what, str(size)],
                          capture_output=True, text=True, env=env)
    if done.returncode:
        raise SystemExit(f"{what} {size} failed:\n{done.stderr[-2000:]}")
    match = re.search(r"I\s+refs:\s+([\d,]+)", done.stderr)
    if match is None:
        raise SystemExit(f"no instruction count from valgrind:\n{done.stderr[-2000:]}")
    return int(match.group(1).replace(",", ""))


def turns(hours: int) -> int:
    sys.path.insert(0, str(HERE.parent))
    import gateway_day

    return len(gateway_day.gateway_day(hours=hours).events)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the 1-hour day minus none, 4 seeds (smoke test)")
    parser.add_argument("--seeds", type=int, default=40, help="generated seeds counted (default 40)")
    parser.add_argument("--ips", type=float, default=8.8e9, help="instructions per second of one idle worker (default 8.8e9)")
    parser.add_argument("--breakdown", action="store_true", help="what each check, the model, the samples and the final "
                                                                   "snapshot cost a turn (the day with each left out)")
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(args.child[0], int(args.child[1]))
        return
    from common import machine

    small, large = (0, 1) if args.quick else (1, 2)
    seeds = 4 if args.quick else args.seeds
    n = turns(large) - turns(small) if small else turns(large)
    if args.breakdown:
        breakdown(small, large, n)
        return
    per_turn = {what: (instructions(what, large) - instructions(what, small)) / n for what in ("gateway", "run", "checked")}
    per_seed = (instructions("seeds", seeds) - instructions("seeds", 0)) / seeds
    unjudged = (instructions("seeds-unjudged", seeds) - instructions("seeds-unjudged", 0)) / seeds
    gateway, run, checked = per_turn["gateway"], per_turn["run"], per_turn["checked"]
    print(machine())
    print(f"gateway day, {n:,} turns ({large} h minus {small} h), instructions per turn:")
    print(f"  gateway alone (plain loop)   {gateway:>12,.0f}")
    print(f"  run_scenario, no checks      {run:>12,.0f}")
    print(f"  run_scenario, every check    {checked:>12,.0f}")
    print(f"generated seed, run_seed, instructions per seed ({seeds} seeds): {per_seed:,.0f}")
    print(f"  of which generated and run, not judged: {unjudged:,.0f}; judged: {per_seed - unjudged:,.0f}")
    print(f"10,000 seeds on 2 idle workers at {args.ips:.2g} instructions/s each: {per_seed * 10_000 / 2 / args.ips:.0f} s (target 45 s)")
    floors(gateway, run, checked, unjudged, args.ips)
    print(f"runner / gateway instructions per turn: {(run - gateway) / gateway:.2f}")
    print(f"checks / gateway instructions per turn: {(checked - run) / gateway:.2f}")
    print(f"harness+checks / gateway instructions per turn: {(checked - gateway) / gateway:.2f}")


def floors(gateway: float, run: float, checked: float, unjudged: float, ips: float) -> None:
    """What the targets leave once the work no check can do without is paid: (a)'s 0.3 of the
    gateway's own cost a turn, less the runner's (the guarded calls, validated samples and the
    final snapshot of the real store, which every check reads), is what all the checks may
    cost; (c)'s 45 s, at `ips`, is what a seed may cost, less the seed generated and run."""
    allowed, runner = 0.3 * gateway, run - gateway
    print(f"(a) 0.3 of the gateway allows {allowed:,.0f} a turn; the runner takes {runner:,.0f}, "
          f"leaving {allowed - runner:,.0f} for the checks (they take {checked - run:,.0f})")
    budget = 45 * 2 * ips / 10_000
    print(f"(c) 45 s allows {budget / 1e6:.1f} M a seed; generated and run, not judged, takes {unjudged / 1e6:.1f} M, "
          f"leaving {(budget - unjudged) / 1e6:.1f} M for the checks")


def breakdown(small: int, large: int, n: int) -> None:
    """Each part's instructions a turn: the day with it, minus the day without it, over the gateway's own."""
    from concurrent.futures import ThreadPoolExecutor

    from common import machine

    def per_turn(what: str, left_out: str = "") -> float:
        return (instructions(what, large, left_out) - instructions(what, small, left_out)) / n

    every_check = ",".join(PARTS[:9])  # every verdict stubbed: what is left of the judging is the model
    jobs = [("gateway", ""), ("run", ""), ("checked", "")] + [("run", p) for p in RUNNER_PARTS] + \
           [("checked", p) for p in PARTS if p not in RUNNER_PARTS] + [("checked", every_check)]
    with ThreadPoolExecutor(max_workers=2) as pool:  # each job is its own valgrind process
        counted = dict(zip(jobs, pool.map(lambda job: per_turn(*job), jobs), strict=True))
    gateway, run, checked = counted["gateway", ""], counted["run", ""], counted["checked", ""]
    print(machine())
    print(f"gateway day, {n:,} turns ({large} h minus {small} h), instructions per turn; share of the gateway's own {gateway:,.0f}:")
    rows = [("runner: resources samples", run - counted["run", "samples"]),
            ("  of which the gateway's hook", counted["run", "sample-work"] - counted["run", "samples"]),
            ("runner: final snapshot", run - counted["run", "final"]),
            ("runner: the rest", counted["run", "samples"] + counted["run", "final"] - run - gateway),
            ("checks: model and every check", checked - counted["checked", "checks"]),
            ("checks: the model alone", counted["checked", every_check] - run)]
    rows += [(f"checks: {c} alone", checked - counted["checked", c]) for c in PARTS[:9]]
    for name, cost in rows:
        print(f"  {name:<32}{cost:>10,.0f}  {cost / gateway:5.2f}")
    print(f"runner / gateway instructions per turn: {(run - gateway) / gateway:.2f}")
    print(f"checks / gateway instructions per turn: {(checked - run) / gateway:.2f}")
    print(f"harness+checks / gateway instructions per turn: {(checked - gateway) / gateway:.2f}")


if __name__ == "__main__":
    main()
