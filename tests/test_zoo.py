"""The bug zoo keeps every check honest: each variant is caught by the catalog.

A change that blinds a check makes a variant slip through, and this test turns red.
"""

from __future__ import annotations

import pytest

from conformance.runner import run_scenario
from conformance.suite import catalog_paths
from reference_impl.registry import reference
from reference_impl.variants import VARIANTS
from sim.loader import load_file

SCENARIOS = [load_file(p) for p in catalog_paths()]


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_variant_is_caught(variant: str) -> None:
    caught = []
    for scenario in SCENARIOS:
        result = run_scenario(scenario, reference(variant), f"reference:{variant}")
        failing = [c for c, v in result.verdicts.items() if v.status in ("fail", "error")]
        if failing:
            caught.append((scenario.name, failing))
    assert caught, f"no catalog scenario catches {variant}"


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_scenarios_naming_a_variant_catch_it(variant: str) -> None:
    """A scenario whose header says it exists to catch a variant does catch it."""
    named = [s for s in SCENARIOS if variant in s.catches]
    missed = []
    for scenario in named:
        result = run_scenario(scenario, reference(variant), f"reference:{variant}")
        if not any(v.status in ("fail", "error") for v in result.verdicts.values()):
            missed.append(scenario.name)
    assert not missed, f"{variant} slips through {missed}"
