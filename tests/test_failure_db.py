"""The failure database (issue #24): fuzz saves each distinct failure; run, fuzz and the pytest
plugin replay a gateway's saved failures first, and forget one when it passes; off by flag."""

from __future__ import annotations

from pathlib import Path

import pytest

# Here, not first inside a pytester run, which drops what it imports: yaml imported again made
# nodes of its first classes (its C loader keeps them), "unsupported YAML node MappingNode" next.
import yaml  # noqa: F401

from conformance.cli import main

BUGGY = "reference:never-replies"

pytest_plugins = ["pytester"]


@pytest.fixture
def db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "db"
    monkeypatch.setenv("SESSIONGATE_FAILURE_DB", str(folder))
    return folder


def test_fuzz_saves_one_file_per_distinct_failure(db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["fuzz", "--seeds", "0:4", "--gateway", BUGGY, "--out", str(tmp_path / "out")]) == 1
    out = capsys.readouterr().out
    shrunk = sorted(line.split(": ")[-1].split("/")[-1] for line in out.splitlines() if line.startswith("     shrunk "))
    distinct = int(out.splitlines()[-1].rpartition("; ")[2].split()[0])
    kept = sorted(p.name for p in (db / "reference-never-replies").iterdir())  # a failure that shrank to an earlier kind is not kept
    assert shrunk and set(kept) <= set(shrunk) and len(kept) == distinct
    shrunk = kept
    for saved in (db / "reference-never-replies").iterdir():  # its reproduce line names the copy, not --out's file
        assert f"# reproduce: sessiongate run {saved} --gateway {BUGGY}\n" in saved.read_text(), saved.read_text()
    # said where, so that the next run's "replaying N saved failures first" is no surprise
    assert (f"saved {len(shrunk)} failure{'s' if len(shrunk) != 1 else ''} in {db / 'reference-never-replies'}: run, fuzz "
            "and the pytest plugin replay") in out


def test_run_replays_saved_failures_first_until_they_pass(db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["fuzz", "--seeds", "0:1", "--gateway", BUGGY, "--out", str(tmp_path / "out")]) == 1
    saved = db / "reference-never-replies" / "gen-0.shrunk.yaml"
    assert saved.is_file()
    capsys.readouterr()
    first = str(Path(__file__).parent.parent / "conformance" / "catalog" / "05-none-session-reaped.yaml")
    assert main(["run", "--gateway", BUGGY, first]) == 1  # still failing: it stays
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"replaying 1 saved failure first ({db / 'reference-never-replies'}; --no-failure-db skips them)"
    assert lines[1].startswith("fail  gen-0-shrunk")
    assert lines[-1].startswith("2 scenarios, 0 passed, 2 failed")
    assert saved.is_file()
    assert main(["run", "--gateway", BUGGY, first, "--no-failure-db"]) == 1
    assert capsys.readouterr().out.splitlines()[-1].startswith("1 scenario, 0 passed, 1 failed")
    # the bug fixed: the reference is never-replies without the bug; its own database is another folder
    (db / "reference").mkdir()
    saved.rename(db / "reference" / saved.name)
    assert main(["run", "--gateway", "reference", first]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1:3] == ["pass  gen-0-shrunk", f"      gen-0-shrunk passes now: removed from {db / 'reference'}"]
    assert lines[-1].startswith("2 scenarios, 2 passed, 0 failed")
    assert not (db / "reference").exists()


