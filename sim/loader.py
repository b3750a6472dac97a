"""Scenario files (YAML, safe subset, or JSON) to `Scenario`, and back.

Every error is a `ScenarioError` naming file, line and field, e.g.
`catalog/x.yaml:12: events[3].advance: expected a positive duration like '61m', got '-5m'`.
Unknown keys are errors; YAML tags that would construct objects are refused; so are
oversized files and timelines, and times outside the years 1970 to 8999. A `.json` file is
read as JSON (not as YAML, which reads some JSON differently).
"""

from __future__ import annotations

import json
import re
from bisect import bisect_right
from collections.abc import Callable
from dataclasses import fields, replace
from datetime import UTC, date, datetime
from json.decoder import scanstring
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import yaml

from sim.clock import format_duration, from_ms, local_instant, parse_duration, to_ms
from sim.scenario import (
    CHAT_TYPES,
    COMMANDS,
    PLATFORMS,
    RESET_MODES,
    Advance,
    BackendFail,
    Chat,
    Checkpoint,
    Command,
    Crash,
    DbLocked,
    Delegate,
    DeleteParent,
    DeleteSession,
    Event,
    GatewayConfig,
    Message,
    ProviderSpec,
    ResetPolicy,
    Restart,
    Scenario,
    Sigterm,
)

MAX_FILE_BYTES = 1 << 20
MAX_EVENTS = 100_000
MAX_NODES = 500_000
FIRST_YEAR, LAST_YEAR = 1970, 8999  # virtual time stays well inside what `datetime` can show
END_OF_TIME = to_ms(datetime(LAST_YEAR + 1, 1, 1, tzinfo=UTC))


class ScenarioError(ValueError):
    """A scenario that cannot be loaded: where, which field, and what was expected."""

    def __init__(self, source: str, line: int, field: str, message: str) -> None:
        self.source, self.line, self.field, self.message = source, line, field, message
        where = f"{source}:{line}" if line else source
        super().__init__(f"{where}: {field}: {message}" if field else f"{where}: {message}")


# ---------------------------------------------------------------------------------------
# Parsing with line numbers


class Located(dict):  # type: ignore[type-arg]
    """A mapping that remembers the line of each key."""

    line: int = 0
    lines: dict[str, int]


class LocatedList(list):  # type: ignore[type-arg]
    """A sequence that remembers the line of each item."""

    line: int = 0
    lines: list[int]


class _Loader(yaml.SafeLoader):
    """Safe composer with no implicit typing: plain scalars stay text until we type them."""

    yaml_implicit_resolvers: dict[str, Any] = {}


_STR, _SEQ, _MAP = "tag:yaml.org,2002:str", "tag:yaml.org,2002:seq", "tag:yaml.org,2002:map"
_INT = re.compile(r"[-+]?\d+", re.ASCII)
_FLOAT = re.compile(r"[-+]?(\d+\.\d*|\.\d+|\d+)([eE][-+]?\d+)?", re.ASCII)


def _plain(text: str) -> Any:
    """Type a plain (unquoted) scalar: null, bool, int, float, else text. No YAML 1.1 surprises."""
    if text in ("", "~", "null", "Null", "NULL"):
        return None
    if text in ("true", "True", "TRUE"):
        return True
    if text in ("false", "False", "FALSE"):
        return False
    if _INT.fullmatch(text):
        return int(text)
    if _FLOAT.fullmatch(text):
        return float(text)
    return text


def _tag_error(source: str, line: int, path: str, tag: str) -> ScenarioError:
    """Names the tag as it is written: '!!python/object/apply:os.system', '!custom'."""
    shown = "!!" + tag.removeprefix("tag:yaml.org,2002:") if tag.startswith("tag:yaml.org,2002:") else tag
    return ScenarioError(source, line, path, f"YAML tag {shown!r} is not allowed")


def _too_long(source: str, line: int, path: str, digits: str) -> ScenarioError:
    """Python refuses to read an int of more than `sys.get_int_max_str_digits()` digits."""
    return ScenarioError(source, line, path, f"a number of {len(digits)} digits is too long")


