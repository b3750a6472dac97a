"""Scenario files (YAML, safe subset, or JSON) to `Scenario`.

Every error is a `ScenarioError` naming file, line and field, e.g.
`catalog/x.yaml:12: events[3].advance: expected a positive duration like '61m', got '-5m'`.
Unknown keys are errors; so are oversized timelines and times outside the years 1970 to
8999. `sim.document` reads the text; this module types it; `sim.writer` writes it back.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import replace
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from sim.clock import format_duration, from_ms, load_zone, local_instant, parse_duration, repeated_instant, to_ms
from sim.document import MAX_FILE_BYTES, LocatedList, ScenarioError, parse_document, show
from sim.scenario import (
    AFTER_TIMERS,
    CHANGEABLE_AT_RESTART,
    CHAT_TYPES,
    COMMANDS,
    CRASH_POINT_NAME,
    FINALIZATIONS,
    ORDERS,
    PLATFORMS,
    RESET_MODES,
    TURN_TAG,
    USAGES,
    Advance,
    BackendFail,
    BackendSlow,
    Chat,
    Checkpoint,
    Command,
    ConfigChange,
    Crash,
    CrashAt,
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
    Usage,
    max_horizon,
)

MAX_EVENTS = 100_000
FIRST_YEAR, LAST_YEAR = 1970, 8999  # virtual time stays well inside what `datetime` can show
END_OF_TIME = to_ms(datetime(LAST_YEAR + 1, 1, 1, tzinfo=UTC))


# ---------------------------------------------------------------------------------------
# Typing the document into a Scenario


class _Fields:
    """Reads typed fields out of one mapping, naming file, line and field on any error."""

    def __init__(self, source: str, data: Any, path: str, line: int) -> None:
        if not isinstance(data, dict):
            raise ScenarioError(source, getattr(data, "line", line), path or "document", f"expected a mapping, got {show(data)}")
        self.source, self.data, self.path = source, data, path
        self.line = getattr(data, "line", line) or line
        self.used: set[str] = set()

    def name(self, key: str) -> str:
        return f"{self.path}.{key}" if self.path else key

    def line_of(self, key: str) -> int:
        lines = getattr(self.data, "lines", {})
        return lines.get(key, self.line)

    def error(self, key: str, message: str) -> ScenarioError:
        return ScenarioError(self.source, self.line_of(key), self.name(key), message)

    def has(self, key: str) -> bool:
        return key in self.data

    def raw(self, key: str, default: Any = None) -> Any:
        self.used.add(key)
        return self.data.get(key, default)

    def get(self, key: str, kind: str, default: Any = None, *, check: Callable[[Any], str | None] | None = None) -> Any:
        """`kind` is one of: str, int, bool, duration, pos_duration."""
        if key not in self.data:
            return default
        value = self.raw(key)
        if kind == "str":
            if not isinstance(value, str) or not value:
                raise self.error(key, f"expected text, got {show(value)}")
        elif kind == "int":
            if isinstance(value, bool) or not isinstance(value, int):
                raise self.error(key, f"expected a whole number, got {show(value)}")
        elif kind == "bool":
            if not isinstance(value, bool):
                raise self.error(key, f"expected true or false, got {show(value)}")
        elif kind in ("duration", "pos_duration"):
            try:
                value = parse_duration(value) if isinstance(value, str) else None
            except ValueError:
                value = None
            if value is None or (kind == "pos_duration" and value <= 0):
                adjective = "positive " if kind == "pos_duration" else ""
                raise self.error(key, f"expected a {adjective}duration like '61m', got {show(self.data[key])}")
        if check is not None:
            problem = check(value)
            if problem:
                raise self.error(key, problem)
        return value

    def sub(self, key: str) -> _Fields:
        self.used.add(key)
        return _Fields(self.source, self.data[key], self.name(key), self.line_of(key))

    def done(self) -> None:
        for key in self.data:
            if key not in self.used:
                raise self.error(key, "unknown key")


def _one_of(options: tuple[str, ...]) -> Callable[[Any], str | None]:
    return lambda v: None if v in options else f"expected one of {', '.join(options)}, got {show(v)}"


def _at_least(low: int) -> Callable[[Any], str | None]:
    return lambda v: None if v >= low else f"expected at least {low}, got {v}"


def _between(low: int, high: int) -> Callable[[Any], str | None]:
    return lambda v: None if low <= v <= high else f"expected {low} to {high}, got {v}"


def _lowercase_name(value: str) -> str | None:
    return None if re.fullmatch(r"[a-z][a-z0-9_-]*", value) else f"expected a lowercase name, got {show(value)}"


def _usage(f: _Fields, key: str) -> Usage:
    """`small`, `none`, `large` or a token count: what the fake LLM's answer reports."""
    value = f.raw(key)
    if value in USAGES or (isinstance(value, int) and not isinstance(value, bool) and value >= 0):
        return value  # type: ignore[no-any-return]
    raise f.error(key, f"expected {', '.join(USAGES)} or a token count like 120000, got {show(value)}")


