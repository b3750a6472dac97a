"""A report directory's inputs: one canonical observation log per run, plus an index.

`save` writes RUN_DIR/logs/<key>.jsonl and RUN_DIR/logs/index.json; `load` turns them back
into RunResults, re-judged by the current checks with the saved expected failures applied,
so `sessiongate report RUN_DIR` re-renders every report from the logs alone.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from conformance.adapter import Profile
from conformance.harness import shell
from conformance.harness.runner import RunResult
from conformance.harness.spill import ObservationLog
from conformance.harness.suite import CATALOG, Expectations
from conformance.harness.verdict import GatewayFailure
from sessiongate import SessiongateError
from sim.document import ScenarioError
from sim.loader import config_from_document
from sim.scenario import Chat, Scenario

INDEX = "logs/index.json"
SCHEMA = 1  # of logs/index.json
SLUG_MAX = 100  # characters of a log file's stem
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
XPASS_PREFIX = "expected to fail: "  # conformance.harness.suite.Expectations.apply words an xpass this way


class RunDirError(SessiongateError):
    """RUN_DIR holds no readable logs/index.json or a log it names."""


def canonical_json(data: Any) -> str:
    """One spelling per value: sorted keys, fixed separators, a final newline."""
    return json.dumps(data, sort_keys=True, indent=1, separators=(",", ": "), ensure_ascii=False) + "\n"


def encoded(text: str) -> bytes:
    """`text` as UTF-8, a lone surrogate (a gateway's id made of one, read from JSON's "\\ud800")
    as its escape: in a JSON string that escape reads back as the same character, so a log keeps
    it exactly, and no report fails to be written for it."""
    return text.encode("utf-8", "backslashreplace")


def atomic_write(path: Path, text: str) -> None:
    """Write `text` to `path` (`encoded`) through a temp file beside it and os.replace: a reader
    sees the old file or the new one, never half of one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(temp, "wb") as handle:
            handle.write(encoded(text))
        os.replace(temp, path)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise


def display_path(source: str) -> str:
    """A scenario file as the report names it: a built-in catalog file as `catalog/NAME.yaml`
    (the same on every machine, wherever sessiongate is installed), else relative to the working
    folder when inside it."""
    if not source or not os.path.isabs(source):
        return source
    if os.path.dirname(source) == str(CATALOG):
        return f"catalog/{os.path.basename(source)}"
    relative = os.path.relpath(source)
    return source if relative.startswith("..") else relative


@dataclass(frozen=True)
class Keyed:
    """A run, the key that names it in every report, its log file in the run directory, and
    its scenario file as the reports name it."""

    key: str
    result: RunResult
    log_path: str
    file: str
    strict: bool = False  # judged with --strict: the reproduce command is too

    @property
    def anchor(self) -> str:
        return "s-" + "".join(c if c.isalnum() or c in "-_" else "-" for c in self.key)

    @property
    def reproduce(self) -> str:
        """A command that runs the scenario again, pasted into a shell where the run was made (a
        generated scenario by its seed)."""
        scenario, gateway = self.result.scenario, self.result.gateway
        strict = ("--strict",) if self.strict else ()
        if self.file:
            return shell.command("replay", self.file, "--gateway", gateway, *strict)
        if scenario.name.startswith("gen-"):
            return shell.command("fuzz", "--seeds", f"{scenario.seed}:{scenario.seed + 1}", "--gateway", gateway, *strict)
        return ""


def slug(text: str) -> str:
    """A file-name stem made of [A-Za-z0-9._-] alone: a scenario name such as '../../x' or
    one longer than a file name may be can neither leave logs/ nor fail to be written."""
    stem = _UNSAFE.sub("-", text).strip(".-")[:SLUG_MAX].rstrip(".-")
    return stem or "run"