def _child(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _convert(node: yaml.Node, source: str, budget: list[int], stack: set[int], path: str = "") -> Any:
    """A composed YAML node -> plain values; `path` names the field in errors ('events[3].at')."""
    budget[0] -= 1
    if budget[0] < 0:
        raise ScenarioError(source, node.start_mark.line + 1, "", f"document too large (over {MAX_NODES} nodes)")
    line = node.start_mark.line + 1
    if id(node) in stack:
        raise ScenarioError(source, line, path, "recursive alias is not allowed")
    if isinstance(node, yaml.ScalarNode):
        if node.tag != _STR:
            raise _tag_error(source, line, path, node.tag)
        if node.style in ("'", '"', "|", ">"):
            return node.value
        try:
            return _plain(node.value)
        except ValueError:
            raise _too_long(source, line, path, node.value) from None
    stack.add(id(node))
    try:
        if isinstance(node, yaml.SequenceNode):
            if node.tag != _SEQ:
                raise _tag_error(source, line, path, node.tag)
            seq = LocatedList(_convert(item, source, budget, stack, f"{path}[{index}]") for index, item in enumerate(node.value))
            seq.line, seq.lines = line, [item.start_mark.line + 1 for item in node.value]
            return seq
        if isinstance(node, yaml.MappingNode):
            if node.tag != _MAP:
                raise _tag_error(source, line, path, node.tag)
            mapping = Located()
            mapping.line, mapping.lines = line, {}
            for key_node, value_node in node.value:
                key_line = key_node.start_mark.line + 1
                key = _convert(key_node, source, budget, stack, path)
                if key == "<<" and key_node.tag == _STR:
                    raise ScenarioError(source, key_line, path, "YAML merge keys are not allowed")
                if not isinstance(key, str):
                    raise ScenarioError(source, key_line, path, f"keys must be text, got {_show(key)}")
                if key in mapping:
                    raise ScenarioError(source, key_line, _child(path, key), "duplicate key")
                mapping[key] = _convert(value_node, source, budget, stack, _child(path, key))
                mapping.lines[key] = key_line
            return mapping
    finally:
        stack.discard(id(node))
    raise ScenarioError(source, line, path, f"unsupported YAML node {type(node).__name__}")


_JSON_SPACE = re.compile(r"[ \t\n\r]*")
_JSON_NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(\.\d+)?([eE][-+]?\d+)?", re.ASCII)
_JSON_WORDS = (
    ("true", True), ("false", False), ("null", None), ("NaN", float("nan")), ("Infinity", float("inf")), ("-Infinity", float("-inf"))
)


def _json_values(text: str, source: str) -> Any:
    """Valid JSON text -> the values `json.loads` gives, with mappings and lists that remember lines.

    JSON is read as JSON, not as YAML: YAML differs on tabs, long keys, NEL and surrogate pairs.
    """
    line_starts = [0, *(i + 1 for i, char in enumerate(text) if char == "\n")]
    budget = [MAX_NODES]

    def line_at(pos: int) -> int:
        return bisect_right(line_starts, pos)

    def space(pos: int) -> int:
        return _JSON_SPACE.match(text, pos).end()  # type: ignore[union-attr]

    def value(pos: int, path: str) -> tuple[Any, int]:
        budget[0] -= 1
        if budget[0] < 0:
            raise ScenarioError(source, line_at(pos), "", f"document too large (over {MAX_NODES} nodes)")
        char = text[pos]
        if char == '"':
            return scanstring(text, pos + 1)
        if char == "{":
            mapping = Located()
            mapping.line, mapping.lines = line_at(pos), {}
            pos = space(pos + 1)
            while text[pos] != "}":
                key_line = line_at(pos)
                key, pos = scanstring(text, pos + 1)
                if key in mapping:
                    raise ScenarioError(source, key_line, _child(path, key), "duplicate key")
                mapping[key], pos = value(space(space(pos) + 1), _child(path, key))  # past the ':'
                mapping.lines[key] = key_line
                pos = space(pos)
                pos = space(pos + 1) if text[pos] == "," else pos
            return mapping, pos + 1
        if char == "[":
            seq = LocatedList()
            seq.line, seq.lines = line_at(pos), []
            pos = space(pos + 1)
            while text[pos] != "]":
                seq.lines.append(line_at(pos))
                item, pos = value(pos, f"{path}[{len(seq)}]")
                seq.append(item)
                pos = space(pos)
                pos = space(pos + 1) if text[pos] == "," else pos
            return seq, pos + 1
        for word, constant in _JSON_WORDS:
            if text.startswith(word, pos):
                return constant, pos + len(word)
        number = _JSON_NUMBER.match(text, pos)
        assert number is not None, "json.loads accepted the text"
        try:
            return (float(number.group()) if number.group(1) or number.group(2) else int(number.group())), number.end()
        except ValueError:
            raise _too_long(source, line_at(pos), path, number.group()) from None

    return value(space(0), "")[0]


def parse_document(text: str, source: str) -> Any:
    """Text of a YAML or JSON document -> plain values that remember their lines."""
    if len(text.encode("utf-8", "surrogatepass")) > MAX_FILE_BYTES:
        raise ScenarioError(source, 0, "", f"file is larger than {MAX_FILE_BYTES} bytes")
    if "\x00" in text:
        raise ScenarioError(source, text.count("\n", 0, text.index("\x00")) + 1, "", "file contains a NUL byte")
    if source.endswith(".json"):
        try:
            json.loads(text, parse_int=len, parse_float=len)  # syntax only: numbers are read below
            return _json_values(text, source)
        except json.JSONDecodeError as err:
            raise ScenarioError(source, err.lineno, "", f"invalid JSON: {err.msg} (column {err.colno})") from None
        except RecursionError:
            raise ScenarioError(source, 0, "", "invalid JSON: nested too deeply") from None
    try:
        node = yaml.compose(text, Loader=_Loader)
    except yaml.reader.ReaderError as err:
        line = text.count("\n", 0, err.position) + 1
        raise ScenarioError(source, line, "", f"invalid YAML: character U+{err.character:04X} is not allowed") from None
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        line = mark.line + 1 if mark else 0
        raise ScenarioError(source, line, "", f"invalid YAML: {err.problem or err.context}") from None
    except yaml.YAMLError as err:
        raise ScenarioError(source, 0, "", f"invalid YAML: {err}") from None
    except RecursionError:
        raise ScenarioError(source, 0, "", "invalid YAML: nested too deeply") from None
    if node is None:
        raise ScenarioError(source, 1, "", "empty document: expected a mapping with 'name' and 'events'")
    try:
        return _convert(node, source, [MAX_NODES], set())
    except RecursionError:
        raise ScenarioError(source, 0, "", "document nested too deeply") from None


# ---------------------------------------------------------------------------------------
# Typing the document into a Scenario


class _Fields:
    """Reads typed fields out of one mapping, naming file, line and field on any error."""

    def __init__(self, source: str, data: Any, path: str, line: int) -> None:
        if not isinstance(data, dict):
            raise ScenarioError(source, getattr(data, "line", line), path or "document", f"expected a mapping, got {_show(data)}")
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
                raise self.error(key, f"expected text, got {_show(value)}")
        elif kind == "int":
            if isinstance(value, bool) or not isinstance(value, int):
                raise self.error(key, f"expected a whole number, got {_show(value)}")
        elif kind == "bool":
            if not isinstance(value, bool):
                raise self.error(key, f"expected true or false, got {_show(value)}")
        elif kind in ("duration", "pos_duration"):
            try:
                value = parse_duration(value) if isinstance(value, str) else None
            except ValueError:
                value = None
            if value is None or (kind == "pos_duration" and value <= 0):
                adjective = "positive " if kind == "pos_duration" else ""
                raise self.error(key, f"expected a {adjective}duration like '61m', got {_show(self.data[key])}")
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


def _show(value: Any) -> str:
    if isinstance(value, str):
        return repr(value) if len(value) <= 40 else repr(value[:40]) + "..."
    if value is None:
        return "nothing"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list)):
        return "a mapping" if isinstance(value, dict) else "a list"
    return repr(value)


