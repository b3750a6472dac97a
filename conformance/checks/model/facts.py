"""The oracle's types: what it derives from a log (turns, segments) and the small named tuples
they are made of. No logic here beyond reading the policy's next boundary, which both the
building and the checks ask."""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import lru_cache, partial
from typing import Any, NamedTuple
from zoneinfo import ZoneInfo

from sessiongate import SessiongateError
from sim.clock import HOUR, MINUTE, SECOND_PASS, from_ms, next_daily_boundary_after
from sim.scenario import GatewayConfig, ResetPolicy

NEVER = 1 << 62
# The kinds `RunModel.of_session` answers for: indexing every record by session cost more
# than the checks that read it.
SESSION_KINDS = frozenset({"on_session_end", "on_session_finalize", "on_session_switch", "on_session_reset", "sync_turn"})


class OracleError(SessiongateError):
    """The oracle broke one of its own invariants on a log: a sessiongate bug, never the
    gateway's. Raised while the model builds, so `judge` turns it into a checker-error verdict
    for every check instead of a verdict drawn from a wrong model."""


class Stamp(NamedTuple):
    """When and in which session an LLM request or reply was logged: all a turn keeps of it
    (not the record, which a spilled log would hand over as a fresh copy per turn)."""

    t: int
    session: str | None


class Moment(NamedTuple):
    """An instant in the log: its virtual time and the record index where it takes its place."""

    t: int
    index: int


UNDONE = Moment(NEVER, NEVER)

# The hot named tuples built without their Python-level `__new__` (tuple's own, in C): the
# oracle makes several per turn, and that call cost more than the tuple.
new_moment = partial(tuple.__new__, Moment)
new_stamp = partial(tuple.__new__, Stamp)


class CommandAt(NamedTuple):
    """A command as the model orders it. `index` is where it takes its place and `arrival` the
    record of its arrival: they differ only for a command held while the gateway was down
    (`walk._delivered`)."""

    t: int
    index: int
    name: str
    arrival: int


class HeldCommand(NamedTuple):
    """A command the platform held while the gateway was down: its chat, arrival record, name."""

    chat: str
    index: int
    name: str


class Delivery(NamedTuple):
    """A restart that delivered what the platform held: its record, time, turns and commands."""

    restart: int
    t: int
    turns: list[Turn]
    held: list[HeldCommand]


class Effective(NamedTuple):
    """When a command takes effect (after the turns ahead of it in its chat are done), and where
    it arrived (its chat is served in arrival order)."""

    t: int
    index: int
    arrival: int  # its record's index: ties of t and index keep arrival order
    name: str


class Downtime(NamedTuple):
    """A stretch the gateway was down, index-free: from its stop to its restart (NEVER: not restarted)."""

    down: int
    up: int


def eager_due(boundary: int, turns: Iterable[Turn], latency: int, stopped: Iterable[Downtime]) -> int:
    """When an eager end of a boundary is due (owed within `latency` of it): a turn in flight (or
    queued) at the boundary defers the rotation until it is done, and a stop before the end is
    owed restarts the countdown at the restart (I1's deadline, and what a changed policy keeps)."""
    due = boundary
    for turn in turns:
        if due < turn.done_t < NEVER:  # `turn.done`'s time, without the Moment
            due = turn.done_t
    for down, up in stopped:
        if down <= due + latency and up > due:
            due = up
    return due


class PolicyChange(NamedTuple):
    """A restart that changed the configuration: in force from `since` (the stop before it);
    `index` is the restart's record (what the gateway delivered before it, it did under the old one)."""

    since: int
    config: GatewayConfig
    index: int


class Expiry(NamedTuple):
    """The first instant an entry is past a policy boundary, and which boundary it is."""

    at: int
    reason: str


class Window(NamedTuple):
    """Record indexes [lo, hi) of one life of a session."""

    lo: int
    hi: int


WHOLE_LOG = Window(0, NEVER)

new_expiry = partial(tuple.__new__, Expiry)
new_command = partial(tuple.__new__, CommandAt)


_ABSENT = -1 << 62  # a `Turn` time field's "not logged" (the stamps and the end are kept unpacked)


@dataclass(slots=True)
class Turn:
    """One user turn as the log shows it.

    Its request, reply and end are kept as plain fields and handed out as `Stamp`s and a
    `Moment` when asked (`request`, `reply`, `done`): three small tuples a turn held cost
    ≈ 190 bytes, a third of the model of a long run."""

    id: str
    chat: str
    arrival: int  # when the gateway could first see it (restart time if the platform held it)
    index: int  # record index of the input
    delegate: bool = False
    muted: bool = False
    request_t: int = _ABSENT  # admission: when the LLM request was logged, and in which session
    request_session: str | None = None
    request_index: int = -1
    asked: int = 0  # the last LLM request for it before its reply: when the answer it got was asked
    reply_t: int = _ABSENT  # acknowledgment: when the reply was logged, and in which session
    reply_session: str | None = None
    reply_index: int = -1
    replies: int = 0
    done_t: int = NEVER  # when the turn ended (`done`): its reply, or a /stop or stop abandoning it
    done_index: int = NEVER
    ended_by: str = ""  # what ended it: 'reply', '/stop', 'sigterm', 'crash', or 'dropped' (answered by the LLM, never replied)
    stopped: Moment | None = None  # the /stop that abandoned it (a reply after it is owed to no one)
    # Where it ran: its reply's session once acked, else its request's once admitted (the walk
    # keeps it so as it reads them: a field, since the checks ask it per turn).
    session: str | None = None
    held: bool = False  # the platform held it while the gateway was down (`arrival` is the restart's time)

    @property
    def request(self) -> Stamp | None:
        """Admission: the LLM request."""
        return None if self.request_t == _ABSENT else new_stamp((self.request_t, self.request_session))

    @property
    def reply(self) -> Stamp | None:
        """Acknowledgment: the reply."""
        return None if self.reply_t == _ABSENT else new_stamp((self.reply_t, self.reply_session))

    @property
    def done(self) -> Moment:
        """When the turn ended (UNDONE: it did not)."""
        return new_moment((self.done_t, self.done_index))

    @done.setter
    def done(self, moment: Moment) -> None:
        self.done_t, self.done_index = moment

    @property
    def acked(self) -> bool:
        return self.reply_t != _ABSENT


