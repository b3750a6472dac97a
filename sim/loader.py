"""Scenario files (YAML, safe subset, or JSON) to `Scenario`.

Every error is a `ScenarioError` naming file, line and field, e.g.
`catalog/x.yaml:12: events[3].advance: expected a positive duration like '61m', got '-5m'`.
Unknown keys are errors (`event: unknown key (did you mean 'events'?)`, at the unknown key's
line, also when a required key is missing beside it); so are oversized timelines and times
outside the years 1970 to 8999. `sim.document` reads the text; this module types it, its sections in `sim.load_config`
(`config`, `chats`) and `sim.load_events` (`events`), their fields read by `sim.fields`;
`sim.writer` writes it back.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfoNotFoundError

from sim.clock import load_zone
from sim.document import MAX_FILE_BYTES, LocatedList, ScenarioError, parse_document, show
from sim.fields import _at_least, _Fields
from sim.load_config import _chats, _check_finalization_chats, _config
from sim.load_events import END_OF_TIME, LAST_YEAR, _events, _instant
from sim.scenario import GatewayConfig, Scenario, max_horizon

# Every key a scenario document may hold at its top level (`name` and `events` required).
TOP_KEYS = ("name", "seed", "zone", "start", "config", "chats", "events", "catches")


def load_text(text: str, source: str = "<scenario>") -> Scenario:
    """Parse and type one scenario document. Raises ScenarioError only."""
    data = parse_document(text, source)
    f = _Fields(source, data, "", 1, TOP_KEYS)
    name = f.get("name", "str")
    absent = [key for key in ("name", "events") if not f.has(key)]  # both looked for: `event:` is named as 'events' misspelt
    if absent:
        raise f.missing(absent[0])
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
    events, chats = _events(f.raw("events"), source, f.line_of("events"), zone, start, chats, implicit, {p.name for p in config.providers})
    _check_finalization_chats(f, config, chats)
    if max((event.t for event in events), default=start) + max_horizon(config, events) >= END_OF_TIME:
        raise f.error("config", f"its idle times and intervals run the timeline past the year {LAST_YEAR}")
    f.raw("catches")  # zoo metadata: the variants this scenario exists to catch
    catches = f.data.get("catches")
    if catches is not None and not isinstance(catches, list):
        raise f.error("catches", f"expected a list of variant names, got {show(catches)}")
    for index, variant in enumerate(catches or ()):
        if not isinstance(variant, str):  # the item at fault, on its own line
            line = catches.lines[index] if isinstance(catches, LocatedList) else f.line_of("catches")
            raise ScenarioError(source, line, f"catches[{index}]", f"expected a variant name, got {show(variant)}")
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