def test_running_the_file_a_failure_was_saved_as_runs_it_once(db: Path, tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    """A shrunk file's `# reproduce:` line runs it: its saved copy is not replayed beside it
    (it ran twice: `2 scenarios, 0 passed, 2 failed` for one file)."""
    assert main(["fuzz", "--seeds", "0:1", "--gateway", BUGGY, "--out", str(tmp_path / "out")]) == 1
    capsys.readouterr()
    assert main(["run", "--gateway", BUGGY, str(tmp_path / "out" / "gen-0.shrunk.yaml")]) == 1
    captured = capsys.readouterr()
    assert "replaying" not in captured.out and captured.err == ""
    assert captured.out.splitlines()[-1].startswith("1 scenario, 0 passed, 1 failed")


def test_update_expectations_covers_the_saved_failures_run_replays(db: Path, tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """Accepting what you will not fix left `run --expectations FILE` red: it replays the saved
    failures, which the file written did not list."""
    assert main(["fuzz", "--seeds", "0:1", "--gateway", BUGGY, "--out", str(tmp_path / "out")]) == 1
    first = str(Path(__file__).parent.parent / "conformance" / "catalog" / "05-none-session-reaped.yaml")
    exp = tmp_path / "exp.txt"
    assert main(["update-expectations", "--gateway", BUGGY, "--expectations", str(exp), first]) == 0
    assert any(line.startswith("gen-0-shrunk ") for line in exp.read_text().splitlines())
    capsys.readouterr()
    assert main(["run", "--gateway", BUGGY, "--expectations", str(exp), first]) == 0
    assert capsys.readouterr().out.splitlines()[-1].startswith("2 scenarios, 0 passed, 0 failed, 2 expected failures")


def test_a_fixed_saved_failure_leaves_the_database_under_an_expectations_file(db: Path, tmp_path: Path,
                                                                            capsys: pytest.CaptureFixture[str]) -> None:
    """Saved failures and an expectations file blocked each other: once `update-expectations`
    wrote lines for a saved failure, its fix was an unexpected pass, which kept it saved (only a
    run without --expectations removed it). Every check passing removes it, the line to delete
    said; once it is gone, the run warns that the line names nothing."""
    from conformance.harness.suite import line_ranges

    assert main(["fuzz", "--seeds", "0:1", "--gateway", BUGGY, "--out", str(tmp_path / "out")]) == 1
    first = str(Path(__file__).parent.parent / "conformance" / "catalog" / "05-none-session-reaped.yaml")
    exp = tmp_path / "exp.txt"
    assert main(["update-expectations", "--gateway", BUGGY, "--expectations", str(exp), first]) == 0
    numbers = [n for n, line in enumerate(exp.read_text().splitlines(), start=1) if line.startswith("gen-0-shrunk ")]
    assert numbers
    saved = db / "reference-never-replies" / "gen-0.shrunk.yaml"
    (db / "reference").mkdir()
    saved.rename(db / "reference" / saved.name)  # the bug fixed (as above)
    capsys.readouterr()
    assert main(["run", "--gateway", "reference", "--expectations", str(exp), first]) == 1  # the lines are xpasses
    out = capsys.readouterr().out.splitlines()
    assert out[1] == "fail  gen-0-shrunk"
    assert out[2].startswith(f"      {exp}:{numbers[0]}: ") and " passed, but this line says it fails: " in out[2]
    where = (f"{exp}:{numbers[0]} expects it to fail: delete that line" if len(numbers) == 1 else
             f"{exp} lines {line_ranges(numbers)} expect it to fail: delete them")
    assert f"      gen-0-shrunk passes now: removed from {db / 'reference'}; {where}" in out
    assert not (db / "reference").exists()
    assert main(["run", "--gateway", "reference", "--expectations", str(exp), first]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err == [f"warning: {exp}:{numbers[0]}: names 'gen-0-shrunk', which is no saved failure in {db / 'reference'} "
                   "nor a scenario of this run (a saved failure that passed was removed): " +
                   (f"its lines {line_ranges(numbers)} expect nothing; delete them" if len(numbers) > 1 else
                    "the line expects nothing; delete it")]
    assert main(["run", "--gateway", "reference", "--expectations", str(exp), "--no-failure-db", first]) == 1
    assert "warning" not in capsys.readouterr().err  # saved failures not run: nothing to tell


def test_fuzz_replays_saved_failures_before_its_seeds(db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["fuzz", "--seeds", "0:1", "--gateway", BUGGY, "--out", str(tmp_path / "out"), "--no-shrink"]) == 1
    capsys.readouterr()
    assert main(["fuzz", "--seeds", "5:6", "--gateway", "reference", "--out", str(tmp_path / "out2")]) == 0  # another gateway's
    assert "saved failure" not in capsys.readouterr().out
    code = main(["fuzz", "--seeds", "5:6", "--gateway", BUGGY, "--out", str(tmp_path / "out3"), "--no-shrink"])
    out = capsys.readouterr().out.splitlines()
    assert code == 1
    assert out[0].startswith("replaying 1 saved failure first (")
    assert out[1].startswith("fail  gen-0")
    assert "1 saved failure still failing" in out


def test_off_by_environment_or_flag(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SESSIONGATE_FAILURE_DB")
    assert main(["fuzz", "--seeds", "0:1", "--gateway", BUGGY, "--out", "out", "--no-shrink", "--no-failure-db"]) == 1
    assert not (tmp_path / ".sessiongate").exists()
    assert main(["fuzz", "--seeds", "0:1", "--gateway", BUGGY, "--out", "out", "--no-shrink"]) == 1
    assert (tmp_path / ".sessiongate" / "failures" / "reference-never-replies" / "gen-0.yaml").is_file()
    monkeypatch.setenv("SESSIONGATE_FAILURE_DB", "off")
    capsys.readouterr()
    assert main(["run", "--gateway", BUGGY, "--no-failure-db", str(tmp_path / "out" / "gen-0.yaml")]) == 1
    assert "saved failure" not in capsys.readouterr().out


def test_the_plugin_runs_saved_failures_first(db: Path, tmp_path: Path, pytester: pytest.Pytester) -> None:
    assert main(["fuzz", "--seeds", "0:1", "--gateway", BUGGY, "--out", str(tmp_path / "out"), "--no-shrink"]) == 1
    result = pytester.runpytest_inprocess("-p", "no:xdist", "-p", "no:cacheprovider", "--sessiongate-gateway", BUGGY,
                                          "--no-sessiongate-catalog", "--co", "-q")
    assert f"sessiongate[{BUGGY}]::saved/gen-0" in result.stdout.lines
    result = pytester.runpytest_inprocess("-p", "no:xdist", "-p", "no:cacheprovider", "--sessiongate-gateway", BUGGY,
                                          "--no-sessiongate-catalog", "--sessiongate-no-failure-db", "--co", "-q")
    assert not any("saved/" in line for line in result.stdout.lines)


def test_the_plugin_removes_a_fixed_saved_failure_under_an_expectations_file(db: Path, tmp_path: Path,
                                                                             pytester: pytest.Pytester) -> None:
    """As `run` does: every check passing removes it, though the file's lines make it an xpass."""
    assert main(["fuzz", "--seeds", "0:1", "--gateway", BUGGY, "--out", str(tmp_path / "out"), "--no-shrink"]) == 1
    exp = tmp_path / "exp.txt"
    assert main(["update-expectations", "--gateway", BUGGY, "--expectations", str(exp), "--no-failure-db",
                 str(tmp_path / "out" / "gen-0.yaml")]) == 0
    (db / "reference").mkdir()
    (db / "reference-never-replies" / "gen-0.yaml").rename(db / "reference" / "gen-0.yaml")
    result = pytester.runpytest_inprocess("-p", "no:xdist", "-p", "no:cacheprovider", "--sessiongate-gateway", "reference",
                                          "--no-sessiongate-catalog", "--sessiongate-expectations", str(exp))
    result.assert_outcomes(failed=1)
    assert any(line.startswith(f"  xpass: {exp}:") for line in result.stdout.lines)
    assert not (db / "reference").exists()
    assert any(line.startswith(f"warning: {exp}:1: names 'gen-0', which is no saved failure in ") for line in result.stdout.lines)
