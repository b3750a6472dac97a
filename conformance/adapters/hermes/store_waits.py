"""A Hermes process's writes against the scenario's store lock: SQLite's busy timeout and
`SessionDB._execute_write`'s jittered retries, waited out in virtual time."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable
from typing import Any

from conformance.adapter import Harness
from conformance.adapters.hermes import clock as hermes_clock
from conformance.adapters.hermes import seams


class WriterState(threading.local):
    """One thread's account of the lock it is waiting on (`Generation.lock_attempt`)."""

    offset = 0  # ms of lock waiting this (loop) thread has done at virtual time `base` without time passing
    base = -1
    owed = 0  # ms the next retry sleep waits before its jitter: the failed attempt's busy wait
    exact = False  # the lock ends within that wait: the retry comes at its end, with no jitter
    failures = 0  # attempts failed in a row (SessionDB._WRITE_MAX_RETRIES in all, where the release counts them)


class StoreWaits:
    """`Generation`'s side of the locked store (`seams._GatedConnection` asks it); it parks an
    agent thread with `timed_park`."""

    harness: Harness
    lock_until: Callable[[], int]
    writer: WriterState
    main_thread: int

    def timed_park(self, work: Any, until: int) -> None:  # `Generation.timed_park`
        raise NotImplementedError

    def lock_attempt(self, busy_ms: int) -> None:
        """A write starts (BEGIN IMMEDIATE) while the scenario may hold the lock. SQLite would
        wait up to the busy timeout: a lock ending within it lets the write through at its end,
        else the attempt fails after the whole wait. The wait is charged to the retry sleep
        that follows (outside `SessionDB._lock`, which a parked thread must not hold while
        virtual time passes); the last attempt has no sleep after it and fails (or lands) at once."""
        w = self._writer_state()
        now = self.harness.clock.now() + w.offset
        remaining = self.lock_until() - now
        w.owed, w.exact = 0, False
        if remaining <= 0:
            w.failures = 0
            return
        retries = self._retries()
        if retries is not None and w.failures >= retries - 1:  # the last attempt
            w.failures = 0
            if remaining <= busy_ms:
                return  # it would have landed inside this wait, up to busy_ms later
            raise sqlite3.OperationalError("database is locked")
        w.failures += 1
        w.owed, w.exact = (remaining, True) if remaining <= busy_ms else (busy_ms, False)
        raise sqlite3.OperationalError("database is locked")

    def retry_sleep(self, seconds: float) -> None:
        """`_execute_write`'s backoff: the failed attempt's busy wait, then its jitter, in virtual time."""
        w = self._writer_state()
        wait = w.owed if w.exact else w.owed + round(seconds * 1000)
        w.owed, w.exact = 0, False
        self.pass_time(wait)

    def pass_time(self, ms: int) -> None:
        """An agent thread parks until the harness's clock has moved `ms` on, so its write lands
        at the right virtual time (and its reply after it). Code on the loop thread cannot wait
        for the clock it is driving: its waits add up, and move the monotonic clocks its
        patience deadlines read, so the retries end as Hermes's would, but what it writes lands
        at once."""
        work = seams.OWNER.get()
        if work is not None and work.kind == "message" and threading.get_ident() != self.main_thread \
                and threading.current_thread().name != seams.REVIEW_THREAD:
            self.timed_park(work, self.harness.clock.now() + ms)
        else:
            self._writer_state().offset += ms
            hermes_clock.sleep(ms / 1000)

    def _writer_state(self) -> WriterState:
        w = self.writer
        if w.base != self.harness.clock.now():  # time has moved on since its last wait
            w.base, w.offset = self.harness.clock.now(), 0
        return w

    def _retries(self) -> int | None:
        """How many attempts a write makes (upstream's `SessionDB._WRITE_MAX_RETRIES`); None for a
        release that gives up on a deadline instead (the forks' `_WRITE_PATIENCE_S`, checked against
        `time.monotonic` in `SessionDB._sleep_before_write_retry`): its attempts fail until the lock
        ends or the deadline passes."""
        import hermes_state

        retries = getattr(hermes_state.SessionDB, "_WRITE_MAX_RETRIES", None)
        return None if retries is None else int(retries)
