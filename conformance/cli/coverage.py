"""`sessiongate coverage`: lifecycle coverage of scenarios, and line coverage of a gateway's code.

    sessiongate coverage [PATHS…] [--gateway NAME]  lifecycle coverage of scenarios (default: the catalog)
                         [--markdown] [--code PKG]…  as docs/coverage.md; line coverage of PKG too
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from conformance.cli.args import add_gateway_option, scenario_files
from conformance.harness.registry import resolve
from conformance.harness.suite import load_all, run_all
from conformance.transport.factory import check_gateway
from reports.coverage import Coverage, Table, lifecycle_coverage
from sessiongate import ExitCode, UsageError
from sessiongate.text import readable


def cmd_coverage(args: argparse.Namespace) -> int:
    check_gateway(args.gateway)
    packages = code_packages(args.code or [])
    paths = scenario_files(args.paths)
    scenarios, errors = load_all(paths)
    if errors:  # a table of the files that did load would pass for the coverage of all of them
        for error in errors:
            print(f"error {error}", file=sys.stderr)
        return ExitCode.USAGE
    if packages:
        from coverage.exceptions import NoDataError

        from reports.coverage import combine_code, measure_code

        with tempfile.TemporaryDirectory() as folder:
            data = str(Path(folder) / ".coverage")
            measure_code([str(p) for p in paths], args.gateway, packages, data)
            try:
                percent, text = combine_code(data)
            except NoDataError:
                print(f"sessiongate: error: no code of {', '.join(packages)} ran (gateway {args.gateway} never imported it"
                      f"{'; name yours with --gateway' if args.gateway == 'reference' else ''})", file=sys.stderr)
                return ExitCode.FAILED
        print(text.rstrip())
        print(f"line coverage of {', '.join(packages)}: {percent:.1f}%")
    errored: list[str] = []

    def logs() -> Iterator[Any]:
        for result in run_all(scenarios, resolve(args.gateway), args.gateway):
            if result.failure is not None:  # its log stops at the error: the table misses what came after
                errored.append(f"{result.scenario.name}: {result.failure.describe()}")
            yield result.records

    cover = lifecycle_coverage(logs())
    if len(errored) < len(scenarios):  # an all-zero table says nothing when every run errored
        lines = markdown(cover, len(scenarios), args.gateway) if args.markdown else plain(cover)
        print("\n".join(map(readable, lines)))
    if errored:
        print(readable(f"{len(errored)} of {len(scenarios)} scenarios errored, so their coverage is missing; first: {errored[0]}"),
              file=sys.stderr)
        return ExitCode.FAILED
    return ExitCode.OK


def code_packages(values: list[str]) -> list[str]:
    """The --code packages (repeated, or comma-separated), each one that exists: a name that
    does not import would only end, after every scenario ran, in coverage.py's 'No data'."""
    packages = [name for value in values for name in value.split(",") if name]
    for name in packages:
        if Path(name).is_dir():  # coverage.py also takes a source folder
            continue
        try:
            found = importlib.util.find_spec(name) is not None
        except Exception:  # a parent package that is missing or fails to import
            found = False
        if not found:
            raise UsageError(f"--code {name}: no such package or folder to measure")
    return packages


def plain(cover: Coverage) -> list[str]:
    """Both tables as fixed-width text, then the cells no scenario reaches."""
    lines: list[str] = []
    for table in (cover.lifecycle, cover.boundaries):
        width = max(len(r) for r in table.rows) + 2
        lines.append(" " * width + " ".join(f"{c[:9]:>9}" for c in table.columns))
        for r in table.rows:
            cells = ("-" if (r, c) in table.impossible else str(table.counts.get((r, c), 0)) for c in table.columns)
            lines.append(f"{r:<{width}}" + " ".join(f"{cell:>9}" for cell in cells))
        lines.append("")
    lines.append("never reached: " + ("; ".join(f"{r} / {c}" for t in (cover.lifecycle, cover.boundaries)
                                               for r, c in t.unreached()) or "none"))
    lines += _crash_point_lines(cover)
    return lines


def _crash_point_lines(cover: Coverage) -> list[str]:
    """What the gateway declares and no scenario fired (nothing, for a gateway declaring none)."""
    if not cover.crash_points:
        return []
    fired = sorted(p for p, names in cover.crash_points.items() if names)
    return [f"crash points fired: {', '.join(fired) or 'none'}",
            f"crash points declared, never fired: {', '.join(cover.unfired()) or 'none'}"]


def _md_table(table: Table, corner: str) -> list[str]:
    lines = [f"| {corner} | " + " | ".join(table.columns) + " |", "|---" * (len(table.columns) + 1) + "|"]
    for r in table.rows:
        cells = []
        for c in table.columns:
            count = table.counts.get((r, c), 0)
            if (r, c) in table.impossible:
                cells.append("n/a")
            elif (r, c) in table.nonconforming:
                cells.append(f"({count})")
            else:
                cells.append(str(count) if count else "**0**")
        lines.append(f"| {r} | " + " | ".join(cells) + " |")
    return lines


def markdown(cover: Coverage, scenarios: int, gateway: str) -> list[str]:
    """The tables and the list of unreached cells, as docs/coverage.md prints them."""
    lines = [f"Computed from {scenarios} scenarios against `{gateway}` with "
             f"`sessiongate coverage --markdown`.", "",
             "### Session state before an event, by event", "", *_md_table(cover.lifecycle, "state \\ event"), "",
             "### Boundary cause, by what set off its on_session_end", "",
             *_md_table(cover.boundaries, "cause \\ path"), "", "### Cells no scenario reaches yet", ""]
    for table in (cover.lifecycle, cover.boundaries):
        lines += [f"- {r} / {c}" for r, c in table.unreached()]
    if cover.crash_points:
        lines += ["", "### Crash points declared, never fired", ""]
        lines += [f"- `{point}`" for point in cover.unfired()] or ["- none"]
    return lines


def add_arguments(coverage: argparse.ArgumentParser) -> None:
    coverage.add_argument("paths", nargs="*", help="scenario files or folders")
    add_gateway_option(coverage)
    coverage.add_argument("--markdown", action="store_true", help="print the tables as docs/coverage.md has them")
    coverage.add_argument("--code", action="append", metavar="PKG",
                          help="also measure line coverage of package PKG (repeat --code, or PKG,PKG)")
    coverage.set_defaults(func=cmd_coverage)