def _policy(f: _Fields) -> ResetPolicy:
    policy = ResetPolicy(
        mode=f.get("mode", "str", "none", check=_one_of(RESET_MODES)),
        idle_minutes=f.get("idle_minutes", "int", 1440, check=_at_least(1)),
        at_hour=f.get("at_hour", "int", 4, check=_between(0, 23)),
        daily_min_idle_minutes=f.get("daily_min_idle_minutes", "int", 0, check=_at_least(0)),
    )
    f.done()
    return policy


def _policy_table(f: _Fields, key: str, options: tuple[str, ...]) -> tuple[tuple[str, ResetPolicy], ...]:
    if not f.has(key):
        return ()
    table = f.sub(key)
    entries = []
    for name in table.data:
        if name not in options:
            raise table.error(name, f"expected one of {', '.join(options)}")
        entries.append((name, _policy(table.sub(name))))
    return tuple(sorted(entries))


def _finalization_table(f: _Fields) -> tuple[tuple[str, Finalization], ...]:
    """`finalization_by_chat: {bob: lazy}`: chats finalized otherwise than the watcher says
    (whether each names a chat of the scenario is checked once the events are read)."""
    if not f.has("finalization_by_chat"):
        return ()
    table = f.sub("finalization_by_chat")
    for name in table.data:
        if not isinstance(name, str) or not CHAT_NAME.fullmatch(name):
            raise table.error(str(name), CHAT_NAME_RULE)
    entries = [(name, table.get(name, "str", check=_one_of(FINALIZATIONS))) for name in table.data]
    table.done()
    return tuple(sorted(entries))


def _check_finalization_chats(f: _Fields, config: GatewayConfig, chats: Iterable[str]) -> None:
    known = set(chats)
    for name, _ in config.finalization_by_chat:
        if name not in known:
            table = f.sub("config").sub("finalization_by_chat")
            raise table.error(name, f"no chat named {name!r} in the scenario (its chats: {', '.join(sorted(known))})")


def _config(f: _Fields) -> GatewayConfig:
    defaults = GatewayConfig()
    reset_default = f.has("reset") and f.data["reset"] == "default"  # the gateway's own default applies
    if f.has("reset") and isinstance(f.data["reset"], str) and not reset_default:
        raise f.error("reset", f"expected a policy like {{mode: idle}} or 'default', got {show(f.data['reset'])}")
    if reset_default:
        f.raw("reset")
        reset = defaults.reset
    else:
        reset = _policy(f.sub("reset")) if f.has("reset") else defaults.reset
    watcher = defaults.watcher_interval
    if f.has("watcher_interval"):
        watcher = None if f.raw("watcher_interval") == "lazy" else f.get("watcher_interval", "pos_duration")
    providers: list[ProviderSpec] = []
    if f.has("providers"):
        items = f.raw("providers")
        if not isinstance(items, list):
            raise f.error("providers", f"expected a list, got {show(items)}")
        for index, item in enumerate(items):
            line = items.lines[index] if isinstance(items, LocatedList) else f.line_of("providers")
            p = _Fields(f.source, item, f"{f.name('providers')}[{index}]", line)
            name = p.get("name", "str", check=_lowercase_name)
            if name is None:
                raise p.error("name", "required")
            if name == "recorder":
                raise p.error("name", "'recorder' is the harness's own provider and is always loaded")
            if any(existing.name == name for existing in providers):
                raise p.error("name", f"duplicate provider {name!r}")
            providers.append(ProviderSpec(name, p.get("retain_every_n_turns", "int", 1, check=_at_least(1))))
            p.done()
    config = GatewayConfig(
        reset=reset,
        reset_by_platform=_policy_table(f, "reset_by_platform", PLATFORMS),
        reset_by_chat_type=_policy_table(f, "reset_by_chat_type", CHAT_TYPES),
        cache_cap=f.get("cache_cap", "int", defaults.cache_cap, check=_at_least(1)),
        idle_ttl=f.get("idle_ttl", "pos_duration", defaults.idle_ttl),
        watcher_interval=watcher,
        finalization_by_chat=_finalization_table(f),
        providers=tuple(providers),
        turn_latency=f.get("turn_latency", "duration", defaults.turn_latency),
        usage=_usage(f, "usage") if f.has("usage") else defaults.usage,
        reset_default=reset_default,
    )
    f.done()
    return config


CHAT_NAME = re.compile(r"[A-Za-z0-9_.-]+")
CHAT_NAME_RULE = "chat names are letters, digits, '.', '_' or '-'"