def _one_of(options: tuple[str, ...]) -> Callable[[Any], str | None]:
    return lambda v: None if v in options else f"expected one of {', '.join(options)}, got {_show(v)}"


def _at_least(low: int) -> Callable[[Any], str | None]:
    return lambda v: None if v >= low else f"expected at least {low}, got {v}"


def _between(low: int, high: int) -> Callable[[Any], str | None]:
    return lambda v: None if low <= v <= high else f"expected {low} to {high}, got {v}"


def _lowercase_name(value: str) -> str | None:
    return None if re.fullmatch(r"[a-z][a-z0-9_-]*", value) else f"expected a lowercase name, got {_show(value)}"


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


def _config(f: _Fields) -> GatewayConfig:
    defaults = GatewayConfig()
    reset = _policy(f.sub("reset")) if f.has("reset") else defaults.reset
    watcher = defaults.watcher_interval
    if f.has("watcher_interval"):
        watcher = None if f.raw("watcher_interval") == "lazy" else f.get("watcher_interval", "pos_duration")
    providers: list[ProviderSpec] = []
    if f.has("providers"):
        items = f.raw("providers")
        if not isinstance(items, list):
            raise f.error("providers", f"expected a list, got {_show(items)}")
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
        providers=tuple(providers),
        turn_latency=f.get("turn_latency", "duration", defaults.turn_latency),
    )
    f.done()
    return config


