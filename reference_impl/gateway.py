"""The reference gateway: routing, reset policy, agent cache, memory, shutdown, heal.

It implements `conformance.adapter.Gateway` directly and keeps the whole contract. Every
boundary goes through `end_session`, which reads the transcript it owes from the agent or
the store, fires memory `on_session_end` then `on_session_finalize`, and records both in the
store so a restart never repeats or skips them. The bug zoo (`reference_impl.variants`)
overrides one method at a time to put a reported bug back.
"""

from __future__ import annotations

import sqlite3
from collections import deque
from dataclasses import dataclass
from operator import attrgetter
from typing import Any

from conformance.adapter import Harness, Inbound, Profile
from conformance.observations import DurableState, Resources, StoredSession, first_turn
from reference_impl.cache import Agent, AgentCache
from reference_impl.memory import BatchingProvider, MemoryManager, Turn
from reference_impl.policy import ExpiryQueue, ResetPolicyEvaluator, chat_key
from reference_impl.store import Route, Row, Store, StoreLocked, is_foreign_key_error
from sim.clock import MINUTE, SECOND
from sim.engine import Timer
from sim.scenario import Chat, GatewayConfig, ProviderSpec, ResetPolicy

_cancelled = attrgetter("cancelled")
SWEEP_INTERVAL = 5 * MINUTE  # idle sweeps in lazy mode, where there is no watcher
FLUSH_RETRY = SECOND
# Where durable and volatile state can part inside a step (`Harness.crash_point`, FDB's BUGGIFY).
CRASH_POINTS = frozenset({
    "batch-shipped",  # a batching provider's backend took a batch; its watermark is not saved
    "end-recorded",  # a session's end is recorded; the routing entry still points at it
    "route-rotated",  # the routing entry is rotated; the end hooks have not fired
    "heal-recreated",  # a deleted row is recreated; the transcript replay is not written
    "rows-chunk-written",  # a long write has committed some chunks of rows in its transaction
    "shutdown-flushing",  # SIGTERM has flushed some agents; others still hold turns
})


@dataclass(slots=True)
class Pending:
    """A turn in flight: asked of the LLM, not yet answered."""

    chat: Chat
    key: str
    session: str
    turn: str
    delegate: bool = False
    reply: str | None = None  # set when the reply is in but the store refused the write


