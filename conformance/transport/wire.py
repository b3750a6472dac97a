"""The JSON-lines wire form of the adapter protocol (docs/protocol.md), shared by both ends.

One canonical JSON object per line: sorted keys, no spaces, UTF-8. Version 1. Decoded answers
go through `conformance.harness.values`, the validators the runner applies in process.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

from conformance.adapter import Profile, policy_from_detail
from conformance.harness import values
from conformance.observations import DurableState, Resources, StoredMessage, StoredSession
from sim.scenario import Chat

VERSION = 2  # 2: crash points (the `crash_point` call, `crash_points` in the profile, `keys` on ingest)
VERSIONS = (1, 2)  # what the parent speaks: a v1 child declares no crash points and sends no keys


def dumps(obj: dict[str, Any]) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False) + "\n"


def chat_to_wire(chat: Chat) -> dict[str, Any]:
    """A chat as the wire carries it; `chat_id` only when given (lines without it read as before)."""
    wire = asdict(chat)
    if wire["chat_id"] is None:
        del wire["chat_id"]
    return wire


def chat_from_wire(data: dict[str, Any]) -> Chat:
    return Chat(**data)


def profile_from_wire(data: dict[str, Any]) -> Profile:
    if isinstance(data, dict) and isinstance(data.get("reset_default"), dict):  # the wire's plain form
        data = {**data, "reset_default": policy_from_detail(data["reset_default"])}
    return values.profile_from_fields(data)


def state_to_wire(state: DurableState) -> dict[str, Any]:
    return {
        "sessions": [
            {"id": s.id, "parent": s.parent, "messages": [[m.role, m.content, m.visibility] for m in s.messages]}
            for s in state.sessions
        ],
        "routing": [list(pair) for pair in state.routing],
    }


def state_from_wire(data: dict[str, Any]) -> DurableState:
    sessions = tuple(
        StoredSession(s["id"], s["parent"], tuple(StoredMessage(*m) for m in s["messages"])) for s in data["sessions"]
    )
    return values.durable_state(DurableState(sessions, tuple((chat, sid) for chat, sid in data["routing"])))


def resources_to_wire(resources: Resources) -> dict[str, Any]:
    return resources.to_detail()


def resources_from_wire(data: dict[str, Any]) -> Resources:
    return values.resources(Resources(data["cached"], data["running"]))
