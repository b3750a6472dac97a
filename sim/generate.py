"""Scenarios from a seed: the fuzzer's input, a pure function of (seed, profile).

One builder, `build_scenario`, makes every generated scenario. It asks a `Choices` for whole
numbers and nothing else; `scenario_for_seed` answers from `random.Random` seeded by
`derive_seed(seed, 'generate')` (the same on every machine, Python version and
PYTHONHASHSEED), and `sim.strategies` answers from Hypothesis, so both share the weight
tables of `sim.weights` and Hypothesis can shrink every choice towards the first, plainest option.

The tables keep scenarios realistic: most events are messages spaced by gaps of seconds to
hours, faults are rarer, and every fault ends in time to be healed before quiescence.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Sequence
from dataclasses import replace
from functools import cache
from itertools import accumulate
from operator import itemgetter
from random import Random
from typing import Protocol
from zoneinfo import ZoneInfo

from sim.clock import MINUTE, SECOND, load_zone, local_instant, next_daily_boundary_after
from sim.engine import derive_seed
from sim.kinds import covered
from sim.scenario import (
    AFTER_TIMERS,
    Advance,
    BackendFail,
    BackendSlow,
    Chat,
    Checkpoint,
    Command,
    ConfigChange,
    Crash,
    DbLocked,
    Delegate,
    DeleteParent,
    DeleteSession,
    Event,
    Finalization,
    GatewayConfig,
    Message,
    ProviderSpec,
    ResetPolicy,
    Restart,
    Scenario,
    Sigterm,
)
from sim.weights import (
    BACKEND_FAIL_SECONDS,
    BATCH_SIZES,
    BOUNDARY_OFFSETS,
    CHAT_NAMES,
    CHAT_TYPE_WEIGHTS,
    DOWNTIME,
    EVENT_ORDERS,
    IDLE_TTLS,
    LOCK_SECONDS,
    MESSAGE_TEXTS,
    MESSAGE_USAGES,
    MODES,
    PLATFORM_WEIGHTS,
    PROVIDER_NAMES,
    SLOW_DELAY_SECONDS,
    SLOW_SECONDS,
    START_DAYS,
    ZONES,
    GenProfile,
    Mix,
    T,
    Table,
    gen_profile,
)


class Choices(Protocol):
    """A source of decisions: a whole number in [low, high]."""

    def integer(self, low: int, high: int) -> int: ...


class SeededChoices:
    """Decisions from a seeded `random.Random`: exactly `randint`'s numbers (stable across
    versions), drawn the way CPython's `randint` draws them (`getrandbits` with rejection),
    without its three layers of calls: a generated seed asks for hundreds."""

    def __init__(self, rng: Random) -> None:
        self._bits = rng.getrandbits

    def integer(self, low: int, high: int) -> int:
        n = high - low + 1
        k = n.bit_length()
        r = self._bits(k)
        while r >= n:
            r = self._bits(k)
        return low + r


def weighted(choices: Choices, table: Table[T]) -> T:
    """A value of `table` drawn by weight: the first whose running total of weights passes the point drawn."""
    totals = _running_totals(table)
    return table[bisect_right(totals, choices.integer(0, totals[-1] - 1))][0]


@cache
def _running_totals(table: Table[T]) -> list[int]:
    """Each entry's weight and those before it (a table is asked hundreds of times a seed)."""
    return list(accumulate(map(itemgetter(1), table)))


def chance(choices: Choices, percent: int) -> bool:
    return choices.integer(0, 99) < percent


# -- the builder ----------------------------------------------------------------------

def _policy(choices: Choices, mix: Mix) -> ResetPolicy:
    mode = weighted(choices, MODES)
    return ResetPolicy(
        mode=mode,  # type: ignore[arg-type]
        idle_minutes=weighted(choices, mix.idle_minutes) if mode in ("idle", "both") else ResetPolicy().idle_minutes,
        at_hour=choices.integer(0, 23) if mode in ("daily", "both") else ResetPolicy().at_hour,
        daily_min_idle_minutes=weighted(choices, mix.daily_min_idle) if mode in ("daily", "both") else 0,
    )


def _overrides(choices: Choices, names: Sequence[str], mix: Mix, percent: int) -> tuple[tuple[str, ResetPolicy], ...]:
    if not names or not chance(choices, percent):
        return ()
    name = names[choices.integer(0, len(names) - 1)]
    return ((name, _policy(choices, mix)),)


