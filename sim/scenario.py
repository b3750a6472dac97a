"""What a scenario is: a gateway configuration and a timeline of events, all in virtual time.

Times are epoch milliseconds (`sim.clock`); every event has already been resolved to an
absolute time by the loader or generator. Each event keeps the source line it came from,
so a failing step can be named in the scenario file.
"""

from __future__ import annotations

import re
from array import array
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from itertools import count
from typing import Literal, overload

from sim.clock import DAY, HOUR, MINUTE, SECOND

ResetMode = Literal["idle", "daily", "both", "none"]
RESET_MODES: tuple[str, ...] = ("idle", "daily", "both", "none")
COMMANDS: tuple[str, ...] = ("/new", "/reset", "/stop", "/resume")
TURN_TAG = re.compile(r"\[(t\d+)\]")  # how the harness tags every text of a turn: '[t7] hello', '[t7] reply'
PLATFORMS: tuple[str, ...] = ("telegram", "discord", "slack", "whatsapp", "signal", "cli")
CHAT_TYPES: tuple[str, ...] = ("dm", "group", "channel", "thread")
USAGES: tuple[str, ...] = ("small", "none", "large")
Usage = str | int
"""What the fake LLM's answer reports about token usage: 'small' (a few tokens, the default),
'none' (the answer carries no usage), 'large' (the prompt filled the model's whole context
window), or a whole number of prompt tokens. Gateways that never read usage ignore it."""
CRASH_POINT_NAME = re.compile(r"[a-z][a-z0-9_-]*")  # a crash point's name: lowercase, like a provider's
AFTER_TIMERS, BEFORE_TIMERS = "after-timers", "before-timers"
ORDERS: tuple[str, ...] = (AFTER_TIMERS, BEFORE_TIMERS)
Finalization = Literal["eager", "lazy"]
FINALIZATIONS: tuple[str, ...] = ("eager", "lazy")
"""How a policy boundary is acted on: `eager`, by a watcher within the declared latency;
`lazy`, by the chat's next message (docs/contract.md, What a gateway declares)."""
"""Where an event runs among the timers due at its own instant (sim.engine, rule 3): after
them (the default, and the only order before it could be chosen) or before them."""


@dataclass(frozen=True)
class ResetPolicy:
    """When a chat's session ends by itself (CONTRACT boundaries, 2)."""

    mode: ResetMode = "none"
    idle_minutes: int = 1440
    at_hour: int = 4
    daily_min_idle_minutes: int = 0


@dataclass(frozen=True)
class ProviderSpec:
    """A memory provider the gateway loads; `retain_every_n_turns > 1` batches its turns."""

    name: str
    retain_every_n_turns: int = 1


