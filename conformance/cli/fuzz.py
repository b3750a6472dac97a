"""`sessiongate fuzz`: generated scenarios (seeds) against a gateway; failures written and shrunk.

A run stopped early (Ctrl-C, SIGTERM, `--time-budget`) ends with the command that runs the
seeds it did not count, and leaves `--out` as an earlier run left it but for the failures it
counted: workers write into a staging folder, and a failure moves into `--out` when counted."""

from __future__ import annotations

import argparse
import functools
import os
import shutil
import sys
from dataclasses import replace
from pathlib import Path

from conformance.cli.args import (
    add_failure_db_option,
    add_gateway_option,
    add_isolation_options,
    check_out_dir,
    parse_seeds,
    parse_shard,
    parse_time_budget,
    parse_workers,
    shard,
)
from conformance.cli.lines import Progress, forget_if_fixed, saved_failures, scenario_line
from conformance.harness.failure_db import FailureDB
from conformance.harness.registry import resolve
from conformance.harness.runner import played_note, run_scenario
from conformance.harness.shell import command
from conformance.harness.suite import outcome as outcome_of
from conformance.search.fuzz import (
    Isolation,
    SeedOutcome,
    SeedTask,
    WorkerDied,
    declared_unsupported,
    factory,
    in_order,
    kinds,
    run_seed,
    seed_chunk,
    shrink_distinct,
)
from conformance.transport.factory import check_gateway
from sessiongate import ExitCode, UsageError, interrupted_code
from sessiongate.text import counted, readable
from sim.weights import PROFILE_NAMES


def _counted(outcome: SeedOutcome, out: Path) -> SeedOutcome:
    """Move a counted seed's files from the staging folder into `out`. Workers run ahead of the
    count; what they wrote for seeds a stopped run never counted stays in staging, and goes
    with it, so a stop never touches what an earlier run left in `out`."""
    if not outcome.path:
        return outcome
    path = out / Path(outcome.path).name
    os.replace(outcome.path, path)
    shrunk = outcome.shrunk
    if shrunk is not None:
        shrunk = replace(shrunk, path=str(out / Path(shrunk.path).name))
        os.replace(outcome.shrunk.path, shrunk.path)  # type: ignore[union-attr]
    return replace(outcome, path=str(path), shrunk=shrunk)


def resume_command(parser: argparse.ArgumentParser, args: argparse.Namespace, rest: range) -> str:
    """The fuzz command that runs the seeds `rest` (what a stopped run did not count) with every
    other option as given. Under `--shard I/N` the range starts I-1 before the first seed left,
    so the same shard (and its summary file) picks up exactly where it stopped."""
    index, _count = parse_shard(args.shard)
    words = ["fuzz", "--seeds", f"{rest.start - (index - 1)}:{parse_seeds(args.seeds).stop}"]
    for action in parser._actions:  # every option, in its definition order, that is not its default
        if not action.option_strings or action.dest in ("help", "seeds"):
            continue
        value = getattr(args, action.dest, action.default)
        if value == action.default:
            continue
        flag = max(action.option_strings, key=len)
        words += [flag] if action.nargs == 0 else [flag, str(value)]
    return command(*words)  # with the PYTHONPATH the run had, as a `reproduce:` line


