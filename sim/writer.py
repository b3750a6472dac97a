"""`Scenario` back to plain documents and YAML text (fuzz failures, shrunk scenarios, logs).

`sim.loader.load_text(dump_text(s))` gives back a scenario equal to `s`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import fields
from typing import Any
from zoneinfo import ZoneInfo

import yaml

from sessiongate.text import LIMIT, readable
from sim.clock import SECOND_PASS, format_duration, from_ms, load_zone
from sim.document import FLOAT_TEXT, INT_TEXT
from sim.kinds import covered
from sim.scenario import (
    AFTER_TIMERS,
    Advance,
    ConfigChange,
    CrashAt,
    GatewayConfig,
    Message,
    ResetPolicy,
    Restart,
    Scenario,
)


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
    cfg: dict[str, Any] = {"reset": "default" if config.reset_default else _policy_dict(config.reset)}
    if config.reset_by_platform:
        cfg["reset_by_platform"] = {name: _policy_dict(p) for name, p in config.reset_by_platform}
    if config.reset_by_chat_type:
        cfg["reset_by_chat_type"] = {name: _policy_dict(p) for name, p in config.reset_by_chat_type}
    cfg["cache_cap"] = config.cache_cap
    cfg["idle_ttl"] = format_duration(config.idle_ttl)
    cfg["watcher_interval"] = "lazy" if config.watcher_interval is None else format_duration(config.watcher_interval)
    if config.finalization_by_chat:
        cfg["finalization_by_chat"] = dict(config.finalization_by_chat)
    if config.providers:
        cfg["providers"] = [{"name": p.name, "retain_every_n_turns": p.retain_every_n_turns} for p in config.providers]
    if config.turn_latency != default.turn_latency:
        cfg["turn_latency"] = format_duration(config.turn_latency)
    if config.usage != default.usage:
        cfg["usage"] = config.usage
    return cfg


def change_document(change: ConfigChange) -> dict[str, Any]:
    """A restart's configuration change as its `config:` mapping (only the keys it gives)."""
    out: dict[str, Any] = {}
    if change.reset is not None:
        out["reset"] = _policy_dict(change.reset)
    if change.reset_by_platform is not None:
        out["reset_by_platform"] = {name: _policy_dict(p) for name, p in change.reset_by_platform}
    if change.reset_by_chat_type is not None:
        out["reset_by_chat_type"] = {name: _policy_dict(p) for name, p in change.reset_by_chat_type}
    return out


def start_text(t: int, zone: ZoneInfo) -> str:
    """`start:` as the loader reads it back to the same instant: milliseconds when there are
    any, and ' (2nd)' in the second pass of an hour a fall-back DST change repeats."""
    moment = from_ms(t, zone)
    text = moment.strftime("%Y-%m-%dT%H:%M:%S") + (f".{t % 1000:03d}" if t % 1000 else "")
    return text + (SECOND_PASS if moment.fold else "")


def _message(e: Message, gap: int) -> dict[str, Any]:
    item: dict[str, Any] = {"message": e.chat}
    if e.text != "hello":
        item["text"] = e.text
    if e.muted:
        item["muted"] = True
    if e.usage is not None:
        item["usage"] = e.usage
    return item


def _advance(e: Advance, gap: int) -> dict[str, Any]:
    return {"advance": format_duration(gap)} if gap > 0 else {"checkpoint": "advance"}


def _restart(e: Restart, gap: int) -> dict[str, Any]:
    item: dict[str, Any] = {"restart": True}
    if e.change is not None:
        item["config"] = change_document(e.change)
    return item


def _crash_at(e: CrashAt, gap: int) -> dict[str, Any]:
    item: dict[str, Any] = {"crash_at": {"point": e.point, "hit": e.hit}}
    if e.restart_after is not None:
        item["crash_at"]["restart_after"] = format_duration(e.restart_after)
    return item