class ReferenceGateway:
    """A clean gateway that passes every check. Registered as `reference`."""

    def __init__(self, db_path: str = ":memory:") -> None:
        self.db_path = db_path
        self.running = False

    # -- adapter protocol: lifecycle ---------------------------------------------------

    def profile(self, config: GatewayConfig) -> Profile:
        """A reply goes out as soon as its turn is written: the LLM's latency, plus one write
        retry where a locked store held it (I9 restarts the bound at the lock's end)."""
        reply_within = config.turn_latency + FLUSH_RETRY
        # `reset: default`: the reference has no releases, so its default is the documented one
        # (docs/scenarios.md, Defaults: {mode: none}). Reported only when asked: other logs read as before.
        default = ResetPolicy() if config.reset_default else None
        if config.watcher_interval is None:
            # An eager chat in a lazy gateway is watched by the idle sweep's timer: owed within its period.
            latency = SWEEP_INTERVAL if any(mode == "eager" for _, mode in config.finalization_by_chat) else 0
            return Profile("lazy", latency, crash_durable=True, sweep_interval=SWEEP_INTERVAL, reply_within=reply_within,
                           reset_default=default, crash_points=CRASH_POINTS)
        return Profile("eager", config.watcher_interval, crash_durable=True, sweep_interval=config.watcher_interval,
                       reply_within=reply_within, reset_default=default, crash_points=CRASH_POINTS)

    def start(self, config: GatewayConfig, harness: Harness) -> None:
        self.config, self.h = config, harness
        self.policies: dict[str, ResetPolicy] = {}  # chat key -> its reset policy under `config`
        self.store = self.make_store()  # the disk: it outlives crashes
        self.store.crash_point = harness.crash_point
        self.boot()

    def make_store(self) -> Store:
        """The durable store (the bug zoo swaps in a broken one here)."""
        return Store(self.h.clock.now, self.db_path)

    def boot(self) -> None:
        """Build every in-memory object from the store (first start and every restart)."""
        self.policy = self.make_policy()
        self.cache = AgentCache(self.config.cache_cap, self.config.idle_ttl)
        self.unflushed: dict[str, Agent] = {}  # evicted agents whose write the store refused
        self.inflight: dict[str, Pending] = {}
        self.busy_chats: dict[str, str] = {}  # chat key -> request id
        self.queues: dict[str, deque[tuple[str, Any, int]]] = {}
        self.due_chats: set[str] = set()  # chats whose waiting commands the store holds as due
        self.children: dict[str, str] = {}  # parent session -> delegate child session
        self.timers: list[Timer] = []  # retries of refused writes
        self.tick_timer: Timer | None = None
        self.tick_origin = self.h.clock.now()
        self.command_time: int | None = None  # while a command cut by a crash is finished: when it took effect
        self.expiries = ExpiryQueue()
        self.store.take_saved_routes()
        self.track_expiries(self.store.routes())
        providers = [self.make_provider(spec) for spec in self.config.providers]
        self.memory = MemoryManager(self.h.recorder, providers, self.store)
        self.running = True
        self.memory.recover()  # first: what an end interrupted by a crash owed its backends goes before the end
        self.finish_interrupted_ends()
        self.finish_commands()
        self.schedule_tick()

    def make_policy(self) -> ResetPolicyEvaluator:
        """The reset-policy rules, in the gateway's local zone."""
        return ResetPolicyEvaluator(self.h.clock.zone)

    def make_provider(self, spec: ProviderSpec) -> BatchingProvider:
        """One configured memory provider (the bug zoo swaps in a broken one here)."""
        return BatchingProvider(spec.name, spec.retain_every_n_turns, self.h.backends[spec.name], self.store,
                                self.retry_memory_at)

    def retry_memory_at(self, when: int) -> None:
        """Retry owed memory writes at `when` (a slow backend's completion time)."""
        now = self.h.clock.now()
        self.timers = [t for t in self.timers if not t.cancelled and t.when > now]  # forget fired retries
        self.timers.append(self.h.scheduler.call_at(when, self.retry_memory))

    def retry_memory(self) -> None:
        if self.running:
            self.memory.retry()

    def sigterm(self) -> None:
        """Interrupt turns in flight (and say so), flush everything, end nothing."""
        self.stop_timers()
        for pending in self.inflight.values():
            self.h.note("interrupted", session=pending.session, turn=pending.turn)
            agent = self.cache.get(pending.session)
            if agent is not None:
                self.drop_turn(agent, pending.turn)
        for key in sorted(self.queues):
            for kind, payload, _arrival in self.queues[key]:
                chat = payload.chat if kind == "message" else payload[0]
                self.h.note("interrupted", chat=chat.name, queued=kind)
        for index, agent in enumerate([*self.cache.agents.values(), *self.unflushed.values()]):
            if index:
                self.h.crash_point("shutdown-flushing")
            self.release(agent)
            self.memory.flush(agent.session)
        self.memory.shutdown()
        self.running = False

    def crash(self) -> None:
        """SIGKILL: every object but the store (the disk) is gone; no hook runs. A crash point
        may have cut a step (or a restart's boot) anywhere: what it half-built goes too, and the
        store keeps its database only, not its read caches."""
        if "tick_timer" in self.__dict__:
            self.stop_timers()
        self.running = False
        for name in ("cache", "unflushed", "inflight", "busy_chats", "queues", "due_chats", "children", "memory"):
            self.__dict__.pop(name, None)
        self.store.reopen()

    def restart(self, config: GatewayConfig | None = None) -> None:
        """Rebuild from the store; under `config` when the restart changes it: every entry is
        judged by the policy it brings from now on (the expiries `boot` queues included)."""
        if config is not None:
            self.config, self.policies = config, {}
        self.boot()

    def close(self) -> None:
        """The run is over (its last `durable_state` read): the database and its read caches
        go now, not whenever the gateway object does, so a long run's judging does not carry
        them (every row of 10^6 turns, hundreds of MB)."""
        store = self.__dict__.pop("store", None)
        if store is not None:
            store.db.close()

    def stop_timers(self) -> None:
        for timer in [*self.timers, *([self.tick_timer] if self.tick_timer else [])]:
            timer.cancel()
        self.timers, self.tick_timer = [], None

    def schedule_tick(self) -> None:
        """Set the watcher's next tick: the first tick of its grid (every interval since boot)
        at which something is due. Ticks with nothing to do are skipped, which changes
        nothing: expiry, idleness and pending retries only become due as time passes."""
        if not self.running:
            return
        now, interval = self.h.clock.now(), self.config.watcher_interval or SWEEP_INTERVAL
        timer = self.tick_timer
        if timer is not None and not timer.cancelled and timer.when - interval <= now:
            return  # the next tick is the first one after now: nothing can be due sooner
        due = self.next_due()
        if due is None:
            return
        steps = -(-(max(due, now + 1) - self.tick_origin) // interval)
        when = self.tick_origin + steps * interval
        if self.tick_timer is not None and not self.tick_timer.cancelled and self.tick_timer.when <= when:
            return
        if self.tick_timer is not None:
            self.tick_timer.cancel()
        self.tick_timer = self.h.scheduler.call_at(when, self.tick)

    def next_due(self) -> int | None:
        """The earliest instant a tick would have work: an expiry, a stale agent, a retry."""
        now = self.h.clock.now()
        due: list[int] = []
        if self.unflushed or any(p.owed for p in self.memory.providers):
            due.append(now)
        idle = self.cache.oldest_idle_activity()
        if idle is not None:
            due.append(idle + self.config.idle_ttl + 1)
        self.track_expiries(self.store.take_saved_routes())
        expiry = self.expiries.earliest()
        if expiry is not None:
            due.append(expiry)
        return min(due, default=None)

    def watched(self, route: Route) -> bool:
        """Whether the watcher ends this chat's session at its boundary (eager), or leaves it
        to the chat's next message (lazy): the chat's own mode, else the gateway's."""
        mode = self.config.finalization_for(route.chat)
        return self.config.watcher_interval is not None if mode is None else mode == "eager"

    def track_expiries(self, routes: list[Route]) -> None:
        """Keep `expiries` current with the routes written since it last looked (watched
        chats only: no watcher ends a lazy chat's session, so no expiry of its is due)."""
        for route in routes:
            instant = None
            if self.watched(route) and route.session_id and not route.ended and route.anchor is not None \
                    and route.last_user is not None:
                instant = self.policy.expiry_instant(self.policy_for(route), route.anchor, route.last_user)
            self.expiries.set(route.chat_key, instant)

    # -- adapter protocol: inbound ---------------------------------------------------------

    def deliver_message(self, message: Inbound) -> None:
        key = self.route_key(message.chat)
        if key in self.busy_chats or self.queues.get(key):
            self.queues.setdefault(key, deque()).append(("message", message, self.h.clock.now()))
            return
        self.start_turn(message, self.h.clock.now())

    def deliver_command(self, chat: Chat, command: str) -> None:
        key = self.route_key(chat)
        if command == "/stop":
            self.stop_turn(key)
            return
        if key in self.busy_chats or self.queues.get(key):  # never mid-turn: after the reply
            self.queues.setdefault(key, deque()).append(("command", (chat, command), self.h.clock.now()))
            return
        self.run_command(chat, command)

    def deliver_reply(self, request_id: str, text: str) -> None:
        pending = self.inflight.get(request_id)
        if pending is None:  # stopped by /stop or lost with a restart
            return
        agent = self.agent_of(pending)
        # Beside its own user row: a delegate child may have another turn's question after it,
        # still in flight, which no write may store (a turn never acknowledged leaves nothing).
        at = next((i + 1 for i in range(len(agent.rows) - 1, -1, -1)
                   if agent.rows[i].turn == pending.turn and agent.rows[i].role == "user"), len(agent.rows))
        visibility = agent.rows[at - 1].visibility if at else "visible"
        agent.rows.insert(at, Row(pending.turn, "assistant", text, visibility))
        pending.reply = text
        self.complete_turn(request_id)

    def delegate(self, chat: Chat, text: str) -> None:
        key = self.route_key(chat)
        route = self.store.route(key)
        if route is None or route.session_id is None or route.ended:
            self.h.note("delegate_skipped", chat=chat.name, reason="no live session to delegate from")
            return
        child = self.child_agent(chat, key, route.session_id)
        child.rows.append(Row(first_turn(text), "user", text))
        child.busy, child.last_activity = True, self.h.clock.now()
        request = self.h.llm.request(chat.name, child.session, [text])
        self.inflight[request] = Pending(chat, key, child.session, first_turn(text) or "", delegate=True)
        self.enforce_cap()

    # -- adapter protocol: faults and views -----------------------------------------------

    def delete_session_row(self, session_id: str, keep_children: bool = False) -> None:
        self.store.delete_session(session_id, keep_children=keep_children)

    def lock_store(self, until: int) -> None:
        self.store.locked_until = max(self.store.locked_until, until)  # a shorter lock inside a longer one ends nothing

    def durable_state(self) -> DurableState:
        messages = self.store.read_messages()
        sessions = tuple(
            StoredSession(sid, parent, messages.get(sid, ()))
            for sid, parent in self.store.all_sessions()
        )
        routing = tuple(sorted((r.chat, r.session_id) for r in self.store.read_routes() if r.session_id))
        return DurableState(sessions, routing)

    def resources(self) -> Resources:
        if not self.running:
            return Resources()
        cached = tuple([(a.session, a.busy) for a in self.cache.agents.values()])
        return Resources(cached, 1 + len(self.timers) - sum(map(_cancelled, self.timers)))  # the watcher, and retries

    def resources_delta(self) -> dict[str, Any] | Resources | None:
        """The optional hook `Gateway.resources_delta`: what changed since the last call, from
        the cache's journal (`AgentCache.changes`), so the runner's sample after every event
        walks no agent; the whole state (`resources()`) when the journal cannot say. A subclass
        that changes `resources()` sets `resources_delta = None` (the runner then diffs)."""
        if self.running:
            cache = self.cache
            detail = cache.changes()
            if detail is not None:
                running = 1 + len(self.timers) - sum(map(_cancelled, self.timers))
                if running != self.reported_running:
                    detail["running"] = self.reported_running = running
                return detail or None
        now = self.resources()
        if self.running:
            cache.rebase()
            self.reported_running = now.running
        return now

    # -- turns ------------------------------------------------------------------------

    def route_key(self, chat: Chat) -> str:
        """The chat's routing entry: one per chat identity, so each user of a group has their own."""
        return chat_key(chat)

    def policy_for(self, route: Route) -> ResetPolicy:
        policy = self.policies.get(route.chat_key)
        if policy is None:  # one look-up per chat (a restart that changes the configuration clears them)
            platform, chat_type = route.chat_key.split(":", 2)[:2]
            policy = self.policies[route.chat_key] = self.config.policy_for(platform, chat_type)
        return policy

    def start_turn(self, message: Inbound, arrival: int) -> None:
        chat, key = message.chat, self.route_key(message.chat)
        route = self.store.route(key) or Route(key, chat.name, None, None, None, None, False)
        if route.session_id and not route.ended:
            reason = self.expiry_reason(route)
            if reason:
                self.end_session(route, reason)
        if route.session_id is None or route.ended:
            self.open_session(route, chat, arrival)
        route.last_user = arrival
        self.store.save_route(route)
        agent = self.route_agent(route)
        turn = first_turn(message.text)
        agent.rows.append(Row(turn, "user", message.text, "hidden" if message.muted else "visible"))
        agent.busy, agent.last_activity = True, self.h.clock.now()
        request = self.h.llm.request(chat.name, agent.session, agent.prompt())
        self.inflight[request] = Pending(chat, key, agent.session, turn or "")
        self.busy_chats[key] = request
        self.enforce_cap()

    def expiry_reason(self, route: Route) -> str | None:
        return self.policy.expiry_reason(self.policy_for(route), route.anchor, route.last_user, self.h.clock.now())

    def open_session(self, route: Route, chat: Chat, arrival: int) -> None:
        """Point the route at a new session (`start_turn` saves the route right after)."""
        previous = route.session_id
        session = self.store.new_session_id()
        route.previous_id, route.session_id, route.ended, route.anchor = previous, session, False, arrival
        self.cache.put(Agent(session, chat.name, route.chat_key, last_activity=self.h.clock.now()))
        if previous is not None:
            self.memory.switch(previous, session)
            self.h.hooks.on_session_reset(session)

    def complete_turn(self, request_id: str) -> None:
        """Write the turn, then deliver the reply: an acknowledged turn is always durable."""
        pending = self.inflight[request_id]
        agent = self.agent_of(pending)
        if not self.flush(agent):
            now = self.h.clock.now()
            self.timers = [t for t in self.timers if not t.cancelled and t.when > now]  # forget fired retries
            self.timers.append(self.h.scheduler.call_at(now + FLUSH_RETRY, self.retry_turn, request_id))
            return
        del self.inflight[request_id]
        assert pending.reply is not None
        self.send_reply(pending)
        if not pending.delegate and (waiting := self.waiting_commands(pending.key)):
            self.store.commands_due(pending.key, waiting)  # due now, crash or not, until a turn starts ahead
            self.due_chats.add(pending.key)
        agent.busy, agent.last_activity = self.still_busy(agent.session), self.h.clock.now()
        if not pending.delegate:
            user = next(r.content for r in reversed(agent.rows) if r.role == "user" and r.turn == pending.turn)
            self.memory.sync_turn(Turn(pending.session, pending.turn, user, pending.reply))
            del self.busy_chats[pending.key]
            self.drain_queue(pending.key)
        self.enforce_cap()

    def send_reply(self, pending: Pending) -> None:
        """Deliver the turn's reply to the chat: the turn is acknowledged."""
        assert pending.reply is not None
        self.h.platform.send_reply(pending.chat.name, pending.session, pending.reply)

    def retry_turn(self, request_id: str) -> None:
        if self.running and request_id in self.inflight:
            self.complete_turn(request_id)

    def stop_turn(self, key: str) -> None:
        request = self.busy_chats.pop(key, None)
        if request is None:
            return
        pending = self.inflight.pop(request)
        agent = self.agent_of(pending)
        self.drop_turn(agent, pending.turn)
        agent.busy = self.still_busy(agent.session)
        self.h.note("stopped", session=pending.session, turn=pending.turn)
        self.drain_queue(key)
        self.enforce_cap()

    def still_busy(self, session: str) -> bool:
        """Whether another turn (a delegate's, say) is still in flight in this session."""
        return any(p.session == session for p in self.inflight.values())

    def drop_turn(self, agent: Agent, turn: str) -> None:
        """Forget an interrupted turn's rows; they never reached the store."""
        agent.rows = [r for i, r in enumerate(agent.rows) if i < agent.flushed or r.turn != turn]

    def waiting_commands(self, key: str) -> list[str]:
        """The commands in the chat's queue, in order."""
        return [payload[1] for kind, payload, _arrival in self.queues.get(key, ()) if kind == "command"]

    def drain_queue(self, key: str) -> None:
        queue = self.queues.get(key)
        due = key in self.due_chats
        while queue and key not in self.busy_chats:
            kind, payload, arrival = queue.popleft()
            if kind == "message":
                self.start_turn(payload, arrival)
            else:
                if due:
                    self.store.command_taken(key)
                self.run_command(*payload)
        if due:
            self.due_chats.discard(key)
            self.store.clear_due(key)
        if queue is not None and not queue:
            del self.queues[key]

    def run_command(self, chat: Chat, command: str) -> None:
        self.command(self.route_key(chat), command)

    def command(self, key: str, command: str, when: int | None = None) -> None:
        """Carry out a command, journaled: a crash inside it (at `end-recorded` or
        `route-rotated`) is finished at the restart by `finish_commands` (`when`: the time it
        took effect, for one finished so)."""
        route = self.store.route(key)
        if route is None or route.session_id is None:
            self.store.journal_done(key)  # one taken from the due commands: nothing to finish
            return
        self.command_time = when
        self.store.journal_command(key, command)
        if not route.ended and (reason := self.expiry_reason(route)):
            self.end_session(route, reason)  # a command past the boundary notices it, as a message does
        if command in ("/new", "/reset"):
            if not route.ended:
                self.end_session(route, "new")
        elif command == "/resume":
            self.resume_previous(route)
        self.store.journal_done(key)
        self.command_time = None
        self.schedule_tick()

    def finish_commands(self) -> None:
        """After a crash: the commands it cut short, finished once (after the interrupted ends),
        then those a reply had made due. A /resume that had chosen its sessions switches between
        those, wherever it stopped; each resumed life begins when its /resume took effect."""
        for key, command, when, left, target in self.store.journal():
            route = self.store.route(key)
            if command == "/resume" and target is not None and route is not None:
                if route.session_id != target:
                    self.switch_to(route, left, target, when)  # its life began when the /resume took effect
                elif left is not None:
                    self.memory.switch(left, target)  # the route was switched; its hook had not fired
                self.store.journal_done(key)
            else:
                self.command(key, command, when)
        for key, _command, _when in self.store.due():
            self.store.command_taken(key)
            for key2, command, when, _left, _target in self.store.journal():
                if key2 == key:
                    self.command(key, command, when)

    def resume_previous(self, route: Route) -> None:
        """/resume: switch back to the chat's previous session; the one left behind ends. Past a
        boundary (its successor not begun, as after /new) the previous one is the session that
        just ended: it reopens, and nothing is left behind."""
        left = None if route.ended else route.session_id
        target = route.session_id if route.ended else route.previous_id
        if target is None:
            self.h.note("resume_skipped", chat=route.chat, reason="no previous session")
            return
        self.store.journal_switch(route.chat_key, left, target)
        if left is not None:
            self.end_session(route, "switch")
        self.switch_to(route, left, target, self.command_time)

    def switch_to(self, route: Route, left: str | None, target: str, now: int | None = None) -> None:
        """The rest of a /resume: a new life of `target`, the route to it, the switch hook."""
        self.store.bump_life(target)
        now = self.h.clock.now() if now is None else now
        route.previous_id = left if left is not None else route.previous_id
        route.session_id, route.ended, route.anchor, route.last_user = target, False, now, now
        self.store.save_route(route)
        if left is not None:
            self.memory.switch(left, target)

    # -- boundaries -------------------------------------------------------------------

    def end_session(self, route: Route, reason: str) -> None:
        """The one way a session ends: full transcript to memory, then finalize; durably once."""
        session = route.session_id
        assert session is not None
        recorded = self.store.record_end(session, reason)  # first: a crash after it is finished at boot
        self.h.crash_point("end-recorded")
        route.ended = True
        self.store.save_route(route)
        if not recorded:
            return
        self.h.crash_point("route-rotated")
        agent = self.cache.pop(session) or self.unflushed.pop(session, None)
        if agent is not None and not self.release(agent):
            self.unflushed[session] = agent
        self.end_memory(session, reason, agent)
        self.store.mark_end_done(session, "memory_done")
        self.finalize(session, reason)
        self.store.mark_end_done(session, "finalize_done")

    def end_memory(self, session: str, reason: str, agent: Agent | None) -> None:
        """Memory on_session_end with the full transcript: the live agent's, else the store's."""
        self.memory.end_session(session, agent.rows if agent is not None else self.store.transcript(session))

    def finalize(self, session: str, reason: str) -> None:
        self.h.hooks.on_session_finalize(session, reason)

    def finish_interrupted_ends(self) -> None:
        """A crash between recording an end and its hooks: finish them, once."""
        for session, reason, memory_done, finalize_done in self.store.unfinished_ends():
            if reason != "switch":  # a /resume cut short is finished by `finish_commands`
                self.close_route(session)
            if not memory_done:
                self.end_memory(session, reason, None)
                self.store.mark_end_done(session, "memory_done")
            if not finalize_done:
                self.finalize(session, reason)
                self.store.mark_end_done(session, "finalize_done")

    def close_route(self, session: str) -> None:
        """A crash after an end was recorded and before its routing entry was rotated: the
        entry still points at the ended session, and the chat's next message must not land
        in it."""
        for route in self.store.routes():
            if route.session_id == session and not route.ended and self.store.is_ended(session):
                route.ended = True
                self.store.save_route(route)

    def tick(self) -> None:
        """The expiry watcher (of the watched chats), the idle sweep and retries of failed writes."""
        if not self.running:
            return
        watching = self.config.watcher_interval is not None or bool(self.config.finalization_by_chat)
        for route in self.store.routes() if watching else []:
            if route.session_id is None or route.ended or not self.watched(route):
                continue
            if route.chat_key in self.busy_chats or self.queues.get(route.chat_key):
                continue  # a turn in flight defers the rotation
            reason = self.expiry_reason(route)
            if reason:
                self.end_session(route, reason)
        now = self.h.clock.now()
        for agent in self.cache.stale(now):
            self.evict(agent, "idle_ttl")
        for session in sorted(self.unflushed):
            if self.flush(self.unflushed[session]):
                del self.unflushed[session]
        self.memory.retry()
        self.tick_timer = None
        self.schedule_tick()

    # -- the agent cache --------------------------------------------------------------

    def enforce_cap(self) -> None:
        """After every turn starts or ends: evict idle agents past the cap, re-arm the watcher."""
        for agent in self.cache.over_cap():
            self.evict(agent, "lru_cap")
        self.schedule_tick()

    def evict(self, agent: Agent, why: str) -> None:
        """Never a boundary: flush the transcript and the providers' buffers, end nothing."""
        self.cache.pop(agent.session)
        if not self.release(agent):
            self.unflushed[agent.session] = agent
        self.memory.flush(agent.session)
        self.h.note("evict", session=agent.session, why=why)

    def load_agent(self, session: str, chat: str, key: str, kind: str = "chat", parent: str | None = None) -> Agent:
        """Rebuild an agent from the store (after eviction or restart)."""
        agent = self.unflushed.pop(session, None)
        if agent is None:
            rows = self.store.transcript(session)
            agent = Agent(session, chat, key, kind, parent, rows, flushed=len(rows))
        agent.last_activity = self.h.clock.now()
        self.cache.put(agent)
        return agent

    def route_agent(self, route: Route) -> Agent:
        assert route.session_id is not None
        return self.cache.get(route.session_id) or self.load_agent(route.session_id, route.chat, route.chat_key)

    def agent_of(self, pending: Pending) -> Agent:
        agent = self.cache.get(pending.session)
        if agent is None:  # busy agents are never evicted; this is a defect, not a fault
            raise RuntimeError(f"agent of session {pending.session} vanished mid-turn")
        return agent

    def child_agent(self, chat: Chat, key: str, parent: str) -> Agent:
        child = self.children.get(parent) or self.stored_child(parent)
        if child is not None:
            return self.cache.get(child) or self.load_agent(child, chat.name, key, "delegate", parent)
        session = self.store.new_session_id()
        self.children[parent] = session
        agent = Agent(session, chat.name, key, "delegate", parent, last_activity=self.h.clock.now())
        self.cache.put(agent)
        return agent

    def stored_child(self, parent: str) -> str | None:
        row = self.store.db.execute(
            "SELECT id FROM sessions WHERE parent_id = ? AND kind = 'delegate' ORDER BY started DESC, id DESC LIMIT 1",
            (parent,),
        ).fetchone()
        if row:
            self.children[parent] = row[0]
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
            except StoreLocked:
                return False
            except sqlite3.IntegrityError as err:
                if not is_foreign_key_error(err) or not self.heal(agent):
                    return False
        return False

    def release(self, agent: Agent) -> bool:
        """The agent's memory is about to go (eviction, idle sweep, end, SIGTERM): the store is
        owed its whole transcript now, not at a next write that may never come (seed 003: a
        session deleted while its chat runs is recreated with the full in-memory transcript).
        A clean agent's row is confirmed first; `heal` recreates and replays it if it is gone."""
        if agent.rows and not agent.dirty:
            self.heal(agent)
        return self.flush(agent)

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
            unanswered = {p.turn for p in self.inflight.values() if p.session == agent.session and p.reply is None}
            end = next((i for i in range(start, end) if agent.rows[i].turn in unanswered), end)
        self.store.append(agent.session, agent.rows[start:end])  # never a row of a turn still in flight
        agent.flushed, agent.replay_pending = end, False

    def create_row(self, agent: Agent) -> None:
        """Upsert the row; a delegate whose parent row is gone is created without it."""
        now = self.h.clock.now()
        try:
            self.store.upsert_session(agent.session, agent.chat, agent.parent, agent.kind, now)
        except sqlite3.IntegrityError as err:
            if not (is_foreign_key_error(err) and agent.parent and not self.store.session_exists(agent.parent)):
                raise
            self.store.upsert_session(agent.session, agent.chat, None, agent.kind, now)
        agent.created = True

    def heal(self, agent: Agent) -> bool:
        """The row is confirmed gone: recreate it and replay the whole transcript (kept
        pending until a write succeeds). A foreign-key failure with the row present is not
        a deletion and never replays anything."""
        if self.store.session_exists(agent.session):
            return False
        agent.created, agent.replay_pending = False, True
        self.h.note("heal", session=agent.session)
        return True