def _chats(choices: Choices, profile: GenProfile) -> tuple[Chat, ...]:
    chats = []
    for name in CHAT_NAMES[: weighted(choices, profile.chats)]:
        chat_type = weighted(choices, CHAT_TYPE_WEIGHTS)
        chats.append(Chat(name, weighted(choices, PLATFORM_WEIGHTS), chat_type,
                          user="u1" if chat_type == "group" else None, thread="th1" if chat_type == "thread" else None))
    return tuple(chats)


def _config(choices: Choices, chats: Sequence[Chat], mix: Mix) -> GatewayConfig:
    reset = _policy(choices, mix)
    by_platform = _overrides(choices, sorted({c.platform for c in chats}), mix, mix.platform_override_percent)
    by_chat_type = _overrides(choices, sorted({c.chat_type for c in chats}), mix, mix.chat_type_override_percent)
    count = weighted(choices, mix.provider_counts)
    providers = tuple(ProviderSpec(PROVIDER_NAMES[i], weighted(choices, BATCH_SIZES)) for i in range(count))
    return GatewayConfig(
        reset=reset,
        reset_by_platform=by_platform,
        reset_by_chat_type=by_chat_type,
        cache_cap=weighted(choices, mix.cache_caps),
        idle_ttl=weighted(choices, IDLE_TTLS),
        watcher_interval=weighted(choices, mix.watchers),
        providers=providers,
        turn_latency=weighted(choices, mix.latencies),
    )


