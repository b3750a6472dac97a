"""Runs for the report tests: a clean one, a zoo-like failing one, an expected failure, an error."""

from __future__ import annotations

from conformance.harness.runner import RunResult, run_scenario
from conformance.harness.spill import ObservationLog
from conformance.harness.suite import CATALOG, Expectations
from reference_impl import ReferenceGateway
from sim.loader import load_file

# (scenario file prefix, zoo variant that fails it, the record that variant loses)
FAILING = ("07-batch-flush-at-shutdown", "batch-lost-on-shutdown", lambda r: r.kind == "ingest" and r.d("backend") == "hindsight")
EXPECTED = ("01-idle-expiry", "idle-expiry-no-finalize", lambda r: r.kind == "on_session_finalize")


def scenario(prefix: str):
    return load_file(next(CATALOG.glob(f"{prefix}*.yaml")))


def failing_result(case=FAILING, gateway: str = "reference") -> RunResult:
    """A zoo variant on the catalog scenario that catches it; without the zoo, the same bug
    made by hand: the reference log with the record the variant loses cut out."""
    prefix, variant, lost = case
    try:
        from reference_impl.registry import reference

        return run_scenario(scenario(prefix), reference(variant), gateway)
    except (ImportError, KeyError):
        from conformance.checks import judge

        clean = run_scenario(scenario(prefix), ReferenceGateway(), gateway, check=False)
        records = ObservationLog.loads(clean.log_text())
        del records[next(i for i, r in enumerate(records) if lost(r))]
        result = RunResult(clean.scenario, gateway, clean.profile, records)
        result.verdicts = judge(records)
        return result


class Raising(ReferenceGateway):
    """A gateway that breaks when a session row is deleted under it."""

    def delete_session_row(self, session_id: str, keep_children: bool = False) -> None:
        raise RuntimeError("boom")


def mixed_results(gateway: str = "reference") -> list[RunResult]:
    """pass, fail, xfail and error, in that order."""
    passing = run_scenario(scenario("28-restart-then-expiry"), ReferenceGateway(), gateway)
    failing = failing_result(FAILING, gateway)
    expected = failing_result(EXPECTED, gateway)
    pairs = {(expected.scenario.name, c): "known: no finalize on idle expiry"
             for c, v in expected.verdicts.items() if v.status == "fail"}
    Expectations(pairs).apply(expected)
    error = run_scenario(scenario("10-heal-deleted-row"), Raising(), gateway)
    return [passing, failing, expected, error]