_WRITERS: dict[str, Callable[[Any, int], dict[str, Any]]] = {
    # Each kind's item, as `sim.load_events` reads it back (`gap`: the time since the previous event).
    "message": _message,
    "command": lambda e, gap: {"command": e.name, "chat": e.chat},
    "delegate": lambda e, gap: {"delegate": e.chat},
    "advance": _advance,
    "sigterm": lambda e, gap: {"sigterm": True},
    "crash": lambda e, gap: {"crash": True},
    "restart": _restart,
    "delete_session": lambda e, gap: {"delete_session": e.chat},
    "delete_parent": lambda e, gap: {"delete_parent": e.chat},
    "db_locked": lambda e, gap: {"db_locked": format_duration(e.duration)},
    "backend_fail": lambda e, gap: {"backend_fail": e.provider, "for": format_duration(e.duration)},
    "backend_slow": lambda e, gap: {"backend_slow": e.provider, "for": format_duration(e.duration),
                                    "delay": format_duration(e.delay)},
    "checkpoint": lambda e, gap: {"checkpoint": e.name},
    "crash_at": _crash_at,
}
covered("write", _WRITERS)


def chats_document(scenario: Scenario) -> dict[str, Any]:
    """The scenario's chats as the plain `chats` mapping of a scenario file."""
    chats = {}
    for chat in scenario.chats:
        entry: dict[str, Any] = {"platform": chat.platform, "chat_type": chat.chat_type}
        if chat.user:
            entry["user"] = chat.user
        if chat.thread:
            entry["thread"] = chat.thread
        if chat.chat_id:
            entry["chat_id"] = chat.chat_id
        chats[chat.name] = entry
    return chats


def scenario_document(scenario: Scenario) -> dict[str, Any]:
    """The scenario as plain data that `load_text` reads back to an equal scenario."""
    zone = load_zone(scenario.zone)
    cfg = config_document(scenario.config)
    chats = chats_document(scenario)
    events = []
    cursor = scenario.start
    for event in scenario.events:
        gap = event.t - cursor
        item = _WRITERS[event.kind](event, gap)
        if gap and event.kind != "advance":  # an advance's own value is its gap
            item["after"] = format_duration(gap)
        if event.order != AFTER_TIMERS:  # the default is left out: files written before orders read alike
            item["order"] = event.order
        events.append(item)
        cursor = event.t
    document: dict[str, Any] = {
        "name": scenario.name,
        "seed": scenario.seed,
        "zone": scenario.zone,
        "start": start_text(scenario.start, zone),
        "config": cfg,
        "chats": chats,
        "events": events,
    }
    if scenario.catches:
        document["catches"] = list(scenario.catches)
    return document


class _Dumper(yaml.SafeDumper):
    """Quotes every string that `_plain` would read back as a number (YAML 1.1 leaves '08' and '1e5' bare)."""


_Dumper.add_implicit_resolver("tag:yaml.org,2002:int", re.compile(rf"^(?:{INT_TEXT.pattern})$", re.ASCII), list("-+0123456789"))
_Dumper.add_implicit_resolver("tag:yaml.org,2002:float", re.compile(rf"^(?:{FLOAT_TEXT.pattern})$", re.ASCII), list("-+.0123456789"))

HEADER_LINE = 4 * LIMIT  # characters of a header line: a `reproduce:` line (PYTHONPATH and all) stays whole


def dump_text(scenario: Scenario, header: str = "") -> str:
    """YAML text for a scenario, with `header` as its leading comment. The header quotes what a
    gateway said (a failure's message, its session ids): `readable` keeps every line of it a
    comment YAML reads (no control character, no lone surrogate, no line break of YAML's own) and
    cuts a line of megabytes."""
    header = readable(header, HEADER_LINE, lines=True)
    comment = "".join(f"# {line}\n" if line else "#\n" for line in header.splitlines())
    body = yaml.dump(scenario_document(scenario), Dumper=_Dumper, sort_keys=False, default_flow_style=None, width=100)
    return comment + body
