"""A gateway behind the JSON-lines protocol (docs/protocol.md) is the same gateway: the reference run
in a child process gives byte-identical logs and verdicts to the in-process run, every line on the
wire fits the protocol's JSON Schema, and a gateway in another language (Node) runs end to end.

SESSIONGATE_EXEC_SEEDS=N runs generated seeds 0..N-1 (default 30); docs/reliability.md records N=1000.
"""

from __future__ import annotations

import gc
import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from conformance.harness.registry import resolve as resolve_gateway
from conformance.harness.runner import RunResult, run_scenario
from conformance.harness.suite import catalog_paths
from conformance.transport import isolation
from conformance.transport.exec_gateway import ExecGateway
from conformance.transport.isolation import isolated
from reference_impl import ReferenceGateway
from sim.loader import load_file
from sim.scenario import Scenario

ROOT = Path(__file__).resolve().parent.parent
CATALOG = catalog_paths()
ECHO = ROOT / "examples" / "echo-gateway.js"
SEEDS = range(int(os.environ.get("SESSIONGATE_EXEC_SEEDS", "30")))


def assert_same(here: RunResult, there: RunResult) -> None:
    assert there.failure is None, there.failure
    assert there.log_text() == here.log_text()
    assert there.verdicts == here.verdicts


@pytest.mark.parametrize("path", CATALOG, ids=[p.stem for p in CATALOG])
def test_isolated_reference_matches_in_process(path: Path) -> None:
    """What `--isolate` does: a fresh child process per scenario."""
    scenario = load_file(path)
    here = run_scenario(scenario, ReferenceGateway(), "reference")
    there = run_scenario(scenario, isolated("reference"), "reference")
    assert_same(here, there)


@pytest.fixture(scope="module")
def child():
    """One child for many scenarios (the `reset` op): each scenario still gets a fresh gateway."""
    gateway = isolated("reference", reuse=True)
    yield gateway
    gateway.kill()


def generated(seed: int) -> Scenario:
    generate = pytest.importorskip("sim.generate")
    return generate.scenario_for_seed(seed)


@pytest.mark.parametrize("seed", SEEDS)
def test_generated_seed_through_the_protocol_matches(child: ExecGateway, seed: int) -> None:
    scenario = generated(seed)
    assert_same(run_scenario(scenario, ReferenceGateway(), "reference"), run_scenario(scenario, child, "reference"))


def test_a_reused_child_is_reset_not_restarted(child: ExecGateway) -> None:
    """Between scenarios the child is `reset`; only a stop starts another (its crashes are real:
    the final SIGTERM kills it, and a new one reads the store), and the next scenario finds its
    state directory empty."""
    scenario = load_file(CATALOG[0])
    run_scenario(scenario, child, "reference", check=False)
    pid, spawned = (child.proc.pid if child.proc else None), child.spawned
    assert child.state_dir is not None and os.listdir(child.state_dir) == []
    again = run_scenario(scenario, child, "reference", check=False)
    assert child.spawned == spawned + 1 and child.proc is not None and child.proc.pid != pid  # the final SIGTERM's
    assert again.log_text() == run_scenario(scenario, ReferenceGateway(), "reference", check=False).log_text()


# -- real crashes: a child that can open its store again is killed --------------------------


def test_a_crash_kills_the_child_and_a_new_one_opens_the_store() -> None:
    """Catalog 29 (a crash, then a restart) under `--isolate`: the child is killed at the crash
    and at the final SIGTERM, three processes in all, and the log is the one in process."""
    scenario = load_file(ROOT / "conformance" / "catalog" / "29-crash-then-restart.yaml")
    gateway = isolated("reference")
    pids: list[int] = []
    spawn = gateway._spawn

    def counted() -> None:
        spawn()
        assert gateway.proc is not None
        pids.append(gateway.proc.pid)

    gateway._spawn = counted  # type: ignore[method-assign]
    there = run_scenario(scenario, gateway, "reference")
    assert gateway.kills and len(set(pids)) == 3 == gateway.spawned
    assert_same(run_scenario(scenario, ReferenceGateway(), "reference"), there)


