"""I8: a delegate child's row names its parent. Proven both ways on generated seed 27, where a
delegated task arrives with its chat's session past its boundary: the reference skips it (no
live session to spawn it), and a gateway that runs it anyway in a child of no session fails."""

from __future__ import annotations

from conformance.harness.runner import run_scenario
from conformance.observations import first_turn
from reference_impl import ReferenceGateway
from reference_impl.cache import Agent
from reference_impl.state import Pending
from reference_impl.tables import Row
from sim.generate import scenario_for_seed
from sim.loader import load_text
from sim.scenario import Chat


class RunsEveryDelegate(ReferenceGateway):
    """The reference without its skip: with no live session the child's parent is None."""

    def delegate(self, chat: Chat, text: str) -> None:
        key = self.route_key(chat)
        child = self.child_agent(chat, key, self.delegating_session(self.store.route(key)))  # type: ignore[arg-type]
        child.rows.append(Row(first_turn(text), "user", text))
        child.busy, child.last_activity = True, self.h.clock.now()
        request = self.h.llm.request(chat.name, child.session, [text])
        self.volatile.inflight[request] = Pending(chat, key, child.session, first_turn(text) or "", delegate=True)
        self.enforce_cap()


def test_the_reference_passes_and_a_parentless_delegate_child_fails_i8() -> None:
    scenario = scenario_for_seed(27, "default")
    assert run_scenario(scenario, ReferenceGateway(), "reference").passed
    result = run_scenario(scenario, RunsEveryDelegate(), "runs-every-delegate")
    assert result.failure is None and result.verdicts["I8"].status == "fail"
    message = result.verdicts["I8"].violations[0].message
    assert message.startswith("delegate child s2 (task t2 of chat alice at ") and "while its session was s1" in message
    assert message.endswith("is stored naming no parent: a delegate child's row names the session that spawned it")


class NeverLinksAgain(ReferenceGateway):
    """The reference before its fix: a child written while its parent's row is not there keeps
    no link, even once the parent's row lands."""

    def orphan_row(self, agent: Agent, now: int) -> None:
        self.store.upsert_session(agent.session, agent.chat, None, agent.kind, now)


# A message, a /stop abandoning it (so the parent's row is not written), a delegate, and a
# message that writes the parent's row: all at one instant (found by tests/test_dense_faults.py).
PARENT_WRITTEN_AFTER_CHILD = """name: parent-written-after-child
start: 2026-03-02T08:50
chats:
  alice: {}
config: {reset: {mode: none}, turn_latency: 2s, cache_cap: 1}
events:
  - {message: alice}
  - {command: /stop, chat: alice}
  - {delegate: alice}
  - {message: alice}
"""


def test_a_child_written_before_its_parent_names_it_once_the_parent_row_lands() -> None:
    scenario = load_text(PARENT_WRITTEN_AFTER_CHILD)
    result = run_scenario(scenario, ReferenceGateway(), "reference")
    assert result.passed and result.verdicts["I8"].status == "pass"
    final = [r for r in result.records if r.kind == "durable"][-1]
    assert final.d("sessions")["s2"]["parent"] == "s1"
    broken = run_scenario(scenario, NeverLinksAgain(), "never-links-again")
    assert broken.verdicts["I8"].status == "fail"
    assert "delegate child s2 (task t2 of chat alice at 08:50, while its session was s1) is stored naming no parent" in \
        broken.verdicts["I8"].violations[0].message


def test_a_child_naming_an_earlier_session_of_its_chat_fails_i8() -> None:
    """The audit of lazy gateways (2026-12-05): which parent a child's row named was not judged,
    and a gateway naming the chat's first session for every child passed everything. Catalog 85:
    after /new, t5 is delegated from alice's s4; its child s5 names s4. Named s1 it fails, and
    the zoo's `delegate-parent-is-first-session` does so."""
    from pathlib import Path

    from check_logs import edit, find, messages

    from reference_impl.variants import make
    from sim.loader import load_file

    path = Path(__file__).resolve().parent.parent / "conformance" / "catalog" / "85-delegates-across-sessions-and-chats.yaml"
    records = run_scenario(load_file(path), ReferenceGateway(), "reference").records
    final = find(records, "durable", label="final")
    sessions = {sid: dict(body) for sid, body in records[final].d("sessions").items()}
    assert sessions["s5"]["parent"] == "s4" and messages(records, "I8") == []
    sessions["s5"]["parent"] = "s1"
    assert messages(edit(records, final, detail={"sessions": sessions}), "I8") == [
        "delegate child s5 (task t5 of chat alice at 09:03:10, while its session was s4) is stored naming s1, an earlier "
        "session of the chat, as its parent"]
    bad = run_scenario(load_file(path), make("delegate-parent-is-first-session"), "delegate-parent-is-first-session")
    assert bad.verdicts["I8"].status == "fail"
