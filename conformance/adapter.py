"""The adapter protocol: what a gateway under test implements, and what the harness hands it.

Events go in through `Gateway` methods; observations come out through the observers in
`Harness` (a fake LLM, the platform outbox, a recording memory provider, recording memory
backends, a plugin-hook bus). Background work (expiry watcher ticks, idle sweeps) runs as
timers the gateway sets on `Harness.scheduler`, so the simulator decides when it happens and
every tick lands in the log at its exact virtual time.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from conformance.harness.spill import ObservationLog
from conformance.observations import DurableState, Resources, halves, reply_text, turn_ids
from sessiongate import SessiongateError
from sim.clock import VirtualClock
from sim.engine import Engine, Timer
from sim.scenario import Chat, GatewayConfig, ResetPolicy, Restart, Scenario, Usage

EVENT_KINDS = frozenset(
    {"message", "command", "delegate", "sigterm", "crash", "restart", "delete_session",
     "delete_parent", "db_locked", "backend_fail", "backend_slow"}
)
SETTINGS: dict[str, str] = {
    # A feature of the contract a gateway may not have, and what the runner does about it.
    "muted": "a muted message is delivered as a plain one (logged unmuted, with a `skipped` record)",
    "daily_min_idle_minutes": "a scenario whose config uses it is skipped whole (outcome `skip`)",
    "restart_config": "a scenario with a `restart` that changes the configuration is skipped whole (outcome `skip`)",
    "reset_by_platform": "a scenario whose config sets a policy per platform is skipped whole (outcome `skip`)",
    "reset_by_chat_type": "a scenario whose config sets a policy per chat type is skipped whole (outcome `skip`)",
    "finalization_by_chat": "a scenario whose config gives some chats their own finalization is skipped whole (outcome `skip`)",
    "providers": "the scenario's memory providers are left out: it runs, and is judged, with the recorder alone (a `skipped` record)",
}
UNSUPPORTED_COMMANDS = frozenset({"/resume"})
"""Commands a gateway may lack (OpenClaw has no /resume): each such command event is skipped."""
FEATURES: frozenset[str] = EVENT_KINDS | frozenset(SETTINGS) | UNSUPPORTED_COMMANDS
"""Every name `Profile.unsupported` may hold: the event kinds, the settings of `SETTINGS` and the
commands of `UNSUPPORTED_COMMANDS`."""


def config_features(config: GatewayConfig) -> frozenset[str]:
    """The optional settings of `SETTINGS` that `config` uses (a gateway without one cannot be
    judged on a scenario that relies on it)."""
    used: set[str] = set()
    policies = [config.reset, *(p for _, p in config.reset_by_platform), *(p for _, p in config.reset_by_chat_type)]
    if any(p.daily_min_idle_minutes > 0 and p.mode in ("daily", "both") for p in policies):
        used.add("daily_min_idle_minutes")
    if config.reset_by_platform:
        used.add("reset_by_platform")
    if config.reset_by_chat_type:
        used.add("reset_by_chat_type")
    if config.finalization_by_chat:
        used.add("finalization_by_chat")
    return frozenset(used)


def scenario_features(scenario: Scenario) -> frozenset[str]:
    """The optional settings of `SETTINGS` that `scenario` uses: its config's, those of the
    configurations its restarts change to, and `restart_config` if any restart changes it."""
    used = set(config_features(scenario.config))
    config = scenario.config
    for event in scenario.events:
        if isinstance(event, Restart) and event.change is not None:
            config = event.change.apply(config)
            used |= config_features(config) | {"restart_config"}
    return frozenset(used)


@dataclass(frozen=True)
class Profile:
    """What a gateway claims about itself; the checks hold it to exactly this.

    finalization: 'eager' ends a session within `latency` ms of its boundary (a watcher);
      'lazy' ends it when the chat's next message arrives.
    crash_durable: every acknowledged turn survives SIGKILL, in the store and in memory.
    sweep_interval: how often idle agents are swept (I7 allows this much slack past the TTL).
    unsupported: event kinds and settings (`FEATURES`) the gateway does not have; the runner
      skips them and says so, and never judges them (see `SETTINGS`).
    reset_default: the reset policy the gateway applies when a scenario leaves it unset
      (`reset: default`), as the contract's modes express it; needed only for such a config
      (`GatewayConfig.reset_default`), else None. None there: the runner refuses the scenario.
      Logged in the profile, so the checks judge the policy that was in force.
    reply_within: how long after a chat can serve a message its reply may take (I9), in ms;
      None: `latency` plus the scenario's turn latency.
    crash_points: the names the gateway passes to `Harness.crash_point` (places inside a step
      where durable and volatile state can part); a `crash_at` event or `fuzz --crash-points`
      may kill it there. Logged, so coverage sees the declared set from the log alone.
    """

    finalization: Literal["eager", "lazy"] = "eager"
    latency: int = 0
    crash_durable: bool = True
    sweep_interval: int = 0
    unsupported: frozenset[str] = frozenset()
    reply_within: int | None = None
    reset_default: ResetPolicy | None = None
    crash_points: frozenset[str] = frozenset()

    def to_detail(self) -> dict[str, Any]:
        detail: dict[str, Any] = {
            "finalization": self.finalization,
            "latency": self.latency,
            "crash_durable": self.crash_durable,
            "sweep_interval": self.sweep_interval,
            "unsupported": sorted(self.unsupported),
        }
        if self.reply_within is not None:  # left out when not declared: older logs read alike
            detail["reply_within"] = self.reply_within
        if self.reset_default is not None:  # likewise
            detail["reset_default"] = policy_detail(self.reset_default)
        if self.crash_points:  # likewise: a gateway declaring none logs what it always did
            detail["crash_points"] = sorted(self.crash_points)
        return detail


def policy_detail(policy: ResetPolicy) -> dict[str, Any]:
    """A reset policy as plain data (every field: it is read back by `policy_from_detail`)."""
    return {"mode": policy.mode, "idle_minutes": policy.idle_minutes, "at_hour": policy.at_hour,
            "daily_min_idle_minutes": policy.daily_min_idle_minutes}


def policy_from_detail(detail: dict[str, Any]) -> ResetPolicy:
    return ResetPolicy(detail["mode"], int(detail["idle_minutes"]), int(detail["at_hour"]),
                       int(detail.get("daily_min_idle_minutes", 0)))


@dataclass(frozen=True)
class Inbound:
    """A user message as the platform hands it over. The turn id is in the text."""

    chat: Chat
    text: str
    muted: bool = False


class BackendUnavailable(RuntimeError):
    """A memory backend refused a call (an injected `backend_fail` fault)."""


class BackendBusy(BackendUnavailable):
    """A slow memory backend (an injected `backend_slow` fault) has not completed the call yet:
    the same call made again at `ready_at` or later completes. A synchronous call cannot take
    virtual time, so the backend says when it will be done and the waiting is the gateway's;
    a gateway that knows only failures treats it as one."""

    def __init__(self, message: str, ready_at: int) -> None:
        super().__init__(message)
        self.ready_at = ready_at


class CrashPointFired(BaseException):
    """The process dies at a crash point (harness-private). Raised by `Harness.crash_point` to
    unwind the gateway's step; a BaseException, like SystemExit, so an `except Exception` in
    the gateway does not swallow it. A gateway must let it through: code of a dead process
    must not run on (the runner reports a gateway that catches it as an error)."""

    def __init__(self, point: str) -> None:
        super().__init__(point)
        self.point = point


class CrashPoints:
    """When the gateway's crash points fire: each `hit(point)` counts, and answers whether the
    process dies there. Armed by `crash_at` events (the n-th hit after the event), or, for
    `fuzz --crash-points`, by a seeded `swarm` (see `conformance.harness.runner.Swarm`)."""

    def __init__(self) -> None:
        self.declared: frozenset[str] = frozenset()
        self.armed: list[list[Any]] = []  # [point, hits still to go, restart after (ms) or None]
        self.live = False  # only while a gateway step runs (never in profile, views or close)
        self.since: dict[str, int] = {}  # hits of each point since the last scenario event began
        self.swarm: Callable[[str], bool] | None = None
        self.fired: str | None = None
        self.restart_after: int | None = None  # of the point that fired

    def arm(self, point: str, hit: int, restart_after: int | None = None) -> None:
        self.armed.append([point, hit, restart_after])

    def hit(self, point: str) -> bool:
        if not self.live or self.fired is not None:
            return False
        self.since[point] = self.since.get(point, 0) + 1
        fire = False
        for entry in list(self.armed):
            if entry[0] == point:
                entry[1] -= 1
                if entry[1] == 0 and not fire:
                    fire, self.restart_after = True, entry[2]
                    self.armed.remove(entry)
        if not fire and self.swarm is not None:
            fire, self.restart_after = self.swarm(point)
        if fire:
            self.fired = point
        return fire


class GatewayTimeout(SessiongateError):
    """A gateway step took longer than the wall-clock step timeout (isolated gateways)."""


class Interrupted(KeyboardInterrupt):
    """sessiongate itself was told to stop: its own SIGINT/SIGTERM handler (`raise_interrupted`)
    raises this, and only this stops a run. A KeyboardInterrupt (or SystemExit…) that a gateway
    raises is that gateway's error at its step; a KeyboardInterrupt, so every `except
    KeyboardInterrupt` outside the runner still reads it as Ctrl-C."""


def raise_interrupted(signum: int, _frame: object) -> None:
    """The harness's signal handler: `Interrupted(signum)`, distinguishable from the gateway's own."""
    raise Interrupted(signum)


class RemoteGatewayError(SessiongateError):
    """A gateway in another process failed a step, died, or broke the wire protocol."""

    def __init__(self, message: str, traceback: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.traceback = traceback


class Scheduler:
    """Virtual-time timers for the gateway's background work. `guard(what, callback, *args)`
    runs each callback when its time comes (the runner's: what a callback raises is the
    gateway's error at that step, never a crash of the run)."""

    def __init__(self, engine: Engine, guard: Callable[..., Any] | None = None) -> None:
        self._engine, self._guard = engine, guard
        self.epoch: int | None = None  # counted only for a gateway with crash points: see `void`

    def now(self) -> int:
        return self._engine.now

    def call_at(self, when: int, callback: Callable[..., Any], *args: Any) -> Timer:
        if self.epoch is not None:
            return self._engine.timer(when, self._in_epoch, self.epoch, callback, args)
        if self._guard is None:
            return self._engine.timer(when, callback, *args)
        return self._engine.timer(when, self._guard, "timer", callback, *args)

    def void(self) -> None:
        """A crash point killed the process mid-step: its timers die with it. (A gateway cancels
        its own at a scripted crash, but one killed mid-step may not have stored the handle of a
        timer it had just set.)"""
        if self.epoch is not None:
            self.epoch += 1

    def _in_epoch(self, epoch: int, callback: Callable[..., Any], args: tuple[Any, ...]) -> None:
        if epoch != self.epoch:
            return
        if self._guard is None:
            callback(*args)
        else:
            self._guard("timer", callback, *args)


class FakeLLM:
    """Answers every request after the configured latency with '[<turn>] reply', <turn> the
    newest turn id of the prompt's last message.

    Each answer also reports token usage (`sim.scenario.Usage`): the credited turn's
    message says what (`usage:`), else the scenario's config; 'small' by default. A gateway
    that reads usage asks `usage_of(request_id)` when the answer arrives; the `llm_request`
    record names any usage other than 'small', so the log says what each answer reported."""

    def __init__(self, log: ObservationLog, engine: Engine, latency: int, deliver: Callable[[str, str], None],
                 usage: Usage = "small", usage_by_turn: dict[str, Usage] | None = None) -> None:
        self._log, self._engine, self._latency, self._deliver = log, engine, latency, deliver
        self._count = 0
        self._usage, self._usage_by_turn = usage, usage_by_turn or {}
        self._reported: dict[str, Usage] = {}  # request id -> its answer's usage, other than 'small', until answered
        self.epoch = 0  # bumped when the gateway process dies: replies to the dead one are lost

    def request(self, chat: str, session: str, prompt: Sequence[str]) -> str:
        """Send the prompt (the session's texts, last one the user's); returns a request id."""
        self._count += 1
        request_id = f"r{self._count}"
        # The reply answers the newest turn of the last message, the one whose arrival made the
        # gateway ask; one that folds unanswered messages into that prompt ("[t3] …\n[t5] …")
        # answers them with it too. The record lists every turn carried, the credited one first.
        carried = tuple(dict.fromkeys(turn_ids(prompt[-1]))) if prompt else ()
        turn = carried[-1] if carried else None
        credited = (*carried[-1:], *carried[:-1])
        usage = self._usage_by_turn.get(turn, self._usage) if turn else self._usage
        if usage == "small":  # the default is left out of the record: logs from before usage read alike
            self._log.add("llm_request", chat=chat, session=session, turns=credited, request=request_id)
        else:
            self._reported[request_id] = usage
            self._log.add("llm_request", chat=chat, session=session, turns=credited, request=request_id, usage=usage)
        self._engine.call_later(self._latency, self._reply, self.epoch, request_id, turn)
        return request_id

    def usage_of(self, request_id: str) -> Usage:
        """What the answer to `request_id` reports about token usage (see `sim.scenario.Usage`)."""
        return self._reported.get(request_id, "small")

    def _reply(self, epoch: int, request_id: str, turn: str | None) -> None:
        try:
            if epoch == self.epoch:
                self._deliver(request_id, reply_text(turn) if turn else "reply")
        finally:
            self._reported.pop(request_id, None)


class Platform:
    """The chat platform's outbox: a reply delivered here acknowledges its turn."""

    def __init__(self, log: ObservationLog) -> None:
        self._log = log

    def send_reply(self, chat: str, session: str, text: str) -> None:
        self._log.add("reply", chat=chat, session=session, turns=turn_ids(text))


class MemoryBackend:
    """Where a memory provider ships turns; 'ingested' is counted here."""

    def __init__(self, name: str, log: ObservationLog, now: Callable[[], int]) -> None:
        self.name, self._log, self._now = name, log, now
        self.down_until = -1
        self.slow_until, self.slow_delay = -1, 0
        self._ready: dict[tuple[str, str], int] = {}  # (session, turn) -> when its slow call completes

        self._keys: set[str] = set()  # idempotency keys taken: the backend outlives the gateway's crashes

    def ingest(self, session: str, texts: Sequence[str], keys: Sequence[str] | None = None) -> None:
        """Store the texts of turns of `session`. Raises BackendUnavailable while failing,
        BackendBusy while a slow call is not complete.

        The record names the turns whose user message the texts carry (`turns`) and those whose
        reply they carry (`replies`, `observations.halves`): a turn ingested is both halves.
        `keys` (one per text, optional): idempotency keys, as a document id is to Hindsight's
        retain; a text whose key the backend already took is acknowledged and not stored again
        (a re-ship after a crash between shipping and saving the watermark is no double ingest).
        A call whose every text was a repeat is logged `ingest_repeated`."""
        taken: list[str] = []
        if keys is not None:
            if len(keys) != len(texts):
                raise ValueError(f"ingest: {len(keys)} keys for {len(texts)} texts")
            if self._now() >= self.down_until:
                fresh = [i for i, key in enumerate(keys) if key not in self._keys]
                if len(fresh) < len(texts):
                    repeated = [texts[i] for i in range(len(texts)) if i not in set(fresh)]
                    users, replies = halves(repeated)
                    self._log.add("ingest_repeated", session=session, turns=users, backend=self.name, replies=list(replies))
                if not fresh:
                    return
                texts, taken = [texts[i] for i in fresh], [keys[i] for i in fresh]
        users, replies = halves(texts)
        if self._now() < self.down_until:
            self._log.add("ingest_failed", session=session, turns=users, backend=self.name, replies=list(replies))
            raise BackendUnavailable(f"memory backend {self.name!r} is unavailable")
        self._complete_slow(session, users, replies)
        self._log.add("ingest", session=session, turns=users, backend=self.name, replies=list(replies))
        self._keys.update(taken)  # only once stored: a busy or failed call is taken when it is made again

    def _complete_slow(self, session: str, users: Sequence[str], replies: Sequence[str]) -> None:
        """A turn first sent while the backend is slow completes `slow_delay` after that first
        call; a call completes when all its turns have (else BackendBusy, logged `ingest_busy`)."""
        now = self._now()
        ready = now
        for turn in dict.fromkeys((*users, *replies)):
            key = (session, turn)
            if key not in self._ready and now < self.slow_until:
                self._ready[key] = now + self.slow_delay
            ready = max(ready, self._ready.get(key, now))
        if ready > now:
            self._log.add("ingest_busy", session=session, turns=users, backend=self.name, replies=list(replies), ready=ready)
            raise BackendBusy(f"memory backend {self.name!r} is slow: the call completes at {ready}", ready)


class RecordingProvider:
    """sessiongate's own memory provider: records every hook and ships each turn at once.

    Every gateway loads it beside its own providers; it is how the checks see `sync_turn`,
    `on_session_end`, `on_session_switch` and `shutdown` in the order the gateway calls them.
    """

    name = "recorder"

    def __init__(self, log: ObservationLog, backend: MemoryBackend) -> None:
        self._log, self._backend = log, backend

    def sync_turn(self, session: str, user: str, assistant: str) -> None:
        self._log.add("sync_turn", session=session, turns=turn_ids(user))
        self._backend.ingest(session, [user, assistant])

    def on_session_end(self, session: str, transcript: Sequence[tuple[str, str]]) -> None:
        """`turns`: the turns whose user message it carries; `replies`: those whose reply it carries."""
        turns = [turn for role, content in transcript if role == "user" for turn in turn_ids(content)]  # a folded message carries two
        replies = [turn for role, content in transcript if role == "assistant" for turn in turn_ids(content)]
        self._log.add("on_session_end", session=session, turns=turns, messages=len(transcript), replies=replies)

    def on_session_switch(self, old: str | None, new: str) -> None:
        self._log.add("on_session_switch", session=new, previous=old)

    def shutdown(self) -> None:
        self._log.add("memory_shutdown")


class HookBus:
    """The plugin-hook bus: records `on_session_finalize` and `on_session_reset`."""

    def __init__(self, log: ObservationLog) -> None:
        self._log = log

    def on_session_finalize(self, session: str, reason: str) -> None:
        self._log.add("on_session_finalize", session=session, reason=reason)

    def on_session_reset(self, session: str) -> None:
        self._log.add("on_session_reset", session=session)


@dataclass
class Harness:
    """Everything the harness hands a gateway at start; all of it is virtual and recorded."""

    clock: VirtualClock
    scheduler: Scheduler
    llm: FakeLLM
    platform: Platform
    recorder: RecordingProvider
    backends: dict[str, MemoryBackend]
    hooks: HookBus
    log: ObservationLog = field(repr=False)
    seed: int = 0  # the scenario's seed: a gateway's own randomness (Hermes's lock-retry jitter) comes from it
    points: CrashPoints = field(default_factory=CrashPoints, repr=False)

    def note(self, what: str, **detail: Any) -> None:
        """The gateway's own account of something internal (eviction, sweep, heal): shown in
        timelines and lifecycle coverage, never trusted by a check."""
        self.log.add("note", what=what, **detail)

    def crash_point(self, point: str) -> None:
        """A place inside a step where the process may die (FoundationDB's BUGGIFY, for
        crashes): declare `point` in `Profile.crash_points`. When a scenario arms it, this
        raises `CrashPointFired`, which the gateway must let unwind its step; the runner then
        crashes the gateway at this instant. Otherwise it returns at once."""
        if self.points.hit(point):
            raise CrashPointFired(point)


@runtime_checkable
class Gateway(Protocol):
    """A gateway under test. Every method is called at the virtual time of its event.

    Optional, outside the protocol: `close()`, called once when the run is over (after its
    last `durable_state`, or after a failure) and before the log is judged, to release what
    the run held (a child process, a database); and `resources_delta()`, asked instead of
    `resources()` after every event and timer: what changed since its last answer, as a dict
    in the `resources` record's delta form (`values.resources_change`), None for nothing, or a
    whole `Resources` (always right). The runner holds it to `resources()` every 64th sample,
    and ignores it in a subclass that redefines `resources()` below the class defining it."""

    def profile(self, config: GatewayConfig) -> Profile:
        """What this gateway claims under `config` (see `Profile`)."""
        ...

    def start(self, config: GatewayConfig, harness: Harness) -> None:
        """Boot: open the store, load the providers, set the first timers."""
        ...

    def deliver_message(self, message: Inbound) -> None:
        """A user message arrives; the gateway routes it and asks `harness.llm`."""
        ...

    def deliver_command(self, chat: Chat, command: str) -> None:
        """A slash command arrives: '/new', '/reset', '/stop' or '/resume'."""
        ...

    def deliver_reply(self, request_id: str, text: str) -> None:
        """The LLM answers request `request_id`; the gateway completes that turn."""
        ...

    def delegate(self, chat: Chat, text: str) -> None:
        """The chat's current session runs a delegate child turn (its own session row)."""
        ...

    def sigterm(self) -> None:
        """Graceful shutdown: drain or interrupt turns, flush buffers, end no session."""
        ...

    def crash(self) -> None:
        """SIGKILL: drop every in-memory object; the durable store survives."""
        ...

    def restart(self, config: GatewayConfig | None = None) -> None:
        """Start again after sigterm or crash, rebuilding from the durable store. `config`: the
        configuration the restart brings (its reset policy changed, `sim.scenario.ConfigChange`),
        in force from now on; given only by a scenario that changes it, and only to a gateway
        that does not declare `restart_config` unsupported (docs/contract.md)."""
        ...

    def delete_session_row(self, session_id: str, keep_children: bool = False) -> None:
        """Another surface deletes this session's row (cascading to its messages and delegate
        children). `keep_children`: it deletes the row and its messages with foreign keys
        off, as the sqlite3 shell does by default, leaving children with a dangling parent."""
        ...

    def lock_store(self, until: int) -> None:
        """Writes to the durable store fail as 'database is locked' until virtual time `until`."""
        ...

    def durable_state(self) -> DurableState:
        """The store's transcripts and routing, read the way another surface would."""
        ...

    def resources(self) -> Resources:
        """What the gateway holds right now (cached agents, live tasks)."""
        ...