def test_the_state_dir_goes_with_the_gateway() -> None:
    gateway = isolated("reference")
    run_scenario(load_file(CATALOG[0]), gateway, "reference", check=False)
    state_dir = gateway.state_dir
    assert state_dir is not None and os.path.isdir(state_dir)
    del gateway
    gc.collect()
    assert not os.path.exists(state_dir)


def test_what_a_gateway_keeps_only_in_memory_dies_with_a_real_crash() -> None:
    """`selftest:ram-outbox` keeps its memory outbox on its store object: a crash in process
    (its own call) cannot show it, a real one does."""
    scenario = load_file(ROOT / "conformance" / "catalog" / "29-crash-then-restart.yaml")
    assert run_scenario(scenario, resolve_gateway("selftest:ram-outbox")(), "selftest:ram-outbox").verdicts["I3"].status == "pass"
    there = run_scenario(scenario, isolated("selftest:ram-outbox"), "selftest:ram-outbox")
    assert there.failure is None
    assert [v.message for v in there.verdicts["I3"].violations] == [
        "backend 'hindsight' never ingested [t1, t2] (session s1, acknowledged from 09:00:02 to 09:05:02)"]


def test_a_real_crash_runs_nothing_of_the_dead_process() -> None:
    """`crash-keeps-memory` (its `crash()` does nothing) fails I7 in process; killed, neither its
    `crash()` nor its timers run, and it passes like the reference."""
    scenario = load_file(ROOT / "tests" / "zoo_scenarios" / "crash-keeps-memory.yaml")
    name = "reference:crash-keeps-memory"
    assert run_scenario(scenario, resolve_gateway(name)(), name).verdicts["I7"].status == "fail"
    assert_same(run_scenario(scenario, ReferenceGateway(), "reference"), run_scenario(scenario, isolated(name), name))


# -- the JSON Schema in docs/protocol.md holds for every line ------------------------------


def protocol_schema() -> dict[str, Any]:
    text = (ROOT / "docs" / "protocol.md").read_text(encoding="utf-8")
    block = re.search(r"```json\n(.*?)```", text, re.S)
    assert block, "docs/protocol.md has no ```json block"
    return json.loads(block.group(1))


class Recording(ExecGateway):
    """Keeps every line both ways, and which op each `done` answered."""

    def __init__(self, argv: list[str], **kwargs: Any) -> None:
        super().__init__(argv, **kwargs)
        self.lines: list[dict[str, Any]] = []
        self.values: list[tuple[str, Any]] = []

    def _send(self, message: dict[str, Any]) -> None:
        self.lines.append(message)
        super()._send(message)

    def _read_line(self, deadline: float, what: str, wait: float) -> dict[str, Any]:
        message = super()._read_line(deadline, what, wait)
        self.lines.append(message)
        if "done" in message:
            self.values.append((what, message.get("value")))
        return message


WORDS = {"telegram", "discord", "slack", "whatsapp", "signal", "cli", "dm", "group", "channel", "thread", "none", "idle",
         "daily", "both", "/new", "/reset", "/stop", "/resume", "eager", "lazy", "visible", "hidden", "unavailable"}


def shape(value: Any, key: str = "") -> Any:
    """A line with its numbers and free text blanked: lines of one shape fare alike against the schema."""
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        return 0
    if isinstance(value, str):
        return value if value in WORDS or key in ("op", "call") else "s"
    if isinstance(value, list):
        return [shape(item) for item in value]
    return {k: shape(v, k) for k, v in value.items()}


