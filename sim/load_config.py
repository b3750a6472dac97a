"""The `config` and `chats` sections of a scenario file (and a restart's `config:`), typed."""

from __future__ import annotations

import re
from collections.abc import Iterable

from sim.document import LocatedList, ScenarioError, show
from sim.fields import _at_least, _between, _Fields, _lowercase_name, _one_of, _usage
from sim.scenario import (
    CHANGEABLE_AT_RESTART,
    CHAT_TYPES,
    FINALIZATIONS,
    PLATFORMS,
    RESET_MODES,
    Chat,
    ConfigChange,
    Finalization,
    GatewayConfig,
    ProviderSpec,
    ResetPolicy,
)

PROVIDER_KEYS = ("name", "retain_every_n_turns")  # `name` required


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
    """Every chat `config.finalization_by_chat` names is a chat of the scenario."""
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
            p = _Fields(f.source, item, f"{f.name('providers')}[{index}]", line, PROVIDER_KEYS)
            name = p.get("name", "str", check=_lowercase_name)
            if name is None:
                raise p.missing("name")
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

