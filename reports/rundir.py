"""A report directory's inputs: one canonical observation log per run, plus an index.

`save` writes RUN_DIR/logs/<key>.jsonl and RUN_DIR/logs/index.json; `load` turns them back
into RunResults, re-judged by the current checks with the saved expected failures applied,
so `sessiongate report RUN_DIR` re-renders every report from the logs alone.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from conformance.adapter import Profile
from conformance.observations import ObservationLog
from conformance.runner import RunResult
from conformance.suite import Expectations
from conformance.verdict import GatewayFailure
from sim.loader import config_from_document
from sim.scenario import Chat, Scenario

INDEX = "logs/index.json"
XPASS_PREFIX = "expected to fail: "  # conformance.suite.Expectations.apply words an xpass this way


class RunDirError(Exception):
    """RUN_DIR holds no readable logs/index.json or a log it names."""


def canonical_json(data: Any) -> str:
    """One spelling per value: sorted keys, fixed separators, a final newline."""
    return json.dumps(data, sort_keys=True, indent=1, separators=(",", ": "), ensure_ascii=False) + "\n"


def atomic_write(path: Path, text: str) -> None:
    """Write `text` to `path` through a temp file beside it and os.replace: a reader sees
    the old file or the new one, never half of one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(temp, "w", encoding="utf-8", newline="\n") as handle:
            handle.write(text)
        os.replace(temp, path)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise


def display_path(source: str) -> str:
    """A scenario file as the report names it: relative to the working folder when inside it."""
    if not source or not os.path.isabs(source):
        return source
    relative = os.path.relpath(source)
    return source if relative.startswith("..") else relative


@dataclass(frozen=True)
class Keyed:
    """A run and the key that names it in every report (and its log file)."""

    key: str
    result: RunResult

    @property
    def log_path(self) -> str:
        return f"logs/{self.key.replace(':', '-')}.jsonl"

    @property
    def anchor(self) -> str:
        return "s-" + "".join(c if c.isalnum() or c in "-_" else "-" for c in self.key)


def keyed(results: list[RunResult], gateway: str) -> list[Keyed]:
    """Key = scenario name, or gateway/name when the runs span gateways (the zoo); made unique."""
    mixed = any(r.gateway != gateway for r in results)
    seen: dict[str, int] = {}
    out = []
    for result in results:
        base = f"{result.gateway}/{result.scenario.name}" if mixed else result.scenario.name
        seen[base] = seen.get(base, 0) + 1
        out.append(Keyed(base if seen[base] == 1 else f"{base}~{seen[base]}", result))
    return out


def expected_failures(result: RunResult) -> dict[str, str]:
    """check -> the expectations-file reason, recovered from the xfail/xpass verdicts."""
    out = {}
    for check, verdict in result.verdicts.items():
        if verdict.status == "xfail":
            out[check] = verdict.reason
        elif verdict.status == "xpass":
            out[check] = verdict.reason.removeprefix(XPASS_PREFIX)
    return out


def save(directory: Path, runs: list[Keyed], gateway: str) -> None:
    """Every run's log and the index; logs of runs no longer listed are removed."""
    entries = []
    for run in runs:
        scenario = run.result.scenario
        atomic_write(directory / run.log_path, run.result.log_text())
        entries.append({
            "key": run.key,
            "log": run.log_path,
            "gateway": run.result.gateway,
            "file": display_path(scenario.source),
            "header": scenario.header,
            "expected": expected_failures(run.result),
        })
    atomic_write(directory / INDEX, canonical_json({"schema": 1, "gateway": gateway, "runs": entries}))
    listed = {directory / run.log_path for run in runs}
    for stale in sorted((directory / "logs").rglob("*.jsonl")):
        if stale not in listed:
            stale.unlink()


def load(directory: Path) -> tuple[str, list[RunResult]]:
    """(report gateway, results) from a directory written by `save`, re-judged now."""
    from conformance.checks import judge

    try:
        index = json.loads((directory / INDEX).read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise RunDirError(f"{directory / INDEX}: {err}") from None
    results = []
    for entry in index["runs"]:
        try:
            records = ObservationLog.loads((directory / entry["log"]).read_text(encoding="utf-8"))
        except (OSError, ValueError) as err:
            raise RunDirError(f"{directory / entry['log']}: {err}") from None
        result = _result(records, entry)
        result.verdicts = judge(records)
        pairs = {(result.scenario.name, check): reason for check, reason in entry["expected"].items()}
        results.append(Expectations(pairs).apply(result))
    return index["gateway"], results


def _result(records: list, entry: dict[str, Any]) -> RunResult:
    """A RunResult rebuilt from a log: the scenario has no events (the log has what happened)."""
    head = records[0].detail
    chats = tuple(Chat(name, **info) for name, info in sorted(head.get("chats", {}).items()))
    scenario = Scenario(name=head["name"], seed=head["seed"], zone=head["zone"], start=head["start"],
                        config=config_from_document(head["config"]), chats=chats, source=entry["file"],
                        header=entry["header"])
    profile = head.get("profile", {})
    errors = [r for r in records if r.kind == "error"]
    failure = None
    if errors:
        e = errors[-1]
        failure = GatewayFailure(e.d("failure"), e.step, e.d("event"), e.d("message"))
    return RunResult(scenario, entry["gateway"], Profile(profile.get("finalization", "eager"), profile.get("latency", 0),
                     profile.get("crash_durable", True), profile.get("sweep_interval", 0),
                     frozenset(profile.get("unsupported", ()))), records, failure=failure)
