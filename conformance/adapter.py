"""The adapter protocol: what a gateway under test implements, and what the harness hands it.

Events go in through `Gateway` methods; observations come out through the observers in
`Harness` (a fake LLM, the platform outbox, a recording memory provider, recording memory
backends, a plugin-hook bus). Background work (expiry watcher ticks, idle sweeps) runs as
timers the gateway sets on `Harness.scheduler`, so the simulator decides when it happens and
every tick lands in the log at its exact virtual time. The observers live in
`conformance.observers`, the names `Profile.unsupported` may hold in `conformance.features`;
everything a gateway implementation imports is importable from here (`__all__`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from conformance.harness.spill import ObservationLog
from conformance.observations import DurableState, Resources
from conformance.observers import (
    BackendBusy,
    BackendUnavailable,
    CrashPointFired,
    FakeLLM,
    HookBus,
    MemoryBackend,
    Platform,
    RecordingProvider,
    bad_handover,
    plain_detail,
    plain_str,
)
from sim.clock import VirtualClock
from sim.engine import Engine, Timer
from sim.scenario import Chat, GatewayConfig, ResetPolicy

__all__ = [  # what a gateway implementation needs, all importable from here
    "BackendBusy", "BackendUnavailable", "CrashPointFired", "Gateway", "Harness", "Inbound", "MemoryBackend", "Profile",
    "RecordingProvider", "policy_detail", "policy_from_detail",
]


@dataclass(frozen=True)
class Profile:
    """What a gateway claims about itself; the checks hold it to exactly this.

    finalization: 'eager' ends a session within `latency` ms of its boundary (a watcher);
      'lazy' ends it when the chat's next message arrives.
    crash_durable: every acknowledged turn survives SIGKILL, in the store and in memory.
    sweep_interval: how often idle agents are swept (I7 allows this much slack past the TTL, capped at
      `GatewayConfig.horizon()`; quiescence waits it out).
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
      may kill it there. A gateway that declares any, or whose crashes are real, is also killed
      at `HARNESS_POINTS`, which the runner adds (a gateway may not declare those names
      itself). Logged, so coverage sees the declared set from the log alone.
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


# The harness's own crash points, at its observation boundaries: a gateway that declares any
# crash point of its own (it can be killed inside a step), or whose crashes are real (an `exec:`
# or `--isolate` child that said so, the OpenClaw adapter: the harness needs no cooperation to
# kill it), is also killed at these, which no gateway passes to `Harness.crash_point`. `reply-sent`: the platform has the reply, so
# the turn is acknowledged, and nothing of the step after it ran (a gateway that replies
# before its turn is safe on disk, or before the memory it owes is, loses the turn there).
HARNESS_POINTS = frozenset({"reply-sent"})


class CrashPoints:
    """When the gateway's crash points fire: each `hit(point)` counts, and answers whether the
    process dies there. Armed by `crash_at` events (the n-th hit after the event), or, for
    `fuzz --crash-points`, by a seeded `swarm` (see `conformance.harness.swarm.Swarm`)."""

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
        for entry in list(self.armed) if self.armed else ():  # asked at every reply: mostly nothing armed
            if entry[0] == point:
                entry[1] -= 1
                if entry[1] == 0:  # two `crash_at`s due at one hit are one crash (the first's restart)
                    self.armed.remove(entry)
                    if not fire:
                        fire, self.restart_after = True, entry[2]
        if not fire and self.swarm is not None:
            fire, self.restart_after = self.swarm(point)
        if fire:
            self.fired = point
        return fire


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
        if type(when) is not int:  # the engine's queue orders it: no gateway type may run in there
            raise bad_handover("scheduler.call_at", "when", "an int of virtual ms", when)
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


_PLAIN = {str, int, float, bool, type(None)}  # a note's detail values that need no copy


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
    # A directory that outlives the process, where crashes are real: in a child process
    # (`exec:`, `--isolate`) whose gateway has `open_store` (see `Gateway`), each crash kills the
    # process and a new one opens the store the dead one left here. None in process.
    state_dir: str | None = None

    def note(self, what: str, **detail: Any) -> None:
        """The gateway's own account of something internal (eviction, sweep, heal): shown in
        timelines and lifecycle coverage, never trusted by a check."""
        if type(what) is not str or set(map(type, detail.values())) - _PLAIN:  # else plain already: no call
            what, detail = plain_str("note", "what", what), {key: plain_detail("note", key, value) for key, value in detail.items()}
        self.log.add("note", what=what, **detail)

    def crash_point(self, point: str) -> None:
        """A place inside a step where the process may die (FoundationDB's BUGGIFY, for
        crashes): declare `point` in `Profile.crash_points`. When a scenario arms it, this
        raises `CrashPointFired`, which the gateway must let unwind its step; the runner then
        crashes the gateway at this instant. Otherwise it returns at once."""
        if type(point) is not str:
            point = plain_str("crash_point", "point", point)
        if self.points.hit(point):
            raise CrashPointFired(point)


@runtime_checkable
class Gateway(Protocol):
    """A gateway under test. Every method is called at the virtual time of its event.

    Optional, outside the protocol: `close()`, called once when the run is over (after its
    last `durable_state`, or after a failure) and before the log is judged, to release what
    the run held (a child process, a database); and `resources_delta()`, asked instead of
    `resources()` after every event and timer: which agents came and went since its last
    answer, as a dict in the `resources` record's delta form (`values.resources_change`; a
    move or a busy flag flipped need not be said), None for none, or a whole `Resources`
    (always right). The runner holds it to `resources()` (which agents, and what runs) at every
    sample until it matched one listing an agent (after each start), then every 64th sample, and
    ignores it in a subclass that redefines `resources()` below the class defining it.
    And `durable_parts()`, asked instead of `durable_state()` for the final snapshot of a run
    whose log spilled (a long one: every stored row): `(sessions, routing)`, routing as
    `DurableState.routing` and sessions an iterable of `StoredSession`, in any order, each
    read once, checked as `durable_state`'s are and packed as it comes, so neither side holds
    every row at once (the reference streams them from SQLite). Ignored in a subclass that
    redefines `durable_state()` below the class defining it (docs/protocol.md).
    And `open_store(config, harness)`, for real crashes: a gateway that keeps its store under
    `harness.state_dir` and has it is, in a child process (`exec:`, `--isolate`), killed at each
    crash and after each SIGTERM, and a new process's gateway has `open_store` called on the store the dead
    one left (read it; boot nothing: `restart()` does) before the next call. In process a crash
    stays the gateway's own `crash()`."""

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
