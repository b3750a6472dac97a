"""`sessiongate compare`: saved runs side by side on one HTML page (scenario × run, like wpt.fyi)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from reports.compare import CompareError, column, render
from reports.rundir import RunDirError, atomic_write
from sessiongate import ExitCode


def cmd_compare(args: argparse.Namespace) -> int:
    out = Path(args.out)
    labels = list(args.label or [])
    if len(labels) > len(args.run_dirs):
        print(f"sessiongate: error: {len(labels)} --label for {len(args.run_dirs)} run directories", file=sys.stderr)
        return ExitCode.USAGE
    labels += [""] * (len(args.run_dirs) - len(labels))
    try:
        columns = [column(Path(d), out.parent, label) for d, label in zip(args.run_dirs, labels, strict=True)]
        page = render(columns)
    except (RunDirError, CompareError) as err:
        print(f"sessiongate: error: {err}", file=sys.stderr)
        return ExitCode.USAGE
    atomic_write(out, page)
    scenarios = len({key for c in columns for key in c.runs})
    print(f"compare written to {out}: {scenarios} scenarios × {len(columns)} runs ({', '.join(c.label for c in columns)})")
    return ExitCode.OK


def add_arguments(compare: argparse.ArgumentParser) -> None:
    compare.add_argument("run_dirs", nargs="+", metavar="RUN_DIR", help="folders written by run --report, one column each, in this order")
    compare.add_argument("--out", default="compare.html", metavar="FILE", help="the page to write (default: compare.html)")
    compare.add_argument("--label", action="append", metavar="NAME",
                         help="a column's heading, once per RUN_DIR in order (default: the gateway the run names)")
    compare.set_defaults(func=cmd_compare)