class _Timeline:
    """Appends events in time order, numbering turns the way the loader does."""

    def __init__(self, choices: Choices, scenario_start: int, zone: ZoneInfo, config: GatewayConfig, chats: Sequence[Chat],
                 mix: Mix) -> None:
        self.choices, self.zone, self.config, self.chats, self.mix = choices, zone, config, chats, mix
        self.cursor = scenario_start
        self.events: list[Event] = []
        self.turns = 0
        self.last_user: dict[str, int] = {}
        self.delegated: list[str] = []
        self.owed: dict[str, int] = {}  # chat -> when its last turn's reply is due (`Mix.stops_wait_for_replies`)

    def seconds(self, span: tuple[int, int]) -> int:
        return self.choices.integer(*span) * SECOND

    def chat(self) -> Chat:
        return self.chats[self.choices.integer(0, len(self.chats) - 1)]

    def gap(self, chat: Chat | None) -> int:
        """When the next event happens: a plausible gap, or a probe of `chat`'s next boundary."""
        name, low, high = weighted(self.choices, self.mix.gaps)
        if name != "boundary":
            return self.cursor + self.seconds((low, high))
        offset = weighted(self.choices, BOUNDARY_OFFSETS)
        if chat is None or chat.name not in self.last_user:
            return self.cursor + 30 * MINUTE + offset
        policy = self.config.policy_for(chat.platform, chat.chat_type)
        last = self.last_user[chat.name]
        if policy.mode in ("idle", "both"):
            boundary = last + policy.idle_minutes * MINUTE
        elif policy.mode == "daily":
            boundary = next_daily_boundary_after(last, policy.at_hour, self.zone)
        else:
            boundary = last + self.config.idle_ttl
        return max(self.cursor, boundary + offset)

    def add(self, event: Event) -> None:
        self.events.append(event)
        self.cursor = event.t

    def message(self, t: int, chat: Chat, delivered: int | None = None) -> None:
        """A message at `t` (`delivered`: when the gateway takes it, one sent while it is down at its restart)."""
        self.turns += 1
        muted = chance(self.choices, self.mix.muted_percent)
        self.add(Message(t, chat=chat.name, turn=f"t{self.turns}", text=MESSAGE_TEXTS[self.turns % len(MESSAGE_TEXTS)],
                         muted=muted))
        self.last_user[chat.name] = t
        at = t if delivered is None else delivered  # each chat's turns are answered one after another
        self.owed[chat.name] = max(at, self.owed.get(chat.name, at)) + self.config.turn_latency

    def step(self, draw: str) -> None:
        """One draw from the mix's events (a kind, or a command by its name): one event, or a stop with its restart."""
        if draw == "backend_fail" and not self.config.providers:
            draw = "message"
        chat = self.chat() if draw in ("message", "/new", "/reset", "/stop", "/resume", "delegate", "delete_session") else None
        if draw == "delete_parent":
            chat = self.chat() if not self.delegated else self.chat_named(self.delegated[-1])
        step = _STEPS["command" if draw.startswith("/") else draw]
        assert step is not None, draw
        step(self, self.gap(chat), chat, draw)

    def _message(self, t: int, chat: Chat | None, draw: str) -> None:
        assert chat is not None
        self.message(t, chat)

    def _command(self, t: int, chat: Chat | None, draw: str) -> None:
        assert chat is not None
        self.add(Command(t, chat=chat.name, name=draw))
        if draw == "/stop" and chat.name in self.owed:  # it abandons the turn in flight
            self.owed[chat.name] = min(self.owed[chat.name], t)

    def _delegate(self, t: int, chat: Chat | None, draw: str) -> None:
        assert chat is not None
        self.turns += 1
        self.delegated.append(chat.name)
        self.add(Delegate(t, chat=chat.name, turn=f"t{self.turns}"))

    def _advance(self, t: int, chat: Chat | None, draw: str) -> None:
        self.add(Advance(max(t, self.cursor + SECOND)))

    def _stop(self, t: int, chat: Chat | None, draw: str) -> None:
        """A sigterm or crash, maybe a message held while down, then the restart."""
        if self.mix.stops_wait_for_replies and self.owed and t <= (due := max(self.owed.values())):
            t = due + SECOND  # strictly after: a stop at a reply's own instant may run before it (`order`)
        self.add(Sigterm(t) if draw == "sigterm" else Crash(t))
        self.owed = {}
        back = t + self.seconds(weighted(self.choices, DOWNTIME))
        if chance(self.choices, self.mix.held_message_percent):
            self.message(self.choices.integer(t, back), self.chat(), delivered=back)
        self.add(Restart(back))

    def _delete(self, t: int, chat: Chat | None, draw: str) -> None:
        assert chat is not None
        self.add(DeleteSession(t, chat=chat.name) if draw == "delete_session" else DeleteParent(t, chat=chat.name))

    def _db_locked(self, t: int, chat: Chat | None, draw: str) -> None:
        self.add(DbLocked(t, duration=self.seconds(weighted(self.choices, LOCK_SECONDS))))

    def _backend_fail(self, t: int, chat: Chat | None, draw: str) -> None:
        provider = self.config.providers[self.choices.integer(0, len(self.config.providers) - 1)]
        self.add(BackendFail(t, provider=provider.name, duration=self.seconds(weighted(self.choices, BACKEND_FAIL_SECONDS))))

    def _checkpoint(self, t: int, chat: Chat | None, draw: str) -> None:
        self.add(Checkpoint(t, name=f"c{sum(isinstance(e, Checkpoint) for e in self.events) + 1}"))

    def chat_named(self, name: str) -> Chat:
        return next(c for c in self.chats if c.name == name)


_Step = Callable[[_Timeline, int, Chat | None, str], None]  # (the timeline, the event's time, its chat, the draw)
_STEPS: dict[str, _Step | None] = {
    # What `_Timeline.step` does for a draw of each kind; None: never drawn on its own (how it is
    # made instead: `sim.kinds.KINDS`, column `generated`).
    "message": _Timeline._message, "command": _Timeline._command, "delegate": _Timeline._delegate,
    "advance": _Timeline._advance, "sigterm": _Timeline._stop, "crash": _Timeline._stop, "restart": None,
    "delete_session": _Timeline._delete, "delete_parent": _Timeline._delete, "db_locked": _Timeline._db_locked,
    "backend_fail": _Timeline._backend_fail, "backend_slow": None, "checkpoint": _Timeline._checkpoint, "crash_at": None,
}
covered("generate", _STEPS)


