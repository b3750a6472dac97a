"""Where the contract cuts each chat's turns into sessions: when each turn is done, when each
command takes effect, the segments, and the record window of each life of a session."""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from functools import partial
from operator import attrgetter
from typing import NamedTuple

from conformance.checks.model.facts import _ABSENT as ABSENT
from conformance.checks.model.facts import (
    NEVER,
    CommandAt,
    Downtime,
    Effective,
    Expiry,
    Moment,
    PolicyChange,
    Segment,
    Turn,
    Window,
    eager_due,
    new_moment,
)
from conformance.checks.model.log import LogView
from conformance.observations import event_of

_index, _request_index = attrgetter("index"), attrgetter("request_index")  # sort keys a turn: in C, not a lambda
_arrival = attrgetter("arrival")


class _Ending(NamedTuple):
    """What can abandon a turn in flight: a /stop in its chat, a SIGTERM or a crash."""

    t: int
    index: int
    by: str


class _Lock(NamedTuple):
    start: int
    until: int


def mark_done(m: LogView, chat_turns: dict[str, list[Turn]], commands: dict[str, list[CommandAt]]) -> None:
    """Each admitted turn's end: the /stop in its chat that found it in flight (a reply after it
    does not undo it), else its reply, else the stop (sigterm, crash) that abandoned it before
    the LLM answered (or, for a write a locked store held, before the reply bound ran out after
    the lock's end: the gateway's retry may come any time within it), else the moment the
    gateway dropped it: its answer. A /stop abandons chat turns only: a delegate runs on."""
    stops = [_Ending(m.records[i].t, i, m.records[i].kind)
             for i in sorted([*m.by_kind.get("sigterm", ()), *m.by_kind.get("crash", ())])]
    locks = sorted(_Lock(r.t, int(r.d("until", r.t))) for _i, r in m.of("db_locked"))
    within = m.reply_within
    times: list[int] = []  # record times, read only if a turn was dropped
    for chat, turns in chat_turns.items():
        slash = [_Ending(c.t, c.index, "/stop") for c in commands.get(chat, []) if c.name == "/stop"]
        ends = sorted(slash + stops, key=lambda s: s.index)
        indexes = [e.index for e in ends]
        plain = [end for end in ends if end.by != "/stop"]  # what ends a delegate
        plain_indexes = [e.index for e in plain]
        for turn in turns:
            if turn.reply_t != ABSENT:  # replied (`turn.reply`, without the Stamp)
                k = bisect_right(indexes, turn.request_index)
                if not turn.delegate and k < len(ends) and ends[k].by == "/stop" and ends[k].index < turn.reply_index:
                    turn.stopped = turn.done = new_moment((ends[k].t, ends[k].index))
                    turn.ended_by = "/stop"
                    continue
                turn.done_t, turn.done_index, turn.ended_by = turn.reply_t, turn.reply_index, "reply"  # `turn.done`, unpacked
                continue
            assert turn.request_t != ABSENT  # admitted
            answer = turn.asked + m.config.turn_latency
            limit = answer  # a stop by then found it in flight
            for locked, until in locks:
                if locked <= answer <= until:
                    answer = until + m.config.turn_latency  # the write waits out the lock, then one more try
                    # ... whenever the gateway's retry comes, within its reply bound from the
                    # lock's end (I9's, restarted there): a stop by then cut the retry off
                    # (seed 12209: a crash inside the retry's heal, 999 ms after the lock), and
                    # what waited behind the turn went with it.
                    limit = max(answer, until + within)
            mine, at = (plain, plain_indexes) if turn.delegate else (ends, indexes)
            k = bisect_right(at, turn.request_index)
            if k < len(mine) and mine[k].t <= limit:
                turn.done, turn.ended_by = new_moment((mine[k].t, mine[k].index)), mine[k].by
                if turn.ended_by == "/stop":
                    turn.stopped = turn.done
                continue
            if not times:
                times = [r.t for r in m.records]
            turn.done, turn.ended_by = new_moment((answer, bisect_right(times, answer))), "dropped"


