"""Reports: JUnit validates, the JSON summary keeps its schema, the HTML has a timeline per
failing run, re-rendering from the saved logs gives the same bytes, writes are atomic."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from reportcase import FAILING, mixed_results, scenario

import reports
from conformance.cli import main
from conformance.harness.runner import run_scenario
from conformance.harness.suite import outcome
from conformance.harness.verdict import CHECK_IDS
from reference_impl import ReferenceGateway
from reports import rundir
from reports.axis import Axis
from reports.coverage import lifecycle_coverage
from sim.clock import DAY, MINUTE

ROOT = Path(__file__).resolve().parent.parent
XSD = Path(__file__).parent / "data" / "junit.xsd"
STATUSES = {"pass", "fail", "xfail", "xpass", "error", "timeout", "skip"}


@pytest.fixture(scope="module")
def results():
    return mixed_results()


@pytest.fixture(scope="module")
def run_dir(results, tmp_path_factory):
    folder = tmp_path_factory.mktemp("report")
    reports.write_all(results, str(folder), "reference")
    return folder


def test_the_mixed_runs_are_what_the_tests_need(results):
    assert [outcome(r) for r in results] == ["pass", "fail", "xfail", "error"]


def test_junit_has_a_case_per_run_and_check_and_validates(run_dir, results):
    root = ET.parse(run_dir / "junit.xml").getroot()
    cases = root.findall("./testsuite/testcase")
    assert len(cases) == len(results) * len(CHECK_IDS)
    assert root.get("tests") == str(len(cases))
    failing = [c for c in cases if c.find("failure") is not None]
    assert failing and all(c.get("classname") == results[1].scenario.name for c in failing)
    verdict = next(v for v in results[1].verdicts.values() if v.status == "fail")
    failure = next(c for c in failing if c.get("name").startswith(verdict.check)).find("failure")
    assert all(v.message in failure.text for v in verdict.violations)
    skipped = [c.find("skipped") for c in cases if c.find("skipped") is not None]
    assert skipped and all(s.get("message") == "expected failure: known: no finalize on idle expiry" for s in skipped)
    errors = [c.find("error") for c in cases if c.find("error") is not None]
    assert len(errors) == len(CHECK_IDS) and "boom" in errors[0].get("message")
    xmlschema = pytest.importorskip("xmlschema")
    xmlschema.XMLSchema(str(XSD)).validate(str(run_dir / "junit.xml"))


def test_summary_keeps_the_documented_schema(run_dir, results):
    text = (run_dir / "summary.json").read_text(encoding="utf-8")
    doc = json.loads(text)
    assert text == rundir.canonical_json(doc)
    assert doc["schema"] == 2 and doc["gateway"] == "reference"
    assert [s["name"] for s in doc["scenarios"]] == [r.scenario.name for r in results]
    for entry in doc["scenarios"]:
        assert set(entry) == {"key", "name", "gateway", "file", "seed", "log", "outcome", "verdicts"}
        assert entry["file"].endswith(".yaml") and isinstance(entry["seed"], int)
        assert list(entry["verdicts"]) == list(CHECK_IDS)
        for verdict in entry["verdicts"].values():
            assert verdict["status"] in STATUSES and isinstance(verdict["evidence"], list)
    failing = doc["scenarios"][1]["verdicts"]
    evidence = [e for v in failing.values() if v["status"] == "fail" for e in v["evidence"]]
    assert evidence and all({"message", "records"} <= set(e) for e in evidence)
    assert set(doc["coverage"]) == {"lifecycle", "boundaries", "crash_points"}  # the reference declares crash points
    assert doc["coverage"]["lifecycle"]["cells"]["live+cached"]["message"]["count"] > 0


def test_html_is_one_file_with_a_timeline_per_failing_run(run_dir, results):
    page = (run_dir / "report.html").read_text(encoding="utf-8")
    assert "<script" not in page and "<link" not in page and " src=" not in page
    assert page.replace('xmlns="http://www.w3.org/2000/svg"', "").count("http") == 0
    unexpected = [r for r in results if outcome(r) in ("fail", "error", "timeout")]
    expected = [r for r in results if outcome(r) == "xfail"]
    assert page.count("<svg") == len(unexpected) + len(expected)
    for result in unexpected:
        section = page.split(f'id="s-{result.scenario.name}"')[1].split("</section>")[0]
        assert "<svg" in section
    assert "1 passing run<" in page and "<details>" in page
    assert "Lifecycle coverage" in page


def test_rerendering_from_the_logs_gives_the_same_bytes(run_dir, results, tmp_path):
    before = {p.relative_to(run_dir): p.read_bytes() for p in sorted(run_dir.rglob("*")) if p.is_file()}
    assert Path("logs/index.json") in before and Path(f"logs/{results[1].scenario.name}.jsonl") in before
    copy = tmp_path / "copy"
    for rel, data in before.items():
        (copy / rel).parent.mkdir(parents=True, exist_ok=True)
        (copy / rel).write_bytes(data)
    for rel in reports.FILES:
        (copy / rel).unlink()
    assert main(["report", str(copy)]) == 1  # the failing run still fails when judged again
    after = {p.relative_to(copy): p.read_bytes() for p in sorted(copy.rglob("*")) if p.is_file()}
    assert after == before


def test_a_strict_run_rerenders_strict_and_compares_so(tmp_path, capsys):
    """`report` re-judged a `--strict` run's logs leniently: 18 failures became passes, exit 0,
    and every file differed; `compare` showed a strict run as passing."""
    first = str(Path(__file__).parent.parent / "conformance" / "catalog" / "05-none-session-reaped.yaml")
    strict, plain = tmp_path / "strict", tmp_path / "plain"
    assert main(["run", first, "--strict", "--report", str(strict)]) == 1  # I5 examined nothing
    assert main(["run", first, "--report", str(plain)]) == 0
    assert json.loads((strict / "summary.json").read_text())["strict"] is True
    assert "strict" not in json.loads((plain / "summary.json").read_text())
    before = {p.name: p.read_bytes() for p in strict.iterdir() if p.is_file()}
    capsys.readouterr()
    assert main(["report", str(strict)]) == 1
    assert {p.name: p.read_bytes() for p in strict.iterdir() if p.is_file()} == before
    _gateway, results, _unloaded, was_strict = rundir.load(strict)
    assert was_strict and outcome(results[0]) == "fail"
    assert "reproduce: sessiongate replay " in (strict / "junit.xml").read_text() and \
        "--gateway reference --strict" in (strict / "junit.xml").read_text()  # replay takes --strict too


def test_a_failing_run_with_a_restart_config_rerenders_the_same_page(tmp_path):
    """The timeline's tooltips showed a restart's config as the dict it was: in the gateway's key
    order live, in the log's when re-rendered, so report.html differed."""
    path = str(Path(__file__).parent.parent / "conformance" / "catalog" / "58-restart-changes-policy.yaml")
    live, again = tmp_path / "live", tmp_path / "again"
    assert main(["run", path, "--gateway", "reference:restart-keeps-old-policy", "--report", str(live)]) == 1
    (again / "logs").mkdir(parents=True)
    for log in (live / "logs").iterdir():
        (again / "logs" / log.name).write_bytes(log.read_bytes())
    assert main(["report", str(again)]) == 1
    page = (live / "report.html").read_text(encoding="utf-8")
    assert "config={&quot;" in page and page == (again / "report.html").read_text(encoding="utf-8")


