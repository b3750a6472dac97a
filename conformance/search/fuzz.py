"""Generated scenarios at scale: seeds run (in worker processes), failures written and shrunk.

Seeds A:B are A <= seed < B. Each seed is a pure function (`sim.generate.scenario_for_seed`),
so the verdicts do not depend on the number of workers or shards: `--shard I/N` takes every
N-th seed starting at the I-th, and the shards' failures together are the serial run's.
The commands (`fuzz`, `shrink`, `explore`, `zoo --generated`) are in `conformance.cli`.
"""

from __future__ import annotations

import argparse
import functools
import itertools
import multiprocessing
import re
import signal
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import suppress
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar

from conformance.harness.calls import REAL_EXIT
from conformance.harness.errors import Interrupted, raise_interrupted
from conformance.harness.runner import DEFAULT_BUDGET, RunResult, cyclic_gc_paused, run_scenario, when_stuck
from conformance.harness.shell import command
from conformance.harness.suite import fresh_gateway
from conformance.harness.verdict import CHECKER_ERROR, FAILING, GatewayFailure
from conformance.harness.watchdog import DEFAULT_STEP_TIMEOUT
from conformance.transport.factory import gateway_factory
from sessiongate import SessiongateError, UsageError
from sim.clock import MINUTE
from sim.generate import scenario_for_seed
from sim.loader import load_file, load_text
from sim.scenario import Scenario
from sim.shrink import Predicate, shrink, write_beside
from sim.writer import dump_text

BAD = (*FAILING, CHECKER_ERROR)
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
    """`--isolate`, `--step-timeout` and `--memory-mb` (`cli.args.add_isolation_options`), in a form a
    worker process can be handed. The defaults run the gateway in process; exec: is always a child."""

    isolate: bool = False
    step_timeout: float = DEFAULT_STEP_TIMEOUT
    memory_mb: int | None = None

    @staticmethod
    def of(args: argparse.Namespace) -> Isolation:
        return Isolation(args.isolate, args.step_timeout, args.memory_mb)


@functools.cache
def factory(gateway: str, isolation: Isolation = Isolation()) -> Callable[[], Any]:
    """`transport.factory.gateway_factory`, once per process: entry-point discovery costs milliseconds per call."""
    options = argparse.Namespace(gateway=gateway, isolate=isolation.isolate, step_timeout=isolation.step_timeout,
                                 memory_mb=isolation.memory_mb)
    return gateway_factory(options)


# -- failures and the shrink predicate -------------------------------------------------

def failing(result: RunResult) -> dict[str, str]:
    """check id -> one-line summary, for every check that failed, errored or timed out."""
    return {check: v.summary for check, v in result.verdicts.items() if v.status in BAD}


ERROR = "error"  # the key's first part for a gateway error (`SeedOutcome.key`): no check's finding
_CLASS = re.compile(r"[A-Za-z_][\w.]*")


def error_signature(failure: GatewayFailure) -> str:
    """What makes two gateway errors one kind: the call it came out of (without its line or
    ids) and the exception's class, or, for what the harness found wrong in the gateway's
    answer, its first words. A shrink keeps it; fuzz shrinks each kind once."""
    call = failure.event.split(" (line ")[0].split()[0] if failure.event.strip() else "?"
    head = failure.message.split(":", 1)[0]
    if not _CLASS.fullmatch(head):
        head = " ".join(failure.message.split()[:4])
    return f"{failure.kind} in {call}: {head}"


def same_error(gateway: str, signature: str, isolation: Isolation = Isolation(), budget: int | None = None) -> Predicate:
    """True for scenarios on which `gateway` still fails with a gateway error of this kind
    (`budget`: engine events a candidate may take; None: `candidate_budget`)."""
    make = factory(gateway, isolation)

    def fails(scenario: Scenario) -> bool:
        failure = run_scenario(scenario, fresh_gateway(make, gateway), gateway, budget=budget or candidate_budget(scenario)).failure
        return failure is not None and error_signature(failure) == signature

    return fails


def same_failure(gateway: str, check: str, status: str, control: str | None = None,
                 isolation: Isolation = Isolation(), budget: int | None = None) -> Predicate:
    """True for scenarios on which `gateway` still gives `check` the verdict `status` (and,
    with `control`, that gateway does not fail it: the failure still tells the two apart).
    `isolation` is the run's: a gateway isolated because it may hang is isolated while shrinking.
    `budget`: engine events a candidate may take (None: `candidate_budget`)."""
    make = factory(gateway, isolation)
    control_factory = factory(control) if control else None

    def fails(scenario: Scenario) -> bool:
        events = budget or candidate_budget(scenario)
        verdict = run_scenario(scenario, fresh_gateway(make, gateway), gateway, budget=events).verdicts.get(check)
        if verdict is None or verdict.status != status:
            return False
        if control_factory is None:
            return True
        other = run_scenario(scenario, control_factory(), control or "", budget=events).verdicts.get(check)
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
    other_slug: str = ""  # that violation's slug: the kind of failure the shrink ended on


