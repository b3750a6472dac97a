"""Reports: JUnit XML, a JSON summary, one HTML file with timelines, lifecycle coverage.

`write_all(results, directory, gateway, unloaded)` writes RUN_DIR/{junit.xml, summary.json,
report.html} and the logs they are rendered from (RUN_DIR/logs/), each file atomically;
`sessiongate report RUN_DIR` renders them again from those logs alone. Scenario files that
could not be loaded (`unloaded`) are in every report too.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from conformance.checks import judge
from conformance.harness.runner import RunResult
from reports import html, junit, rundir, summary
from reports.coverage import lifecycle_coverage
from reports.rundir import Unloaded
from sim.document import ScenarioError

FILES = ("junit.xml", "summary.json", "report.html")


def write_all(results: list[RunResult], directory: str, gateway: str,
              unloaded: Sequence[ScenarioError | Unloaded] = (), recorded: bool = False, strict: bool = False) -> None:
    """Save the logs, then render every report from the runs (`recorded`: runs read back from
    a run directory, whose file names stay as recorded; `strict`: judged so, and said so)."""
    for result in results:
        if not result.verdicts:
            result.verdicts = judge(result.records, strict)
    root = Path(directory)
    runs = rundir.keyed(results, gateway, recorded, strict)
    files = [u if isinstance(u, Unloaded) else Unloaded.of(u) for u in unloaded]
    rundir.save(root, runs, gateway, files, strict)
    cover = lifecycle_coverage(run.result.records for run in runs)
    rundir.atomic_write(root / "junit.xml", junit.render(runs, gateway, files))
    rundir.atomic_write(root / "summary.json", summary.render(runs, gateway, cover, files, strict))
    rundir.atomic_write(root / "report.html", html.render(runs, gateway, cover, files))


def rerender(directory: str) -> tuple[str, list[RunResult], list[Unloaded]]:
    """Re-judge the saved logs and write every report again; returns the report's gateway (`zoo`
    for a zoo run), the results and the scenario files the run could not load."""
    gateway, results, unloaded, strict = rundir.load(Path(directory))
    write_all(results, directory, gateway, unloaded, recorded=True, strict=strict)
    return gateway, results, unloaded


__all__ = ["FILES", "rerender", "write_all"]
