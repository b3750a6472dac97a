"""The pytest plugin: silent unless asked; then one item per scenario, with -k, --lf and JUnit."""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]
LEAN = ("-p", "no:xdist", "-p", "no:hypothesispytest")  # each costs ~1 s per in-process run

BROKEN = '''
from reference_impl import ReferenceGateway


class ForgetsFinalize(ReferenceGateway):
    """Sessions ended by /new end without on_session_finalize."""

    def end_session(self, route, reason):
        if reason != "new":
            return super().end_session(route, reason)
        hooks = self.h.hooks
        finalize, hooks.on_session_finalize = hooks.on_session_finalize, lambda session, reason: None
        try:
            super().end_session(route, reason)
        finally:
            hooks.on_session_finalize = finalize
'''


def test_does_nothing_without_its_options(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_plain():\n    pass\n")
    result = pytester.runpytest_inprocess(*LEAN, "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    assert "collected 1 item" in result.stdout.str() and "sessiongate[" not in result.stdout.str()


def test_one_item_per_seed_and_catalog_scenario(pytester: pytest.Pytester) -> None:
    from conformance.suite import catalog_paths

    result = pytester.runpytest_inprocess(*LEAN, "-p", "no:cacheprovider", "--sessiongate-gateway", "reference",
                                          "--sessiongate-seeds", "0:2", "--co", "-q")
    lines = result.stdout.lines
    assert "sessiongate[reference]::gen-0" in lines and "sessiongate[reference]::gen-1" in lines
    assert sum(line.startswith("sessiongate[reference]::catalog/") for line in lines) == len(catalog_paths())


def test_generated_items_pass_and_select_with_k(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_inprocess(*LEAN, "-p", "no:cacheprovider", "--sessiongate-seeds", "0:2", "--no-sessiongate-catalog",
                                          "-k", "gen-1", f"--junitxml={pytester.path / 'junit.xml'}")
    result.assert_outcomes(passed=1, deselected=1)
    assert 'name="gen-1"' in (pytester.path / "junit.xml").read_text()


def test_failing_item_shows_evidence_and_reruns_with_lf(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(brokengw=BROKEN)
    pytester.syspathinsert()
    args = ["--sessiongate-gateway", "brokengw:ForgetsFinalize", "--no-sessiongate-catalog", "--sessiongate-seeds", "0:6",
            "--sessiongate-profile", "small"]
    first = pytester.runpytest_inprocess(*LEAN, *args)
    first.assert_outcomes(passed=4, failed=2)  # small seeds 1 and 5 use /new
    text = first.stdout.str()
    assert "gen-1 on brokengw:ForgetsFinalize" in text and "  I1 fail" in text
    assert "reproduce: sessiongate fuzz --seeds 1:2 --gateway brokengw:ForgetsFinalize --profile small" in text
    again = pytester.runpytest_inprocess(*LEAN, *args, "--lf")
    again.assert_outcomes(failed=2, deselected=4)
