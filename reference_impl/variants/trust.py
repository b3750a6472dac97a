"""Bugs the checks once took the gateway's word for (issue #19, mutation survivors).

The design input's Liveness paragraph: a `/stop` abandons the turn in flight, a turn never
acknowledged leaves nothing behind, "busy" is judged from the log, and a delegate is skipped
only when its chat has no live session. The reference does each; each variant here undoes one.
"""

from __future__ import annotations

from reference_impl.cache import Agent
from reference_impl.gateway import Pending, ReferenceGateway
from reference_impl.memory import Turn
from reference_impl.store import Route


class StopIgnored(ReferenceGateway):
    """stop-ignored — CONTRACT Liveness (issue #19, a mutation survivor):

    "no reply after the `/stop` that abandoned it."

    Here: `/stop` is taken and dropped; the turn it should abandon runs on, and its reply is
    delivered, stored and synced as if the user still wanted it.
    """

    def stop_turn(self, key: str) -> None:
        return


class AbandonedTurnKept(ReferenceGateway):
    """abandoned-turn-kept — CONTRACT Liveness (issue #19, a mutation survivor):

    "A turn never acknowledged leaves nothing behind: no stored rows, no place in an
    `on_session_end`."

    Here: a stopped or SIGTERM-interrupted turn's rows stay in the agent's transcript, so the
    next flush stores its user message and the session's end carries it.
    """

    def drop_turn(self, agent: Agent, turn: str) -> None:
        return


class CrashKeepsAdmittedRow(ReferenceGateway):
    """crash-keeps-admitted-row — CONTRACT Liveness, I2 (the sixth audit of lazy gateways):

    "A turn never acknowledged leaves nothing behind: no stored rows, no place in an
    `on_session_end`."

    Here: what the agents hold is on disk when the process dies, as for a gateway that writes
    the user's message when it asks the LLM (so that a crash keeps what the user said) and
    takes it back at a `/stop` or SIGTERM: a crash cannot take it back, and the restart serves
    the chat with a message nobody answered in its transcript (the end carries it too).
    """

    def crash(self) -> None:
        if self.volatile is not None:
            for agent in list(self.volatile.cache.agents.values()):
                self.flush(agent)
        super().crash()


class BusyFlagStuck(ReferenceGateway):
    """busy-flag-stuck — CONTRACT I7 and Liveness (issue #19, a mutation survivor):

    "'Busy' is judged from the log, never from the gateway's own word."

    Here: a finished turn leaves its agent flagged busy, so the idle sweep and the LRU cap pass
    over it forever; `resources()` reports the flag, and a check that believed it saw nothing
    idle to reap.
    """

    def still_busy(self, session: str) -> bool:
        return True


class DelegateAlwaysSkipped(ReferenceGateway):
    """delegate-always-skipped — CONTRACT words (delegate child) and docs/gateway-authors.md
    (issue #19, a mutation survivor):

    "A delegate with no live session is skipped."

    Here: every delegate is skipped with the reference's own `delegate_skipped` note, live
    session or not; a check that accepted the note saw nothing wrong.
    """

    def delegating_session(self, route: Route | None) -> str | None:
        return None  # live session or not


class DelegateSyncedToMemory(ReferenceGateway):
    """delegate-synced-to-memory — CONTRACT words (delegate child: "no memory"), I3 (found by
    sessiongate's audit of lazy gateways: no check looked at what a backend took of a delegate).

    Here: every answered turn is synced to memory, a delegated task's included: the child's
    work lands in the user's memory under the child's session.
    """

    def send_reply(self, pending: Pending) -> None:
        super().send_reply(pending)
        if pending.delegate:  # the reference syncs chat turns only (`complete_turn`)
            agent = self.agent_of(pending)
            user = next(row.content for row in reversed(agent.rows) if row.role == "user" and row.turn == pending.turn)
            turn = Turn(pending.session, pending.turn, user, pending.reply or "")
            self.volatile.memory.ship(turn.session, self.volatile.memory.owe(turn))


class StopTakesFirstBusyChat(ReferenceGateway):
    """stop-takes-first-busy-chat — CONTRACT words ("abandoned … by a `/stop` in its chat") and
    Liveness (found by sessiongate's audit of lazy gateways: no catalog scenario had two chats'
    turns in flight at a /stop).

    Here: the process keeps one notion of "the turn running": a /stop abandons the first busy
    chat's turn, whoever sent it; while another chat's turn is in flight, the wrong user's
    turn is cut and the one given up is answered.
    """

    def stop_turn(self, key: str) -> None:
        busy = sorted(self.volatile.busy_chats)
        super().stop_turn(busy[0] if busy else key)


class StopDropsQueued(ReferenceGateway):
    """stop-drops-queued — contract, Boundaries: "`/stop` alone acts at once: it abandons the turn
    in flight, and a turn waiting behind that one starts after it" (found by sessiongate's fourth
    audit of lazy gateways, 2026-12-06: no catalog scenario had a message waiting behind the turn
    a `/stop` abandoned).

    Here: a `/stop` clears the chat's queue with its turn: what waited behind the turn (messages
    and commands) is dropped, and a message the user sent after the stopped one is never answered.
    """

    def stop_turn(self, key: str) -> None:
        if key in self.volatile.busy_chats:
            self.volatile.queues.pop(key, None)
        super().stop_turn(key)


class StopKillsDelegates(ReferenceGateway):
    """stop-kills-delegates — CONTRACT I9 (a delegated task the LLM was asked for gets its
    result) and Boundaries ("`/stop` ... abandons the turn in flight"); found by sessiongate's
    sixth audit of lazy gateways (2026-12-06: no catalog scenario typed `/stop` while a delegate
    ran).

    Here: `/stop` also abandons the chat's delegated tasks in flight, as if its subagents were
    part of the stopped turn: their results are dropped when they come.
    """

    def stop_turn(self, key: str) -> None:
        for request, pending in list(self.volatile.inflight.items()):
            if pending.delegate and pending.key == key:
                del self.volatile.inflight[request]
                agent = self.agent_of(pending)
                self.drop_turn(agent, pending.turn)
                agent.busy = self.still_busy(agent.session)
        super().stop_turn(key)


class CrashKeepsMemory(ReferenceGateway):
    """crash-keeps-memory — CONTRACT Faults ("crash (SIGKILL)") and the adapter protocol's
    `crash()` ("drop every in-memory object; the durable store survives"), found by
    sessiongate's audit of lazy gateways: in process, a crash is the gateway's own call, and one
    that ignored it kept the dead process's memory, and passed wherever the restart rebuilt it.

    Here: `crash()` does nothing: until the restart, the dead process's agents and timers are
    all still there (its timers after it too).
    """

    def crash(self) -> None:
        return


class StoresTagsOnly(ReferenceGateway):
    """stores-tags-only — CONTRACT I2 ("every acknowledged turn is in the durable store", as the
    user said it and the LLM answered it; found by sessiongate's audit of lazy gateways,
    2026-12-05: the checks read a stored row by its `[tN]` tag alone).

    Here: each row is written as its tag, the words after it dropped (a column cut to its first
    word); the agent's transcript, memory and ends keep the whole text, so only the store lost it.
    """

    def write(self, agent: Agent) -> None:
        append = self.store.append
        self.store.append = lambda session, rows: append(  # type: ignore[method-assign]
            session, [row._replace(content=row.content.split(" ", 1)[0]) for row in rows])
        try:
            super().write(agent)
        finally:
            del self.store.append
