"""Memory recall beside the conversation: `llm.request`'s optional `recall` (docs/protocol.md,
docs/contract.md, I6).

A gateway that hands the LLM what its memory holds of the chat's ended sessions was failed by I6
when the recall came as a prompt text (the audit of 2026-12-06, `memory-recall-in-prompt`): in the
prompt a recalled turn is the conversation's, as a kept history's is. Through `recall` it is the
gateway's word that these texts are memory: none is read (no context, no turn credited), and the
`llm_request` record counts them."""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from conformance.harness.calls import GatewayCalls
from conformance.harness.runner import RunResult, run_scenario
from conformance.transport.exec_gateway import ExecGateway
from conformance.transport.isolation import isolated
from reference_impl import ReferenceGateway
from sim.loader import load_text

ROOT = Path(__file__).resolve().parent.parent

# t1 in s1, /new ends s1, t2 opens s2 and is asked with t1's message recalled
SCENARIO = load_text("""
name: recall-across-new
zone: Europe/Berlin
start: 2026-03-02T09:00
config:
  reset: {mode: none}
chats:
  alice: {}
events:
  - message: alice
  - command: /new
    chat: alice
    at: "09:01"
  - message: alice
    at: "09:02"
""", "<recall-across-new>")

# The gateways, a module of their own: imported here, and by name in a child process (exec).
MODULE = '''
from types import SimpleNamespace

from reference_impl.gateway import ReferenceGateway


class Recalls(ReferenceGateway):
    """The reference, whose memory recalls every earlier message of the chat (those of its
    ended sessions too) and hands it to the LLM through `recall`."""

    def recall(self, llm, chat, session, prompt, memory):
        return llm.request(chat, session, prompt, recall=memory)

    def start_turn(self, message, arrival):
        said = self.__dict__.setdefault("said", {}).setdefault(message.chat.name, [])
        memory = ["Relevant memories:\\n" + "\\n".join(said)] if said else []
        said.append(message.text)
        llm = self.h.llm
        self.h.llm = SimpleNamespace(request=lambda chat, session, prompt: self.recall(llm, chat, session, prompt, memory))
        try:
            super().start_turn(message, arrival)
        finally:
            self.h.llm = llm


class RecallsInPrompt(Recalls):
    """The same recall as the prompt's first text: read as the conversation's (I6)."""

    def recall(self, llm, chat, session, prompt, memory):
        return llm.request(chat, session, [*memory, *prompt])


class RecallsGarbage(Recalls):
    """Hands `recall` whatever the test sets in GARBAGE."""

    def recall(self, llm, chat, session, prompt, memory):
        return llm.request(chat, session, prompt, recall=GARBAGE)


GARBAGE = None
'''


@pytest.fixture(scope="module")
def module_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    where = tmp_path_factory.mktemp("recall")
    (where / "sg_recall.py").write_text(MODULE, encoding="utf-8")
    return where


@pytest.fixture(scope="module")
def gateways(module_dir: Path) -> Any:
    sys.path.insert(0, str(module_dir))
    try:
        yield importlib.import_module("sg_recall")
    finally:
        sys.path.remove(str(module_dir))
        sys.modules.pop("sg_recall", None)


def child(module_dir: Path, name: str) -> ExecGateway:
    return isolated(f"sg_recall:{name}", env={"PYTHONPATH": os.pathsep.join([str(module_dir), str(ROOT)])})


def requests(result: RunResult) -> list[dict[str, Any]]:
    return [{"session": r.session, "turns": list(r.turns), **r.detail} for r in result.records if r.kind == "llm_request"]


def held_to_i6(result: RunResult) -> None:
    assert result.failure is None, result.failure
    assert result.verdicts["I6"].status == "pass", result.verdicts["I6"]
    assert requests(result) == [{"session": "s1", "turns": ["t1"], "request": "r1"},
                                {"session": "s2", "turns": ["t2"], "request": "r2", "recall": 1}]  # no context, t1 not credited
    assert all(v.status in ("pass", "vacuous") for v in result.verdicts.values()), result.verdicts


def test_a_recall_naming_an_ended_sessions_turn_is_not_context(gateways: Any) -> None:
    held_to_i6(run_scenario(SCENARIO, gateways.Recalls(), "recalls"))


