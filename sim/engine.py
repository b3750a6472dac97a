"""A discrete-event engine: a heap of (time, sequence, callback, args) on a virtual clock.

Ties are broken by insertion order, so one seed gives one run. Random streams are derived
from the seed by name (`rng("latency")`), so adding a new stream never shifts another's
draws, and nothing reads the global `random` module.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Callable
from heapq import heappop, heappush
from typing import Any

from sim.clock import VirtualClock


class EventBudgetExceeded(RuntimeError):
    """More events ran than the budget allows: something schedules work without end."""


def derive_seed(seed: int, name: str) -> int:
    """A stable 64-bit seed for the stream `name` of scenario seed `seed`."""
    digest = hashlib.sha256(f"{seed}/{name}".encode()).digest()
    return int.from_bytes(digest[:8], "big")


class Timer:
    """A handle to a scheduled callback; `cancel()` makes it a no-op when its time comes."""

    __slots__ = ("cancelled", "when")

    def __init__(self, when: int) -> None:
        self.when = when
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class Engine:
    """Runs callbacks in virtual-time order. `clock` is the only time anything reads."""

    def __init__(self, clock: VirtualClock, *, seed: int = 0, budget: int | None = None) -> None:
        self.clock = clock
        self.seed = seed
        self.budget = budget
        self.processed = 0
        self._queue: list[tuple[int, int, Callable[..., Any], tuple[Any, ...]]] = []
        self._seq = 0

    @property
    def now(self) -> int:
        return self.clock.now()

    def call_at(self, when: int, callback: Callable[..., Any], *args: Any) -> None:
        """Run `callback(*args)` at virtual time `when` (never in the past)."""
        now = self.clock.now()
        if when < now:
            when = now
        self._seq += 1
        heappush(self._queue, (when, self._seq, callback, args))

    def call_later(self, delay: int, callback: Callable[..., Any], *args: Any) -> None:
        self.call_at(self.clock.now() + delay, callback, *args)

    def timer(self, when: int, callback: Callable[..., Any], *args: Any) -> Timer:
        """Like `call_at`, with a handle that can cancel it."""
        handle = Timer(max(when, self.clock.now()))
        self.call_at(handle.when, _fire_unless_cancelled, handle, callback, args)
        return handle

    def peek(self) -> int | None:
        """The time of the next event, or None when the queue is empty."""
        return self._queue[0][0] if self._queue else None

    def step(self) -> bool:
        """Run the next event. False when there is none."""
        if not self._queue:
            return False
        when, _, callback, args = heappop(self._queue)
        self.clock.set(when)
        self.processed += 1
        if self.budget is not None and self.processed > self.budget:
            raise EventBudgetExceeded(f"event budget of {self.budget} exceeded")
        callback(*args)
        return True

    def run_until(self, until: int) -> None:
        """Run every event due at or before `until`, then leave the clock at `until`."""
        queue = self._queue
        clock = self.clock
        budget = self.budget
        while queue and queue[0][0] <= until:
            when, _, callback, args = heappop(queue)
            clock.set(when)
            self.processed += 1
            if budget is not None and self.processed > budget:
                raise EventBudgetExceeded(f"event budget of {budget} exceeded")
            callback(*args)
        if until > clock.now():
            clock.set(until)

    def run(self) -> None:
        """Run until the queue is empty."""
        while self.step():
            pass

    def rng(self, name: str) -> random.Random:
        """A random stream private to `name`, derived from the engine's seed."""
        return random.Random(derive_seed(self.seed, name))


def _fire_unless_cancelled(handle: Timer, callback: Callable[..., Any], args: tuple[Any, ...]) -> None:
    if not handle.cancelled:
        callback(*args)
