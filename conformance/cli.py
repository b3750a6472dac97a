"""`sessiongate`: run scenarios against a gateway and print verdicts.

    sessiongate run [PATHS…] [--gateway NAME] [--table] [--report DIR]   (default: the catalog, reference)
    sessiongate replay FILE [--gateway NAME]                              (the whole timeline of observations)
    sessiongate zoo [--matrix] [--report DIR] [--generated --seeds A:B]   (every bug-zoo variant must be caught)
    sessiongate fuzz --seeds A:B [-n auto] [--shard I/N]                  (generated scenarios; failures shrunk)
    sessiongate shrink FILE | explore --depth D | report RUN_DIR | coverage

Exit codes: 0 nothing unexpected failed, 1 something did, 2 usage or input error,
4 a check itself raised (a sessiongate bug: some verdicts are `checker-error`), 130/143 interrupted.
"""

from __future__ import annotations

import argparse
import difflib
import importlib
import math
import os
import shlex
import signal
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn

from conformance import leftovers
from conformance.adapter import raise_interrupted
from conformance.failure_db import FailureDB
from conformance.observations import Obs
from conformance.registry import UnknownGateway, expectation_names, resolve
from conformance.runner import DEFAULT_BUDGET, RunResult, run_scenario
from conformance.suite import (
    EXPECTATIONS,
    XPASS_PREFIX,
    Expectations,
    catalog_file,
    catalog_paths,
    fresh_gateway,
    load_all,
    outcome,
    run_all,
    scenario_paths,
    vacuous_checks,
    vacuous_note,
)
from conformance.verdict import CHECK_IDS, CHECKER_ERROR, GatewayFailure, Verdict
from sim.document import ScenarioError
from sim.scenario import Scenario

SYMBOL = {"pass": ".", "fail": "F", "xfail": "x", "xpass": "X", "error": "E", "timeout": "T", "skip": "s", "checker-error": "!"}
EXIT_CHECKER_ERROR = 4  # a check raised on some log: the verdicts are incomplete, whatever else passed


