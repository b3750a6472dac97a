"""Every catalog scenario passes every check on the reference gateway, and no check is vacuous
across the whole catalog."""

from __future__ import annotations

import pytest

from conformance.runner import run_scenario
from conformance.suite import catalog_paths
from conformance.verdict import CHECK_IDS
from reference_impl import ReferenceGateway
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
