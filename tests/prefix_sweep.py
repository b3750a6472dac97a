"""Judging any prefix of any log raises nothing: the logs, and the full sweep.

A log cut anywhere is what a gateway error, a crash of the harness or a damaged run directory
leaves; the checks, `replay`'s timeline and the HTML timeline must read it, so a checker error
is only ever a bug, never the shape of the input. `tests/test_judge_prefixes.py` judges every
prefix of the catalog logs and a seeded stride of prefixes of generated ones; the full sweep,
every prefix of every log, is

    PYTHONPATH=tests .venv/bin/python tests/prefix_sweep.py --logs 1000

(docs/reliability.md has its figures). Generated logs come from `small`-profile seeds run on
the reference and on every zoo variant in turn, and one in three is cut at a gateway error: the
k-th call to the gateway raises SystemExit (so the runner's handling of it is swept too).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from functools import partial
from typing import Any

from conformance.checks import judge
from conformance.checks.model import RunModel
from conformance.cli.replay import timeline
from conformance.harness.registry import resolve
from conformance.harness.runner import RunResult, run_scenario
from conformance.harness.suite import catalog_paths
from conformance.observations import Obs
from reference_impl.variants import VARIANTS
from reports.timeline import timeline_svg
from sim.generate import scenario_for_seed
from sim.loader import load_file

GATEWAYS = ("reference", *(f"reference:{name}" for name in VARIANTS))
CALLS = ("profile", "start", "deliver_message", "deliver_command", "deliver_reply", "delegate", "sigterm", "crash",
         "restart", "delete_session_row", "lock_store", "durable_state", "resources")


class FailsAt:
    """A gateway whose `at`-th call (counting the runner's calls) raises SystemExit: a log cut
    at a gateway error anywhere, a reply or a resources sample included."""

    def __init__(self, inner: Any, at: int) -> None:
        self.inner, self.at, self.calls = inner, at, 0

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.inner, name)
        if name not in CALLS:
            return attr

        def call(*args: Any) -> Any:
            self.calls += 1
            if self.calls == self.at:
                raise SystemExit(f"cut at call {self.at}")
            return attr(*args)

        return call


def generated(number: int) -> RunResult:
    """The `number`-th generated log: seed `number`, the gateways in turn, every third one cut."""
    gateway = GATEWAYS[number % len(GATEWAYS)]
    scenario = scenario_for_seed(number, "small")
    made = resolve(gateway)()
    if number % 3 == 2:
        made = FailsAt(made, 1 + (number * 7919) % (4 * len(scenario.events) + 6))
    return run_scenario(scenario, made, gateway, check=False)


def catalog() -> Iterator[RunResult]:
    for path in catalog_paths():
        yield run_scenario(load_file(path), resolve("reference")(), "reference", check=False)


def problems(result: RunResult, ends: Sequence[int], svg: bool = True) -> Iterator[str]:
    """What goes wrong reading `result.records[:n]` for each n in `ends`: a checker-error verdict,
    or an exception from `replay`'s timeline or the HTML timeline."""
    records = result.records
    for n in ends:
        prefix: list[Obs] = list(records[:n])
        cut = RunResult(result.scenario, result.gateway, result.profile, prefix)
        where = f"{result.scenario.name} on {result.gateway}, first {n} of {len(records)} records"
        for check, verdict in judge(prefix).items():
            if verdict.status == "checker-error":
                yield f"{where}: {check} {verdict.reason}"
        readers: list[tuple[str, Callable[[], object]]] = [("timeline", partial(timeline, cut))]
        if svg:
            readers.append(("timeline_svg", partial(_svg, prefix)))
        for what, read in readers:
            try:
                read()
            except Exception as err:
                yield f"{where}: {what} raised {type(err).__name__}: {err}"


def _svg(records: list[Obs]) -> str:
    return timeline_svg(RunModel.build(records), [])


def every(result: RunResult) -> range:
    return range(1, len(result.records) + 1)


def sweep(results: Iterator[RunResult], ends: Callable[[RunResult], Sequence[int]]) -> tuple[int, int, list[str]]:
    logs = prefixes = 0
    found: list[str] = []
    for result in results:
        chosen = ends(result)
        logs, prefixes = logs + 1, prefixes + len(chosen)
        found += problems(result, chosen)
    return logs, prefixes, found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="judge every prefix of the catalog logs and of N generated logs")
    parser.add_argument("--logs", type=int, default=1000, help="generated logs (default 1000)")
    args = parser.parse_args(argv)
    started = time.monotonic()
    logs, prefixes, found = sweep(catalog(), every)
    more = sweep((generated(n) for n in range(args.logs)), every)
    logs, prefixes, found = logs + more[0], prefixes + more[1], found + more[2]
    for line in found[:20]:
        print(line)
    print(f"{logs} logs, {prefixes} prefixes judged, {len(found)} problems, {time.monotonic() - started:.0f} s")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
