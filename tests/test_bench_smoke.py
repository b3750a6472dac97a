"""Every bench runs end to end (--quick) and ends with its headline line; timings are not asserted."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_engine_bench_quick_ends_with_the_simpy_ratio() -> None:
    pytest.importorskip("simpy", reason="SimPy is the bench extra: pip install -e '.[bench]'")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "engine.py"), "--quick"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    last = done.stdout.rstrip("\n").splitlines()[-1]
    assert re.fullmatch(r"ratio vs simpy: \d+\.\d\d", last), done.stdout


def run_quick(bench: str, *extra: str) -> str:
    """The bench's stdout from a --quick run (its last line is the headline)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, str(ROOT / "bench" / bench), "--quick", *extra], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600, check=True)
    return done.stdout


def last_line(stdout: str) -> str:
    return stdout.rstrip("\n").splitlines()[-1]


def test_gateway_day_bench_quick_ends_with_the_hypothesis_ratio() -> None:
    pytest.importorskip("hypothesis")
    out = run_quick("gateway_day.py")
    assert re.fullmatch(r"ratio vs hypothesis: \d+\.\d\d", last_line(out)), out


def test_scaling_bench_quick_ends_with_the_per_event_ratio() -> None:
    out = run_quick("scaling.py")
    assert re.fullmatch(r"µs/event ratio 10\^3 vs 10\^2: \d+\.\d\d", last_line(out)), out


def test_scaling_anatomy_names_what_a_turn_of_the_model_holds() -> None:
    out = run_quick("scaling.py", "--anatomy", "300")
    assert re.match(r"300 events: the model holds \d+ MB, \d+ bytes a turn \(300 turns\)\n", out), out
    assert "conformance/checks/model/walk.py:" in out, out  # the turns, by the line that makes them


@pytest.mark.skipif(shutil.which("valgrind") is None, reason="bench/scaling.py --instructions counts with valgrind")
def test_scaling_instructions_prints_the_run_and_the_judging_per_event() -> None:
    out = run_quick("scaling.py", "--instructions")
    assert re.search(r"^     1,000    whole +\d+\.\d +-?\d+\.\d +\d+\.\d$", out, re.MULTILINE), out
    assert re.fullmatch(r"instructions/event ratio 10\^3 vs 10\^2: \d+\.\d\d", last_line(out)), out


@pytest.mark.skipif(shutil.which("valgrind") is None, reason="bench/instructions.py counts with valgrind")
def test_instructions_bench_quick_prints_each_ratio() -> None:
    out = run_quick("instructions.py")
    for ratio in ("runner / gateway", "checks / gateway"):
        assert re.search(rf"^{ratio} instructions per turn: \d+\.\d\d$", out, re.MULTILINE), out
    assert re.search(r"^  of which generated and run, not judged: [\d,]+; judged: -?[\d,]+$", out, re.MULTILINE), out
    # what each target leaves for the checks once the runner, or the seed's run, is paid
    assert re.search(r"^\(a\) 0\.3 of the gateway allows [\d,]+ a turn; the runner takes [\d,]+, leaving -?[\d,]+ for the "
                     r"checks \(they take -?[\d,]+\)$", out, re.MULTILINE), out
    assert re.search(r"^\(c\) 45 s allows [\d.]+ M a seed; generated and run, not judged, takes [\d.]+ M, leaving -?[\d.]+ M "
                     r"for the checks$", out, re.MULTILINE), out
    assert re.fullmatch(r"harness\+checks / gateway instructions per turn: \d+\.\d\d", last_line(out)), out


def test_sweep_bench_quick_ends_with_scenarios_per_second() -> None:
    out = run_quick("sweep.py", "-n", "2")
    assert re.fullmatch(r"scenarios/s: \d+\.\d", last_line(out)), out
    assert re.search(r"^ +100 +2 .* 0$", out, re.MULTILINE), out  # 100 seeds, none failed


def test_sweep_bench_against_a_commit_prints_the_time_ratio() -> None:
    """`--against REV`: both trees' CPU a seed and their ratio (HEAD against itself here: the
    calibration commit may be missing from a shallow clone)."""
    if subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--verify", "HEAD"], capture_output=True).returncode:
        pytest.skip("not a git checkout")
    out = run_quick("sweep.py", "--against", "HEAD")
    assert re.search(r"^CPU a seed, seeds 0-19, best of 1 taken in turn: this tree \d+\.\d\d ms, HEAD \d+\.\d\d ms$",
                     out, re.MULTILINE), out
    assert re.fullmatch(r"time ratio this tree / HEAD: \d+\.\d{3}", last_line(out)), out


def test_detection_bench_quick_ends_with_the_median() -> None:
    out = run_quick("detection.py", "-n", "2")
    assert re.fullmatch(r"median detection: \d+\.\d\ds", last_line(out)), out
    assert "3 of 3 variants caught" in out, out


