"""Virtual time for Hermes: freezegun pinned to the harness's clock, in the scenario's zone.

Hermes keeps session times as naive local `datetime.now()` (gateway/session.py:_now), so
`TZ` is the scenario's zone and freezegun's offset follows the zone's UTC offset at each
instant. The freeze is entered at each boot and left at each stop or crash (between two
generations the runner's own code sees real time), and moved before every adapter call.
"""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from sim.clock import VirtualClock


class FrozenClock:
    """freezegun pinned to the virtual clock, in the scenario's zone."""

    def __init__(self, clock: VirtualClock) -> None:
        self.clock = clock
        self._freezer: Any = None
        self._frozen: Any = None
        self._tz: str | None = None

    def enter(self) -> None:
        import freezegun

        cheapen_freezegun()
        self._tz = os.environ.get("TZ")
        os.environ["TZ"] = self.clock.zone.key
        time.tzset()
        self._freezer = freezegun.freeze_time(self._utc(), real_asyncio=True)
        self._frozen = self._freezer.start()
        self.sync()

    def _utc(self) -> datetime:
        return datetime(1970, 1, 1) + timedelta(milliseconds=self.clock.now())

    def sync(self) -> None:
        import freezegun.api

        self._frozen.move_to(self._utc())
        # freezegun's datetime drops `fold`, so the offset is computed with the real class:
        # on a fall-back day the second 02:30 must read +01:00, not +02:00.
        instant = freezegun.api.real_datetime(1970, 1, 1, tzinfo=UTC) + timedelta(milliseconds=self.clock.now())
        freezegun.api.tz_offsets[-1] = instant.astimezone(self.clock.zone).utcoffset()

    def exit(self) -> None:
        if self._freezer is None:
            return
        self._freezer.stop()
        self._freezer = self._frozen = None
        if self._tz is None:
            os.environ.pop("TZ", None)
        else:
            os.environ["TZ"] = self._tz
        time.tzset()


_scan_installed = False


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