class UsageError(ValueError):
    """A malformed option or argument: the CLI prints it and exits with status 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        print(f"{self.prog}: error: {message}", file=sys.stderr)
        raise SystemExit(2)


def _seconds(text: str) -> float:
    try:
        value = float(text.rstrip("s"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds like '10' or '2.5s', got {text!r}") from None
    if not math.isfinite(value):  # inf would overflow the wall-clock wait, nan never compares
        raise argparse.ArgumentTypeError(f"expected a finite number of seconds, got {text!r}")
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {text!r}")
    return value


def _megabytes(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number of megabytes, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive number of megabytes, got {text!r}")
    return value


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}")
    return value


OWN_FACTORIES = ("reference", "selftest")  # sessiongate's own: safe and cheap to call in this process


def exec_argv(name: str) -> list[str]:
    """The command of an `exec:` gateway name, or a UsageError saying what is wrong with it."""
    try:
        argv = shlex.split(name[5:])
    except ValueError as err:  # e.g. an unclosed quote
        raise UsageError(f"gateway {name!r}: {str(err).lower()}") from None
    if not argv:
        raise UsageError("exec: needs a command, e.g. exec:\"node my-gateway.js\"")
    return argv


def check_gateway(name: str, find: Callable[[str], Callable[[], Any]] = resolve) -> None:
    """A bad gateway name is a usage error before any scenario runs (`find` lets tests stub `resolve`)."""
    if name.startswith("exec:"):
        exec_argv(name)
    find(name)


def check_out_dir(directory: str | None, option: str) -> None:
    """A directory the command writes into later must be usable now: creating it only at the end
    would fail after every scenario had run. Creates nothing."""
    if not directory:
        return
    path = Path(directory)
    if path.exists():
        if not path.is_dir():
            raise UsageError(f"{option} {directory}: exists and is not a directory")
        if not os.access(path, os.W_OK | os.X_OK):
            raise UsageError(f"{option} {directory}: directory is not writable")
        return
    parent = path.absolute().parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise UsageError(f"{option} {directory}: cannot be created, {parent} is not a directory")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise UsageError(f"{option} {directory}: cannot be created in {parent} (not writable)")


def scenario_files(paths: Sequence[str]) -> list[Path]:
    """The scenario files PATHS name (files, and folders' *.yaml, *.yml, *.json), or the catalog
    when none is named. A missing path, or folders with nothing in them, is a usage error: nothing
    to run is not a success."""
    paths = [path if Path(path).exists() else str(catalog_file(path) or path) for path in paths]
    missing = [path for path in paths if not Path(path).exists()]
    if missing:
        raise UsageError(f"{missing[0]}: no such file or directory (nor a catalog scenario's name)")
    found = scenario_paths(list(paths)) if paths else catalog_paths()
    if not found:
        raise UsageError(f"no scenario files in {', '.join(paths)} (*.yaml, *.yml, *.json)")
    return found


def _check_writable_names(scenarios: list[Scenario]) -> None:
    """Printing escapes a lone surrogate (a JSON "\\ud800"); the report files are UTF-8 and cannot hold one."""
    for scenario in scenarios:
        try:
            scenario.name.encode("utf-8")
        except UnicodeEncodeError:
            raise UsageError(f"{scenario.source}: scenario name {scenario.name!r} is not valid Unicode; "
                             "--report cannot write it") from None


def load_expectations(gateway: str, explicit: str | None) -> Expectations:
    """The expectations file for `gateway` (`explicit` if given), or a UsageError saying why it cannot be read."""
    try:
        return Expectations.for_gateway(gateway, explicit)
    except IsADirectoryError:
        raise UsageError(f"{explicit}: expectations file is a directory") from None
    except UnicodeDecodeError as err:
        raise UsageError(f"{explicit}: expectations file is not UTF-8 (byte {err.object[err.start]:#04x} at offset {err.start})") from None
    except OSError as err:
        raise UsageError(f"{explicit}: cannot read the expectations file: {err.strerror}") from None


# -- run ------------------------------------------------------------------------------


def cannot_start(result: RunResult) -> bool:
    """It failed before the scenario's first event (a handshake that timed out, a factory that
    raised): every other scenario would fail the same way, each after the same wait. A refusal
    (NotImplementedError at start: a config it says it cannot drive) is about its scenario."""
    failure = result.failure
    return (failure is not None and failure.step == 0 and failure.event != "determinism"
            and not (failure.event == "start" and failure.message.startswith("NotImplementedError")))


def skipped_note(result: RunResult) -> str:
    """A scenario can pass with its key event skipped: say so on its line, not only in `replay`.
    Skipped are events the gateway declares unsupported, a stop while it is down and a restart
    while it runs (a scenario that does not say what its author meant)."""
    if result.skipped:
        return f" (not judged: {result.skipped})"
    unsupported = result.profile.unsupported
    why = []
    left_out = ""
    for r in result.records:
        if r.kind == "skipped" and r.d("scope") == "config":
            left_out = f" (providers left out: {', '.join(r.d('providers'))})"
        elif r.kind == "skipped":
            event = r.d("event")
            if event == "muted":
                why.append("muted, unsupported: delivered plain")
            elif event in unsupported:
                why.append(f"{event}, unsupported")
            elif event == "restart":
                why.append("restart while running")
            elif event == "crash_at":
                why.append("crash_at, a point the gateway does not declare")
            else:
                why.append(f"{event} while down")
    if not why:
        return left_out
    return f"{left_out} ({len(why)} event{'s' if len(why) != 1 else ''} skipped: {'; '.join(dict.fromkeys(why))})"


def _scenario_line(result: RunResult, *, every_violation: bool = False, expectations: str = "") -> list[str]:
    """A scenario's outcome and, below it, why. `every_violation` lists each violation (replay);
    otherwise the first, and how many more (run). `expectations` names the file behind an xpass."""
    word = outcome(result)
    hollow = vacuous_note(result) if word == "pass" else ""  # a pass that judged less than it seems
    lines = [f"{word:<5} {result.scenario.name}{skipped_note(result)}{hollow}"]
    if result.failure is not None:
        lines.append(f"      {result.failure.describe()}")
        # The last line repeats the message; a stack from another language may say "at" itself.
        frames = [f.strip().removeprefix("at ").strip() for f in result.failure.traceback[:-1]]
        if frames:
            lines.append(f"      at {' > '.join(frames)}")
        return lines
    broken: dict[str, list[str]] = {}  # a checker error's reason -> the checks it stands for (the oracle's: all)
    for check, verdict in result.verdicts.items():
        if verdict.status == CHECKER_ERROR:
            broken.setdefault(verdict.reason, []).append(check)
        elif verdict.status == "xpass":
            lines.append(f"      {check} {unexpected_pass(verdict, expectations)}")
        elif verdict.status != "fail":
            continue
        elif every_violation and verdict.violations:
            lines += [f"      {check} {violation.message}" for violation in verdict.violations]
        elif len(verdict.violations) > 1:
            more = len(verdict.violations) - 1
            lines.append(f"      {check} {verdict.violations[0].message} (+{more} more: replay or --report lists all)")
        else:
            lines.append(f"      {check} {verdict.summary}")
    lines += [f"      {','.join(checks)} {reason}" for reason, checks in broken.items()]
    return lines


def unexpected_pass(verdict: Verdict, expectations: str = "") -> str:
    """An xpass in words: the check passed, and the file that says it fails is the one to edit."""
    where = _shown_path(expectations) if expectations else "the expectations file"
    return f"passed, but {where} says it fails: {verdict.reason.removeprefix(XPASS_PREFIX)}"


def _shown_path(path: str) -> str:
    """`path` relative to the working directory when it is under it: short, and still exact."""
    try:
        return str(Path(path).resolve().relative_to(Path.cwd()))
    except ValueError:
        return path


def _table(results: list[RunResult]) -> list[str]:
    width = max((len(r.scenario.name) for r in results), default=8)
    lines = [f"{'scenario':<{width}}  " + " ".join(f"{c:>2}" for c in CHECK_IDS)]
    for result in results:
        cells = " ".join(f"{SYMBOL[result.verdicts[c].status] if c in result.verdicts else 'E':>2}" for c in CHECK_IDS)
        lines.append(f"{result.scenario.name:<{width}}  {cells}")
    lines.append("(. pass  F fail  x expected failure  X unexpected pass  E error  T timeout  s skip  ! checker error)")
    return lines


def summary_line(results: list[RunResult], unloaded: int = 0) -> str:
    words = [outcome(r) for r in results]
    failed = sum(1 for w in words if w in ("fail", "error", "timeout"))
    line = f"{len(results)} scenarios, {words.count('pass')} passed, {failed} failed"
    if broken := words.count("error") + words.count("timeout"):  # the gateway, not a check, failed these
        line += f" ({broken} gateway error{'s' if broken != 1 else ''})"
    if words.count("xfail"):
        line += f", {words.count('xfail')} expected failures"
    if words.count("skip"):  # neither passed nor failed: not judged (an unsupported feature)
        line += f", {words.count('skip')} skipped"
    if unloaded:
        line += f", {unloaded} file{'s' if unloaded != 1 else ''} not loaded"
    if checker := words.count(CHECKER_ERROR):  # neither passed nor failed: a check could not judge them
        line += f", {checker} checker error{'s' if checker != 1 else ''} (a sessiongate bug)"
    if vacuous := vacuous_checks(results):
        line += f"; {vacuous} check{'s' if vacuous != 1 else ''} vacuous (examined nothing)"
    return line


def exit_code(results: list[RunResult], unloaded: int = 0) -> int:
    """4 if a check raised on any run (the verdicts are incomplete), else 1 if anything
    unexpected failed or a file did not load, else 0."""
    words = {outcome(r) for r in results}
    if CHECKER_ERROR in words:
        return EXIT_CHECKER_ERROR
    return 1 if unloaded or words & {"fail", "error", "timeout"} else 0


def _write_report(results: list[RunResult], directory: str | None, gateway: str,
                  unloaded: list[ScenarioError] | None = None) -> None:
    if not directory:
        return
    try:
        reports = importlib.import_module("reports")
        write = reports.write_all
    except (ImportError, AttributeError):
        print("sessiongate: --report needs the reports package", file=sys.stderr)
        return
    write(results, directory, gateway, unloaded or [])
    print(f"report written to {directory}")


def gateway_factory(args: argparse.Namespace, env: dict[str, str] | None = None) -> Callable[[], Any]:
    """The named gateway, in a child process of its own when isolated (always for exec:)."""
    from conformance.exec_gateway import ExecGateway, isolated

    name = args.gateway
    timeout, memory = args.step_timeout, args.memory_mb
    if name.startswith("exec:"):
        argv = exec_argv(name)
        return lambda: ExecGateway(argv, step_timeout=timeout, memory_mb=memory, env=env)
    factory = resolve(name)  # unknown names fail here, before any child starts
    if args.isolate:
        if name.partition(":")[0] in OWN_FACTORIES:  # an unknown variant or self-test fails here, not once per child
            factory()
        # Anyone else's factory runs only in the children: one that hangs or kills its process
        # cannot take this one, and the report, along.
        return lambda: isolated(name, step_timeout=timeout, memory_mb=memory, env=env)
    return factory


def first_divergence(first: Sequence[Obs], second: Sequence[Obs]) -> tuple[int, str]:
    """The step of the first record (numbered from 1) where two logs differ, and the two lines."""
    for number, (x, y) in enumerate(zip(first, second, strict=False), start=1):
        if (a := x.to_json()) != (b := y.to_json()):
            return x.step, f"record {number}: {a[:160]}  vs  {b[:160]}"
    shorter = min(len(first), len(second))
    longer = first if len(first) > shorter else second
    step = longer[shorter].step if len(longer) > shorter else 0
    return step, f"record {shorter + 1}: one log is longer ({len(first)} vs {len(second)} records)"


def check_determinism(result: RunResult, factory: Callable[[], Any]) -> None:
    """Run the scenario again (with --isolate, in a child under another PYTHONHASHSEED); a different log
    means the gateway reads the real clock, races threads or uses unseeded randomness. Reported at the
    step of the first record that differs: it is that scenario's error, and the run goes on."""
    if result.failure is not None:
        return
    again = run_scenario(result.scenario, fresh_gateway(factory, result.gateway), result.gateway, check=False)
    if again.log_text() != result.log_text():
        step, where = first_divergence(result.records, again.records)
        result.failure = GatewayFailure("error", step, "determinism",
                                        f"nondeterministic gateway (real clock read, thread race or unseeded randomness): "
                                        f"two runs diverge at {where}")


