"""`sessiongate explore`: every ordering of a small alphabet of steps up to a depth, states hashed."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from conformance.cli.args import add_gateway_option, check_out_dir, parse_workers, positive_int
from conformance.cli.lines import Progress
from conformance.harness.registry import resolve
from conformance.harness.shell import command
from conformance.search.explore import ALPHABET, evaluate, scenario_of
from conformance.search.fuzz import in_order
from conformance.transport.factory import check_gateway
from sessiongate import ExitCode
from sessiongate.text import readable
from sim.writer import dump_text


def cmd_explore(args: argparse.Namespace) -> int:
    check_gateway(args.gateway, resolve)
    workers = parse_workers(args.workers)
    check_out_dir(args.out, "--out")
    started = time.monotonic()
    seen: set[str] = set()
    frontier: list[tuple[str, ...]] = [()]
    explored = 0
    violations: dict[tuple[str, ...], tuple[tuple[str, ...], dict[str, str]]] = {}
    violating = 0
    for depth in range(1, args.depth + 1):
        jobs = [(args.gateway, (*steps, symbol)) for steps in frontier for symbol in ALPHABET]
        progress = Progress(len(jobs), "sequences")
        next_frontier = []
        for done, ((_, steps), (digest, bad)) in enumerate(zip(jobs, in_order(evaluate, jobs, workers, chunksize=16), strict=True), 1):
            explored += 1
            if bad:
                violating += 1
                violations.setdefault(tuple(sorted(bad)), (steps, bad))
            if digest not in seen:
                seen.add(digest)
                next_frontier.append(steps)
            if progress.tty:
                progress.update(done, violating)
        progress.close()
        frontier = next_frontier
        print(f"depth {depth}: {len(jobs)} sequences, {len(frontier)} new states", flush=True)
    elapsed = time.monotonic() - started
    for checks, (steps, bad) in sorted(violations.items(), key=lambda item: (len(item[1][0]), item[1][0])):
        path = _write_violation(Path(args.out), steps, bad, args.gateway)
        print(readable(f"VIOLATION {' '.join(checks)} after {' '.join(steps)}: {next(iter(bad.values()))}")
              + f"\n          written to {path}")
    print(f"{explored} states explored, {len(seen)} distinct, {violating} violating")
    print(f"{explored / max(elapsed, 1e-9):.0f} states/s", file=sys.stderr)  # timings to stderr: stdout is the same run to run
    return ExitCode.FAILED if violating else ExitCode.OK


def _write_violation(out: Path, steps: tuple[str, ...], bad: dict[str, str], gateway: str) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    scenario = scenario_of(steps)
    path = out / f"{scenario.name}.yaml"
    header = "\n".join([f"explore: steps {' '.join(steps)} on gateway {gateway}",
                        *(f"failing: {check} {summary}" for check, summary in bad.items()),
                        "reproduce: " + command("run", str(path), "--gateway", gateway)])
    path.write_text(dump_text(scenario, header), encoding="utf-8")
    return path


def add_arguments(explore: argparse.ArgumentParser) -> None:
    explore.add_argument("--depth", type=positive_int, default=4, help="longest sequence of steps (default 4)")
    add_gateway_option(explore)
    explore.add_argument("-j", "-n", "--jobs", dest="workers", default="auto", help="worker processes (default: auto, one per core)")
    explore.add_argument("--out", default="explore-violations", help="where violating sequences are written")
    explore.set_defaults(func=cmd_explore)