def test_report_of_a_zoo_run_does_not_fail_for_the_variants_it_catches(tmp_path, capsys):
    """`zoo --report` exited 0 (every variant caught as claimed) and `report` on its folder 1 (the
    variants' failures counted as failures)."""
    from reference_impl.variants import VARIANTS
    from sim.loader import load_file

    path = Path(__file__).parent.parent / "conformance" / "catalog" / "01-idle-expiry-end-and-finalize.yaml"
    caught = run_scenario(load_file(path), VARIANTS["idle-expiry-no-finalize"](), "reference:idle-expiry-no-finalize")
    assert outcome(caught) == "fail"
    reports.write_all([caught], str(tmp_path), "zoo")
    capsys.readouterr()
    assert main(["report", str(tmp_path)]) == 0
    assert capsys.readouterr().out.splitlines()[-1].startswith("note: a zoo run's variants fail on purpose")


def test_report_of_a_folder_without_logs_is_a_usage_error(tmp_path, capsys):
    assert main(["report", str(tmp_path)]) == 2
    assert capsys.readouterr().err.endswith(
        f"{tmp_path}: not a run directory: it has no logs/index.json (`sessiongate run --report DIR` writes one)\n")


def test_writes_are_atomic_and_leave_no_temp_files(run_dir, tmp_path, monkeypatch):
    assert not [p for p in run_dir.rglob("*") if p.name.endswith(".tmp")]
    target = tmp_path / "summary.json"
    rundir.atomic_write(target, "old\n")

    def refuse(*_args):
        raise OSError("disk full")

    monkeypatch.setattr(rundir.os, "replace", refuse)
    with pytest.raises(OSError):
        rundir.atomic_write(target, "new\n")
    assert target.read_text() == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["summary.json"]


