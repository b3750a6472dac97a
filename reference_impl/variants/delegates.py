"""Delegate bugs no check saw (sessiongate's audit of lazy gateways, 2026-12-05).

CONTRACT, Words: "delegate child: a session spawned by a chat's session for a delegated task; it
has its own row (naming its parent) and no memory". The reference spawns one child per parent
session (`child_agent`), sends its result to the task's chat, and ends a session with its own
transcript. Each variant here undoes one, and catalog 85 catches all three.
"""

from __future__ import annotations

import re

from reference_impl.cache import Agent
from reference_impl.gateway import Pending, ReferenceGateway
from reference_impl.store import Route
from sim.scenario import Chat


class DelegateChildKeyedByChat(ReferenceGateway):
    """delegate-child-keyed-by-chat — CONTRACT Words ("spawned by a chat's session"), I6:

    Here: the subagent cache is keyed by the chat, not by the spawning session, so after `/new`
    (or an expiry) the chat's delegated tasks go on in the previous session's child: its context
    and its row's parent are the ended session's.
    """

    def child_agent(self, chat: Chat, key: str, parent: str) -> Agent:
        child = self.volatile.children.get(key) or self.stored_child(parent)
        if child is not None:
            return self.volatile.cache.get(child) or self.load_agent(child, chat.name, key, "delegate", parent)
        session = self.store.new_session_id()
        self.volatile.children[key] = session
        agent = Agent(session, chat.name, key, "delegate", parent, last_activity=self.h.clock.now())
        self.volatile.cache.put(agent)
        return agent


class DelegateResultToNewestChat(ReferenceGateway):
    """delegate-result-to-newest-chat — CONTRACT Liveness and I6 ("no session serves two chats"),
    as `replies-to-newest-chat` for subagent results only:

    Here: a delegated task's result goes out through the chat of the newest turn in flight, so
    while another chat's turn runs, alice's subagent result is posted into bob's chat.
    """

    def send_reply(self, pending: Pending) -> None:
        if not pending.delegate:
            super().send_reply(pending)
            return
        newest = next(reversed(self.volatile.busy_chats.values()), None)
        current = self.volatile.inflight.get(newest) if newest is not None else None
        chat = current.chat.name if current is not None else pending.chat.name
        self.h.platform.send_reply(chat, pending.session, pending.reply or "")


class EndCarriesDelegateTurns(ReferenceGateway):
    """end-carries-delegate-turns — I1 ("carrying the session's acknowledged turns"), CONTRACT
    Words (a delegate child has "no memory"):

    Here: a session's end hands memory its own transcript plus its subagent's, so the child's
    task and result reach the user's memory under the parent.
    """

    def end_memory(self, session: str, reason: str, agent: Agent | None) -> None:
        rows = list(agent.rows if agent is not None else self.stored_transcript(session))
        child = self.volatile.children.get(session) or self.stored_child(session)
        if child is not None:
            rows += self.store.transcript(child)
        self.volatile.memory.end_session(session, rows)


class DelegateParentIsFirstSession(ReferenceGateway):
    """delegate-parent-is-first-session — CONTRACT Words ("spawned by a chat's session"; its row
    names its parent), I8 (found by sessiongate's audit of lazy gateways, 2026-12-05: which
    parent a child's row named was not judged).

    Here: a delegate child's row names the chat's first stored session as its parent (a look-up
    by chat, not by the session that spawned it); the child itself runs where the reference's
    does. Deleting the live session then leaves its child behind.
    """

    def create_row(self, agent: Agent) -> None:
        if agent.kind == "delegate" and not agent.created:
            first = self.store.db.execute(
                "SELECT id FROM sessions WHERE chat = ? AND kind = 'chat' ORDER BY started, id LIMIT 1", (agent.chat,)
            ).fetchone()
            if first is not None:
                agent.parent = first[0]
        super().create_row(agent)


class DelegateResultDropped(ReferenceGateway):
    """delegate-result-dropped — contract, I9 ("a delegated task the LLM was asked for gets its
    result"; found by sessiongate's audit of lazy gateways, 2026-12-06: I9 judged user turns
    only, and I6 only the results that were sent).

    Here: a subagent's answer is dropped when it comes: never stored, never sent to the chat.
    """

    def deliver_reply(self, request_id: str, text: str) -> None:
        pending = self.volatile.inflight.get(request_id)
        if pending is not None and pending.delegate:
            del self.volatile.inflight[request_id]
            agent = self.agent_of(pending)
            agent.busy = self.still_busy(agent.session)
            return
        super().deliver_reply(request_id, text)


class DelegateOpensSession(ReferenceGateway):
    """delegate-opens-session — docs/gateway-authors.md ("A delegate with no live session is
    skipped ... Never open or switch a chat session for a delegate"; found by sessiongate's
    fourth audit of lazy gateways, 2026-12-06: no catalog scenario delegated after `/new`).

    Here: a delegated task for a chat with no live session (none yet, or the last one ended)
    opens a session for it, as a message would, and runs in a child of that one: a `/resume`
    after it leaves that session instead of reopening the one the user ended.
    """

    def delegate(self, chat: Chat, text: str) -> None:
        key = self.route_key(chat)
        route = self.store.route(key) or Route(key, chat.name, None, None, None, None, False)
        if route.session_id is None or route.ended:
            now = self.h.clock.now()
            self.open_session(route, chat, now)
            route.last_user = route.last_user or now  # a delegate moves no clock: the last message's
            self.store.save_route(route)
        super().delegate(chat, text)


