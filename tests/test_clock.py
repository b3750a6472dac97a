"""Virtual time: durations, daily boundaries on DST days and far from UTC, the clock, the freezegun bridge.

The daily-boundary rule on DST days (pinned below, Europe/Berlin 2026):
- a wall time the clock skips maps to the transition instant: on 2026-03-29 02:00 CET jumps to
  03:00 CEST at 01:00 UTC, so both the 02:00 and the 03:00 boundary fall at 01:00 UTC;
- a wall time that happens twice takes the first occurrence: on 2026-10-25 03:00 CEST falls
  back to 02:00 CET at 01:00 UTC, so the 02:00 boundary is 00:00 UTC (CEST), not 01:00 UTC (CET);
  03:00 happens once that day (CET), at 02:00 UTC.
"""

from __future__ import annotations

import time
from datetime import UTC, date, datetime
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sim.clock import (
    DAY,
    HOUR,
    MINUTE,
    SECOND,
    FreezegunBridge,
    VirtualClock,
    daily_boundary_at_or_before,
    format_duration,
    from_ms,
    local_instant,
    next_daily_boundary_after,
    parse_duration,
    to_ms,
)

BERLIN = ZoneInfo("Europe/Berlin")
KIRITIMATI = ZoneInfo("Pacific/Kiritimati")  # UTC+14
PAGO_PAGO = ZoneInfo("Pacific/Pago_Pago")  # UTC-11


def utc(text: str) -> int:
    """'2026-03-29T01:00' (UTC) -> epoch ms."""
    return to_ms(datetime.fromisoformat(text).replace(tzinfo=UTC))


def show(ms: int) -> str:
    return from_ms(ms, ZoneInfo("UTC")).strftime("%Y-%m-%dT%H:%M:%S")


# ---------------------------------------------------------------------------------------
# Durations


@pytest.mark.parametrize(
    ("text", "ms"),
    [("90s", 90 * SECOND), ("61m", 61 * MINUTE), ("25h", 25 * HOUR), ("2d", 2 * DAY), ("1h30m", 90 * MINUTE),
     ("500ms", 500), ("0s", 0), ("1d2h3m4s5ms", DAY + 2 * HOUR + 3 * MINUTE + 4 * SECOND + 5)],
)
def test_parse_duration(text: str, ms: int) -> None:
    assert parse_duration(text) == ms


@pytest.mark.parametrize("text", ["", "5", "-5m", "5x", "1.5h", " 5m", "5m ", "m", "5 m", "\uff15m", "5M"])
def test_parse_duration_rejects(text: str) -> None:
    with pytest.raises(ValueError, match=r"^expected a duration like '61m'$"):
        parse_duration(text)


@pytest.mark.parametrize("value", [None, 5, 5.0])
def test_parse_duration_rejects_non_text(value: object) -> None:
    with pytest.raises(ValueError, match=r"^expected a duration like '61m'$"):
        parse_duration(value)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("ms", "text"),
    [(0, "0s"), (500, "500ms"), (90 * SECOND, "1m30s"), (61 * MINUTE, "1h1m"), (25 * HOUR, "1d1h"), (DAY + 1, "1d1ms"),
     (-5 * MINUTE, "-5m")],
)
def test_format_duration(ms: int, text: str) -> None:
    assert format_duration(ms) == text


@given(st.integers(0, 10**15))
def test_format_then_parse_is_exact(ms: int) -> None:
    assert parse_duration(format_duration(ms)) == ms


# ---------------------------------------------------------------------------------------
# Daily boundaries on DST days (Europe/Berlin 2026)


