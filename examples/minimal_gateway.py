"""A minimal in-process Python gateway for sessiongate: a starting point for your own.

Run the catalog, then generated scenarios, against it from the repository root (the module is
found through PYTHONPATH; no registration is needed for MODULE:FACTORY):

    PYTHONPATH=examples sessiongate run --gateway minimal_gateway:make
    PYTHONPATH=examples sessiongate fuzz --seeds 0:2000 -n auto --gateway minimal_gateway:make

It implements the protocol of conformance/adapter.py in one class and keeps the contract of
docs/contract.md: routing and reset policy (idle, daily with DST, both, none; per platform, then
chat type; eager or lazy per chat), /new /reset /resume queued behind a turn in flight and /stop, one virtual-time timer
for the expiry watcher and the idle sweep, an LRU cap on idle agents, the memory hooks (the
recorder, plus batching providers whose buffer is durable), delegate children, SIGTERM, crash
and restart, and healing a session row another surface deleted. docs/gateway-authors.md walks
through it and lists its catalog results (tests/test_minimal_gateway.py keeps them true).

Its store (`Disk`) is a plain object that plays the disk: in process the gateway keeps it across
`crash()`. Under `--isolate` a crash is real (the process is killed): there it also writes the
`Disk` to `harness.state_dir` after each step, and `open_store` reads it back in the new process.
A real kill may also come just after a reply (the harness's own crash point `reply-sent`), so a
turn writes everything it owes (its rows, its memory, the commands waiting behind it) before
its reply goes out.

What it does not handle: its store cannot refuse a write, so the profile declares `db_locked`
unsupported and the runner skips those events (logged as `skipped`). A real store needs a retry
of refused writes, with the reply held back until its turn is written.
"""

from __future__ import annotations

import os
import pickle
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, time, timedelta
from functools import wraps
from typing import Any, TypeVar
from zoneinfo import ZoneInfo

from conformance.adapter import BackendBusy, BackendUnavailable, Harness, Inbound, Profile
from conformance.observations import DurableState, Resources, StoredMessage, StoredSession
from sim.engine import Timer
from sim.scenario import Chat, GatewayConfig, ResetPolicy

MINUTE = 60_000  # the harness's times and durations are int milliseconds (times: since the epoch)
LAZY_SWEEP = 5 * MINUTE  # the idle sweep's period when there is no watcher (lazy mode)
UNSUPPORTED = frozenset({"db_locked"})
DISK_FILE = "disk.pickle"  # in `harness.state_dir`, where crashes are real
F = TypeVar("F", bound=Callable[..., Any])


def step(method: F) -> F:
    """A call of the harness's (an event, a timer): where crashes are real, the disk is written
    once it returns (`MinimalGateway.save`)."""

    @wraps(method)
    def run(self: MinimalGateway, *args: Any, **kwargs: Any) -> Any:
        out = method(self, *args, **kwargs)
        self.save()
        return out

    return run  # type: ignore[return-value]


def next_daily_boundary(after: int, at_hour: int, zone: ZoneInfo) -> int:
    """The first local `at_hour:00` strictly after instant `after`. fold=0 picks the first of two
    ambiguous wall times (fall back) and maps a skipped one (spring forward) to the transition."""
    day = datetime.fromtimestamp(after / 1000, zone).date()
    for offset in range(3):
        instant = round(datetime.combine(day + timedelta(days=offset), time(at_hour), zone).timestamp() * 1000)
        if instant > after:
            return instant
    raise AssertionError("a local at_hour:00 occurs every day")


@dataclass
class Route:
    """A chat's routing entry: its session and the two clocks its reset policy reads."""

    chat: Chat
    session: str | None = None
    previous: str | None = None  # where /resume goes back to
    ended: bool = False
    anchor: int = 0  # when the session began: its first message's arrival, or the /resume
    last_user: int = 0  # arrival of the last user message (commands and delegates never move it)