def build_scenario(choices: Choices, name: str, seed: int, profile: str = "default",
                   avoid: frozenset[str] = frozenset()) -> Scenario:
    """A whole scenario from `choices`: zone, start, chats, configuration, then the timeline
    (`avoid`: features its mix draws none of, `Mix.without`)."""
    shape = gen_profile(profile)
    zone_name = weighted(choices, ZONES)
    zone = load_zone(zone_name)
    start = local_instant(weighted(choices, START_DAYS), choices.integer(0, 23), 15 * choices.integer(0, 3), zone)
    mix = shape.mix.without(avoid)
    chats = _chats(choices, shape)
    config = _config(choices, chats, mix)
    timeline = _Timeline(choices, start, zone, config, chats, mix)
    target = choices.integer(*shape.events)
    timeline.message(start, chats[0])  # every scenario opens with a conversation
    while len(timeline.events) < target:
        timeline.step(weighted(choices, mix.events))
    events = _with_orders(choices, _with_slow_backend(choices, config, timeline, _with_usage(choices, timeline.events, mix), mix),
                          mix)
    config = _with_chat_modes(choices, config, chats, mix)
    chats = _with_shared_group(choices, chats, mix)
    events = _with_config_changes(choices, chats, events, mix)
    config = _with_reset_default(choices, config, mix)
    config = _with_instant_answers(choices, config, mix)
    chats = _with_shared_id(choices, chats, mix)
    chats = _with_thread_twins(choices, chats, mix)
    events = _with_deletion_while_down(choices, events, mix)
    events = _with_long_outage(choices, config, events, mix)
    return Scenario(name=name, seed=seed, zone=zone_name, start=start, config=config, chats=chats, events=events)


def _with_usage(choices: Choices, events: Sequence[Event], mix: Mix) -> tuple[Event, ...]:
    """In the mix's `usage_percent` of scenarios, what some answers report about usage. The draw that
    turns it on is the low one (seeds 0-66 keep their scenarios); each message's plainest
    choice is still no usage of its own, so Hypothesis shrinks usage away."""
    if choices.integer(0, 99) >= mix.usage_percent:
        return tuple(events)
    return tuple(replace(e, usage=weighted(choices, MESSAGE_USAGES)) if isinstance(e, Message) else e for e in events)


def _with_slow_backend(choices: Choices, config: GatewayConfig, timeline: _Timeline, events: tuple[Event, ...],
                       mix: Mix) -> tuple[Event, ...]:
    """In the mix's `slow_backend_percent` of scenarios with a provider, one slow-backend window, starting
    just after an event (drawn last, so every other event of a seed stays as it was)."""
    if not config.providers or not chance(choices, mix.slow_backend_percent):
        return events
    where = choices.integer(0, len(events) - 1)
    provider = config.providers[choices.integer(0, len(config.providers) - 1)]
    slow = BackendSlow(events[where].t, provider=provider.name, duration=timeline.seconds(weighted(choices, SLOW_SECONDS)),
                       delay=timeline.seconds(weighted(choices, SLOW_DELAY_SECONDS)))
    return (*events[:where + 1], slow, *events[where + 1:])


def _with_orders(choices: Choices, events: tuple[Event, ...], mix: Mix) -> tuple[Event, ...]:
    """In the mix's `order_percent` of scenarios, each event's order among the timers of its instant (the
    plainest, Hypothesis's shrink target, is the old one: after them)."""
    if not chance(choices, mix.order_percent):
        return events
    orders = [weighted(choices, EVENT_ORDERS) for _ in events]
    return tuple(e if order == AFTER_TIMERS else replace(e, order=order) for e, order in zip(events, orders, strict=True))


def _with_chat_modes(choices: Choices, config: GatewayConfig, chats: Sequence[Chat], mix: Mix) -> GatewayConfig:
    """In the mix's `chat_mode_percent` of scenarios, some chats finalized the other way than the watcher
    says (the plainest, Hypothesis's shrink target, is none: the gateway's mode for all)."""
    if not chance(choices, mix.chat_mode_percent):
        return config
    other: Finalization = "eager" if config.watcher_interval is None else "lazy"
    flipped = [chat.name for chat in chats if chance(choices, 50)]
    return replace(config, finalization_by_chat=tuple((name, other) for name in sorted(flipped)))