def _chats(f: _Fields) -> tuple[Chat, ...]:
    chats = []
    for name in f.data:
        if not CHAT_NAME.fullmatch(name):
            raise f.error(name, CHAT_NAME_RULE)
        if f.data[name] is None:  # `bob:` with no value: a chat with the defaults
            f.used.add(name)
            chats.append(Chat(name))
            continue
        c = f.sub(name)
        chats.append(
            Chat(
                name,
                platform=c.get("platform", "str", "telegram", check=_one_of(PLATFORMS)),
                chat_type=c.get("chat_type", "str", "dm", check=_one_of(CHAT_TYPES)),
                user=c.get("user", "str"),
                thread=c.get("thread", "str"),
                chat_id=c.get("chat_id", "str"),
            )
        )
        c.done()
        twin = next((other for other in chats[:-1] if other.identity == chats[-1].identity), None)
        if twin is not None:  # the gateway could not tell them apart: one chat under two names
            raise f.error(name, f"the same chat as {twin.name} (platform, chat type, chat id, thread and user alike); "
                                "give each user of a group its own `user`")
    f.done()
    return tuple(chats)


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


def _config_change(f: _Fields) -> ConfigChange:
    """A restart's `config:`: the reset policy keys it replaces (each given whole; the others kept)."""
    for key in f.data:
        if key not in CHANGEABLE_AT_RESTART:
            raise f.error(key, f"only the reset policy can change at a restart: {', '.join(CHANGEABLE_AT_RESTART)}")
    if not f.data:
        raise ScenarioError(f.source, f.line, f.path, f"expected at least one of {', '.join(CHANGEABLE_AT_RESTART)}")
    if f.has("reset") and not isinstance(f.data["reset"], dict):
        raise f.error("reset", f"expected a policy like {{mode: none}}, got {show(f.data['reset'])}")
    change = ConfigChange(
        reset=_policy(f.sub("reset")) if f.has("reset") else None,
        reset_by_platform=_policy_table(f, "reset_by_platform", PLATFORMS) if f.has("reset_by_platform") else None,
        reset_by_chat_type=_policy_table(f, "reset_by_chat_type", CHAT_TYPES) if f.has("reset_by_chat_type") else None,
    )
    f.done()
    return change


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


def load_text(text: str, source: str = "<scenario>") -> Scenario:
    """Parse and type one scenario document. Raises ScenarioError only."""
    data = parse_document(text, source)
    f = _Fields(source, data, "", 1)
    name = f.get("name", "str")
    if name is None:
        raise ScenarioError(source, f.line, "name", "required")
    seed = f.get("seed", "int", 0, check=_at_least(0))
    zone_name = f.get("zone", "str", "UTC")
    try:
        zone = load_zone(zone_name)
    except (ZoneInfoNotFoundError, ValueError, OSError):  # OSError: 'America' is a directory, not a zone
        raise f.error("zone", f"unknown time zone {show(zone_name)}; use an IANA name like 'Europe/Berlin'") from None
    try:
        start = _instant(f.raw("start", "2026-01-05T09:00"), zone, None)
    except ValueError as err:
        raise f.error("start", str(err)) from None
    config = _config(f.sub("config")) if f.has("config") else GatewayConfig()
    implicit = not f.has("chats")
    chats = {c.name: c for c in _chats(f.sub("chats"))} if not implicit else {}
    if not f.has("events"):
        raise ScenarioError(source, f.line, "events", "required")
    events, chats = _events(f.raw("events"), source, f.line_of("events"), zone, start, chats, implicit, {p.name for p in config.providers})
    _check_finalization_chats(f, config, chats)
    if max((event.t for event in events), default=start) + max_horizon(config, events) >= END_OF_TIME:
        raise f.error("config", f"its idle times and intervals run the timeline past the year {LAST_YEAR}")
    f.raw("catches")  # zoo metadata: the variants this scenario exists to catch
    catches = f.data.get("catches")
    if catches is not None and not (isinstance(catches, list) and all(isinstance(c, str) for c in catches)):
        raise f.error("catches", f"expected a list of variant names, got {show(catches)}")
    f.done()
    header = "\n".join(line[1:].strip() for line in _leading_comment(text))
    return Scenario(
        name=name,
        seed=seed,
        zone=zone_name,
        start=start,
        config=config,
        chats=tuple(chats.values()),
        events=events,
        source=source,
        header=header,
        catches=tuple(catches or ()),
    )


def _leading_comment(text: str) -> list[str]:
    lines = []
    for line in text.splitlines():
        if line.startswith("#"):
            lines.append(line)
        elif line.strip():
            break
    return lines


def load_file(path: str | Path) -> Scenario:
    """Load a scenario file; the error names the path as given."""
    source = str(path)
    try:
        raw = Path(path).read_bytes()
    except OSError as err:
        raise ScenarioError(source, 0, "", f"cannot read: {err.strerror}") from None
    if len(raw) > MAX_FILE_BYTES:
        raise ScenarioError(source, 0, "", f"file is larger than {MAX_FILE_BYTES} bytes")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise ScenarioError(source, raw[: err.start].count(b"\n") + 1, "", "file is not UTF-8 text") from None
    return load_text(text, source)


def config_from_document(document: dict[str, Any]) -> GatewayConfig:
    """The `config` mapping of a scenario document (as logged) back to a GatewayConfig."""
    return _config(_Fields("<log>", document, "config", 0))
