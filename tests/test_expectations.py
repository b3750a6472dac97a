"""Expectations files: how a gateway name finds its file, and what a file may say."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from conformance.cli import main
from conformance.harness import registry
from conformance.harness.runner import run_scenario
from conformance.harness.suite import EXPECTATIONS, Expectations, catalog_paths
from conformance.harness.verdict import Violation
from reference_impl.variants import make
from sim.document import ScenarioError
from sim.loader import load_file


def test_a_plain_name_is_its_own_stem() -> None:
    assert registry.expectation_names("reference") == ["reference"]
    assert registry.expectation_names("reference:batch-lost-on-shutdown") == ["reference-batch-lost-on-shutdown"]


def test_a_factory_may_name_its_files(monkeypatch: pytest.MonkeyPatch) -> None:
    def factory(arg: str = "") -> None:
        raise AssertionError("not called")

    factory.expectation_names = lambda arg: [f"demo-{arg}.0", f"demo-{arg}"]  # type: ignore[attr-defined]
    monkeypatch.setattr(registry, "registered", lambda: {"demo": "demo.module:factory"})
    monkeypatch.setattr(registry, "_load", lambda target: factory)
    assert registry.expectation_names("demo:7") == ["demo-7.0", "demo-7"]


def test_the_first_stem_with_a_file_applies(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / "demo-7.txt").write_text("01-idle-expiry-end-and-finalize I1  # because\n")
    monkeypatch.setattr("conformance.harness.suite.EXPECTATIONS", tmp_path)
    monkeypatch.setattr("conformance.harness.suite.expectation_names", lambda name: ["demo-7.0", "demo-7"])
    found = Expectations.for_gateway("demo:7")
    assert found.pairs == {("01-idle-expiry-end-and-finalize", "I1"): "because"}
    monkeypatch.setattr("conformance.harness.suite.expectation_names", lambda name: ["nothing"])
    assert Expectations.for_gateway("demo:7").pairs == {}


def test_a_release_without_a_file_is_named_beside_those_with_one(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """`run` says when the adapter names the installed release's files and none exists (a
    Hermes release the catalog has no file for): its known failures would all count as new."""
    (tmp_path / "demo-6.0.txt").write_text("01-idle-expiry-end-and-finalize I1  # because\n")
    monkeypatch.setattr("conformance.harness.suite.EXPECTATIONS", tmp_path)
    monkeypatch.setattr("conformance.harness.suite.expectation_names", lambda name: ["demo-7.0", "demo-7"])
    assert Expectations.missing("demo") == (
        "note: no expectations file for demo-7.0 (looked for demo-7.0.txt, demo-7.txt; there are demo-6.0): every "
        "failure counts; to write one: sessiongate update-expectations --gateway demo --expectations FILE")
    (tmp_path / "demo-7.txt").write_text("01-idle-expiry-end-and-finalize I1  # because\n")
    assert Expectations.missing("demo") is None  # found
    monkeypatch.setattr("conformance.harness.suite.expectation_names", lambda name: ["other"])
    assert Expectations.missing("other") is None  # a plain name, no release: nothing to say
    monkeypatch.setattr("conformance.harness.suite.expectation_names", lambda name: ["reference"])
    assert Expectations.missing("reference") is None


def test_a_line_without_a_reason_is_refused() -> None:
    with pytest.raises(ScenarioError, match=r"x.txt:2: 01-a: every expected failure needs a one-line reason"):
        Expectations.parse("# header\n01-a I1\n", "x.txt")


@pytest.mark.parametrize("path", sorted(EXPECTATIONS.glob("*.txt")), ids=lambda p: p.name)
def test_every_shipped_file_names_catalog_scenarios_and_checks(path: Path) -> None:
    from conformance.harness.suite import catalog_paths
    from sim.loader import load_file

    names = {load_file(p).name for p in catalog_paths()}
    expectations = Expectations.parse(path.read_text(encoding="utf-8"), str(path))
    assert expectations.pairs or expectations.signed, f"{path.name} is empty"
    unknown = sorted(expectations.scenarios() - names)
    assert not unknown, f"{path.name} names scenarios not in the catalog: {unknown}"


def test_an_expectations_entry_naming_no_catalog_scenario_is_warned_about(tmp_path, capsys) -> None:
    from conformance.cli import main

    typo = tmp_path / "exp.txt"
    typo.write_text("01-idle-expiry-end-and-finalise I1  # the catalog spells it -finalize\n")
    assert main(["run", "-q", "--expectations", str(typo)]) == 0
    assert capsys.readouterr().err.splitlines()[-1] == (
        f"warning: {typo}:1: names no catalog scenario '01-idle-expiry-end-and-finalise' (did you mean "
        "'01-idle-expiry-end-and-finalize'?): a typo expects nothing")


def test_entries_for_an_authors_own_scenarios_are_not_called_typos(tmp_path, capsys) -> None:
    """One file for the catalog and one's own scenarios: running the catalog alone says nothing
    of entries that are no catalog name's near miss."""
    from conformance.cli import main

    shared = tmp_path / "exp.txt"
    shared.write_text("my-own-lru-case I1  # the cap commits at eviction (mygw/cache.py:evict)\n")
    assert main(["run", "-q", "--expectations", str(shared)]) == 0
    assert "warning" not in capsys.readouterr().err