def _with_shared_group(choices: Choices, chats: tuple[Chat, ...], mix: Mix) -> tuple[Chat, ...]:
    """In the mix's `shared_group_percent` of scenarios with two chats or more, one chat (the guest)
    becomes a second user of another's (the host's) group: one `chat_id`, two users, two routes.
    The host becomes a group chat if it was not one (the plainest, Hypothesis's shrink target, is
    no sharing)."""
    if len(chats) < 2 or not chance(choices, mix.shared_group_percent):
        return chats
    host = choices.integer(0, len(chats) - 1)
    guest = (host + choices.integer(1, len(chats) - 1)) % len(chats)
    group = chats[host]
    if group.chat_type != "group":
        group = replace(group, chat_type="group", user="u1", thread=None)
    joined = Chat(chats[guest].name, group.platform, "group", user="u2", chat_id=group.platform_id)
    return tuple(group if i == host else joined if i == guest else c for i, c in enumerate(chats))


def _with_config_changes(choices: Choices, chats: Sequence[Chat], events: tuple[Event, ...],
                         mix: Mix) -> tuple[Event, ...]:
    """In the mix's `config_change_percent` of scenarios with a restart, each restart with even
    odds brings a new reset configuration: one key of it drawn anew (a per-platform or per-chat-type
    table may be emptied). Drawn last, so every older seed keeps its events and most their files."""
    restarts = [i for i, e in enumerate(events) if isinstance(e, Restart)]
    if not restarts or not chance(choices, mix.config_change_percent):
        return events
    out = list(events)
    for i in restarts:
        if not chance(choices, 50):
            continue
        key = weighted(choices, mix.changed_keys)
        if key == "reset":
            change = ConfigChange(reset=_policy(choices, mix))
        else:
            names = sorted({c.platform if key == "reset_by_platform" else c.chat_type for c in chats})
            table = () if chance(choices, 25) else ((names[choices.integer(0, len(names) - 1)], _policy(choices, mix)),)
            change = ConfigChange(**{key: table})
        out[i] = replace(events[i], change=change)
    return tuple(out)


def _with_reset_default(choices: Choices, config: GatewayConfig, mix: Mix) -> GatewayConfig:
    """In the mix's `reset_default_percent` of scenarios, `reset: default`: the policy in force
    is the one the gateway reports (`Profile.reset_default`; the reference's is `none`, Hermes's
    its release's). Drawn last of all, so every other seed keeps its whole scenario."""
    if not chance(choices, mix.reset_default_percent):
        return config
    return replace(config, reset=GatewayConfig().reset, reset_default=True)  # as the loader reads `reset: default`


def _with_instant_answers(choices: Choices, config: GatewayConfig, mix: Mix) -> GatewayConfig:
    """In the mix's `instant_answer_percent` of scenarios, `turn_latency: 0s`: the LLM answers at
    the instant it is asked, so a turn's request, answer and reply meet every other event and
    timer of that instant (the format allows it; no scenario had used it). Drawn last of all."""
    if not chance(choices, mix.instant_answer_percent):
        return config
    return replace(config, turn_latency=0)


def _free_chats(chats: tuple[Chat, ...]) -> list[int]:
    """The chats outside a shared group or id: no `chat_id`, and no other chat's id their name."""
    taken = {c.chat_id for c in chats if c.chat_id}
    return [i for i, c in enumerate(chats) if c.chat_id is None and c.platform_id not in taken]


def _two_of(choices: Choices, free: list[int]) -> tuple[int, int]:
    """Two different chats of `free` (two chats or more): the first and its twin."""
    pick = choices.integer(0, len(free) - 1)
    return free[pick], free[(pick + choices.integer(1, len(free) - 1)) % len(free)]


def _with_shared_id(choices: Choices, chats: tuple[Chat, ...], mix: Mix) -> tuple[Chat, ...]:
    """In the mix's `shared_id_percent` of scenarios with two chats or more outside a shared group,
    one chat (the twin) takes another's (the first's) chat id, on a platform other than the first's: two chats to
    the contract (a chat is platform, chat type, chat id, thread and user). Drawn last of all
    (the plainest, Hypothesis's shrink target, is no sharing)."""
    free = _free_chats(chats)
    if len(free) < 2 or not chance(choices, mix.shared_id_percent):
        return chats
    first, twin = _two_of(choices, free)
    platform = chats[twin].platform
    if platform == chats[first].platform:
        others = [name for name, _weight in PLATFORM_WEIGHTS if name != platform]
        platform = others[choices.integer(0, len(others) - 1)]
    joined = replace(chats[twin], platform=platform, chat_id=chats[first].platform_id)
    return tuple(joined if i == twin else c for i, c in enumerate(chats))


