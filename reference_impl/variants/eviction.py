"""Agent-cache bugs: eviction (LRU cap, idle sweep) treated as, or mistaken for, a boundary.

The cluster in seed 000 (hermes-agent #11205, #31856, #54293, #57378). The reference
flushes an evicted agent's transcript and provider buffers, ends nothing, and reads an
ending session's transcript from the store when its agent is gone.
"""

from __future__ import annotations

from reference_impl.cache import Agent
from reference_impl.gateway import ReferenceGateway
from reference_impl.store import Row


class LruEvictDropsUnflushed(ReferenceGateway):
    """lru-evict-drops-unflushed — hermes-agent #57378 (seed 000):

    "If cache pressure (the LRU cap) soft-evicts a finalizable session's agent BEFORE it
    expires, the watcher later finds no cached agent and ``on_session_end`` is silently
    skipped — memory providers never see the transcript (#11205, LRU-cap variant)."

    Here: the LRU cap releases the agent without flushing anything; its memory providers'
    buffered turns go with it (in hermes the provider lives on the agent).
    """

    def let_go(self, agent: Agent, why: str) -> None:
        if why != "lru_cap":
            super().let_go(agent, why)
            return
        for provider in self.volatile.memory.providers:
            provider.buffers.pop(agent.session, None)  # released, not flushed


class IdleSweepEvictsBeforeDailyExpiry(ReferenceGateway):
    """idle-sweep-evicts-before-daily-expiry — hermes-agent #57378 / #31856 (seed 000):

    "Check whether the session has actually expired in the session store. If it hasn't
    (e.g. daily-reset mode where the reset fires hours after the user's last message), keep
    the agent in cache so the session-store expiry watcher can still find it and call
    on_session_end() with the live transcript."

    Here: the idle sweep evicts as the reference does, but the boundary reads the
    transcript only from a live agent; after the sweep the daily expiry ends the session
    with an empty transcript.
    """

    def stored_transcript(self, session: str) -> list[Row]:
        return []  # no store fallback


class IdleSweepNeverReapsNone(ReferenceGateway):
    """idle-sweep-never-reaps-none — hermes-agent #57378 over #31856 (seed 000):

    "BUT only defer when the watcher will EVER finalize this session. For a mode == "none"
    session the watcher never fires (is_session_finalizable() is False), so deferring would
    pin the agent in cache for the gateway's entire lifetime — the exact leak this idle
    sweep exists to relieve."

    Here: the idle sweep keeps every agent whose session has not expired, with no
    finalizable check, so a mode-none session's agent is never reaped.
    """

    def evict(self, agent: Agent, why: str) -> None:
        if why == "idle_ttl":
            route = self.store.route(agent.chat_key)
            live = route is not None and route.session_id == agent.session and not route.ended
            if live and route is not None and not self.expiry_reason(route):
                return  # keep agent — the session hasn't expired (and, under 'none', never will)
        super().evict(agent, why)


class EvictCommitThenExpiryDoubleEnd(ReferenceGateway):
    """evict-commit-then-expiry-double-end — hermes-agent #57378 (seed 000):

    "We hold the live, fully-scoped agent right now, so commit its end-of-session memory
    extraction here ... Only fires for sessions the expiry watcher will eventually finalize
    (finite reset policy)." — and the watcher does finalize them later.

    Here: the LRU cap commits on_session_end for a finalizable, unexpired session before
    evicting it; the expiry then delivers the session's end a second time.
    """

    def evict(self, agent: Agent, why: str) -> None:
        route = self.store.route(agent.chat_key)
        live = route is not None and route.session_id == agent.session and not route.ended
        finalizable = live and route is not None and self.policy_for(route).mode != "none"
        if why == "lru_cap" and finalizable and route is not None and not self.expiry_reason(route):
            self.volatile.memory.end_session(agent.session, agent.rows)  # commit before the soft evict
        super().evict(agent, why)


class IdleSweepOnlyNone(ReferenceGateway):
    """idle-sweep-only-none — the fifth audit of lazy gateways (2026-12-06), CONTRACT I7:

    "an agent of a never-ending (`none`) session is still reaped after the idle TTL" — read
    as "only": the sweep reaps the agents of `none` sessions, since "the others end at their
    boundary". A lazy chat's session past its boundary ends only at the chat's next message,
    so it is never-ending too.

    Here: the idle sweep passes over a chat's agent unless its chat's policy is `none` (a
    delegate child is still reaped); an eager end drops the agent, a lazy chat's never does.
    """

    def evict(self, agent: Agent, why: str) -> None:
        if why == "idle_ttl" and agent.kind == "chat":
            route = self.store.route(agent.chat_key)
            if route is not None and self.policy_for(route).mode != "none":
                return  # "the others end at their boundary"
        super().evict(agent, why)


class SweepKeepsOwed(ReferenceGateway):
    """sweep-keeps-owed — CONTRACT I7 ("an agent of a never-ending (`none`) session is still
    reaped after the idle TTL"; the eighth audit of lazy gateways, 2026-12-06):

    A gateway whose idle sweep spares an agent while a memory backend still refuses its
    turns, as if the agent were what keeps them: the outbox does, and the provider retries.
    A backend down longer than the TTL keeps the agent cached past its deadline.

    Here: the sweep skips the agents of sessions a provider owes a failed write.
    """

    def sweep(self, now: int) -> None:
        owed = {session for provider in self.volatile.memory.providers for session in provider.owed}
        for agent in self.volatile.cache.stale(now):
            if agent.session not in owed:
                self.evict(agent, "idle_ttl")
