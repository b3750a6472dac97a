"""The `events` section of a scenario file: when each event happens, and what each kind reads."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, date, datetime
from typing import Any
from zoneinfo import ZoneInfo

from sim.clock import format_duration, from_ms, local_instant, repeated_instant, to_ms
from sim.document import LocatedList, ScenarioError, show
from sim.fields import _at_least, _Fields, _one_of, _usage, did_you_mean
from sim.kinds import KINDS, covered
from sim.load_config import CHAT_NAME, CHAT_NAME_RULE, _config_change
from sim.scenario import (
    AFTER_TIMERS,
    COMMANDS,
    CRASH_POINT_NAME,
    ORDERS,
    TURN_TAG,
    Advance,
    BackendFail,
    BackendSlow,
    Chat,
    Checkpoint,
    Command,
    Crash,
    CrashAt,
    DbLocked,
    Delegate,
    DeleteParent,
    DeleteSession,
    Event,
    Message,
    Restart,
    Sigterm,
)

MAX_EVENTS = 100_000
FIRST_YEAR, LAST_YEAR = 1970, 8999  # virtual time stays well inside what `datetime` can show
END_OF_TIME = to_ms(datetime(LAST_YEAR + 1, 1, 1, tzinfo=UTC))


_CLOCK = r"(\d{1,2}):(\d{2})(?::(\d{2})(?:\.(\d{3}))?)?(\s+\(2nd\))?"
_TIME_OF_DAY = re.compile(_CLOCK, re.ASCII)
_DATETIME = re.compile(r"(\d{4})-(\d{2})-(\d{2})[T ]" + _CLOCK, re.ASCII)


def _instant(text: Any, zone: ZoneInfo, start_day: date | None) -> int:
    """'09:30' (on the start day) or '2026-03-29T04:27' (local) -> epoch ms; no start day: a date is required.
    Seconds and milliseconds are optional ('09:00:05.250'); a trailing ' (2nd)' names the second
    pass of an hour a fall-back DST change repeats (without it: the first pass).

    Raises ValueError with the message for the field.
    """
    expected = "a local time like '09:30' or '2026-03-29T04:27'" if start_day else "a local date and time like '2026-03-29T09:00'"
    m = _TIME_OF_DAY.fullmatch(text) if isinstance(text, str) and start_day else None
    if m:
        day, clock = start_day, m.groups()
    elif isinstance(text, str) and (m := _DATETIME.fullmatch(text)):
        try:
            day = date(int(m.group(1)), int(m.group(2)), int(m.group(3)))
        except ValueError:
            raise ValueError(f"expected {expected}, got {show(text)}") from None
        clock = m.groups()[3:]
        if not FIRST_YEAR <= day.year <= LAST_YEAR:
            raise ValueError(f"expected a date in the years {FIRST_YEAR} to {LAST_YEAR}, got {show(text)}")
    else:
        raise ValueError(f"expected {expected}, got {show(text)}")
    assert day is not None
    hour, minute, second, milli = int(clock[0]), int(clock[1]), int(clock[2] or 0), int(clock[3] or 0)
    if hour > 23 or minute > 59 or second > 59:
        raise ValueError(f"expected {expected}, got {show(text)}")
    offset = second * 1000 + milli
    if not clock[4]:
        instant = local_instant(day, hour, minute, zone) + offset
    else:
        second_pass = repeated_instant(day, hour, minute, zone)
        if second_pass is None:
            raise ValueError(f"{text}: no DST change repeats {hour:02d}:{minute:02d} on {day.isoformat()} in {zone.key}; "
                             f"'(2nd)' names the second pass of a repeated wall time")
        instant = second_pass + offset
    if not 0 <= instant < END_OF_TIME:  # a local date in range whose zone puts it outside: 1969 or 9000 in UTC
        raise ValueError(f"expected a date in the years {FIRST_YEAR} to {LAST_YEAR} (in UTC as well), got {show(text)}, "
                         f"which is {datetime.fromtimestamp(instant / 1000, UTC):%Y-%m-%d %H:%M} UTC")
    return instant


# The keys an event may carry beside its kind (when, and each kind's own fields).
_MODIFIERS = frozenset({"at", "after", "order", "text", "muted", "usage", "chat", "for", "delay", "config"})


def _no_turn_tag(text: str) -> str | None:
    """The harness tags each message with its turn id (`[t3] …`); a second tag in the text would
    make the checks see another turn's copy, and a first line 'reply' would read as the answer."""
    tag = TURN_TAG.search(text)
    if tag:
        return f"a message's text cannot contain a turn tag like {tag.group(0)!r}: the harness adds its own"
    if text.split("\n", 1)[0] == "reply":
        return ("a message's first line cannot be 'reply': the fake LLM answers '[tN] reply', and the checks tell "
                "a turn's halves apart by it")
    return None


