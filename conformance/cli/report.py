"""`sessiongate report`: every report of a run directory rendered again from its saved logs."""

from __future__ import annotations

import argparse
import sys

from conformance.cli.lines import exit_code, summary_line
from reports import rerender
from reports.rundir import RunDirError
from sessiongate import ExitCode


def cmd_report(args: argparse.Namespace) -> int:
    try:
        gateway, results, unloaded = rerender(args.run_dir)
    except RunDirError as err:
        print(f"sessiongate: error: {err}", file=sys.stderr)
        return ExitCode.USAGE
    print(f"report written to {args.run_dir}")
    print(summary_line(results, len(unloaded)))
    code = exit_code(results, len(unloaded))
    if gateway == "zoo" and code == ExitCode.FAILED:  # its variants fail on purpose: what gates is `zoo` itself
        print("note: a zoo run's variants fail on purpose; `sessiongate zoo` judges whether each is caught as claimed")
        return ExitCode.OK
    return code


def add_arguments(report: argparse.ArgumentParser) -> None:
    report.add_argument("run_dir", metavar="RUN_DIR", help="a folder written by --report")
    report.set_defaults(func=cmd_report)
