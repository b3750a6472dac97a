"""Gateways that behave otherwise than the reference, within the contract, pass every check.

Each was found by an audit that wrote conforming variants to look for false alarms; each
failed a check before the check was fixed."""

from __future__ import annotations

from typing import Any

from conformance.harness.runner import run_scenario
from reference_impl import ReferenceGateway
from reference_impl.variants.eviction import IdleSweepNeverReapsNone
from sim.loader import load_text


def scenario(name: str, start: str, mode: str, events: str) -> str:
    """A one-chat scenario with an idle TTL of 1h and a 5-minute watcher (the shrunk cases' own)."""
    return (f"name: {name}\nzone: UTC\nstart: '{start}'\nconfig:\n  reset: {{mode: {mode}}}\n  idle_ttl: 1h\n"
            f"  watcher_interval: 5m\nchats:\n  alice: {{platform: telegram, chat_type: dm}}\nevents:\n{events}")


RESUME_AFTER_THE_TTL = scenario("resume-loads-the-agent", "2026-03-29T14:00:32", "none", """\
- {message: alice}
- {command: /new, chat: alice, after: 1m}
- {message: alice, after: 1m}
- {command: /resume, chat: alice, after: 5m5s}
""")


class ResumeLoadsTheAgent(ReferenceGateway):
    """`/resume` loads the resumed session's agent into the cache at once (the idle TTL then
    reaps it as usual): its idle clock starts at the resume, not at its last turn."""

    def resume_previous(self, route: Any) -> None:
        before = route.session_id
        super().resume_previous(route)
        if route.session_id and route.session_id != before and not self.volatile.cache.get(route.session_id):
            self.load_agent(route.session_id, route.chat, route.chat_key)
            self.enforce_cap()


class ResumeLoadsAndKeeps(ResumeLoadsTheAgent, IdleSweepNeverReapsNone):
    """The same, with the idle sweep that never reaps a `none` session's agent (the zoo's bug)."""


def test_an_agent_loaded_at_a_resume_is_idle_from_then() -> None:
    result = run_scenario(load_text(RESUME_AFTER_THE_TTL), ResumeLoadsTheAgent(), "resume-loads-the-agent")
    assert [v.summary for v in result.verdicts.values() if v.status != "pass"] == []


def test_an_agent_loaded_at_a_resume_is_still_owed_its_reaping() -> None:
    result = run_scenario(load_text(RESUME_AFTER_THE_TTL), ResumeLoadsAndKeeps(), "resume-loads-and-keeps")
    assert result.verdicts["I7"].status == "fail"
    assert "(when it entered the cache)" in result.verdicts["I7"].violations[0].message


DELETED_TWICE = scenario("deleted-twice-healed-at-eviction", "2026-06-18T22:09:34", "idle", """\
- {message: alice}
- {delete_parent: alice, after: 1h46m27s}
- {message: alice, after: 1m}
- {delete_session: alice, after: 11s}
""")


def test_an_end_may_carry_what_came_after_any_deletion_that_lost_the_rest() -> None:
    """t1's row is deleted while no agent holds it (lost for good); t2 comes; the row is deleted
    again while t2's agent holds it, and this gateway writes it back as the agent leaves the
    cache. Its end carries [t2]: all that could be restored. (The check used to expect [t1, t2]
    or nothing, measuring only from the latest deletion.)"""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
    try:
        from minimal_gateway import Agent, MinimalGateway
    finally:
        sys.path.pop(0)

    class HealsAtEviction(MinimalGateway):
        def evict(self, agent: Agent) -> None:
            if agent.session not in self.disk.rows and agent.flushed:
                self.flush(agent)  # the deleted row, written back from the agent before it goes
            super().evict(agent)

    result = run_scenario(load_text(DELETED_TWICE), HealsAtEviction(), "heals-at-eviction")
    end = next(r for r in result.records if r.kind == "on_session_end")
    assert list(end.turns) == ["t2"]
    assert [v.summary for v in result.verdicts.values() if v.status != "pass"] == []