def _chats(f: _Fields) -> tuple[Chat, ...]:
    chats = []
    for name in f.data:
        if not re.fullmatch(r"[A-Za-z0-9_.-]+", name):
            raise f.error(name, "chat names are letters, digits, '.', '_' or '-'")
        c = f.sub(name) if f.data[name] is not None else None
        if c is None:
            chats.append(Chat(name))
            continue
        chats.append(
            Chat(
                name,
                platform=c.get("platform", "str", "telegram", check=_one_of(PLATFORMS)),
                chat_type=c.get("chat_type", "str", "dm", check=_one_of(CHAT_TYPES)),
                user=c.get("user", "str"),
                thread=c.get("thread", "str"),
            )
        )
        c.done()
    f.done()
    return tuple(chats)


_TIME_OF_DAY = re.compile(r"(\d{1,2}):(\d{2})(?::(\d{2}))?", re.ASCII)
_DATETIME = re.compile(r"(\d{4})-(\d{2})-(\d{2})[T ](\d{1,2}):(\d{2})(?::(\d{2}))?", re.ASCII)


def _instant(text: Any, zone: ZoneInfo, start_day: date | None) -> int:
    """'09:30' (on the start day) or '2026-03-29T04:27' (local) -> epoch ms; no start day: a date is required.

    Raises ValueError with the message for the field.
    """
    expected = "a local time like '09:30' or '2026-03-29T04:27'" if start_day else "a local date and time like '2026-03-29T09:00'"
    m = _TIME_OF_DAY.fullmatch(text) if isinstance(text, str) and start_day else None
    if m:
        day, (hour, minute, second) = start_day, (int(m.group(1)), int(m.group(2)), int(m.group(3) or 0))
    elif isinstance(text, str) and (m := _DATETIME.fullmatch(text)):
        try:
            day = date(int(m.group(1)), int(m.group(2)), int(m.group(3)))
        except ValueError:
            raise ValueError(f"expected {expected}, got {_show(text)}") from None
        hour, minute, second = int(m.group(4)), int(m.group(5)), int(m.group(6) or 0)
        if not FIRST_YEAR <= day.year <= LAST_YEAR:
            raise ValueError(f"expected a date in the years {FIRST_YEAR} to {LAST_YEAR}, got {_show(text)}")
    else:
        raise ValueError(f"expected {expected}, got {_show(text)}")
    if hour > 23 or minute > 59 or second > 59:
        raise ValueError(f"expected {expected}, got {_show(text)}")
    return local_instant(day, hour, minute, zone) + second * 1000


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
    "checkpoint": "name",
}