# -- signed entries: expected failures keyed by what failed, not only where ------------------


SYNC = next(p for p in catalog_paths() if p.stem == "26-new-during-running-turn")  # sync-after-end fails I5 here


def _failing_i5() -> tuple[Any, Any]:
    result = run_scenario(load_file(SYNC), make("sync-after-end"), "reference:sync-after-end")
    verdict = result.verdicts["I5"]
    assert verdict.status == "fail"
    return result, verdict


def test_a_signed_entry_expects_exactly_its_violations() -> None:
    result, verdict = _failing_i5()
    signature = verdict.violations[0].signature
    assert signature.endswith("@s1") and " " not in signature
    text = f"{SYNC.stem} I5 {signature}  # syncs after the end\n"
    applied = Expectations.parse(text, "x.txt").apply(result)
    assert applied.verdicts["I5"].status == "xfail" and applied.verdicts["I5"].reason == "syncs after the end"
    assert applied.expected == {"I5": {signature: "syncs after the end"}}


def test_a_signature_names_no_weekday() -> None:
    """One bug on two days is one signature, in an expectations file as in fuzz's kinds: a
    time's weekday goes with its digits ("at Tue 04:01" and "at 04:01" read the same). Hermes's
    files had `got-on-session-finalize-tue-before-on-session-end-tue` beside the same bug
    without the days; a word that only looks like a day stays."""
    tuesday = Violation("session s1 got on_session_finalize at Tue 04:01 before its on_session_end at Tue 04:02", session="s1")
    same_day = Violation("session s1 got on_session_finalize at 04:01 before its on_session_end at 04:02", session="s1")
    assert tuesday.signature == same_day.signature == "got-on-session-finalize-before-on-session-end@s1"
    assert Violation("chat Sun got no reply; Mon said nothing").slug == "chat-sun-got-no-reply-mon-said-nothing"


def test_a_new_violation_in_an_expected_failing_check_fails() -> None:
    result, verdict = _failing_i5()
    other = Expectations.parse(f"{SYNC.stem} I5 something-else@s1  # another bug\n", "x.txt").apply(result)
    failed = other.verdicts["I5"]
    assert failed.status == "fail"
    assert failed.violations[0].message.endswith(f"[not expected: {verdict.violations[0].signature}]")