def shrink_and_write(scenario: Scenario, original: Path, gateway: str, check: str, status: str,
                     control: str | None = None, isolation: Isolation = Isolation(), slug: str = "",
                     error: str = "") -> Shrinking:
    """Shrink a failing scenario keeping `check`'s verdict; write it beside `original`. With
    `slug` (the original's first violation), say when the shrunk one no longer shows it: the
    shrink keeps the check failing, and may end on another bug of the same check. With `error`
    (`error_signature`), keep a gateway error of that kind instead of a check's verdict."""
    def predicate(budget: int | None) -> Predicate:
        return same_error(gateway, error, isolation, budget) if error else same_failure(gateway, check, status, control,
                                                                                          isolation, budget)

    fails = predicate(None)
    if not fails(scenario):  # a gateway that takes more engine events than a candidate may (a retry storm): the run's budget
        fails = predicate(DEFAULT_BUDGET)
    shrunk = shrink(scenario, fails)
    other = other_slug = ""
    if slug and not error:
        verdict = run_scenario(shrunk.scenario, fresh_gateway(factory(gateway, isolation), gateway), gateway,
                               budget=candidate_budget(shrunk.scenario)).verdicts.get(check)
        violations = verdict.violations if verdict is not None else ()
        if violations and slug not in [v.slug for v in violations]:
            other, other_slug = violations[0].message, violations[0].slug
    # It is shown to fail on `gateway` only: it claims to catch that variant, if any, and no other.
    catches = tuple(c for c in scenario.catches if gateway == f"reference:{c}")
    result = replace(shrunk.scenario, name=f"{scenario.name}-shrunk", catches=catches)
    header = (f"shrunk from {scenario.name} (seed {scenario.seed}, {shrunk.original_events} events) "
              f"to {len(result.events)} events in {shrunk.runs} runs\n"
              + (f"failing: gateway {error} on gateway {gateway}" if error else
                 f"failing: {check} ({status}) on gateway {gateway}" + (f", not on {control}" if control else "")) + "\n"
              "reproduce: " + command("run", str(original.with_name(original.stem + ".shrunk.yaml")), "--gateway", gateway))
    if other:
        header += f"\nNOTE: this fails {check} another way than the original (another bug of the same check?): {other}"
    path, reproduces = write_beside(original, result, header, fails)
    return Shrinking(len(result.events), shrunk.original_events, shrunk.runs, str(path), reproduces, other, other_slug)


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
    first: bool = False  # the run's first seed: a factory that fails there is a usage error (nothing ran yet)
    avoid: frozenset[str] = frozenset()  # `--fit`: the features the gateway declares unsupported, never drawn


@dataclass(frozen=True)
class SeedOutcome:
    seed: int
    vacuous: int = 0  # checks that passed having examined nothing
    failing: dict[str, str] = field(default_factory=dict)
    path: str = ""
    shrunk: Shrinking | None = None
    broken: bool = False  # the gateway raised or ran away (an error or timeout, not a check's finding)
    refused: bool = False  # it raised NotImplementedError at start: a config it says it cannot drive
    skipped: tuple[str, ...] = ()  # not judged: the features its config uses that the gateway declares unsupported
    start_error: str = ""  # broken before the scenario's first event: the gateway may not start at all
    checker_error: bool = False  # a check raised on its log: sessiongate's bug (exit 4)
    key: tuple[str, str] = ("", "")  # (first failing check, its first violation's slug): what makes a failure distinct
    status: str = ""  # that check's verdict status
    message: str = ""  # that violation's message
    played: bool = False  # it crashed the gateway by its own crash() call only (`RunResult.crashes`)
    same_as: int | None = None  # shrunk, it failed as this earlier seed's kind did: not a kind of its own


def fitted_to(avoid: frozenset[str]) -> str:
    """How a fitted seed's header says what it was drawn without ('' for an unfitted seed)."""
    return f", fitted (drawing no {', '.join(sorted(avoid))})" if avoid else ""


FIT_PROBE = "name: fit-probe\nstart: 2026-01-05T09:00\nevents:\n  - message: alice\n"


