"""Every catalog scenario, and every generated seed that once failed it, passes every check on
the reference gateway; no check is vacuous across the whole catalog."""

from __future__ import annotations

import pytest

from conformance.harness.runner import run_scenario
from conformance.harness.suite import catalog_paths
from conformance.harness.verdict import CHECK_IDS
from reference_impl import ReferenceGateway
from sim.generate import scenario_for_seed
from sim.loader import load_file

PATHS = catalog_paths()


def test_catalog_has_at_least_30_scenarios() -> None:
    assert len(PATHS) >= 30


@pytest.mark.parametrize("path", PATHS, ids=[p.stem for p in PATHS])
def test_reference_passes(path) -> None:
    result = run_scenario(load_file(path), ReferenceGateway(), "reference")
    assert result.failure is None, result.failure
    failing = {c: v.summary for c, v in result.verdicts.items() if v.status != "pass"}
    assert failing == {}


def test_every_check_examines_something_in_the_catalog() -> None:
    examined = dict.fromkeys(CHECK_IDS, 0)
    for path in PATHS:
        result = run_scenario(load_file(path), ReferenceGateway(), "reference")
        for check, verdict in result.verdicts.items():
            examined[check] += verdict.examined
    assert all(examined.values()), examined


# Generated seeds that once failed the reference: check false positives, fixed in the checks.
REGRESSION_SEEDS = [(9072, "long"), (51898, "long")]  # /resume queued behind a turn (I5; I1, I4, I5)


@pytest.mark.parametrize(("seed", "profile"), REGRESSION_SEEDS, ids=[f"{p}-{s}" for s, p in REGRESSION_SEEDS])
def test_reference_passes_seeds_that_once_failed_it(seed: int, profile: str) -> None:
    result = run_scenario(scenario_for_seed(seed, profile), ReferenceGateway(), "reference")
    assert {c: v.summary for c, v in result.verdicts.items() if v.status != "pass"} == {}
