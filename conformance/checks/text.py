"""Words for evidence: how a check says what it saw, the same way in every check."""

from __future__ import annotations

from collections.abc import Sequence

from conformance.checks.model import RunModel, Segment
from sim.clock import MINUTE, format_duration

_CONTEXT = {
    "sigterm": "at sigterm",
    "crash": "at a crash",
    "restart": "at restart",
    "message": "when a message arrived",
    "command": "at a command",
    "delete_session": "at a row deletion",
}


def turn_list(turns: Sequence[str]) -> str:
    return "[" + ", ".join(turns) + "]"


def describe_time_context(m: RunModel, index: int) -> str:
    """' (at sigterm)' when the record follows an input at the same instant, else ''."""
    t = m.records[index].t
    for r in reversed(m.records[:index]):
        if r.t != t:
            break
        if r.kind in _CONTEXT and not r.d("final"):
            return f" ({_CONTEXT[r.kind]})"
        if r.kind == "sigterm":
            return " (at the final sigterm)"
        if r.kind == "note" and r.d("what") == "evict":
            return " (at an eviction)"
    return ""


def boundary_words(m: RunModel, seg: Segment) -> str:
    """Why the segment ends where it does, in the chat's policy terms."""
    policy = m.policy(seg.chat)
    if seg.reason == "new":
        return "/new"
    if seg.reason == "switch":
        return "/resume left it"
    if seg.reason == "idle":
        return f"idle {format_duration(policy.idle_minutes * MINUTE)} after the last user message at {m.at(seg.last_user)}"
    if seg.reason == "daily":
        extra = f", after {policy.daily_min_idle_minutes}m quiet" if policy.daily_min_idle_minutes else ""
        return f"daily at {policy.at_hour:02d}:00 {m.zone.key}{extra}; session began {m.at(seg.anchor)}"
    if policy.mode == "none":
        return "reset policy none"
    return f"{policy.mode} policy, last user message at {m.at(seg.last_user)}"