def _with_thread_twins(choices: Choices, chats: tuple[Chat, ...], mix: Mix) -> tuple[Chat, ...]:
    """In the mix's `thread_twin_percent` of scenarios with two chats or more outside a shared group
    or id, two chats become two threads (forum topics) of one group chat, on the first's platform
    and id: two chats to the contract (a chat is platform, chat type, chat id, thread and user).
    Drawn after the shared id (the eighth audit of lazy gateways: routes keyed without the thread
    passed every seed)."""
    free = _free_chats(chats)
    if len(free) < 2 or not chance(choices, mix.thread_twin_percent):
        return chats
    first, twin = _two_of(choices, free)
    group, platform = chats[first].platform_id, chats[first].platform
    topics = {first: replace(chats[first], chat_type="thread", chat_id=group, thread="th1"),
              twin: replace(chats[twin], platform=platform, chat_type="thread", chat_id=group, thread="th2")}
    return tuple(topics.get(i, c) for i, c in enumerate(chats))


def _with_deletion_while_down(choices: Choices, events: tuple[Event, ...], mix: Mix) -> tuple[Event, ...]:
    """In the mix's `down_delete_percent` of scenarios with a stop and a restart after it, one
    chat's session row deleted by another surface while the gateway is down: no agent holds it
    then, so it is gone for good (docs/contract.md, Deletions). Drawn after the chats (the
    eighth audit: a warm restart that brought a deleted session back passed every seed)."""
    downs: list[tuple[int, int]] = []
    for i, event in enumerate(events):
        if isinstance(event, (Sigterm, Crash)):
            back = next((j for j in range(i + 1, len(events)) if isinstance(events[j], Restart)), None)
            if back is not None and (not downs or downs[-1][1] < i):
                downs.append((i, back))
    if not downs or not chance(choices, mix.down_delete_percent):
        return events
    stop, back = downs[choices.integer(0, len(downs) - 1)]
    spoken = sorted({e.chat for e in events[:stop] if isinstance(e, Message)})
    if not spoken:
        return events
    chat = spoken[choices.integer(0, len(spoken) - 1)]
    t = choices.integer(events[stop].t, events[back].t)
    at = next(k for k in range(stop + 1, back + 1) if k == back or events[k].t > t)  # after the stop, before its restart
    return (*events[:at], DeleteSession(t, chat=chat), *events[at:])


def _with_long_outage(choices: Choices, config: GatewayConfig, events: tuple[Event, ...], mix: Mix) -> tuple[Event, ...]:
    """In the mix's `long_outage_percent` of scenarios with a backend failure, that backend down
    again from the instant it came back, for half the idle TTL to all of it: an outage that can
    outlast an idle agent's TTL (what the backend refused stays owed; the agent is still reaped).
    No longer than the TTL, so the run's horizon still sees it end. Drawn after the chats (the
    eighth audit: a sweep sparing the agents of owed sessions passed every seed)."""
    fails = [i for i, e in enumerate(events) if isinstance(e, BackendFail)]
    if not fails or not chance(choices, mix.long_outage_percent):
        return events
    fail = events[fails[choices.integer(0, len(fails) - 1)]]
    assert isinstance(fail, BackendFail)
    ttl = config.idle_ttl // SECOND
    again = BackendFail(fail.t + fail.duration, provider=fail.provider, duration=choices.integer(ttl // 2, ttl) * SECOND)
    at = next((k for k, e in enumerate(events) if e.t > again.t), len(events))
    return (*events[:at], again, *events[at:])


def scenario_for_seed(seed: int, profile: str = "default", avoid: frozenset[str] = frozenset()) -> Scenario:
    """The generated scenario `gen-<seed>`: the same on every machine and Python. Fitted to a
    gateway (`fuzz --fit`: `avoid`, the features it declares unsupported), a pure function of
    `avoid` too: its mix draws none of them (`Mix.without`), from a stream of its own."""
    label = "generate" if profile == "default" else f"generate/{profile}"
    if avoid:
        label += f"/fit:{','.join(sorted(avoid))}"
    choices = SeededChoices(Random(derive_seed(seed, label)))
    return build_scenario(choices, f"gen-{seed}", seed, profile, avoid)
