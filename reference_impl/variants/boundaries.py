"""Boundary bugs: an end or finalize skipped, fired at a non-boundary, or out of order.

Each class is the reference gateway with one method put back the way a reported gateway
had it. The docstring quotes the report.
"""

from __future__ import annotations

from reference_impl.cache import Agent
from reference_impl.gateway import ReferenceGateway
from reference_impl.memory import BatchingProvider, Turn
from reference_impl.store import Route
from sim.scenario import Chat

EXPIRY_REASONS = ("idle", "daily")


class ExpirySkipsEndWithoutAgent(ReferenceGateway):
    """expiry-skips-end-without-agent — hermes-agent #11205 (seed 000):

    "MemoryProvider.on_session_end() never called on gateway session expiry" — "the watcher
    tears down whatever agent it finds in ``_agent_cache`` at expiry time. If cache pressure
    (the LRU cap) soft-evicts a finalizable session's agent BEFORE it expires, the watcher
    later finds no cached agent and ``on_session_end`` is silently skipped".

    Here: an expiry whose agent is no longer cached fires finalize but no memory end.
    """

    def end_memory(self, session: str, reason: str, agent: Agent | None) -> None:
        if reason in EXPIRY_REASONS and agent is None:
            return  # no agent to tear down: no on_session_end
        super().end_memory(session, reason, agent)


class IdleExpiryNoFinalize(ReferenceGateway):
    """idle-expiry-no-finalize — hermes-agent #14981 (seed 000):

    "The on_session_finalize hook is not being fired when gateway sessions expire due to
    configured idle time." (fixed by #15132, "fire on_session_finalize on idle expiry").

    Here: an idle expiry delivers the memory end and records the boundary as finished, but
    never fires on_session_finalize.
    """

    def finalize(self, session: str, reason: str) -> None:
        if reason != "idle":
            super().finalize(session, reason)


class EndAfterSwitch(ReferenceGateway):
    """end-after-switch — seed 001 (hermes-agent #88944 fix PR):

    "MemoryManager.commit_session_boundary_async (agent/memory_manager.py:927) deliberately
    delivers on_session_end strictly before on_session_switch, and its docstring names
    'double-ingest of the old turn buffer' as the hazard it is guarding against."

    Here: /resume announces the switch to memory first and ends the session left behind
    after it.
    """

    def switch_back(self, route: Route, left: str | None, target: str) -> None:
        if left is None:  # nothing left behind: no end to misorder
            super().switch_back(route, left, target)
            return
        self.volatile.memory.switch(left, target)  # the successor is announced first...
        self.end_session(route, "switch")  # ...and the left session's end comes after it
        self.enter_life(route, left, target)


class ShutdownEndsSessions(ReferenceGateway):
    """shutdown-ends-sessions — hermes-agent #12917 (seed 000, closed unmerged):

    "fix(gateway): clean up cached agents on shutdown (#11205)" — tearing agents down at
    SIGTERM fires on_session_end, though "Soft eviction ... deliberately keeps the session
    resumable and does NOT fire on_session_end — that hook is reserved for the true session
    boundary".

    Here: SIGTERM ends every cached chat session in memory; after the restart each resumes
    under the same id and ends again at its real boundary.
    """

    def sigterm(self) -> None:
        for agent in list(self.volatile.cache.agents.values()):
            if agent.kind == "chat":
                self.volatile.memory.end_session(agent.session, agent.rows)
        super().sigterm()


class SyncAfterEnd(ReferenceGateway):
    """sync-after-end — seed 001 (hermes-agent #88944 fix PR), CONTRACT I5:

    "on_session_end comes after every sync_turn of its turns" — the hazard named by
    commit_session_boundary_async. A gateway that hands the chat's queue on (a /new waiting
    behind the turn) before its memory sync delivers the turn's sync_turn after the end.

    Here: a completed turn runs the commands waiting right behind it first and syncs memory
    after (the messages behind them wait for the chat to be handed on, as in the reference).
    """

    def hand_memory(self, key: str, turn: Turn) -> list[BatchingProvider]:
        queue = self.volatile.queues.get(key)
        while queue and queue[0][0] == "command":  # a queued /new ends the session here...
            _kind, payload, _arrival = queue.popleft()
            self.run_command(*payload)
        if queue is not None and not queue:
            del self.volatile.queues[key]
        self.volatile.memory.ship(turn.session, self.volatile.memory.owe(turn))  # ...before this
        return []