def cmd_run(args: argparse.Namespace) -> int:
    factory = gateway_factory(args)
    again = gateway_factory(args, env={"PYTHONHASHSEED": "12345"})
    check_out_dir(args.report, "--report")
    paths = scenario_files(args.paths)
    expectations = load_expectations(args.gateway, args.expectations)
    scenarios, errors = load_all(paths)
    for error in errors:
        print(f"error {error}", file=sys.stderr)
    if errors and not scenarios:
        return 2
    if args.report:
        _check_writable_names(scenarios)
    if not args.paths and not errors:  # the whole catalog: an entry a letter or two off a catalog name is a typo
        names = sorted(s.name for s in scenarios)
        near = {n: close[0] for n in sorted(expectations.scenarios() - set(names))
                if (close := difflib.get_close_matches(n, names, n=1, cutoff=0.9))}  # not a file of the author's own
        if near:
            print(f"warning: {expectations.source or 'the expectations file'} names no catalog scenario "
                  f"{', '.join(f'{n!r} (did you mean {c!r}?)' for n, c in near.items())}: a typo expects nothing",
                  file=sys.stderr)
    db = FailureDB.open(args.gateway, not args.no_failure_db)
    saved = saved_failures(db)
    scenarios = [*saved, *scenarios]
    results: list[RunResult] = []
    try:
        for result in run_all(scenarios, factory, args.gateway, expectations, args.budget, args.strict):
            if args.check_determinism:
                check_determinism(result, again)
            results.append(result)
            if not args.quiet or outcome(result) not in ("pass", "xfail"):
                print("\n".join(_scenario_line(result, expectations=expectations.source)), flush=True)
            if len(results) <= len(saved):
                forget_if_fixed(db, result)
            if len(results) == 1 and len(scenarios) > 1 and cannot_start(result):
                print(f"stopped: the gateway failed before the first event of {result.scenario.name}; it cannot "
                      f"start ({len(scenarios) - 1} scenarios not run)")
                break
    except KeyboardInterrupt as stop:  # Ctrl-C or SIGTERM: keep what finished
        _write_report(results, args.report, args.gateway, errors)
        print(summary_line(results, len(errors)) + " (interrupted)")
        return 143 if stop.args and stop.args[0] == signal.SIGTERM else 130
    if args.table:
        print("\n".join(_table(results)))
    _write_report(results, args.report, args.gateway, errors)
    print(summary_line(results, len(errors)))
    return exit_code(results, len(errors))


