"""The pytest plugin: silent unless asked; then one item per scenario, with -k, --lf and JUnit."""

from __future__ import annotations

from pathlib import Path

import pytest

from conformance.harness.suite import catalog_paths

pytest_plugins = ["pytester"]
ROOT = Path(__file__).resolve().parent.parent
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
    from conformance.harness.suite import catalog_paths

    result = pytester.runpytest_inprocess(*LEAN, "-p", "no:cacheprovider", "--sessiongate-gateway", "reference",
                                          "--sessiongate-seeds", "0:2", "--co", "-q")
    lines = result.stdout.lines
    assert "sessiongate[reference]::gen-0" in lines and "sessiongate[reference]::gen-1" in lines
    assert sum(line.startswith("sessiongate[reference]::catalog/") for line in lines) == len(catalog_paths())


def test_collected_count_is_the_items_it_runs(pytester: pytest.Pytester) -> None:
    """pytest's "collected N items" counts the scenarios (it said "collected 0 items" while running 50)."""
    result = pytester.runpytest_inprocess(*LEAN, "-p", "no:cacheprovider", "--sessiongate-seeds", "0:3", "--no-sessiongate-catalog",
                                          "-k", "gen-1")
    result.assert_outcomes(passed=1, deselected=2)
    assert "collected 3 items / 2 deselected / 1 selected" in result.stdout.str()


