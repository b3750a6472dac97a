"""A verdict lists its violations in the order a reader follows them: by their instant, then
in log order. Checks find them session by session (or provider by provider), which read s2, s1,
s4 for boundaries at 09:31, 09:30 and 10:12; and a log judged in parts lists them as one judged whole."""

from __future__ import annotations

from pathlib import Path

import pytest

from conformance.checks import judge
from conformance.harness.registry import resolve
from conformance.harness.runner import run_scenario
from sim.loader import load_file

CATALOG = Path(__file__).resolve().parent.parent / "conformance" / "catalog"


@pytest.mark.parametrize(("variant", "scenario", "check"), [
    ("answers-first-turn-only", "08-batch-end-then-switch", "I3"),
    ("batch-flush-reships-retained", "74-new-after-daily-boundary", "I4"),
    ("batch-flush-reships-retained", "75-daily-boundary-inside-a-turn", "I4"),
])
def test_violations_are_listed_by_their_instant(variant: str, scenario: str, check: str) -> None:
    result = run_scenario(load_file(CATALOG / f"{scenario}.yaml"), resolve(f"reference:{variant}")(), variant)
    violations = result.verdicts[check].violations
    times = [v.t for v in violations if v.t is not None]
    assert len(times) >= 2 and times == sorted(times)
    assert [v.t is None for v in violations] == sorted(v.t is None for v in violations)  # those of no instant last


@pytest.mark.parametrize(("variant", "scenario"), [("answers-first-turn-only", "08-batch-end-then-switch"),
                                                   ("shutdown-ends-sessions", "07-batch-flush-at-shutdown")])
def test_a_log_judged_in_parts_lists_them_as_judged_whole(variant: str, scenario: str) -> None:
    result = run_scenario(load_file(CATALOG / f"{scenario}.yaml"), resolve(f"reference:{variant}")(), variant)
    whole = judge(result.records)
    assert any(v.violations for v in whole.values())
    assert judge(result.records, in_parts=True) == whole