@dataclass(slots=True)
class Segment:
    """Turns of one chat that must share one session, and the boundary that ends them."""

    chat: str
    number: int
    turns: list[Turn] = field(default_factory=list)
    session: str | None = None  # observed: the session of its first admitted turn
    start: int = 0
    start_index: int = 0
    anchor: int = 0
    last_user: int = 0
    boundary: int | None = None  # when it ended, per the contract
    reason: str | None = None  # idle, daily, new, switch
    command: str = "/new"  # for reason new: the command typed (/new or /reset), as the messages name it
    resumes: int | None = None  # for /resume: the number of the segment whose session it reopens
    reopens: bool = False  # that segment is the one just before: it had ended and nothing was left behind
    window: Window = WHOLE_LOG  # record indexes of this life of its session (set by the build)

    def label(self) -> str:
        return self.session or f"{self.chat}#{self.number}"


@dataclass(slots=True)
class Facts:
    """Views the checks ask of a model, derived on first use and kept (each a scan of the log
    or the turns; a check that never asks costs nothing). `derived` holds the checks' own
    views, keyed by the function that derives them (`RunModel.derived`)."""

    chat_sessions: set[str] | None = None
    delegate_sessions: set[str] | None = None
    folded: dict[str, int] | None = None  # turn folded into another's request -> when it was answered
    ack_indexes: dict[str, list[int]] = field(default_factory=dict)  # session -> reply indexes of acked_by_session
    served_out_of_order: list[str] = field(default_factory=list)  # chats whose turns were asked out of arrival order
    derived: dict[Callable[[Any], Any], Any] = field(default_factory=dict)




def time_text(t: int | None, zone: ZoneInfo, start: int | None) -> str:
    """`t` as a person reads it in `zone`: a time of day, with the weekday when not `start`'s day,
    and " (2nd)" in the second pass of an hour a fall-back change repeats (as timelines say it)."""
    if t is None:
        return "never"
    moment = from_ms(t, zone)
    first = from_ms(start, zone) if start is not None else moment
    text = moment.strftime(("%H:%M:%S" if moment.second else "%H:%M") if moment.date() == first.date() else
                           ("%a %H:%M:%S" if moment.second else "%a %H:%M"))
    return text + SECOND_PASS if moment.fold else text


# (hour, zone) -> the daily boundaries found, each with the one before it: (befores, boundaries),
# sorted. Every instant from a boundary up to the next has that next one as its answer, so
# one computed day answers every anchor in it (each segment of a daily policy asks with its
# own anchor: a cache by instant missed once a segment, and each miss parsed local dates).
_days: dict[tuple[int, ZoneInfo], tuple[list[int], list[int]]] = {}
_DAYS_KEPT = 4096  # intervals a (hour, zone) keeps before it starts again (a worker judges many seeds)


def _from_days(t: int, at_hour: int, zone: ZoneInfo) -> int:
    """`next_daily_boundary_after`, answered from the days already found. The boundary before
    `b` is the first after `b` - 36 h: consecutive boundaries are 22 to 26 hours apart."""
    befores, boundaries = _days.setdefault((at_hour, zone), ([], []))
    k = bisect_right(befores, t) - 1
    if k >= 0 and t < boundaries[k]:
        return boundaries[k]
    boundary = next_daily_boundary_after(t, at_hour, zone)
    if len(befores) >= _DAYS_KEPT:
        befores.clear()
        boundaries.clear()
    k = bisect_right(befores, t)
    befores.insert(k, next_daily_boundary_after(boundary - 36 * HOUR, at_hour, zone))
    boundaries.insert(k, boundary)
    return boundary


# Asked per turn with its segment's anchor: an anchor asked before is answered in C.
_next_boundary = lru_cache(maxsize=4096)(_from_days)


def expiry_instant(policy: ResetPolicy, zone: ZoneInfo, anchor: int, last_user: int) -> Expiry | None:
    """The first instant the entry is past a policy boundary, if no user message comes (asked
    per turn: each mode's case written out, no list of options, no `max` call: the builtin's
    argument parsing cost more than the rest)."""
    mode = policy.mode
    if mode == "idle" or mode == "both":
        idle = last_user + policy.idle_minutes * MINUTE + 1
        if mode == "idle":
            return new_expiry((idle, "idle"))
    elif mode != "daily":
        return None
    daily = _next_boundary(anchor, policy.at_hour, zone)
    if (rested := last_user + policy.daily_min_idle_minutes * MINUTE) > daily:  # not before the minimum idle
        daily = rested
    if mode == "daily" or daily <= idle:  # at one instant, "daily" < "idle": the daily boundary
        return new_expiry((daily, "daily"))
    return new_expiry((idle, "idle"))