def test_generated_items_pass_and_select_with_k(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_inprocess(*LEAN, "-p", "no:cacheprovider", "--sessiongate-seeds", "0:2", "--no-sessiongate-catalog",
                                          "-k", "gen-1", f"--junitxml={pytester.path / 'junit.xml'}")
    result.assert_outcomes(passed=1, deselected=1)
    assert 'name="gen-1"' in (pytester.path / "junit.xml").read_text()


def test_failing_item_shows_evidence_and_reruns_with_lf(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PYTHONPATH", raising=False)  # else the reproduce line starts with it (conformance.harness.shell)
    pytester.makepyfile(brokengw=BROKEN)
    pytester.syspathinsert()
    args = ["--sessiongate-gateway", "brokengw:ForgetsFinalize", "--no-sessiongate-catalog", "--sessiongate-seeds", "0:6",
            "--sessiongate-profile", "small"]
    first = pytester.runpytest_inprocess(*LEAN, *args)
    first.assert_outcomes(passed=4, failed=2)  # small seeds 1 and 5 use /new
    text = first.stdout.str()
    assert "gen-1 on brokengw:ForgetsFinalize" in text and "  I1 fail" in text
    # brokengw is importable through pytester.syspathinsert() alone (as through pytest's `pythonpath = .`):
    # the line pasted into the shell needs its folder on PYTHONPATH
    assert "reproduce: PYTHONPATH=. sessiongate replay --seed 1 --gateway brokengw:ForgetsFinalize --profile small" in text
    again = pytester.runpytest_inprocess(*LEAN, *args, "--lf")
    again.assert_outcomes(failed=2, deselected=4)


def _own_scenarios(pytester: pytest.Pytester) -> None:
    """myscen/ with a copy of the first catalog scenario, as a user's own folder."""
    from conformance.harness.suite import catalog_paths

    (pytester.path / "myscen").mkdir()
    (pytester.path / "myscen" / "mine.yaml").write_text(catalog_paths()[0].read_text(encoding="utf-8"), encoding="utf-8")


def test_own_scenario_files_and_folders_are_collected_without_the_catalog(pytester: pytest.Pytester) -> None:
    _own_scenarios(pytester)
    named = pytester.runpytest_inprocess(*LEAN, "-p", "no:cacheprovider", "myscen/mine.yaml", "--sessiongate-gateway", "reference")
    named.assert_outcomes(passed=1)  # was "ERROR: not found: …/myscen/mine.yaml"
    listed = pytester.runpytest_inprocess(*LEAN, "-p", "no:cacheprovider", "--sessiongate-scenarios", "myscen", "--co", "-q")
    assert [line for line in listed.stdout.lines if line.startswith("sessiongate[")] == ["sessiongate[reference]::myscen/mine.yaml"]
    both = pytester.runpytest_inprocess(*LEAN, "-p", "no:cacheprovider", "--sessiongate-scenarios", "myscen/mine.yaml",
                                        "--sessiongate-catalog", "--co", "-q")
    assert sum(line.startswith("sessiongate[reference]::catalog/") for line in both.stdout.lines) == len(catalog_paths())


def test_expectations_option_applies_a_file_of_ones_own(pytester: pytest.Pytester) -> None:
    _own_scenarios(pytester)
    (pytester.path / "mine.txt").write_text("01-idle-expiry-end-and-finalize I1  # bogus\n", encoding="utf-8")
    result = pytester.runpytest_inprocess(*LEAN, "-p", "no:cacheprovider", "myscen/mine.yaml", "--sessiongate-expectations", "mine.txt")
    result.assert_outcomes(failed=1)
    assert "  xpass: mine.txt:1: I1 passed, but this line says it fails: bogus" in result.stdout.lines


def test_an_expectations_entry_naming_no_catalog_scenario_is_warned_about(pytester: pytest.Pytester) -> None:
    """As `run --expectations` warns: a typo of a catalog name expects nothing. An entry naming
    one's own scenario, here a letter or two off a catalog name too, is no typo."""
    first = catalog_paths()[0]  # 01-idle-expiry-end-and-finalize
    (pytester.path / "myscen").mkdir()
    own = first.read_text(encoding="utf-8").replace(f"name: {first.stem}\n", f"name: {first.stem}-mine\n")
    (pytester.path / "myscen" / "mine.yaml").write_text(own, encoding="utf-8")
    (pytester.path / "exp2.txt").write_text("01-idle-expiry-end-and-finalise I1  # the catalog spells it -finalize\n"
                                            f"{first.stem}-mine I1  # my own scenario\n", encoding="utf-8")
    result = pytester.runpytest_inprocess(*LEAN, "-p", "no:cacheprovider", "--sessiongate-no-failure-db",
                                          "--sessiongate-scenarios", "myscen", "--sessiongate-catalog",
                                          "--sessiongate-expectations", "exp2.txt", "--co", "-q")
    assert ("warning: exp2.txt:1: names no catalog scenario '01-idle-expiry-end-and-finalise' (did you mean "
            "'01-idle-expiry-end-and-finalize'?): a typo expects nothing") in result.stdout.lines


@pytest.mark.parametrize(("args", "message"), [
    (("--sessiongate-scenarios", "nowhere"),
     "sessiongate: --sessiongate-scenarios nowhere: no such file or directory (nor a catalog scenario's name)"),
    (("--sessiongate-expectations", "nowhere.txt"), "sessiongate: nowhere.txt: expectations file not found"),
])
def test_a_bad_path_option_is_a_usage_error(pytester: pytest.Pytester, args: tuple[str, ...], message: str) -> None:
    result = pytester.runpytest_inprocess(*LEAN, "-p", "no:cacheprovider", *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert f"ERROR: {message}" in result.stderr.lines


def test_isolated_items_crash_for_real_and_the_summary_counts_played_crashes(pytester: pytest.Pytester) -> None:
    """`--sessiongate-isolate`: each item in a child process, where a gateway with open_store()
    is killed at a crash; in process the summary says how many items only played theirs."""
    args = (*LEAN, "-p", "no:cacheprovider", "--no-sessiongate-catalog", "--sessiongate-no-failure-db",
            "--sessiongate-scenarios", str(ROOT / "conformance" / "catalog" / "29-crash-then-restart.yaml"))
    played = pytester.runpytest_inprocess(*args, "--sessiongate-gateway", "selftest:ram-outbox")
    played.assert_outcomes(passed=1)
    assert ("note: 1 of 1 scenarios crash the gateway by its own crash() call, which loses nothing it keeps in memory "
            "(--sessiongate-isolate kills one with open_store(): docs/contract.md)") in played.stdout.lines
    real = pytester.runpytest_inprocess(*args, "--sessiongate-gateway", "selftest:ram-outbox", "--sessiongate-isolate")
    real.assert_outcomes(failed=1)
    assert "    - backend 'hindsight' never ingested [t1, t2] (session s1, acknowledged from 09:00:02 to 09:05:02)" in real.stdout.lines
    assert not any(line.startswith("note: ") for line in real.stdout.lines)


LACKING_ALL = '''
from dataclasses import replace
from conformance.features import FEATURES
from reference_impl import ReferenceGateway
from reference_impl.variants import VARIANTS


class make(ReferenceGateway):
    def profile(self, config):
        lacking = FEATURES - {"command", "sigterm", "crash", "restart", "advance", "message", "checkpoint"}
        return replace(super().profile(config), unsupported=frozenset(lacking))


class Forgets(VARIANTS["never-replies"], make):
    """The zoo's never-replies, lacking what make lacks."""
'''


def test_fitted_seeds_are_all_judged_and_reproduce_with_fit(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """`--sessiongate-fit`, as `fuzz --fit`: dense seeds that a gateway lacking every optional
    setting skipped whole are drawn without them, and a failing one reproduces with `--fit`."""
    monkeypatch.delenv("PYTHONPATH", raising=False)
    pytester.makepyfile(fitgw=LACKING_ALL)
    pytester.syspathinsert()
    args = [*LEAN, "-p", "no:cacheprovider", "--no-sessiongate-catalog", "--sessiongate-seeds", "0:8", "--sessiongate-profile", "dense"]
    plain = pytester.runpytest_inprocess(*args, "--sessiongate-gateway", "fitgw:make")
    assert plain.parseoutcomes().get("skipped", 0) >= 6
    fitted = pytester.runpytest_inprocess(*args, "--sessiongate-gateway", "fitgw:make", "--sessiongate-fit")
    fitted.assert_outcomes(passed=8)
    failing = pytester.runpytest_inprocess(*args, "--sessiongate-gateway", "fitgw:Forgets", "--sessiongate-fit")
    assert failing.parseoutcomes().get("failed", 0) >= 1
    assert "--gateway fitgw:Forgets --profile dense --fit" in failing.stdout.str()
