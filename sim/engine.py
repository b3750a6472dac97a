"""A discrete-event engine: callbacks queued by virtual time, run in (time, insertion) order.

The rules one seed's run depends on:

1. Callbacks run in time order. Callbacks due at the same millisecond run in the order they
   were queued, and one queued for the current instant (by a callback, or `call_later(0)`)
   joins the end of that instant's queue: it runs in this instant, after those already there.
2. Time never goes back: a callback queued for the past runs now; the clock only moves forward.
3. A scenario's events are not callbacks: the runner applies each one between callbacks, at its
   instant. `run_until(t)` runs every callback due at or before `t`, so an event applied after it
   comes *after* the timers due at its own instant (`order: after-timers`, the default, and the
   only order before scenario files could choose). `run_before(t)` runs only those due before
   `t` and leaves the clock at `t` with that instant's callbacks still queued, so an event
   applied then comes *before* them (`order: before-timers`); they run at the next
   `run_until`/`run_before` that reaches past `t`, behind anything the event queued for `t`
   by rule 1. Events at one instant are applied in file order, each after or before whatever
   callbacks are due then by its own `order` (docs/scenarios.md, *Same-instant orderings*).
4. "Timers" in rule 3 are every queued callback: a gateway's own timers (watcher ticks, sweeps,
   retries), the fake LLM's answers, and the harness's own (a crash point's `restart_after`,
   a store lock's last-instant check).

Ties are broken by insertion order, so one seed gives one run. The queue is a heap of the
distinct times that have events; each time maps to its one event, or to a first-in-first-out
deque once a second event shares the millisecond. A tie costs no heap entry, and insertion
order needs no counter.

Random streams are derived from the seed by name (`rng("latency")`), so adding a new
stream never shifts another's draws, and nothing reads the global `random` module.
"""

from __future__ import annotations

import hashlib
import math
import random
from collections import deque
from collections.abc import Callable
from heapq import heappop, heappush
from typing import Any

from sessiongate import SessiongateError
from sim.clock import VirtualClock

_Event = tuple[Callable[..., Any], tuple[Any, ...]]  # (callback, args)


class EventBudgetExceeded(SessiongateError, RuntimeError):
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
    """Runs callbacks in virtual-time order. `clock` is the only time anything reads.

    The hot paths read and advance `clock._now` directly instead of calling `now()` and
    `set()`: the queue never holds a time earlier than now, so time cannot go back.
    """

    def __init__(self, clock: VirtualClock, *, seed: int = 0, budget: int | None = None) -> None:
        self.clock = clock
        self.seed = seed
        self.budget = budget
        self.processed = 0
        self._times: list[int] = []  # a heap of the distinct times that have events
        self._events: dict[int, _Event | deque[_Event]] = {}  # one event, or a deque of ties

    @property
    def now(self) -> int:
        return self.clock.now()

    def call_at(self, when: int, callback: Callable[..., Any], *args: Any) -> None:
        """Run `callback(*args)` at virtual time `when` (never in the past)."""
        self.call_later(when - self.clock._now, callback, *args)

    def call_later(self, delay: int, callback: Callable[..., Any], *args: Any) -> None:
        """Run `callback(*args)` `delay` ms from now (a negative delay means now)."""
        when = self.clock._now + (delay if delay > 0 else 0)
        event = (callback, args)
        queued = self._events.setdefault(when, event)
        if queued is event:  # the first event at `when`
            heappush(self._times, when)
        elif type(queued) is tuple:
            self._events[when] = deque((queued, event))
        else:
            queued.append(event)

    def timer(self, when: int, callback: Callable[..., Any], *args: Any) -> Timer:
        """Like `call_at`, with a handle that can cancel it."""
        handle = Timer(max(when, self.clock.now()))
        self.call_at(handle.when, _fire_unless_cancelled, handle, callback, args)
        return handle

    def peek(self) -> int | None:
        """The time of the next event, or None when the queue is empty."""
        return self._times[0] if self._times else None

    def step(self) -> bool:
        """Run the next event. False when there is none."""
        times = self._times
        if not times:
            return False
        when = times[0]
        queued = self._events[when]
        if type(queued) is tuple:
            callback, args = queued
            del self._events[when]
            heappop(times)
        else:
            callback, args = queued.popleft()
            if not queued:
                del self._events[when]
                heappop(times)
        self.clock._now = when
        self.processed += 1
        if self.budget is not None and self.processed > self.budget:
            raise EventBudgetExceeded(f"event budget of {self.budget} exceeded")
        callback(*args)
        return True

    def run_until(self, until: int) -> None:
        """Run every event due at or before `until`, then leave the clock at `until`.

        The queue is consistent before every callback, so a callback may schedule (even at
        the current time), step the engine, or raise without losing or repeating events.
        The count of events run is kept locally and added to `processed` on the way out
        (a nested `step` adds its own), which saves an attribute write per event.
        """
        times = self._times
        events = self._events
        clock = self.clock
        left = math.inf if self.budget is None else self.budget - self.processed  # events the budget still allows
        ran = 0
        try:
            while times and times[0] <= until:
                when = times[0]
                clock._now = when
                queued = events[when]
                if type(queued) is tuple:  # the common case: the only event at `when`
                    del events[when]
                    heappop(times)
                    ran += 1
                    if ran > left:
                        raise EventBudgetExceeded(f"event budget of {self.budget} exceeded")
                    queued[0](*queued[1])
                    continue
                while queued:  # ties; events a callback adds at `when` join this deque in turn
                    callback, args = queued.popleft()
                    if not queued:
                        del events[when]
                        heappop(times)
                    ran += 1
                    if ran > left:
                        raise EventBudgetExceeded(f"event budget of {self.budget} exceeded")
                    callback(*args)
        finally:
            self.processed += ran
        if until > clock._now:
            clock._now = until

    def run_before(self, until: int) -> None:
        """Run every event due before `until`, then leave the clock at `until`: the events due
        at `until` itself stay queued (rule 3 of the module docstring: what the caller does now
        comes before them)."""
        self.run_until(until - 1)
        if until > self.clock._now:
            self.clock._now = until

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
