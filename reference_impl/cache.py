"""The agent cache: live agents by session, least recently used first.

Eviction is never a boundary (CONTRACT): the gateway flushes an agent's transcript and its
providers' buffers before dropping it, and ends nothing. The cap counts idle agents only;
an agent with a turn in flight is never evicted.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import filterfalse
from operator import attrgetter
from typing import overload

from reference_impl.store import Row


@dataclass(slots=True)
class Agent:
    """A session's live state: its transcript in memory and how much of it is durable."""

    session: str
    chat: str
    chat_key: str
    kind: str = "chat"  # or "delegate"
    parent: str | None = None
    rows: list[Row] = field(default_factory=list)
    flushed: int = 0  # rows[:flushed] are in the store
    created: bool = False  # the row is believed to exist (re-checked on a foreign-key failure)
    replay_pending: bool = False  # the row was recreated: the whole transcript must be written
    last_activity: int = 0
    busy: bool = False

    @property
    def dirty(self) -> bool:
        return self.replay_pending or self.flushed < len(self.rows)

    def prompt(self) -> Prompt:
        """The session's texts, last one the user's: what the LLM is asked."""
        return Prompt(self.rows)


class Prompt(Sequence[str]):
    """An agent's texts as they are now, read through its rows instead of copied: a copy per
    turn made every turn cost the length of its session. Later rows are not part of it."""

    __slots__ = ("_length", "_rows")

    def __init__(self, rows: list[Row]) -> None:
        self._rows, self._length = rows, len(rows)

    def __len__(self) -> int:
        return self._length

    @overload
    def __getitem__(self, index: int) -> str: ...
    @overload
    def __getitem__(self, index: slice) -> list[str]: ...
    def __getitem__(self, index: int | slice) -> str | list[str]:
        if isinstance(index, slice):
            return [row.content for row in self._rows[: self._length][index]]
        if index < 0:
            index += self._length
        if not 0 <= index < self._length:
            raise IndexError("prompt index out of range")
        return self._rows[index].content


_busy, _last_activity = attrgetter("busy"), attrgetter("last_activity")


class AgentCache:
    def __init__(self, cap: int, idle_ttl: int) -> None:
        self.cap, self.idle_ttl = cap, idle_ttl
        # A plain dict in use order (re-inserted to move to the end): iterating it, as the cap
        # and the watcher do after every turn, costs a fraction of an OrderedDict's walk.
        self.agents: dict[str, Agent] = {}

    def get(self, session: str) -> Agent | None:
        agent = self.agents.pop(session, None)
        if agent is not None:
            self.agents[session] = agent
        return agent

    def put(self, agent: Agent) -> None:
        self.agents.pop(agent.session, None)
        self.agents[agent.session] = agent

    def pop(self, session: str) -> Agent | None:
        return self.agents.pop(session, None)

    def over_cap(self) -> list[Agent]:
        """Idle agents past the cap, least recently used first (asked after every turn: the
        count of busy agents is a C loop, and the walk stops at the last one to evict)."""
        excess = len(self.agents) - self.cap
        if excess <= 0:
            return []
        excess -= sum(map(_busy, self.agents.values()))
        if excess <= 0:
            return []
        out: list[Agent] = []
        for agent in self.agents.values():
            if not agent.busy:
                out.append(agent)
                if len(out) == excess:
                    break
        return out

    def oldest_idle_activity(self) -> int | None:
        """The earliest last activity among idle agents (asked after most turns: C loops only)."""
        return min(map(_last_activity, filterfalse(_busy, self.agents.values())), default=None)

    def stale(self, now: int) -> list[Agent]:
        """Idle agents unused for longer than the idle TTL."""
        return [a for a in self.agents.values() if not a.busy and now - a.last_activity > self.idle_ttl]
