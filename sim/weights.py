"""The generator's weight tables: how likely each choice is, shared by `sim.generate`'s seeded
builder and `sim.strategies`' Hypothesis one (the first value of each table is the plainest,
which Hypothesis shrinks towards)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import date
from typing import TypeVar

from sim.clock import MINUTE, SECOND
from sim.scenario import AFTER_TIMERS, BEFORE_TIMERS, CHAT_TYPES, PLATFORMS

T = TypeVar("T")
Table = Sequence[tuple[T, int]]  # (value, weight); the first value is the plainest

EVENT_WEIGHTS: Table[str] = (
    ("message", 600),
    ("advance", 40),
    ("/new", 20),
    ("/reset", 8),
    ("/stop", 12),
    ("/resume", 12),
    ("delegate", 25),
    ("sigterm", 12),  # sigterm, then restart
    ("crash", 12),  # crash, then restart
    ("delete_session", 12),
    ("delete_parent", 6),
    ("db_locked", 10),
    ("backend_fail", 10),  # only with a configured provider; else a message
    ("checkpoint", 10),
)
GAP_WEIGHTS: Table[tuple[str, int, int]] = (
    (("seconds", 10, 120), 30),
    (("burst", 0, 10), 15),  # arrives while the previous turn is still running
    (("minutes", 120, 1800), 30),
    (("hour", 1800, 7200), 12),
    (("hours", 7200, 43200), 3),
    (("boundary", 0, 0), 3),  # just before, at or just past the chat's next reset boundary
)
BOUNDARY_OFFSETS: Table[int] = ((1, 1), (0, 1), (-1, 1), (SECOND, 1), (-SECOND, 1), (MINUTE, 1))
DOWNTIME: Table[tuple[int, int]] = (((5, 60), 3), ((60, 600), 3), ((600, 7200), 1))
HELD_MESSAGE_PERCENT = 35  # a message arrives while the gateway is down
LOCK_SECONDS: Table[tuple[int, int]] = (((1, 10), 3), ((10, 60), 2), ((60, 300), 1))
BACKEND_FAIL_SECONDS: Table[tuple[int, int]] = (((10, 120), 2), ((120, 600), 2))  # <= 10m < any horizon
MUTED_PERCENT = 3
# What generated messages say, turn tN the (N mod 5)-th: a stored row, an ingest and an end are
# a turn's by its words, not its tag alone, so a gateway that keeps `[tN]` and makes the rest up
# fails; the long one (over a kilobyte) loses its end in a field cut short. By turn number, not
# drawn: every seed's events are what they were before messages had words.
MESSAGE_TEXTS = ("hello", "good morning", "can you check yesterday's logs?", "thanks!",
                 "please summarise: " + "the quick brown fox jumps over the lazy dog, " * 24 + "and stops.")
# Drawn after the whole timeline, so a seed's scenario is unchanged up to this draw: in most
# seeds every answer reports a few tokens, as before usage could be chosen; in the others some
# answers report none or a full context window (gateway compression and hygiene, #20).
USAGE_PERCENT = 4
MESSAGE_USAGES: Table[str | None] = ((None, 6), ("none", 1), ("large", 1))
# A slow backend is drawn after the whole timeline (so every older seed keeps its events, at
# most one gaining this fault): this share of scenarios with a provider, in this many.
SLOW_BACKEND_PERCENT = 8
SLOW_SECONDS: Table[tuple[int, int]] = (((30, 120), 2), ((120, 600), 1))
SLOW_DELAY_SECONDS: Table[tuple[int, int]] = (((1, 10), 1), ((10, 90), 2))  # past Hermes's 5 s drain, mostly
# Same-instant orderings (sim.engine, rule 3), drawn last of all (so every older seed keeps its
# events and their times, and most keep their whole file): in this share of scenarios, each
# event runs before the timers due at its instant with even odds, else after them as always.
# It matters where an event meets a timer: a message 2 s after another with a 2 s turn latency
# meets that turn's answer, an event on the watcher's grid meets its tick.
ORDER_PERCENT = 10
EVENT_ORDERS: Table[str] = ((AFTER_TIMERS, 1), (BEFORE_TIMERS, 1))
# Chats finalized otherwise than the gateway-wide mode (`finalization_by_chat`), drawn after
# the orderings (every older seed keeps its events; a few gain this setting): in this share
# of scenarios, each chat takes the other mode with even odds.
CHAT_MODE_PERCENT = 5
# Two users of one group chat (`Chat.chat_id`), drawn after the chat modes (every older seed keeps
# its events; a few gain this): in this share of scenarios with two chats or more, one chat becomes
# a second user of another's group. A gateway that keys a group by the group alone is caught so.
SHARED_GROUP_PERCENT = 5
# One chat id on two platforms (Telegram chat 42 and Discord chat 42 are two chats), drawn last of
# all (every older seed keeps its scenario; a few gain this): in this share of scenarios with two
# chats or more, one chat takes another's chat id on a platform of its own. A gateway that keys a
# chat by its id alone is caught so (the seventh audit of lazy gateways: no seed reached it).
SHARED_ID_PERCENT = 5
# Drawn after the shared id (every older seed keeps its scenario; a few gain each), from the
# eighth audit of lazy gateways, where each passed every seed: two chats made two threads of one
# group chat (a route keyed without its thread); a chat's session row deleted while the gateway
# is down, in scenarios with a stop (a warm restart bringing it back); a backend failure followed
# at once by another, up to the idle TTL long (a sweep sparing an agent whose memory is owed).
THREAD_TWIN_PERCENT = 5
DOWN_DELETE_PERCENT = 10
LONG_OUTAGE_PERCENT = 20
# A restart that brings a new reset configuration (`Restart.change`; docs/contract.md, *A restart
# may change the configuration*), drawn last of all: in this share of scenarios with a restart,
# each restart changes one of the reset keys with even odds.
CONFIG_CHANGE_PERCENT = 8
CHANGED_KEYS: Table[str] = (("reset", 2), ("reset_by_platform", 1), ("reset_by_chat_type", 1))
# `reset: default`, the gateway's own default policy in force (Profile.reset_default), drawn after
# everything else: in this share of scenarios the configured `reset` gives way to it (the tables
# per platform and chat type stay). A gateway is judged by the default it reports.
RESET_DEFAULT_PERCENT = 3
# `turn_latency: 0s`, the LLM answering at the instant it is asked (every turn's request, answer
# and reply at one instant, meeting whatever else happens then), drawn after everything else:
# in this share of scenarios.
INSTANT_ANSWER_PERCENT = 3

ZONES: Table[str] = (("UTC", 3), ("Europe/Berlin", 3), ("America/New_York", 2), ("Asia/Kolkata", 1), ("Australia/Sydney", 1))
START_DAYS: Table[date] = (
    (date(2026, 1, 5), 4),
    (date(2026, 6, 15), 2),
    (date(2026, 3, 28), 1),  # the eve of Europe's spring-forward day
    (date(2026, 3, 7), 1),  # the eve of the US spring-forward day
    (date(2026, 10, 24), 1),  # the eve of Europe's fall-back day
    (date(2026, 10, 31), 1),  # the eve of the US fall-back day
    (date(2026, 4, 4), 1),  # the eve of Sydney's fall-back day
)
CHAT_NAMES = ("alice", "bob", "carol", "dave", "erin")
PLATFORM_WEIGHTS: Table[str] = tuple((p, 4 if p == "telegram" else 2 if p in ("discord", "slack") else 1) for p in PLATFORMS)
CHAT_TYPE_WEIGHTS: Table[str] = tuple((c, {"dm": 5, "group": 3}.get(c, 1)) for c in CHAT_TYPES)

MODES: Table[str] = (("idle", 4), ("none", 1), ("daily", 2), ("both", 3))
IDLE_MINUTES: Table[int] = ((30, 3), (1, 1), (5, 2), (15, 2), (60, 2), (240, 1), (1440, 1))
DAILY_MIN_IDLE: Table[int] = ((0, 4), (10, 1), (60, 1))
OVERRIDE_PERCENT = 20  # a per-platform (or per-chat-type) policy table
PROVIDER_COUNT: Table[int] = ((0, 3), (1, 4), (2, 2))
PROVIDER_NAMES = ("hindsight", "mem0")
BATCH_SIZES: Table[int] = ((1, 3), (2, 2), (3, 2), (5, 1))
CACHE_CAPS: Table[int] = ((64, 3), (1, 2), (2, 2), (3, 1))
IDLE_TTLS: Table[int] = ((60 * MINUTE, 3), (10 * MINUTE, 1), (30 * MINUTE, 2), (360 * MINUTE, 1))
WATCHERS: Table[int | None] = ((5 * MINUTE, 4), (None, 2), (30 * SECOND, 1), (MINUTE, 1), (10 * MINUTE, 2))
LATENCIES: Table[int] = ((2 * SECOND, 4), (500, 1), (10 * SECOND, 2), (45 * SECOND, 1), (3 * MINUTE, 1))


@dataclass(frozen=True)
class Mix:
    """The choices a profile may make common (each field's default is the table or percentage
    of its name above): the events and gaps drawn, the settings that make boundaries dense, and
    the rare draws made after the timeline."""

    events: Table[str] = EVENT_WEIGHTS
    gaps: Table[tuple[str, int, int]] = GAP_WEIGHTS
    idle_minutes: Table[int] = IDLE_MINUTES
    cache_caps: Table[int] = CACHE_CAPS
    watchers: Table[int | None] = WATCHERS
    latencies: Table[int] = LATENCIES
    muted_percent: int = MUTED_PERCENT
    held_message_percent: int = HELD_MESSAGE_PERCENT
    usage_percent: int = USAGE_PERCENT
    slow_backend_percent: int = SLOW_BACKEND_PERCENT
    order_percent: int = ORDER_PERCENT
    chat_mode_percent: int = CHAT_MODE_PERCENT
    shared_group_percent: int = SHARED_GROUP_PERCENT
    shared_id_percent: int = SHARED_ID_PERCENT
    thread_twin_percent: int = THREAD_TWIN_PERCENT
    down_delete_percent: int = DOWN_DELETE_PERCENT
    long_outage_percent: int = LONG_OUTAGE_PERCENT
    config_change_percent: int = CONFIG_CHANGE_PERCENT
    reset_default_percent: int = RESET_DEFAULT_PERCENT
    instant_answer_percent: int = INSTANT_ANSWER_PERCENT
    changed_keys: Table[str] = CHANGED_KEYS
    platform_override_percent: int = OVERRIDE_PERCENT
    chat_type_override_percent: int = OVERRIDE_PERCENT
    daily_min_idle: Table[int] = DAILY_MIN_IDLE
    provider_counts: Table[int] = PROVIDER_COUNT
    stops_wait_for_replies: bool = False  # a sigterm or crash drawn while a turn is owed its reply waits for that reply

    def without(self, features: frozenset[str]) -> Mix:
        """This mix drawing none of `features` (names of `conformance.features.FEATURES`: what a
        gateway declares unsupported), so that `fuzz --fit` spends a seed on what the gateway can
        be judged on instead of skipping it: an event kind or command is never drawn (a stop
        neither, without its restart), a setting's draw is off. Empty: this mix, unchanged.
        Without `restart_after_cut_off_turn`, a stop drawn while a turn is owed its reply comes
        when the last such reply is due instead (`conformance.features.cuts_off_a_turn_then_restarts`)."""
        if not features:
            return self
        def kept(draw: str) -> bool:
            kind = "command" if draw.startswith("/") else draw
            return not ({draw, kind} & features or (kind in ("sigterm", "crash") and "restart" in features))
        off = {"muted": "muted_percent", "backend_slow": "slow_backend_percent", "finalization_by_chat": "chat_mode_percent",
               "restart_config": "config_change_percent", "reset_default": "reset_default_percent",
               "reset_by_platform": "platform_override_percent", "reset_by_chat_type": "chat_type_override_percent",
               "delete_session": "down_delete_percent", "backend_fail": "long_outage_percent"}
        fitted = replace(self, events=tuple(row for row in self.events if kept(row[0])),
                         changed_keys=tuple(row for row in self.changed_keys if row[0] not in features),
                         **{field: 0 for feature, field in off.items() if feature in features})
        if "daily_min_idle_minutes" in features:
            fitted = replace(fitted, daily_min_idle=((0, 1),))
        if "providers" in features:
            fitted = replace(fitted, provider_counts=((0, 1),))
        elif "several_providers" in features:
            fitted = replace(fitted, provider_counts=tuple(row for row in fitted.provider_counts if row[0] <= 1))
        if "shared_chat_ids" in features:
            fitted = replace(fitted, shared_group_percent=0, shared_id_percent=0, thread_twin_percent=0)
        if "restart_after_cut_off_turn" in features:
            fitted = replace(fitted, stops_wait_for_replies=True)
        return fitted  # `changed_keys` keeps "reset", no feature's name


# Faults, commands and boundaries packed close, and every rare draw common: where the oracle's
# edges are. Two hours of generated seeds in this mix (with crash points) found seven false
# alarms on the reference and the example gateway that 20,000 default seeds had not.
DENSE = Mix(
    events=(("message", 300), ("advance", 40), ("/new", 30), ("/reset", 20), ("/stop", 30), ("/resume", 30),
            ("delegate", 40), ("sigterm", 30), ("crash", 30), ("delete_session", 30), ("delete_parent", 20),
            ("db_locked", 25), ("backend_fail", 25), ("checkpoint", 20)),
    gaps=((("seconds", 10, 120), 20), (("burst", 0, 10), 30), (("minutes", 120, 1800), 20), (("hour", 1800, 7200), 8),
          (("hours", 7200, 43200), 3), (("boundary", 0, 0), 20)),
    idle_minutes=((30, 1), (1, 3), (5, 2), (15, 1), (60, 1)),
    cache_caps=((64, 1), (1, 3), (2, 3), (3, 2)),
    watchers=((5 * MINUTE, 2), (None, 2), (30 * SECOND, 2), (MINUTE, 2), (10 * MINUTE, 1)),
    latencies=((2 * SECOND, 2), (500, 1), (10 * SECOND, 2), (45 * SECOND, 2), (3 * MINUTE, 2)),
    muted_percent=15, held_message_percent=60, usage_percent=40, slow_backend_percent=100, order_percent=100,
    chat_mode_percent=50, shared_group_percent=40, shared_id_percent=40, config_change_percent=50, reset_default_percent=25,
    instant_answer_percent=20, thread_twin_percent=40, down_delete_percent=50, long_outage_percent=60,
)


@dataclass(frozen=True)
class GenProfile:
    """How big a generated scenario is, and its mix of choices."""

    events: tuple[int, int]
    chats: Table[int]
    mix: Mix = field(default_factory=Mix)


CHAT_COUNTS: Table[int] = ((1, 2), (2, 3), (3, 3), (4, 1), (5, 1))  # how many chats a scenario has, by weight
PROFILES: dict[str, GenProfile] = {
    "default": GenProfile(events=(20, 200), chats=CHAT_COUNTS),
    "small": GenProfile(events=(1, 24), chats=((1, 3), (2, 3), (3, 1))),
    # About 200 events a seed: the size the sweep target is stated in (bench/sweep.py --profile long).
    "long": GenProfile(events=(180, 220), chats=CHAT_COUNTS),
    # The default's size in the dense mix (`sessiongate fuzz --profile dense`).
    "dense": GenProfile(events=(20, 200), chats=CHAT_COUNTS, mix=DENSE),
}
# Another size in another mix: SIZE+MIX (`long+dense`, `small+dense`), a size of the default mix
# with the mix of a profile of the default's size (`default+dense` is `dense`).
_SIZES = tuple(name for name, p in PROFILES.items() if p.mix == Mix() and name != "default")
_MIXES = tuple(name for name, p in PROFILES.items() if p.mix != Mix())
PROFILE_NAMES: tuple[str, ...] = tuple(sorted([*PROFILES, *(f"{size}+{mix}" for size in _SIZES for mix in _MIXES)]))


def gen_profile(name: str) -> GenProfile:
    """The profile `name` names: one of PROFILES, or SIZE+MIX (PROFILE_NAMES lists them all)."""
    if name in PROFILES:
        return PROFILES[name]
    size, plus, mix = name.partition("+")
    if plus and size in _SIZES and mix in _MIXES:
        return replace(PROFILES[size], mix=PROFILES[mix].mix)
    raise ValueError(f"unknown profile {name!r}; known: {', '.join(PROFILE_NAMES)}")