def keyed(results: list[RunResult], gateway: str, recorded: bool = False, strict: bool = False) -> list[Keyed]:
    """Key = scenario name, or gateway/name when the runs span gateways (the zoo); made unique.
    Log paths are made unique on their own, case-blind (two keys may slug alike). A scenario
    file is named relative to the working folder when the run is recorded; a re-rendered run
    (`recorded`) keeps the name it was recorded with, wherever `report` runs from."""
    mixed = any(r.gateway != gateway for r in results)
    seen: dict[str, int] = {}
    taken: set[str] = set()
    out = []
    for result in results:
        base = f"{result.gateway}/{result.scenario.name}" if mixed else result.scenario.name
        seen[base] = seen.get(base, 0) + 1
        key = base if seen[base] == 1 else f"{base}~{seen[base]}"
        stem = f"{slug(result.gateway)}/{slug(result.scenario.name)}" if mixed else slug(result.scenario.name)
        path, n = f"logs/{stem}.jsonl", 1
        while path.casefold() in taken:
            n += 1
            path = f"logs/{stem}~{n}.jsonl"
        taken.add(path.casefold())
        source = result.scenario.source
        out.append(Keyed(key, result, path, source if recorded else display_path(source), strict))
    return out


@dataclass(frozen=True)
class Unloaded:
    """A scenario file that could not be loaded: it is in every report, so a CI that reads
    junit.xml alone cannot mistake a run that skipped it for a clean one."""

    file: str
    line: int
    field: str
    message: str

    @staticmethod
    def of(error: ScenarioError) -> Unloaded:
        return Unloaded(display_path(error.source), error.line, error.field, error.message)

    @property
    def text(self) -> str:
        return str(ScenarioError(self.file, self.line, self.field, self.message))

    def to_detail(self) -> dict[str, Any]:
        return {"file": self.file, "line": self.line, "field": self.field, "message": self.message}


def expected_failures(result: RunResult) -> dict[str, Any]:
    """check -> the expectations entry that applied to it (a reason, or signature -> reason)."""
    return dict(sorted(result.expected.items()))


def save(directory: Path, runs: list[Keyed], gateway: str, unloaded: list[Unloaded], strict: bool = False) -> None:
    """Every run's log and the index (`strict`: the run failed vacuous checks, and so does every
    rendering of it). Logs the previous index listed and this one does not are removed; nothing
    else in the directory is touched."""
    previous = _listed_logs(directory)
    entries = []
    for run in runs:
        scenario = run.result.scenario
        text = run.result.log_text()
        atomic_write(directory / run.log_path, text)
        entries.append({
            "key": run.key,
            "log": run.log_path,
            "records": text.count("\n"),
            "sha256": hashlib.sha256(encoded(text)).hexdigest(),
            "gateway": run.result.gateway,
            "file": run.file,
            "header": scenario.header,
            "expected": expected_failures(run.result),
            **({"crashes": run.result.crashes} if run.result.crashes else {}),  # not in the log: how its crashes were
        })
    atomic_write(directory / INDEX, canonical_json({"schema": SCHEMA, "gateway": gateway, "runs": entries,
                                                   "unloaded": [u.to_detail() for u in unloaded],
                                                   **({"strict": True} if strict else {})}))
    for stale in sorted(previous - {run.log_path for run in runs}):
        (directory / stale).unlink(missing_ok=True)


def _listed_logs(directory: Path) -> set[str]:
    """The logs an existing index lists (relative paths inside logs/); none if unreadable."""
    try:
        index = json.loads((directory / INDEX).read_text(encoding="utf-8"))
        logs = {entry["log"] for entry in index["runs"]}
    except (OSError, ValueError, KeyError, TypeError):
        return set()
    return {log for log in logs if isinstance(log, str) and _inside_logs(log)}


def _inside_logs(log: str) -> bool:
    parts = Path(log).parts
    return len(parts) >= 2 and parts[0] == "logs" and ".." not in parts and log.endswith(".jsonl")