@dataclass(frozen=True)
class GatewayConfig:
    """Everything the gateway under test is configured with."""

    reset: ResetPolicy = field(default_factory=ResetPolicy)  # one per config: a shared default leaked a mutation into every later one
    reset_by_platform: tuple[tuple[str, ResetPolicy], ...] = ()
    reset_by_chat_type: tuple[tuple[str, ResetPolicy], ...] = ()
    cache_cap: int = 64
    idle_ttl: int = HOUR
    watcher_interval: int | None = 5 * MINUTE  # None: lazy, expiry noticed by the next message
    # Chats finalized otherwise than the gateway-wide mode (the watcher's, above): (chat name,
    # mode), sorted. A lazy chat beside a watcher is left to its next message; an eager chat in
    # a lazy gateway is owed its end within the gateway's declared latency.
    finalization_by_chat: tuple[tuple[str, Finalization], ...] = ()
    providers: tuple[ProviderSpec, ...] = ()
    turn_latency: int = 2 * SECOND
    usage: Usage = "small"  # what every answer reports, unless its message says otherwise
    # `reset: default`: the scenario leaves the reset policy to the gateway (a release's own
    # default). `reset` is then a stand-in ({mode: none}) until `with_default` puts in the policy
    # the gateway reports (`Profile.reset_default`); the runner and the checks both do.
    reset_default: bool = False

    def with_default(self, policy: ResetPolicy) -> GatewayConfig:
        """This config with the gateway's default policy in force (a no-op unless `reset_default`)."""
        return replace(self, reset=policy) if self.reset_default else self

    def policy_for(self, platform: str, chat_type: str) -> ResetPolicy:
        """Per platform, then per chat type, then the default (CONTRACT boundaries, 2)."""
        for name, policy in self.reset_by_platform:
            if name == platform:
                return policy
        for name, policy in self.reset_by_chat_type:
            if name == chat_type:
                return policy
        return self.reset

    def finalization_for(self, chat: str) -> Finalization | None:
        """The chat's own finalization mode, or None: the gateway-wide one."""
        for name, mode in self.finalization_by_chat:
            if name == chat:
                return mode
        return None

    def finalization_of(self, chat: str) -> Finalization:
        """The mode this config gives the chat: its own, else the watcher's (eager with an
        interval, lazy without). What a gateway follows; the checks hold it to its Profile."""
        own = self.finalization_for(chat)
        if own is not None:
            return own
        return "lazy" if self.watcher_interval is None else "eager"

    def horizon(self, sweep: int = 0) -> int:
        """How far past the last event every boundary, watcher tick and sweep has happened: the
        last boundary's `reach`, then `settle`, then a minute more. `sweep`: the gateway's
        declared sweep period; then at least so far that an agent idle since the last turn is
        due out of the cache a minute before (the idle TTL, `reap_slack`, a turn): what the
        harness does not wait for, I7 cannot hold a gateway to. At most twice `horizon()`."""
        base = self.reach() + self.settle() + MINUTE
        return max(base, self.idle_ttl + min(sweep, base) + self.turn_latency + MINUTE)

    def reap_slack(self, sweep: int) -> int:
        """I7's slack past the idle TTL for a gateway that declared sweeping every `sweep` ms:
        as declared, never longer than `horizon()` (a declared year would excuse every agent)."""
        return min(sweep, self.horizon())

    def reach(self) -> int:
        """How far past the last event the last reset boundary can be."""
        policies = [self.reset, *(p for _, p in self.reset_by_platform), *(p for _, p in self.reset_by_chat_type)]
        reach = 0
        for policy in policies:
            if policy.mode in ("idle", "both"):
                reach = max(reach, policy.idle_minutes * MINUTE)
            if policy.mode in ("daily", "both"):
                reach = max(reach, DAY + HOUR + policy.daily_min_idle_minutes * MINUTE)
        return reach

    def settle(self) -> int:
        """What quiescence allows past the last boundary for what it sets off: an idle sweep, two
        watcher ticks and a turn. The longest finalization latency the checks can hold a
        gateway to (a minute short of the final stop)."""
        return self.idle_ttl + 2 * (self.watcher_interval or 0) + self.turn_latency


@dataclass(frozen=True)
class Chat:
    """One conversation route, as the platform presents it. Its identity is (platform, chat type,
    chat id, thread, user): two users in one group (one `chat_id`) are two chats of that group."""

    name: str
    platform: str = "telegram"
    chat_type: str = "dm"
    user: str | None = None
    thread: str | None = None
    chat_id: str | None = None  # the platform's id of the chat (a group several users share); None: `name`

    @property
    def platform_id(self) -> str:
        """The id the platform gives the chat: `chat_id`, else the scenario's name for it."""
        return self.chat_id or self.name

    @property
    def identity(self) -> tuple[str, str, str, str | None, str | None]:
        return (self.platform, self.chat_type, self.platform_id, self.thread, self.user)


@dataclass(frozen=True, slots=True)
class Event:
    """Base of every timeline event: when it happens and where it was written."""

    t: int
    line: int = field(default=0, compare=False)
    order: str = AFTER_TIMERS  # ORDERS: after or before the timers due at `t` (sim.engine, rule 3)

    @property
    def kind(self) -> str:
        return _KIND_BY_CLASS[type(self)]