def validate_all(gateway: Recording) -> tuple[set[str], set[str]]:
    """One line of each shape against the schema, and each op's returned value against its definition
    (jsonschema takes ~1 ms a line; a catalog run has ~30,000 lines of ~150 shapes).
    Returns the ops and calls seen."""
    jsonschema = pytest.importorskip("jsonschema")
    schema = protocol_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    line = jsonschema.Draft202012Validator(schema)
    value_of = {op: jsonschema.Draft202012Validator({"$defs": schema["$defs"], "$ref": f"#/$defs/{kind}_value"})
                for op, kind in (("profile", "profile"), ("durable_state", "state"), ("resources", "resources"),
                                 ("resources_delta", "resources_delta"))}
    samples: dict[str, Any] = {}
    for message in gateway.lines:
        samples.setdefault(json.dumps(shape(message), sort_keys=True), message)
    for op, value in gateway.values:
        if op in value_of:
            samples.setdefault(op + json.dumps(shape(value), sort_keys=True), (op, value))
    for sample in samples.values():
        validator, what = (value_of[sample[0]], sample[1]) if isinstance(sample, tuple) else (line, sample)
        errors = list(validator.iter_errors(what))
        assert not errors, f"{sample}: {errors[0].message}"
    ops = {m["op"] for m in gateway.lines if "op" in m}
    calls = {m["call"] for m in gateway.lines if "call" in m}
    return ops, calls


def test_every_line_of_a_catalog_run_fits_the_schema() -> None:
    gateway = Recording([sys.executable, "-m", "conformance.transport.exec_server", "reference"], reuse=True)
    try:
        for path in CATALOG:
            run_scenario(load_file(path), gateway, "reference", check=False)
    finally:
        gateway.kill()
    ops, calls = validate_all(gateway)
    assert ops == {"hello", "profile", "start", "deliver_message", "deliver_command", "deliver_reply", "delegate", "sigterm",
                   "open_store", "restart", "delete_session_row", "lock_store", "durable_state", "resources", "resources_delta",
                   "fire_timer", "reset"}  # no `crash`: this child's crashes are real (it is killed)
    assert calls == {"llm.request", "platform.send_reply", "recorder.sync_turn", "recorder.on_session_end",
                     "recorder.on_session_switch", "recorder.shutdown", "backend.ingest", "hooks.on_session_finalize",
                     "hooks.on_session_reset", "scheduler.call_at", "timer.cancel", "note", "crash_point"}


def test_every_generated_config_fits_the_schema() -> None:
    """And a config's own `usage`: no catalog scenario sets one, so no run sent it, and the
    schema's closed config lacked it: a strict exec gateway would have refused a scenario file
    that sets it at `start` (the docs audit)."""
    jsonschema = pytest.importorskip("jsonschema")
    from sim.generate import scenario_for_seed
    from sim.scenario import GatewayConfig
    from sim.writer import config_document

    schema = protocol_schema()
    config = jsonschema.Draft202012Validator({"$defs": schema["$defs"], "$ref": "#/$defs/config"})
    configs = [scenario_for_seed(seed, profile).config for profile in ("default", "dense") for seed in range(300)]
    configs += [replace(GatewayConfig(), usage=usage) for usage in ("none", "large", 5000)]
    documents = {json.dumps(config_document(c), sort_keys=True) for c in configs}
    assert sum('"usage"' in d for d in documents) == 3
    for document in documents:
        errors = list(config.iter_errors(json.loads(document)))
        assert not errors, f"{document}: {errors[0].message}"


# -- a gateway in another language -----------------------------------------------------------

needs_node = pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")


@needs_node
def test_node_gateway_speaks_the_protocol() -> None:
    gateway = Recording(["node", str(ECHO)])
    result = run_scenario(load_file(CATALOG[0]), gateway, "echo")
    assert result.failure is None, result.failure
    assert result.verdicts["I1"].status == "fail"  # it never ends a session: a real verdict, not an error
    validate_all(gateway)


@needs_node
def test_node_gateway_runs_from_the_command_line() -> None:
    paths = [str(CATALOG[0]), str(CATALOG[1])]
    done = subprocess.run([sys.executable, "-m", "conformance.cli", "run", *paths, "--gateway", f"exec:node {ECHO}"],
                          capture_output=True, text=True, cwd=ROOT, timeout=120, check=False)
    assert done.returncode == 1, done.stderr
    assert done.stdout.splitlines()[0] == f"fail  {CATALOG[0].stem}"
    assert f"pass  {CATALOG[1].stem}" in done.stdout
    assert done.stdout.splitlines()[-1] == ("2 scenarios, 1 passed, 1 failed; 2 checks vacuous (examined nothing); "
                                            "1 pass judged lazily (the gateway declares no watcher where the scenario has one)")


