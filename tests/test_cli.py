"""The command line: argument errors exit 2 with a usage line; a bad scenario file is reported
(file:line: field: message) while the good ones run; SIGINT / SIGTERM mid-run exit 130 / 143 and
keep what finished in the report."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from conformance.cli import main
from conformance.harness.suite import catalog_paths

ROOT = Path(__file__).resolve().parent.parent
CATALOG = catalog_paths()
GOOD = CATALOG[0]


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """Exit code, stdout, stderr of `sessiongate ARGS`, in this process."""
    try:
        code = main(list(args))
    except SystemExit as stop:  # argparse's own errors
        code = int(stop.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


ARGUMENT_ERRORS = {
    "no-subcommand": ((), "the following arguments are required: command"),
    "unknown-subcommand": (("bogus",), "invalid choice: 'bogus'"),
    "unknown-flag": (("run", "--bogus"), "unrecognized arguments: --bogus"),
    "step-timeout-not-a-number": (("run", "--step-timeout", "soon"), "expected seconds like '10' or '2.5s', got 'soon'"),
    "step-timeout-zero": (("run", "--step-timeout", "0"), "expected a positive number of seconds, got '0'"),
    "memory-not-a-number": (("run", "--memory-mb", "lots"), "expected a whole number of megabytes, got 'lots'"),
    "memory-negative": (("run", "--memory-mb", "-5"), "expected a positive number of megabytes, got '-5'"),
    "unknown-gateway": (("run", "--gateway", "nope"), "unknown gateway 'nope'"),
    "unimportable-gateway": (("run", "--gateway", "no.such.module:make"), "cannot import 'no.such.module'"),
    "unknown-selftest": (("run", "--gateway", "selftest:sleepy"), "unknown self-test 'sleepy'"),
    "exec-without-command": (("run", "--gateway", "exec:"), "exec: needs a command"),
    "missing-scenario": (("run", "/nonexistent/s.yaml"), "/nonexistent/s.yaml: no such file or directory"),
    "missing-among-good": (("run", str(GOOD), "/nonexistent/s.yaml"), "/nonexistent/s.yaml: no such file or directory"),
    "missing-expectations": (("run", "--expectations", "/nonexistent/x.txt", str(GOOD)), "/nonexistent/x.txt: expectations file not found"),
    "replay-without-file": (("replay",), "replay takes one scenario: a FILE (or catalog name), or --seed N"),
}


@pytest.mark.parametrize("case", ARGUMENT_ERRORS)
def test_argument_errors_exit_2_with_a_usage_line(capsys: pytest.CaptureFixture[str], case: str) -> None:
    args, message = ARGUMENT_ERRORS[case]
    code, out, err = cli(capsys, *args)
    assert code == 2
    assert out == ""  # nothing ran
    lines = err.splitlines()
    assert lines[0].startswith("usage: sessiongate")
    assert re.match(r"sessiongate( \w+)?: error: ", lines[-1]), lines[-1]
    assert message in lines[-1]


def test_the_installed_entry_point_exits_2_too() -> None:
    done = subprocess.run([sys.executable, "-m", "conformance.cli", "run", "--step-timeout", "x"],
                          capture_output=True, text=True, cwd=ROOT, timeout=60, check=False)
    assert done.returncode == 2
    assert done.stderr.startswith("usage: sessiongate run")


def test_a_malformed_file_is_reported_and_the_good_ones_still_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = GOOD.read_text(encoding="utf-8")
    (tmp_path / "a-good.yaml").write_text(text, encoding="utf-8")
    (tmp_path / "b-bad.yaml").write_text(text.replace("mode: idle", "mode: weekly"), encoding="utf-8")
    (tmp_path / "c-broken.yaml").write_text("name: c\nevents: [\n", encoding="utf-8")
    (tmp_path / "d-good.json").write_text(json.dumps({"name": "d-good", "events": [{"message": "alice"}],
                                                       "chats": {"alice": {}}}), encoding="utf-8")
    code, out, err = cli(capsys, "run", str(tmp_path))
    assert code == 1
    errors = err.splitlines()
    assert errors[0] == f"error {tmp_path}/b-bad.yaml:8: config.reset.mode: expected one of idle, daily, both, none, got 'weekly'"
    assert re.match(rf"error {re.escape(str(tmp_path))}/c-broken\.yaml:\d+: ", errors[1]), errors[1]
    assert len(errors) == 2
    assert out.splitlines() == [f"pass  {GOOD.stem}", "pass  d-good (I5 vacuous)",
                               "2 scenarios, 2 passed, 0 failed, 2 files not loaded; 1 check vacuous (examined nothing)"]


def test_only_malformed_files_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "bad.yaml").write_text("name: bad\nevents: 7\n", encoding="utf-8")
    code, out, err = cli(capsys, "run", str(tmp_path / "bad.yaml"))
    assert code == 2
    assert err.startswith(f"error {tmp_path}/bad.yaml:")
    assert out == ""


# -- interrupted runs ------------------------------------------------------------------------


def _sigint_default() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)  # so the child's Python installs its Ctrl-C handler


def _interrupted(args: list[str], signum: int, lines: int) -> tuple[int, list[str], str, str]:
    """`sessiongate ARGS` in a child, sent `signum` once it printed `lines` lines: its exit code,
    those lines, the rest of its stdout, and its stderr."""
    child = subprocess.Popen([sys.executable, "-m", "conformance.cli", *args], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, cwd=ROOT,
                             preexec_fn=_sigint_default)  # a job started in the background inherits SIGINT ignored
    try:
        assert child.stdout is not None
        printed = [child.stdout.readline() for _ in range(lines)]
        child.send_signal(signum)
        rest, err = child.communicate(timeout=120)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    return child.returncode, printed, rest, err


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)], ids=["SIGINT", "SIGTERM"])
def test_an_interrupted_run_exits_and_keeps_what_finished(tmp_path: Path, signum: int, code: int) -> None:
    report = tmp_path / "report"
    returncode, printed, rest, err = _interrupted(["run", "--isolate", "--report", str(report)], signum, lines=2)
    assert returncode == code, err  # two scenarios were done, many to go
    lines = printed + rest.splitlines(keepends=True)
    summary = re.fullmatch(r"(\d+) scenarios, (\d+) passed, 0 failed \(interrupted\)\n", lines[-1])
    assert summary, lines[-1]
    finished = int(summary.group(1))
    assert 2 <= finished < len(CATALOG)
    assert lines[-2] == f"report written to {report}\n"
    assert [line.split()[-1] for line in lines[:-2]] == [p.stem for p in CATALOG[: len(lines) - 2]]
    names = [s["name"] for s in json.loads((report / "summary.json").read_text(encoding="utf-8"))["scenarios"]]
    assert names == [p.stem for p in CATALOG[:finished]]
    assert len(lines) - 2 in (finished, finished - 1)  # the signal may land between a result and its line


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)], ids=["SIGINT", "SIGTERM"])
def test_an_interrupted_zoo_exits_and_reports_what_finished(tmp_path: Path, signum: int, code: int) -> None:
    """As run does: 143 on SIGTERM (it was 130), and the report of every run that finished (there was none)."""
    report = tmp_path / "report"
    returncode, (first,), rest, err = _interrupted(["zoo", "--report", str(report)], signum, lines=1)
    assert returncode == code, err
    assert first.startswith("caught     "), first  # the reference and one variant done
    lines = rest.splitlines()
    finished = re.fullmatch(r"(\d+) runs of (\d+) finished \(interrupted\)", lines[-1])
    assert finished, lines[-1]
    assert lines[-2] == f"report written to {report}"
    runs = json.loads((report / "summary.json").read_text(encoding="utf-8"))["scenarios"]
    assert len(runs) == int(finished.group(1)) >= 2 * len(CATALOG)


def test_replay_takes_a_generated_seed_and_writes_nothing(tmp_path, monkeypatch, capsys) -> None:
    """The pytest plugin's `reproduce:` line for a seed: its timeline and verdicts, no fuzz run
    (which would write a summary and add to the failure database)."""
    monkeypatch.chdir(tmp_path)
    assert main(["replay", "--seed", "0", "--gateway", "reference:idle-expiry-no-finalize"]) == 1
    out = capsys.readouterr().out.splitlines()
    assert "fail  gen-0" in out and any(line.startswith("      I1 session") for line in out), out[-5:]
    assert main(["replay", "--seed", "1", "--profile", "small"]) == 0
    assert capsys.readouterr().out.splitlines()[-1].startswith("pass  gen-1")
    assert list(tmp_path.iterdir()) == []


def test_run_warns_of_two_files_of_one_scenario_name(tmp_path, capsys) -> None:
    source = Path(__file__).parent.parent / "conformance" / "catalog" / "05-none-session-reaped.yaml"
    for stem in ("a", "b"):
        (tmp_path / f"{stem}.yaml").write_text(source.read_text(encoding="utf-8"), encoding="utf-8")
    assert main(["run", str(tmp_path), "-q"]) == 0
    assert capsys.readouterr().err.splitlines() == [
        f"warning: {tmp_path / 'a.yaml'}, {tmp_path / 'b.yaml'} share the name '05-none-session-reaped' "
        "(the report tells them apart as NAME, NAME~2, …)"]


def test_run_and_replay_take_a_catalog_scenarios_name(tmp_path, monkeypatch, capsys) -> None:
    """As a report names it (`catalog/NAME.yaml`), or bare, from any folder."""
    monkeypatch.chdir(tmp_path)
    assert main(["replay", "12-heal-fk-row-present"]) == 0
    assert capsys.readouterr().out.splitlines()[-1].startswith("pass  12-heal-fk-row-present")
    assert main(["run", "catalog/45-every-message-answered.yaml", "01-idle-expiry-end-and-finalize.yaml", "-q"]) == 0
    assert capsys.readouterr().out.splitlines()[-1].startswith("2 scenarios, 2 passed, 0 failed")