def declared_unsupported(gateway: str, isolation: Isolation) -> frozenset[str]:
    """What `gateway` declares unsupported (`Profile.unsupported`), asked as a run asks it: one
    message, run and not judged, its profile read from the log. `fuzz --fit` and `replay --seed
    --fit` draw none of it. A gateway that cannot answer is a usage error naming its failure."""
    from conformance.features import FEATURES

    made = fresh_gateway(factory(gateway, isolation), gateway, unknown_raises=True)
    result = run_scenario(load_text(FIT_PROBE), made, gateway, check=False, step_timeout=isolation.step_timeout)
    profile = result.records[0].d("profile") if result.records and result.records[0].kind == "scenario" else None
    if (result.failure is not None and result.failure.step == 0) or not isinstance(profile, dict):
        failure = result.failure.describe() if result.failure is not None else "no profile in its log"
        raise UsageError(f"--fit: asking {gateway} what it supports, one message: {failure}")
    return frozenset(profile.get("unsupported", ())) & FEATURES


def run_seed(task: SeedTask) -> SeedOutcome:
    """Generate, run and judge one seed; write a failing one (and its shrunk form) to `out`."""
    global _IN_SEED
    _IN_SEED = True
    try:
        with when_stuck(functools.partial(_stuck, task)):
            return _run_seed(task)
    except Interrupted as stop:
        if _IN_WORKER:
            _worker_exit(stop.args[0] if stop.args else signal.SIGTERM)
        raise
    finally:
        _IN_SEED = False


def _stuck(task: SeedTask, result: RunResult | None, _code: int) -> None:
    """The seed's gateway cannot be stopped in this process (`runner.when_stuck`), which ends
    now: the seed's error said here, since no outcome can be handed back (in a worker, the
    parent finds the worker gone: `WorkerDied`)."""
    if result is not None and result.failure is not None:
        print(f"seed {task.seed}: {result.failure.describe()}", flush=True)


class WorkerDied(SessiongateError):
    """A worker process ended while it had seeds to run (a gateway it could not stop, a crash of
    the interpreter): its seeds' outcomes are lost, and the pool would wait for them for good."""


