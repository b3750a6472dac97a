"""A check that examined nothing says so everywhere a verdict is shown, and `--strict` fails it."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

import reports
from conformance.checks import judge
from conformance.cli import main
from conformance.harness.runner import run_scenario
from conformance.harness.suite import catalog_paths
from conformance.harness.verdict import VACUOUS, Verdict, strictly
from reference_impl.gateway import ReferenceGateway
from sim.generate import scenario_for_seed
from sim.loader import load_file

pytest_plugins = ["pytester"]

NONE = next(p for p in catalog_paths() if p.stem == "20-policy-none")  # I5: no session ever ends


def test_a_pass_that_examined_nothing_is_vacuous_and_strict_fails_it() -> None:
    assert Verdict("I5", "pass", examined=0).vacuous
    assert not Verdict("I5", "pass", examined=1).vacuous
    assert not Verdict("I5", "fail", examined=0).vacuous
    failed = strictly(Verdict("I5", "pass"))
    assert failed.status == "fail" and failed.summary == VACUOUS
    records = run_scenario(load_file(NONE), ReferenceGateway(), "reference", check=False).records
    assert [c for c, v in judge(records).items() if v.vacuous] == ["I5"]
    assert {c: v.status for c, v in judge(records, strict=True).items() if v.status != "pass"} == {"I5": "fail"}


def test_run_marks_vacuous_checks_and_strict_fails_them(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", str(NONE)]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "pass  20-policy-none (I5 vacuous)", "1 scenario, 1 passed, 0 failed; 1 check vacuous (examined nothing)"]
    assert main(["run", str(NONE), "--strict"]) == 1
    assert capsys.readouterr().out.splitlines() == [
        "fail  20-policy-none", f"      I5 {VACUOUS}", "1 scenario, 0 passed, 1 failed"]


def test_fuzz_counts_vacuous_checks_and_strict_fails_them(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The first small-profile seed that leaves a check with nothing to judge."""
    seed = next(s for s in range(200)
                if any(v.vacuous for v in run_scenario(scenario_for_seed(s, "small"), ReferenceGateway()).verdicts.values()))
    args = ["fuzz", "--seeds", f"{seed}:{seed + 1}", "--profile", "small", "--out", str(tmp_path), "--no-shrink"]
    assert main(args) == 0
    assert capsys.readouterr().out.splitlines()[-1].startswith("1 scenario, 1 passed, 0 failed; ")
    assert main([*args, "--strict"]) == 1
    assert "examined nothing" in capsys.readouterr().out


def test_reports_show_vacuity(tmp_path: Path) -> None:
    result = run_scenario(load_file(NONE), ReferenceGateway(), "reference")
    reports.write_all([result], str(tmp_path), "reference")
    summary = json.loads((tmp_path / "summary.json").read_text(encoding="utf-8"))
    assert summary["schema"] == 2 and summary["totals"]["vacuous_checks"] == 1
    verdicts = summary["scenarios"][0]["verdicts"]
    assert verdicts["I5"]["vacuous"] is True and verdicts["I5"]["examined"] == 0
    assert verdicts["I9"]["vacuous"] is False and verdicts["I9"]["examined"] > 0
    cases = ET.parse(tmp_path / "junit.xml").getroot().iter("testcase")
    flagged = [c.get("name") for c in cases if c.find("properties/property[@name='vacuous']") is not None]
    assert flagged == ["I5 ordering"]
    html = (tmp_path / "report.html").read_text(encoding="utf-8")
    assert html.count('<td class="vacuous"') == 1


def test_the_pytest_plugin_fails_vacuous_checks_under_strict(pytester: pytest.Pytester) -> None:
    lean = ("-p", "no:xdist", "-p", "no:hypothesispytest", "-p", "no:cacheprovider")
    args = (str(NONE), "--sessiongate-gateway", "reference")
    pytester.runpytest_inprocess(*lean, *args).assert_outcomes(passed=1)
    strict = pytester.runpytest_inprocess(*lean, *args, "--sessiongate-strict")
    strict.assert_outcomes(failed=1)
    assert "examined nothing" in strict.stdout.str()