def _events(
    items: Any, source: str, line: int, zone: ZoneInfo, start: int, chats: dict[str, Chat], implicit: bool, providers: set[str]
) -> tuple[tuple[Event, ...], dict[str, Chat]]:
    if not isinstance(items, list):
        raise ScenarioError(source, line, "events", f"expected a list, got {_show(items)}")
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
            what = "none" if not kinds else " and ".join(kinds)
            raise ScenarioError(source, f.line, f.path, f"expected exactly one of {', '.join(_PRIMARY)}; found {what}")
        kind = kinds[0]
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
                    raise f.error(key, f"unknown chat {_show(name)}; declared chats: {', '.join(sorted(chats)) or 'none'}")
                chats[name] = Chat(name)
            return name

        event: Event
        if kind == "message":
            turns += 1
            text = f.get("text", "str", "hello")
            event = Message(t, item_line, chat=chat_ref("message"), turn=f"t{turns}", text=text, muted=f.get("muted", "bool", False))
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
                raise f.error(kind, f"takes no value, got {_show(value)}")
            event = {"sigterm": Sigterm, "crash": Crash, "restart": Restart}[kind](t, item_line)
        elif kind == "delete_session":
            event = DeleteSession(t, item_line, chat=chat_ref("delete_session"))
        elif kind == "delete_parent":
            event = DeleteParent(t, item_line, chat=chat_ref("delete_parent"))
        elif kind == "db_locked":
            event = DbLocked(t, item_line, duration=f.get("db_locked", "pos_duration"))
        elif kind == "backend_fail":
            provider = f.get("backend_fail", "str")
            if provider == "recorder":
                raise f.error("backend_fail", "'recorder' is the harness's own provider; its backend cannot be failed")
            if provider not in providers:
                known = ", ".join(sorted(providers)) or "none"
                raise f.error("backend_fail", f"unknown provider {_show(provider)}; configured providers: {known}")
            if not f.has("for"):
                raise f.error("backend_fail", "needs 'for', a duration")
            event = BackendFail(t, item_line, provider=provider, duration=f.get("for", "pos_duration"))
        else:
            event = Checkpoint(t, item_line, name=f.get("checkpoint", "str"))
        f.done()
        if t >= END_OF_TIME:
            key = kind if kind == "advance" else "after" if f.has("after") else "at"
            raise f.error(key, f"the timeline runs past the year {LAST_YEAR}")
        if t + getattr(event, "duration", 0) >= END_OF_TIME:
            raise f.error("for" if kind == "backend_fail" else kind, f"the timeline runs past the year {LAST_YEAR}")
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
        zone = ZoneInfo(zone_name)
    except (ZoneInfoNotFoundError, ValueError, OSError):  # OSError: 'America' is a directory, not a zone
        raise f.error("zone", f"unknown time zone {_show(zone_name)}; use an IANA name like 'Europe/Berlin'") from None
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
    if max((event.t for event in events), default=start) + config.horizon() >= END_OF_TIME:
        raise f.error("config", f"its idle times and intervals run the timeline past the year {LAST_YEAR}")
    f.raw("catches")  # zoo metadata: the variants this scenario exists to catch
    catches = f.data.get("catches")
    if catches is not None and not (isinstance(catches, list) and all(isinstance(c, str) for c in catches)):
        raise f.error("catches", f"expected a list of variant names, got {_show(catches)}")
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


# ---------------------------------------------------------------------------------------
# Writing scenarios back (fuzz failures, shrunk scenarios)


def _policy_dict(policy: ResetPolicy) -> dict[str, Any]:
    out: dict[str, Any] = {"mode": policy.mode}
    default = ResetPolicy()
    for fld in fields(ResetPolicy):
        value = getattr(policy, fld.name)
        if fld.name != "mode" and value != getattr(default, fld.name):
            out[fld.name] = value
    return out