@pytest.mark.parametrize(
    ("at_hour", "t", "before", "after"),
    [
        # spring forward 2026-03-29: 02:00 CET -> 03:00 CEST at 01:00 UTC
        (2, "2026-03-29T00:59:59", "2026-03-28T01:00:00", "2026-03-29T01:00:00"),  # 02:00 CET the day before
        (2, "2026-03-29T01:00", "2026-03-29T01:00:00", "2026-03-30T00:00:00"),  # skipped 02:00 -> the jump
        (2, "2026-03-29T12:00", "2026-03-29T01:00:00", "2026-03-30T00:00:00"),  # next: 02:00 CEST
        (3, "2026-03-29T00:59:59", "2026-03-28T02:00:00", "2026-03-29T01:00:00"),  # 03:00 CET the day before
        (3, "2026-03-29T01:00", "2026-03-29T01:00:00", "2026-03-30T01:00:00"),  # 03:00 CEST = the jump
        (3, "2026-03-30T00:30", "2026-03-29T01:00:00", "2026-03-30T01:00:00"),
        # fall back 2026-10-25: 03:00 CEST -> 02:00 CET at 01:00 UTC; 02:00-02:59 happens twice
        (2, "2026-10-24T23:59:59", "2026-10-24T00:00:00", "2026-10-25T00:00:00"),
        (2, "2026-10-25T00:00", "2026-10-25T00:00:00", "2026-10-26T01:00:00"),  # first 02:00 (CEST)
        (2, "2026-10-25T01:00", "2026-10-25T00:00:00", "2026-10-26T01:00:00"),  # second 02:00 (CET) is no boundary
        (2, "2026-10-25T01:30", "2026-10-25T00:00:00", "2026-10-26T01:00:00"),
        (3, "2026-10-25T01:00", "2026-10-24T01:00:00", "2026-10-25T02:00:00"),  # 03:00 CEST never shows
        (3, "2026-10-25T01:59:59", "2026-10-24T01:00:00", "2026-10-25T02:00:00"),
        (3, "2026-10-25T02:00", "2026-10-25T02:00:00", "2026-10-26T02:00:00"),  # 03:00 CET
    ],
)
def test_daily_boundary_on_dst_days(at_hour: int, t: str, before: str, after: str) -> None:
    assert show(daily_boundary_at_or_before(utc(t), at_hour, BERLIN)) == before
    assert show(next_daily_boundary_after(utc(t), at_hour, BERLIN)) == after


def test_local_instant_rule() -> None:
    """Skipped wall times map to the transition; repeated ones take the first occurrence."""
    assert show(local_instant(date(2026, 3, 29), 2, 30, BERLIN)) == "2026-03-29T01:00:00"
    assert show(local_instant(date(2026, 3, 29), 1, 59, BERLIN)) == "2026-03-29T00:59:00"
    assert show(local_instant(date(2026, 10, 25), 2, 30, BERLIN)) == "2026-10-25T00:30:00"
    assert show(local_instant(date(2026, 10, 25), 3, 0, BERLIN)) == "2026-10-25T02:00:00"


@given(st.integers(utc("2026-01-01T00:00"), utc("2027-01-01T00:00")), st.integers(0, 23))
def test_boundaries_bracket_every_instant(t: int, at_hour: int) -> None:
    before, after = daily_boundary_at_or_before(t, at_hour, BERLIN), next_daily_boundary_after(t, at_hour, BERLIN)
    assert before <= t < after
    assert 23 * HOUR <= after - before <= 25 * HOUR
    assert next_daily_boundary_after(before, at_hour, BERLIN) == after


# ---------------------------------------------------------------------------------------
# Far from UTC: the boundary's UTC date is not the local date


@pytest.mark.parametrize(
    ("zone", "t", "before", "after"),
    [
        # Kiritimati, UTC+14: local 04:00 on day D is 14:00 UTC on day D-1.
        (KIRITIMATI, "2026-03-02T00:00", "2026-03-01T14:00:00", "2026-03-02T14:00:00"),  # local 03-02 14:00
        (KIRITIMATI, "2026-03-01T13:59", "2026-02-28T14:00:00", "2026-03-01T14:00:00"),  # local 03-02 03:59
        (KIRITIMATI, "2026-03-01T14:00", "2026-03-01T14:00:00", "2026-03-02T14:00:00"),  # local 03-02 04:00
        # Pago Pago, UTC-11: local 04:00 on day D is 15:00 UTC on day D.
        (PAGO_PAGO, "2026-03-02T12:00", "2026-03-01T15:00:00", "2026-03-02T15:00:00"),  # local 03-02 01:00
        (PAGO_PAGO, "2026-03-02T15:00", "2026-03-02T15:00:00", "2026-03-03T15:00:00"),  # local 03-02 04:00
        (PAGO_PAGO, "2026-03-03T10:59", "2026-03-02T15:00:00", "2026-03-03T15:00:00"),  # local 03-02 23:59
    ],
)
def test_day_boundary_far_from_utc(zone: ZoneInfo, t: str, before: str, after: str) -> None:
    assert show(daily_boundary_at_or_before(utc(t), 4, zone)) == before
    assert show(next_daily_boundary_after(utc(t), 4, zone)) == after


# ---------------------------------------------------------------------------------------
# The clock


