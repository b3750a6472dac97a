"""The reference gateway's agents and their transcripts: the agent cache (the LRU cap, eviction,
loading from the store), and writing what the store lacks, healing a row another surface
deleted (seed 003). A part of `ReferenceGateway` (`reference_impl.gateway`)."""

from __future__ import annotations

import sqlite3
from typing import Literal

from reference_impl.cache import Agent
from reference_impl.state import Pending
from reference_impl.store import Route, StoreLocked, is_foreign_key_error
from sim.scenario import Chat

WriteOutcome = Literal["retry", "written", "owed"]  # after a refused write: write again now, count it written, owe it


class AgentTranscripts:
    """The agent cache and transcript writes (the state they use is `ReferenceGateway`'s)."""

    # -- the agent cache --------------------------------------------------------------

    def enforce_cap(self) -> None:
        """After every turn starts or ends: evict idle agents past the cap, re-arm the watcher
        (the cache asked only when it holds more agents than the cap: most turns it does not)."""
        cache = self.volatile.cache
        if len(cache.agents) > cache.cap:
            for agent in cache.over_cap():
                self.evict(agent, "lru_cap")
        self.schedule_tick()

    def evict(self, agent: Agent, why: str) -> None:
        """Never a boundary: flush the transcript and the providers' buffers, end nothing."""
        self.volatile.cache.pop(agent.session)
        self.let_go(agent, why)
        self.h.note("evict", session=agent.session, why=why)

    def let_go(self, agent: Agent, why: str) -> None:
        """What an evicted agent owes before its memory goes: its transcript to the store (kept
        for a retry if refused), its turns to the memory providers."""
        if not self.release(agent):
            self.volatile.unflushed[agent.session] = agent
        self.volatile.memory.flush(agent.session)

    def load_agent(self, session: str, chat: str, key: str, kind: str = "chat", parent: str | None = None) -> Agent:
        """Rebuild an agent from the store (after eviction or restart)."""
        agent = self.volatile.unflushed.pop(session, None)
        if agent is None:
            rows = self.store.transcript(session)
            agent = Agent(session, chat, key, kind, parent, rows, flushed=len(rows))
        agent.last_activity = self.h.clock.now()
        self.volatile.cache.put(agent)
        return agent

    def route_agent(self, route: Route) -> Agent:
        assert route.session_id is not None
        return self.volatile.cache.get(route.session_id) or self.load_agent(route.session_id, route.chat, route.chat_key)

    def agent_of(self, pending: Pending) -> Agent:
        agent = self.volatile.cache.get(pending.session)
        if agent is None:  # busy agents are never evicted; this is a defect, not a fault
            raise RuntimeError(f"agent of session {pending.session} vanished mid-turn")
        return agent

    def delegating_session(self, route: Route | None) -> str | None:
        """The session a delegate runs from: the chat's live one (None: the delegate is skipped)."""
        return route.session_id if route is not None and not route.ended else None

    def child_agent(self, chat: Chat, key: str, parent: str) -> Agent:
        child = self.volatile.children.get(parent) or self.stored_child(parent)
        if child is not None:
            return self.volatile.cache.get(child) or self.load_agent(child, chat.name, key, "delegate", parent)
        session = self.store.new_session_id()
        self.volatile.children[parent] = session
        agent = Agent(session, chat.name, key, "delegate", parent, last_activity=self.h.clock.now())
        self.volatile.cache.put(agent)
        return agent

    def stored_child(self, parent: str) -> str | None:
        row = self.store.db.execute(
            "SELECT id FROM sessions WHERE parent_id = ? AND kind = 'delegate' ORDER BY started DESC, id DESC LIMIT 1",
            (parent,),
        ).fetchone()
        if row:
            self.volatile.children[parent] = row[0]
        return row[0] if row else None

    # -- writing the transcript (and healing a deleted row: seed 003) --------------------

    def flush(self, agent: Agent) -> bool:
        """Write what the store lacks. One heal retry within the flush; False if refused."""
        if not agent.dirty:
            return True
        for _attempt in range(2):
            try:
                self.write(agent)
                return True
            except (StoreLocked, sqlite3.IntegrityError) as err:
                outcome = self.write_failed(agent, err)
                if outcome != "retry":
                    return outcome == "written"
        return False

    def write_failed(self, agent: Agent, err: sqlite3.Error) -> WriteOutcome:
        """A refused write: after a foreign-key failure, heal a row confirmed gone and write
        again at once; anything else (a locked store, a row still there) leaves it owed, the
        agent dirty and a pending replay pending, for the retry."""
        if isinstance(err, StoreLocked) or not is_foreign_key_error(err):
            return "owed"
        return self.foreign_key_failed(agent)

    def foreign_key_failed(self, agent: Agent) -> WriteOutcome:
        """A write refused by a foreign key: heal a row confirmed gone and write again at once;
        a row still there leaves the write owed."""
        return "retry" if self.heal(agent) else "owed"

    def release(self, agent: Agent) -> bool:
        """The agent's memory is about to go (eviction, idle sweep, end, SIGTERM): the store is
        owed its whole transcript now, not at a next write that may never come (seed 003: a
        session deleted while its chat runs is recreated with the full in-memory transcript).
        A clean agent's row is confirmed first (`confirm_row`)."""
        self.confirm_row(agent)
        return self.flush(agent)

    def confirm_row(self, agent: Agent) -> None:
        """A clean agent's row is checked before its memory goes: `heal` recreates and replays
        it if it is gone (a dirty agent's next write finds out by itself)."""
        if agent.rows and not agent.dirty:
            self.heal(agent)

    def write(self, agent: Agent) -> None:
        if not agent.created:
            if agent.flushed and not agent.replay_pending and not self.store.session_exists(agent.session):
                self.heal(agent)  # history loaded from a row that has since been deleted
            self.create_row(agent)
            if agent.replay_pending:
                self.h.crash_point("heal-recreated")
        start = 0 if agent.replay_pending else agent.flushed
        end = len(agent.rows)
        if agent.kind == "delegate":  # its tasks overlap: another's question may follow the turn being written
            unanswered = {p.turn for p in self.volatile.inflight.values() if p.session == agent.session and p.reply is None}
            end = next((i for i in range(start, end) if agent.rows[i].turn in unanswered), end)
        self.store.append(agent.session, agent.rows[start:end])  # never a row of a turn still in flight
        agent.flushed, agent.replay_pending = end, False

    def create_row(self, agent: Agent) -> None:
        """Upsert the row; a delegate whose parent row is gone is created without it."""
        now = self.h.clock.now()
        try:
            self.store.upsert_session(agent.session, agent.chat, agent.parent, agent.kind, now)
        except sqlite3.IntegrityError as err:
            if not is_foreign_key_error(err):
                raise
            self.parent_refused(agent, now, err)
        agent.created = True

    def parent_refused(self, agent: Agent, now: int, err: sqlite3.IntegrityError) -> None:
        """The row failed a foreign key: a delegate whose parent row is gone (another surface
        deleted it) is created without it; any other failure stands."""
        if not (agent.parent and not self.store.session_exists(agent.parent)):
            raise err
        self.orphan_row(agent, now)

    def orphan_row(self, agent: Agent, now: int) -> None:
        """A delegate child's row without its parent, whose row is not there: a deleted parent
        stays deleted; one not written yet (its turns still in flight) is linked when it is."""
        assert agent.parent is not None
        self.store.orphan_session(agent.session, agent.chat, agent.parent, agent.kind, now)

    def heal(self, agent: Agent) -> bool:
        """The row is confirmed gone: recreate it and replay the whole transcript (kept
        pending until a write succeeds). A foreign-key failure with the row present is not
        a deletion and never replays anything."""
        if self.store.session_exists(agent.session):
            return False
        self.plan_replay(agent)
        self.h.note("heal", session=agent.session)
        return True

    def plan_replay(self, agent: Agent) -> None:
        """The next write recreates the row and replays the whole transcript (pending until a
        write succeeds)."""
        agent.created, agent.replay_pending = False, True
