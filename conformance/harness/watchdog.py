"""A wall-clock limit on each step of a gateway in this process: a call into the gateway that
has not returned after `limit` seconds is interrupted with `StepTimedOut`, the gateway's
`timeout` at that step, so a gateway that loops or blocks forever cannot hang the run and lose
its report. A gateway in a child process (exec:, --isolate) is timed by the child's own limit
and killed; an adapter whose steps legitimately take longer says so with a `STEP_TIMEOUT`
class attribute (seconds; None: not watched here).

One interval timer (SIGALRM) a run, ticking every limit/2 seconds, and no system call per
gateway call: `GatewayCalls._call` counts calls (`Watch.seq`) and how deep it is in them
(`Watch.depth`); a tick that finds the same call in progress as the two ticks before it
raises. So a step is interrupted after between `limit` and 1.5 × `limit` seconds. A run that
ends before its first tick (nearly every scenario) never sees the signal. A final snapshot
handed over through `durable_parts` (a long run's million rows) makes progress with each
session: each clears the strikes (`GatewayCalls._read_parts`), so the limit is a session's.

A gateway can catch `StepTimedOut` (`except BaseException`). If it then returns, the step is
still its timeout (`GatewayCalls._call` reads `Watch.interrupted`). If it goes on running the
same call for another `limit` (a retry loop that swallows everything), no exception can stop
it in this process: the tick calls `Watch.give_up`, which ends the process with the verdicts
and the report of what ran (`runner.when_stuck`) instead of hanging it for good. So does a
tick that finds a gateway call still running after sessiongate's own SIGINT/SIGTERM was
raised into the run (a gateway that caught that `Interrupted` too), and the ticks' backstop
thread when a call silenced SIGALRM itself (`_Backstop`).
"""

from __future__ import annotations

import inspect
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

DEFAULT_STEP_TIMEOUT = 10.0  # seconds a step may take, in process or in a child (`--step-timeout`)


class StepTimedOut(BaseException):
    """The step ran past the limit. A BaseException, so a gateway's own `except Exception`
    around the loop that hangs does not swallow it."""


class Watch:
    """What the ticks read: the number of calls begun, and how many are in progress."""

    __slots__ = ("alarm_lost", "depth", "give_up", "interrupted", "limit", "seen", "seq", "signum", "strikes", "ticks",
                 "what")

    def __init__(self) -> None:
        self.seq = self.depth = self.strikes = 0
        self.seen = self.interrupted = -1  # `interrupted`: the call StepTimedOut was raised into
        self.what = ""  # the call in progress (or the last one), as the log names it
        self.limit = 0.0  # the limit it was interrupted at
        self.signum = 0  # the SIGINT/SIGTERM whose `Interrupted` was raised into the run, if one was
        self.give_up: Callable[[float], object] | None = None  # the run's way out of a call that cannot be stopped
        self.alarm_lost: Callable[[float], object] | None = None  # ... of one whose ticks stopped coming (`_Backstop`)
        self.ticks = 0  # ticks so far (`_Backstop` counts its own half seconds between them)

    def tick(self, limit: float) -> None:
        """One tick: `StepTimedOut` if the call in progress is the one of the last two ticks;
        `give_up` if it is still the call that was interrupted so, a `limit` later, or if a call is
        still in progress after a signal's `Interrupted` was raised into the run."""
        self.ticks += 1
        if self.signum and self.depth and self.give_up is not None:
            self.give_up(limit)
        if self.depth and self.seq == self.seen:
            self.strikes += 1
            if self.strikes >= 2:
                self.strikes = 0
                if self.interrupted == self.seq and self.give_up is not None:
                    self.give_up(limit)  # does not return: the gateway caught the interrupt and went on
                self.interrupted, self.limit = self.seq, limit
                raise StepTimedOut(limit)
        else:
            self.seen, self.strikes = self.seq, 0


def limit_for(gateway: Any, default: float | None) -> float | None:
    """The gateway class's own `STEP_TIMEOUT` if it has one (read without running any of its
    code), else `default`."""
    own = inspect.getattr_static(type(gateway), "STEP_TIMEOUT", default)
    return own if own is None or (type(own) in (int, float) and own > 0) else default


@contextmanager
def watching(watch: Watch, limit: float | None) -> Iterator[None]:
    """Arm the ticks for one run: in the main thread only (where signals are delivered), and
    only while SIGALRM is nobody else's (its default handler, no interval timer running: a
    test runner's own timeout, say, is left alone)."""
    if not limit or threading.current_thread() is not threading.main_thread() or not hasattr(signal, "setitimer") \
            or signal.getsignal(signal.SIGALRM) is not signal.SIG_DFL or signal.getitimer(signal.ITIMER_REAL)[0]:
        yield
        return

    def tick(_signum: int, _frame: object) -> None:
        watch.tick(limit)

    previous = signal.signal(signal.SIGALRM, tick)
    signal.setitimer(signal.ITIMER_REAL, limit / 2, limit / 2)
    _Backstop.watch(watch, limit)
    try:
        yield
    finally:
        _Backstop.watch(None, 0.0)
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


_NAP = 0.5  # seconds between two looks of the backstop


class _Backstop:
    """The ticks' own watchdog: a gateway can ignore, block or cancel SIGALRM in a call and then
    loop there for good, and no tick comes to interrupt it. One daemon thread a process (started
    with the first watched run) looks every half second: the same call in progress, and no
    tick, for three limits ends the process through `Watch.alarm_lost` (the run's verdicts and
    report of what ran, as `give_up`). It counts its own sleeps, reading no clock (a gateway run
    under freezegun, as Hermes is, sees a virtual `time.monotonic`), and acts only on a hang."""

    current: tuple[Watch, float] | None = None
    thread: threading.Thread | None = None

    @classmethod
    def watch(cls, watch: Watch | None, limit: float) -> None:
        cls.current = (watch, limit) if watch is not None else None
        if watch is not None and cls.thread is None:
            cls.thread = threading.Thread(target=cls._loop, name="sessiongate-backstop", daemon=True)
            cls.thread.start()

    @classmethod
    def _loop(cls) -> None:
        seen, quiet = (-1, -1), 0  # (the call, the ticks) at the last look; half seconds since they moved
        while True:
            time.sleep(_NAP)
            current = cls.current
            if current is None:
                seen, quiet = (-1, -1), 0
                continue
            watch, limit = current
            now = (watch.seq, watch.ticks)
            if not watch.depth or now != seen:
                seen, quiet = now, 0
                continue
            quiet += 1
            if quiet * _NAP >= 3 * limit and watch.alarm_lost is not None:
                watch.alarm_lost(limit)  # does not return
