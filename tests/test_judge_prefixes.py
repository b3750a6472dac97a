"""A property of the checks (issue #19): judging any prefix of any log raises nothing.

Every prefix of every catalog log, and a seeded stride of prefixes of 1,000 generated logs (the
reference and every zoo variant, one in three cut at a gateway error), each read by the checks,
`replay`'s timeline and the HTML timeline (`prefix_sweep.problems`). Hypothesis is derandomized,
so CI sees the same logs every time. The full sweep, every prefix of every log, is one command
(`tests/prefix_sweep.py`, figures in docs/reliability.md).
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from prefix_sweep import catalog, every, generated, problems

from conformance.harness.runner import RunResult

GENERATED_LOGS = 1_000


@pytest.fixture(scope="module")
def catalog_logs() -> list[RunResult]:
    return list(catalog())


def test_every_prefix_of_every_catalog_log_is_judged_without_a_checker_error(catalog_logs: list[RunResult]) -> None:
    found = [problem for result in catalog_logs for problem in problems(result, every(result))]
    assert found == []


@settings(derandomize=True, max_examples=GENERATED_LOGS, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(number=st.integers(0, 10**6), data=st.data())
def test_a_stride_of_prefixes_of_generated_logs_is_judged_without_a_checker_error(number: int, data: st.DataObject) -> None:
    result = generated(number)
    size = len(result.records)
    ends = data.draw(st.lists(st.integers(1, size), min_size=1, max_size=3, unique=True), label="prefix lengths")
    assert list(problems(result, sorted({*ends, size}))) == []
