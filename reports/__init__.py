"""Reports: JUnit XML, a JSON summary, one HTML file with timelines, lifecycle coverage.

`write_all(results, directory, gateway)` writes RUN_DIR/{junit.xml, summary.json,
report.html} and the logs they are rendered from (RUN_DIR/logs/), each file atomically;
`sessiongate report RUN_DIR` renders them again from those logs alone.
"""

from __future__ import annotations

from pathlib import Path

from conformance.checks import judge
from conformance.runner import RunResult
from reports import html, junit, rundir, summary
from reports.coverage import lifecycle_coverage

FILES = ("junit.xml", "summary.json", "report.html")


def write_all(results: list[RunResult], directory: str, gateway: str) -> None:
    """Save the logs, then render every report from the runs."""
    for result in results:
        if not result.verdicts:
            result.verdicts = judge(result.records)
    root = Path(directory)
    runs = rundir.keyed(results, gateway)
    rundir.save(root, runs, gateway)
    cover = lifecycle_coverage(run.result.records for run in runs)
    rundir.atomic_write(root / "junit.xml", junit.render(runs, gateway))
    rundir.atomic_write(root / "summary.json", summary.render(runs, gateway, cover))
    rundir.atomic_write(root / "report.html", html.render(runs, gateway, cover))


def rerender(directory: str) -> list[RunResult]:
    """Re-judge the saved logs and write every report again; returns the results."""
    gateway, results = rundir.load(Path(directory))
    write_all(results, directory, gateway)
    return results


__all__ = ["FILES", "rerender", "write_all"]