class FinalizesDelegateChild(ReferenceGateway):
    """finalizes-delegate-child — contract I1 ("A delegate child gets none"; the sixth audit of
    lazy gateways, 2026-12-06):

    Here: a session's finalize also finalizes its subagent's child, as if the child's
    conversation ended with its parent's.
    """

    def finalize(self, session: str, reason: str) -> None:
        super().finalize(session, reason)
        child = self.store.db.execute(
            "SELECT id FROM sessions WHERE parent_id = ? AND kind = 'delegate' ORDER BY id LIMIT 1", (session,)).fetchone()
        if child is not None:
            self.h.hooks.on_session_finalize(child[0], reason)


class ResetsDelegateChild(ReferenceGateway):
    """resets-delegate-child — contract I5 (an `on_session_reset` names the chat session it
    begins; a child has no boundary of its own; the sixth audit of lazy gateways, 2026-12-06):

    Here: spawning a subagent's child fires `on_session_reset` for it, as a new chat session's
    start does.
    """

    def child_agent(self, chat: Chat, key: str, parent: str) -> Agent:
        fresh = self.volatile.children.get(parent) is None and self.stored_child(parent) is None
        agent = super().child_agent(chat, key, parent)
        if fresh:
            self.h.hooks.on_session_reset(agent.session)
        return agent


class CapExcludesChildren(ReferenceGateway):
    """cap-excludes-children — CONTRACT I7 (the cap: "a delegate child's included"); found by
    sessiongate's sixth audit of lazy gateways (2026-12-06: no catalog scenario ran a delegate
    under a cache cap).

    Here: the LRU cap neither counts nor evicts delegate children ("they are short-lived"): only
    the idle sweep reaps them, and a chat's agent and its child sit cached over the cap.
    """

    def enforce_cap(self) -> None:
        cache = self.volatile.cache
        idle = [agent for agent in cache.agents.values() if agent.kind != "delegate" and not agent.busy]
        for agent in idle[: max(0, len(idle) - cache.cap)]:
            self.evict(agent, "lru_cap")
        self.schedule_tick()


class ChildParentFromCache(ReferenceGateway):
    """child-parent-from-cache — CONTRACT I8 (a delegate child's row names its parent; the
    seventh audit of lazy gateways, 2026-12-06):

    "a child whose chat's session at the task's arrival is stored names a parent".

    Here: the child's parent is read, when its row is first written, off the parent's agent in
    the cache (a weak reference: "no cycle between agents"); a parent whose agent the idle sweep
    or the cap let go while the child ran is not found, and the child's row names none.
    """

    def create_row(self, agent: Agent) -> None:
        if agent.kind == "delegate" and not agent.created and agent.parent not in self.volatile.cache.agents:
            self.store.upsert_session(agent.session, agent.chat, None, agent.kind, self.h.clock.now())
            agent.created = True
            return
        super().create_row(agent)


class DelegateResultFreesChat(ReferenceGateway):
    """delegate-result-frees-chat — CONTRACT, Boundaries (the seventh audit of lazy gateways,
    2026-12-06):

    "A command that arrives while a turn is in flight takes effect when that turn's reply is
    delivered (never mid-turn)".

    Here: any reply hands the chat on ("the agent answered: take the next message"), a delegated
    task's result included: a result that comes while the chat's own turn runs starts what waits
    behind that turn, and a `/new` there ends the session under it (the running agent carries on
    with its turn, which lands in the ended session).
    """

    def acknowledge(self, request_id: str, pending: Pending, agent: Agent) -> None:
        super().acknowledge(request_id, pending, agent)
        if pending.delegate and pending.key in self.volatile.busy_chats:
            cache = self.volatile.cache
            running = [a for a in cache.agents.values() if a.busy]
            self.hand_on(pending.key)
            for other in running:
                if cache.get(other.session) is None:
                    cache.put(other)  # the running agent carries on with its turn


class GroupDelegateFirstUser(ReferenceGateway):
    """group-delegate-first-user — CONTRACT Words (two users of one group are two chats), I6 (a
    delegated task runs in a child of its chat's live session); the eighth audit of lazy
    gateways, 2026-12-06 (caught only by generated seeds 247 and dense 1):

    A gateway that runs a group's delegated task from the group's conversation, as if the group
    had one: the task of one user is delegated from another user's session.

    Here: a delegate runs from the session of the group's route that sorts first (its first
    user), whichever user delegated it.
    """

    def delegating_session(self, route: Route | None) -> str | None:
        if route is not None:
            group = _without_user(route.chat_key)
            route = next((r for r in self.store.routes() if _without_user(r.chat_key) == group), route)
        return super().delegating_session(route)


def _without_user(key: str) -> str:
    """A route key (`reference_impl.policy.chat_key`) without its user part."""
    return re.sub(r":user=[^:@]*", "", key)