def test_hermes_bench_quick_ends_with_the_reference_ratio() -> None:
    try:
        metadata.version("hermes-agent")
    except metadata.PackageNotFoundError:
        pytest.skip("hermes-agent is not installed (it has its own virtualenv: docs/hermes.md)")
    out = run_quick("hermes.py")
    assert re.fullmatch(r"ratio hermes/reference, scenarios per CPU second: \d+\.\d{4}", last_line(out)), out
    assert re.search(r"^hermes +catalog +8 ", out, re.MULTILINE), out


def test_mutation_bench_quick_is_deterministic_and_ends_with_the_kill_rate() -> None:
    """Three mutants on the catalog and 5 seeds, twice: the same bytes (timings go to stderr)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    runs = [subprocess.run([sys.executable, str(ROOT / "bench" / "mutation.py"), "--quick"], cwd=ROOT, env=env,
                           capture_output=True, text=True, timeout=600) for _ in range(2)]
    out = runs[0].stdout
    assert runs[0].returncode in (0, 1), runs[0].stderr  # 1: a survivor not in bench/mutation_allowed.txt
    assert runs[1].stdout == out
    assert re.fullmatch(r"kill rate: \d+\.\d% \(\d+ of \d+ mutants that change behaviour\)", last_line(out)), out
    assert re.search(r"^mutants: 3 \(", out, re.MULTILINE), out
    assert "seeds 0:5" in out.splitlines()[0], out


def test_every_allowed_survivor_names_a_mutant_that_exists(tmp_path: Path) -> None:
    """A mutant that moved (a method renamed, a file split) leaves its allowance naming nothing:
    `--list` says which and exits 1, so the allowed file cannot go stale unseen."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    allowed = (ROOT / "bench" / "mutation_allowed.txt").read_text(encoding="utf-8")
    stale = tmp_path / "allowed.txt"
    stale.write_text(allowed + "gateway.py ReferenceGateway.gone delete `return`  # moved away\n", encoding="utf-8")
    runs = [subprocess.run([sys.executable, str(ROOT / "bench" / "mutation.py"), "--list", *extra], cwd=ROOT, env=env,
                           capture_output=True, text=True, timeout=300) for extra in ([], ["--allowed", str(stale)])]
    assert runs[0].returncode == 0 and runs[0].stderr == "", runs[0].stderr
    assert runs[1].returncode == 1
    assert runs[1].stderr == ("warning: allowed.txt lists 'gateway.py ReferenceGateway.gone delete `return`', "
                              "which names no mutant\n")


def test_instructions_breakdown_leaves_each_part_out() -> None:
    """`bench/instructions.py --breakdown`'s children (counted under valgrind, minutes: not run
    here) leave each part out: with every one left out, the day still runs to a pass, and the
    parts are gone (no resources record, no final snapshot, every verdict the stub's)."""
    code = (
        "import sys; sys.path.insert(0, 'bench')\n"
        "import instructions, gateway_day\n"
        "from conformance.harness.runner import run_scenario\n"
        "from reference_impl import ReferenceGateway\n"
        "day = gateway_day.gateway_day(hours=1)\n"
        "full = run_scenario(day, ReferenceGateway(), 'reference')\n"
        "instructions.leave_out(','.join(instructions.PARTS))\n"
        "bare = run_scenario(day, ReferenceGateway(), 'reference')\n"
        "kinds = lambda r: {o.kind for o in r.records}\n"
        "durable = lambda r: sum(o.kind == 'durable' for o in r.records)\n"
        "print(full.passed, bare.passed, 'resources' in kinds(full), 'resources' in kinds(bare), durable(full), durable(bare),"
        " sorted({v.examined for v in bare.verdicts.values()}))\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "True", "True", "False", "1", "0", "[1]"], done.stdout
    hook_alone = (  # `sample-work`: the gateway's hook still asked after every step, nothing of the runner's around it
        "import sys; sys.path.insert(0, 'bench')\n"
        "import instructions, gateway_day\n"
        "from conformance.harness.runner import run_scenario\n"
        "from reference_impl import ReferenceGateway\n"
        "asked = []\n"
        "real = ReferenceGateway.resources_delta\n"
        "ReferenceGateway.resources_delta = lambda self: asked.append(1) or real(self)\n"
        "instructions.leave_out(sys.argv[1])\n"
        "day = gateway_day.gateway_day(hours=1)\n"
        "run = run_scenario(day, ReferenceGateway(), 'reference', check=False)\n"
        "print(len(asked) > len(day.events), len(asked) == 0, any(o.kind == 'resources' for o in run.records))\n"
    )
    for parts, asked in (("sample-work", ["True", "False"]), ("samples,sample-work", ["False", "True"])):  # the whole sample left out wins
        done = subprocess.run([sys.executable, "-c", hook_alone, parts], cwd=ROOT, env=env, capture_output=True, text=True,
                              timeout=300)
        assert done.returncode == 0, done.stderr
        assert done.stdout.split() == [*asked, "False"], (parts, done.stdout)
    unknown = subprocess.run([sys.executable, "-c", "import sys; sys.path.insert(0, 'bench'); import instructions; "
                              "instructions.leave_out('I10')"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert unknown.returncode == 1 and "unknown part 'I10'" in unknown.stderr, unknown.stderr
