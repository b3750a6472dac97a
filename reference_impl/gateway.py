"""The reference gateway: routing, reset policy, agent cache, memory, shutdown, heal.

It implements `conformance.adapter.Gateway` directly and keeps the whole contract. Every
boundary goes through `end_session`, which reads the transcript it owes from the agent or
the store, fires memory `on_session_end` then `on_session_finalize`, and records both in the
store so a restart never repeats or skips them. What the process holds in memory is one
object (`state.Volatile`): a crash drops it, a boot builds it from the store. The class is
put together from three parts: this module (lifecycle, inbound, turns), `sessions` (commands
and boundaries) and `transcripts` (the agent cache and writing the transcript). The bug zoo
(`reference_impl.variants`) overrides one small step at a time to put a reported bug back.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Iterator, Sequence
from operator import attrgetter
from typing import Any

from conformance.adapter import Harness, Inbound, Profile
from conformance.observations import DurableState, Resources, StoredSession, first_turn
from reference_impl.cache import Agent, AgentCache, Prompt
from reference_impl.memory import BatchingProvider, MemoryManager, Turn
from reference_impl.policy import ResetPolicyEvaluator, chat_key
from reference_impl.sessions import SessionBoundaries
from reference_impl.state import CRASH_POINTS, FLUSH_RETRY, SWEEP_INTERVAL, Pending, Volatile
from reference_impl.store import Route, Row, Store
from reference_impl.transcripts import AgentTranscripts
from sim.engine import Timer
from sim.scenario import Chat, GatewayConfig, ProviderSpec, ResetPolicy

__all__ = ["CRASH_POINTS", "FLUSH_RETRY", "SWEEP_INTERVAL", "Pending", "ReferenceGateway"]

_session = attrgetter("session")


def _running(timers: list[Timer]) -> int:
    """The timers `resources` counts: the watcher, and the retries not cancelled (asked after
    every event: a plain loop over the few retries, cheaper than a `sum(map(...))` of none)."""
    running = 1
    for timer in timers:
        if not timer.cancelled:
            running += 1
    return running


class ReferenceGateway(SessionBoundaries, AgentTranscripts):
    """A clean gateway that passes every check. Registered as `reference`."""

    def __init__(self, db_path: str = ":memory:") -> None:
        self.db_path = db_path
        self.volatile: Volatile | None = None  # the process's memory: None before the first start and after a crash
        self.stored_sessions: dict[str, StoredSession] = {}  # `durable_state`'s: the same object while a session is unchanged

    @property
    def running(self) -> bool:
        """Up and serving: started, and neither stopped by a SIGTERM nor crashed since."""
        volatile = self.volatile
        return volatile is not None and volatile.running

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
        self.open_store(config, harness)
        self.boot()

    def open_store(self, config: GatewayConfig, harness: Harness) -> None:
        """The store, and nothing booted: at a start, and in a new process after a real crash
        (`harness.state_dir`: the optional `Gateway.open_store`), where `restart()` boots."""
        self.config, self.h = config, harness
        self.policies: dict[str, ResetPolicy] = {}  # chat key -> its reset policy under `config`
        self.eager_chats: dict[str, bool] = {}  # chat -> whether `config` has the watcher end its sessions
        self.store = self.make_store()  # the disk: it outlives crashes
        self.store.crash_point = harness.crash_point

    def make_store(self) -> Store:
        """The durable store (the bug zoo swaps in a broken one here)."""
        return Store(self.h.clock.now, self.store_path())

    def store_path(self) -> str:
        """`db_path`; where crashes are real, a database file in the harness's state directory
        (what a killed process's successor opens)."""
        state_dir = self.h.state_dir
        if state_dir is not None and self.db_path == ":memory:":
            return os.path.join(state_dir, "store.db")
        return self.db_path

    def boot(self) -> None:
        """Build every in-memory object from the store (first start and every restart)."""
        providers = [self.make_provider(spec) for spec in self.config.providers]
        self.volatile = Volatile(self.make_policy(), AgentCache(self.config.cache_cap, self.config.idle_ttl),
                                 MemoryManager(self.h.recorder, providers, self.store), self.h.clock.now())
        self.store.take_saved_routes()
        self.track_expiries(self.store.routes())
        self.volatile.running = True
        self.volatile.memory.recover()  # first: what an end interrupted by a crash owed its backends goes before the end
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
        self.volatile.timers = [t for t in self.volatile.timers if not t.cancelled and t.when > now]  # forget fired retries
        self.volatile.timers.append(self.h.scheduler.call_at(when, self.retry_memory))

    def retry_memory(self) -> None:
        if self.running:
            self.volatile.memory.retry()

    def sigterm(self) -> None:
        """Interrupt turns in flight (and say so), flush everything, end nothing."""
        self.stop_timers()
        for pending in self.volatile.inflight.values():
            self.h.note("interrupted", session=pending.session, turn=pending.turn)
            agent = self.volatile.cache.get(pending.session)
            if agent is not None:
                self.drop_turn(agent, pending.turn)
        for key in sorted(self.volatile.queues):
            for kind, payload, _arrival in self.volatile.queues[key]:
                chat = payload.chat if kind == "message" else payload[0]
                self.h.note("interrupted", chat=chat.name, queued=kind)
        for index, agent in enumerate([*self.volatile.cache.agents.values(), *self.volatile.unflushed.values()]):
            if index:
                self.h.crash_point("shutdown-flushing")
            self.release_at_shutdown(agent)
            self.volatile.memory.flush(agent.session)
        self.volatile.memory.shutdown()
        self.volatile.running = False

    def release_at_shutdown(self, agent: Agent) -> None:
        """A SIGTERM lets go of every agent, a delegate child's too: each is written back first."""
        self.release(agent)

    def crash(self) -> None:
        """SIGKILL: every object but the store (the disk) is gone; no hook runs. A crash point
        may have cut a step (or a restart's boot) anywhere: what it half-built goes too, and the
        store keeps its database only, not its read caches."""
        if self.volatile is not None:
            self.stop_timers()
        self.volatile = None
        self.store.reopen()

    def restart(self, config: GatewayConfig | None = None) -> None:
        """Rebuild from the store; under `config` when the restart changes it: every entry is
        judged by the policy it brings from now on (the expiries `boot` queues included)."""
        if config is not None:
            self.config, self.policies, self.eager_chats = config, {}, {}
        self.boot()

    def close(self) -> None:
        """The run is over (its last `durable_state` read): the database and its read caches
        go now, not whenever the gateway object does, so a long run's judging does not carry
        them (every row of 10^6 turns, hundreds of MB)."""
        store = self.__dict__.pop("store", None)
        if store is not None:
            store.close()
        self.stored_sessions = {}

    def stop_timers(self) -> None:
        for timer in [*self.volatile.timers, *([self.volatile.tick_timer] if self.volatile.tick_timer else [])]:
            timer.cancel()
        self.volatile.timers, self.volatile.tick_timer = [], None

    def schedule_tick(self) -> None:
        """Set the watcher's next tick: the first tick of its grid (every interval since boot)
        at which something is due. Ticks with nothing to do are skipped, which changes
        nothing: expiry, idleness and pending retries only become due as time passes."""
        volatile = self.volatile  # asked after every turn: `running` read without its property
        if volatile is None or not volatile.running:
            return
        now, interval = self.h.clock.now(), self.config.watcher_interval or SWEEP_INTERVAL
        timer = volatile.tick_timer
        if timer is not None and not timer.cancelled and timer.when - interval <= now:
            return  # the next tick is the first one after now: nothing can be due sooner
        due = self.next_due()
        if due is None:
            return
        steps = -(-(max(due, now + 1) - volatile.tick_origin) // interval)
        when = volatile.tick_origin + steps * interval
        if self.volatile.tick_timer is not None and not self.volatile.tick_timer.cancelled and self.volatile.tick_timer.when <= when:
            return
        if self.volatile.tick_timer is not None:
            self.volatile.tick_timer.cancel()
        volatile.tick_timer = self.h.scheduler.call_at(when, self.tick)

    def next_due(self) -> int | None:
        """The earliest instant a tick would have work: an expiry, a stale agent, a retry
        (asked after every turn: no list of candidates, and the clock read only for a retry)."""
        volatile = self.volatile
        if self.store.saved_routes:  # most calls: no route written since the last
            self.track_expiries(self.store.take_saved_routes())
        due = volatile.expiries.earliest()
        idle = volatile.cache.oldest_idle_activity()
        if idle is not None and (due is None or idle + self.config.idle_ttl + 1 < due):
            due = idle + self.config.idle_ttl + 1
        if volatile.unflushed or volatile.memory.owes():
            now = self.h.clock.now()
            if due is None or now < due:
                due = now
        return due

    def watched(self, route: Route) -> bool:
        """Whether the watcher ends this chat's session at its boundary (eager), or leaves it
        to the chat's next message (lazy): the chat's own mode, else the gateway's (asked after
        every turn: looked up once a chat)."""
        eager = self.eager_chats.get(route.chat)
        if eager is None:
            eager = self.eager_chats[route.chat] = self.config.finalization_of(route.chat) == "eager"
        return eager

    def track_expiries(self, routes: list[Route]) -> None:
        """Keep `expiries` current with the routes written since it last looked (watched
        chats only: no watcher ends a lazy chat's session, so no expiry of its is due)."""
        for route in routes:
            instant = None
            if self.watched(route) and route.session_id and not route.ended and route.anchor is not None \
                    and route.last_user is not None:
                instant = self.volatile.policy.expiry_instant(self.policy_for(route), route.anchor, route.last_user)
            self.volatile.expiries.set(route.chat_key, instant)

    # -- adapter protocol: inbound ---------------------------------------------------------

    def deliver_message(self, message: Inbound) -> None:
        key = self.route_key(message.chat)
        if key in self.volatile.busy_chats or self.volatile.queues.get(key):
            self.volatile.queues.setdefault(key, deque()).append(("message", message, self.h.clock.now()))
            return
        self.start_turn(message, self.h.clock.now())

    def deliver_command(self, chat: Chat, command: str) -> None:
        key = self.route_key(chat)
        if command == "/stop":
            self.stop_turn(key)
            self.notice_expiry(key)
            return
        if key in self.volatile.busy_chats or self.volatile.queues.get(key):  # never mid-turn: after the reply
            self.volatile.queues.setdefault(key, deque()).append(("command", (chat, command), self.h.clock.now()))
            return
        self.run_command(chat, command)

    def notice_expiry(self, key: str) -> None:
        """A command past the chat's boundary notices it, as a message does (docs/contract.md):
        a /stop too, once the turn it abandoned is done. Without it nothing is lost while the
        policy stays, but a restart that changes the policy would find the entry live again. A
        turn the /stop let start (queued behind the one it abandoned) has noticed it already."""
        if key in self.volatile.busy_chats:
            return
        route = self.store.route(key)
        if route is not None and route.session_id and not route.ended and (reason := self.expiry_reason(route)):
            self.end_session(route, reason)
            self.schedule_tick()

    def deliver_reply(self, request_id: str, text: str) -> None:
        pending = self.volatile.inflight.get(request_id)
        if pending is None:  # stopped by /stop or lost with a restart
            return
        agent = self.agent_of(pending)
        # Beside its own user row: a delegate child may have another turn's question after it,
        # still in flight, which no write may store (a turn never acknowledged leaves nothing).
        rows, at = agent.rows, len(agent.rows)
        for i in range(at - 1, -1, -1):  # from the end: the user row is almost always the last
            if rows[i].turn == pending.turn and rows[i].role == "user":
                at = i + 1
                break
        visibility = rows[at - 1].visibility if at else "visible"
        rows.insert(at, Row(pending.turn, "assistant", text, visibility))
        pending.reply = text
        self.complete_turn(request_id, pending, agent)

    def delegate(self, chat: Chat, text: str) -> None:
        key = self.route_key(chat)
        parent = self.delegating_session(self.store.route(key))
        if parent is None:
            self.h.note("delegate_skipped", chat=chat.name, reason="no live session to delegate from")
            return
        child = self.child_agent(chat, key, parent)
        child.rows.append(Row(first_turn(text), "user", text))
        child.busy, child.last_activity = True, self.h.clock.now()
        request = self.h.llm.request(chat.name, child.session, [text])
        self.volatile.inflight[request] = Pending(chat, key, child.session, first_turn(text) or "", delegate=True)
        self.enforce_cap()

    # -- adapter protocol: faults and views -----------------------------------------------

    def delete_session_row(self, session_id: str, keep_children: bool = False) -> None:
        self.store.delete_session(session_id, keep_children=keep_children)

    def lock_store(self, until: int) -> None:
        self.store.locked_until = max(self.store.locked_until, until)  # a shorter lock inside a longer one ends nothing

    def durable_state(self) -> DurableState:
        messages = self.store.read_messages()
        made = self.stored_sessions
        sessions = []
        for sid, parent in self.store.all_sessions():
            rows = messages.get(sid, ())
            known = made.get(sid)
            if known is None or known.parent != parent or known.messages is not rows:  # the same one while nothing moved
                known = made[sid] = StoredSession(sid, parent, rows)
            sessions.append(known)
        routing = tuple(sorted(self.store.routed_sessions()))
        return DurableState(tuple(sessions), routing)

    def durable_parts(self) -> tuple[Iterator[StoredSession], tuple[tuple[str, str], ...]]:
        """The optional hook `Gateway.durable_parts`, asked for a long run's final snapshot: the
        sessions read from SQLite one at a time (`Store.read_sessions`), not every row made at
        once; the caches that make repeated `durable_state` reads cheap go first (they would
        hold every row). A subclass that changes `durable_state()` is asked that instead."""
        self.stored_sessions = {}
        self.store.forget_messages()
        return self.store.read_sessions(), tuple(sorted(self.store.routed_sessions()))

    def resources(self) -> Resources:
        if not self.running:
            return Resources()
        cached = tuple([(a.session, a.busy) for a in self.volatile.cache.agents.values()])
        return Resources(cached, _running(self.volatile.timers))

    def resources_delta(self) -> dict[str, Any] | Resources | None:
        """The optional hook `Gateway.resources_delta`: which agents came and went since the
        last call, from the cache's journal (`AgentCache.changes`), so the runner's sample
        after every event walks no agent and most samples answer None; the whole state
        (`resources()`) at the first call after a start. A subclass that changes `resources()`
        sets `resources_delta = None` (the runner then diffs)."""
        volatile = self.volatile  # asked after every event and timer: `running` read without its property
        if volatile is not None and volatile.running:
            cache = volatile.cache
            if not cache.journal:
                now = self.resources()
                cache.rebase()
                volatile.reported_running = now.running
                return now
            detail = cache.changes() if cache.came or cache.went else None  # none, at most samples
            running = _running(volatile.timers)
            if running != volatile.reported_running:
                detail = detail or {}
                detail["running"] = volatile.reported_running = running
            return detail
        return self.resources()

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
            reason = self.expiry_reason(route, arrival)  # as of its arrival: one queued behind a turn kept the chat active
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
        request = self.h.llm.request(chat.name, agent.session, self.prompt(agent))
        self.volatile.inflight[request] = Pending(chat, key, agent.session, turn or "")
        self.volatile.busy_chats[key] = request
        self.enforce_cap()

    def prompt(self, agent: Agent) -> Sequence[str]:
        """What the LLM is asked for the agent's turn: its session's conversation, the new message last."""
        return Prompt(agent.rows)

    def expiry_reason(self, route: Route, at: int | None = None) -> str | None:
        """Why the route's session is past its boundary `at` (now), if it is."""
        return self.volatile.policy.expiry_reason(self.policy_for(route), route.anchor, route.last_user,
                                                  self.h.clock.now() if at is None else at)

    def open_session(self, route: Route, chat: Chat, arrival: int) -> None:
        """Point the route at a new session (`start_turn` saves the route right after)."""
        previous = route.session_id
        session = self.store.new_session_id()
        route.previous_id, route.session_id, route.ended, route.anchor = previous, session, False, arrival
        self.volatile.cache.put(Agent(session, chat.name, route.chat_key, last_activity=self.h.clock.now()))
        if previous is not None:
            self.announce_switch(previous, session)
            self.announce_reset(previous, session)

    def announce_switch(self, previous: str, session: str) -> None:
        """Memory's `on_session_switch` of a rotation: from the session the chat left."""
        self.volatile.memory.switch(previous, session)

    def announce_reset(self, previous: str, session: str) -> None:
        """The plugin reset hook of a rotation from `previous`: it names the session that begins."""
        self.h.hooks.on_session_reset(session)

    def complete_turn(self, request_id: str, pending: Pending, agent: Agent) -> None:
        """Write the turn, then deliver the reply: an acknowledged turn is always durable (the
        caller has the turn in flight and its agent, just fetched: no second look-up a turn)."""
        if not self.flush(agent):
            now = self.h.clock.now()
            self.volatile.timers = [t for t in self.volatile.timers if not t.cancelled and t.when > now]  # forget fired retries
            self.volatile.timers.append(self.h.scheduler.call_at(now + FLUSH_RETRY, self.retry_turn, request_id))
            return
        if pending.delegate:
            self.acknowledge_written(request_id, pending.session, agent)
        self.acknowledge(request_id, pending, agent)

    def acknowledge_written(self, request_id: str, session: str, agent: Agent) -> None:
        """A delegate child's tasks overlap: the write just made may hold the rows of other
        tasks answered before, whose own write was refused (still in flight, their reply held).
        Those it stored are acknowledged in this step, oldest first, not at their retry (a crash
        in between would leave them stored and never acknowledged: I2)."""
        inflight = self.volatile.inflight
        others = [rid for rid, p in inflight.items() if rid != request_id and p.session == session and p.reply is not None]
        if others:
            written = {row.turn for row in agent.rows[: agent.flushed] if row.role == "assistant"}
            for other in others:
                if inflight[other].turn in written:
                    self.acknowledge(other, inflight[other], agent)

    def acknowledge(self, request_id: str, pending: Pending, agent: Agent) -> None:
        """The turn is written: what it owes memory and the commands waiting behind it are made
        durable, then its reply is delivered (the turn is acknowledged: a crash right after,
        at the harness's `reply-sent`, loses nothing), then the chat is handed on."""
        del self.volatile.inflight[request_id]
        assert pending.reply is not None
        turn = None if pending.delegate else self.answered_turn(pending, agent)
        due = self.hand_memory(pending.key, turn) if turn is not None else None
        self.send_reply(pending)
        agent.busy, agent.last_activity = self.still_busy(agent.session), self.h.clock.now()
        if turn is not None:
            if due:
                self.volatile.memory.ship(turn.session, due)
            self.hand_on(pending.key)
        self.enforce_cap()

    def answered_turn(self, pending: Pending, agent: Agent) -> Turn:
        """The chat turn `pending` answers, its user row found near the end of the agent's rows
        (a plain loop: no generator a turn)."""
        assert pending.reply is not None
        for row in reversed(agent.rows):
            if row.role == "user" and row.turn == pending.turn:
                return Turn(pending.session, pending.turn, row.content, pending.reply)
        raise RuntimeError(f"turn {pending.turn} of session {pending.session} has no user row")

    def hand_memory(self, key: str, turn: Turn) -> list[BatchingProvider]:
        """Before the reply: the turn's sync_turn (each provider's outbox holds it from here on)
        and the chat's waiting commands made due, so a crash once the turn is acknowledged
        finds both on disk; the providers whose batch is due, shipped after the reply (a
        crash at their ship must find the turn acknowledged: `MemoryManager.owe`)."""
        due = self.volatile.memory.owe(turn)
        if key in self.volatile.queues:
            self.commands_due_now(key)
        return due

    def commands_due_now(self, key: str) -> None:
        """The turn the chat's commands waited behind is done (replied, or stopped): they are due
        now, crash or not, until a turn starts ahead (a crash inside one of them leaves the
        rest to `finish_commands`)."""
        if waiting := self.waiting_commands(key):
            self.store.commands_due(key, waiting)
            self.volatile.due_chats.add(key)

    def hand_on(self, key: str) -> None:
        """A chat's turn is replied: the chat's queue (a /new waiting behind the turn ends the
        session only after the turn's sync_turn, made in `hand_memory`: I5). Most chats have
        nothing waiting: their queue is not asked."""
        volatile = self.volatile
        volatile.busy_chats.pop(key, None)
        if key in volatile.queues or key in volatile.due_chats:
            self.drain_queue(key)

    def send_reply(self, pending: Pending) -> None:
        """Deliver the turn's reply to the chat: the turn is acknowledged."""
        assert pending.reply is not None
        self.h.platform.send_reply(pending.chat.name, pending.session, pending.reply)

    def retry_turn(self, request_id: str) -> None:
        if self.running and request_id in self.volatile.inflight:
            pending = self.volatile.inflight[request_id]
            self.complete_turn(request_id, pending, self.agent_of(pending))

    def stop_turn(self, key: str) -> None:
        request = self.volatile.busy_chats.pop(key, None)
        if request is None:
            return
        pending = self.volatile.inflight.pop(request)
        agent = self.agent_of(pending)
        self.drop_turn(agent, pending.turn)
        agent.busy = self.still_busy(agent.session)
        self.h.note("stopped", session=pending.session, turn=pending.turn)
        self.commands_due_now(key)
        self.drain_queue(key)
        self.enforce_cap()

    def still_busy(self, session: str) -> bool:
        """Whether another turn (a delegate's, say) is still in flight in this session."""
        return session in map(_session, self.volatile.inflight.values())  # a C loop, not a generator

    def drop_turn(self, agent: Agent, turn: str) -> None:
        """Forget an interrupted turn's rows; they never reached the store."""
        agent.rows = [r for i, r in enumerate(agent.rows) if i < agent.flushed or r.turn != turn]
