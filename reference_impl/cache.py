"""The agent cache: live agents by session, least recently used first.

Eviction is never a boundary (CONTRACT): the gateway flushes an agent's transcript and its
providers' buffers before dropping it, and ends nothing. The cap counts idle agents only;
an agent with a turn in flight is never evicted.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import islice
from operator import attrgetter
from typing import Any, overload

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


class Prompt(Sequence[str]):
    """An agent's texts as they are now, last one the user's (what the LLM is asked), read
    through its rows instead of copied: a copy per turn made every turn cost the length of its
    session. Later rows are not part of it."""

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


_busy = attrgetter("busy")


class AgentCache:
    """Live agents in use order, and a journal of what moved since the last report
    (`changes`): the gateway's `resources_delta` reads it instead of listing every agent."""

    def __init__(self, cap: int, idle_ttl: int) -> None:
        self.cap, self.idle_ttl = cap, idle_ttl
        # A plain dict in use order (re-inserted to move to the end): iterating it, as the cap
        # and the watcher do after every turn, costs a fraction of an OrderedDict's walk.
        self.agents: dict[str, Agent] = {}
        self.reported: dict[str, None] | None = None  # the sessions at the last report, in order (None: none yet)
        self.left: dict[str, bool] = {}  # session listed at the last report -> its flag then: each one moved or gone since

    def get(self, session: str) -> Agent | None:
        """The agent, moved to the end (asked a few times a turn: the journal's test inline)."""
        agent = self.agents.pop(session, None)
        if agent is not None:
            self.agents[session] = agent
            reported = self.reported
            if reported is not None and session in reported and session not in self.left:
                self.left[session] = agent.busy
        return agent

    def put(self, agent: Agent) -> None:
        old = self.agents.pop(agent.session, None)
        if old is not None:
            self._leaving(agent.session, old)
        self.agents[agent.session] = agent

    def pop(self, session: str) -> Agent | None:
        agent = self.agents.pop(session, None)
        if agent is not None:
            self._leaving(session, agent)
        return agent

    def _leaving(self, session: str, agent: Agent) -> None:
        if session not in self.left and self.reported is not None and session in self.reported:
            self.left[session] = agent.busy

    def rebase(self) -> None:
        """The cache as it is now has been reported: journal from here."""
        self.reported = dict.fromkeys(self.agents)
        self.left.clear()

    def changes(self) -> dict[str, Any] | None:
        """What changed since the last report, in the `resources` record's delta form and
        exactly as `conformance.observations` diffs two lists (drop, busy, idle, add), without
        walking the agents: every agent that moved or went is in `left`, and the others kept
        their place and their flag (the gateway flips a flag only on an agent it fetched for
        the step: `get` or `put`; the runner holds this to `resources()` every few samples).
        None when that cannot be said cheaply (no report yet, eight changes or more): the
        caller reports the whole state. Rebased when it answers."""
        reported, left, agents = self.reported, self.left, self.agents
        if reported is None:
            return None
        kept = len(reported) - len(left)
        if len(agents) - kept == 1 and len(left) <= 1:  # the usual step: one agent used, or one loaded
            agent = next(reversed(agents.values()))
            sid = agent.session
            if not left:
                reported[sid] = None
                return {"add": [[sid, agent.busy]]}
            was = left.get(sid)
            if was is not None:  # that agent, moved to the end
                left.clear()
                if next(reversed(reported)) == sid:
                    return {} if was == agent.busy else {"busy" if agent.busy else "idle": [sid]}
                del reported[sid]
                reported[sid] = None
                return {"add": [[sid, agent.busy]], "drop": [sid]}
        elif not left and kept == len(agents):
            return {}
        elif len(agents) - kept == 1 and len(left) == 2:  # one agent used or loaded, and one evicted
            return self._one_moved_two_left(next(reversed(agents.values())))
        moved = list(islice(reversed(agents.values()), len(agents) - kept))[::-1]  # at the end, in order
        rest = []  # those listed after the last agent that stayed in place: matched against the end, as the diff walks
        for sid in reversed(reported):  # a few steps from the end, not a walk of every agent
            if sid not in left:
                break
            rest.append(sid)
        rest.reverse()
        split = len(left) - len(rest)
        if split >= 8:
            return None
        drop = [sid for sid in left if sid not in rest]  # before it: gone or moved, in the order listed
        if split > 1:
            drop.sort(key=list(reported).index)  # a few, each found by a C scan
        changes = split
        busy: list[str] = []
        idle: list[str] = []
        i = j = 0
        while i < len(rest) and j < len(moved):
            sid, agent = rest[i], moved[j]
            if sid == agent.session:
                was = left[sid]
                j += 1
                if was == agent.busy:
                    i += 1
                    continue
                (idle if was else busy).append(sid)
            else:
                drop.append(sid)
            i += 1
            changes += 1
            if changes >= 8:
                return None
        drop += rest[i:]
        detail: dict[str, Any] = {}
        if j < len(moved):
            detail["add"] = [[a.session, a.busy] for a in moved[j:]]
        if drop:
            detail["drop"] = drop
        if busy:
            detail["busy"] = busy
        if idle:
            detail["idle"] = idle
        for sid in left:  # the agents listed now: those that stayed, then the ones moved to the end
            del reported[sid]
        for agent in moved:
            reported[agent.session] = None
        left.clear()
        return detail

    def _one_moved_two_left(self, agent: Agent) -> dict[str, Any]:
        """`changes` when one agent, `agent`, is at the end since the last report (used, or
        loaded) and two listed agents left their place (that one and one evicted, or two
        evicted): the walk's answer read off the last two sessions listed (a quarter of the
        samples of a busy day; `tests/test_agent_cache.py` holds every answer of `changes` to
        the runner's diff of the two listings)."""
        reported, left = self.reported, self.left
        assert reported is not None
        sid, busy = agent.session, agent.busy
        a, b = left
        ends = reversed(reported)
        last, before = next(ends), next(ends)  # two listed at least: both that left were
        detail: dict[str, Any]
        flipped = None
        if last not in left:  # both listed before the end: both dropped in the listed order, the agent added
            for listed in reported:  # the evicted one is usually listed first
                if listed == b:
                    a, b = b, a
                    break
                if listed == a:
                    break
            detail = {"add": [[sid, busy]], "drop": [a, b]}
        elif before not in left:  # the last listed left, and one before it
            if last == sid:
                detail, flipped = {"drop": [b if last == a else a]}, left[sid] != busy
            else:
                detail = {"add": [[sid, busy]], "drop": [b if last == a else a, last]}
        elif before == sid or last == sid:  # the last two listed left: the agent was one of them
            detail, flipped = {"drop": [last if before == sid else before]}, left[sid] != busy
        else:
            detail = {"add": [[sid, busy]], "drop": [before, last]}
        if flipped:
            detail["busy" if busy else "idle"] = [sid]
        del reported[a], reported[b]
        reported[sid] = None
        left.clear()
        return detail

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
        """The earliest last activity among idle agents (asked after most turns: a plain loop over
        the few agents; `min(..., default=None)` parses its keyword at every call, ≈ 5 times the loop's cost)."""
        oldest = None
        for agent in self.agents.values():
            if not agent.busy and (oldest is None or agent.last_activity < oldest):
                oldest = agent.last_activity
        return oldest

    def stale(self, now: int) -> list[Agent]:
        """Idle agents unused for longer than the idle TTL."""
        return [a for a in self.agents.values() if not a.busy and now - a.last_activity > self.idle_ttl]