def load(directory: Path) -> tuple[str, list[RunResult], list[Unloaded], bool]:
    """(report gateway, results, files not loaded, strict) from a directory written by `save`,
    the results re-judged now, strictly if the run was (`--strict`). A damaged
    index or log is a RunDirError naming the file, never a verdict on what is left of it."""
    from conformance.checks import judge

    where = directory / INDEX
    if not where.is_file():  # the usual mistake: a folder that is not one `--report` wrote
        what = "not a run directory: it has no logs/index.json" if directory.is_dir() else "no such directory"
        raise RunDirError(f"{directory}: {what} (`sessiongate run --report DIR` writes one)")
    try:
        index = json.loads(where.read_text(encoding="utf-8"))
    except OSError as err:
        raise RunDirError(f"{where}: {err.strerror or err}") from None
    except ValueError as err:
        raise RunDirError(f"{where}: {err}") from None
    gateway, entries, unloaded = _index(where, index)
    strict = index.get("strict", False) is True
    results = []
    for entry in entries:
        path = directory / entry["log"]
        try:
            text = path.read_text(encoding="utf-8")
            _verify(entry, text)
            records = ObservationLog.loads(text)
            if not records or records[0].kind != "scenario":
                raise ValueError("its first record is not the scenario header")
            result = _result(records, entry)
        except (OSError, ValueError, KeyError, TypeError) as err:
            raise RunDirError(f"{path}: {err}") from None
        result.verdicts = judge(records, strict)
        results.append(Expectations.of_result(entry["expected"], result.scenario.name).apply(result))
    return gateway, results, unloaded, strict


def _index(where: Path, index: Any) -> tuple[str, list[dict[str, Any]], list[Unloaded]]:
    """The index's gateway and run entries, checked for the shape `save` writes."""
    if not isinstance(index, dict):
        raise RunDirError(f"{where}: expected a JSON object, got {type(index).__name__}")
    schema = index.get("schema")
    if schema != SCHEMA:
        raise RunDirError(f"{where}: schema {schema!r}; this sessiongate reads schema {SCHEMA}")
    gateway, runs = index.get("gateway"), index.get("runs")
    if not isinstance(gateway, str) or not isinstance(runs, list):
        raise RunDirError(f"{where}: expected 'gateway' (a string) and 'runs' (a list)")
    for i, entry in enumerate(runs):
        missing = [k for k in ("key", "log", "gateway", "file", "header", "expected")
                   if not isinstance(entry, dict) or k not in entry]
        if missing:
            raise RunDirError(f"{where}: runs[{i}]: missing {', '.join(missing)}")
        if not isinstance(entry["log"], str) or not _inside_logs(entry["log"]):
            raise RunDirError(f"{where}: runs[{i}].log: {entry['log']!r} is not a .jsonl file inside logs/")
        if not isinstance(entry["expected"], dict):
            raise RunDirError(f"{where}: runs[{i}].expected: expected an object")
        if entry.get("crashes", "played") not in ("played", "real"):
            raise RunDirError(f"{where}: runs[{i}].crashes: {entry['crashes']!r} is not 'played' or 'real'")
    try:  # indexes written before files not loaded were kept have none
        unloaded = [Unloaded(u["file"], u["line"], u["field"], u["message"]) for u in index.get("unloaded", [])]
    except (KeyError, TypeError):
        raise RunDirError(f"{where}: unloaded: expected a list of {{file, line, field, message}}") from None
    return gateway, runs, unloaded


def _verify(entry: dict[str, Any], text: str) -> None:
    """The log is the one `save` wrote (indexes written before the digest was kept skip this)."""
    if "sha256" not in entry:
        return
    if hashlib.sha256(text.encode("utf-8")).hexdigest() != entry["sha256"]:
        count = text.count("\n")
        raise ValueError(f"not the log the run wrote ({count} records, the index says {entry.get('records')}): "
                         "truncated or edited")


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
                     frozenset(profile.get("unsupported", ())), profile.get("reply_within")), records, failure=failure,
                     crashes=entry.get("crashes", ""))