@dataclass(frozen=True, slots=True)
class Message(Event):
    """An inbound user message; it starts turn `turn` (its id is carried in the text)."""

    chat: str = ""
    turn: str = ""
    text: str = ""
    muted: bool = False
    usage: Usage | None = None  # what the answer to this turn reports; None: the config's


@dataclass(frozen=True, slots=True)
class Command(Event):
    """A slash command typed in a chat: /new, /reset, /stop, /resume."""

    chat: str = ""
    name: str = "/new"


@dataclass(frozen=True, slots=True)
class Delegate(Event):
    """A turn of a delegate child session spawned by the chat's current session."""

    chat: str = ""
    turn: str = ""


@dataclass(frozen=True, slots=True)
class Advance(Event):
    """Let virtual time run to `t`: watcher ticks, sweeps and replies due by then happen."""


@dataclass(frozen=True, slots=True)
class Sigterm(Event):
    """Graceful shutdown."""


@dataclass(frozen=True, slots=True)
class Crash(Event):
    """SIGKILL: every in-memory object is lost; the durable store survives."""


@dataclass(frozen=True)
class ConfigChange:
    """What a `restart` changes in the configuration: the reset policy keys it gives (None: kept).
    The contract (docs/contract.md, *A restart may change the configuration*) says what is owed."""

    reset: ResetPolicy | None = None
    reset_by_platform: tuple[tuple[str, ResetPolicy], ...] | None = None
    reset_by_chat_type: tuple[tuple[str, ResetPolicy], ...] | None = None

    def apply(self, config: GatewayConfig) -> GatewayConfig:
        """`config` with this change in force (an explicit `reset` replaces a `reset: default`)."""
        if self.reset is not None:
            config = replace(config, reset=self.reset, reset_default=False)
        if self.reset_by_platform is not None:
            config = replace(config, reset_by_platform=self.reset_by_platform)
        if self.reset_by_chat_type is not None:
            config = replace(config, reset_by_chat_type=self.reset_by_chat_type)
        return config


CHANGEABLE_AT_RESTART: tuple[str, ...] = ("reset", "reset_by_platform", "reset_by_chat_type")


@dataclass(frozen=True, slots=True)
class Restart(Event):
    """Start the gateway again after a sigterm or crash; it rebuilds from its store, under
    `config` changed by `change` when given."""

    change: ConfigChange | None = None


@dataclass(frozen=True, slots=True)
class DeleteSession(Event):
    """Another surface deletes the chat's current session row (and, by cascade, its messages)."""

    chat: str = ""


@dataclass(frozen=True, slots=True)
class DeleteParent(Event):
    """Another surface deletes the parent row of the chat's delegate child (cascading to it)."""

    chat: str = ""


@dataclass(frozen=True, slots=True)
class DbLocked(Event):
    """The durable store refuses writes ('database is locked') for `duration`."""

    duration: int = 0


@dataclass(frozen=True, slots=True)
class BackendFail(Event):
    """The memory backend of `provider` fails every call for `duration`."""

    provider: str = ""
    duration: int = 0


@dataclass(frozen=True, slots=True)
class BackendSlow(Event):
    """The memory backend of `provider` is slow for `duration`: an ingest call first made in
    the window completes only `delay` later (`conformance.adapter.BackendBusy`)."""

    provider: str = ""
    duration: int = 0
    delay: int = 0


@dataclass(frozen=True, slots=True)
class CrashAt(Event):
    """Arms a crash inside a gateway step: the `hit`-th time the gateway reaches its crash
    point `point` after this event, the process dies there (a `crash` at that instant)."""

    point: str = ""
    hit: int = 1
    restart_after: int | None = None  # the process comes back this long after dying there; None: at the next `restart`


@dataclass(frozen=True, slots=True)
class Checkpoint(Event):
    """Snapshot the durable state into the observation log here."""

    name: str = ""


