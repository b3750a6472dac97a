"""Seam fidelity of usage (#20): what the fake LLM reports reaches Hermes 0.19's real client
path. A full context window makes the gateway's session hygiene compress the transcript; a
missing usage takes Hermes's no-usage branch without an error. Skipped without hermes-agent."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("conformance.adapters.hermes.seams", reason="hermes-agent is not installed")

import hermes_state  # after importorskip: hermes_seams has set HERMES_HOME
from agent import conversation_compression, conversation_loop
from agent.memory_manager import MemoryManager

from conformance.adapters.hermes import hermes
from conformance.adapters.hermes import home as hermes_home
from conformance.harness.runner import RunResult, run_scenario
from sim.loader import load_file, load_text

CATALOG_47 = Path(__file__).parent.parent / "conformance" / "catalog" / "47-usage-compression-not-boundary.yaml"


class Spies:
    """What Hermes did with the reported usage, seen from inside its own functions."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.prompt_tokens: list[int] = []  # each usage Hermes normalized (the with-usage branch)
        self.compressions: list[dict[str, Any]] = []
        self.compacted: list[str] = []
        self.switches: list[tuple[Any, ...]] = []
        real_normalize = conversation_loop.normalize_usage
        real_compress = conversation_compression.compress_context
        real_compact = hermes_state.SessionDB.archive_and_compact
        real_switch = MemoryManager.on_session_switch

        def normalize_usage(usage: Any, **kwargs: Any) -> Any:
            self.prompt_tokens.append(usage.prompt_tokens)
            return real_normalize(usage, **kwargs)

        def compress_context(agent: Any, *args: Any, **kwargs: Any) -> Any:
            self.compressions.append({"session": agent.session_id, "memory": agent._memory_manager,
                                      "in_place": agent.compression_in_place})
            return real_compress(agent, *args, **kwargs)

        def archive_and_compact(db: Any, session_id: str, *args: Any, **kwargs: Any) -> Any:
            self.compacted.append(session_id)
            return real_compact(db, session_id, *args, **kwargs)

        def on_session_switch(manager: Any, *args: Any, **kwargs: Any) -> Any:
            self.switches.append(args)
            return real_switch(manager, *args, **kwargs)

        monkeypatch.setattr(conversation_loop, "normalize_usage", normalize_usage)
        monkeypatch.setattr(conversation_compression, "compress_context", compress_context)
        monkeypatch.setattr(hermes_state.SessionDB, "archive_and_compact", archive_and_compact)
        monkeypatch.setattr(MemoryManager, "on_session_switch", on_session_switch)


def _run(text: str) -> RunResult:
    result = run_scenario(load_text(text, "47.yaml"), hermes(), "hermes", check=False)
    assert result.failure is None, result.failure.describe()
    return result


def test_a_full_context_window_makes_session_hygiene_compress(monkeypatch: pytest.MonkeyPatch) -> None:
    spies = Spies(monkeypatch)
    result = _run(CATALOG_47.read_text())
    assert hermes_home.CONTEXT_LENGTH in spies.prompt_tokens  # t4's answer, as Hermes read it
    # gateway/run.py:_handle_message_with_agent, before t5: session hygiene's own AIAgent
    # (skip_memory=True: no memory manager) compacts in place, under the same session id.
    (compression,) = spies.compressions
    first = next(r.session for r in result.records if r.kind == "llm_request")
    assert compression == {"session": first, "memory": None, "in_place": True}
    assert spies.compacted == [first]
    summary = [r for r in result.records if r.kind == "note" and r.detail.get("task") == "compression"]
    t5 = next(r for r in result.records if r.kind == "llm_request" and r.turns[:1] == ("t5",))
    assert len(summary) == 1 and summary[0].t == t5.t and t5.session == first  # no new session at compression
    # Not reached from the gateway in 0.19.0: compress_context calls on_session_switch only
    # through the compressing agent's memory manager, which hygiene's agent does not have.
    assert spies.switches == [] and not [r for r in result.records if r.kind == "on_session_switch"]


def test_without_a_large_report_nothing_compresses(monkeypatch: pytest.MonkeyPatch) -> None:
    spies = Spies(monkeypatch)
    result = _run(CATALOG_47.read_text().replace("    usage: large", "    usage: small"))
    assert hermes_home.CONTEXT_LENGTH not in spies.prompt_tokens
    assert spies.compressions == [] and spies.compacted == []
    assert not [r for r in result.records if r.kind == "note" and r.detail.get("task") == "compression"]


NO_USAGE = """name: no-usage
config: {reset: {mode: none}, usage: %s}
events:
  - message: alice
  - message: alice
    after: 1m
  - message: alice
    after: 1m
"""


def test_an_answer_without_usage_takes_the_no_usage_branch(monkeypatch: pytest.MonkeyPatch) -> None:
    spies = Spies(monkeypatch)
    with_usage = _run(NO_USAGE % "small")
    assert spies.prompt_tokens == [1, 1, 1]
    spies.prompt_tokens.clear()
    without = _run(NO_USAGE % "none")
    # agent/conversation_loop.py:run_conversation normalizes usage only when the response has
    # one (`if hasattr(response, 'usage') and response.usage`): never here, and every turn answered.
    assert spies.prompt_tokens == []
    assert [r.turns for r in without.records if r.kind == "reply"] == [("t1",), ("t2",), ("t3",)]
    strip = [r._replace(detail={k: v for k, v in r.detail.items() if k != "usage"}) for r in without.records[1:]]
    assert strip == list(with_usage.records[1:])  # nothing else Hermes does depends on it here


def test_the_catalog_scenario_loads() -> None:
    assert load_file(CATALOG_47).name == "47-usage-compression-not-boundary"