@pytest.mark.parametrize("line", [
    {"op": "deliver_message", "chat": {"name": "a"}, "text": "[t1] hi", "muted": False, "now": 0},
    {"op": "fire_timer", "id": "3", "now": 0},
    {"op": "warp", "now": 0},
    {"call": "llm.request", "args": {"chat": "a", "session": "s1"}},
    {"call": "llm.request", "args": {"chat": "a", "session": "s1", "prompt": ["[t2] hi"], "recall": "[t1] hello"}},
    {"call": "teleport", "args": {}},
    {"done": True},
    {"fail": "it broke"},
    {"result": 1, "error": "both"},
], ids=["chat-fields", "timer-id-type", "unknown-op", "missing-prompt", "recall-one-text", "unknown-call", "done-value",
        "fail-shape", "answer"])
def test_the_schema_refuses_malformed_lines(line: dict[str, Any]) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    assert not jsonschema.Draft202012Validator(protocol_schema()).is_valid(line)


def test_a_run_says_whether_its_crashes_were_real(capsys: pytest.CaptureFixture[str]) -> None:
    """`RunResult.crashes`, and the note `run` prints for played ones: a gateway in process (even
    one that claims otherwise) plays its crashes; a child with `open_store` is killed."""
    from conformance.cli import main

    scenario = load_file(ROOT / "conformance" / "catalog" / "29-crash-then-restart.yaml")
    assert run_scenario(scenario, ReferenceGateway(), "reference").crashes == "played"
    assert run_scenario(scenario, isolated("reference"), "reference").crashes == "real"
    assert run_scenario(load_file(CATALOG[0]), ReferenceGateway(), "reference").crashes == ""

    class Claims(ReferenceGateway):
        real_crashes = True

    assert run_scenario(scenario, Claims(), "claims").crashes == "played"
    assert main(["run", "-q", "29-crash-then-restart", "01-idle-expiry-end-and-finalize"]) == 0
    assert capsys.readouterr().out.splitlines()[-2:] == [
        "note: 1 of 2 scenarios crash the gateway by its own crash() call, which loses nothing it keeps in memory "
        "(--isolate kills one with open_store(): docs/contract.md)",
        "2 scenarios, 2 passed, 0 failed"]
    assert main(["run", "-q", "--isolate", "29-crash-then-restart"]) == 0
    assert capsys.readouterr().out.splitlines() == ["1 scenario, 1 passed, 0 failed"]


# -- children forked from a warm interpreter (conformance.transport.isolation) ----------------


def _parent_of(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as stat:
        return int(stat.read().rpartition(") ")[2].split()[1])


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="reads /proc")
def test_an_isolated_child_is_forked_by_the_server_and_ends_as_a_started_one_does(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(isolation, "_server", None)  # one started under this test's environment (another test may change it)
    gateway = isolated("reference")
    gateway._spawn()  # and its hello answered
    server = isolation.server()
    assert server is not None and gateway.proc is not None and gateway.kills
    assert _parent_of(gateway.proc.pid) == server.proc.pid and os.getpgid(gateway.proc.pid) == gateway.proc.pid
    proc = gateway.proc
    gateway.kill()
    assert proc.returncode == -9  # killed with its group, reaped by the server, its status read back
    alive = isolated("reference", memory_mb=123)
    alive._spawn()
    assert alive.proc is not None
    with open(f"/proc/{alive.proc.pid}/limits") as limits:  # the memory cap, as a started child gets it
        assert any(line.startswith("Max address space") and f" {123 << 20} " in line for line in limits)
    alive.proc.stdin.close()  # end of input: the child exits 0, as exec_server does
    assert alive.proc.wait(timeout=10) == 0
    alive.kill()


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="reads /proc")
def test_a_child_under_another_python_environment_is_started_anew(monkeypatch: pytest.MonkeyPatch) -> None:
    """A PYTHONPATH set after the server started (or another PYTHONHASHSEED) would not reach a
    forked child: such a child is a new interpreter."""
    monkeypatch.setattr(isolation, "_server", None)
    assert isolation.server() is not None
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    gateway = isolated("reference")
    scenario = load_file(CATALOG[0])
    assert_same(run_scenario(scenario, ReferenceGateway(), "reference"), run_scenario(scenario, gateway, "reference"))
    gateway._spawn()
    assert gateway.proc is not None and _parent_of(gateway.proc.pid) == os.getpid()
    gateway.kill()