class EndRepliesApart(ReferenceGateway):
    """end-replies-apart — CONTRACT I1: "carrying the session's acknowledged turns in order, each
    with its reply" (found by sessiongate's audit of lazy gateways: the end record listed the
    user messages and the replies it carried, not how they were paired).

    Here: the end's transcript is built from two lists, every user message and then every reply:
    each turn is there whole, but a provider pairing a message with the reply after it pairs
    the session's first message with its last reply.
    """

    def end_memory(self, session: str, reason: str, agent: Agent | None) -> None:
        rows = agent.rows if agent is not None else self.stored_transcript(session)
        self.volatile.memory.end_session(session, [r for r in rows if r.role == "user"] + [r for r in rows if r.role != "user"])


class EndCarriesTagsOnly(ReferenceGateway):
    """end-carries-tags-only — CONTRACT I1: "carrying the session's acknowledged turns", as the
    user said them (found by sessiongate's audit of lazy gateways, 2026-12-06: the end record
    read its transcript's user messages by their `[tN]` tags alone).

    Here: the end's transcript carries each user message as its tag, the words cut off; the
    replies, the store and memory keep everything.
    """

    def end_memory(self, session: str, reason: str, agent: Agent | None) -> None:
        rows = agent.rows if agent is not None else self.stored_transcript(session)
        self.volatile.memory.end_session(session, [r._replace(content=r.content.split(" ", 1)[0]) if r.role == "user"
                                                   else r for r in rows])


class ResetNamesEndedSession(ReferenceGateway):
    """reset-names-ended-session — CONTRACT, Words: "plugin hooks: ... on_session_reset(new_id)"
    (found by sessiongate's fourth audit of lazy gateways, 2026-12-06: I5 ordered a reset hook
    only when it named the successor, so one naming the session just ended passed everything).

    Here: the reset hook is told the id of the session that ended, not of the one that begins:
    a reset plugin resets the old conversation and never hears of the new one.
    """

    def announce_reset(self, previous: str, session: str) -> None:
        self.h.hooks.on_session_reset(previous)


class AnchorsAtAdmission(ReferenceGateway):
    """anchors-at-admission — CONTRACT, Boundaries: "daily (the last user message is before the
    most recent at_hour local boundary)"; a session begins when its first message arrived
    (found by sessiongate's fourth audit of lazy gateways, 2026-12-06: no catalog scenario or
    generated seed had a new session's first message wait behind a turn across the hour).

    Here: a new session's daily clock starts when its first message is taken up, not when it
    arrived: one that waited behind a turn across 04:00 is kept until the next day.
    """

    def open_session(self, route: Route, chat: Chat, arrival: int) -> None:
        super().open_session(route, chat, self.h.clock.now())


class ResumeKeepsClocks(ReferenceGateway):
    """resume-keeps-clocks — CONTRACT, Boundaries: "/resume ... reopens the chat's previous
    session (a new life of that id, whose idle and daily clocks restart at the resume)" (found by
    sessiongate's fourth audit of lazy gateways, 2026-12-06: no catalog scenario resumed a session
    across a daily boundary, so a gateway that kept the old clocks passed everything).

    Here: a resumed life keeps the chat's clocks as they were (the daily anchor and the last user
    message of the session left behind, or of the one that ended): past an at_hour since then,
    the session /resume went back to is ended again at once.
    """

    def enter_life(self, route: Route, left: str | None, target: str, now: int | None = None) -> None:
        self.store.bump_life(target)
        route.previous_id = left if left is not None else route.previous_id
        route.session_id, route.ended = target, False  # anchor and last_user left as they were
        self.store.save_route(route)


class SuccessorBeginsAtNew(ReferenceGateway):
    """successor-begins-at-new — CONTRACT, Boundaries: a session begins when its first message
    arrived; "Hermes creates the empty successor at /new and goes back from it" (found by
    sessiongate's fourth audit of lazy gateways, 2026-12-06: a gateway that made the successor at
    /new anchored its daily clock there, and no catalog scenario let an at_hour pass between a
    /new and the next message).

    Here: the session opened after a /new is anchored at the /new, not at its first message:
    one that comes after the next at_hour opens a session that is past its boundary already.
    """

    def open_session(self, route: Route, chat: Chat, arrival: int) -> None:
        previous = route.session_id
        if previous is not None:  # when the previous life ended, and why
            end = self.store.db.execute("SELECT t, reason FROM session_ends WHERE session_id = ? AND life = ?",
                                        (previous, self.store.life(previous))).fetchone()
            if end is not None and end[1] == "new":
                arrival = int(end[0])
        super().open_session(route, chat, arrival)