def _run_seed(task: SeedTask) -> SeedOutcome:
    scenario = scenario_for_seed(task.seed, task.profile, task.avoid)
    with cyclic_gc_paused():  # the run's log is freed before the collector is back: it would walk every record
        gateway = fresh_gateway(factory(task.gateway, task.isolation), task.gateway, unknown_raises=task.first)
        result = run_scenario(scenario, gateway, task.gateway, strict=task.strict,
                              crash_points=task.crash_points, step_timeout=task.isolation.step_timeout)
        bad, failure, verdicts, skipped = failing(result), result.failure, result.verdicts, result.skipped_features
        played = result.crashes == "played"
        scenario = result.scenario  # with --crash-points, the fires written in as `crash_at` events
        del result
    if skipped:
        return SeedOutcome(task.seed, skipped=skipped)
    vacuous = sum(v.vacuous for v in verdicts.values())
    checker = any(v.status == CHECKER_ERROR for v in verdicts.values())
    if not bad:
        return SeedOutcome(task.seed, vacuous, played=played)
    if failure is not None and failure.refused:
        return SeedOutcome(task.seed, vacuous, bad, refused=True)  # not a finding: nothing to write or shrink
    out = Path(task.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{scenario.name}.yaml"
    header = "\n".join([f"generated: seed {task.seed}, profile {task.profile}{', crash points' if task.crash_points else ''}"
                        f"{fitted_to(task.avoid)}; gateway {task.gateway}",
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
    if failure is not None:  # one kind of gateway error (a timeout is never shrunk: each candidate would wait it out)
        return SeedOutcome(task.seed, vacuous, bad, str(path), None, broken=True, start_error=start_error,
                           checker_error=checker, key=(ERROR if failure.kind == "error" else "timeout", error_signature(failure)),
                           status=failure.kind, message=failure.describe(), played=played)
    return SeedOutcome(task.seed, vacuous, bad, str(path), None, start_error=start_error,
                       checker_error=checker, key=(check, first.slug if first is not None else verdict.status),
                       status=verdict.status, message=first.message if first is not None else verdict.summary, played=played)



def kinds(seen: dict[tuple[str, str], int]) -> int:
    """Distinct failures in `shrink_distinct`'s `seen`: the seeds its kinds lead to."""
    return len(set(seen.values()))


def shrink_distinct(outcome: SeedOutcome, task: SeedTask, seen: dict[tuple[str, str], int]) -> SeedOutcome:
    """Shrink a counted failure if it is the first of its kind (`SeedOutcome.key`), in the
    parent, so a buggy gateway's thousand failures of one bug cost one shrink, not a thousand.
    Marks its kind seen either way, by the seed that first showed it (`seen`). A shrink that
    ends on another violation of the check marks that kind too: one that an earlier seed showed
    makes this failure that seed's (`same_as`, not a distinct failure: several first violations
    of one bug shrink to it). A gateway error is shrunk keeping its kind
    (`error_signature`); a timeout, or an error before the first event, is neither shrunk nor
    counted as a kind (nor saved in the failure database)."""
    check, slug = outcome.key
    if not outcome.failing or outcome.refused or outcome.key in seen or (outcome.broken and (check != ERROR or outcome.start_error)):
        return outcome
    seen[outcome.key] = outcome.seed
    if not task.shrink:
        return outcome
    shrunk = shrink_and_write(load_file(outcome.path), Path(outcome.path), task.gateway, check, outcome.status,
                              isolation=task.isolation, slug=slug, error=slug if check == ERROR else "")
    if shrunk.other_slug:
        ended = (check, shrunk.other_slug)
        if ended in seen:
            seen[outcome.key] = seen[ended]
            return replace(outcome, shrunk=shrunk, same_as=seen[ended])
        seen[ended] = outcome.seed
    return replace(outcome, shrunk=shrunk)


def in_order(fn: Callable[[T], R], items: Iterable[T], workers: int, chunksize: int = 1) -> Iterator[R]:
    """fn over items, results in the items' order, on `workers` processes."""
    if workers <= 1:
        yield from map(fn, items)
        return
    # spawn, not fork: a forked worker inherits whatever lock one of the parent's threads held
    # (a gateway's, a test runner's), and a stopped pool then waited on it for good.
    pool = multiprocessing.get_context("spawn").Pool(workers, initializer=_worker_init)
    try:
        # Chunks made here, not by imap's `chunksize` (whose iterator has no `next(timeout)`).
        results = pool.imap(functools.partial(_each, fn), _chunks(items, chunksize))
        started = list(pool._pool)  # the pool's own worker list: Pool has no public one
        while True:
            try:
                chunk = results.next(timeout=WORKER_POLL)
            except StopIteration:
                return
            except multiprocessing.TimeoutError:
                if dead := [w.exitcode for w in started if w.exitcode is not None]:  # the pool replaced it; its seeds are lost
                    how = f"was killed by {signal.Signals(-dead[0]).name}" if dead[0] < 0 else f"exited with status {dead[0]}"
                    raise WorkerDied(f"a worker process {how} while running seeds") from None
                continue
            yield from chunk
    finally:
        end_pool(pool)


def _each(fn: Callable[[T], R], chunk: tuple[T, ...]) -> list[R]:
    return [fn(item) for item in chunk]


def _chunks(items: Iterable[T], size: int) -> Iterator[tuple[T, ...]]:
    it = iter(items)
    while chunk := tuple(itertools.islice(it, size)):
        yield chunk


WORKER_POLL = 1.0  # seconds between looks for a worker that died while the parent waits for a result


STOP_GRACE = 2.0  # seconds a worker has after a stop signal before the next, stronger one


def end_pool(pool: Any) -> None:
    """`Pool.terminate`, which SIGTERMs every worker and then waits for each for good, with a
    watchdog that repeats the SIGTERM after STOP_GRACE and sends SIGKILL after twice that. A
    worker can miss the first: the kernel handed it to a thread a gateway had started while the
    worker's main thread sat in the pool's queue (a Python handler runs only in the main thread,
    and that wait is not interrupted), or a gateway set SIGTERM to be ignored. Either hung the
    run for good (seen in CI: a bench's pool waited 600 s)."""
    done = threading.Event()
    watchdog = threading.Thread(target=_escalate, args=(pool, done), name="sessiongate-pool-stop", daemon=True)
    watchdog.start()
    try:
        pool.terminate()
    finally:
        done.set()
        watchdog.join()


def _escalate(pool: Any, done: threading.Event) -> None:
    for stop in ("terminate", "kill"):
        if done.wait(STOP_GRACE):
            return
        for worker in list(pool._pool):  # the pool's own worker list: Pool has no public one
            with suppress(ValueError, OSError):  # reaped meanwhile: nothing to stop
                getattr(worker, stop)()
    # A worker killed while it waited for a task held the task queue's read lock, and a killed
    # process releases nothing: `Pool.terminate` first takes that lock (`_help_stuff_finish`) and
    # waited for it for good (CI, once in three runs: a gateway deaf to SIGTERM while the stop
    # came). Every worker is dead by now; the lock is released for it (ValueError: it was free).
    while not done.wait(STOP_GRACE):
        with suppress(ValueError, OSError, AttributeError):
            pool._inqueue._rlock.release()


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
    # Between seeds there is nothing to unwind, and the signal may land anywhere, in the
    # interpreter's own shutdown too (joining the queue's feeder thread), where a SystemExit
    # is printed as an ignored exception's traceback and the process exits 0: end at once.
    REAL_EXIT(128 + signum)


def _worker_exit(signum: int) -> None:
    """A worker told to stop: `Interrupted` (the harness's own signal, which the runner lets
    through: a SystemExit raised inside a gateway call was that gateway's error, and the worker
    went back to its queue while the pool waited for it to end) becomes a quiet exit here."""
    raise SystemExit(128 + signum)