def test_a_new_violation_names_the_mistyped_entry_that_did_not_occur() -> None:
    """A signature typed a letter off (`…-agent-cap` for `…-agents-cap`) expects nothing: the new
    violation's `[not expected: …]` names the closest entry of its check and subject that did not
    occur; one of another subject, or far off, is not named."""
    result, verdict = _failing_i5()
    signature = verdict.violations[0].signature  # sync-turn-came-after-s-on-session-end@s1
    typo = signature.replace("-came-", "-come-")
    text = (f"{SYNC.stem} I5 {typo}  # syncs after the end\n{SYNC.stem} I5 {signature.replace('@s1', '@s2')}  # other session\n"
            f"{SYNC.stem} I5 something-else@s1  # another bug\n")
    failed = Expectations.parse(text, "x.txt").apply(result).verdicts["I5"]
    assert failed.status == "fail" and failed.violations[0].message.endswith(
        f"[not expected: {signature}; did you mean the entry {typo}, which did not occur?]")


def test_a_signed_violation_that_no_longer_occurs_is_an_unexpected_pass() -> None:
    result, verdict = _failing_i5()
    text = f"{SYNC.stem} I5 {verdict.violations[0].signature}  # syncs after the end\n{SYNC.stem} I5 gone@s9  # fixed since\n"
    gone = Expectations.parse(text, "x.txt").apply(result).verdicts["I5"]
    assert gone.status == "xpass" and "gone@s9 did not occur" in gone.reason


def test_lines_are_numbered_at_line_ends_alone() -> None:
    """A reason holding U+2028, NEL or a form feed is one line (`str.splitlines` made it two: the
    entry's reason cut, its rest refused as a malformed line, and every later line misnumbered)."""
    text = "01-a I1  # cut\u2028here\r\n01-b I2  # caf\x85\x0cé\n01-c I3\n"
    with pytest.raises(ScenarioError, match=r"^x\.txt:3: 01-c: every expected failure needs a one-line reason"):
        Expectations.parse(text, "x.txt")
    assert Expectations.parse(text.replace("I3\n", "I3  # r\n"), "x.txt").pairs == {
        ("01-a", "I1"): "cut\u2028here", ("01-b", "I2"): "caf\x85\x0cé", ("01-c", "I3"): "r"}


def test_a_check_listed_with_and_without_a_signature_is_refused() -> None:
    with pytest.raises(ScenarioError, match=r"x\.txt:2: 01-a: I1 is listed both with and without a signature"):
        Expectations.parse("01-a I1  # any\n01-a I1 kind@s1  # one\n", "x.txt")


def test_update_expectations_keeps_the_reasons_of_lines_written_with_weekdays() -> None:
    """A file written before signatures dropped weekdays keeps its reasons (and may-occur marks)
    through `update-expectations`: each old line is matched by subject and its slug without
    weekdays, a cut one (60 characters) by prefix. A line of another subject is not matched."""
    from dataclasses import replace

    from conformance.cli.update_expectations import expectation_lines
    from conformance.harness.verdict import Verdict

    result, _verdict = _failing_i5()
    end = "what a provider buffers is owed when the session ends or the gateway stops"
    late = Violation(f"backend 'hindsight' took [t1] only at Wed 10:11:02, after s1's on_session_end at Tue 04:00: {end}",
                     session="s1")
    early = Violation("session s2 got on_session_finalize at Tue 04:01 before its on_session_end at Tue 04:02", session="s2")
    other = Violation("session s3 got on_session_finalize at Tue 04:01 before its on_session_end at Tue 04:02", session="s3")
    result = replace(result, verdicts={"I5": Verdict("I5", "fail", (late, early, other), examined=3)})
    old = Expectations.parse(
        f"{SYNC.stem} I5 backend-hindsight-took-only-wed-after-s-on-session-end-tue-w@s1  # ships late\n"
        f"{SYNC.stem} I5 got-on-session-finalize-tue-before-on-session-end-tue@s2?  # sometimes\n"
        f"{SYNC.stem} I5 got-on-session-finalize-tue-before-on-session-end-tue@s9  # another session\n", "x.txt")
    lines, todo = expectation_lines([result], old)
    assert lines == [
        f"{SYNC.stem} I5 {late.signature}  # ships late",
        f"{SYNC.stem} I5 {early.signature}?  # sometimes",
        f"{SYNC.stem} I5 {other.signature}  # TODO: what the gateway does, and where (file:function)",
    ] and todo == 1
    assert late.signature == "backend-hindsight-took-only-after-s-on-session-end-what-provider@s1"
    failed = old.apply(result).verdicts["I5"]  # `run` with the old file says what to do
    assert failed.status == "fail" and failed.violations[0].message.endswith(
        "[not expected: backend-hindsight-took-only-after-s-on-session-end-what-provider@s1; backend-hindsight-took-only-wed-"
        "after-s-on-session-end-tue-w@s1 was written before signatures dropped weekdays: update-expectations keeps its reason]")
    assert failed.violations[2].message.endswith(f"[not expected: {other.signature}]")


