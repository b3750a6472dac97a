"""A piecewise time axis: linear where things happen, long quiet gaps squeezed to a break.

Every instant that matters is a knot. The longest gaps between knots (see `_quiet_threshold`)
are drawn as short breaks labelled with their true length, so a two-day quiescence does not
flatten the minutes that matter; every gap also gets a few pixels, so instants never collapse.
"""

from __future__ import annotations

import bisect
import itertools
from dataclasses import dataclass
from zoneinfo import ZoneInfo

from sim.clock import HOUR, MINUTE, SECOND, format_duration, from_ms

STEPS_MIN = (1, 2, 5, 10, 15, 30, 60, 120, 180, 360, 720)
MIN_GAP_SHARE = 0.004  # every gap between knots gets at least this share of the width
QUIET_MIN = 3 * MINUTE  # a gap this short is never squeezed
QUIET_MAX = 2 * HOUR  # a gap this long is squeezed whenever something else is left to show
QUIET_SHARE = 0.4  # a gap longer than this share of the time still drawn is squeezed
BREAK_PX = 44.0  # how wide a squeezed gap is drawn (less when there are many)
BREAKS_SHARE = 0.4  # at most this share of the width goes to squeezed gaps


@dataclass(frozen=True)
class Break:
    start: int
    end: int
    x0: float
    x1: float

    @property
    def label(self) -> str:
        """Its length to the minute (to the hour past a day): '6h11m', '1d23h'."""
        length = self.end - self.start
        unit = HOUR if length >= 24 * HOUR else MINUTE if length >= HOUR else SECOND
        return format_duration(max(unit, length // unit * unit))


@dataclass(frozen=True)
class Tick:
    t: int
    x: float
    label: str
    day: str  # the date when this tick starts a new day on the axis, else ''


class Axis:
    """Maps virtual ms to x pixels in [x0, x0 + width]."""

    def __init__(self, times: list[int], x0: float, width: float, zone: ZoneInfo) -> None:
        knots = sorted(set(times)) or [0]
        if len(knots) == 1:
            knots.append(knots[0] + MINUTE)
        gaps = [b - a for a, b in itertools.pairwise(knots)]
        self.quiet = _quiet_threshold(gaps)
        self.zone = zone
        squeezed = sum(1 for g in gaps if g > self.quiet)
        break_px = min(BREAK_PX, width * BREAKS_SHARE / squeezed) if squeezed else 0.0
        linear = [g for g in gaps if g <= self.quiet]
        floor = sum(linear) * MIN_GAP_SHARE
        scale = (width - squeezed * break_px) / max(sum(max(g, floor) for g in linear), 1)
        xs = [x0]
        for g in gaps:
            xs.append(xs[-1] + (break_px if g > self.quiet else max(g, floor) * scale))
        self.knots, self.xs = knots, xs
        self.breaks = [Break(a, b, xa, xb) for a, b, xa, xb, g in zip(knots, knots[1:], xs, xs[1:], gaps, strict=False)
                       if g > self.quiet]
        self.linear_scale = scale  # px per ms where the axis is linear

    def x(self, t: int) -> float:
        knots, xs = self.knots, self.xs
        if t <= knots[0]:
            return xs[0]
        if t >= knots[-1]:
            return xs[-1]
        i = bisect.bisect_right(knots, t) - 1
        a, b = knots[i], knots[i + 1]
        return xs[i] + (xs[i + 1] - xs[i]) * (t - a) / (b - a)

    def in_break(self, t: int) -> bool:
        return any(b.start < t < b.end for b in self.breaks)

    def ticks(self, min_px: float = 64) -> list[Tick]:
        """Wall-clock ticks in the zone (aligned to local minutes), none inside a break."""
        step = next((s for s in STEPS_MIN if s * MINUTE * self.linear_scale >= min_px), STEPS_MIN[-1])
        out: list[Tick] = []
        t = _align_up(self.knots[0], step, self.zone)
        last_x = -1e9
        last_day = ""
        end = self.knots[-1]
        while t <= end:
            if self.in_break(t):
                t = _align_up(next(b.end for b in self.breaks if b.start < t < b.end), step, self.zone)
                continue
            x = self.x(t)
            if x - last_x >= min_px:
                moment = from_ms(t, self.zone)
                day = moment.strftime("%a %d %b")
                out.append(Tick(t, x, moment.strftime("%H:%M"), day if day != last_day else ""))
                last_x, last_day = x, day
            t = _align_up(t + step * MINUTE, step, self.zone)
        return out


def _quiet_threshold(gaps: list[int]) -> int:
    """Gaps longer than this are squeezed: the longest gap left goes while it is over
    QUIET_MAX, or over QUIET_MIN and QUIET_SHARE of the time left, and squeezing it still
    leaves QUIET_MIN drawn to scale. So no long quiet dominates, and a sparse run stays linear."""
    left = sorted(gaps)
    total = sum(left)
    while left and total - left[-1] >= QUIET_MIN and (
            left[-1] > QUIET_MAX or (left[-1] > QUIET_MIN and left[-1] > QUIET_SHARE * total)):
        total -= left.pop()
    return left[-1] if left else 0


def _align_up(t: int, step_min: int, zone: ZoneInfo) -> int:
    """The first instant at or after `t` whose local wall time is a multiple of `step_min`."""
    moment = from_ms(t, zone)
    into_minute = moment.second * 1000 + moment.microsecond // 1000
    minutes = moment.hour * 60 + moment.minute
    if into_minute == 0 and minutes % step_min == 0:
        return t
    target = (minutes // step_min + 1) * step_min
    return t - into_minute + (target - minutes) * MINUTE