def cmd_fuzz(args: argparse.Namespace) -> int:
    check_gateway(args.gateway, resolve, args.isolate)  # a bad gateway name is a usage error before any work
    seeds = shard(parse_seeds(args.seeds), args.shard)
    if not seeds:  # it passes, having run nothing: a sweep sized below its shard count says so
        print(f"note: shard {args.shard} of seeds {args.seeds} has no seed to run", file=sys.stderr)
    budget = parse_time_budget(args.time_budget)
    workers = parse_workers(args.workers)
    check_out_dir(args.out, "--out")
    isolation = Isolation.of(args)
    factory(args.gateway, isolation)  # as `run` does: under --isolate, an unknown variant is a usage error here
    out = Path(args.out)
    made_out = not out.exists()
    staging = out / f".staging-{os.getpid()}"  # shards may share --out: one staging folder per run
    avoid = declared_unsupported(args.gateway, isolation) if args.fit else frozenset()
    if args.fit:
        drawn = f"no {', '.join(sorted(avoid))}" if avoid else "everything (it declares nothing unsupported)"
        print(f"fitted to {args.gateway}: drawing {drawn}", flush=True)
    tasks = [SeedTask(seed, args.gateway, args.profile, str(staging), not args.no_shrink, args.strict, isolation,
                      args.crash_points, args.out, first=index == 0, avoid=avoid)
             for index, seed in enumerate(seeds)]
    by_seed = {task.seed: task for task in tasks}
    distinct: dict[tuple[str, str], int] = {}  # kinds of failure counted (each shrunk once) -> the seed that showed it
    if args.max_failures is not None and args.max_failures < 1:
        raise UsageError(f"--max-failures expects at least 1, got {args.max_failures}")
    capped = False
    db = FailureDB.open(args.gateway, not args.no_failure_db)
    still_failing = replay_saved(db, args.gateway, isolation, args.strict)
    progress = Progress(len(tasks))
    done = failed = broken = refused = vacuous = checkers = skipped = played = 0
    by_check: dict[str, int] = {}
    saved = 0  # failures saved in the failure database
    unsupported: dict[str, int] = {}  # feature -> seeds skipped for it (a seed may use several)
    failures: list[dict[str, object]] = []  # each failing seed, for --summary-json
    stopped = False
    cannot_start = worker_died = ""
    interrupted: KeyboardInterrupt | None = None
    outcomes = in_order(run_seed, tasks, workers, chunksize=seed_chunk(len(tasks), workers))
    try:
        for moved in map(functools.partial(_counted, out=out), outcomes):
            known = kinds(distinct)
            outcome = shrink_distinct(moved, by_seed[moved.seed], distinct)
            if db is not None and kinds(distinct) > known:  # a new kind of failure: replayed first from now on
                shrunk = outcome.shrunk
                db.save(Path(shrunk.path) if shrunk is not None and shrunk.reproduces else Path(outcome.path), args.gateway)
                saved += 1
            done += 1
            vacuous += outcome.vacuous
            played += outcome.played
            checkers += outcome.checker_error
            skipped += bool(outcome.skipped)
            for feature in outcome.skipped:
                unsupported[feature] = unsupported.get(feature, 0) + 1
            if outcome.failing:
                failed += 1
                broken += outcome.broken
                refused += outcome.refused
                for check in outcome.failing if not (outcome.broken or outcome.refused) else ():
                    by_check[check] = by_check.get(check, 0) + 1
                failures.append(_failure_entry(outcome))
                progress.clear()
                _print_failure(outcome, not args.no_shrink, distinct.get(outcome.key))
            progress.update(done, failed)
            if done == 1 and outcome.start_error and done < len(tasks):  # it would fail every seed the same way
                cannot_start = f"stopped: the gateway errored before the first event of seed {outcome.seed}; it cannot start"
                break
            if budget is not None and progress.elapsed() > budget and done < len(tasks):
                stopped = True
                break
            if args.max_failures is not None and kinds(distinct) >= args.max_failures and done < len(tasks):
                capped = True
                break
    except KeyboardInterrupt as stop:  # Ctrl-C or SIGTERM: count and report what finished
        interrupted = stop
    except WorkerDied as died:
        progress.clear()
        worker_died = f"stopped: {died} (a gateway it could not stop, said above, or a crash of its interpreter)"
    finally:
        outcomes.close()  # ends the pool now: no worker writes into staging after this
        shutil.rmtree(staging, ignore_errors=True)  # failures of seeds not counted
        if made_out and out.is_dir() and not any(out.iterdir()):
            out.rmdir()
    progress.close()
    if stopped:
        print(f"time budget of {args.time_budget} spent after {done} of {len(tasks)} seeds")
    if capped:
        print(f"stopped after {counted(kinds(distinct), 'distinct failure')} "
              f"(--max-failures {args.max_failures}), {done} of {len(tasks)} seeds")
    if saved and db is not None:
        print(f"saved {counted(saved, 'failure')} in {db.shown()}: run, fuzz and the pytest plugin replay "
              f"{'them' if saved != 1 else 'it'} first until {'they pass' if saved != 1 else 'it passes'} (--no-failure-db: not saved)")
    if cannot_start:
        print(cannot_start)
    if worker_died:
        print(worker_died)
    lines = [f"{counted(done, 'scenario')}, {done - failed - skipped} passed, {failed - refused} failed"
             + (f", {refused} refused" if refused else "")
             + (f", {skipped} skipped (not judged, using what the gateway declares unsupported: "
                f"{', '.join(f'{name} {n}' for name, n in sorted(unsupported.items()))})" if skipped else "")]
    if vacuous:
        lines[-1] += f"; {vacuous} check{'s' if vacuous != 1 else ''} vacuous (examined nothing)"
    if distinct:
        lines[-1] += f"; {counted(kinds(distinct), 'distinct failure')} (by first check and violation)"
    if interrupted is not None:
        lines[-1] += " (interrupted)"
    if (stopped or capped or worker_died or interrupted is not None) and done < len(tasks):  # the last line: how to run the rest
        lines.append(f"resume: {resume_command(args.parser, args, seeds[done:])}")
    if failed:
        counts = ", ".join(f"{check} {by_check[check]}" for check in sorted(by_check))
        not_run = [f"{counted(refused, 'seed')} refused at start (NotImplementedError)" if refused else "",
                   f"{counted(broken, 'seed')} errored or timed out" if broken else ""]
        lines.insert(0, "; ".join([f"failing seeds by check: {counts or 'none'}", *filter(None, not_run)]))
    if played:  # as `run` says it (`lines.played_crashes`)
        lines.insert(0, played_note(played, done, args.gateway))
    if failed:
        out.mkdir(parents=True, exist_ok=True)
        # Shards may share --out: each keeps its own counts.
        name, scope = ("summary.txt", "") if not args.shard else (f"summary-shard-{args.shard.replace('/', '-of-')}.txt",
                                                                   f", shard {args.shard}")
        Path(args.out, name).write_text("\n".join([f"gateway {args.gateway}, seeds {args.seeds}{scope}", *lines]) + "\n")
    if args.summary_json:
        why = ("interrupted" if interrupted is not None else "worker-died" if worker_died else "cannot-start" if cannot_start
               else "time-budget" if stopped else "max-failures" if capped else None)
        resume = lines[-1].removeprefix("resume: ") if lines[-1].startswith("resume: ") else None
        _write_summary(args, {"scenarios": done, "passed": done - failed - skipped, "failed": failed - refused,
                              "refused": refused, "skipped": skipped,
                              "skipped_by_feature": dict(sorted(unsupported.items())), "gateway_errors": broken, "vacuous_checks": vacuous,
                              "distinct_failures": kinds(distinct), "failing_by_check": dict(sorted(by_check.items())),
                              "saved_failures_still_failing": still_failing, "checker_errors": checkers,
                              "stopped": why, "resume": resume, "failures": failures})
    print("\n".join(lines))
    if interrupted is not None:
        return interrupted_code(interrupted)
    if checkers:
        return ExitCode.CHECKER_ERROR  # a check raised on some log: sessiongate's own bug, above any finding
    if worker_died:
        return ExitCode.FAILED  # a seed's gateway errored past what a worker survives
    if args.findings_ok:
        return ExitCode.FAILED if broken else ExitCode.OK
    return ExitCode.FAILED if failed or still_failing else ExitCode.OK


