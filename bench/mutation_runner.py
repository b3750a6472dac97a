"""Running the mutants of `bench/mutation.py`: each in a child process (`bench/mutation.py
--child`) with the mutated package first on PYTHONPATH, on the catalog and N generated seeds,
against the unmutated reference's per-scenario digests."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mutation_mutants import PACKAGE, ROOT, Mutant

ENTRY = Path(__file__).with_name("mutation.py")  # the child is `bench/mutation.py --child`


@dataclass(frozen=True)
class Task:
    mutant: Mutant | None  # None: the unmutated reference (the baseline)
    seeds: int
    profile: str
    cap: float
    baseline: tuple[str, ...] = ()  # per-scenario digests of the unmutated reference
    trace: bool = False  # record the lines reached (the baseline run only)


@dataclass(frozen=True)
class Outcome:
    status: str  # same, killed, survived (or, for the baseline, pass)
    where: str = ""  # the scenario that killed it, or where behaviour first changed
    why: str = ""
    seconds: float = 0.0
    log: str = ""  # a survivor's log of `where`
    digests: tuple[str, ...] = ()
    reached: dict[str, list[int]] | None = None


def run_task(task: Task) -> Outcome:
    """One child process: the mutated package (or the original, copied the same way) first on PYTHONPATH."""
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="mutant-") as tmp:
        package = Path(tmp) / "reference_impl"
        shutil.copytree(PACKAGE, package, ignore=shutil.ignore_patterns("__pycache__"))
        if task.mutant is not None:
            (package / task.mutant.file).write_text(task.mutant.source(), encoding="utf-8")
        spec = Path(tmp) / "task.json"
        spec.write_text(json.dumps({"seeds": task.seeds, "profile": task.profile, "baseline": task.baseline,
                                    "trace": task.trace, "package": str(package)}))
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [tmp, str(ROOT), os.environ.get("PYTHONPATH")])),
               "PYTHONHASHSEED": "0", "PYTHONDONTWRITEBYTECODE": "1"}
        try:
            done = subprocess.run([sys.executable, str(ENTRY), "--child", str(spec)], cwd=ROOT, env=env, capture_output=True,
                                  text=True, timeout=task.cap)
        except subprocess.TimeoutExpired:
            return Outcome("killed", "", f"the cap: still running after {task.cap:g}s", time.monotonic() - start)
    seconds = time.monotonic() - start
    last = done.stdout.rstrip("\n").rpartition("\n")[2]
    if done.returncode != 0 or not last.startswith("{"):
        errors = [line for line in done.stderr.splitlines() if line.strip()]
        return Outcome("killed", "", f"the child exited with status {done.returncode}: {errors[-1] if errors else ''}"[:200],
                       seconds)
    answer = json.loads(last)
    return Outcome(answer["status"], answer["where"], answer["why"], seconds, answer.get("log", ""),
                   tuple(answer.get("digests", ())), answer.get("reached"))


def scenario_digest(result: Any) -> str:
    """The run's behaviour as the contract sees it: its log and verdicts, less the gateway's
    `note` records (its own account of evictions and heals, which no check may trust: a mutant
    that changes only them changes nothing a gateway owes)."""
    digest = hashlib.sha256()
    for record in result.records:
        if record.kind != "note":
            digest.update(record.to_json().encode())
    for verdict in result.verdicts.values():
        digest.update(repr(verdict).encode())
    return digest.hexdigest()


def scenarios(seeds: int, profile: str) -> Iterator[tuple[str, Any]]:
    """The catalog, then seeds 0..N-1: (name, scenario), generated as they are asked for."""
    from conformance.harness.suite import catalog_paths
    from sim.generate import scenario_for_seed
    from sim.loader import load_file

    for path in catalog_paths():
        yield path.stem, load_file(path)
    for seed in range(seeds):
        yield f"seed {seed}", scenario_for_seed(seed, profile)


def child(spec_path: str) -> None:
    """In the child: run every scenario on `reference` (this PYTHONPATH's reference_impl) and
    print one JSON line: the first scenario that does not pass, else where behaviour first changed."""
    spec = json.loads(Path(spec_path).read_text())
    reached: dict[str, set[int]] = {}
    if spec["trace"]:
        prefix = spec["package"] + os.sep

        def lines(frame: Any, event: str, _arg: Any) -> Any:
            if event == "line":
                reached[frame.f_code.co_filename].add(frame.f_lineno)
            return lines

        def calls(frame: Any, _event: str, _arg: Any) -> Any:
            name = frame.f_code.co_filename
            if not name.startswith(prefix):
                return None
            reached.setdefault(name, set()).add(frame.f_lineno)
            return lines

        sys.settrace(calls)  # before the import: module and class bodies count as reached
    import reference_impl
    from conformance.harness.registry import resolve
    from conformance.harness.runner import run_scenario
    from conformance.harness.suite import outcome

    here = Path(reference_impl.__file__).resolve().parent
    assert here == Path(spec["package"]).resolve(), f"reference_impl came from {here}, not the mutant"
    make, baseline = resolve("reference"), spec["baseline"]
    digests: list[str] = []
    answer: dict[str, Any] = {"status": "same", "where": "", "why": ""}
    for index, (name, scenario) in enumerate(scenarios(spec["seeds"], spec["profile"])):
        result = run_scenario(scenario, make(), "reference")
        word = outcome(result)
        if word != "pass":
            why = result.failure.describe() if result.failure is not None else next(
                f"{check} {v.summary}" for check, v in result.verdicts.items() if v.status not in ("pass",))
            answer = {"status": "killed", "where": name, "why": " ".join(why.split())[:300]}
            break
        digests.append(scenario_digest(result))
        if baseline and digests[-1] != baseline[index] and answer["status"] == "same":
            answer = {"status": "survived", "where": name, "why": "", "log": result.log_text()}
    if not baseline:
        answer = {"status": answer["status"] if answer["status"] == "killed" else "pass", "where": answer["where"],
                  "why": answer["why"], "digests": digests}
        if spec["trace"]:
            sys.settrace(None)
            answer["reached"] = {Path(name).name: sorted(found) for name, found in sorted(reached.items())}
    print(json.dumps(answer))


def reference_log(where: str, seeds: int, profile: str) -> str:
    """The unmutated reference's log of one scenario (this process's reference_impl)."""
    from conformance.harness.registry import resolve
    from conformance.harness.runner import run_scenario

    scenario = dict(scenarios(seeds, profile))[where]
    return run_scenario(scenario, resolve("reference")(), "reference").log_text()