def config_document(config: GatewayConfig) -> dict[str, Any]:
    """A GatewayConfig as the plain `config` mapping of a scenario file."""
    default = GatewayConfig()
    cfg: dict[str, Any] = {"reset": _policy_dict(config.reset)}
    if config.reset_by_platform:
        cfg["reset_by_platform"] = {name: _policy_dict(p) for name, p in config.reset_by_platform}
    if config.reset_by_chat_type:
        cfg["reset_by_chat_type"] = {name: _policy_dict(p) for name, p in config.reset_by_chat_type}
    cfg["cache_cap"] = config.cache_cap
    cfg["idle_ttl"] = format_duration(config.idle_ttl)
    cfg["watcher_interval"] = "lazy" if config.watcher_interval is None else format_duration(config.watcher_interval)
    if config.providers:
        cfg["providers"] = [{"name": p.name, "retain_every_n_turns": p.retain_every_n_turns} for p in config.providers]
    if config.turn_latency != default.turn_latency:
        cfg["turn_latency"] = format_duration(config.turn_latency)
    return cfg


def scenario_document(scenario: Scenario) -> dict[str, Any]:
    """The scenario as plain data that `load_text` reads back to an equal scenario."""
    zone = ZoneInfo(scenario.zone)
    cfg = config_document(scenario.config)
    chats = {}
    for chat in scenario.chats:
        entry: dict[str, Any] = {"platform": chat.platform, "chat_type": chat.chat_type}
        if chat.user:
            entry["user"] = chat.user
        if chat.thread:
            entry["thread"] = chat.thread
        chats[chat.name] = entry
    events = []
    cursor = scenario.start
    for event in scenario.events:
        item: dict[str, Any]
        gap = event.t - cursor
        if isinstance(event, Advance):
            item = {"advance": format_duration(gap)} if gap > 0 else {"checkpoint": "advance"}
            events.append(item)
            cursor = event.t
            continue
        if isinstance(event, Message):
            item = {"message": event.chat}
            if event.text != "hello":
                item["text"] = event.text
            if event.muted:
                item["muted"] = True
        elif isinstance(event, Command):
            item = {"command": event.name, "chat": event.chat}
        elif isinstance(event, Delegate):
            item = {"delegate": event.chat}
        elif isinstance(event, (Sigterm, Crash, Restart)):
            item = {event.kind: True}
        elif isinstance(event, (DeleteSession, DeleteParent)):
            item = {event.kind: event.chat}
        elif isinstance(event, DbLocked):
            item = {"db_locked": format_duration(event.duration)}
        elif isinstance(event, BackendFail):
            item = {"backend_fail": event.provider, "for": format_duration(event.duration)}
        elif isinstance(event, Checkpoint):
            item = {"checkpoint": event.name}
        else:  # pragma: no cover - every event type is listed above
            raise TypeError(type(event).__name__)
        if gap:
            item["after"] = format_duration(gap)
        events.append(item)
        cursor = event.t
    document: dict[str, Any] = {
        "name": scenario.name,
        "seed": scenario.seed,
        "zone": scenario.zone,
        "start": from_ms(scenario.start, zone).strftime("%Y-%m-%dT%H:%M:%S"),
        "config": cfg,
        "chats": chats,
        "events": events,
    }
    if scenario.catches:
        document["catches"] = list(scenario.catches)
    return document


class _Dumper(yaml.SafeDumper):
    """Quotes every string that `_plain` would read back as a number (YAML 1.1 leaves '08' and '1e5' bare)."""


_Dumper.add_implicit_resolver("tag:yaml.org,2002:int", re.compile(rf"^(?:{_INT.pattern})$", re.ASCII), list("-+0123456789"))
_Dumper.add_implicit_resolver("tag:yaml.org,2002:float", re.compile(rf"^(?:{_FLOAT.pattern})$", re.ASCII), list("-+.0123456789"))


def dump_text(scenario: Scenario, header: str = "") -> str:
    """YAML text for a scenario, with `header` as its leading comment."""
    comment = "".join(f"# {line}\n" if line else "#\n" for line in header.splitlines())
    body = yaml.dump(scenario_document(scenario), Dumper=_Dumper, sort_keys=False, default_flow_style=None, width=100)
    return comment + body


def with_events(scenario: Scenario, events: tuple[Event, ...]) -> Scenario:
    """The same scenario with another timeline (turn ids are kept)."""
    return replace(scenario, events=events)


def config_from_document(document: dict[str, Any]) -> GatewayConfig:
    """The `config` mapping of a scenario document (as logged) back to a GatewayConfig."""
    return _config(_Fields("<log>", document, "config", 0))