def saved_failures(db: FailureDB | None) -> list[Scenario]:
    """The gateway's saved failures (`conformance.failure_db`), to run first, said in one line;
    a saved file that no longer loads is said and skipped, never the run's error."""
    if db is None:
        return []
    saved, broken = load_all(db.saved())
    for error in broken:
        print(f"warning: skipping a saved failure that does not load: {error}", file=sys.stderr)
    if saved:
        print(f"replaying {len(saved)} saved failure{'s' if len(saved) != 1 else ''} first ({db.shown()}; "
              "--no-failure-db skips them)")
    return saved


def forget_if_fixed(db: FailureDB | None, result: RunResult) -> None:
    """A saved failure that passes now leaves the database."""
    if db is not None and outcome(result) == "pass" and result.scenario.source:
        db.forget(Path(result.scenario.source))
        print(f"      {result.scenario.name} passes now: removed from {db.shown()}")


def add_failure_db_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--no-failure-db", action="store_true",
                        help="neither replay nor save failures in .sessiongate/failures/ (or $SESSIONGATE_FAILURE_DB)")


# -- update-expectations --------------------------------------------------------------

TODO_REASON = "TODO: what the gateway does, and where (file:function)"


def expectation_lines(results: list[RunResult], old: Expectations) -> tuple[list[str], int]:
    """One `SCENARIO CHECK SIGNATURE  # reason` line per distinct violation of every failing
    check, in run order; each keeps the reason its signature (or, from an unsigned line, its
    check) had, else a TODO for a person to fill. Also returns how many are TODO."""
    lines: list[str] = []
    todo = 0
    for result in results:
        for check in CHECK_IDS:
            verdict = result.verdicts.get(check)
            key = (result.scenario.name, check)
            entries = old.signed.get(key, {})
            seen: set[str] = set()
            if verdict is not None and verdict.status in ("fail", "xfail"):
                for signature in dict.fromkeys(v.signature for v in verdict.violations):
                    bare = signature.split(" [not expected", 1)[0]
                    mark = "?" if f"{bare}?" in entries else ""  # a may-occur entry stays one
                    reason = entries.get(bare + mark) or old.pairs.get(key)
                    todo += reason is None
                    seen.add(bare + mark)
                    lines.append(f"{key[0]} {check} {bare}{mark}  # {reason or TODO_REASON}")
            # A may-occur entry this run did not show is kept: it may occur in the next.
            lines += [f"{key[0]} {check} {s}  # {r}" for s, r in entries.items() if s.endswith("?") and s not in seen]
    return lines, todo


