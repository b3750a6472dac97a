"""Virtual time: integer milliseconds since the Unix epoch, shown in the scenario's zone.

Nothing in sessiongate reads the machine's clock. The simulator owns one `VirtualClock`
and moves it forward; gateways read it. Third-party gateways that call `datetime.now()`
or `time.time()` themselves are pinned to virtual time with `FreezegunBridge`.
"""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, timedelta
from functools import cache, lru_cache
from importlib import metadata, resources
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

TZDATA = metadata.version("tzdata")  # the one tz database of every run, recorded in each log's header
_ZONE_NAME = re.compile(r"[A-Za-z0-9_+-]+(/[A-Za-z0-9_+-]+)*")


@cache
def load_zone(name: str) -> ZoneInfo:
    """The IANA zone `name` from the pinned `tzdata` package alone. `ZoneInfo(name)` reads the
    system's tz database first, which differs between machines (and with it a run's DST rules);
    ZoneInfoNotFoundError if the package has no such zone."""
    if not _ZONE_NAME.fullmatch(name):
        raise ZoneInfoNotFoundError(f"No time zone found with key {name}")
    try:
        with resources.files("tzdata.zoneinfo").joinpath(*name.split("/")).open("rb") as data:
            return ZoneInfo.from_file(data, key=name)
    except (OSError, ValueError):  # no such file, a folder like 'America', not a tz file
        raise ZoneInfoNotFoundError(f"No time zone found with key {name}") from None


MS = 1
SECOND = 1000
MINUTE = 60 * SECOND
HOUR = 60 * MINUTE
DAY = 24 * HOUR

_UNITS = {"ms": MS, "s": SECOND, "m": MINUTE, "h": HOUR, "d": DAY}
_DURATION = re.compile(r"(\d+)(ms|s|m|h|d)", re.ASCII)


def parse_duration(text: str) -> int:
    """'90s', '61m', '25h', '2d', '1h30m', '500ms' -> milliseconds. Raises ValueError."""
    if not isinstance(text, str) or not text:
        raise ValueError("expected a duration like '61m'")
    pos, total = 0, 0
    for match in _DURATION.finditer(text):
        if match.start() != pos:
            break
        total += int(match.group(1)) * _UNITS[match.group(2)]
        pos = match.end()
    if pos != len(text):
        raise ValueError("expected a duration like '61m'")
    return total


def format_duration(ms: int) -> str:
    """An exact spelling of a duration, largest unit first: 3_660_000 -> '1h1m'; negatives get a '-'."""
    if ms == 0:
        return "0s"
    if ms < 0:
        return "-" + format_duration(-ms)
    parts = []
    for unit, size in (("d", DAY), ("h", HOUR), ("m", MINUTE), ("s", SECOND), ("ms", MS)):
        if ms >= size:
            count, ms = divmod(ms, size)
            parts.append(f"{count}{unit}")
    return "".join(parts)


def to_ms(moment: datetime) -> int:
    """An aware datetime -> epoch milliseconds (exact, no float)."""
    delta = moment - datetime(1970, 1, 1, tzinfo=UTC)
    return delta.days * DAY + delta.seconds * SECOND + delta.microseconds // 1000


def from_ms(ms: int, zone: ZoneInfo) -> datetime:
    """Epoch milliseconds -> an aware datetime in `zone`."""
    return (datetime(1970, 1, 1, tzinfo=UTC) + timedelta(milliseconds=ms)).astimezone(zone)


@lru_cache(maxsize=4096)
def local_instant(day: date, hour: int, minute: int, zone: ZoneInfo) -> int:
    """The instant the local wall clock in `zone` first reads `hour:minute` on `day`.

    On a spring-forward day a skipped wall time maps to the transition instant (02:30 in
    Berlin on 2026-03-29 is 03:00 CEST); on a fall-back day the first of the two
    occurrences is taken. Both follow from fold=0, which zoneinfo resolves with the
    offset in force before the transition.
    """
    wall = datetime(day.year, day.month, day.day, hour, minute, tzinfo=zone, fold=0)
    instant = to_ms(wall)
    # A skipped wall time resolved with the pre-transition offset lands after the
    # transition; the boundary is the transition itself, where the clock jumps past it.
    if from_ms(instant, zone).replace(tzinfo=None) != wall.replace(tzinfo=None):
        midnight = to_ms(datetime(day.year, day.month, day.day, tzinfo=zone))
        lo, hi = midnight, instant
        while hi - lo > MINUTE:  # the transition lies in (lo, hi]; bisect to the minute
            mid = (lo + hi) // 2 // MINUTE * MINUTE
            if mid <= lo:
                break
            if from_ms(mid, zone).replace(tzinfo=None) < wall.replace(tzinfo=None):
                lo = mid
            else:
                hi = mid
        instant = hi
    return instant