class EmptySessionGetsNoEnd(ReferenceGateway):
    """empty-session-gets-no-end — CONTRACT I1: "For each segment that reached a boundary: exactly
    one memory on_session_end" (found by sessiongate's fourth audit of lazy gateways, 2026-12-06:
    no catalog scenario ended a session that had answered no turn).

    Here: a session whose transcript is empty (its only turn abandoned by `/stop`, SIGTERM or a
    crash) gets no memory end at its boundary: on_session_finalize alone.
    """

    def end_memory(self, session: str, reason: str, agent: Agent | None) -> None:
        if agent.rows if agent is not None else self.stored_transcript(session):
            super().end_memory(session, reason, agent)


class SwitchNamesStalePrevious(ReferenceGateway):
    """switch-names-stale-previous — CONTRACT, Words: the memory provider receives session
    boundaries (`on_session_switch`), here `on_session_switch(old, new)`, `old` the session the
    chat left (found by sessiongate's sixth audit of lazy gateways, 2026-12-06: I5 ordered a
    switch only after the end of the session it named, so one naming none passed everything).

    Here: a rotation tells memory `on_session_switch(old, new)` with `old` read from the route's
    `previous` before it is updated: none at the chat's first rotation, and after it the session
    before the one that ended. A provider keyed by the old id never links the two.
    """

    def announce_switch(self, previous: str, session: str) -> None:
        before: dict[str, str] = self.__dict__.setdefault("before", {})  # session -> the one it took over from
        stale = before.get(previous)  # the route's `previous` as it was: the session before the one left
        before[session] = previous
        self.volatile.memory.switch(stale, session)


class SessionIdReusedAfterDelete(ReferenceGateway):
    """session-id-reused-after-delete — CONTRACT I6 (the seventh audit of lazy gateways,
    2026-12-06):

    "a segment after a boundary has a new session ...; no session serves two segments or two
    chats".

    Here: a new session's id is counted from the rows the store holds (`s{rows + 1}`, moved past
    ids still stored, routed or cached), not from a durable counter: once earlier sessions' rows
    are deleted, a new session gets an id an ended session had.
    """

    def open_session(self, route: Route, chat: Chat, arrival: int) -> None:
        previous = route.session_id
        issued = self.store.new_session_id()  # the counter still moves: delegate children take it
        stored = [sid for sid, _parent in self.store.all_sessions()]
        taken = {*stored, *(r.session_id for r in self.store.routes()), *self.volatile.cache.agents,
                 *self.volatile.children.values()}
        n = len(stored) + 1
        while f"s{n}" in taken:
            n += 1
        session = f"s{n}" if n < int(issued[1:]) else issued
        route.previous_id, route.session_id, route.ended, route.anchor = previous, session, False, arrival
        self.volatile.cache.put(Agent(session, chat.name, route.chat_key, last_activity=self.h.clock.now()))
        if previous is not None:
            self.announce_switch(previous, session)
            self.announce_reset(previous, session)


class ResumeGlobalLast(ReferenceGateway):
    """resume-global-last — CONTRACT, Boundaries (the seventh audit of lazy gateways,
    2026-12-06):

    "`/resume` ends it (reason `switch`) and reopens the chat's previous session".

    Here: `/resume` reopens the session that ended last in the whole gateway (`ORDER BY
    ended_at DESC LIMIT 1`), not the chat's own previous one: after another chat's `/new`,
    one chat's `/resume` takes over the other chat's conversation.
    """

    def resume_previous(self, route: Route) -> None:
        left = None if route.ended else route.session_id
        last = self.store.db.execute(
            "SELECT session_id FROM session_ends WHERE session_id IS NOT ? ORDER BY t DESC, session_id DESC LIMIT 1",
            (left,)).fetchone()
        if last is None:
            self.h.note("resume_skipped", chat=route.chat, reason="no previous session")
            return
        self.switch_back(route, left, last[0])
