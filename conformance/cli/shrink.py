"""`sessiongate shrink`: a failing scenario file shrunk, keeping one check's failure."""

from __future__ import annotations

import argparse
from pathlib import Path

from conformance.cli.args import add_gateway_option, check_out_dir
from conformance.harness.registry import resolve
from conformance.harness.runner import run_scenario
from conformance.harness.verdict import CHECK_IDS
from conformance.search.fuzz import ERROR, error_signature, failing, shrink_and_write
from conformance.transport.factory import check_gateway
from sessiongate import ExitCode
from sessiongate.text import readable
from sim.loader import load_file


def cmd_shrink(args: argparse.Namespace) -> int:
    check_gateway(args.gateway, resolve)
    scenario = load_file(args.file)
    result = run_scenario(scenario, resolve(args.gateway)(), args.gateway)
    failure = result.failure
    if failure is not None and (failure.kind != "error" or failure.step == 0 or failure.refused):
        # hung (each candidate would wait out the step timeout) or could not start: nothing to keep
        print(readable(f"{scenario.name}: {failure.describe()}; nothing to shrink"))
        return ExitCode.FAILED
    out = Path(args.out)
    if failure is not None:  # a gateway error: shrunk keeping its kind (the call and the exception's class)
        if args.check:
            print(readable(f"{scenario.name}: {failure.describe()}; no check's verdict to keep (--check {args.check})"))
            return ExitCode.FAILED
        check_out_dir(args.out, "--out")
        out.mkdir(parents=True, exist_ok=True)
        signature = error_signature(failure)
        s = shrink_and_write(scenario, out / Path(args.file).name, args.gateway, ERROR, ERROR, error=signature)
        print(readable(f"shrunk {s.original} -> {s.events} events in {s.runs} runs, keeping the gateway {signature}: {s.path}")
              + ("" if s.reproduces else " (NOTE: the file does not reproduce the failure)"))
        return ExitCode.OK
    bad = failing(result)
    if not bad:
        print(f"{scenario.name} passes on {args.gateway}: nothing to shrink")
        return ExitCode.USAGE
    check = args.check or next(iter(bad))
    if check not in bad:
        print(f"{scenario.name} does not fail {check} on {args.gateway} (it fails {', '.join(bad)})")
        return ExitCode.USAGE
    status = result.verdicts[check].status
    check_out_dir(args.out, "--out")
    out.mkdir(parents=True, exist_ok=True)
    s = shrink_and_write(scenario, out / Path(args.file).name, args.gateway, check, status)
    print(f"shrunk {s.original} -> {s.events} events in {s.runs} runs: {s.path}"
          + ("" if s.reproduces else " (NOTE: the file does not reproduce the failure)"))
    return ExitCode.OK


def add_arguments(shrink: argparse.ArgumentParser) -> None:
    shrink.add_argument("file")
    add_gateway_option(shrink)
    shrink.add_argument("--check", choices=CHECK_IDS, help="the check whose failure to keep (default: the first failing)")
    shrink.add_argument("--out", default="fuzz-failures",
                        help="where the shrunk file goes, as NAME.shrunk.yaml (default fuzz-failures, as fuzz)")
    shrink.set_defaults(func=cmd_shrink)