CRASH_AT_KEYS = ("point", "hit", "restart_after")  # `point` required


def _crash_at(f: _Fields, t: int, line: int) -> CrashAt:
    """`crash_at: {point: NAME, hit: N, restart_after: D}`: the N-th hit (default 1) of the
    gateway's point NAME after this event; D after dying there it restarts (default: at the
    scenario's next `restart`)."""
    point = f.get("point", "str", check=lambda v: None if CRASH_POINT_NAME.fullmatch(v) else
                  f"expected a crash point's name (lowercase letters, digits, '_', '-'), got {show(v)}")
    if point is None:
        raise f.missing("point")
    event = CrashAt(t, line, point=point, hit=f.get("hit", "int", 1, check=_at_least(1)),
                    restart_after=f.get("restart_after", "pos_duration"))
    f.done()
    return event


class _Reading:
    """What reading one event needs beyond its own fields: the chats (declared, or made as named
    when `implicit`), the configured providers, and the turns numbered so far (in file order)."""

    def __init__(self, chats: dict[str, Chat], implicit: bool, providers: set[str]) -> None:
        self.chats, self.implicit, self.providers = chats, implicit, providers
        self.turns = 0

    def turn(self) -> str:
        self.turns += 1
        return f"t{self.turns}"

    def chat_ref(self, f: _Fields, key: str) -> str:
        name = f.get(key, "str")
        if name not in self.chats:
            if not self.implicit:
                raise f.error(key, f"unknown chat {show(name)}; declared chats: {', '.join(sorted(self.chats)) or 'none'}")
            if not CHAT_NAME.fullmatch(name):  # the same rule as a declared chat's: a written file loads again
                raise f.error(key, f"{CHAT_NAME_RULE}, got {show(name)}")
            self.chats[name] = Chat(name)
        return name


_Reader = Callable[[_Fields, int, int, _Reading], Event]  # (the event's fields, its time, its line, the reading so far)


def _message(f: _Fields, t: int, line: int, r: _Reading) -> Event:
    turn = r.turn()
    text = f.get("text", "str", "hello", check=_no_turn_tag)
    usage = _usage(f, "usage") if f.has("usage") else None
    return Message(t, line, chat=r.chat_ref(f, "message"), turn=turn, text=text, muted=f.get("muted", "bool", False), usage=usage)


def _command(f: _Fields, t: int, line: int, r: _Reading) -> Event:
    name = f.get("command", "str", check=_one_of(COMMANDS))
    if not f.has("chat"):
        raise f.missing("chat", "command", "a command needs 'chat'")
    return Command(t, line, chat=r.chat_ref(f, "chat"), name=name)


def _delegate(f: _Fields, t: int, line: int, r: _Reading) -> Event:
    turn = r.turn()
    return Delegate(t, line, chat=r.chat_ref(f, "delegate"), turn=turn)


def _advance(f: _Fields, t: int, line: int, r: _Reading) -> Event:
    return Advance(t + f.get("advance", "pos_duration"), line)


def _no_value(kind: str, f: _Fields) -> None:
    value = f.raw(kind)
    if value not in (None, True, {}):
        raise f.error(kind, f"takes no value, got {show(value)}")


def _sigterm(f: _Fields, t: int, line: int, r: _Reading) -> Event:
    _no_value("sigterm", f)
    return Sigterm(t, line)


def _crash(f: _Fields, t: int, line: int, r: _Reading) -> Event:
    _no_value("crash", f)
    return Crash(t, line)


def _restart(f: _Fields, t: int, line: int, r: _Reading) -> Event:
    _no_value("restart", f)
    return Restart(t, line, change=_config_change(f.sub("config"))) if f.has("config") else Restart(t, line)


def _delete_session(f: _Fields, t: int, line: int, r: _Reading) -> Event:
    return DeleteSession(t, line, chat=r.chat_ref(f, "delete_session"))


def _delete_parent(f: _Fields, t: int, line: int, r: _Reading) -> Event:
    return DeleteParent(t, line, chat=r.chat_ref(f, "delete_parent"))


def _db_locked(f: _Fields, t: int, line: int, r: _Reading) -> Event:
    return DbLocked(t, line, duration=f.get("db_locked", "pos_duration"))


def _backend(kind: str, f: _Fields, r: _Reading) -> str:
    """The provider a backend fault names, which must be configured, and its `for`."""
    provider = f.get(kind, "str")
    if provider == "recorder":
        what = "failed" if kind == "backend_fail" else "slowed"
        raise f.error(kind, f"'recorder' is the harness's own provider; its backend cannot be {what}")
    if provider not in r.providers:
        known = ", ".join(sorted(r.providers)) or "none"
        raise f.error(kind, f"unknown provider {show(provider)}; configured providers: {known}")
    if not f.has("for"):
        raise f.missing("for", kind, "needs 'for', a duration")
    return str(provider)