def test_zoo_style_runs_get_one_log_per_gateway_and_scenario(tmp_path):
    clean = run_scenario(scenario(FAILING[0]), ReferenceGateway(), "reference")
    other = run_scenario(scenario(FAILING[0]), ReferenceGateway(), "reference:twin")
    reports.write_all([clean, other], str(tmp_path), "zoo")
    name = clean.scenario.name
    assert (tmp_path / f"logs/reference/{name}.jsonl").exists()
    assert (tmp_path / f"logs/reference-twin/{name}.jsonl").exists()
    suites = ET.parse(tmp_path / "junit.xml").getroot().findall("testsuite")
    assert [s.get("name") for s in suites] == ["reference", "reference:twin"]


def test_lifecycle_coverage_sees_states_events_and_hook_paths():
    logs = [run_scenario(scenario(name), ReferenceGateway(), "reference", check=False).records
            for name in ("01-idle-expiry", "07-batch-flush-at-shutdown", "25-message-before-watcher")]
    cover = lifecycle_coverage(logs)
    assert cover.lifecycle.counts[("live+cached", "SIGTERM")] >= 1
    assert cover.lifecycle.scenarios[("live+cached", "SIGTERM")] == [scenario("07-batch").name]
    assert cover.boundaries.counts[("idle", "watcher")] >= 1
    assert cover.boundaries.counts[("idle", "message")] >= 1
    assert ("shut down", "message") in cover.lifecycle.unreached()
    assert ("shut down", "sweep") not in cover.lifecycle.unreached()  # cannot happen, so not owed


def test_a_command_that_ends_the_session_finds_it_live_not_past_its_boundary():
    """/new and /resume are their own boundaries: just before them the session is live (cached or
    evicted); a /new after a policy boundary the watcher has not acted on finds it past it."""
    def cover(name: str):
        return lifecycle_coverage([run_scenario(scenario(name), ReferenceGateway(), "reference", check=False).records])

    resumed = cover("30-resume-ends-left-session").lifecycle.counts  # /new, /resume on live sessions
    assert resumed.get(("live+cached", "command"), 0) == 2 and resumed.get(("past boundary", "command"), 0) == 0
    evicted = cover("73-command-for-an-evicted-agent").lifecycle.counts
    assert evicted.get(("live+evicted", "command"), 0) == 1 and evicted.get(("past boundary", "command"), 0) == 0
    daily = cover("74-new-after-daily-boundary")
    assert daily.lifecycle.counts.get(("past boundary", "command"), 0) == 1
    assert daily.boundaries.counts.get(("daily", "command"), 0) == 1


