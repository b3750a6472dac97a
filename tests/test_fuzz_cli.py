"""`sessiongate fuzz`: verdicts independent of workers and shards; failures written, reproducible."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from conformance.cli import main
from conformance.cli.args import parse_seeds, shard
from conformance.search.fuzz import in_order, seed_chunk
from sessiongate import UsageError

ROOT = Path(__file__).resolve().parents[1]
VARIANT = "reference:idle-expiry-no-finalize"  # a zoo variant that fails some of seeds 0:5 and passes others


def _fuzz(capsys: pytest.CaptureFixture[str], tmp_path: Path, *args: str) -> tuple[int, str, set[int]]:
    code = main(["fuzz", "--no-shrink", "--out", str(tmp_path / "out"), *args])
    out = capsys.readouterr().out
    failed = {int(seed) for seed in re.findall(r"^(?:FAIL|ERROR|TIMEOUT) gen-(\d+)", out, re.MULTILINE)}
    return code, out, failed


def test_reference_passes_seeds_0_to_20(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, out, failed = _fuzz(capsys, tmp_path, "--seeds", "0:20")
    assert not failed, out
    assert out.strip().splitlines()[-1] == "20 scenarios, 20 passed, 0 failed"
    assert code == 0


def test_failures_are_written_as_reproducible_files(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, out, failed = _fuzz(capsys, tmp_path, "--seeds", "0:1", "--gateway", VARIANT)
    assert code == 1 and failed == {0}
    assert out.strip().splitlines()[-1] == "1 scenario, 0 passed, 1 failed; 1 distinct failure (by first check and violation)"
    path = tmp_path / "out" / "gen-0.yaml"
    assert path.read_text().startswith(f"# generated: seed 0, profile default; gateway {VARIANT}\n# failing: I1 ")
    assert main(["run", str(path), "--gateway", VARIANT]) == 1
    assert "1 scenario, 0 passed, 1 failed" in capsys.readouterr().out
    assert main(["run", str(path)]) == 0  # the reference passes it


def test_findings_ok_counts_failures_by_check_and_exits_0(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, out, failed = _fuzz(capsys, tmp_path, "--seeds", "0:5", "--gateway", VARIANT, "--findings-ok")
    assert failed and code == 0  # failed checks are findings; only errors and timeouts would exit 1
    by_check = out.strip().splitlines()[-2]
    assert by_check == f"failing seeds by check: I1 {len(failed)}"
    assert out.strip().splitlines()[-3].startswith("note: 4 of 5 scenarios crash the gateway by its own crash() call")
    assert (tmp_path / "out" / "summary.txt").read_text().splitlines()[1:] == out.strip().splitlines()[-3:]


def refusing() -> object:
    """A gateway that says it cannot drive any config."""
    from reference_impl import ReferenceGateway

    class Refusing(ReferenceGateway):
        def start(self, config: object, harness: object) -> None:
            raise NotImplementedError("no config of this kind")

    return Refusing()


def test_findings_ok_counts_refused_seeds_apart(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("conformance.search.fuzz.factory", lambda *_: refusing)
    monkeypatch.setattr("conformance.cli.fuzz.resolve", lambda name: refusing)
    monkeypatch.setattr("conformance.cli.fuzz.factory", lambda *_: refusing)
    code, out, failed = _fuzz(capsys, tmp_path, "--seeds", "0:2", "--gateway", "refusing", "--findings-ok")
    assert not failed and code == 0
    assert re.findall(r"^refused gen-(\d+)  gateway error at step 0 \(start\): NotImplementedError: no config of this kind$",
                      out, re.MULTILINE) == ["0", "1"]
    assert not list((tmp_path / "out").glob("*.yaml"))  # not findings: nothing written
    assert out.strip().splitlines()[-2] == "failing seeds by check: none; 2 seeds refused at start (NotImplementedError)"
    assert out.strip().splitlines()[-1] == "2 scenarios, 0 passed, 0 failed, 2 refused"


def _sigterm_at_the_third_gateway(monkeypatch: pytest.MonkeyPatch) -> None:
    """fuzz's gateway factory, as `interrupting`: SIGTERM arrives while it builds the third (the
    harness's own handler raises, as for a real signal: a KeyboardInterrupt the factory raised
    itself would be that seed's gateway error, as in `run`)."""
    import signal

    from conformance.harness.errors import raise_interrupted
    from conformance.harness.registry import resolve

    made: list[int] = []

    def interrupting() -> object:
        made.append(1)
        if len(made) == 3:
            raise_interrupted(signal.SIGTERM, None)
        return resolve(VARIANT)()

    monkeypatch.setattr("conformance.search.fuzz.factory", lambda *_: interrupting)
    monkeypatch.setattr("conformance.cli.fuzz.resolve", lambda name: interrupting)
    monkeypatch.setattr("conformance.cli.fuzz.factory", lambda *_: interrupting)


