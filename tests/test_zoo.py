"""The bug zoo keeps every check honest: each variant is caught by the catalog.

A change that blinds a check makes a variant slip through, and this test turns red.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from conformance.harness.runner import run_scenario
from conformance.harness.suite import CATALOG as CATALOG_DIR
from conformance.harness.suite import catalog_paths
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


def test_zoo_checks_the_catches_claims_of_ones_own_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from conformance.cli import main

    source = next(CATALOG_DIR.glob("07-*.yaml")).read_text()
    assert "catches: [batch-lost-on-shutdown, shutdown-ends-sessions]" in source
    (tmp_path / "holds.yaml").write_text(source)
    (tmp_path / "claims-too-much.yaml").write_text(
        source.replace("shutdown-ends-sessions]", "idle-expiry-no-finalize]").replace("name: 07-", "name: x07-"))
    assert main(["zoo", str(tmp_path)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert "CLAIM      x07-batch-flush-at-shutdown claims to catch idle-expiry-no-finalize but passes on it" in out
    assert out[-1].endswith("; 3 of 4 catches: claims hold")
    (tmp_path / "claims-too-much.yaml").unlink()
    assert main(["zoo", str(tmp_path)]) == 0
    (tmp_path / "typo.yaml").write_text(source.replace("shutdown-ends-sessions]", "shutdown-end-sessions]"))
    assert main(["zoo", str(tmp_path)]) == 2
    assert "typo.yaml: catches: unknown variant 'shutdown-end-sessions'" in capsys.readouterr().err


def test_a_shrunk_file_claims_only_the_variant_it_was_shrunk_on(tmp_path: Path) -> None:
    from conformance.cli import main

    path = tmp_path / "c07.yaml"
    path.write_text(next(CATALOG_DIR.glob("07-*.yaml")).read_text())
    assert main(["shrink", str(path), "--gateway", "reference:batch-lost-on-shutdown", "--out", str(tmp_path)]) == 0
    assert "catches: [batch-lost-on-shutdown]\n" in (tmp_path / "c07.shrunk.yaml").read_text()


def test_no_variant_breaks_on_the_catalog_but_by_its_one_bug() -> None:
    """A variant is the reference with one bug; one that raises on some scenario hides what else it
    would have done there, and a gate on it can never be green (`sync-after-end` raised KeyError on
    45, 69 and 87: it handed the chat on twice when a message waited behind the turn). The one
    error a variant may meet is a crash point its bug skips (`never-replies` never replies)."""
    scenarios = [load_file(path) for path in catalog_paths()]
    broken = [(name, scenario.name, result.failure.describe())
              for name, variant in VARIANTS.items() for scenario in scenarios
              if (result := run_scenario(scenario, variant(), f"reference:{name}", check=False)).failure is not None
              and "was reached 0 times after it" not in result.failure.message]
    assert broken == []
