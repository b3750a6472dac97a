"""Observations: plain records of what crossed the boundary between harness and gateway.

The checks read nothing else: this log plus the final durable state. Every record has one
canonical serialization (sorted keys, no spaces), so two runs compare byte for byte.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

TURN_ID = re.compile(r"\[(t\d+)\]")


def turn_ids(text: str) -> tuple[str, ...]:
    """Every turn id carried in a text: '[t7] hello' -> ('t7',)."""
    return tuple(TURN_ID.findall(text))


def first_turn(text: str) -> str | None:
    match = TURN_ID.search(text)
    return match.group(1) if match else None


# Kinds of record. Inputs are what the harness did; the rest is what the gateway did,
# as seen by the harness's observers.
INPUT_KINDS = frozenset(
    {"scenario", "message", "command", "delegate", "advance", "sigterm", "crash", "restart",
     "delete_session", "delete_parent", "db_locked", "backend_fail", "checkpoint", "quiesce", "skipped"}
)
OUTPUT_KINDS = frozenset(
    {"llm_request", "reply", "sync_turn", "on_session_end", "on_session_switch", "memory_shutdown",
     "ingest", "ingest_failed", "on_session_finalize", "on_session_reset", "durable", "resources", "threads", "note",
     "error"}
)


@dataclass(frozen=True, slots=True)
class Obs:
    """One observation: at virtual time `t`, during scenario step `step`, `kind` happened."""

    t: int
    step: int
    kind: str
    chat: str | None = None
    session: str | None = None
    turns: tuple[str, ...] = ()
    detail: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> str:
        data: dict[str, Any] = {"t": self.t, "step": self.step, "kind": self.kind}
        if self.chat is not None:
            data["chat"] = self.chat
        if self.session is not None:
            data["session"] = self.session
        if self.turns:
            data["turns"] = list(self.turns)
        if self.detail:
            data["detail"] = self.detail
        return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)

    @staticmethod
    def from_json(line: str) -> Obs:
        data = json.loads(line)
        return Obs(
            t=data["t"],
            step=data["step"],
            kind=data["kind"],
            chat=data.get("chat"),
            session=data.get("session"),
            turns=tuple(data.get("turns", ())),
            detail=data.get("detail", {}),
        )

    def d(self, key: str, default: Any = None) -> Any:
        return self.detail.get(key, default)


class ObservationLog:
    """An append-only list of observations, stamped with the current time and step."""

    def __init__(self, now: Any) -> None:
        self._now = now  # a zero-argument callable returning virtual ms
        self.step = 0
        self.records: list[Obs] = []

    def add(self, kind: str, *, chat: str | None = None, session: str | None = None,
            turns: Iterable[str] = (), **detail: Any) -> Obs:
        record = Obs(self._now(), self.step, kind, chat, session, tuple(turns), detail)
        self.records.append(record)
        return record

    def __iter__(self) -> Iterator[Obs]:
        return iter(self.records)

    def __len__(self) -> int:
        return len(self.records)

    def of(self, *kinds: str) -> list[Obs]:
        return [r for r in self.records if r.kind in kinds]

    def dumps(self) -> str:
        return "".join(r.to_json() + "\n" for r in self.records)

    @staticmethod
    def loads(text: str) -> list[Obs]:
        return [Obs.from_json(line) for line in text.splitlines() if line]


@dataclass(frozen=True)
class StoredMessage:
    """One message row as the durable store holds it."""

    role: str
    content: str
    visibility: str = "visible"  # or "hidden" (a muted notification reply's rows)

    @property
    def turn(self) -> str | None:
        return first_turn(self.content)


@dataclass(frozen=True)
class StoredSession:
    id: str
    parent: str | None
    messages: tuple[StoredMessage, ...]


@dataclass(frozen=True)
class DurableState:
    """What survives the process: transcripts by session, and each chat's routing entry."""

    sessions: tuple[StoredSession, ...] = ()
    routing: tuple[tuple[str, str], ...] = ()  # (chat name, session id), sorted

    def to_detail(self) -> dict[str, Any]:
        """A compact, canonical form for the log: session -> [[role, turn, visibility], …]."""
        return {
            "sessions": {
                s.id: {"parent": s.parent, "rows": [[m.role, m.turn, m.visibility] for m in s.messages]}
                for s in sorted(self.sessions, key=lambda s: s.id)
            },
            "routing": {chat: sid for chat, sid in self.routing},
        }


@dataclass(frozen=True, slots=True)
class Resources:
    """What the gateway holds right now: cached agents (session, busy) and live tasks."""

    cached: tuple[tuple[str, bool], ...] = ()
    running: int = 0

    def to_detail(self) -> dict[str, Any]:
        return {"cached": [[sid, busy] for sid, busy in self.cached], "running": self.running}