@dataclass
class Row:
    parent: str | None
    messages: list[StoredMessage] = field(default_factory=list)


@dataclass
class Disk:
    """What survives a crash: session rows, routes, delegate children, provider buffers."""

    rows: dict[str, Row] = field(default_factory=dict)
    routes: dict[str, Route] = field(default_factory=dict)  # by chat name
    children: dict[str, str] = field(default_factory=dict)  # parent session -> its delegate child
    buffers: dict[str, dict[str, list[tuple[str, str]]]] = field(default_factory=dict)  # provider -> session -> turns
    due: dict[str, list[tuple[Chat, str]]] = field(default_factory=dict)  # chat -> commands its last reply made due
    sessions: int = 0

    def new_session(self) -> str:
        self.sessions += 1
        return f"s{self.sessions}"


@dataclass
class Agent:
    """A cached session: its transcript (completed turns) and how much of it is on disk."""

    session: str
    chat: Chat
    parent: str | None = None  # a delegate child's parent session
    rows: list[StoredMessage] = field(default_factory=list)
    flushed: int = 0
    busy: bool = False
    last_activity: int = 0


@dataclass
class Pending:
    """A turn asked of the LLM and not answered yet."""

    chat: Chat
    session: str
    text: str
    visibility: str  # "hidden" for a muted notification's rows
    delegate: bool = False


