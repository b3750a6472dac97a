"""`sessiongate update-expectations`: a gateway's expectations file rewritten from a run."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from conformance.cli.args import add_failure_db_option, add_gateway_option, load_expectations, scenario_files
from conformance.cli.lines import saved_failures, shown_path
from conformance.harness.failure_db import FailureDB
from conformance.harness.runner import DEFAULT_BUDGET, RunResult
from conformance.harness.suite import Expectations, load_all, run_all, text_lines, written_with_weekdays
from conformance.harness.verdict import CHECK_IDS
from conformance.transport.factory import gateway_factory
from sessiongate import ExitCode, UsageError
from sessiongate.text import counted, readable

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
                for violation in {v.signature: v for v in verdict.violations}.values():  # one line a signature
                    bare = violation.signature.split(" [not expected", 1)[0]
                    # its entry, with a may-occur mark (kept), or written before slugs ended on a whole word or
                    # before they dropped weekdays: the line is rewritten with today's signature, its reason kept
                    entry = next((s + m for s in violation.signatures for m in ("?", "") if s + m in entries), None) or \
                        written_with_weekdays(entries, bare)
                    mark = "?" if entry is not None and entry.endswith("?") else ""
                    reason = (entries[entry] if entry is not None else None) or old.pairs.get(key)
                    todo += reason is None
                    seen.add(bare + mark)
                    if entry is not None:
                        seen.add(entry)
                    lines.append(f"{key[0]} {check} {bare}{mark}  # {reason or TODO_REASON}")
            # A may-occur entry this run did not show is kept: it may occur in the next.
            lines += [f"{key[0]} {check} {s}  # {r}" for s, r in entries.items() if s.endswith("?") and s not in seen]
    return lines, todo


def in_place(before: list[str], lines: list[str], ran: set[str]) -> tuple[list[str], int]:
    """The file's lines of scenarios this run did not run, kept where they were (a run of a few
    scenarios rewrites theirs only, as `wpt update-expectations` does), with the new lines of
    each scenario that ran where its old lines began (a new one's after them, in run order).
    Also returns how many lines were kept."""
    fresh: dict[str, list[str]] = {}
    for line in lines:
        fresh.setdefault(line.split(" ", 1)[0], []).append(line)
    out: list[str] = []
    kept = 0
    for line in before:
        if not line.strip() or line.lstrip().startswith("#"):  # the header is kept apart; blank lines go
            continue
        scenario = line.split(" ", 1)[0]
        if scenario not in ran:
            out.append(line)
            kept += 1
        elif scenario in fresh:
            out += fresh.pop(scenario)
    for rest in fresh.values():
        out += rest
    return out, kept


def cmd_update_expectations(args: argparse.Namespace) -> int:
    """Run the scenarios, then rewrite the gateway's expectations file from what failed (as
    web-platform-tests' `wpt update-expectations`): reasons carry over, new lines get a TODO."""
    factory = gateway_factory(args)
    paths = scenario_files(args.paths)
    new_file = bool(args.expectations) and not Path(args.expectations).exists()  # written from this run
    old = Expectations({}) if new_file else load_expectations(args.gateway, args.expectations)
    if not (args.expectations or old.source):  # the default would be inside sessiongate's installed package
        raise UsageError(f"gateway {args.gateway} has no expectations file yet: name the file to write with "
                         f"--expectations FILE (one of your project's), then run with --expectations FILE")
    target = Path(args.expectations or old.source)
    scenarios, errors = load_all(paths)
    for error in errors:
        print(f"error {error}", file=sys.stderr)
    if errors:
        return ExitCode.USAGE
    # The saved failures too, as `run` replays them first: the file written covers what `run` runs.
    scenarios = [*saved_failures(FailureDB.open(args.gateway, not args.no_failure_db), scenarios), *scenarios]
    results = [Expectations({}).apply(r) for r in run_all(scenarios, factory, args.gateway, None, args.budget, args.strict)]
    broken = [r for r in results if r.failure is not None]
    for result in broken:
        print(readable(f"{result.failure.kind} {result.scenario.name}: {result.failure.describe()}"), file=sys.stderr)  # type: ignore[union-attr]
    before = text_lines(target.read_text(encoding="utf-8")) if target.exists() else []
    header = [line for line in before if line.startswith("#")]
    lines, todo = expectation_lines(results, old)
    lines, kept = in_place(before, lines, {r.scenario.name for r in results})
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text("\n".join([*header, *lines]) + "\n", encoding="utf-8")
    print(f"wrote {shown_path(str(target))}: {counted(len(lines) - kept, 'expected failure')} ({todo} with a TODO reason)"
          + (f"; {counted(kept, 'line')} of scenarios not run kept as they were" if kept else "")
          + (f"; {len(broken)} scenarios errored and are not listed" if broken else ""))
    return ExitCode.FAILED if broken else ExitCode.OK


def add_arguments(update: argparse.ArgumentParser) -> None:
    update.add_argument("paths", nargs="*", help="scenario files or folders (default: the built-in catalog)")
    add_gateway_option(update, "gateway name, NAME:ARG or MODULE:FACTORY (default: reference)")
    update.add_argument("--expectations", help="the file to write (default: the gateway's own built-in file, "
                        "as run finds it; a gateway without one must name it)")
    add_failure_db_option(update)
    update.add_argument("--strict", action="store_true",
                        help="judge as run --strict does (a vacuous check fails): for a gate that runs with --strict")
    update.set_defaults(func=cmd_update_expectations, isolate=False, step_timeout=10.0, memory_mb=4096, budget=DEFAULT_BUDGET)
