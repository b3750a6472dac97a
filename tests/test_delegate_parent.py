"""I8: a delegate child's row names its parent. Proven both ways on generated seed 27, where a
delegated task arrives with its chat's session past its boundary: the reference skips it (no
live session to spawn it), and a gateway that runs it anyway in a child of no session fails."""

from __future__ import annotations

from conformance.harness.runner import run_scenario
from conformance.observations import first_turn
from reference_impl import ReferenceGateway
from reference_impl.state import Pending
from reference_impl.tables import Row
from sim.generate import scenario_for_seed
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
