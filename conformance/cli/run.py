"""`sessiongate run`: scenarios (default: the catalog) against a gateway, a line each."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

from conformance.cli.args import (
    add_failure_db_option,
    add_gateway_option,
    add_isolation_options,
    check_out_dir,
    load_expectations,
    positive_int,
    scenario_files,
)
from conformance.cli.lines import (
    cannot_start,
    exit_code,
    forget_if_fixed,
    played_crashes,
    saved_failures,
    scenario_line,
    shown_path,
    summary_line,
    verdict_table,
    write_report,
)
from conformance.harness.failure_db import FailureDB
from conformance.harness.runner import DEFAULT_BUDGET, RunResult, run_scenario, when_stuck
from conformance.harness.suite import Expectations, fresh_gateway, load_all, outcome, run_all
from conformance.harness.verdict import GatewayFailure
from conformance.observations import Obs
from conformance.transport.factory import gateway_factory
from sessiongate import ExitCode, UsageError, interrupted_code
from sessiongate.text import counted
from sim.scenario import Scenario


def _check_writable_names(scenarios: list[Scenario]) -> None:
    """Printing escapes a lone surrogate (a JSON "\\ud800"); the report files are UTF-8 and cannot hold one."""
    for scenario in scenarios:
        try:
            scenario.name.encode("utf-8")
        except UnicodeEncodeError:
            raise UsageError(f"{scenario.source}: scenario name {scenario.name!r} is not valid Unicode; "
                             "--report cannot write it") from None


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


def _same_names(scenarios: Sequence[Scenario]) -> str | None:
    """A warning when files share a scenario name: their lines, logs and report entries would
    be told apart only by a suffix (`NAME~2`)."""
    files: dict[str, list[str]] = {}
    for scenario in scenarios:
        files.setdefault(scenario.name, []).append(shown_path(scenario.source) if scenario.source else "?")
    twins = {name: paths for name, paths in files.items() if len(paths) > 1}
    if not twins:
        return None
    return "warning: " + "; ".join(f"{', '.join(paths)} share the name {name!r}" for name, paths in twins.items()) + \
        " (the report tells them apart as NAME, NAME~2, …)"


def cmd_run(args: argparse.Namespace) -> int:
    factory = gateway_factory(args)
    # the second run's child under another hash seed than the first's, which inherits this one's
    again = gateway_factory(args, env={"PYTHONHASHSEED": "54321" if os.environ.get("PYTHONHASHSEED") == "12345" else "12345"})
    check_out_dir(args.report, "--report")
    paths = scenario_files(args.paths)
    expectations = load_expectations(args.gateway, args.expectations)
    if not args.expectations and (note := Expectations.missing(args.gateway)):
        print(note, file=sys.stderr)
    scenarios, errors = load_all(paths)
    for error in errors:
        print(f"error {error}", file=sys.stderr)
    if errors and not scenarios:
        return ExitCode.USAGE
    if args.report:
        _check_writable_names(scenarios)
    if not args.paths and not errors:  # the whole catalog
        for typo in expectations.typos(s.name for s in scenarios):
            print(typo, file=sys.stderr)
    if twins := _same_names(scenarios):
        print(twins, file=sys.stderr)
    db = FailureDB.open(args.gateway, not args.no_failure_db)
    saved = saved_failures(db, scenarios)
    scenarios = [*saved, *scenarios]
    if db is not None and not errors:  # the saved failures ran too: an entry for one gone expects nothing
        for gone in expectations.gone_saved_failures((s.name for s in scenarios), db.shown()):
            print(gone, file=sys.stderr)
    results: list[RunResult] = []

    def stuck(result: RunResult | None, _code: int) -> None:
        """The gateway could not be stopped in this process (`runner.when_stuck`): what ran, reported."""
        if result is not None:
            results.append(expectations.apply(result))
            print("\n".join(scenario_line(results[-1], expectations=expectations)))
            print(f"stopped: the gateway cannot be stopped in this process "
                  f"({counted(len(scenarios) - len(results), 'scenario')} not run)")
        write_report(results, args.report, args.gateway, errors, args.strict)
        print(summary_line(results, len(errors)) + (" (interrupted)" if result is None else ""))

    try:
        with when_stuck(stuck):
            for result in run_all(scenarios, factory, args.gateway, expectations, args.budget, args.strict, args.step_timeout):
                if args.check_determinism:
                    check_determinism(result, again)
                results.append(result)
                if not args.quiet or outcome(result) not in ("pass", "xfail"):
                    print("\n".join(scenario_line(result, expectations=expectations)), flush=True)
                if len(results) <= len(saved):
                    forget_if_fixed(db, result, expectations)
                if len(results) == 1 and len(scenarios) > 1 and cannot_start(result):
                    print(f"stopped: the gateway failed before the first event of {result.scenario.name}; it cannot "
                          f"start ({counted(len(scenarios) - 1, 'scenario')} not run)")
                    break
    except KeyboardInterrupt as stop:  # Ctrl-C or SIGTERM: keep what finished
        write_report(results, args.report, args.gateway, errors, args.strict)
        print(summary_line(results, len(errors)) + " (interrupted)")
        return interrupted_code(stop)
    if args.table:
        print("\n".join(verdict_table(results)))
    write_report(results, args.report, args.gateway, errors, args.strict)
    if note := played_crashes(results):
        print(note)
    print(summary_line(results, len(errors)))
    return exit_code(results, len(errors))


def add_arguments(run: argparse.ArgumentParser) -> None:
    run.add_argument("paths", nargs="*", help="scenario files or folders (default: the built-in catalog)")
    add_gateway_option(run, "gateway name, NAME:ARG or MODULE:FACTORY (default: reference)")
    run.add_argument("--expectations", help="expected-failures file (default: conformance/expectations/<gateway>.txt)")
    run.add_argument("--table", action="store_true", help="print a scenario × check verdict table")
    run.add_argument("--report", metavar="DIR", help="write JUnit, JSON and HTML reports to DIR")
    run.add_argument("-q", "--quiet", action="store_true",
                     help="print only the scenarios that failed, errored or were skipped, and the summary")
    add_isolation_options(run)
    run.add_argument("--budget", type=positive_int, default=DEFAULT_BUDGET, metavar="EVENTS",
                     help=f"simulator events per scenario before a gateway counts as runaway (default {DEFAULT_BUDGET:,})")
    run.add_argument("--check-determinism", action="store_true",
                     help="run each scenario twice and report the first divergence of the logs")
    run.add_argument("--strict", action="store_true", help="a check that examined nothing (vacuous) fails")
    add_failure_db_option(run)
    run.set_defaults(func=cmd_run)