class MessageTimeline(Sequence[Event]):
    """A long timeline of plain messages (turn ids t1, t2, … in order, one text) kept as two
    arrays: each `Message` is built when read. As a tuple, a 10^6-message scenario was ≈ 270
    bytes an event (a `Message`, its turn id and time) held for the whole run; as arrays, 9.
    Reads as the tuple of its messages would (equal to it, and hashed as it)."""

    __slots__ = ("_chats", "_names", "_text", "_times")

    def __init__(self, times: Sequence[int], chats: Sequence[int], names: Sequence[str], text: str = "hello") -> None:
        if len(times) != len(chats):
            raise ValueError("a time and a chat for each message")
        self._times = array("q", times)
        self._chats = bytes(chats) if len(names) <= 256 else array("I", chats)
        self._names = tuple(names)
        self._text = text

    def __len__(self) -> int:
        return len(self._times)

    @overload
    def __getitem__(self, index: int) -> Event: ...
    @overload
    def __getitem__(self, index: slice) -> tuple[Event, ...]: ...
    def __getitem__(self, index: int | slice) -> Event | tuple[Event, ...]:
        if isinstance(index, slice):
            return tuple(self[i] for i in range(*index.indices(len(self))))
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError("timeline index out of range")
        return Message(self._times[index], chat=self._names[self._chats[index]], turn=f"t{index + 1}", text=self._text)

    def __iter__(self) -> Iterator[Event]:
        names, text = self._names, self._text
        for t, chat, number in zip(self._times, self._chats, count(1)):
            yield Message(t, chat=names[chat], turn=f"t{number}", text=text)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, MessageTimeline):
            return (self._times, self._chats, self._names, self._text) == (other._times, other._chats, other._names, other._text)
        return isinstance(other, tuple) and len(other) == len(self) and tuple(self) == other

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __repr__(self) -> str:
        return f"MessageTimeline({len(self)} messages)"


def max_horizon(config: GatewayConfig, events: tuple[Event, ...]) -> int:
    """The longest `horizon()` of the configurations a run goes through (a restart may change
    it), with the longest sweep any gateway may declare (`reap_slack`)."""
    reach = config.horizon(END_OF_SWEEPS)
    for event in events:
        if isinstance(event, Restart) and event.change is not None:
            config = event.change.apply(config)
            reach = max(reach, config.horizon(END_OF_SWEEPS))
    return reach


END_OF_SWEEPS = 1 << 62  # a sweep period longer than any horizon: `reap_slack` caps it


EVENT_TYPES: dict[str, type[Event]] = {
    "message": Message,
    "command": Command,
    "delegate": Delegate,
    "advance": Advance,
    "sigterm": Sigterm,
    "crash": Crash,
    "restart": Restart,
    "delete_session": DeleteSession,
    "delete_parent": DeleteParent,
    "db_locked": DbLocked,
    "backend_fail": BackendFail,
    "backend_slow": BackendSlow,
    "checkpoint": Checkpoint,
    "crash_at": CrashAt,
}
_KIND_BY_CLASS: dict[type[Event], str] = {cls: kind for kind, cls in EVENT_TYPES.items()}


@dataclass(frozen=True)
class Scenario:
    """One replayable run: same scenario, same observation log, byte for byte."""

    name: str
    seed: int = 0
    zone: str = "UTC"
    start: int = 0
    config: GatewayConfig = field(default_factory=GatewayConfig)
    chats: tuple[Chat, ...] = ()
    events: Sequence[Event] = ()  # a tuple, or a `MessageTimeline` (a long generated run), read as one
    source: str = ""  # the file it was loaded from, if any
    header: str = ""  # the file's leading comment: source report and symptom
    catches: tuple[str, ...] = ()  # zoo variants this scenario exists to catch

    def chat(self, name: str) -> Chat:
        for chat in self.chats:
            if chat.name == name:
                return chat
        raise KeyError(name)

    @property
    def end(self) -> int:
        """The time of the last event (or the start)."""
        return max((event.t for event in self.events), default=self.start)
