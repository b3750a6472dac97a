"""`sessiongate replay`: one scenario's whole timeline of observations."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from conformance.cli.args import add_gateway_option, scenario_files
from conformance.cli.lines import exit_code, scenario_line
from conformance.harness.registry import resolve
from conformance.harness.runner import RunResult, run_scenario
from conformance.harness.suite import load_all
from conformance.transport.factory import check_gateway
from sessiongate import ExitCode, UsageError
from sessiongate.text import readable
from sim.weights import PROFILE_NAMES


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
        body = readable(body)  # ids and details the gateway chose: no terminal escape, no megabytes
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
    if (args.file is None) == (args.seed is None):
        raise UsageError("replay takes one scenario: a FILE (or catalog name), or --seed N")
    if args.seed is not None:  # a generated seed, as fuzz and the pytest plugin make it: nothing written anywhere
        from sim.generate import scenario_for_seed

        avoid = frozenset()
        if args.fit:  # as `fuzz --fit` drew it: without what the gateway declares unsupported
            from conformance.search.fuzz import Isolation, declared_unsupported

            avoid = declared_unsupported(args.gateway, Isolation())
        scenario = scenario_for_seed(args.seed, args.profile, avoid)
    else:
        if args.profile != "default" or args.fit:
            raise UsageError("--profile and --fit go with --seed (a file is the scenario it holds)")
        if Path(args.file).is_dir():  # a timeline is one scenario's; `run DIR` judges a folder
            raise UsageError(f"{args.file}: is a directory; replay takes one scenario file (run takes folders)")
        scenarios, errors = load_all(scenario_files([args.file]))
        if errors:
            print(f"error {errors[0]}", file=sys.stderr)
            return ExitCode.USAGE
        scenario = scenarios[0]
    result = run_scenario(scenario, factory(), args.gateway, strict=args.strict)
    if args.jsonl:
        sys.stdout.write(result.log_text())
        return ExitCode.OK
    print("\n".join(timeline(result)))
    print("\n".join(scenario_line(result, every_violation=True)))
    return exit_code([result])


def add_arguments(replay: argparse.ArgumentParser) -> None:
    replay.add_argument("file", nargs="?", help="a scenario file, or a catalog scenario's name")
    replay.add_argument("--seed", type=int, help="the generated scenario gen-SEED instead of a file")
    replay.add_argument("--profile", choices=PROFILE_NAMES, default="default", help="with --seed: its generation profile")
    replay.add_argument("--fit", action="store_true",
                        help="with --seed: drawn without what the gateway declares unsupported, as fuzz --fit draws it")
    add_gateway_option(replay)
    replay.add_argument("--jsonl", action="store_true", help="print the raw canonical observation log")
    replay.add_argument("--strict", action="store_true", help="a check that examined nothing (vacuous) fails, as in run --strict")
    replay.set_defaults(func=cmd_replay)