def _effective(m: LogView, admitted: list[Turn], commands: list[CommandAt]) -> list[Effective]:
    """When each command takes effect: on arrival, or once every turn that arrived before it in
    the chat is done (never mid-turn; the chat is served in arrival order). Behind a turn that
    ends after the log, never. A `/stop` ends the turn in flight at its arrival (`mark_done`),
    so only the turns admitted before it count: one that arrived before it and waited behind
    the stopped turn starts after it (ld2 seed 10442: such a `/stop` was placed after the
    waiting turn's reply, where it "noticed" a boundary the gateway never had to act on)."""
    if not commands:
        return []
    by_arrival = sorted(admitted, key=_index)
    arrivals = [t.index for t in by_arrival]
    done: list[Moment] = []  # done[k]: the latest end among the first k+1 arrivals
    latest = Moment(-1, -1)
    for turn in by_arrival:
        if (turn.done_t, turn.done_index) > latest:  # `turn.done`, made only when later (no `max` call a turn)
            latest = turn.done
        done.append(latest)
    effective: list[tuple[int, int, int, str]] = []  # (time, index, arrival, name): sorted, ties keep arrival order
    for t, index, name, arrival in commands:
        k = bisect_left(arrivals, arrival)
        if name == "/stop":  # it acts at once on the turn in flight: what waits behind that turn does not delay it
            while k and by_arrival[k - 1].request_index > index:  # admitted after it (a chat's in arrival order)
                k -= 1
        # It waits for a turn still running where it takes its place (a `/stop` only for one running
        # past it: the turn it stops ends at the `/stop` itself).
        behind = k > 0 and (done[k - 1] > (t, index) if name == "/stop" else done[k - 1] >= (t, index))
        when = done[k - 1] if behind else (t, index)
        if when[1] >= len(m.records):
            continue  # queued behind a turn that ends after the log does (never, or cut by a gateway error)
        if behind and m.records[when[1]].kind in ("sigterm", "crash") and m.records[when[1]].t == when[0]:
            # queued behind a turn the process died with: lost with the process, like that turn. A
            # command held while the gateway was down takes its place just after the request of
            # the turn it waits for, which can be the crash's own record (dense seed 93099: that
            # command was taken as acted on at the crash, its end owed). The stop ended that turn
            # only if the moment is the stop's own: a turn dropped earlier (its answer's time)
            # points at the next record, which may be a stop an hour later.
            continue
        effective.append((*when, arrival, name))
    return [Effective(*when) for when in sorted(effective)]