def test_update_expectations_rewrites_the_file_keeping_reasons(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "mine.txt"
    target.write_text(f"# my gateway\n{SYNC.stem} I5  # syncs after the end (gateway.py:complete_turn)\n", encoding="utf-8")
    args = ["update-expectations", str(SYNC), "--gateway", "reference:sync-after-end", "--expectations", str(target)]
    assert main(args) == 0
    lines = target.read_text(encoding="utf-8").splitlines()
    assert lines[0] == "# my gateway"
    mine = [line for line in lines[1:] if line.startswith(f"{SYNC.stem} I5 ")]
    assert mine and all(line.endswith("# syncs after the end (gateway.py:complete_turn)") for line in mine)
    assert all("TODO" in line for line in lines[1:] if line not in mine)  # what the old file did not say
    assert capsys.readouterr().out.startswith(f"wrote {target}: {len(lines) - 1} expected failures")
    assert main(["run", str(SYNC), "--gateway", "reference:sync-after-end", "--expectations", str(target), "-q"]) == 0


def test_update_expectations_of_a_few_scenarios_keeps_the_other_lines(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """A run of one scenario rewrites that scenario's lines only, in their place, as `wpt
    update-expectations` does: it dropped every other line of the file (the forty-ninth session,
    adding catalog 97-99 to the real gateways' files, had to write elsewhere and append)."""
    target = tmp_path / "mine.txt"
    target.write_text(f"# my gateway\n01-other I1  # kept one\n{SYNC.stem} I5  # syncs after the end (gateway.py:x)\n"
                      f"\n99-last I2 some-signature  # kept two\n", encoding="utf-8")
    assert main(["update-expectations", str(SYNC), "--gateway", "reference:sync-after-end", "--expectations",
                 str(target), "--no-failure-db"]) == 0
    lines = target.read_text(encoding="utf-8").splitlines()
    assert lines[:2] == ["# my gateway", "01-other I1  # kept one"] and lines[-1] == "99-last I2 some-signature  # kept two"
    mine = lines[2:-1]
    assert mine and all(line.startswith(f"{SYNC.stem} ") for line in mine)
    assert capsys.readouterr().out.endswith(f"({len(mine) - 1} with a TODO reason); 2 lines of scenarios not run kept as "
                                            f"they were\n")


def test_update_expectations_never_writes_into_the_installed_package(capsys: pytest.CaptureFixture[str]) -> None:
    """A gateway with no built-in expectations file must name the file to write: the default was
    sessiongate's own `conformance/expectations/` (site-packages, for an author who installed it),
    which `run` then read without the author ever seeing the file."""
    before = sorted(EXPECTATIONS.iterdir())
    assert main(["update-expectations", str(SYNC), "--gateway", "reference:sync-after-end"]) == 2
    assert sorted(EXPECTATIONS.iterdir()) == before
    err = capsys.readouterr().err
    assert "gateway reference:sync-after-end has no expectations file yet: name the file to write with --expectations FILE" in err


def test_update_expectations_writes_a_file_that_does_not_exist_yet(tmp_path: Path) -> None:
    """The first `update-expectations --expectations FILE` of a gateway creates FILE (and its
    folder); it had refused with "expectations file not found". `run` still refuses a missing one."""
    target = tmp_path / "expectations" / "mine.txt"
    args = ["update-expectations", str(SYNC), "--gateway", "reference:sync-after-end", "--expectations", str(target)]
    assert main(args) == 0
    assert f"\n{SYNC.stem} I5 sync-turn-came-after-" in target.read_text(encoding="utf-8")
    assert main(["run", str(SYNC), "--gateway", "reference:sync-after-end", "--expectations", str(target), "-q"]) == 0
    assert main(["run", str(SYNC), "--gateway", "reference:sync-after-end", "--expectations", str(tmp_path / "no.txt")]) == 2


def test_a_may_occur_entry_is_expected_present_or_absent() -> None:
    """`SIGNATURE?`: for a real gateway whose own threads make one violation come and go (iot's
    45 and 27): present it is expected, absent it is no unexpected pass; a new one still fails."""
    result, verdict = _failing_i5()
    signature = verdict.violations[0].signature
    present = Expectations.parse(f"{SYNC.stem} I5 {signature}?  # varies\n", "x.txt").apply(result)
    assert present.verdicts["I5"].status == "xfail"
    text = f"{SYNC.stem} I5 {signature}  # syncs after the end\n{SYNC.stem} I5 sometimes@s1?  # varies between runs\n"
    assert Expectations.parse(text, "x.txt").apply(_failing_i5()[0]).verdicts["I5"].status == "xfail"
    passing = run_scenario(load_file(SYNC), make("sync-after-end"), "r")
    passing.verdicts["I5"] = passing.verdicts["I5"].with_status("pass", "")
    assert Expectations.parse(f"{SYNC.stem} I5 {signature}?  # varies\n", "x.txt").apply(passing).verdicts["I5"].status == "pass"
    new = Expectations.parse(f"{SYNC.stem} I5 other@s1?  # varies\n", "x.txt").apply(_failing_i5()[0]).verdicts["I5"]
    assert new.status == "fail"


def test_update_expectations_keeps_may_occur_entries(tmp_path: Path) -> None:
    _result, verdict = _failing_i5()
    signature = verdict.violations[0].signature
    target = tmp_path / "mine.txt"
    target.write_text(f"{SYNC.stem} I5 {signature}?  # varies\n{SYNC.stem} I5 absent-today@s2?  # varies too\n",
                      encoding="utf-8")
    assert main(["update-expectations", str(SYNC), "--gateway", "reference:sync-after-end", "--expectations", str(target)]) == 0
    lines = target.read_text(encoding="utf-8").splitlines()
    assert f"{SYNC.stem} I5 {signature}?  # varies" in lines
    assert f"{SYNC.stem} I5 absent-today@s2?  # varies too" in lines


def test_every_hermes_release_tox_installs_has_its_file() -> None:
    """`tox -m hermes` runs each release against its own file: a release pinned in tox.ini with
    no file would run with none and fail on every known failure."""
    import re

    tox = (Path(__file__).parents[1] / "tox.ini").read_text(encoding="utf-8")
    pinned = re.findall(r"^\s+[\w.-]+: hermes-agent(?:-(\w+))?==([\w.]+)$", tox, re.MULTILINE)
    assert len(pinned) >= 9, pinned
    missing = [f"hermes-{fork + '-' if fork else ''}{version}.txt" for fork, version in pinned
               if not (EXPECTATIONS / f"hermes-{fork + '-' if fork else ''}{version}.txt").exists()]
    assert not missing, f"tox.ini pins releases with no expectations file: {missing}"


def test_every_openclaw_release_tox_runs_has_its_lockfile_and_file() -> None:
    """`tox -m openclaw` runs each release against its own file: a release in tox.ini's openclaw
    factors must be pinned (node/releases/<release>/) and have an expectations file, and every
    pinned release must be in tox.ini."""
    import re

    from conformance.adapters.openclaw import RELEASES

    tox = (Path(__file__).parents[1] / "tox.ini").read_text(encoding="utf-8")
    label = re.search(r"^\s+openclaw = openclaw-\{([^}]*)\}$", tox, re.MULTILINE)
    env = re.search(r"^\[testenv:openclaw-\{([^}]*)\}\]$", tox, re.MULTILINE)
    assert label and env, "tox.ini has no openclaw label or env"
    in_tox = label.group(1).split(",")
    assert sorted(in_tox) == sorted(env.group(1).split(",")), (label.group(1), env.group(1))
    assert sorted(in_tox) == sorted(RELEASES), f"tox.ini runs {in_tox}, the adapter pins {RELEASES}"
    for release in in_tox:
        assert re.search(rf"^\s+{re.escape(release)}: RELEASE = {re.escape(release)}$", tox, re.MULTILINE), release
    missing = [f"openclaw-{release}.txt" for release in in_tox if not (EXPECTATIONS / f"openclaw-{release}.txt").exists()]
    assert not missing, f"tox.ini runs OpenClaw releases with no expectations file: {missing}"


def test_update_expectations_writes_a_strict_gates_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A gate on `run --strict` fails the reference itself where a catalog scenario leaves a check
    nothing to examine (I5 at 05); the file for it had to be written by hand."""
    from conformance.cli import main

    scenario = str(next(p for p in catalog_paths() if p.stem == "05-none-session-reaped"))
    target = tmp_path / "strict.txt"
    assert main(["run", scenario, "--strict", "--no-failure-db"]) == 1
    assert main(["update-expectations", scenario, "--strict", "--expectations", str(target), "--no-failure-db"]) == 0
    assert target.read_text().startswith("05-none-session-reaped I5 examined-nothing")
    capsys.readouterr()
    assert main(["run", scenario, "--strict", "--expectations", str(target), "--no-failure-db"]) == 0


def test_expectation_messages_name_the_files_line(tmp_path, capsys) -> None:
    """An unexpected pass and a typo were placed by file only (`I1 passed, but exp.txt says it
    fails`, `exp.txt names no catalog scenario …`): each names its line, as a scenario file's
    errors do, and an xpass of a signed entry the line of the signature that did not occur."""
    from conformance.cli import main

    exp = tmp_path / "exp.txt"
    exp.write_text("# header\n\n01-idle-expiry-end-and-finalize I2 never-seen@s1  # bogus one\n"
                   "01-idle-expiry-end-and-finalize I1  # bogus two\n"
                   "02-expiry-after-idle-sweeep I1  # a typo\n", encoding="utf-8")
    first = str(EXPECTATIONS.parent / "catalog" / "01-idle-expiry-end-and-finalize.yaml")
    assert main(["run", first, "--expectations", str(exp)]) == 1
    assert capsys.readouterr().out.splitlines()[1:3] == [
        f"      {exp}:4: I1 passed, but this line says it fails: bogus two",
        f"      {exp}:3: I2 passed, but this line says it fails: bogus one"]
    assert main(["run", "-q", "--expectations", str(exp)]) == 1
    assert f"warning: {exp}:5: names no catalog scenario '02-expiry-after-idle-sweeep' (did you mean " \
           "'02-expiry-after-idle-sweep'?): a typo expects nothing" in capsys.readouterr().err.splitlines()


IDLE_END = ("session s1 reached its idle boundary at 09:30 (idle 30m after the last user message at 09:00) but got no "
            "on_session_end (owed by 09:35: eager finalization within 5m)")


def test_a_signature_ends_on_a_whole_word() -> None:
    """`update-expectations` wrote `…-last-user-message-got-no-on@s1`: a slug was cut at 60
    characters, mid-word. It runs to the end of the word in which the 60th falls (a word of the
    message: `on_session_end` is one), which keeps the old cut as its prefix."""
    end = Violation(IDLE_END, session="s1")
    assert end.signature == "reached-idle-boundary-idle-after-last-user-message-got-no-on-session-end@s1"
    assert end.signatures == (end.signature, "reached-idle-boundary-idle-after-last-user-message-got-no-on@s1")
    short = Violation("session s1 got on_session_finalize at 04:01 before its on_session_end at 04:02", session="s1")
    assert short.signatures == ("got-on-session-finalize-before-on-session-end@s1",)
    at_a_word_end = Violation(f"{'x' * 29} {'y' * 30} zzz")  # the 60th character is a separator: the cut was whole
    assert at_a_word_end.slug == at_a_word_end.cut_slug == f"{'x' * 29}-{'y' * 30}"
    assert Violation(f"got {'w' * 300}").slug == f"got-{'w' * 96}"  # one word that long: cut at 100
    for words in (["a" * 7] * 12, ["ab", "c" * 70], ["on_session_end"] * 9, ["x" * 58, "yy", "z"], ["x" * 59, "yy"]):
        violation = Violation(" ".join(words))
        old = "-".join(w.replace("_", "-") for w in words)[:60].strip("-")  # the old rule, as written in the shipped files
        assert violation.cut_slug == old and violation.slug.startswith(old)
        assert set(violation.slug.split("-")) <= {p for w in words for p in w.replace("_", "-").split("-")}


def test_a_line_written_with_a_cut_signature_still_names_its_violation_and_only_it(tmp_path: Path,
                                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """The shipped files (Hermes's, OpenClaw's) name signatures cut at 60 characters: such a line
    is matched whole against the violation's signature cut the old way, so it names what it
    named before; a prefix of a signature names nothing. update-expectations rewrites it, its
    reason kept."""
    first = catalog_paths()[0]  # 01-idle-expiry-end-and-finalize: reference:never-replies fails I1 with IDLE_END
    result = run_scenario(load_file(first), make("never-replies"), "reference:never-replies")
    assert [v.message for v in result.verdicts["I1"].violations] == [IDLE_END]
    cut = "reached-idle-boundary-idle-after-last-user-message-got-no-on@s1"
    assert Expectations.parse(f"{first.stem} I1 {cut}  # known\n", "x.txt").apply(result).verdicts["I1"].status == "xfail"
    result = run_scenario(load_file(first), make("never-replies"), "reference:never-replies")
    shorter = "reached-idle-boundary-idle-after-last-user-message-got-no@s1"
    assert Expectations.parse(f"{first.stem} I1 {shorter}  # known\n", "x.txt").apply(result).verdicts["I1"].status == "fail"
    exp = tmp_path / "exp.txt"
    exp.write_text(f"{first.stem} I1 {cut}  # never ends it (gw.py:expire)\n", encoding="utf-8")
    assert main(["update-expectations", "--gateway", "reference:never-replies", "--expectations", str(exp),
                 "--no-failure-db", str(first)]) == 0
    assert f"{first.stem} I1 reached-idle-boundary-idle-after-last-user-message-got-no-on-session-end@s1  " \
           "# never ends it (gw.py:expire)" in exp.read_text(encoding="utf-8").splitlines()


@pytest.mark.parametrize("path", sorted(EXPECTATIONS.glob("*.txt")), ids=lambda p: p.name)
def test_every_shipped_signature_was_cut_the_old_way(path: Path) -> None:
    """Each shipped signature is at most 60 characters before its `@`, as the old cut made them:
    so it is matched only as the old cut of a violation's words, exactly what it matched before."""
    expectations = Expectations.parse(path.read_text(encoding="utf-8"), str(path))
    long = [s for entries in expectations.signed.values() for s in entries if len(s.partition("@")[0]) > 60]
    assert not long
