"""What `run` and `replay` print says what happened, in words a new user reads right: a failed
start-up is not blamed on `profile`, a dead child's stderr is quoted where it says why, `(+N
more)` says where the rest are, an unexpected pass reads as one, and events skipped as
unsupported are not silent."""

from __future__ import annotations

import shlex
import shutil
import sys
from pathlib import Path

import pytest

from conformance.cli import main
from conformance.harness.registry import resolve
from conformance.harness.runner import RunResult, run_scenario
from conformance.harness.suite import CATALOG, Expectations, run_all
from conformance.transport import exec_gateway
from conformance.transport.exec_gateway import ExecGateway
from reports.rundir import expected_failures
from sim.loader import load_file

FIRST = CATALOG / "01-idle-expiry-end-and-finalize.yaml"
SECOND = CATALOG / "02-expiry-after-idle-sweep.yaml"
DELEGATES = [CATALOG / "12-heal-fk-row-present.yaml", CATALOG / "13-heal-parent-cascade.yaml"]


def child(tmp_path: Path, body: str) -> list[str]:
    """A child process running `body` (Python), as an exec gateway's argv."""
    script = tmp_path / "child.py"
    script.write_text("import json, sys\n" + body, encoding="utf-8")
    return [sys.executable, str(script)]


def run(argv: list[str], step_timeout: float = 5.0) -> RunResult:
    return run_scenario(load_file(FIRST), ExecGateway(argv, step_timeout=step_timeout), "child")


# -- 1. the start-up handshake is named ---------------------------------------------------------