def cmd_update_expectations(args: argparse.Namespace) -> int:
    """Run the scenarios, then rewrite the gateway's expectations file from what failed (as
    web-platform-tests' `wpt update-expectations`): reasons carry over, new lines get a TODO."""
    factory = gateway_factory(args)
    paths = scenario_files(args.paths)
    old = load_expectations(args.gateway, args.expectations)
    target = Path(args.expectations or old.source or EXPECTATIONS / f"{expectation_names(args.gateway)[0]}.txt")
    scenarios, errors = load_all(paths)
    for error in errors:
        print(f"error {error}", file=sys.stderr)
    if errors:
        return 2
    results = [Expectations({}).apply(r) for r in run_all(scenarios, factory, args.gateway, None, args.budget)]
    broken = [r for r in results if r.failure is not None]
    for result in broken:
        print(f"{result.failure.kind} {result.scenario.name}: {result.failure.describe()}", file=sys.stderr)  # type: ignore[union-attr]
    header = [line for line in (target.read_text(encoding="utf-8").splitlines() if target.exists() else [])
              if line.startswith("#")]
    lines, todo = expectation_lines(results, old)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text("\n".join([*header, *lines]) + "\n", encoding="utf-8")
    print(f"wrote {_shown_path(str(target))}: {len(lines)} expected failures ({todo} with a TODO reason)"
          + (f"; {len(broken)} scenarios errored and are not listed" if broken else ""))
    return 1 if broken else 0