def test_a_life_a_resume_reopens_is_not_ended_by_the_end_of_the_life_before():
    """Catalog 94: the `/resume` past the boundary ends s1's first life and opens its second in
    the same step (the end is logged after the command); that second life is past its boundary
    when its agent is evicted, not ended (the eviction after an end stays unreached)."""
    cover = lifecycle_coverage([run_scenario(scenario("94-resume-past"), ReferenceGateway(), "reference",
                                             check=False).records]).lifecycle.counts
    assert cover.get(("ended", "eviction"), 0) == 0 and cover.get(("past boundary", "eviction"), 0) == 1
    assert cover.get(("ended", "message"), 0) == 0


def test_a_two_day_quiet_gap_is_squeezed_to_a_break():
    zone = ZoneInfo("Europe/Berlin")
    start = 1_772_438_400_000
    busy = [start + k * MINUTE for k in range(0, 60, 5)]
    axis = Axis([*busy, start + 2 * DAY], 0, 1000, zone)
    assert len(axis.breaks) == 1 and axis.breaks[0].label == "1d23h"
    assert axis.x(busy[-1]) > 600  # the busy hour keeps most of the width
    assert all(not axis.in_break(t.t) for t in axis.ticks())


def test_code_coverage_helper_measures_the_gateway_package(tmp_path):
    import sys

    if sys.gettrace() is not None:
        pytest.skip("already running under a tracer (coverage or a debugger)")
    from reports.coverage import combine_code, measure_code

    data = str(tmp_path / ".coverage")
    written = measure_code([str(scenario(FAILING[0]).source)], "reference", ["reference_impl"], data)
    assert Path(written).name.startswith(".coverage.")
    percent, text = combine_code(data)
    assert 0 < percent <= 100 and "gateway.py" in text