def _failure_entry(outcome: SeedOutcome) -> dict[str, object]:
    """A failing seed as --summary-json lists it: its outcome, the checks that failed, its files."""
    status = "refused" if outcome.refused else outcome.status if outcome.broken else "fail"
    shrunk = outcome.shrunk.path if outcome.shrunk is not None else None
    return {"seed": outcome.seed, "outcome": status, "checks": sorted(outcome.failing), "file": outcome.path or None,
            "shrunk": shrunk}


def _write_summary(args: argparse.Namespace, counts: dict[str, object]) -> None:
    """--summary-json: the run's counts and failures as canonical JSON, written whatever the run
    found (a clean run too, an interrupted one with its resume command): a CI reads it, not stdout."""
    from reports.rundir import atomic_write, canonical_json

    head = {"schema": 1, "gateway": args.gateway, "seeds": args.seeds, "shard": args.shard, "profile": args.profile,
            "crash_points": args.crash_points, "strict": args.strict, "fit": args.fit}
    path = Path(args.summary_json)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, canonical_json({**head, **counts}))


def replay_saved(db: FailureDB | None, gateway: str, isolation: Isolation, strict: bool) -> int:
    """Run the gateway's saved failures before any seed, as `run` does; returns how many still
    fail (a fixed one leaves the database)."""
    failing = 0
    for scenario in saved_failures(db):
        result = run_scenario(scenario, factory(gateway, isolation)(), gateway, strict=strict,
                              step_timeout=isolation.step_timeout)
        if outcome_of(result) != "pass":
            failing += 1
            print("\n".join(scenario_line(result)), flush=True)
        forget_if_fixed(db, result)
    if failing:
        print(f"{failing} saved failure{'s' if failing != 1 else ''} still failing")
    return failing