def test_set_refuses_to_go_back() -> None:
    clock = VirtualClock(utc("2026-03-02T09:00"), "Europe/Berlin")
    clock.set(clock.now())  # staying put is fine
    clock.set(clock.now() + MINUTE)
    with pytest.raises(ValueError, match=r"^virtual time cannot go back: 1772442000000 < 1772442060000$"):
        clock.set(utc("2026-03-02T09:00"))
    assert clock.now() == utc("2026-03-02T09:01")


def test_monotonic_ignores_zone_and_dst() -> None:
    """Across the spring-forward jump the wall clock moves 2h, monotonic time 1h, in every zone."""
    start = utc("2026-03-29T00:30")
    clocks = [VirtualClock(start, zone) for zone in ("UTC", "Europe/Berlin", "Pacific/Kiritimati", "Pacific/Pago_Pago")]
    for clock in clocks:
        clock.set(start + HOUR)
    assert {clock.monotonic() for clock in clocks} == {3600.0}
    berlin = clocks[1]
    assert berlin.format(start) == "01:30" and berlin.format() == "03:30"


def test_wall_and_format() -> None:
    clock = VirtualClock(utc("2026-03-02T08:00"), "Europe/Berlin")
    assert clock.wall() == datetime(2026, 3, 2, 9, 0, tzinfo=BERLIN)
    clock.set(utc("2026-03-02T08:04:05"))
    assert clock.format() == "09:04:05"
    clock.set(utc("2026-03-03T08:04"))
    assert clock.format() == "2026-03-03 09:04"


def test_freezegun_bridge_follows_sync() -> None:
    start = utc("2001-02-03T04:05:06")
    clock = VirtualClock(start, "Europe/Berlin")
    with FreezegunBridge(clock) as bridge:
        assert time.time() == start / 1000
        assert datetime.now(UTC) == datetime(2001, 2, 3, 4, 5, 6, tzinfo=UTC)
        assert datetime.now(BERLIN) == datetime(2001, 2, 3, 5, 5, 6, tzinfo=BERLIN)
        clock.set(start + 90 * MINUTE + 250)
        assert time.time() == start / 1000  # the gateway sees the move only at the next sync
        bridge.sync()
        assert time.time() == (start + 90 * MINUTE + 250) / 1000
        assert datetime.now(UTC) == datetime(2001, 2, 3, 5, 35, 6, 250_000, tzinfo=UTC)
    assert datetime.now(UTC).year != 2001  # released


def test_freezegun_bridge_sync_needs_enter() -> None:
    with pytest.raises(AssertionError, match="enter the bridge before syncing it"):
        FreezegunBridge(VirtualClock(0)).sync()


def test_zones_come_from_the_pinned_tzdata_package_not_the_system(tmp_path) -> None:
    """A machine whose system tz database says otherwise (here: Berlin with Tokyo's rules) runs
    the same: every zone of a run comes from `tzdata`, whose version each log's header records."""
    import zoneinfo
    from datetime import datetime
    from importlib import resources

    from conformance.harness.runner import run_scenario
    from reference_impl import ReferenceGateway
    from sim.clock import TZDATA, load_zone
    from sim.generate import scenario_for_seed

    fake = tmp_path / "Europe"
    fake.mkdir()
    (fake / "Berlin").write_bytes(resources.files("tzdata.zoneinfo").joinpath("Asia", "Tokyo").read_bytes())
    try:
        zoneinfo.reset_tzpath(to=[str(tmp_path)])
        noon = datetime(2026, 1, 15, 12)
        assert zoneinfo.ZoneInfo.no_cache("Europe/Berlin").utcoffset(noon).total_seconds() == 9 * 3600  # the system's
        assert load_zone("Europe/Berlin").utcoffset(noon).total_seconds() == 3600  # the package's
    finally:
        zoneinfo.reset_tzpath()
    result = run_scenario(scenario_for_seed(0), ReferenceGateway(), "reference", check=False)
    assert result.records[0].d("tzdata") == TZDATA


def test_a_checks_time_in_the_repeated_hour_says_which_pass() -> None:
    """Catalog 32 read `on_session_end at Sun 02:00, … session began Sun 02:10`, an end before its
    start: the end was in the second pass of the hour. A check's time says so, as timelines do."""
    from conformance.checks.model.facts import time_text
    from sim.clock import load_zone

    zone = load_zone("Europe/Berlin")
    first = 1792887000000  # 2026-10-25 02:10 CEST, the first pass
    second = first + 3600_000 - 600_000  # 02:00 CET, the second pass
    assert time_text(first, zone, first) == "02:10"
    assert time_text(second, zone, first) == "02:00 (2nd)"