def _backend_fail(f: _Fields, t: int, line: int, r: _Reading) -> Event:
    provider = _backend("backend_fail", f, r)
    return BackendFail(t, line, provider=provider, duration=f.get("for", "pos_duration"))


def _backend_slow(f: _Fields, t: int, line: int, r: _Reading) -> Event:
    provider = _backend("backend_slow", f, r)
    if not f.has("delay"):
        raise f.missing("delay", "backend_slow", "needs 'delay', a duration")
    return BackendSlow(t, line, provider=provider, duration=f.get("for", "pos_duration"), delay=f.get("delay", "pos_duration"))


def _checkpoint(f: _Fields, t: int, line: int, r: _Reading) -> Event:
    return Checkpoint(t, line, name=f.get("checkpoint", "str"))


def _crash_at_event(f: _Fields, t: int, line: int, r: _Reading) -> Event:
    return _crash_at(f.sub("crash_at", CRASH_AT_KEYS), t, line)


_READERS: dict[str, _Reader] = {
    "message": _message, "command": _command, "delegate": _delegate, "advance": _advance, "sigterm": _sigterm,
    "crash": _crash, "restart": _restart, "delete_session": _delete_session, "delete_parent": _delete_parent,
    "db_locked": _db_locked, "backend_fail": _backend_fail, "backend_slow": _backend_slow, "checkpoint": _checkpoint,
    "crash_at": _crash_at_event,
}
covered("load", _READERS)


def _events(
    items: Any, source: str, line: int, zone: ZoneInfo, start: int, chats: dict[str, Chat], implicit: bool, providers: set[str]
) -> tuple[tuple[Event, ...], dict[str, Chat]]:
    if not isinstance(items, list):
        raise ScenarioError(source, line, "events", f"expected a list, got {show(items)}")
    if len(items) > MAX_EVENTS:
        raise ScenarioError(source, line, "events", f"{len(items)} events is over the limit of {MAX_EVENTS}")
    start_day = from_ms(start, zone).date()
    cursor = start
    reading = _Reading(chats, implicit, providers)
    events: list[Event] = []
    for index, item in enumerate(items):
        item_line = items.lines[index] if isinstance(items, LocatedList) else line
        f = _Fields(source, item, f"events[{index}]", item_line, KINDS.keys() | _MODIFIERS)
        kinds = [key for key in f.data if key in KINDS]
        if len(kinds) != 1:
            unknown = [key for key in f.data if key not in f.keys]
            if not kinds and unknown:  # most likely a misspelt or invented kind: name it
                keys = ", ".join(repr(key) + did_you_mean(key, KINDS) for key in unknown)
                raise ScenarioError(source, f.line_of(unknown[0]), f.path,
                                    f"unknown key{'s' if len(unknown) > 1 else ''} {keys}; expected exactly one of {', '.join(KINDS)}")
            what = "none" if not kinds else " and ".join(kinds)
            raise ScenarioError(source, f.line, f.path, f"expected exactly one of {', '.join(KINDS)}; found {what}")
        kind = kinds[0]
        if f.has("config") and kind != "restart":
            raise f.error("config", "only a restart can change the configuration")
        # When: `at` an absolute local time, or `after` a duration, else at the cursor.
        if f.has("at") and f.has("after"):
            raise f.error("after", "give either 'at' or 'after', not both")
        t = cursor
        if f.has("at"):
            try:
                t = _instant(f.raw("at"), zone, start_day)
            except ValueError as err:
                raise f.error("at", str(err)) from None
            if t < cursor:
                raise f.error("at", f"{f.data['at']} is before the previous event ({format_duration(cursor - t)} earlier)")
        elif f.has("after"):
            t = cursor + f.get("after", "duration")

        event = _READERS[kind](f, t, item_line, reading)
        t = event.t  # an advance moves time on by its duration
        order = f.get("order", "str", AFTER_TIMERS, check=_one_of(ORDERS))
        if order != AFTER_TIMERS:  # where it runs among the timers due at its instant (sim.engine, rule 3)
            event = replace(event, order=order)
        f.done()
        if t >= END_OF_TIME:
            key = kind if kind == "advance" else "after" if f.has("after") else "at"
            raise f.error(key, f"the timeline runs past the year {LAST_YEAR}")
        if t + getattr(event, "duration", 0) + getattr(event, "delay", 0) >= END_OF_TIME:
            key = "for" if kind in ("backend_fail", "backend_slow") else kind
            raise f.error(key, f"the timeline runs past the year {LAST_YEAR}")
        events.append(event)
        cursor = t
    return tuple(events), reading.chats