def test_the_same_recall_in_the_prompt_is_the_conversation(gateways: Any) -> None:
    """It cannot be told from a kept history there: I6 fails it, as before."""
    result = run_scenario(SCENARIO, gateways.RecallsInPrompt(), "recalls-in-prompt")
    assert [v.message for v in result.verdicts["I6"].violations] == [
        "the LLM was asked turn t2 at 09:02 in session s2 with turn t1 of session s1 in its context: "
        "a new session starts a new conversation"]


def test_over_exec_a_recall_is_not_context(module_dir: Path) -> None:
    """The child's `request(..., recall=...)` goes on the wire as `args.recall` (docs/protocol.md)."""
    held_to_i6(run_scenario(SCENARIO, child(module_dir, "Recalls"), "recalls"))


def test_the_recall_call_fits_the_protocol_schema(module_dir: Path) -> None:
    from test_exec import Recording, validate_all

    gateway = Recording([sys.executable, "-m", "conformance.transport.exec_server", "sg_recall:Recalls"],
                        env={"PYTHONPATH": os.pathsep.join([str(module_dir), str(ROOT)])})
    try:
        held_to_i6(run_scenario(SCENARIO, gateway, "recalls"))
    finally:
        gateway.kill()
    calls = [m["args"] for m in gateway.lines if m.get("call") == "llm.request"]
    assert [args.get("recall") for args in calls] == [[], ["Relevant memories:\n[t1] hello"]]
    validate_all(gateway)


def test_a_gateway_that_does_not_recall_logs_as_before() -> None:
    """No `recall` key on the record, nor on the wire: logs and digests of such gateways stay."""
    result = run_scenario(SCENARIO, ReferenceGateway(), "reference")
    assert all("recall" not in r.detail for r in result.records)


# -- garbage in `recall` is the gateway's error at its step ---------------------------------------

GARBAGE_CASES = [
    ("[t1] hello", "bad value handed to llm.request: recall: expected a list of texts (what the gateway adds from "
                   "memory), got str '[t1] hello'"),
    (None, "bad value handed to llm.request: recall: expected a list of texts (what the gateway adds from memory), "
           "got NoneType None"),
    (7, "bad value handed to llm.request: recall: expected a list of texts (what the gateway adds from memory), got int 7"),
    (["memory", 7], "bad value handed to llm.request: recall[1]: expected a str, got int 7"),
]


@pytest.mark.parametrize(("garbage", "message"), GARBAGE_CASES, ids=["str", "none", "int", "int-item"])
def test_garbage_in_recall_is_the_gateways_error_at_its_step(gateways: Any, monkeypatch: pytest.MonkeyPatch,
                                                              garbage: Any, message: str) -> None:
    monkeypatch.setattr(gateways, "GARBAGE", garbage)
    result = run_scenario(SCENARIO, gateways.RecallsGarbage(), "recalls-garbage")
    assert result.failure is not None and result.failure.step == 1 and result.failure.event == "message (line 10)"
    assert result.failure.message == message
    assert not any(r.kind == "llm_request" for r in result.records)  # refused before it was taken


@pytest.mark.parametrize(("garbage", "message"), GARBAGE_CASES, ids=["str", "none", "int", "int-item"])
def test_over_exec_garbage_in_recall_is_answered_with_the_same_words(garbage: Any, message: str) -> None:
    calls = GatewayCalls(SCENARIO, ReferenceGateway(), "reference", budget=1000)
    server = object.__new__(ExecGateway)
    server.h = calls.harness
    answer = server._serve({"call": "llm.request", "args": {"chat": "alice", "session": "s1", "prompt": ["[t1] hello"],
                                                            "recall": garbage}})
    assert answer == {"error": message}


def test_a_child_handing_garbage_in_recall_fails_its_step_with_those_words(module_dir: Path, tmp_path: Path) -> None:
    (tmp_path / "sg_recall_str.py").write_text(
        "import sg_recall\n\nsg_recall.GARBAGE = '[t1] hello'\nRecallsGarbage = sg_recall.RecallsGarbage\n", encoding="utf-8")
    gateway = isolated("sg_recall_str:RecallsGarbage",
                       env={"PYTHONPATH": os.pathsep.join([str(tmp_path), str(module_dir), str(ROOT)])})
    result = run_scenario(SCENARIO, gateway, "recalls-garbage")
    assert result.failure is not None and result.failure.step == 1
    assert GARBAGE_CASES[0][1] in result.failure.message, result.failure.message
