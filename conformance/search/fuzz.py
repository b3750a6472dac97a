"""`sessiongate fuzz`, `zoo --generated`, `shrink` and `explore`: generated scenarios at scale.

    sessiongate fuzz --seeds A:B [--gateway NAME] [-j N | -n auto] [--shard I/N] [--time-budget 60s] [--out DIR]
                     [--no-shrink] [--findings-ok] [--isolate] [--step-timeout S] [--memory-mb MB]
    sessiongate zoo --generated [--seeds A:B] [-j N] [--out DIR]   (conformance.search.zoo_generated)
    sessiongate shrink FILE [--gateway NAME] [--check ID]
    sessiongate explore --depth D [--gateway NAME] [-j N] [--out DIR]    (conformance.search.explore)

Seeds A:B are A <= seed < B. Each seed is a pure function (`sim.generate.scenario_for_seed`),
so the verdicts do not depend on the number of workers or shards: `--shard I/N` takes every
N-th seed starting at the I-th, and the shards' failures together are the serial run's.

A run stopped early (Ctrl-C, SIGTERM, `--time-budget`) ends with the command that runs the
seeds it did not count, and leaves `--out` as an earlier run left it but for the failures it
counted: workers write into a staging folder, and a failure moves into `--out` when counted.
"""

from __future__ import annotations

import argparse
import functools
import math
import multiprocessing
import os
import re
import shlex
import shutil
import signal
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar

from conformance.adapter import Interrupted, raise_interrupted
from conformance.cli import (
    UsageError,
    add_failure_db_option,
    add_isolation_options,
    check_gateway,
    check_out_dir,
    gateway_factory,
)
from conformance.harness.failure_db import FailureDB
from conformance.harness.registry import resolve
from conformance.harness.runner import RunResult, cyclic_gc_paused, run_scenario
from conformance.harness.shell import command
from conformance.harness.verdict import CHECKER_ERROR, Violation
from conformance.transport.exec_gateway import DEFAULT_STEP_TIMEOUT
from sim.clock import MINUTE, parse_duration
from sim.generate import PROFILES, scenario_for_seed
from sim.loader import load_file, load_text
from sim.scenario import Scenario
from sim.shrink import Predicate, shrink, write_beside
from sim.writer import dump_text

BAD = ("fail", "error", "timeout", "checker-error")
T = TypeVar("T")
R = TypeVar("R")