def test_coverage_command_prints_the_tables_and_the_gaps(capsys):
    path = str(scenario("01-idle-expiry").source)
    assert main(["coverage", path]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[1].startswith("live+cached") and "never reached: " in out
    assert main(["coverage", path, "--markdown"]) == 0
    out = capsys.readouterr().out
    assert "| idle | " in out and "### Cells no scenario reaches yet" in out


def renamed(prefix: str, name: str):
    """A clean run of a catalog scenario under another scenario name."""
    import dataclasses

    return run_scenario(dataclasses.replace(scenario(prefix), name=name), ReferenceGateway(), "reference")


def test_a_scenario_name_cannot_leave_logs_or_overflow_a_file_name(tmp_path):
    runs = [renamed("01-idle", "../../../escaped"), renamed("01-idle", "x" * 300), renamed("01-idle", "a:b"),
            renamed("01-idle", "a-b"), renamed("01-idle", "A-B")]
    folder = tmp_path / "deep" / "report"
    reports.write_all(runs, str(folder), "reference")
    assert not (tmp_path / "escaped.jsonl").exists() and not list(tmp_path.glob("*.jsonl"))
    logs = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*.jsonl"))
    assert logs == sorted(["logs/a-b.jsonl", "logs/a-b~2.jsonl", "logs/A-B~3.jsonl", "logs/escaped.jsonl",
                           f"logs/{'x' * rundir.SLUG_MAX}.jsonl"])
    assert main(["report", str(folder)]) == 0  # every run comes back, each from its own log
    keys = [s["key"] for s in json.loads((folder / "summary.json").read_text())["scenarios"]]
    assert keys == ["../../../escaped", "x" * 300, "a:b", "a-b", "A-B"]


def test_saving_removes_only_the_logs_it_wrote_before(tmp_path):
    mine = tmp_path / "logs" / "app"
    mine.mkdir(parents=True)
    (mine / "prod.jsonl").write_text("keep me\n")
    reports.write_all([renamed("01-idle", "first")], str(tmp_path), "reference")
    reports.write_all([renamed("01-idle", "second")], str(tmp_path), "reference")
    assert (mine / "prod.jsonl").read_text() == "keep me\n"
    assert not (tmp_path / "logs" / "first.jsonl").exists() and (tmp_path / "logs" / "second.jsonl").exists()


@pytest.mark.parametrize("damage, words", [
    (lambda d: (d / "logs/ok.jsonl").write_text("".join((d / "logs/ok.jsonl").read_text().splitlines(True)[:3])),
     "not the log the run wrote (3 records, the index says"),
    (lambda d: (d / "logs/ok.jsonl").write_text(""), "not the log the run wrote (0 records"),
    (lambda d: (d / "logs/index.json").write_text("{}"), "schema None; this sessiongate reads schema 1"),
    (lambda d: (d / "logs/index.json").write_text("[]"), "expected a JSON object, got list"),
    (lambda d: (d / "logs/index.json").write_text('{"schema": 99, "gateway": "g", "runs": []}'), "schema 99"),
    (lambda d: (d / "logs/index.json").write_text('{"schema": 1, "gateway": "g", "runs": [{"key": "k"}]}'),
     "runs[0]: missing log, gateway, file, header, expected"),
    (lambda d: (d / "logs/index.json").write_text(
        (d / "logs/index.json").read_text().replace('"logs/ok.jsonl"', '"../outside.jsonl"')),
     "runs[0].log: '../outside.jsonl' is not a .jsonl file inside logs/"),
])
def test_a_damaged_run_directory_is_an_error_not_a_verdict(tmp_path, capsys, damage, words):
    reports.write_all([renamed("01-idle", "ok")], str(tmp_path), "reference")
    damage(tmp_path)
    assert main(["report", str(tmp_path)]) == 2
    assert words in capsys.readouterr().err


def test_an_index_from_before_the_digest_still_rerenders(tmp_path):
    reports.write_all([renamed("01-idle", "ok")], str(tmp_path), "reference")
    index = json.loads((tmp_path / "logs/index.json").read_text())
    for entry in index["runs"]:
        del entry["records"], entry["sha256"]
    (tmp_path / "logs/index.json").write_text(json.dumps(index))
    assert main(["report", str(tmp_path)]) == 0


def test_a_file_that_did_not_load_is_in_every_report(tmp_path, capsys):
    folder = tmp_path / "scenarios"
    folder.mkdir()
    good = next(p for p in sorted((Path(__file__).parents[1] / "conformance" / "catalog").glob("01-*.yaml")))
    (folder / "a-good.yaml").write_text(good.read_text())
    (folder / "b-bad.yaml").write_text("name: bad\nevents:\n\t- message: alice\n")
    out = tmp_path / "report"
    assert main(["run", str(folder), "--report", str(out)]) == 1
    printed = capsys.readouterr()
    assert printed.out.splitlines()[-1] == "1 scenario, 1 passed, 0 failed, 1 file not loaded"
    assert "b-bad.yaml:3" in printed.err
    suite = ET.parse(out / "junit.xml").getroot().find("testsuite")
    assert suite is not None and suite.get("errors") == "1" and suite.get("tests") == "10"
    case = suite.find("testcase[@name='load']")
    assert case is not None and case.get("classname", "").endswith("b-bad.yaml")
    error = case.find("error")
    assert error is not None and error.get("type") == "load" and "b-bad.yaml:3" in error.get("message", "")
    xmlschema = pytest.importorskip("xmlschema")
    xmlschema.XMLSchema(str(XSD)).validate(str(out / "junit.xml"))
    unloaded = json.loads((out / "summary.json").read_text())["unloaded"]
    assert [(u["file"].endswith("b-bad.yaml"), u["line"]) for u in unloaded] == [(True, 3)]
    assert "1 scenario file not loaded" in (out / "report.html").read_text()
    before = {p: p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}
    assert main(["report", str(out)]) == 1  # re-rendered from the logs, the file is still reported
    assert capsys.readouterr().out.splitlines()[-1] == "1 scenario, 1 passed, 0 failed, 1 file not loaded"
    assert {p: p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()} == before


def test_rerendering_from_another_folder_keeps_the_recorded_file_names(tmp_path, monkeypatch):
    outside, inside = tmp_path / "elsewhere", tmp_path / "project"
    outside.mkdir()
    (inside / "scenarios").mkdir(parents=True)
    source = inside / "scenarios" / "one.yaml"
    source.write_text(next((Path(__file__).parents[1] / "conformance" / "catalog").glob("01-*.yaml")).read_text())
    monkeypatch.chdir(outside)  # the run names the file by its absolute path: it is not under here
    assert main(["run", str(source), "--report", str(tmp_path / "r")]) == 0
    before = {p.relative_to(tmp_path / "r"): p.read_bytes() for p in sorted((tmp_path / "r").rglob("*")) if p.is_file()}
    assert str(source) in json.loads(before[Path("summary.json")])["scenarios"][0]["file"]
    monkeypatch.chdir(inside)  # from here the same file would read scenarios/one.yaml
    assert main(["report", str(tmp_path / "r")]) == 0
    after = {p.relative_to(tmp_path / "r"): p.read_bytes() for p in sorted((tmp_path / "r").rglob("*")) if p.is_file()}
    assert after == before


def test_catalog_scenarios_are_named_catalog_relative_wherever_the_run_is(tmp_path, monkeypatch):
    """Two machines (or two working folders) give the same report: not the install path."""
    from conformance.harness.suite import CATALOG
    from reports.rundir import display_path

    path = str(CATALOG / "01-idle-expiry-end-and-finalize.yaml")
    assert display_path(path) == "catalog/01-idle-expiry-end-and-finalize.yaml"
    monkeypatch.chdir(tmp_path)
    assert display_path(path) == "catalog/01-idle-expiry-end-and-finalize.yaml"


def test_junit_parses_with_a_control_character_in_a_name_and_says_how_to_reproduce(tmp_path, monkeypatch):
    monkeypatch.delenv("PYTHONPATH", raising=False)  # else the reproduce line starts with it (conformance.harness.shell)
    import dataclasses
    import xml.etree.ElementTree as ET

    from conformance.harness.runner import run_scenario
    from conformance.harness.suite import CATALOG
    from reference_impl.variants import make
    from sim.loader import load_file

    scenario = dataclasses.replace(load_file(CATALOG / "27-sigterm-turns-in-flight.yaml"), name="bad\x01name")
    result = run_scenario(scenario, make("shutdown-ends-sessions"), "reference:shutdown-ends-sessions")
    reports.write_all([result], str(tmp_path), "reference:shutdown-ends-sessions")
    root = ET.parse(tmp_path / "junit.xml").getroot()  # raised 'not well-formed' before
    failing = [c for c in root.iter("testcase") if c.find("failure") is not None]
    assert failing and all(c.get("classname") == "bad\\x01name" for c in failing)
    assert {c.findtext("system-out") for c in failing} == {
        "reproduce: sessiongate replay catalog/27-sigterm-turns-in-flight.yaml --gateway reference:shutdown-ends-sessions"}


def test_the_html_report_puts_failures_first_and_each_timeline_owns_its_ids(tmp_path, monkeypatch):
    monkeypatch.delenv("PYTHONPATH", raising=False)  # else the reproduce line starts with it (conformance.harness.shell)
    import re as re_

    from conformance.harness.runner import run_scenario
    from conformance.harness.suite import catalog_paths
    from reference_impl.variants import make
    from sim.loader import load_file

    paths = [p for p in catalog_paths() if p.stem in ("01-idle-expiry-end-and-finalize", "27-sigterm-turns-in-flight",
                                                         "07-batch-flush-at-shutdown")]
    results = [run_scenario(load_file(p), make("shutdown-ends-sessions"), "reference:shutdown-ends-sessions") for p in paths]
    assert [r.passed for r in results] == [True, False, False]
    reports.write_all(results, str(tmp_path), "reference:shutdown-ends-sessions")
    page = (tmp_path / "report.html").read_text(encoding="utf-8")
    table = page[page.index("<table>"):page.index("</table>")]
    assert table.index("27-sigterm") < table.index("01-idle")  # failing first
    ids = re_.findall(r' id="([^"]+)"', page)
    assert len(ids) == len(set(ids)), "an element id repeats"
    assert page.count('fill="url(#s-27-sigterm-turns-in-flight-down)"') >= 1
    assert "reproduce: <code>sessiongate replay catalog/27-sigterm-turns-in-flight.yaml --gateway " in page
    assert re_.search(r'records <a href="logs/27-sigterm-turns-in-flight\.jsonl" title="line \d+ of', page)


def test_coverage_of_code_the_gateway_never_imported_says_so_in_one_line(capsys, recwarn):
    """`coverage --code mygw` without `--gateway` runs the reference, which never imports mygw:
    one line saying so and what to do, not coverage.py's two warnings around it."""
    path = str(scenario("01-idle-expiry").source)
    assert main(["coverage", path, "--code", "wave"]) == 1  # a real module the reference never imports
    err = capsys.readouterr().err
    assert err == "sessiongate: error: no code of wave ran (gateway reference never imported it; name yours with --gateway)\n"
    assert [str(w.message) for w in recwarn if type(w.message).__name__ == "CoverageWarning"] == []


def test_a_report_says_whether_crashes_were_played_or_real_and_keeps_it_on_re_render(tmp_path: Path) -> None:
    """Not in the log (its bytes are the same either way), so in the index: `summary.json`,
    `junit.xml` (a `crashes` property) and `report.html` (the note) have it from the run and
    again from `sessiongate report`."""
    from conformance.cli import main

    crash = str(ROOT / "conformance" / "catalog" / "29-crash-then-restart.yaml")
    quiet = str(ROOT / "conformance" / "catalog" / "01-idle-expiry-end-and-finalize.yaml")
    for how, args in (("played", []), ("real", ["--isolate"])):
        out = tmp_path / how
        assert main(["run", "-q", crash, quiet, "--report", str(out), *args]) == 0
        summary = json.loads((out / "summary.json").read_text())
        assert [s.get("crashes") for s in summary["scenarios"]] == [how, None]
        assert summary["totals"].get("played_crashes") == (1 if how == "played" else None)
        junit = ET.fromstring((out / "junit.xml").read_text())
        said = {c.get("classname"): {p.get("value") for p in c.iter("property") if p.get("name") == "crashes"}
                for c in junit.iter("testcase")}
        assert said == {"29-crash-then-restart": {how}, "01-idle-expiry-end-and-finalize": set()}
        html = (out / "report.html").read_text()
        assert ("note: 1 of 2 scenarios crash the gateway by its own crash() call" in html) == (how == "played")
        before = {name: (out / name).read_bytes() for name in ("summary.json", "junit.xml", "report.html")}
        assert main(["report", str(out)]) == 0
        assert {name: (out / name).read_bytes() for name in before} == before


def test_an_index_with_a_bad_crashes_field_is_named(tmp_path: Path) -> None:
    from conformance.cli import main
    from reports.rundir import RunDirError, load

    out = tmp_path / "run"
    assert main(["run", "-q", str(ROOT / "conformance" / "catalog" / "29-crash-then-restart.yaml"), "--report", str(out)]) == 0
    index = out / "logs" / "index.json"
    data = json.loads(index.read_text())
    data["runs"][0]["crashes"] = "pretended"
    index.write_text(json.dumps(data))
    with pytest.raises(RunDirError, match=r"index\.json: runs\[0\]\.crashes: 'pretended' is not 'played' or 'real'"):
        load(out)