def chat_segments(model: LogView, chat: str, turns: list[Turn], commands: list[CommandAt],
                  stopped: list[Downtime], in_order: bool = True) -> list[Segment]:
    """Walk the chat's admitted turns and commands in arrival order, the order the chat is
    served in; cut where the contract cuts (`stopped`: the gateway's downtimes, which a changed
    policy's `_kept` reads). A turn is judged as of its arrival (CONTRACT I6: "when the turn
    arrived"), and short of the boundary it joins the session at once: a message that waits
    behind a turn in flight keeps the chat active, for what is served before it too (a
    `/stop`, which acts at once); past the boundary it opens the next session at its admission
    (never mid-turn). A command is judged where it takes effect, by the turns that arrived
    before it."""
    admitted = sorted(turns, key=_index)
    if not in_order:  # served out of arrival order (`Facts.served_out_of_order`, I6): walked as it was
        admitted.sort(key=_request_index)  # served, so that what the other checks judge is what the gateway did
    effective = _effective(model, admitted, commands)
    expiry_at = model.expiry_of(chat)  # (anchor, last user message) -> the entry's expiry, asked per turn
    segments: list[Segment] = []
    judged = partial(_judged, model, segments, stopped, _Lives()) if model.changes else None  # asked with the record it is asked at
    current: Segment | None = None

    def close(at: int, reason: str) -> None:
        nonlocal current
        if current is not None and current.boundary is None:
            current.boundary, current.reason = at, reason
        current = None

    def past(at: int, asked: int) -> None:
        """Close the current segment if it is past its boundary at `at` (`asked`: the record
        whose policy judges it)."""
        if current is not None:
            expiry = judged(current, asked) if judged else expiry_at(current.anchor, current.last_user)
            if expiry is not None and expiry.at <= at:
                close(expiry.at, expiry.reason)

    def command(when: int, index: int, name: str) -> None:
        nonlocal current
        past(when, index)  # a command past the boundary notices it, as a message does
        if name in ("/new", "/reset") and current is not None:
            if current.boundary is None:
                current.command = name
            close(when, "new")
        elif name == "/resume":
            reopens = current is None
            if reopens:  # past a boundary, its successor not begun: back to the session that ended
                target = segments[-1] if segments else None
            else:
                target = _previous_distinct(segments, current) if current.number else None
                if target is not None:
                    close(when, "switch")
            if target is None:
                return  # nothing before it to return to
            current = Segment(chat, len(segments), session=target.session, start=when, start_index=index,
                              anchor=when, last_user=when, resumes=target.number, reopens=reopens)
            segments.append(current)

    pending = sorted(effective, key=_arrival)  # served in arrival order; each applied where it takes effect
    for turn in admitted:
        assert turn.request_t != ABSENT  # admitted (`turn.request`, without the Stamp)
        if pending:  # a chat with no command (the common one) calls nothing per turn
            served = 0
            while served < len(pending) and pending[served].arrival < turn.index:
                served += 1
            for when, index, _, name in sorted(pending[:served]):
                command(when, index, name)
            pending = pending[served:]
        past(turn.arrival, turn.request_index)
        if current is None:
            # A turn asked before the boundary the last segment closed at was served while the
            # turn a command waited behind was in flight (the gateway acted mid-turn, I6's to
            # judge): its segment starts at that boundary, never before the last one ended.
            start = turn.request_t if not segments or segments[-1].boundary is None else max(turn.request_t, segments[-1].boundary)
            current = Segment(chat, len(segments), start=start, start_index=turn.request_index, anchor=turn.arrival)
            segments.append(current)
        if current.session is None:
            current.session = turn.session
        current.turns.append(turn)
        current.last_user = turn.arrival
    for when, index, _, name in sorted(pending):
        command(when, index, name)
    if current is not None and current.boundary is None:
        expiry = judged(current, NEVER) if judged else expiry_at(current.anchor, current.last_user)
        horizon = model.final_stop if model.final_stop is not None else (model.records[-1].t if model.records else 0)
        if expiry is not None and expiry.at <= horizon:
            close(expiry.at, expiry.reason)
    return segments


def _judged(m: LogView, segments: list[Segment], stopped: list[Downtime], lives: _Lives, seg: Segment,
            asked: int) -> Expiry | None:
    """The segment's expiry as seen at record `asked`, when restarts changed the policy: only the
    policies in force by then judge it, and an old policy's boundary before its stop counts
    after the restart only as `_kept` says."""
    return m.expiry(seg.chat, seg.anchor, seg.last_user, asked,
                    lambda found, change: _kept(m, segments, stopped, lives, seg, found, change))


def _kept(m: LogView, segments: list[Segment], stopped: list[Downtime], lives: _Lives, seg: Segment, found: Expiry,
          change: PolicyChange) -> bool:
    """Whether a boundary the old policy found before the stop still counts after the restart
    that changed the policy. It does if the gateway acted on it: ended this life of the session
    before the restart, or in the restart's own step (finishing what a crash cut short, or
    judging the downtime by the old policy); or if the end was owed before the stop (eager: the
    boundary, deferred by turns in flight and by earlier downtimes, plus the declared latency,
    before it; I1 holds the gateway to that). Otherwise the end was not yet owed when the
    gateway stopped, and the restarted gateway, which may know only the policy it came back with
    (after a crash, not even when it stopped), may judge the entry by that one."""
    if seg.session is not None:
        lo = lives.start(m, segments, seg.number)
        restart_step = m.records[change.index].step
        for i, r in m.of_session("on_session_end", seg.session, lo):
            if i < change.index or r.step == restart_step:
                return True
            if event_of(r.step) > event_of(restart_step):
                break
    if m.finalization(seg.chat) != "eager":
        return False
    due = eager_due(found.at, seg.turns, m.latency, (d for d in stopped if d.down < change.since))
    return due + m.latency < change.since