def _print_failure(outcome: SeedOutcome, shrinking: bool = False, first: int | None = None) -> None:
    print("\n".join(map(readable, _failure_lines(outcome, shrinking, first))))  # the gateway's words: no escape, no megabytes


def _failure_lines(outcome: SeedOutcome, shrinking: bool, first_seed: int | None = None) -> list[str]:
    """A failure's lines: the first check's message, then the file; a kind of failure seen first
    at another seed (`first_seed`) says which on the file's line, so a buggy gateway's thousand
    repeats cost two lines each, and the shrunk file to read is named once, at its seed."""
    first, *rest = outcome.failing.items()
    if outcome.refused:
        return [f"refused gen-{outcome.seed}  {first[1]}"]
    if outcome.broken:  # the gateway's error or timeout, not a check's finding: worded as `run` words it
        head = f"{outcome.status.upper()} gen-{outcome.seed}  {outcome.message}"
    else:
        head = f"FAIL gen-{outcome.seed}  {first[0]} {first[1]}" + (f" (+{', '.join(c for c, _ in rest)})" if rest else "")
    lines = [head, f"     written to {outcome.path}"]
    if shrinking and outcome.shrunk is None and first_seed is not None and first_seed != outcome.seed:
        check, slug = outcome.key
        what = f"gateway error as gen-{first_seed} ({slug})" if outcome.broken else f"failure as gen-{first_seed} ({check} {slug})"
        lines[1] += f"; not shrunk: the same {what}"
        return lines
    if outcome.shrunk is not None:
        s = outcome.shrunk
        note = "" if s.reproduces else " (NOTE: the file, with turns renumbered, does not reproduce; the in-memory shrink did)"
        lines.append(f"     shrunk {s.original} -> {s.events} events: {s.path}{note}")
        if s.other and outcome.same_as is not None:
            lines.append(f"     NOTE: shrunk, it fails {outcome.key[0]} as gen-{outcome.same_as} does: the same failure, "
                         f"not counted again: {s.other}")
        elif s.other:
            lines.append(f"     NOTE: the shrunk scenario fails {outcome.key[0]} another way: {s.other}")
            lines.append(f"     the original: {outcome.message}")
    return lines


def add_arguments(fuzz: argparse.ArgumentParser) -> None:
    fuzz.add_argument("--seeds", required=True, help="A:B, the seeds A <= seed < B")
    add_gateway_option(fuzz)
    fuzz.add_argument("-j", "-n", "--jobs", dest="workers", help="worker processes, or 'auto' (default 1)")
    fuzz.add_argument("--shard", help="I/N: run only every N-th seed, starting at the I-th (1-based)")
    fuzz.add_argument("--time-budget", help="stop taking new seeds after this long: 60s, 10m, or seconds (90)")
    fuzz.add_argument("--out", default="fuzz-failures", help="where failing scenarios go (default fuzz-failures)")
    fuzz.add_argument("--summary-json", metavar="FILE",
                      help="write the run's counts and failing seeds to FILE as JSON, whatever it found (for a CI)")
    fuzz.add_argument("--profile", default="default", choices=PROFILE_NAMES,
                      help="generation profile: default, small, long or dense, or a size in the dense mix (small+dense)")
    fuzz.add_argument("--fit", action="store_true",
                      help="draw nothing the gateway declares unsupported (asked once, as a run asks it), so that no "
                           "seed is skipped for it; a fitted seed is another scenario than the same seed unfitted")
    fuzz.add_argument("--no-shrink", action="store_true", help="write failures without shrinking them")
    add_failure_db_option(fuzz)
    fuzz.add_argument("--max-failures", type=int, metavar="N",
                      help="stop after N distinct failures (by first check and violation; each is shrunk once)")
    fuzz.add_argument("--strict", action="store_true", help="a check that examined nothing (vacuous) fails")
    fuzz.add_argument("--crash-points", action="store_true",
                      help="also crash the gateway inside steps, at a seeded random subset of the crash points it "
                           "declares (off by default: results for existing seeds stay comparable)")
    fuzz.add_argument("--findings-ok", action="store_true",
                      help="failed checks are findings to report (exit 0); gateway errors and timeouts exit 1, "
                           "except NotImplementedError at start (a config the gateway says it cannot drive)")
    add_isolation_options(fuzz)
    fuzz.set_defaults(func=cmd_fuzz, parser=fuzz)
