"""`sessiongate shrink`: a failing scenario file shrunk, keeping one check's failure."""

from __future__ import annotations

import argparse
from pathlib import Path

from conformance.cli.args import add_gateway_option, check_out_dir
from conformance.harness.registry import resolve
from conformance.harness.runner import run_scenario
from conformance.search.fuzz import failing, shrink_and_write
from conformance.transport.factory import check_gateway
from sessiongate import ExitCode
from sessiongate.text import readable
from sim.loader import load_file


def cmd_shrink(args: argparse.Namespace) -> int:
    check_gateway(args.gateway, resolve)
    scenario = load_file(args.file)
    result = run_scenario(scenario, resolve(args.gateway)(), args.gateway)
    if result.failure is not None:  # it crashed, hung or could not start: no check's finding to keep
        print(readable(f"{scenario.name}: {result.failure.describe()}; nothing to shrink"))
        return ExitCode.FAILED
    bad = failing(result)
    if not bad:
        print(f"{scenario.name} passes on {args.gateway}: nothing to shrink")
        return ExitCode.FAILED
    check = args.check or next(iter(bad))
    if check not in bad:
        print(f"{scenario.name} does not fail {check} on {args.gateway} (it fails {', '.join(bad)})")
        return ExitCode.FAILED
    status = result.verdicts[check].status
    out = Path(args.out)
    check_out_dir(args.out, "--out")
    out.mkdir(parents=True, exist_ok=True)
    s = shrink_and_write(scenario, out / Path(args.file).name, args.gateway, check, status)
    print(f"shrunk {s.original} -> {s.events} events in {s.runs} runs: {s.path}"
          + ("" if s.reproduces else " (NOTE: the file does not reproduce the failure)"))
    return ExitCode.OK


def add_arguments(shrink: argparse.ArgumentParser) -> None:
    shrink.add_argument("file")
    add_gateway_option(shrink)
    shrink.add_argument("--check", help="the check whose failure to keep (default: the first failing)")
    shrink.add_argument("--out", default="fuzz-failures",
                        help="where the shrunk file goes, as NAME.shrunk.yaml (default fuzz-failures, as fuzz)")
    shrink.set_defaults(func=cmd_shrink)