def test_the_resume_line_works_pasted_where_the_run_was_made(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """A MODULE:FACTORY gateway needs the run's PYTHONPATH: the `resume:` line carries it, as a
    `reproduce:` line does (conformance.harness.shell)."""
    _sigterm_at_the_third_gateway(monkeypatch)
    monkeypatch.setenv("PYTHONPATH", "my gateways")
    code, out, _failed = _fuzz(capsys, tmp_path, "--seeds", "0:5", "--gateway", "interrupting")
    assert code == 143
    assert out.strip().splitlines()[-1] == ("resume: PYTHONPATH='my gateways' sessiongate fuzz --seeds 2:5 --gateway "
                                            f"interrupting --out {tmp_path / 'out'} --no-shrink")


def test_an_interrupted_run_reports_what_finished(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    _sigterm_at_the_third_gateway(monkeypatch)  # the third seed's gateway is never built
    code, out, failed = _fuzz(capsys, tmp_path, "--seeds", "0:5", "--gateway", "interrupting")
    assert code == 143
    *_, counts, last = out.strip().splitlines()
    distinct = "; 1 distinct failure (by first check and violation)" if failed else ""
    assert counts == f"2 scenarios, {2 - len(failed)} passed, {len(failed)} failed{distinct} (interrupted)"
    assert last == f"resume: sessiongate fuzz --seeds 2:5 --gateway interrupting --out {tmp_path / 'out'} --no-shrink"
    if failed:
        assert (tmp_path / "out" / "summary.txt").read_text().splitlines()[-2:] == [counts, last]


def test_shards_cover_the_serial_run(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert sorted([*shard(range(0, 13), "1/3"), *shard(range(0, 13), "2/3"), *shard(range(0, 13), "3/3")]) == list(range(13))
    _, _, serial = _fuzz(capsys, tmp_path, "--seeds", "0:5", "--gateway", VARIANT)
    _, first_out, first = _fuzz(capsys, tmp_path, "--seeds", "0:5", "--gateway", VARIANT, "--shard", "1/2")
    _, second_out, second = _fuzz(capsys, tmp_path, "--seeds", "0:5", "--gateway", VARIANT, "--shard", "2/2")
    assert serial and serial != set(range(5))
    assert first | second == serial and not first & second
    assert first_out.strip().splitlines()[-1].startswith("3 scenarios")  # seeds 0, 2, 4
    assert second_out.strip().splitlines()[-1].startswith("2 scenarios")  # seeds 1, 3
    assert first and second  # both shards fail somewhere, and both wrote into the same --out
    for shard_id, output in (("1/2", first_out), ("2/2", second_out)):
        lines = (tmp_path / "out" / f"summary-shard-{shard_id.replace('/', '-of-')}.txt").read_text().splitlines()
        assert lines[0] == f"gateway {VARIANT}, seeds 0:5, shard {shard_id}"
        assert lines[-1] == output.strip().splitlines()[-1]


def test_workers_do_not_change_verdicts(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    _, serial_out, serial = _fuzz(capsys, tmp_path, "--seeds", "0:5", "--gateway", VARIANT)
    _, parallel_out, parallel = _fuzz(capsys, tmp_path, "--seeds", "0:5", "--gateway", VARIANT, "-j", "2")
    assert serial and parallel == serial
    assert parallel_out == serial_out  # same lines, same order


def test_bad_options_are_usage_errors(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    with pytest.raises(UsageError):
        parse_seeds("5")
    assert main(["fuzz", "--seeds", "3:1", "--out", str(tmp_path)]) == 2
    assert main(["fuzz", "--seeds", "0:2", "--shard", "3/2", "--out", str(tmp_path)]) == 2
    assert "--shard expects" in capsys.readouterr().err


def test_a_size_in_another_mix_runs_and_a_bad_one_is_a_usage_error(capsys: pytest.CaptureFixture[str],
                                                                     tmp_path: Path) -> None:
    code, out, failed = _fuzz(capsys, tmp_path, "--seeds", "0:4", "--profile", "small+dense", "--crash-points")
    assert (code, failed) == (0, set()) and "4 scenarios, 4 passed" in out
    with pytest.raises(SystemExit) as stopped:
        main(["fuzz", "--seeds", "0:4", "--profile", "long+small", "--out", str(tmp_path)])
    assert stopped.value.code == 2 and "invalid choice: 'long+small'" in capsys.readouterr().err


def test_zoo_takes_generated_seeds() -> None:
    from conformance.cli import build_parser

    args = build_parser().parse_args(["zoo", "--generated", "--seeds", "0:50", "-j", "2"])
    assert args.generated and args.seeds == "0:50" and args.workers == "2"
    assert not build_parser().parse_args(["zoo"]).generated
    assert build_parser().parse_args(["zoo", "--generated", "--crash-points"]).crash_points
    assert main(["zoo", "--crash-points"]) == 2  # the catalog's crashes are its own `crash_at` events


def test_explore_merges_mirror_states_and_finds_nothing_on_the_reference(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    from conformance.search.explore import evaluate

    assert evaluate(("reference", ("ma", "tick")))[0] == evaluate(("reference", ("mb", "tick")))[0]
    assert evaluate(("reference", ("ma", "mb")))[0] != evaluate(("reference", ("ma", "ma")))[0]
    assert main(["explore", "--depth", "2", "-j", "1", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert out[0] == "depth 1: 10 sequences, 5 new states"
    assert out[-1] == "60 states explored, 27 distinct, 0 violating"  # its rate on stderr: stdout the same run to run


def test_seeds_go_to_workers_in_chunks_and_come_back_in_order() -> None:
    assert [seed_chunk(n, 2) for n in (1, 127, 128, 256, 1_000, 10_000)] == [1, 1, 1, 2, 7, 8]
    assert seed_chunk(10_000, 1) == 8 and seed_chunk(500, 8) == 1
    items = [-n for n in range(300)]
    assert list(in_order(abs, items, 2, chunksize=seed_chunk(len(items), 2))) == list(range(300))


def test_progress_off_a_terminal_speaks_at_least_once_a_minute(monkeypatch: pytest.MonkeyPatch,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    from conformance.cli import lines

    now = [0.0]
    monkeypatch.setattr(lines.time, "monotonic", lambda: now[0])
    progress = lines.Progress(1000)
    assert not progress.tty
    for done, t in ((1, 10.0), (2, 30.0), (3, 61.0), (4, 62.0)):  # none a tenth of the way
        now[0] = t
        progress.update(done, 0)  # only the one a minute after the last line speaks
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("3/1000 seeds")


def test_a_stopped_run_leaves_files_only_for_the_seeds_it_counted(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """Workers run ahead of the count; what they wrote for seeds past the stop is removed."""
    code, _, failed = _fuzz(capsys, tmp_path, "--seeds", "0:100000", "--gateway", VARIANT, "-n", "2", "--time-budget", "2s")
    assert code == 1 and failed
    written = {int(p.name[4:].removesuffix(".yaml")) for p in (tmp_path / "out").glob("gen-*.yaml")}
    assert written == failed


def test_an_interrupted_run_keeps_the_files_an_earlier_run_wrote(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Only what this run's workers wrote for seeds it did not count goes; an earlier run's files stay."""
    _, _, earlier = _fuzz(capsys, tmp_path, "--seeds", "0:5", "--gateway", VARIANT)
    files = {p.name: p.read_text() for p in (tmp_path / "out").glob("gen-*.yaml")}
    assert {int(name[4:].removesuffix(".yaml")) for name in files} == earlier and max(earlier) >= 2
    _sigterm_at_the_third_gateway(monkeypatch)
    code, _, _ = _fuzz(capsys, tmp_path, "--seeds", "0:5", "--gateway", "interrupting")
    assert code == 143
    assert {p.name: p.read_text() for p in (tmp_path / "out").glob("gen-*.yaml")}.keys() == files.keys()
    assert not [p for p in (tmp_path / "out").iterdir() if p.name.startswith(".")]  # no staging left behind


def test_a_stopped_shard_resumes_where_it_stopped(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """Each run spends its time budget on one seed; following the resume lines runs the shard's
    seeds exactly once, with the serial run's failures, and leaves every failure's file."""
    _, _, serial = _fuzz(capsys, tmp_path / "serial", "--seeds", "0:12", "--gateway", VARIANT, "--shard", "2/3")
    argv = ["fuzz", "--seeds", "0:12", "--gateway", VARIANT, "--shard", "2/3", "--time-budget", "0.001",
            "--no-shrink", "--out", str(tmp_path / "out")]
    counted, failed, resumes = [], set(), []
    while True:
        main(argv)
        lines = capsys.readouterr().out.strip().splitlines()
        counted.append(int(lines[-2 if lines[-1].startswith("resume: ") else -1].split()[0]))
        failed |= {int(seed) for line in lines for seed in re.findall(r"^(?:FAIL|ERROR|TIMEOUT) gen-(\d+)", line)}
        if not lines[-1].startswith("resume: "):
            break
        resumes.append(lines[-1])
        argv = shlex.split(lines[-1].removeprefix("resume: "))[1:]
    assert resumes[0] == (f"resume: sessiongate fuzz --seeds 3:12 --gateway {VARIANT} --shard 2/3 --time-budget 0.001 "
                          f"--out {tmp_path / 'out'} --no-shrink")  # seeds 4, 7, 10 left
    assert counted == [1, 1, 1, 1] and failed == serial and serial
    assert {int(p.name[4:].removesuffix(".yaml")) for p in (tmp_path / "out").glob("gen-*.yaml")} == serial


def test_fuzz_isolates_a_hanging_gateway_as_run_does(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, out, _ = _fuzz(capsys, tmp_path, "--seeds", "0:2", "--gateway", "selftest:hang", "--isolate",
                         "--step-timeout", "1", "--findings-ok")
    assert code == 1  # timeouts are not findings
    assert re.findall(r"^TIMEOUT gen-(\d+)  .*no answer to deliver_message within 1s", out, re.MULTILINE) == ["0", "1"], out
    assert out.strip().splitlines()[-2:] == ["failing seeds by check: none; 2 seeds errored or timed out",
                                            "2 scenarios, 0 passed, 2 failed"]


def test_fuzz_gives_an_exec_child_its_memory_cap_and_step_timeout(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    from reference_impl import ReferenceGateway

    started: list[tuple[list[str], float, int | None]] = []

    def exec_gateway(argv: list[str], *, step_timeout: float, memory_mb: int | None, env: object = None) -> object:
        started.append((argv, step_timeout, memory_mb))
        return ReferenceGateway()  # stands in for the child: the options are what is checked

    monkeypatch.setattr("conformance.transport.exec_gateway.ExecGateway", exec_gateway)
    code, out, _ = _fuzz(capsys, tmp_path, "--seeds", "0:2", "--gateway", "exec:my-gateway --fast",
                         "--memory-mb", "300", "--step-timeout", "2.5")
    assert code == 0, out
    assert started == [(["my-gateway", "--fast"], 2.5, 300)] * 2
    _fuzz(capsys, tmp_path, "--seeds", "0:1", "--gateway", "exec:my-gateway")
    assert started[-1] == (["my-gateway"], 10.0, 4096)  # run's defaults


# -- a buggy gateway's many failures (issue #24) -------------------------------------------


def test_each_distinct_failure_is_shrunk_once(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """never-replies fails every seed, mostly the same way: one shrink per kind, not per seed."""
    code = main(["fuzz", "--seeds", "0:6", "--gateway", "reference:never-replies", "--out", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == 1
    shrunk = re.findall(r"^     shrunk \d+ -> \d+ events", out, re.MULTILINE)
    repeats = re.findall(r"^FAIL gen-(\d+)  (I\d) .*\n     written to \S+gen-\1\.yaml; not shrunk: the same failure as "
                         r"gen-(\d+) \((I\d) ([a-z-]+)\)$", out, re.MULTILINE)
    distinct = int(re.search(r"; (\d+) distinct failures? \(by first check and violation\)$", out.strip()).group(1))  # type: ignore[union-attr]
    same = re.findall(r"^     NOTE: shrunk, it fails I\d as gen-\d+ does", out, re.MULTILINE)  # a kind that shrank to another's
    assert len(shrunk) == distinct + len(same) and len(shrunk) + len(repeats) == 6 and repeats
    firsts = set(re.findall(r"^FAIL gen-(\d+)  .*\n.*\n     shrunk", out, re.MULTILINE))
    for seed, check, first, first_check, _slug in repeats:  # each names the earlier seed whose kind it is, shrunk there
        assert first in firsts and int(first) < int(seed) and check == first_check
    assert sorted(p.name for p in tmp_path.glob("*.shrunk.yaml")) == sorted(
        f"gen-{seed}.shrunk.yaml" for seed in re.findall(r"^FAIL gen-(\d+).*\n.*\n     shrunk", out, re.MULTILINE))


def test_max_failures_stops_after_n_distinct_failures_and_says_how_to_resume(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code = main(["fuzz", "--seeds", "0:50", "--gateway", "reference:never-replies", "--out", str(tmp_path), "--no-shrink",
                 "--max-failures", "2"])
    lines = capsys.readouterr().out.strip().splitlines()
    assert code == 1
    stop = next(line for line in lines if line.startswith("stopped after "))
    done = int(re.fullmatch(r"stopped after 2 distinct failures \(--max-failures 2\), (\d+) of 50 seeds", stop).group(1))  # type: ignore[union-attr]
    assert 2 <= done < 50
    assert lines[-1] == (f"resume: sessiongate fuzz --seeds {done}:50 --gateway reference:never-replies "
                         f"--out {tmp_path} --no-shrink --max-failures 2")
    assert main(["fuzz", "--seeds", "0:2", "--max-failures", "0", "--out", str(tmp_path)]) == 2


def test_a_shrink_that_ends_on_another_bug_of_the_check_says_so(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """Seed 3 on never-replies fails I1 at a daily boundary; its shrink keeps I1 failing, at an
    idle one: the note shows both, and the file says it too."""
    assert main(["fuzz", "--seeds", "3:4", "--gateway", "reference:never-replies", "--out", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    note = re.search(r"^     NOTE: the shrunk scenario fails I1 another way: (.*)\n     the original: (.*)$", out, re.MULTILINE)
    assert note and "idle boundary" in note.group(1) and "daily boundary" in note.group(2)
    assert "# NOTE: this fails I1 another way than the original" in (tmp_path / "gen-3.shrunk.yaml").read_text()


def test_reproduce_lines_paste_into_the_shell_the_run_was_made_from(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Relative to where fuzz ran (not to the failure folder), and with its PYTHONPATH."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PYTHONPATH", "/opt/my gateways")
    assert main(["fuzz", "--seeds", "0:1", "--gateway", "reference:never-replies", "--out", "found"]) == 1
    capsys.readouterr()
    for name in ("gen-0.yaml", "gen-0.shrunk.yaml"):
        line = next(line for line in (tmp_path / "found" / name).read_text().splitlines() if line.startswith("# reproduce: "))
        assert line == f"# reproduce: PYTHONPATH='/opt/my gateways' sessiongate run found/{name} --gateway reference:never-replies"
        words = shlex.split(line.removeprefix("# reproduce: "))
        assert main(words[2:]) == 1  # as pasted (sessiongate's own words)
    capsys.readouterr()


def test_shrink_writes_to_the_failure_folder_not_beside_its_input(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["fuzz", "--seeds", "0:1", "--gateway", "reference:never-replies", "--out", "found", "--no-shrink"]) == 1
    (tmp_path / "tests").mkdir()
    (tmp_path / "found" / "gen-0.yaml").rename(tmp_path / "tests" / "gen-0.yaml")
    capsys.readouterr()
    assert main(["shrink", "tests/gen-0.yaml", "--gateway", "reference:never-replies"]) == 0
    assert capsys.readouterr().out.endswith(": fuzz-failures/gen-0.shrunk.yaml\n")
    assert [p.name for p in (tmp_path / "tests").iterdir()] == ["gen-0.yaml"]
    assert main(["shrink", "tests/gen-0.yaml", "--gateway", "reference:never-replies", "--out", "elsewhere"]) == 0
    assert (tmp_path / "elsewhere" / "gen-0.shrunk.yaml").is_file()


DEAF_GATEWAY = '''
import signal
from reference_impl.gateway import ReferenceGateway


class DeafGateway(ReferenceGateway):
    """Ignores SIGTERM, the signal a pool ends its workers with, and then fails to start."""

    def start(self, config, harness):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        raise RuntimeError("cannot start")


def make():
    return DeafGateway()
'''


def test_a_worker_that_ignores_the_pools_sigterm_is_killed_and_the_run_ends(tmp_path: Path) -> None:
    """A gateway that sets SIGTERM to be ignored in its worker (or a thread of its that takes the
    signal while the worker waits in the pool's queue) once hung the pool's stop for good. In a
    child with a deadline, so the bug is a failure here, not a hung suite."""
    (tmp_path / "sg_deaf_gateway.py").write_text(DEAF_GATEWAY, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)]), "SESSIONGATE_FAILURE_DB": "off"}
    done = subprocess.run([sys.executable, "-m", "conformance.cli", "fuzz", "--seeds", "0:6", "--gateway",
                           "sg_deaf_gateway:make", "-n", "2"], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "stopped: the gateway errored before the first event of seed 0; it cannot start" in done.stdout, done.stdout


def test_a_pool_whose_killed_worker_held_the_queue_lock_still_ends(monkeypatch: pytest.MonkeyPatch) -> None:
    """`Pool.terminate` first takes the task queue's read lock, which a worker holds while it
    waits for a task; a worker SIGKILLed there (it had ignored the SIGTERM) took the lock with
    it, and the stop waited for good (CI, once: the test above timed out). The stop's watchdog
    releases it once every worker has been killed."""
    import multiprocessing
    import threading
    from types import SimpleNamespace

    from conformance.search import fuzz

    monkeypatch.setattr(fuzz, "STOP_GRACE", 0.05)
    lock = multiprocessing.get_context("spawn").Lock()
    lock.acquire()  # held by a worker that is gone
    killed: list[str] = []
    worker = SimpleNamespace(terminate=lambda: killed.append("terminate"), kill=lambda: killed.append("kill"))
    pool = SimpleNamespace(_pool=[worker], _inqueue=SimpleNamespace(_rlock=lock), terminate=lambda: lock.acquire())
    stopping = threading.Thread(target=fuzz.end_pool, args=(pool,), daemon=True)
    stopping.start()
    stopping.join(timeout=10)
    assert not stopping.is_alive(), "the pool's stop still waits on the lock a killed worker held"
    assert killed == ["terminate", "kill"]


WORKER_ENDING_AT_SHUTDOWN = '''
import os, signal, threading, time
from conformance.search import fuzz
fuzz._worker_init()

def later():
    time.sleep(0.3)
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(5)

threading.Thread(target=later).start()  # the main thread ends: the interpreter's shutdown joins this one
'''


def test_a_worker_told_to_stop_during_its_shutdown_ends_quietly_with_the_signal_status(tmp_path: Path) -> None:
    """The pool's SIGTERM can reach a worker between seeds while its interpreter is shutting
    down (joining the queue's feeder thread). A SystemExit raised there was printed as an
    ignored exception's traceback under the run's output, and the worker exited 0."""
    script = tmp_path / "worker.py"
    script.write_text(WORKER_ENDING_AT_SHUTDOWN, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stderr) == (143, ""), done.stderr


def raises_on_reset() -> object:
    """A gateway that raises on every /reset (a command the generator draws now and then)."""
    from reference_impl import ReferenceGateway

    class RaisesOnReset(ReferenceGateway):
        def deliver_command(self, chat, command):  # type: ignore[no-untyped-def]
            if command == "/reset":
                raise RuntimeError(f"no reset for {chat.name}")
            super().deliver_command(chat, command)

    return RaisesOnReset()


def test_a_gateway_error_is_shrunk_once_keeping_its_call_and_class(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """A gateway that raises is shrunk as a failed check is: once a kind (the call it raised from
    and the exception's class), to a scenario that still raises so; `shrink` takes one too."""
    for where in ("conformance.search.fuzz.factory", "conformance.cli.fuzz.factory"):
        monkeypatch.setattr(where, lambda *_: raises_on_reset)
    monkeypatch.setattr("conformance.cli.fuzz.resolve", lambda name: raises_on_reset)
    monkeypatch.setattr("conformance.cli.shrink.resolve", lambda name: raises_on_reset)
    monkeypatch.setattr("conformance.cli.shrink.check_gateway", lambda *_: None)
    code = main(["fuzz", "--seeds", "0:12", "--gateway", "raises", "--out", str(tmp_path / "out"), "--no-failure-db"])
    out = capsys.readouterr().out
    assert code == 1
    failed = re.findall(r"^ERROR gen-(\d+)  gateway error at step \S+ \(command\): RuntimeError: no reset for", out, re.MULTILINE)
    shrunk = re.findall(r"^     shrunk \d+ -> (\d+) events: ", out, re.MULTILINE)
    repeats = re.findall(r"^     written to \S+; not shrunk: the same gateway error as gen-(\d+) \(error in command: RuntimeError\)$",
                         out, re.MULTILINE)
    assert shrunk == ["1"] and len(repeats) == len(failed) - 1 >= 2 and set(repeats) == {failed[0]}
    first = tmp_path / "out" / f"gen-{failed[0]}.shrunk.yaml"
    assert "# failing: gateway error in command: RuntimeError on gateway raises\n" in first.read_text()
    assert "- {command: /reset, chat: " in first.read_text()
    assert main(["shrink", str(tmp_path / "out" / f"gen-{failed[1]}.yaml"), "--gateway", "raises",
                 "--out", str(tmp_path / "shrunk")]) == 0
    line = capsys.readouterr().out.strip()
    assert re.fullmatch(r"shrunk \d+ -> 1 events in \d+ runs, keeping the gateway error in command: RuntimeError: \S+", line), line


def test_a_shard_given_no_seed_says_so(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """It passed with `0 scenarios, 0 passed, 0 failed` and nothing else: a sweep cut into more
    shards than seeds looked green."""
    assert main(["fuzz", "--seeds", "0:2", "--shard", "3/5", "--out", str(tmp_path / "out")]) == 0
    captured = capsys.readouterr()
    assert captured.err.splitlines()[-1] == "note: shard 3/5 of seeds 0:2 has no seed to run"


def test_summary_json_says_what_the_last_line_says_whatever_the_run_found(capsys: pytest.CaptureFixture[str],
                                                                          tmp_path: Path) -> None:
    """A CI gating on fuzz scraped stdout: `summary.txt` is written only when something failed."""
    import json

    clean = tmp_path / "clean.json"
    code, out, _ = _fuzz(capsys, tmp_path, "--seeds", "0:3", "--summary-json", str(clean))
    assert code == 0 and not (tmp_path / "out").exists()
    doc = json.loads(clean.read_text())
    assert (doc["scenarios"], doc["passed"], doc["failed"], doc["failures"], doc["stopped"]) == (3, 3, 0, [], None)
    found = tmp_path / "found.json"
    code, out, failed = _fuzz(capsys, tmp_path, "--seeds", "0:5", "--gateway", VARIANT, "--summary-json", str(found))
    doc = json.loads(found.read_text())
    assert code == 1 and f"{doc['scenarios']} scenarios, {doc['passed']} passed, {doc['failed']} failed" in out
    assert [f["seed"] for f in doc["failures"]] == sorted(failed) and doc["failing_by_check"] == {"I1": len(failed)}
    assert all(f["outcome"] == "fail" and f["checks"] == ["I1"] and Path(f["file"]).is_file() for f in doc["failures"])


def test_summary_json_of_a_stopped_run_carries_its_resume_command(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    import json

    monkeypatch.delenv("PYTHONPATH", raising=False)
    _sigterm_at_the_third_gateway(monkeypatch)
    code, _out, _ = _fuzz(capsys, tmp_path, "--seeds", "0:5", "--gateway", "interrupting", "--summary-json",
                          str(tmp_path / "s.json"))
    doc = json.loads((tmp_path / "s.json").read_text())
    assert code == 143 and doc["stopped"] == "interrupted" and doc["scenarios"] == 2
    assert doc["resume"] == f"sessiongate fuzz --seeds 2:5 --gateway interrupting --out {tmp_path / 'out'} " \
                            f"--summary-json {tmp_path / 's.json'} --no-shrink"


def test_a_reproduce_line_puts_the_folder_a_gateway_was_imported_from_on_pythonpath(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A gateway module found only through this process's own path (pytest's `pythonpath = .`,
    `python -m` from its folder) is not found by `sessiongate` pasted into the shell: the line
    names its folder. sessiongate's own modules and built-in names need nothing."""
    import subprocess
    import sys

    from conformance.harness.shell import command

    monkeypatch.delenv("PYTHONPATH", raising=False)
    (tmp_path / "pastedgw.py").write_text("from reference_impl import ReferenceGateway as make\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    __import__("pastedgw")
    monkeypatch.chdir(tmp_path)
    line = command("replay", "01-idle-expiry-end-and-finalize", "--gateway", "pastedgw:make")
    assert line == "PYTHONPATH=. sessiongate replay 01-idle-expiry-end-and-finalize --gateway pastedgw:make"
    bindir = Path(sys.executable).parent
    pasted = subprocess.run(["bash", "-c", line], capture_output=True, text=True, env={"PATH": f"{bindir}:/usr/bin:/bin"})
    assert pasted.returncode == 0, pasted.stdout + pasted.stderr
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    assert command("run", "--gateway", "pastedgw:make") == f"PYTHONPATH={tmp_path} sessiongate run --gateway pastedgw:make"
    monkeypatch.delenv("PYTHONPATH")
    assert command("run", "--gateway", "reference:never-replies") == "sessiongate run --gateway reference:never-replies"
    assert command("run", "--gateway", "reference_impl.variants.boundaries:IdleExpiryNoFinalize") == (
        "sessiongate run --gateway reference_impl.variants.boundaries:IdleExpiryNoFinalize")


LACKING = '''
from dataclasses import replace
from reference_impl import ReferenceGateway


class make(ReferenceGateway):
    def profile(self, config):
        return replace(super().profile(config), unsupported=frozenset({"restart_config", "daily_min_idle_minutes"}))
'''


def test_fuzz_counts_its_skipped_seeds_by_the_feature_that_skipped_them(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """"48 skipped" said nothing of why: an author replayed seed after seed to learn it."""
    import json

    (tmp_path / "lackinggw.py").write_text(LACKING, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    summary = tmp_path / "s.json"
    assert main(["fuzz", "--seeds", "0:40", "--profile", "dense", "--gateway", "lackinggw:make", "--no-failure-db",
                 "--out", str(tmp_path / "o"), "--summary-json", str(summary)]) == 0
    last = capsys.readouterr().out.splitlines()[-1]
    by_feature = json.loads(summary.read_text())["skipped_by_feature"]
    assert set(by_feature) == {"daily_min_idle_minutes", "restart_config"} and min(by_feature.values()) > 0
    counts = ", ".join(f"{name} {n}" for name, n in by_feature.items())
    assert last.endswith(f" skipped (not judged, using what the gateway declares unsupported: {counts})")


def test_a_failure_that_shrinks_to_an_earlier_kind_is_not_counted_again(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """gen-5's first violation (a daily boundary in Europe/Berlin) is not gen-2's (one in UTC's
    words), but shrunk it is gen-2's shrunk failure: one bug, one distinct failure, one saved
    failure, one --max-failures slot."""
    assert main(["fuzz", "--seeds", "0:6", "--gateway", "reference:never-replies", "--no-failure-db", "--out", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert "     NOTE: shrunk, it fails I1 as gen-2 does: the same failure, not counted again: " in out
    assert out.splitlines()[-1].endswith("; 3 distinct failures (by first check and violation)")


EVERY_SETTING = '''
from dataclasses import replace
from conformance.features import FEATURES
from reference_impl import ReferenceGateway


class make(ReferenceGateway):
    def profile(self, config):
        lacking = FEATURES - {"command", "sigterm", "crash", "restart", "advance", "message", "checkpoint"}
        return replace(super().profile(config), unsupported=frozenset(lacking))
'''


def test_fit_draws_nothing_the_gateway_declares_unsupported(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """OpenClaw declares a dozen features unsupported, and `--profile dense` draws every one of
    them often: every dense seed was skipped whole on it. `--fit` asks the gateway's profile
    once and draws none of what it lacks: the same seeds, fitted, are all judged."""
    import json

    (tmp_path / "lackingall.py").write_text(EVERY_SETTING, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    runs = {}
    for fit in ([], ["--fit"]):
        summary = tmp_path / f"s{len(fit)}.json"
        assert main(["fuzz", "--seeds", "0:30", "--profile", "dense", "--gateway", "lackingall:make", "--no-failure-db",
                     "--out", str(tmp_path / "o"), "--summary-json", str(summary), *fit]) == 0
        runs[bool(fit)] = json.loads(summary.read_text())
        out = capsys.readouterr().out
    assert runs[False]["skipped"] >= 25 and runs[True]["skipped"] == 0 and runs[True]["passed"] == 30
    assert runs[True]["fit"] is True
    main(["replay", "--seed", "7", "--profile", "dense", "--gateway", "lackingall:make", "--fit"])
    assert "skipped" not in capsys.readouterr().out  # replay --seed --fit draws the seed fuzz --fit ran
    from conformance.features import FEATURES

    lacking = sorted(FEATURES - {"command", "sigterm", "crash", "restart", "advance", "message", "checkpoint"})
    assert out.splitlines()[0] == f"fitted to lackingall:make: drawing no {', '.join(lacking)}"


SILENT = '''
from reference_impl import ReferenceGateway


class make(ReferenceGateway):
    def profile(self, config):
        raise RuntimeError("no profile today")
'''


def test_fit_on_a_gateway_that_cannot_say_what_it_supports_is_a_usage_error(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "silentgw.py").write_text(SILENT, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert main(["fuzz", "--seeds", "0:3", "--gateway", "silentgw:make", "--no-failure-db", "--out", str(tmp_path / "o"),
                 "--fit"]) == 2
    err = capsys.readouterr().err
    assert "--fit: asking silentgw:make what it supports, one message: gateway error at start (profile): " in err
    assert "no profile today" in err