# -- replay ---------------------------------------------------------------------------


def timeline(result: RunResult) -> list[str]:
    """Every observation as one short line: time, step, what, where. A run of three or more
    records alike but for their time (a gateway retrying a heal every few ms) shows as its
    first line and a count; `until` and `ready` values read as times. Needs nothing of the oracle, so any
    log prints: one cut short by a gateway error, or one no check can read."""
    from conformance.checks.model import time_text
    from sim.clock import SECOND_PASS, from_ms, load_zone

    head = result.records[0] if result.records else None
    zone = load_zone(result.scenario.zone)
    start = head.t if head is not None else None
    shared: dict[int, set[int]] = {}  # second -> the distinct ms of its records
    for r in result.records:
        shared.setdefault(r.t // 1000, set()).add(r.t % 1000)

    def at(t: int) -> str:
        """The time as checks word it, with milliseconds where records of one second differ, and
        '(2nd)' in the second pass of a repeated (fall-back) hour."""
        text = time_text(t, zone, start)
        if len(shared.get(t // 1000, ())) > 1:
            text += f".{t % 1000:03d}" if text.count(":") == 2 else f":00.{t % 1000:03d}"
        return text + (SECOND_PASS if from_ms(t, zone).fold else "")

    lines: list[str] = []
    run: list[tuple[int, str]] = []  # (t, body) of consecutive records with one body

    def flush() -> None:
        if not run:
            return
        t, body = run[0]
        lines.append(f"{at(t):>9}  {body}")
        if len(run) == 2:
            lines.append(f"{at(run[1][0]):>9}  {body}")
        elif len(run) > 2:
            lines.append(f"{'':>9}  … {len(run) - 1} more alike, the last at {at(run[-1][0])}")
        run.clear()

    for r in result.records[1:]:
        if r.kind == "resources":
            continue
        if r.kind == "durable":
            sessions = r.d("sessions", {})
            body = f"#{r.step:<3} durable[{r.d('label')}] " + " ".join(f"{sid}={len(v['rows'])}" for sid, v in sessions.items())
        else:
            where = " ".join(x for x in (r.chat and f"chat={r.chat}", r.session and f"session={r.session}") if x)
            turns = ",".join(r.turns)
            extra = " ".join(f"{k}={at(v) if k in ('until', 'ready') and isinstance(v, int) else v}"
                             for k, v in sorted(r.detail.items()) if k not in ("queued",) and v not in (None, False))
            if r.d("queued"):
                extra = f"held (the gateway is down) {extra}"
            if r.kind == "on_session_end" and not r.turns:
                turns = "(no turns)"
            body = f"#{r.step:<3} {r.kind:<19} {where} {turns} {extra}".rstrip()
        if run and run[-1][1] != body:
            flush()
        run.append((r.t, body))
    flush()
    return lines


def cmd_replay(args: argparse.Namespace) -> int:
    check_gateway(args.gateway)
    factory = resolve(args.gateway)
    if Path(args.file).is_dir():  # a timeline is one scenario's; `run DIR` judges a folder
        raise UsageError(f"{args.file}: is a directory; replay takes one scenario file (run takes folders)")
    scenarios, errors = load_all(scenario_files([args.file]))
    if errors:
        print(f"error {errors[0]}", file=sys.stderr)
        return 2
    result = run_scenario(scenarios[0], factory(), args.gateway)
    if args.jsonl:
        sys.stdout.write(result.log_text())
        return 0
    print("\n".join(timeline(result)))
    print("\n".join(_scenario_line(result, every_violation=True)))
    return exit_code([result])


# -- zoo ------------------------------------------------------------------------------


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
        print("\n".join(["reference " + line for line in _scenario_line(r)]))
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
            failing = [c for c, v in result.verdicts.items() if v.status in ("fail", "error", "timeout")]
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
        return 2
    unknown = [(s, name) for s in scenarios for name in s.catches if name not in VARIANTS]
    if unknown:
        scenario, name = unknown[0]
        raise UsageError(f"{scenario.source or scenario.name}: catches: unknown variant {name!r}; "
                         f"known: {', '.join(sorted(VARIANTS))}")
    all_results: list[RunResult] = []
    try:
        caught, broken_claims, matrix, dirty = _zoo_variants(scenarios, all_results)
    except KeyboardInterrupt as stop:  # Ctrl-C or SIGTERM: keep what finished, as run does
        _write_report(all_results, args.report, "zoo")
        print(f"{len(all_results)} runs of {len(scenarios) * (len(VARIANTS) + 1)} finished (interrupted)")
        return 143 if stop.args and stop.args[0] == signal.SIGTERM else 130
    if args.matrix:
        names = [s.name for s in scenarios]
        print("variant × scenario (digits: failing checks, . none)")
        for number, scenario in enumerate(names):
            print(f"  s{number:02d} = {scenario}")
        print(f"{'':<40} " + " ".join(f"s{n:02d}" for n in range(len(names))))
        for name, row in matrix.items():
            print(f"{name:<40} " + " ".join(f"{row.get(s, '?'):>3}" for s in names))
    _write_report(all_results, args.report, "zoo")
    for claim in broken_claims:
        print(f"CLAIM      {claim}")
    claims = sum(len(s.catches) for s in scenarios)
    print(f"{len(VARIANTS)} variants, {caught} caught" + (f"; reference failed {len(dirty)} scenarios" if dirty else "")
          + (f"; {claims - len(broken_claims)} of {claims} catches: claims hold" if claims else ""))
    if args.paths:  # your own scenarios: their claims and a clean reference are what is asked
        return 0 if not broken_claims and not dirty else 1
    return 0 if caught == len(VARIANTS) and not dirty and not broken_claims else 1


# -- entry ----------------------------------------------------------------------------


def add_isolation_options(parser: argparse.ArgumentParser) -> None:
    """--isolate, --step-timeout and --memory-mb, defined once: `run` and `fuzz` take them alike,
    and `gateway_factory` reads them."""
    parser.add_argument("--isolate", action="store_true", help="run each scenario's gateway in a child process of its own")
    parser.add_argument("--step-timeout", type=_seconds, default=10.0, metavar="SECONDS",
                        help="wall-clock limit per step for isolated and exec: gateways (default 10)")
    parser.add_argument("--memory-mb", type=_megabytes, default=4096, metavar="MB",
                        help="memory cap of an isolated or exec: gateway (default 4096)")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="sessiongate", description="Deterministic session-lifecycle conformance for chat-agent gateways.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    run = sub.add_parser("run", help="run scenarios (default: the catalog) against a gateway")
    run.add_argument("paths", nargs="*", help="scenario files or folders (default: the built-in catalog)")
    run.add_argument("--gateway", default="reference", help="gateway name, NAME:ARG or MODULE:FACTORY (default: reference)")
    run.add_argument("--expectations", help="expected-failures file (default: conformance/expectations/<gateway>.txt)")
    run.add_argument("--table", action="store_true", help="print a scenario × check verdict table")
    run.add_argument("--report", metavar="DIR", help="write JUnit, JSON and HTML reports to DIR")
    run.add_argument("-q", "--quiet", action="store_true", help="print only failing scenarios and the summary")
    add_isolation_options(run)
    run.add_argument("--budget", type=_positive_int, default=DEFAULT_BUDGET, metavar="EVENTS",
                     help=f"simulator events per scenario before a gateway counts as runaway (default {DEFAULT_BUDGET:,})")
    run.add_argument("--check-determinism", action="store_true",
                     help="run each scenario twice and report the first divergence of the logs")
    run.add_argument("--strict", action="store_true", help="a check that examined nothing (vacuous) fails")
    add_failure_db_option(run)
    run.set_defaults(func=cmd_run)
    update = sub.add_parser("update-expectations", help="rewrite a gateway's expectations file from a run")
    update.add_argument("paths", nargs="*", help="scenario files or folders (default: the built-in catalog)")
    update.add_argument("--gateway", default="reference", help="gateway name, NAME:ARG or MODULE:FACTORY (default: reference)")
    update.add_argument("--expectations", help="the file to rewrite (default: the gateway's own, as run finds it)")
    update.set_defaults(func=cmd_update_expectations, isolate=False, step_timeout=10.0, memory_mb=4096, budget=DEFAULT_BUDGET)
    replay = sub.add_parser("replay", help="print a scenario's whole timeline of observations")
    replay.add_argument("file")
    replay.add_argument("--gateway", default="reference")
    replay.add_argument("--jsonl", action="store_true", help="print the raw canonical observation log")
    replay.set_defaults(func=cmd_replay)
    zoo = sub.add_parser("zoo", help="run every bug-zoo variant against the catalog; all must be caught")
    zoo.add_argument("paths", nargs="*", help="scenario files or folders instead of the catalog: each one's "
                     "`catches:` variants must fail it, and the reference must pass it")
    zoo.add_argument("--matrix", action="store_true", help="print variant × scenario")
    zoo.add_argument("--report", metavar="DIR")
    zoo.set_defaults(func=cmd_zoo)
    for module in ("conformance.fuzz", "reports.cli"):  # fuzz, shrink, explore, zoo --generated; report, coverage
        importlib.import_module(module).add_commands(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    for stream in (sys.stdout, sys.stderr):  # a lone surrogate in a name (JSON "\ud800") prints escaped, not a traceback
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(errors="backslashreplace")
    # The harness's own handler for both: a gateway's KeyboardInterrupt is its error, not a Ctrl-C.
    previous = {signum: signal.signal(signum, raise_interrupted) for signum in (signal.SIGINT, signal.SIGTERM)}
    census = leftovers.descendants()  # what runs now is not the gateway's to answer for
    try:
        code = int(args.func(args))
        sys.stdout.flush()  # inside the try: a reader that left shows here, not at interpreter exit
        return code
    except (UnknownGateway, ScenarioError, UsageError) as err:
        parser.print_usage(sys.stderr)
        print(f"sessiongate: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as stop:
        return 143 if stop.args and stop.args[0] == signal.SIGTERM else 130
    except BrokenPipeError:  # `sessiongate replay … | head`: the reader left; no traceback, and none at exit
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    finally:
        left = leftovers.end_new(census)  # or one holding our stdout keeps `sessiongate … | tee` waiting
        if left:
            print(leftovers.describe(left), file=sys.stderr)
        for signum, handler in previous.items():
            signal.signal(signum, handler)


if __name__ == "__main__":
    # `python -m conformance.cli` runs this file as __main__; the commands raise conformance.cli's
    # UsageError, a different class from __main__'s, so run the imported module's main.
    raise SystemExit(importlib.import_module("conformance.cli").main())
