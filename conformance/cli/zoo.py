"""`sessiongate zoo`: every bug-zoo variant against the catalog (each must be caught), or hunted
with generated scenarios (`--generated`)."""

from __future__ import annotations

import argparse
import sys

from conformance.cli.args import check_out_dir, parse_seeds, parse_workers, scenario_files
from conformance.cli.lines import scenario_line, write_report
from conformance.harness.registry import resolve
from conformance.harness.runner import RunResult
from conformance.harness.suite import load_all, outcome, run_all
from conformance.harness.verdict import FAILING
from conformance.search.fuzz import in_order
from conformance.search.zoo_generated import ZooTask, hunt_variant
from sessiongate import ExitCode, UsageError, interrupted_code
from sim.scenario import Scenario
from sim.weights import PROFILE_NAMES


def _zoo_variants(scenarios: list[Scenario], all_results: list[RunResult]
                  ) -> tuple[int, list[str], dict[str, dict[str, str]], list[RunResult]]:
    """The reference, then every variant, on the scenarios; each result is appended to
    `all_results` as it finishes, so an interrupted zoo still reports what ran. Prints a line a
    variant; returns how many were caught, the broken `catches:` claims, the matrix and the
    reference's non-passing results."""
    from reference_impl.variants import VARIANTS

    for result in run_all(scenarios, resolve("reference"), "reference"):
        all_results.append(result)
    reference = list(all_results)
    dirty = [r for r in reference if outcome(r) != "pass"]
    for r in dirty:
        print("\n".join(["reference " + line for line in scenario_line(r)]))
    caught = 0
    broken_claims: list[str] = []
    matrix: dict[str, dict[str, str]] = {}
    for name in VARIANTS:
        gateway = f"reference:{name}"
        results: list[RunResult] = []
        for result in run_all(scenarios, resolve(gateway), gateway):
            results.append(result)
            all_results.append(result)
        hits: dict[str, list[str]] = {}
        row: dict[str, str] = {}
        for result in results:
            failing = [c for c, v in result.verdicts.items() if v.status in FAILING]
            row[result.scenario.name] = "".join(c[1:] for c in failing) or "."
            for check in failing:
                hits.setdefault(check, []).append(result.scenario.name)
        matrix[name] = row
        for result in results:  # a scenario that names the variant in `catches:` must fail on it
            if name in result.scenario.catches and row[result.scenario.name] == ".":
                broken_claims.append(f"{result.scenario.name} claims to catch {name} but passes on it")
        if hits:
            caught += 1
            where = "; ".join(f"{check} in {len(names)} ({names[0]}{', …' if len(names) > 1 else ''})"
                              for check, names in sorted(hits.items()))
            print(f"caught     {name:<40} {where}", flush=True)
        else:
            print(f"NOT CAUGHT {name}", flush=True)
    return caught, broken_claims, matrix, dirty


