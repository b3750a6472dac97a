"""Hermes's own state and settings in the contract's terms: state.db and its routing index read
as another surface would, a cached agent's session, the watcher interval and reset policies."""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from conformance.adapters.hermes import home as hermes_home
from conformance.observations import DurableState, StoredMessage, StoredSession
from sim.clock import SECOND
from sim.scenario import RESET_MODES, Chat, GatewayConfig, ResetPolicy

WATCHER_INTERVAL = 300 * SECOND  # gateway/run.py:_session_expiry_watcher(interval=300), what start() passes


def durable_state(chat_by_key: dict[str, Chat]) -> DurableState:
    """state.db read directly, as another surface would: user/assistant rows in order,
    and the routing index (`gateway_routing`) mapped back to chat names."""
    path = hermes_home.home() / "state.db"
    if not path.exists():
        return DurableState()
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        columns = {row[1] for row in con.execute("PRAGMA table_info(messages)")}
        visibility = "visibility" if "visibility" in columns else "'visible'"
        sessions = []
        for sid, parent in con.execute("SELECT id, parent_session_id FROM sessions ORDER BY started_at, id").fetchall():
            rows = con.execute(
                f"SELECT role, content, {visibility} FROM messages WHERE session_id = ? "
                "AND role IN ('user', 'assistant') ORDER BY id", (sid,)).fetchall()
            messages = tuple(StoredMessage(role, content or "", vis or "visible") for role, content, vis in rows)
            sessions.append(StoredSession(sid, parent, messages))
        routing = []
        for key, entry in _routing_entries(con):
            chat, session = chat_by_key.get(key), entry.get("session_id")
            if chat is not None and session:
                routing.append((chat.name, session))
    finally:
        con.close()
    return DurableState(tuple(sessions), tuple(sorted(routing)))


def watcher_interval(config: GatewayConfig) -> int:
    """The scenario's watcher interval, as `_session_expiry_watcher(interval=N)` takes it (whole
    seconds, at least 1); `lazy`: Hermes's own 300 s (it has no lazy mode)."""
    if config.watcher_interval is None:
        return WATCHER_INTERVAL
    return max(SECOND, config.watcher_interval // SECOND * SECOND)


def release_default_policy() -> ResetPolicy:
    """The installed release's default reset policy: what `load_gateway_config()` keeps when
    config.yaml has no `session_reset` (gateway/config.py:GatewayConfig.default_reset_policy,
    a `SessionResetPolicy()`; 'none' from 0.18.1, 'both' before)."""
    hermes_home.home()  # HERMES_HOME before the first Hermes import: Hermes binds paths at import
    from gateway.config import GatewayConfig as HermesConfig

    return default_policy_of(HermesConfig())


def default_policy_of(config: Any) -> ResetPolicy:
    """The policy a Hermes `GatewayConfig` applies where config.yaml has no `session_reset`: its
    `default_reset_policy`; none where the release has no timed resets (the iot fork has no such
    field: core "reads nothing under session_reset", hermes_cli/session_reset_retirement.py)."""
    policy = getattr(config, "default_reset_policy", None)
    return ResetPolicy() if policy is None else contract_policy(policy)


def contract_policy(policy: Any) -> ResetPolicy:
    """A Hermes `SessionResetPolicy` in the contract's terms (it has no daily_min_idle_minutes)."""
    if policy.mode not in RESET_MODES:
        raise NotImplementedError(f"Hermes's reset mode {policy.mode!r} has no contract equivalent")
    return ResetPolicy(policy.mode, int(policy.idle_minutes), int(policy.at_hour))


def _routing_entries(con: sqlite3.Connection) -> list[tuple[str, dict[str, Any]]]:
    """Hermes's durable routing index: state.db's `gateway_routing` table (0.18.1 on), else
    the `sessions/sessions.json` file SessionStore._save writes (0.13.0-0.18.0)."""
    if con.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'gateway_routing'").fetchone():
        return [(key, json.loads(entry)) for key, entry in
                con.execute("SELECT session_key, entry_json FROM gateway_routing").fetchall()]
    index = hermes_home.home() / "sessions" / "sessions.json"
    entries = json.loads(index.read_text(encoding="utf-8")) if index.exists() else {}
    return [(key, entry) for key, entry in entries.items() if not key.startswith("_")]  # '_README' (0.18.0)


def cached_session(entry: Any) -> str:
    if isinstance(entry, tuple):
        return str(entry[3] if len(entry) > 3 else entry[0].session_id)
    return str(entry.session_id)
