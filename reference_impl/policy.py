"""Routing keys and the reset policy: when a chat's session is past its boundary.

idle: expired iff now > last user message + idle_minutes.
daily: expired iff the session began before the most recent local `at_hour` boundary and,
  with `daily_min_idle_minutes`, the chat has been quiet that long (the cut is deferred,
  never skipped: seed 002).
"""

from __future__ import annotations

from heapq import heapify, heappop, heappush
from zoneinfo import ZoneInfo

from sim.clock import MINUTE, daily_boundary_at_or_before, next_daily_boundary_after
from sim.scenario import Chat, ResetPolicy


def chat_key(chat: Chat, profile: str = "default") -> str:
    """platform:chat_type:chat_id[:thread][:user]@profile — one routing entry per chat."""
    parts = [chat.platform, chat.chat_type, chat.platform_id]
    if chat.thread:
        parts.append(f"thread={chat.thread}")
    if chat.user:
        parts.append(f"user={chat.user}")
    return ":".join(parts) + f"@{profile}"


class ResetPolicyEvaluator:
    """Decides expiry from the routing entry's user-activity clock and the session's start."""

    def __init__(self, zone: ZoneInfo) -> None:
        self.zone = zone
        self._windows: dict[int, tuple[int, int]] = {}  # at_hour -> the last [boundary, next boundary)

    def _window(self, at_hour: int, t: int) -> tuple[int, int]:
        """The daily boundaries around `t`: the last at or before it, the first after it.
        Kept per hour, since consecutive questions almost always fall in the same day."""
        window = self._windows.get(at_hour)
        if window is None or not window[0] <= t < window[1]:
            boundary = daily_boundary_at_or_before(t, at_hour, self.zone)
            window = self._windows[at_hour] = (boundary, next_daily_boundary_after(boundary, at_hour, self.zone))
        return window

    def expiry_reason(self, policy: ResetPolicy, anchor: int | None, last_user: int | None, now: int) -> str | None:
        """'idle' or 'daily' when the entry is past a boundary at `now`, else None (the module
        docstring's two rules; asked at every turn)."""
        mode = policy.mode
        if last_user is None or anchor is None or mode == "none":
            return None
        if mode != "daily" and now > last_user + policy.idle_minutes * MINUTE:
            return "idle"
        if (mode != "idle" and anchor < self._window(policy.at_hour, now)[0]
                and now - last_user >= policy.daily_min_idle_minutes * MINUTE):
            return "daily"
        return None

    def expiry_instant(self, policy: ResetPolicy, anchor: int, last_user: int) -> int | None:
        """The first instant `expiry_reason` holds if no user message comes (None: never)."""
        mode = policy.mode  # asked after every turn of a watched chat: no list, no min() with a default
        idle = last_user + policy.idle_minutes * MINUTE + 1 if mode in ("idle", "both") else None
        if mode not in ("daily", "both"):
            return idle
        daily = max(self._window(policy.at_hour, anchor)[1], last_user + policy.daily_min_idle_minutes * MINUTE)
        return daily if idle is None or daily < idle else idle


class ExpiryQueue:
    """The live routes' expiry instants, earliest first, so the watcher finds its next tick
    without re-reading every route after every turn. A heap with lazy deletion: an entry
    counts only while it still matches its route's current instant."""

    def __init__(self) -> None:
        self.instants: dict[str, int] = {}  # chat key -> expiry instant of its live session
        self.heap: list[tuple[int, str]] = []

    def set(self, key: str, instant: int | None) -> None:
        if instant is None:
            self.instants.pop(key, None)
            return
        if self.instants.get(key) == instant:
            return
        self.instants[key] = instant
        heappush(self.heap, (instant, key))
        if len(self.heap) > 2 * len(self.instants) + 64:  # drop the stale entries
            self.heap = [(when, chat) for chat, when in self.instants.items()]
            heapify(self.heap)

    def earliest(self) -> int | None:
        heap, instants = self.heap, self.instants
        while heap and instants.get(heap[0][1]) != heap[0][0]:
            heappop(heap)
        return heap[0][0] if heap else None