LOCK_ACROSS_A_CRASH = """
name: lock-across-a-crash
zone: UTC
start: '2026-03-07T23:30:00'
config: {reset: default, cache_cap: 64, idle_ttl: 1h, watcher_interval: 5m}
chats:
  alice: {platform: telegram, chat_type: dm}
  bob: {platform: telegram, chat_type: dm}
events:
- {message: alice}
- {db_locked: 3m58s, after: 1m}
- crash_at: {point: end-recorded, hit: 1, restart_after: 17s}
  after: 9s
- {command: /reset, chat: alice}
- {message: bob, after: 10s}
"""


def test_a_lock_outlives_a_killed_child() -> None:
    """Another surface's lock is on the store, not in the process: the child started after a
    kill inside the lock finds it (found by `fuzz --profile dense --crash-points --isolate`,
    seed 27, shrunk: the new child wrote through it)."""
    from sim.loader import load_text

    scenario = load_text(LOCK_ACROSS_A_CRASH, "<lock-across-a-crash>")
    assert_same(run_scenario(scenario, ReferenceGateway(), "reference"), run_scenario(scenario, isolated("reference"), "reference"))


def test_an_open_store_that_raises_is_said_as_such(tmp_path: Path) -> None:
    """After a real crash the new child's `open_store` is part of the next request; what it raises
    is said as its own, not as that request's."""
    (tmp_path / "sg_bad_open.py").write_text(
        "from reference_impl.gateway import ReferenceGateway\n\n"
        "class BadOpen(ReferenceGateway):\n"
        "    def open_store(self, config, harness):\n"
        "        if harness.state_dir and __import__('os').listdir(harness.state_dir):  # a store is there: after a kill\n"
        "            raise RuntimeError('cannot read my own store')\n"
        "        super().open_store(config, harness)\n",
        encoding="utf-8")
    scenario = load_file(ROOT / "conformance" / "catalog" / "29-crash-then-restart.yaml")
    gateway = isolated("sg_bad_open:BadOpen", env={"PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)])})
    result = run_scenario(scenario, gateway, "sg_bad_open:BadOpen")
    assert result.failure is not None and result.failure.event == "durable_state"
    assert result.failure.message.startswith(
        "open_store, in a child started after a real crash: RuntimeError: cannot read my own store"), result.failure.message


def test_a_child_outlives_its_fork_server_quietly(monkeypatch: pytest.MonkeyPatch) -> None:
    """A server that died (killed with a run) takes no child's ending down with it, and the next
    child has a new server."""
    monkeypatch.setattr(isolation, "_server", None)
    gateway = isolated("reference")
    gateway._spawn()
    first = isolation.server()
    assert first is not None
    first.proc.kill()
    first.proc.wait()
    gateway.kill()  # its status cannot be asked: no error, its group killed all the same
    again = isolated("reference")
    again._spawn()
    assert isolation.server() is not first and type(again.proc).__name__ == "Forked"
    again.kill()


@needs_node
def test_an_exec_gateway_whose_crashes_are_played_is_told_how_to_have_them_real() -> None:
    """The note named `crash()` and `--isolate`, which an `exec:` child has neither of: its way
    is `"crash": "kill"` in its hello answer and its store in SESSIONGATE_STATE_DIR."""
    path = ROOT / "conformance" / "catalog" / "29-crash-then-restart.yaml"
    done = subprocess.run([sys.executable, "-m", "conformance.cli", "run", "-q", str(path), "--gateway", f"exec:node {ECHO}"],
                          capture_output=True, text=True, cwd=ROOT, timeout=120, check=False)
    assert ('note: 1 of 1 scenarios crash the gateway by a crash request only, which loses nothing the child keeps in '
            'memory (answer hello with "crash": "kill" and keep the store in SESSIONGATE_STATE_DIR: docs/protocol.md)'
            in done.stdout.splitlines()), done.stdout