def test_a_wrong_hello_answer_is_named_the_start_up_handshake(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = child(tmp_path, 'sys.stdin.readline()\nprint(json.dumps({"done": True, "value": 1}), flush=True)\n')
    assert main(["run", str(FIRST), "--gateway", f"exec:{shlex.join(argv)}"]) == 1
    assert capsys.readouterr().out.splitlines()[1] == (
        f"      gateway error at start (profile): start-up handshake: {shlex.join(argv)} does not speak protocol version 2 (or 1): "
        'it answered hello with 1, not an object like {"version": 2}')


def test_no_answer_to_hello_is_named_the_start_up_handshake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(exec_gateway, "STARTUP_TIMEOUT", 0.5)
    result = run(child(tmp_path, "import time\ntime.sleep(30)\n"), step_timeout=0.5)
    assert result.failure is not None
    assert (result.failure.kind, result.failure.event, result.failure.message) == (
        "timeout", "profile", "start-up handshake: no answer to hello within 0.5s (wall clock); the process was killed")


# -- 2. a dead child's stderr is quoted where it says why ---------------------------------------

NODE_MISSING_MODULE = """node:internal/modules/cjs/loader:1210
  throw err;
  ^

Error: Cannot find module '/work/gw.js'
    at Module._resolveFilename (node:internal/modules/cjs/loader:1207:15)
    at Module._load (node:internal/modules/cjs/loader:1038:27)
{
  code: 'MODULE_NOT_FOUND',
  requireStack: []
}

Node.js v20.20.2
"""

STDERR = {  # name: (what the child writes on stderr before it exits 1, what the message quotes)
    "node-banner-last": (NODE_MISSING_MODULE, "Error: Cannot find module '/work/gw.js'"),
    "python-traceback": ('Traceback (most recent call last):\n  File "/x/errors.py", line 1, in <module>\n'
                         "    raise ValueError('boom')\nValueError: boom\n", "ValueError: boom"),
    # A CI runner's long paths in the frames, and an exception whose name says no "Error".
    "python-traceback-long-paths": ('Traceback (most recent call last):\n  File "/home/runner/work/' + "x/" * 60
                                    + 'registry.py", line 112, in checked\n    raise UnknownGateway(msg)\n'
                                    "conformance.harness.registry.UnknownGateway: gateway 'm:f': its factory returned int\n",
                                    "conformance.harness.registry.UnknownGateway: gateway 'm:f': its factory returned int"),
    "go-panic": ("panic: runtime error: index out of range [3] with length 2\n\ngoroutine 1 [running]:\nmain.main()\n"
                 "\t/x/main.go:5 +0x1d\nexit status 2\n", "panic: runtime error: index out of range [3] with length 2"),
    "no-error-line": ("starting\n\nloading config\nlistening on stdin\ngiving up\n", "loading config | listening on stdin | giving up"),
    "long-error-line": ("Error: " + "x" * 1000 + "\n", "Error: " + "x" * 292 + "…"),
}


@pytest.mark.parametrize("name", STDERR)
def test_a_dead_childs_stderr_is_quoted_where_it_says_why(tmp_path: Path, name: str) -> None:
    text, quoted = STDERR[name]
    result = run(child(tmp_path, f"sys.stderr.write({text!r})\nsys.exit(1)\n"))
    assert result.failure is not None
    assert result.failure.message == f"start-up handshake: gateway process exited with status 1: {quoted}"
    assert len(quoted) <= 300


@pytest.mark.skipif(shutil.which("node") is None, reason="needs node")
def test_exec_node_of_a_missing_file_names_the_missing_module(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "nonexist.js"
    assert main(["run", str(FIRST), "--gateway", f"exec:node {missing}"]) == 1
    assert capsys.readouterr().out.splitlines()[1] == (
        f"      gateway error at start (profile): start-up handshake: gateway process exited with status 1: "
        f"Error: Cannot find module '{missing}'")


# -- 3. "(+N more)" says where the rest are -----------------------------------------------------


def test_run_says_where_more_violations_are_and_replay_lists_them(capsys: pytest.CaptureFixture[str]) -> None:
    gateway = "reference:expiry-skips-end-without-agent"
    assert main(["run", str(SECOND), "--gateway", gateway]) == 1
    run_lines = capsys.readouterr().out.splitlines()
    assert run_lines[1].startswith("      I1 session s1 reached its idle boundary at 09:32 ")
    assert run_lines[1].endswith(" (+1 more: replay or --report lists all)")
    assert main(["replay", str(SECOND), "--gateway", gateway]) == 1
    replay_lines = capsys.readouterr().out.splitlines()
    assert replay_lines[-2:] == [run_lines[1].removesuffix(" (+1 more: replay or --report lists all)"),
                                 "      I1 session s1 got on_session_finalize at 09:35 without an on_session_end"]


# -- 4. an unexpected pass reads as one ----------------------------------------------------------


def test_an_unexpected_pass_says_the_check_passed_and_which_file_says_otherwise(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    expectations = tmp_path / "mine.txt"
    expectations.write_text("01-idle-expiry-end-and-finalize I1  # bogus\n", encoding="utf-8")
    assert main(["run", str(FIRST), "--expectations", str(expectations)]) == 1
    assert capsys.readouterr().out.splitlines()[:2] == [
        "fail  01-idle-expiry-end-and-finalize", f"      {expectations}:1: I1 passed, but this line says it fails: bogus"]
    # The report recovers the expectations-file reason from the verdict, as before.
    (result,) = run_all([load_file(FIRST)], resolve("reference"), "reference",
                        Expectations.for_gateway("reference", str(expectations)))
    assert expected_failures(result) == {"I1": "bogus"}


# -- 5. events skipped as unsupported are not silent -------------------------------------------

NO_DELEGATE = '''
from dataclasses import replace

from reference_impl import ReferenceGateway


class NoDelegate(ReferenceGateway):
    def profile(self, config):
        return replace(super().profile(config), unsupported=frozenset({"delegate"}))
'''

DOWN_TWICE = """name: sigterm-twice
config: {reset: {mode: idle, idle_minutes: 30}}
events:
  - message: alice
  - delegate: alice
    after: 1m
  - sigterm: true
    after: 1m
  - sigterm: true
    after: 1m
  - restart: true
    after: 1m
  - restart: true
    after: 1m
"""


def test_run_notes_skipped_events(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "nodelegate.py").write_text(NO_DELEGATE, encoding="utf-8")
    (tmp_path / "down-twice.yaml").write_text(DOWN_TWICE, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert main(["run", *map(str, DELEGATES), str(tmp_path / "down-twice.yaml"), "--gateway", "nodelegate:NoDelegate"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "pass  12-heal-fk-row-present (2 events skipped: delegate, unsupported) (I5 vacuous)",
        "pass  13-heal-parent-cascade (2 events skipped: delegate, unsupported) (I5 vacuous)",
        # A second sigterm or restart does nothing either: the scenario may not say what its author meant.
        "pass  sigterm-twice (3 events skipped: delegate, unsupported; sigterm while down; restart while running)",
        "3 scenarios, 3 passed, 0 failed; 2 checks vacuous (examined nothing); "
        "3 passes skipped events the gateway declares it lacks (delegate 5)",
    ]


DECLARES_LAZY = '''
from dataclasses import replace

from reference_impl import ReferenceGateway


class DeclaresLazy(ReferenceGateway):
    """The reference, declaring lazy finalization whatever the scenario's config says."""

    def profile(self, config):
        return replace(super().profile(config), finalization="lazy")
'''


def test_run_counts_passes_judged_lazily_where_the_scenario_has_a_watcher(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """Declaring `lazy` is honest for a gateway with no watcher, and holds it to the lazy rules
    (an end owed only by the chat's next message): a pass of a scenario with a watcher then
    says less than its `pass` (the audit of lazy gateways: `stop-notices-nothing` went from one
    failure to none so). The last line counts such passes; a lazy scenario is not one."""
    (tmp_path / "lazygw.py").write_text(DECLARES_LAZY, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    paths = [CATALOG / "01-idle-expiry-end-and-finalize.yaml", CATALOG / "35-lazy-mode.yaml"]
    assert main(["run", *map(str, paths), "--gateway", "lazygw:DeclaresLazy"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == (
        "2 scenarios, 2 passed, 0 failed; 1 pass judged lazily (the gateway declares no watcher where the scenario has one)")
    assert main(["run", *map(str, paths)]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "2 scenarios, 2 passed, 0 failed"


# -- replay: runs of alike records, `until` as a time, a reader that leaves --------------------

NOISY = '''
from reference_impl import ReferenceGateway


class Noisy(ReferenceGateway):
    """Notes a retry five times per message, as a gateway retrying a heal would."""

    def deliver_message(self, message):
        for _ in range(5):
            self.h.note("retry", session="s1")
        super().deliver_message(message)
'''


def test_replay_folds_a_run_of_alike_records_and_reads_until_as_a_time(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "noisy.py").write_text(NOISY, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    main(["replay", str(FIRST), "--gateway", "noisy:Noisy"])
    lines = capsys.readouterr().out.splitlines()
    at = lines.index("    09:00  #1   note                session=s1  what=retry")
    assert lines[at + 1] == "           … 4 more alike, the last at 09:00"
    main(["replay", str(CATALOG / "15-heal-locked-retry.yaml")])
    assert "    09:02  #4   db_locked             until=09:02:10" in capsys.readouterr().out.splitlines()


@pytest.mark.parametrize("args", [["replay"], ["replay", "--jsonl"]], ids=["timeline", "jsonl"])
def test_replay_into_a_reader_that_leaves_is_quiet(args: list[str], monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    import os

    read, write = os.pipe()
    os.close(read)  # the reader left before the first line, like `| head -0`
    with capsys.disabled(), open(write, "w", encoding="utf-8") as gone:
        monkeypatch.setattr(sys, "stdout", gone)
        assert main([*args, str(FIRST)]) == 141  # and no BrokenPipeError
        monkeypatch.undo()


def test_the_table_marks_a_vacuous_check_and_the_last_line_tells_timeouts_from_errors(
        capsys: pytest.CaptureFixture[str]) -> None:
    """A vacuous check showed as `.`, a pass; two timeouts were counted as "2 gateway errors"."""
    from dataclasses import replace

    from conformance.cli.lines import summary_line
    from conformance.harness.verdict import GatewayFailure
    from reference_impl import ReferenceGateway

    assert main(["run", "--table", str(CATALOG / "05-none-session-reaped.yaml")]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[-3].split()[1:] == [".", ".", ".", ".", "v", ".", ".", ".", "."]
    assert "v pass that examined nothing" in out[-2]
    result = next(run_all([load_file(CATALOG / "05-none-session-reaped.yaml")], ReferenceGateway, "reference"))
    broken = [replace(result, failure=GatewayFailure(kind, 3, "tick", "x")) for kind in ("error", "timeout", "timeout")]
    assert summary_line(broken).startswith("3 scenarios, 0 passed, 3 failed (1 gateway error, 2 timeouts);")
    assert summary_line(broken[1:]).startswith("2 scenarios, 0 passed, 2 failed (2 timeouts);")
