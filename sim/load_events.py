"""The `events` section of a scenario file: when each event happens, and what each kind reads."""

from __future__ import annotations

import re
from dataclasses import replace
from datetime import UTC, date, datetime
from typing import Any
from zoneinfo import ZoneInfo

from sim.clock import format_duration, from_ms, local_instant, repeated_instant, to_ms
from sim.document import LocatedList, ScenarioError, show
from sim.fields import _at_least, _Fields, _one_of, _usage
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
        return local_instant(day, hour, minute, zone) + offset
    second_pass = repeated_instant(day, hour, minute, zone)
    if second_pass is None:
        raise ValueError(f"{text}: no DST change repeats {hour:02d}:{minute:02d} on {day.isoformat()} in {zone.key}; "
                         f"'(2nd)' names the second pass of a repeated wall time")
    return second_pass + offset


_PRIMARY = {
    "message": "chat",
    "command": "name",
    "delegate": "chat",
    "advance": "duration",
    "sigterm": None,
    "crash": None,
    "restart": None,
    "delete_session": "chat",
    "delete_parent": "chat",
    "db_locked": "duration",
    "backend_fail": "provider",
    "backend_slow": "provider",
    "checkpoint": "name",
    "crash_at": "point",
}

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


def _crash_at(f: _Fields, t: int, line: int) -> CrashAt:
    """`crash_at: {point: NAME, hit: N, restart_after: D}`: the N-th hit (default 1) of the
    gateway's point NAME after this event; D after dying there it restarts (default: at the
    scenario's next `restart`)."""
    point = f.get("point", "str", check=lambda v: None if CRASH_POINT_NAME.fullmatch(v) else
                  f"expected a crash point's name (lowercase letters, digits, '_', '-'), got {show(v)}")
    if point is None:
        raise f.error("point", "required")
    event = CrashAt(t, line, point=point, hit=f.get("hit", "int", 1, check=_at_least(1)),
                    restart_after=f.get("restart_after", "pos_duration"))
    f.done()
    return event


def _events(
    items: Any, source: str, line: int, zone: ZoneInfo, start: int, chats: dict[str, Chat], implicit: bool, providers: set[str]
) -> tuple[tuple[Event, ...], dict[str, Chat]]:
    if not isinstance(items, list):
        raise ScenarioError(source, line, "events", f"expected a list, got {show(items)}")
    if len(items) > MAX_EVENTS:
        raise ScenarioError(source, line, "events", f"{len(items)} events is over the limit of {MAX_EVENTS}")
    start_day = from_ms(start, zone).date()
    cursor = start
    turns = 0
    events: list[Event] = []
    for index, item in enumerate(items):
        item_line = items.lines[index] if isinstance(items, LocatedList) else line
        f = _Fields(source, item, f"events[{index}]", item_line)
        kinds = [key for key in f.data if key in _PRIMARY]
        if len(kinds) != 1:
            unknown = [key for key in f.data if key not in _PRIMARY and key not in _MODIFIERS]
            if not kinds and unknown:  # most likely a misspelt or invented kind: name it
                keys = ", ".join(repr(key) for key in unknown)
                raise ScenarioError(source, f.line_of(unknown[0]), f.path,
                                    f"unknown key{'s' if len(unknown) > 1 else ''} {keys}; expected exactly one of {', '.join(_PRIMARY)}")
            what = "none" if not kinds else " and ".join(kinds)
            raise ScenarioError(source, f.line, f.path, f"expected exactly one of {', '.join(_PRIMARY)}; found {what}")
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

        def chat_ref(key: str, f: _Fields = f) -> str:
            name = f.get(key, "str")
            if name not in chats:
                if not implicit:
                    raise f.error(key, f"unknown chat {show(name)}; declared chats: {', '.join(sorted(chats)) or 'none'}")
                if not CHAT_NAME.fullmatch(name):  # the same rule as a declared chat's: a written file loads again
                    raise f.error(key, f"{CHAT_NAME_RULE}, got {show(name)}")
                chats[name] = Chat(name)
            return name

        event: Event
        if kind == "message":
            turns += 1
            text = f.get("text", "str", "hello", check=_no_turn_tag)
            usage = _usage(f, "usage") if f.has("usage") else None
            event = Message(t, item_line, chat=chat_ref("message"), turn=f"t{turns}", text=text,
                            muted=f.get("muted", "bool", False), usage=usage)
        elif kind == "command":
            name = f.get("command", "str", check=_one_of(COMMANDS))
            if not f.has("chat"):
                raise f.error("command", "a command needs 'chat'")
            event = Command(t, item_line, chat=chat_ref("chat"), name=name)
        elif kind == "delegate":
            turns += 1
            event = Delegate(t, item_line, chat=chat_ref("delegate"), turn=f"t{turns}")
        elif kind == "advance":
            t = t + f.get("advance", "pos_duration")
            event = Advance(t, item_line)
        elif kind in ("sigterm", "crash", "restart"):
            value = f.raw(kind)
            if value not in (None, True, {}):
                raise f.error(kind, f"takes no value, got {show(value)}")
            event = {"sigterm": Sigterm, "crash": Crash, "restart": Restart}[kind](t, item_line)
            if kind == "restart" and f.has("config"):
                event = Restart(t, item_line, change=_config_change(f.sub("config")))
        elif kind == "delete_session":
            event = DeleteSession(t, item_line, chat=chat_ref("delete_session"))
        elif kind == "delete_parent":
            event = DeleteParent(t, item_line, chat=chat_ref("delete_parent"))
        elif kind == "db_locked":
            event = DbLocked(t, item_line, duration=f.get("db_locked", "pos_duration"))
        elif kind in ("backend_fail", "backend_slow"):
            provider = f.get(kind, "str")
            if provider == "recorder":
                what = "failed" if kind == "backend_fail" else "slowed"
                raise f.error(kind, f"'recorder' is the harness's own provider; its backend cannot be {what}")
            if provider not in providers:
                known = ", ".join(sorted(providers)) or "none"
                raise f.error(kind, f"unknown provider {show(provider)}; configured providers: {known}")
            if not f.has("for"):
                raise f.error(kind, "needs 'for', a duration")
            if kind == "backend_fail":
                event = BackendFail(t, item_line, provider=provider, duration=f.get("for", "pos_duration"))
            else:
                if not f.has("delay"):
                    raise f.error(kind, "needs 'delay', a duration")
                event = BackendSlow(t, item_line, provider=provider, duration=f.get("for", "pos_duration"),
                                    delay=f.get("delay", "pos_duration"))
        elif kind == "crash_at":
            event = _crash_at(f.sub("crash_at"), t, item_line)
        else:
            event = Checkpoint(t, item_line, name=f.get("checkpoint", "str"))
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
    return tuple(events), chats

