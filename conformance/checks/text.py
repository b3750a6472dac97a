"""Words for evidence: how a check says what it saw, the same way in every check."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from conformance.checks.model import NEVER, RunModel, Segment, Turn
from conformance.observations import Obs
from sim.clock import MINUTE, format_duration

_CONTEXT = {
    "sigterm": "at sigterm",
    "crash": "at a crash",
    "restart": "at restart",
    "message": "when a message arrived",
    "command": "at a command",
    "delete_session": "at a row deletion",
    "delete_parent": "at a parent row deletion",
}
_NEAR = 64


class SnapshotLabel:
    """A snapshot's name in a violation, "snapshot 'final' (09:00)": written when first shown
    (a local time costs more than a check's look at a snapshot that holds no violation)."""

    __slots__ = ("m", "snap", "text")

    def __init__(self, m: RunModel, snap: Obs) -> None:
        self.m, self.snap, self.text = m, snap, ""

    def __format__(self, spec: str) -> str:
        if not self.text:
            self.text = f"snapshot '{self.snap.d('label')}' ({self.m.at(self.snap.t)})"
        return format(self.text, spec)


class Words:
    """Words of a violation written only if one is: `make()`'s text, made when first shown."""

    __slots__ = ("make", "text")

    def __init__(self, make: Callable[[], str]) -> None:
        self.make, self.text = make, None

    def __format__(self, spec: str) -> str:
        if self.text is None:
            self.text = self.make()
        return format(self.text, spec)


def turn_list(turns: Sequence[str]) -> str:
    return "[" + ", ".join(turns) + "]"


def describe_time_context(m: RunModel, index: int) -> str:
    """' (at sigterm)' when the record follows an input at the same instant, else ''.

    An eviction of the record's own session at the same instant (the gateway's note,
    before or after the record) names the eviction. Looks at most `_NEAR` records away."""
    records, record = m.records, m.records[index]
    before = [records[j] for j in range(index - 1, max(index - _NEAR, 0) - 1, -1)]
    before = before[: next((k for k, r in enumerate(before) if r.t != record.t), len(before))]
    after = [records[j] for j in range(index + 1, min(index + _NEAR, len(records)))]
    after = after[: next((k for k, r in enumerate(after) if r.t != record.t), len(after))]
    if record.session and any(
        r.kind == "note" and r.d("what") == "evict" and r.session == record.session for r in before + after
    ):
        return " (at an eviction)"
    for r in before:
        if r.kind == "sigterm" and r.d("final"):
            return " (at the final sigterm)"
        if r.kind in _CONTEXT:
            return f" ({_CONTEXT[r.kind]})"
    return ""


def at_times(m: RunModel, indexes: Sequence[int]) -> str:
    """'10:04 (at an eviction) and 14:00': when the records happened, in context."""
    return " and ".join(f"{m.at(m.records[i].t)}{describe_time_context(m, i)}" for i in indexes)


def boundary_words(m: RunModel, seg: Segment) -> str:
    """Why the segment ends where it does, in the chat's policy terms."""
    policy = m.policy(seg.chat, NEVER if seg.boundary is None else seg.boundary)  # none reached: the last in force
    if seg.reason == "new":
        return seg.command
    if seg.reason == "switch":
        return "/resume left it"
    if seg.reason == "idle":
        # A resumed life's idle clock starts at the /resume; say so when no message came since.
        since = ("the /resume" if seg.resumes is not None and not any(t.arrival == seg.last_user for t in seg.turns)
                 else "the last user message")
        return f"idle {format_duration(policy.idle_minutes * MINUTE)} after {since} at {m.at(seg.last_user)}"
    if seg.reason == "daily":
        extra = f", after {policy.daily_min_idle_minutes}m quiet" if policy.daily_min_idle_minutes else ""
        return f"daily at {policy.at_hour:02d}:00 {m.zone.key}{extra}; session began {m.at(seg.anchor)}"
    if policy.mode == "none":
        return "reset policy none"
    return f"{policy.mode} policy, last user message at {m.at(seg.last_user)}"


def abandoned_words(m: RunModel, turn: Turn) -> str:
    """How a turn that was never acknowledged ended: 'abandoned by /stop at 09:01:10',
    'interrupted by the sigterm at 09:05:30'."""
    if turn.stopped is not None:
        return f"abandoned by /stop at {m.at(turn.stopped[0])}"
    t, index = turn.done
    if 0 <= index < len(m.records) and m.records[index].kind in ("sigterm", "crash"):
        stop = m.records[index]
        return f"interrupted by the {'final ' if stop.d('final') else ''}{stop.kind} at {m.at(stop.t)}"
    if turn.ended_by == "dropped":
        return f"dropped: the LLM had answered by {m.at(t)} and no reply followed"
    return "never answered"