def cmd_zoo(args: argparse.Namespace) -> int:
    from reference_impl.variants import VARIANTS

    check_out_dir(args.report, "--report")
    paths = scenario_files(args.paths)
    scenarios, errors = load_all(paths)
    if errors:
        for error in errors:
            print(f"error {error}", file=sys.stderr)
        return ExitCode.USAGE
    unknown = [(s, name) for s in scenarios for name in s.catches if name not in VARIANTS]
    if unknown:
        scenario, name = unknown[0]
        raise UsageError(f"{scenario.source or scenario.name}: catches: unknown variant {name!r}; "
                         f"known: {', '.join(sorted(VARIANTS))}")
    all_results: list[RunResult] = []
    try:
        caught, broken_claims, matrix, dirty = _zoo_variants(scenarios, all_results)
    except KeyboardInterrupt as stop:  # Ctrl-C or SIGTERM: keep what finished, as run does
        write_report(all_results, args.report, "zoo")
        print(f"{len(all_results)} runs of {len(scenarios) * (len(VARIANTS) + 1)} finished (interrupted)")
        return interrupted_code(stop)
    if args.matrix:
        names = [s.name for s in scenarios]
        print("variant × scenario (digits: failing checks, . none)")
        for number, scenario in enumerate(names):
            print(f"  s{number:02d} = {scenario}")
        print(f"{'':<40} " + " ".join(f"s{n:02d}" for n in range(len(names))))
        for name, row in matrix.items():
            print(f"{name:<40} " + " ".join(f"{row.get(s, '?'):>3}" for s in names))
    write_report(all_results, args.report, "zoo")
    for claim in broken_claims:
        print(f"CLAIM      {claim}")
    claims = sum(len(s.catches) for s in scenarios)
    print(f"{len(VARIANTS)} variants, {caught} caught" + (f"; reference failed {len(dirty)} scenarios" if dirty else "")
          + (f"; {claims - len(broken_claims)} of {claims} catches: claims hold" if claims else ""))
    if args.paths:  # your own scenarios: their claims and a clean reference are what is asked
        return ExitCode.OK if not broken_claims and not dirty else ExitCode.FAILED
    return ExitCode.OK if caught == len(VARIANTS) and not dirty and not broken_claims else ExitCode.FAILED


def cmd_zoo_generated(args: argparse.Namespace) -> int:
    from reference_impl.variants import VARIANTS

    seeds = parse_seeds(args.seeds)
    tasks = [ZooTask(name, seeds, args.profile, args.out, args.crash_points) for name in VARIANTS]
    caught = 0
    for found in in_order(hunt_variant, tasks, parse_workers(args.workers)):
        if found.seed is None:
            print(f"NOT CAUGHT {found.variant:<40} in seeds {args.seeds}")
            continue
        caught += 1
        shrunk = found.shrunk
        size = ""
        if shrunk is not None:
            size = f"shrunk to {shrunk.events} event{'s' if shrunk.events != 1 else ''}"
            size += "" if shrunk.reproduces else " (the file does not reproduce; the in-memory shrink did)"
        print(f"caught     {found.variant:<40} seed {found.seed:<5} {found.check}  {size}".rstrip(), flush=True)
    print(f"{len(tasks)} variants, {caught} caught")
    return ExitCode.OK if caught == len(tasks) else ExitCode.FAILED


def dispatch(args: argparse.Namespace) -> int:
    if args.generated and args.paths:
        raise UsageError("zoo: --generated hunts with seeds; scenario paths are for checking their catches:")
    if args.crash_points and not args.generated:
        raise UsageError("zoo: --crash-points goes with --generated (the catalog's crashes are its `crash_at` events)")
    return cmd_zoo_generated(args) if args.generated else cmd_zoo(args)


def add_arguments(zoo: argparse.ArgumentParser) -> None:
    zoo.add_argument("paths", nargs="*", help="scenario files or folders instead of the catalog: each one's "
                     "`catches:` variants must fail it, and the reference must pass it")
    zoo.add_argument("--matrix", action="store_true", help="print variant × scenario")
    zoo.add_argument("--report", metavar="DIR", help="write junit.xml, summary.json and report.html of every variant's runs into DIR")
    zoo.add_argument("--generated", action="store_true", help="use generated scenarios (seeds) instead of the catalog")
    zoo.add_argument("--seeds", default="0:200", help="with --generated: seeds A:B (default 0:200)")
    zoo.add_argument("--profile", default="default", choices=PROFILE_NAMES, help="with --generated: the generation profile")
    zoo.add_argument("--crash-points", action="store_true",
                     help="with --generated: also crash each variant inside steps, as `fuzz --crash-points`")
    zoo.add_argument("-j", "-n", "--jobs", dest="workers", help="with --generated: worker processes, or 'auto'")
    zoo.add_argument("--out", default="zoo-generated", help="with --generated: where shrunk scenarios go")
    zoo.set_defaults(func=dispatch)