SECOND_PASS = " (2nd)"  # how files and timelines name the second pass of a wall time a fall-back DST change repeats


def repeated_instant(day: date, hour: int, minute: int, zone: ZoneInfo) -> int | None:
    """The second instant the wall clock in `zone` reads `hour:minute` on `day`, when a
    fall-back change repeats it (fold=1: the offset in force after the transition); None when
    that wall time happens once (or never: a spring-forward gap)."""
    wall = datetime(day.year, day.month, day.day, hour, minute, tzinfo=zone, fold=1)
    instant = to_ms(wall)
    if instant == local_instant(day, hour, minute, zone):
        return None
    shown = from_ms(instant, zone)
    return instant if shown.replace(tzinfo=None) == wall.replace(tzinfo=None) and shown.fold else None


def daily_boundary_at_or_before(t: int, at_hour: int, zone: ZoneInfo) -> int:
    """The most recent local `at_hour:00` boundary at or before instant `t` (DST-correct)."""
    day = from_ms(t, zone).date()
    boundary = local_instant(day, at_hour, 0, zone)
    if boundary > t:
        boundary = local_instant(day - timedelta(days=1), at_hour, 0, zone)
    return boundary


def next_daily_boundary_after(t: int, at_hour: int, zone: ZoneInfo) -> int:
    """The first local `at_hour:00` boundary strictly after instant `t`."""
    day = from_ms(t, zone).date()
    for offset in range(3):
        boundary = local_instant(day + timedelta(days=offset), at_hour, 0, zone)
        if boundary > t:
            return boundary
    raise AssertionError("unreachable: a boundary occurs every calendar day")


class VirtualClock:
    """The simulation's only clock. Wall time is zone-aware; monotonic time is separate.

    sim.engine.Engine reads and advances `_now` directly on its hot path, so `set()` must
    stay a plain checked assignment: give it side effects and the engine must call it.
    """

    __slots__ = ("_now", "_origin", "zone")

    def __init__(self, start_ms: int, zone: str | ZoneInfo = "UTC") -> None:
        self._now = start_ms
        self._origin = start_ms
        self.zone = zone if isinstance(zone, ZoneInfo) else load_zone(zone)

    def now(self) -> int:
        """Virtual epoch milliseconds."""
        return self._now

    def wall(self) -> datetime:
        """Virtual local time in the scenario's zone."""
        return from_ms(self._now, self.zone)

    def monotonic(self) -> float:
        """Seconds since the simulation started; never affected by wall-clock zones or DST."""
        return (self._now - self._origin) / SECOND

    def set(self, t: int) -> None:
        """Move time forward to `t`. Only the simulator calls this."""
        if t < self._now:
            raise ValueError(f"virtual time cannot go back: {t} < {self._now}")
        self._now = t

    def format(self, t: int | None = None) -> str:
        """Short local rendering for people: '10:04' on the start day, else '2026-03-30 10:04'."""
        moment = from_ms(self._now if t is None else t, self.zone)
        start = from_ms(self._origin, self.zone)
        if moment.date() == start.date():
            return moment.strftime("%H:%M:%S" if moment.second else "%H:%M")
        return moment.strftime("%Y-%m-%d %H:%M:%S" if moment.second else "%Y-%m-%d %H:%M")


class FreezegunBridge:
    """Pins `datetime.now()`, `time.time()` and friends to virtual time for third-party code.

    Enter once per scenario (entering costs milliseconds); call `sync()` before each
    step the gateway takes so its reads match the virtual clock (moving costs microseconds).
    """

    def __init__(self, clock: VirtualClock, *, tick: bool = False) -> None:
        self.clock = clock
        self._tick = tick
        self._freezer = None
        self._frozen = None

    def __enter__(self) -> FreezegunBridge:
        import freezegun  # imported here: only gateways that read the real clock need it

        # sim.clock keeps the real datetime: freezegun's drops `fold`, which zone math needs.
        self._freezer = freezegun.freeze_time(
            from_ms(self.clock.now(), UTC), tick=self._tick, real_asyncio=True, ignore=["sim.clock"]
        )
        self._frozen = self._freezer.start()
        return self

    def sync(self) -> None:
        """Move the frozen time to the virtual clock's current instant."""
        assert self._frozen is not None, "enter the bridge before syncing it"
        self._frozen.move_to(from_ms(self.clock.now(), UTC))

    def __exit__(self, *exc: object) -> None:
        if self._freezer is not None:
            self._freezer.stop()
            self._freezer = self._frozen = None