class MinimalGateway:
    def profile(self, config: GatewayConfig) -> Profile:
        # `reset: default` leaves the policy to us: report the one we apply (never reset); `start` gets it in `config.reset`.
        default = ResetPolicy() if config.reset_default else None
        if config.watcher_interval is None:  # lazy: the chat's next message notices an expiry
            # A chat configured eager is watched by the sweep's timer: its end is owed within one period.
            latency = LAZY_SWEEP if any(mode == "eager" for _, mode in config.finalization_by_chat) else 0
            return Profile("lazy", latency, crash_durable=True, sweep_interval=LAZY_SWEEP, unsupported=UNSUPPORTED,
                           reset_default=default)
        every = config.watcher_interval  # a boundary is acted on by the first tick after it
        return Profile("eager", every, crash_durable=True, sweep_interval=every, unsupported=UNSUPPORTED,
                       reset_default=default)

    @step
    def start(self, config: GatewayConfig, harness: Harness) -> None:
        self.config, self.h = config, harness
        self.disk = Disk(buffers={spec.name: {} for spec in config.providers})
        self.boot()

    def open_store(self, config: GatewayConfig, harness: Harness) -> None:
        """A new process after a real crash (`--isolate`): the disk the dead one wrote, nothing
        booted (`restart()` boots)."""
        self.config, self.h = config, harness
        with open(os.path.join(str(harness.state_dir), DISK_FILE), "rb") as file:
            self.disk = pickle.load(file)
        self.cache, self.retries, self.timer, self.up = {}, [], None, False

    def save(self) -> None:
        """Write the disk where crashes are real (a kill loses everything else); in process the
        object itself outlives `crash()`."""
        if self.h.state_dir is None:
            return
        path = os.path.join(self.h.state_dir, DISK_FILE)
        with open(path + ".new", "wb") as file:
            pickle.dump(self.disk, file)
        os.replace(path + ".new", path)  # whole or not at all

    def boot(self) -> None:
        """The process state, built from the disk (at start and at every restart)."""
        self.cache: dict[str, Agent] = {}  # by session, least recently used first
        self.pending: dict[str, Pending] = {}  # by LLM request id
        self.busy_chats: dict[str, str] = {}  # chat name -> request id of its turn in flight
        self.queues: dict[str, deque[tuple[Inbound | tuple[Chat, str], int]]] = {}  # (message or command, arrival)
        self.owed: set[tuple[str, str]] = set()  # (provider, session) buffers a failing backend refused
        self.retries: list[Timer] = []  # at the times a slow backend said its calls complete
        self.slow_calls: dict[tuple[str, str], list[int]] = {}  # (provider, session) -> its slow calls' sizes, in order
        self.up = True
        self.flush_all_buffers()  # what a crash, or a SIGTERM while a backend failed, left behind
        for name in list(self.disk.due):  # commands a reply made due just before a crash
            self.drain(name)
        self.timer: Timer | None = self.h.scheduler.call_at(self.h.clock.now() + self.tick_every(), self.tick)

    @step
    def sigterm(self) -> None:
        """Interrupt the turns in flight, write back what the agents hold, flush every buffer,
        end no session."""
        for agent in list(self.cache.values()):
            self.release(agent)
        self.stop()
        self.flush_all_buffers()
        self.h.recorder.shutdown()

    def crash(self) -> None:
        """SIGKILL: no hook runs; `self.disk` survives."""
        self.stop()

    def stop(self) -> None:
        """Drop the process state: timer, cached agents, turns in flight, queues."""
        for timer in [*self.retries, *([self.timer] if self.timer is not None else [])]:
            timer.cancel()
        self.retries = []
        self.timer, self.cache, self.pending, self.busy_chats, self.queues = None, {}, {}, {}, {}
        self.up = False

    @step
    def restart(self, config: GatewayConfig | None = None) -> None:
        """Back from the disk; under the configuration the restart brings, when it brings one."""
        self.config = config or self.config
        self.boot()

    # -- inbound --------------------------------------------------------------------------

    @step
    def deliver_message(self, message: Inbound) -> None:
        if self.waiting(message.chat.name):  # one turn at a time per chat
            self.queues.setdefault(message.chat.name, deque()).append((message, self.h.clock.now()))
        else:
            self.start_turn(message, self.h.clock.now())

    @step
    def deliver_command(self, chat: Chat, command: str) -> None:
        if command == "/stop":
            self.stop_turn(chat.name)
            route = self.disk.routes.get(chat.name)
            if route is not None and chat.name not in self.busy_chats:
                self.notice_boundary(route)  # a command past the boundary notices it, /stop too
        elif self.waiting(chat.name):  # never mid-turn: after the reply
            self.queues.setdefault(chat.name, deque()).append(((chat, command), self.h.clock.now()))
        else:
            self.run_command(chat, command)

    @step
    def delegate(self, chat: Chat, text: str) -> None:
        route = self.disk.routes.get(chat.name)
        if route is None or route.session is None or route.ended:  # never open a session for it
            self.h.note("delegate_skipped", chat=chat.name, reason="no live session")
            return
        child = self.disk.children.get(route.session) or self.disk.new_session()
        self.disk.children[route.session] = child
        self.ask(Pending(chat, child, text, "visible", delegate=True), self.agent(child, chat, route.session))

    @step
    def deliver_reply(self, request_id: str, text: str) -> None:
        turn = self.pending.pop(request_id, None)
        if turn is None:  # stopped by /stop
            return
        agent = self.agent(turn.session, turn.chat)
        agent.rows += [StoredMessage("user", turn.text, turn.visibility), StoredMessage("assistant", text, turn.visibility)]
        self.flush(agent)  # on disk before it is acknowledged
        full = []  # providers whose batch this turn fills: shipped once the reply is out
        if not turn.delegate:  # delegate children have no memory, and hold back nothing of the chat
            self.h.recorder.sync_turn(turn.session, turn.text, text)  # it ingests into backends["recorder"]
            for spec in self.config.providers:
                buffer = self.disk.buffers[spec.name].setdefault(turn.session, [])
                buffer.append((turn.text, text))
                if len(buffer) >= spec.retain_every_n_turns:
                    full.append(spec.name)
            self.make_due(turn.chat.name)
        self.save()  # all the turn owes is on disk: a kill just after the reply loses none of it
        self.h.platform.send_reply(turn.chat.name, turn.session, text)
        agent.busy = any(other.session == turn.session for other in self.pending.values())
        agent.last_activity = self.h.clock.now()
        if not turn.delegate:
            for name in full:
                self.flush_buffer(name, turn.session)
            del self.busy_chats[turn.chat.name]
            self.drain(turn.chat.name)
        self.enforce_cap()

    # -- turns and commands ---------------------------------------------------------------

    def waiting(self, name: str) -> bool:
        return name in self.busy_chats or bool(self.queues.get(name))

    def start_turn(self, message: Inbound, arrival: int) -> None:
        route = self.disk.routes.setdefault(message.chat.name, Route(message.chat))
        self.notice_boundary(route, arrival)  # as of its arrival: one that waited behind a turn kept the chat active
        if route.session is None or route.ended:
            previous, route.session = route.session, self.disk.new_session()
            route.previous, route.ended, route.anchor = previous, False, arrival
            if previous is not None:  # optional hooks; a chat's first session fires neither
                self.h.recorder.on_session_switch(previous, route.session)
                self.h.hooks.on_session_reset(route.session)
        route.last_user = arrival
        turn = Pending(message.chat, route.session, message.text, "hidden" if message.muted else "visible")
        self.busy_chats[message.chat.name] = self.ask(turn, self.agent(route.session, message.chat))

    def notice_boundary(self, route: Route, at: int | None = None) -> None:
        """End the session if it is past a boundary the watcher has not acted on (a lazy chat's,
        or one between ticks) at `at` (now): a message or a command arriving there notices it first."""
        expiry = self.expiry(route)
        if expiry is not None and (self.h.clock.now() if at is None else at) >= expiry[0]:
            self.end_session(route, expiry[1])

    def ask(self, turn: Pending, agent: Agent) -> str:
        request = self.h.llm.request(turn.chat.name, turn.session, [row.content for row in agent.rows] + [turn.text])
        self.pending[request] = turn
        agent.busy, agent.last_activity = True, self.h.clock.now()
        self.enforce_cap()
        return request

    def stop_turn(self, name: str) -> None:
        """/stop abandons the chat's turn in flight (its rows were never written)."""
        request = self.busy_chats.pop(name, None)
        if request is None:
            return
        session = self.pending.pop(request).session
        if session in self.cache:
            self.cache[session].busy = any(other.session == session for other in self.pending.values())
        self.drain(name)
        self.enforce_cap()

    def make_due(self, name: str) -> None:
        """The chat's turn is answered: the commands queued right behind it are due, on disk
        until they run (a crash before then leaves them to the restart)."""
        queue = self.queues.get(name)
        while queue and not isinstance(queue[0][0], Inbound):
            command, _arrival = queue.popleft()
            self.disk.due.setdefault(name, []).append(command)  # type: ignore[arg-type]

    def drain(self, name: str) -> None:
        """Run the commands the chat's last reply made due, then what queued behind its turn,
        up to the next message's turn."""
        for chat, command in self.disk.due.pop(name, ()):
            self.run_command(chat, command)
        queue = self.queues.get(name)
        while queue and name not in self.busy_chats:
            item, arrival = queue.popleft()
            if isinstance(item, Inbound):
                self.start_turn(item, arrival)
            else:
                self.run_command(*item)
        if queue is not None and not queue:
            del self.queues[name]

    def run_command(self, chat: Chat, command: str) -> None:
        route = self.disk.routes.get(chat.name)
        if route is None or route.session is None:
            return
        self.notice_boundary(route)  # then /resume past it reopens the session that just ended
        if command in ("/new", "/reset") and not route.ended:
            self.end_session(route, "new")
        elif command == "/resume" and route.ended:  # past a boundary, its successor not begun: reopen it
            route.ended, route.anchor, route.last_user = False, self.h.clock.now(), self.h.clock.now()
        elif command == "/resume" and route.previous is not None:
            left, target, now = route.session, route.previous, self.h.clock.now()
            self.end_session(route, "switch")  # the session left behind ends first
            route.session, route.previous, route.ended, route.anchor, route.last_user = target, left, False, now, now
            self.h.recorder.on_session_switch(left, target)

    # -- boundaries -----------------------------------------------------------------------

    def expiry(self, route: Route) -> tuple[int, str] | None:
        """(the first instant the live session is past its policy boundary, why), or None."""
        if route.session is None or route.ended:
            return None
        policy = self.config.policy_for(route.chat.platform, route.chat.chat_type)
        options: list[tuple[int, str]] = []
        if policy.mode in ("idle", "both"):  # past iff now > last user message + idle_minutes
            options.append((route.last_user + policy.idle_minutes * MINUTE + 1, "idle"))
        if policy.mode in ("daily", "both"):  # the first at_hour after it began, deferred by min idle
            boundary = next_daily_boundary(route.anchor, policy.at_hour, self.h.clock.zone)
            options.append((max(boundary, route.last_user + policy.daily_min_idle_minutes * MINUTE), "daily"))
        return min(options, default=None)

    def end_session(self, route: Route, reason: str) -> None:
        """The one way a session ends: buffers flushed, the full transcript to memory, finalize."""
        assert route.session is not None
        session, route.ended = route.session, True
        agent = self.cache.pop(session, None)
        if agent is not None:
            self.release(agent)
        row = self.disk.rows.get(session)
        transcript = agent.rows if agent is not None else row.messages if row is not None else []
        for spec in self.config.providers:
            self.flush_buffer(spec.name, session)
        self.h.recorder.on_session_end(session, [(message.role, message.content) for message in transcript])
        self.h.hooks.on_session_finalize(session, reason)  # no check reads the reason

    def tick_every(self) -> int:
        return self.config.watcher_interval or LAZY_SWEEP

    def watched(self, chat: str) -> bool:
        """Whether the watcher ends this chat's sessions (eager) or its next message does (lazy):
        the chat's own mode (`config.finalization_by_chat`), else the gateway-wide one."""
        return self.config.finalization_of(chat) == "eager"

    @step
    def tick(self) -> None:
        """The expiry watcher (of the eager chats), the idle sweep, retries of refused buffers."""
        now = self.h.clock.now()
        for name, route in self.disk.routes.items():
            if not self.watched(name):
                continue
            expiry = self.expiry(route)
            if expiry is not None and now >= expiry[0] and name not in self.busy_chats:  # a turn in flight defers it
                self.end_session(route, expiry[1])
        for agent in [agent for agent in self.cache.values() if not agent.busy]:
            if now - agent.last_activity > self.config.idle_ttl:
                self.evict(agent)
        self.retry_owed()
        self.timer = self.h.scheduler.call_at(now + self.tick_every(), self.tick)

    # -- the agent cache and the disk -----------------------------------------------------

    def agent(self, session: str, chat: Chat, parent: str | None = None) -> Agent:
        """The session's agent, now the most recently used: cached, else loaded from disk."""
        agent = self.cache.pop(session, None)
        if agent is None:
            row = self.disk.rows.get(session)
            rows = list(row.messages) if row is not None else []
            agent = Agent(session, chat, parent, rows, flushed=len(rows), last_activity=self.h.clock.now())
        self.cache[session] = agent
        return agent

    def enforce_cap(self) -> None:
        idle = [agent for agent in self.cache.values() if not agent.busy]  # busy agents do not count
        for agent in idle[: max(0, len(idle) - self.config.cache_cap)]:
            self.evict(agent)

    def evict(self, agent: Agent) -> None:
        """Never a boundary: nothing ends, and the transcript is on disk (written back first if
        another surface deleted its row)."""
        del self.cache[agent.session]
        self.release(agent)
        self.h.note("evict", session=agent.session)

    def release(self, agent: Agent) -> None:
        """The agent's memory is about to go: a row deleted under it gets the whole transcript
        back now, not at a next write that may never come."""
        if agent.rows:
            self.flush(agent)

    def flush(self, agent: Agent) -> None:
        """Write the agent's new rows. If another surface deleted its row, recreate it under the
        same id with the whole transcript (heal); a child whose parent row is gone loses the link
        until that row is written (a parent whose only turn was stopped is written after it)."""
        row = self.disk.rows.get(agent.session)
        if row is None:
            if agent.flushed:
                self.h.note("heal", session=agent.session)
            parent = agent.parent if agent.parent in self.disk.rows else None
            self.disk.rows[agent.session] = Row(parent, list(agent.rows))
            child = self.disk.rows.get(self.disk.children.get(agent.session, ""))
            if child is not None and child.parent is None:  # written before this row: it names it now
                child.parent = agent.session
        else:
            row.messages += agent.rows[agent.flushed:]
        agent.flushed = len(agent.rows)

    def flush_buffer(self, provider: str, session: str) -> None:
        """Ship a batching provider's buffered turns of `session`; kept and retried if refused.
        A slow backend's calls are made again as they were (each lands when the backend said),
        and turns buffered since go in a call of their own: one call with them all would be held
        back until the newest is done, and the older turns would land late."""
        buffer = self.disk.buffers[provider].get(session)
        if not buffer:
            return
        calls, at = [], 0
        for size in self.slow_calls.pop((provider, session), []):
            calls.append(buffer[at:at + size])
            at += size
        calls.append(buffer[at:])
        kept: list[tuple[str, str]] = []
        sizes: list[int] = []
        for k, call in enumerate(calls):
            if not call:
                continue
            try:
                self.h.backends[provider].ingest(session, [text for turn in call for text in turn])
            except BackendBusy as err:
                kept, sizes = kept + call, [*sizes, len(call)]
                if self.up:  # a slow backend: retry when it said, not at the tick
                    now = self.h.clock.now()
                    self.retries = [t for t in self.retries if not t.cancelled and t.when > now]
                    self.retries.append(self.h.scheduler.call_at(err.ready_at, self.retry_owed))
            except BackendUnavailable:  # failing: the rest would fail too
                rest = [c for c in calls[k:] if c]
                kept, sizes = kept + [turn for c in rest for turn in c], sizes + [len(c) for c in rest]
                break
        if kept:
            self.disk.buffers[provider][session] = kept
            self.slow_calls[(provider, session)] = sizes
            self.owed.add((provider, session))
            return
        del self.disk.buffers[provider][session]
        self.owed.discard((provider, session))

    @step
    def retry_owed(self) -> None:
        for provider, session in sorted(self.owed):
            self.flush_buffer(provider, session)

    def flush_all_buffers(self) -> None:
        for provider, buffers in self.disk.buffers.items():
            for session in list(buffers):
                self.flush_buffer(provider, session)

    # -- faults and views -----------------------------------------------------------------

    @step
    def delete_session_row(self, session_id: str, keep_children: bool = False) -> None:
        doomed = [session_id]
        while doomed:
            parent = doomed.pop()
            if self.disk.rows.pop(parent, None) is not None and not keep_children:  # the cascade reaches its
                doomed += [sid for sid, row in self.disk.rows.items() if row.parent == parent]  # delegate children

    def lock_store(self, until: int) -> None:
        raise NotImplementedError("db_locked is declared unsupported: the runner never calls this")

    def durable_state(self) -> DurableState:
        sessions = tuple(StoredSession(sid, row.parent, tuple(row.messages)) for sid, row in self.disk.rows.items())
        routing = tuple(sorted((name, route.session) for name, route in self.disk.routes.items() if route.session))
        return DurableState(sessions, routing)

    def resources(self) -> Resources:
        if not self.up:
            return Resources()
        cached = tuple((agent.session, agent.busy) for agent in self.cache.values())
        retries = sum(not t.cancelled and t.when > self.h.clock.now() for t in self.retries)
        return Resources(cached, running=(1 if self.timer is not None else 0) + retries)  # the armed timers


def make() -> MinimalGateway:
    """The factory: sessiongate calls it once per scenario (`--gateway minimal_gateway:make`)."""
    return MinimalGateway()