def _previous_distinct(segments: list[Segment], left: Segment) -> Segment | None:
    """The segment /resume returns to: the last one before `left` with another session."""
    for segment in reversed(segments[: left.number]):
        if segment.session != left.session or segment.session is None:
            return segment
    return None


def _after_ending(m: LogView, session: str, start: int, since: int) -> int:
    """Where a reopened life begins: at the /resume, or, if the life before it (from `since`)
    had not ended by then, after that end and its finalize, which the gateway delivered at the
    /resume itself (a command past a boundary notices it; commands queued together run so: a
    `/resume`, `/new`, `/resume` behind one turn reopen one session twice at one record, each
    life after the end of the one before)."""
    if m.of_session("on_session_end", session, since, start):
        return start
    base = max(start, since)  # two reopens at one record: the second after the first's end
    t, lo = m.records[start].t, base
    for kind in ("on_session_end", "on_session_finalize"):
        first = m.of_session(kind, session, base)[:1]
        if first and (first[0][1].t == t or _died_taking(m, start, first[0][0])):
            lo = max(lo, first[0][0] + 1)
    return lo


def _died_taking(m: LogView, command: int, end: int) -> bool:
    """The gateway died at a crash point while it took the command (the `crash` record naming
    the point comes in the command's own step, before `end`): the platform hands the command
    over again at the restart, where the end it noticed is finished."""
    step = m.records[command].step
    return any(m.records[i].step == step and m.records[i].d("point") for i, _ in m.of("crash") if command < i < end)


class _Lives:
    """Where each segment's life of its session begins, found segment by segment in order:
    `set_windows` reads every one, a changed policy's `_kept` the one it asks about while the
    segments are still being cut (a segment's start depends only on the segments before it).
    The first life of a session in the chat begins with the log; a /resume that reopens the
    session just ended, after that end (`_after_ending`); another /resume, at the gateway's
    first switch into the session that began no earlier life, so resumes that take effect at
    the same record (queued behind one turn, even back to one session twice) keep their lives
    apart."""

    def __init__(self) -> None:
        self.starts: list[int] = []
        self.seen: set[str | None] = set()
        self.taken: dict[str, int] = {}  # session -> the last switch into it that began one of its lives

    def start(self, m: LogView, segments: list[Segment], number: int) -> int:
        starts, taken = self.starts, self.taken
        while len(starts) <= number:
            seg = segments[len(starts)]
            lo = 0
            if seg.session in self.seen:
                lo = seg.start_index
                if seg.reopens and seg.session and seg.resumes is not None:
                    lo = _after_ending(m, seg.session, seg.start_index, starts[seg.resumes])
                elif seg.resumes is not None and seg.session:
                    switches = m.by_session.get(("on_session_switch", seg.session), [])
                    k = bisect_left(switches, max(seg.start_index, taken.get(seg.session, -1) + 1))
                    if k < len(switches):
                        lo = taken[seg.session] = switches[k]
                    else:  # no switch left for it (one switch for two resumes): it cannot begin before the last life did
                        lo = max(lo, taken.get(seg.session, -1))
            self.seen.add(seg.session)
            starts.append(lo)
        return starts[number]


def set_windows(m: LogView, segments: list[Segment]) -> None:
    """Each segment's life of its session (`_Lives`): from its start to the start of the
    session's next life."""
    lives = _Lives()
    if segments:
        lives.start(m, segments, len(segments) - 1)
    next_start: dict[str | None, int] = {}
    for seg, lo in zip(reversed(segments), reversed(lives.starts), strict=True):
        seg.window = Window(lo, next_start.get(seg.session, len(m.records)))
        next_start[seg.session] = lo if lo else seg.start_index