def candidate_budget(scenario: Scenario) -> int:
    """Engine events one shrink or explore run may take: ample for a gateway that ticks at
    most every 5m and retries a few hundred times per event, small enough that a candidate
    sending a broken gateway into endless retries costs a second, not the default's minutes."""
    tick = min(scenario.config.watcher_interval or 5 * MINUTE, 5 * MINUTE)
    span = scenario.end - scenario.start + scenario.config.horizon()
    return 4 * (span // tick) + 200 * len(scenario.events) + 5_000


@dataclass(frozen=True)
class Isolation:
    """`--isolate`, `--step-timeout` and `--memory-mb` (`cli.add_isolation_options`), in a form a
    worker process can be handed. The defaults run the gateway in process; exec: is always a child."""

    isolate: bool = False
    step_timeout: float = DEFAULT_STEP_TIMEOUT
    memory_mb: int | None = None

    @staticmethod
    def of(args: argparse.Namespace) -> Isolation:
        return Isolation(args.isolate, args.step_timeout, args.memory_mb)


@functools.cache
def factory(gateway: str, isolation: Isolation = Isolation()) -> Callable[[], Any]:
    """`cli.gateway_factory`, once per process: entry-point discovery costs milliseconds per call."""
    options = argparse.Namespace(gateway=gateway, isolate=isolation.isolate, step_timeout=isolation.step_timeout,
                                 memory_mb=isolation.memory_mb)
    return gateway_factory(options)


# -- failures and the shrink predicate -------------------------------------------------

def failing(result: RunResult) -> dict[str, str]:
    """check id -> one-line summary, for every check that failed, errored or timed out."""
    return {check: v.summary for check, v in result.verdicts.items() if v.status in BAD}


def same_failure(gateway: str, check: str, status: str, control: str | None = None,
                 isolation: Isolation = Isolation()) -> Predicate:
    """True for scenarios on which `gateway` still gives `check` the verdict `status` (and,
    with `control`, that gateway does not fail it: the failure still tells the two apart).
    `isolation` is the run's: a gateway isolated because it may hang is isolated while shrinking."""
    make = factory(gateway, isolation)
    control_factory = factory(control) if control else None

    def fails(scenario: Scenario) -> bool:
        verdict = run_scenario(scenario, make(), gateway, budget=candidate_budget(scenario)).verdicts.get(check)
        if verdict is None or verdict.status != status:
            return False
        if control_factory is None:
            return True
        other = run_scenario(scenario, control_factory(), control or "", budget=candidate_budget(scenario)).verdicts.get(check)
        return other is None or other.status not in BAD

    return fails


@dataclass(frozen=True)
class Shrinking:
    """What shrinking a failure gave: files written and sizes."""

    events: int
    original: int
    runs: int
    path: str
    reproduces: bool
    other: str = ""  # the shrunk scenario's first violation of the check, when the original's is gone


def shrink_and_write(scenario: Scenario, original: Path, gateway: str, check: str, status: str,
                     control: str | None = None, isolation: Isolation = Isolation(), slug: str = "") -> Shrinking:
    """Shrink a failing scenario keeping `check`'s verdict; write it beside `original`. With
    `slug` (the original's first violation), say when the shrunk one no longer shows it: the
    shrink keeps the check failing, and may end on another bug of the same check."""
    fails = same_failure(gateway, check, status, control, isolation)
    shrunk = shrink(scenario, fails)
    other = ""
    if slug:
        verdict = run_scenario(shrunk.scenario, factory(gateway, isolation)(), gateway,
                               budget=candidate_budget(shrunk.scenario)).verdicts.get(check)
        violations = verdict.violations if verdict is not None else ()
        if violations and slug not in [kind(v) for v in violations]:
            other = violations[0].message
    # It is shown to fail on `gateway` only: it claims to catch that variant, if any, and no other.
    catches = tuple(c for c in scenario.catches if gateway == f"reference:{c}")
    result = replace(shrunk.scenario, name=f"{scenario.name}-shrunk", catches=catches)
    header = (f"shrunk from {scenario.name} (seed {scenario.seed}, {shrunk.original_events} events) "
              f"to {len(result.events)} events in {shrunk.runs} runs\n"
              f"failing: {check} ({status}) on gateway {gateway}"
              + (f", not on {control}" if control else "") + "\n"
              "reproduce: " + command("run", str(original.with_name(original.stem + ".shrunk.yaml")), "--gateway", gateway))
    if other:
        header += f"\nNOTE: this fails {check} another way than the original (another bug of the same check?): {other}"
    path, reproduces = write_beside(original, result, header, fails)
    return Shrinking(len(result.events), shrunk.original_events, shrunk.runs, str(path), reproduces, other)


# -- running seeds -----------------------------------------------------------------------

@dataclass(frozen=True)
class SeedTask:
    seed: int
    gateway: str
    profile: str
    out: str  # where a failure is written: the run's staging folder (`cmd_fuzz` moves it into --out)
    shrink: bool = True
    strict: bool = False  # a vacuous check fails
    isolation: Isolation = Isolation()
    crash_points: bool = False  # a seeded swarm fires the gateway's declared crash points
    shown_out: str = ""  # --out as given, where the file ends up: its `reproduce:` line names it so


@dataclass(frozen=True)
class SeedOutcome:
    seed: int
    vacuous: int = 0  # checks that passed having examined nothing
    failing: dict[str, str] = field(default_factory=dict)
    path: str = ""
    shrunk: Shrinking | None = None
    broken: bool = False  # the gateway raised or ran away (an error or timeout, not a check's finding)
    refused: bool = False  # it raised NotImplementedError at start: a config it says it cannot drive
    skipped: bool = False  # not judged: its config uses a feature the gateway declares unsupported
    start_error: str = ""  # broken before the scenario's first event: the gateway may not start at all
    checker_error: bool = False  # a check raised on its log: sessiongate's bug (exit 4)
    key: tuple[str, str] = ("", "")  # (first failing check, its first violation's slug): what makes a failure distinct
    status: str = ""  # that check's verdict status
    message: str = ""  # that violation's message


def run_seed(task: SeedTask) -> SeedOutcome:
    """Generate, run and judge one seed; write a failing one (and its shrunk form) to `out`."""
    global _IN_SEED
    _IN_SEED = True
    try:
        return _run_seed(task)
    except Interrupted as stop:
        if _IN_WORKER:
            _worker_exit(stop.args[0] if stop.args else signal.SIGTERM)
        raise
    finally:
        _IN_SEED = False


def _run_seed(task: SeedTask) -> SeedOutcome:
    scenario = scenario_for_seed(task.seed, task.profile)
    with cyclic_gc_paused():  # the run's log is freed before the collector is back: it would walk every record
        result = run_scenario(scenario, factory(task.gateway, task.isolation)(), task.gateway, strict=task.strict,
                              crash_points=task.crash_points)
        bad, failure, verdicts, skipped = failing(result), result.failure, result.verdicts, bool(result.skipped)
        scenario = result.scenario  # with --crash-points, the fires written in as `crash_at` events
        del result
    if skipped:
        return SeedOutcome(task.seed, skipped=True)
    vacuous = sum(v.vacuous for v in verdicts.values())
    checker = any(v.status == CHECKER_ERROR for v in verdicts.values())
    if not bad:
        return SeedOutcome(task.seed, vacuous)
    if failure is not None and failure.event == "start" and failure.message.startswith("NotImplementedError"):
        return SeedOutcome(task.seed, vacuous, bad, refused=True)  # not a finding: nothing to write or shrink
    out = Path(task.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{scenario.name}.yaml"
    header = "\n".join([f"generated: seed {task.seed}, profile {task.profile}{', crash points' if task.crash_points else ''}; "
                        f"gateway {task.gateway}",
                        *(f"failing: {check} {summary}" for check, summary in bad.items()),
                        "reproduce: " + command("run", str(Path(task.shown_out) / path.name) if task.shown_out else path.name,
                                                "--gateway", task.gateway)])
    text = dump_text(scenario, header)
    path.write_text(text, encoding="utf-8")
    assert replace(load_text(text), source="", header="") == scenario, "a generated scenario round-trips through its file"
    check = next(iter(bad))
    verdict = verdicts[check]
    first = verdict.violations[0] if verdict.violations else None
    start_error = failure.describe() if failure is not None and failure.step == 0 else ""
    return SeedOutcome(task.seed, vacuous, bad, str(path), None, broken=failure is not None, start_error=start_error,
                       checker_error=checker, key=(check, kind(first) if first is not None else verdict.status),
                       status=verdict.status, message=first.message if first is not None else verdict.summary)


WEEKDAY = re.compile(r"\b(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) (?=\d)")


def kind(violation: Violation) -> str:
    """A violation's slug, without the weekday of a time it names ("… at Wed 13:15"), so one
    bug on two days is one kind of failure."""
    return violation.kind or Violation(WEEKDAY.sub("", violation.message)).slug


def shrink_distinct(outcome: SeedOutcome, task: SeedTask, seen: set[tuple[str, str]]) -> SeedOutcome:
    """Shrink a counted failure if it is the first of its kind (`SeedOutcome.key`), in the
    parent, so a buggy gateway's thousand failures of one bug cost one shrink, not a thousand.
    Marks its kind seen either way. A gateway error is counted and written, never shrunk (see
    cmd_shrink)."""
    if not outcome.failing or outcome.broken or outcome.refused or outcome.key in seen:
        return outcome
    seen.add(outcome.key)
    if not task.shrink:
        return outcome
    check, slug = outcome.key
    shrunk = shrink_and_write(load_file(outcome.path), Path(outcome.path), task.gateway, check, outcome.status,
                              isolation=task.isolation, slug=slug)
    return replace(outcome, shrunk=shrunk)


def parse_seeds(text: str) -> range:
    try:
        low, high = (int(part) for part in text.split(":"))
    except ValueError:
        raise UsageError(f"--seeds expects A:B (A <= seed < B), got {text!r}") from None
    if low < 0 or high < low:
        raise UsageError(f"--seeds expects 0 <= A <= B, got {text!r}")
    if high == low:  # zero scenarios would pass trivially
        raise UsageError(f"--seeds {text} is empty (A <= seed < B)")
    return range(low, high)


def parse_time_budget(text: str | None) -> float | None:
    """Seconds: a duration ('90s', '10m', '1h30m') or a bare number of seconds, as --step-timeout takes."""
    if not text:
        return None
    try:
        seconds = parse_duration(text) / 1000
    except ValueError:
        try:
            seconds = float(text.removesuffix("s"))
        except ValueError:
            raise UsageError(f"--time-budget expects a duration like '60s' or '10m', or seconds, got {text!r}") from None
    if not math.isfinite(seconds) or seconds <= 0:
        raise UsageError(f"--time-budget expects a positive, finite time, got {text!r}")
    return seconds


def parse_shard(text: str | None) -> tuple[int, int]:
    if not text:
        return 1, 1
    try:
        index, count = (int(part) for part in text.split("/"))
    except ValueError:
        raise UsageError(f"--shard expects I/N, got {text!r}") from None
    if not 1 <= index <= count:
        raise UsageError(f"--shard expects 1 <= I <= N, got {text!r}")
    return index, count


def shard(seeds: range, text: str | None) -> range:
    """Every N-th seed starting at the I-th (1-based): shards 1/N … N/N partition the range."""
    index, count = parse_shard(text)
    return seeds[index - 1::count]


def parse_workers(text: str | None) -> int:
    if text in (None, "", "1"):
        return 1
    if text == "auto":
        return os.cpu_count() or 1
    try:
        workers = int(text)  # type: ignore[arg-type]
    except ValueError:
        raise UsageError(f"-j/-n expects a number or 'auto', got {text!r}") from None
    if workers < 1:
        raise UsageError(f"-j/-n expects at least 1, got {workers}")
    return workers


def in_order(fn: Callable[[T], R], items: Iterable[T], workers: int, chunksize: int = 1) -> Iterator[R]:
    """fn over items, results in the items' order, on `workers` processes."""
    if workers <= 1:
        yield from map(fn, items)
        return
    # spawn, not fork: a forked worker inherits whatever lock one of the parent's threads held
    # (a gateway's, a test runner's), and a stopped pool then waited on it for good.
    with multiprocessing.get_context("spawn").Pool(workers, initializer=_worker_init) as pool:
        yield from pool.imap(fn, items, chunksize=chunksize)


def seed_chunk(seeds: int, workers: int) -> int:
    """Seeds handed to a worker at a time: one round trip per seed cost the parent a tenth
    of a worker's CPU on a 10,000-seed sweep; chunks of up to 8 (at least 64 per worker
    first) keep the workers evenly loaded to the end."""
    return max(1, min(8, seeds // (workers * 64)))


def _worker_init() -> None:
    """Workers end quietly when the pool ends them (SIGTERM); the parent handles Ctrl-C. The exit
    unwinds the scenario in progress, so its gateway child (--isolate, exec:) is killed with it."""
    global _IN_WORKER
    _IN_WORKER = True
    signal.signal(signal.SIGTERM, _worker_signal)
    signal.signal(signal.SIGINT, signal.SIG_IGN)


_IN_WORKER = False  # this process is a pool worker: the pool's SIGTERM ends it
_IN_SEED = False  # a seed is running in this worker


def _worker_signal(signum: int, frame: Any) -> None:
    if _IN_SEED:
        raise_interrupted(signum, frame)  # unwinds the run, gateway calls included, to run_seed
    _worker_exit(signum)  # between seeds: nothing to unwind


def _worker_exit(signum: int) -> None:
    """A worker told to stop: `Interrupted` (the harness's own signal, which the runner lets
    through: a SystemExit raised inside a gateway call was that gateway's error, and the worker
    went back to its queue while the pool waited for it to end) becomes a quiet exit here."""
    raise SystemExit(128 + signum)


class Progress:
    """One progress line on stderr: rewritten in place on a terminal; otherwise (a CI log) every
    tenth of the way and at least once a minute, so a long run never looks hung."""

    QUIET_FOR = 60.0  # seconds without a line, at most, off a terminal

    def __init__(self, total: int, what: str = "seeds") -> None:
        self.total, self.what = total, what
        self.started = time.monotonic()
        self.tty = sys.stderr.isatty()
        self.step = max(1, total // 10)
        self.last = self.started

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def update(self, done: int, failed: int) -> None:
        now = time.monotonic()
        if not self.tty and done % self.step and done != self.total and now - self.last < self.QUIET_FOR:
            return
        self.last = now
        rate = done / max(self.elapsed(), 1e-9)
        line = f"{done}/{self.total} {self.what}, {rate:.1f} {self.what}/s, {failed} failed"
        sys.stderr.write(f"\r{line}\x1b[K" if self.tty else line + "\n")
        sys.stderr.flush()

    def clear(self) -> None:
        """Make room for a line on stdout (the terminal shares one screen)."""
        if self.tty:
            sys.stderr.write("\r\x1b[K")
            sys.stderr.flush()

    def close(self) -> None:
        if self.tty:
            sys.stderr.write("\n")


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
    words = ["sessiongate", "fuzz", "--seeds", f"{rest.start - (index - 1)}:{parse_seeds(args.seeds).stop}"]
    for action in parser._actions:  # every option, in its definition order, that is not its default
        if not action.option_strings or action.dest in ("help", "seeds"):
            continue
        value = getattr(args, action.dest, action.default)
        if value == action.default:
            continue
        flag = max(action.option_strings, key=len)
        words += [flag] if action.nargs == 0 else [flag, str(value)]
    return shlex.join(words)


def cmd_fuzz(args: argparse.Namespace) -> int:
    check_gateway(args.gateway, resolve)  # a bad gateway name is a usage error before any work
    seeds = shard(parse_seeds(args.seeds), args.shard)
    budget = parse_time_budget(args.time_budget)
    workers = parse_workers(args.workers)
    check_out_dir(args.out, "--out")
    isolation = Isolation.of(args)
    factory(args.gateway, isolation)  # as `run` does: under --isolate, an unknown variant is a usage error here
    out = Path(args.out)
    made_out = not out.exists()
    staging = out / f".staging-{os.getpid()}"  # shards may share --out: one staging folder per run
    tasks = [SeedTask(seed, args.gateway, args.profile, str(staging), not args.no_shrink, args.strict, isolation,
                      args.crash_points, args.out)
             for seed in seeds]
    by_seed = {task.seed: task for task in tasks}
    distinct: set[tuple[str, str]] = set()  # kinds of failure counted (each shrunk once)
    if args.max_failures is not None and args.max_failures < 1:
        raise UsageError(f"--max-failures expects at least 1, got {args.max_failures}")
    capped = False
    db = FailureDB.open(args.gateway, not args.no_failure_db)
    still_failing = replay_saved(db, args.gateway, isolation, args.strict)
    progress = Progress(len(tasks))
    done = failed = broken = refused = vacuous = checkers = skipped = 0
    by_check: dict[str, int] = {}
    stopped = False
    cannot_start = ""
    interrupted: KeyboardInterrupt | None = None
    outcomes = in_order(run_seed, tasks, workers, chunksize=seed_chunk(len(tasks), workers))
    try:
        for counted in map(functools.partial(_counted, out=out), outcomes):
            kinds = len(distinct)
            outcome = shrink_distinct(counted, by_seed[counted.seed], distinct)
            if db is not None and len(distinct) > kinds:  # a new kind of failure: replayed first from now on
                shrunk = outcome.shrunk
                db.save(Path(shrunk.path) if shrunk is not None and shrunk.reproduces else Path(outcome.path))
            done += 1
            vacuous += outcome.vacuous
            checkers += outcome.checker_error
            skipped += outcome.skipped
            if outcome.failing:
                failed += 1
                broken += outcome.broken
                refused += outcome.refused
                for check in outcome.failing if not (outcome.broken or outcome.refused) else ():
                    by_check[check] = by_check.get(check, 0) + 1
                progress.clear()
                _print_failure(outcome, not args.no_shrink)
            progress.update(done, failed)
            if done == 1 and outcome.start_error and done < len(tasks):  # it would fail every seed the same way
                cannot_start = f"stopped: the gateway errored before the first event of seed {outcome.seed}; it cannot start"
                break
            if budget is not None and progress.elapsed() > budget and done < len(tasks):
                stopped = True
                break
            if args.max_failures is not None and len(distinct) >= args.max_failures and done < len(tasks):
                capped = True
                break
    except KeyboardInterrupt as stop:  # Ctrl-C or SIGTERM: count and report what finished
        interrupted = stop
    finally:
        outcomes.close()  # ends the pool now: no worker writes into staging after this
        shutil.rmtree(staging, ignore_errors=True)  # failures of seeds not counted
        if made_out and out.is_dir() and not any(out.iterdir()):
            out.rmdir()
    progress.close()
    if stopped:
        print(f"time budget of {args.time_budget} spent after {done} of {len(tasks)} seeds")
    if capped:
        print(f"stopped after {len(distinct)} distinct failure{'s' if len(distinct) != 1 else ''} "
              f"(--max-failures {args.max_failures}), {done} of {len(tasks)} seeds")
    if cannot_start:
        print(cannot_start)
    lines = [f"{done} scenarios, {done - failed - skipped} passed, {failed - refused} failed"
             + (f", {refused} refused" if refused else "")
             + (f", {skipped} skipped (not judged: a feature the gateway declares unsupported)" if skipped else "")]
    if vacuous:
        lines[-1] += f"; {vacuous} check{'s' if vacuous != 1 else ''} vacuous (examined nothing)"
    if distinct:
        lines[-1] += f"; {len(distinct)} distinct failure{'s' if len(distinct) != 1 else ''} (by first check and violation)"
    if interrupted is not None:
        lines[-1] += " (interrupted)"
    if (stopped or capped or interrupted is not None) and done < len(tasks):  # the last line: how to run the rest
        lines.append(f"resume: {resume_command(args.parser, args, seeds[done:])}")
    if failed:
        counts = ", ".join(f"{check} {by_check[check]}" for check in sorted(by_check))
        not_run = [f"{refused} seeds refused at start (NotImplementedError)" if refused else "",
                   f"{broken} seeds errored or timed out" if broken else ""]
        lines.insert(0, "; ".join([f"failing seeds by check: {counts or 'none'}", *filter(None, not_run)]))
        out.mkdir(parents=True, exist_ok=True)
        # Shards may share --out: each keeps its own counts.
        name, scope = ("summary.txt", "") if not args.shard else (f"summary-shard-{args.shard.replace('/', '-of-')}.txt",
                                                                   f", shard {args.shard}")
        Path(args.out, name).write_text("\n".join([f"gateway {args.gateway}, seeds {args.seeds}{scope}", *lines]) + "\n")
    print("\n".join(lines))
    if interrupted is not None:
        return 143 if interrupted.args and interrupted.args[0] == signal.SIGTERM else 130
    if checkers:
        return 4  # a check raised on some log: sessiongate's own bug, above any finding
    if args.findings_ok:
        return 1 if broken else 0
    return 1 if failed or still_failing else 0


def replay_saved(db: FailureDB | None, gateway: str, isolation: Isolation, strict: bool) -> int:
    """Run the gateway's saved failures before any seed, as `run` does; returns how many still
    fail (a fixed one leaves the database)."""
    from conformance.cli import _scenario_line, forget_if_fixed, saved_failures
    from conformance.harness.suite import outcome

    failing = 0
    for scenario in saved_failures(db):
        result = run_scenario(scenario, factory(gateway, isolation)(), gateway, strict=strict)
        if outcome(result) != "pass":
            failing += 1
            print("\n".join(_scenario_line(result)), flush=True)
        forget_if_fixed(db, result)
    if failing:
        print(f"{failing} saved failure{'s' if failing != 1 else ''} still failing")
    return failing


def _print_failure(outcome: SeedOutcome, shrinking: bool = False) -> None:
    first, *rest = outcome.failing.items()
    if outcome.refused:
        print(f"refused gen-{outcome.seed}  {first[1]}")
        return
    print(f"FAIL gen-{outcome.seed}  {first[0]} {first[1]}" + (f" (+{', '.join(c for c, _ in rest)})" if rest else ""))
    print(f"     written to {outcome.path}")
    if outcome.shrunk is not None:
        s = outcome.shrunk
        note = "" if s.reproduces else " (NOTE: the file, with turns renumbered, does not reproduce; the in-memory shrink did)"
        print(f"     shrunk {s.original} -> {s.events} events: {s.path}{note}")
        if s.other:
            print(f"     NOTE: the shrunk scenario fails {outcome.key[0]} another way: {s.other}")
            print(f"     the original: {outcome.message}")
    elif shrinking and not outcome.broken:
        print(f"     not shrunk: the same failure as an earlier seed's ({outcome.key[0]} {outcome.key[1]})")


# -- shrink ------------------------------------------------------------------------------

def cmd_shrink(args: argparse.Namespace) -> int:
    check_gateway(args.gateway, resolve)
    scenario = load_file(args.file)
    result = run_scenario(scenario, resolve(args.gateway)(), args.gateway)
    if result.failure is not None:  # it crashed, hung or could not start: no check's finding to keep
        print(f"{scenario.name}: {result.failure.describe()}; nothing to shrink")
        return 1
    bad = failing(result)
    if not bad:
        print(f"{scenario.name} passes on {args.gateway}: nothing to shrink")
        return 1
    check = args.check or next(iter(bad))
    if check not in bad:
        print(f"{scenario.name} does not fail {check} on {args.gateway} (it fails {', '.join(bad)})")
        return 1
    status = result.verdicts[check].status
    out = Path(args.out)
    check_out_dir(args.out, "--out")
    out.mkdir(parents=True, exist_ok=True)
    s = shrink_and_write(scenario, out / Path(args.file).name, args.gateway, check, status)
    print(f"shrunk {s.original} -> {s.events} events in {s.runs} runs: {s.path}"
          + ("" if s.reproduces else " (NOTE: the file does not reproduce the failure)"))
    return 0


# -- registration ---------------------------------------------------------------------------

def guarded(fn: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        try:
            return fn(args)
        except UsageError as err:
            print(f"sessiongate: error: {err}", file=sys.stderr)
            return 2

    return run


def add_commands(subparsers: Any) -> None:
    """Called by `conformance.cli.build_parser`: fuzz, shrink, explore, and zoo's --generated."""
    fuzz = subparsers.add_parser("fuzz", help="run generated scenarios (seeds) against a gateway")
    fuzz.add_argument("--seeds", required=True, help="A:B, the seeds A <= seed < B")
    fuzz.add_argument("--gateway", default="reference")
    fuzz.add_argument("-j", "-n", "--jobs", dest="workers", help="worker processes, or 'auto' (default 1)")
    fuzz.add_argument("--shard", help="I/N: run only every N-th seed, starting at the I-th (1-based)")
    fuzz.add_argument("--time-budget", help="stop taking new seeds after this long: 60s, 10m, or seconds (90)")
    fuzz.add_argument("--out", default="fuzz-failures", help="where failing scenarios go (default fuzz-failures)")
    fuzz.add_argument("--profile", default="default", choices=sorted(PROFILES))
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
    fuzz.set_defaults(func=guarded(cmd_fuzz), parser=fuzz)
    shrink_cmd = subparsers.add_parser("shrink", help="shrink a failing scenario file, keeping one check's failure")
    shrink_cmd.add_argument("file")
    shrink_cmd.add_argument("--gateway", default="reference")
    shrink_cmd.add_argument("--check", help="the check whose failure to keep (default: the first failing)")
    shrink_cmd.add_argument("--out", default="fuzz-failures",
                            help="where the shrunk file goes, as NAME.shrunk.yaml (default fuzz-failures, as fuzz)")
    shrink_cmd.set_defaults(func=guarded(cmd_shrink))
    from conformance.search import explore  # here: explore imports this module's helpers

    explore.add_command(subparsers)
    if "zoo" in subparsers.choices:
        from conformance.search.zoo_generated import add_zoo_generated

        add_zoo_generated(subparsers.choices["zoo"])
