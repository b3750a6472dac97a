"""I9 liveness: every delivered user message is answered (its reply delivered, the turn
acknowledged) within the bound the gateway declares, and every delegated task the LLM was
asked for gets its result within it (counted from that request).

Without it a gateway that never replies passes every other check: they judge acknowledged
turns only. The bound (`Profile.reply_within`, default the declared latency plus the
scenario's turn latency) runs from when the chat could serve the message: its arrival (the
restart, for a message the platform held), or the previous message of the chat being
answered or abandoned (a chat's turns are served one at a time). A locked store holds a
write, and so the reply: the bound restarts when the lock ends. Excused: a turn a `/stop`
abandoned, and a message not answered before a SIGTERM or crash that came before its deadline
(the final one included; the bound is capped at what quiescence waits), or at its instant
ahead of the timers due then: a reply at the deadline is in time, and a stop ordered before
the instant's timers (its record says `before_timers`), or a crash point fired inside a step
(`point`: with no declared slack, the reply's own step is due exactly at the deadline), may
have cut it off. A stop after them (the default order) finds a reply that was not coming.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import defaultdict
from itertools import accumulate
from operator import attrgetter

from conformance.checks.model import RunModel, Turn
from conformance.checks.model.facts import _ABSENT as ABSENT
from conformance.harness.verdict import Verdict, Violation
from sim.clock import format_duration


def check(m: RunModel) -> Verdict:
    violations: list[Violation] = []
    within = m.reply_within  # what the harness cannot wait for, it cannot excuse
    latency = m.config.turn_latency  # the fake LLM answers this long after each request
    stops = sorted((m.records[i].t, i) for i in (*m.by_kind.get("sigterm", ()), *m.by_kind.get("crash", ())))
    locks = sorted((r.t, int(r.d("until"))) for _i, r in m.of("db_locked"))
    by_chat: dict[str, list[Turn]] = defaultdict(list)
    for turn in m.turns.values():
        if not turn.delegate:
            by_chat[turn.chat].append(turn)
    # stop_reach[k]: the latest record index among stops[:k + 1], so the first stop in `stops`
    # after an index is found by a bisect (`_given_up`)
    stop_reach = list(accumulate((i for _t, i in stops), max))
    # stops and /stops that may cut off a reply due at their own instant (see `_given_up`)
    ahead = {i for _t, i in stops if m.records[i].d("before_timers") or m.records[i].d("point") is not None}
    ahead.update(i for i, r in m.of("command") if r.d("before_timers"))
    folded = m.folded()
    unanswered_by = _unanswering(m)  # turn -> (when its first reply that answered it came, or None; the first that did not)
    examined = 0
    for chat in sorted(by_chat):
        free = 0  # when the chat could take its next message: the previous one answered or given up
        behind: Turn | None = None
        for turn in sorted(by_chat[chat], key=attrgetter("index")):
            start = free if free > turn.arrival else turn.arrival  # the later (no `max` call per turn)
            deadline = _extended(start + within, start, within, locks) if locks else start + within
            # the earlier of its reply and the reply its folded request got (a time of 0 counts as none)
            answered = turn.reply_t if turn.reply_t != ABSENT and turn.reply_t else None
            misreply = None
            if unanswered_by and turn.id in unanswered_by:  # a reply that did not answer it counts for nothing
                answered, misreply = unanswered_by[turn.id]
            unasked = None  # a reply to a turn the LLM was never asked (before it): the gateway's own words
            early = False  # ... or asked, but replied before the LLM's answer came: words made up, not the answer
            if answered is not None and (turn.request_t == ABSENT or turn.request_index > turn.reply_index):
                unasked, answered = answered, None
            elif answered is not None and answered == turn.reply_t and answered < turn.asked + latency:
                unasked, answered, early = answered, None, True
            if folded and (answer := folded.get(turn.id)) and (answered is None or answer < answered):
                answered, unasked = answer, None
            if answered is not None and answered <= deadline:  # answered in time: when it was given up is no matter
                free = answered
                examined += 1
            elif (given_up := _given_up(turn, stops, stop_reach, ahead, deadline)) is not None and given_up <= deadline \
                    and (answered is None or answered > given_up):
                free = given_up  # abandoned, or the process stopped first (held ones are owed after it): not examined
            elif answered is not None:
                violations.append(_violation(m, turn, start, behind, deadline, answered, misreply))
                free, examined = answered, examined + 1
            else:
                violations.append(_violation(m, turn, start, behind, deadline, None, misreply, unasked, early))
                free, examined = deadline, examined + 1
            behind = turn
    judged, late = _delegated(m, within, stops, stop_reach, ahead, locks)
    violations += late
    examined += judged
    violations.sort(key=lambda v: v.records)  # in log order, whatever the chat
    return Verdict("I9", "fail" if violations else "pass", tuple(violations), examined=examined)


def _delegated(m: RunModel, within: int, stops: list[tuple[int, int]], stop_reach: list[int], ahead: set[int],
               locks: list[tuple[int, int]]) -> tuple[int, list[Violation]]:
    """A delegated task the LLM was asked for gets its result within the bound, counted from
    that request (a gateway may run its subagents one at a time; whether a live session's task
    is asked at all is I6's, and to which chat its result goes): a gateway that asks and drops
    the answer passed every check (the audit of lazy gateways, 2026-12-06). Excused as a chat
    turn is, by a SIGTERM or crash before the deadline."""
    out: list[Violation] = []
    examined = 0
    for turn in m.turns.values():
        if not turn.delegate or turn.request_t == ABSENT:
            continue
        start = turn.request_t
        deadline = _extended(start + within, start, within, locks) if locks else start + within
        answered = turn.reply_t if turn.reply_t != ABSENT and turn.reply_t else None
        made_up = answered is not None and (turn.reply_index < turn.request_index or answered < turn.asked + m.config.turn_latency)
        if answered is not None and answered <= deadline and not made_up:
            examined += 1
            continue
        given_up = _given_up(turn, stops, stop_reach, ahead, deadline)
        if not made_up and given_up is not None and given_up <= deadline and (answered is None or answered > given_up):
            continue
        examined += 1
        task = f"delegated task {turn.id} of chat {turn.chat}, asked of the LLM at {m.at(start)},"
        if made_up:
            out.append(Violation(f"{task} got a result at {m.at(answered)}, before the LLM's answer could come "
                                 f"({format_duration(m.config.turn_latency)} after the request): words of the gateway's own",
                                 (turn.request_index, turn.reply_index), answered, turn.session, (turn.id,)))
        elif answered is None:
            out.append(Violation(f"{task} never got its result; owed by {m.at(deadline)}", (turn.request_index,), deadline,
                                 turn.session, (turn.id,)))
        else:
            out.append(Violation(f"{task} got its result at {m.at(answered)}; owed by {m.at(deadline)}",
                                 (turn.request_index, turn.reply_index), answered, turn.session, (turn.id,)))
    return examined, out


def _extended(deadline: int, start: int, within: int, locks: list[tuple[int, int]]) -> int:
    """A lock that lands before the deadline holds the write: the bound restarts at its end."""
    for locked, until in locks:
        if locked > deadline:
            break
        if until >= start:
            deadline = max(deadline, until + within)
    return deadline


def _given_up(turn: Turn, stops: list[tuple[int, int]], stop_reach: list[int], ahead: set[int],
              deadline: int) -> int | None:
    """When the turn stopped being owed, if by its deadline: the /stop that abandoned it (the
    model's `done`), or the first SIGTERM or crash after it arrived (the first of `stops` past
    its index: where `stop_reach`, their running maximum index, first passes it). One at the
    deadline's own instant gives it up only if it ran ahead of the timers due then (`ahead`:
    ordered before them, or a crash point inside one of their steps; a /stop ordered before
    them, by its command's record): a reply at the deadline is in time, and such a stop may have
    cut it off; after them, the reply was not coming."""
    k = bisect_right(stop_reach, turn.index)
    stop = stops[k][0] if k < len(stops) else None
    if stop == deadline and stops[k][1] not in ahead:
        stop = deadline + 1  # past it: no excuse
    if turn.ended_by == "/stop":
        done = turn.done_t
        if done == deadline and turn.done_index not in ahead:
            done = deadline + 1
        return done if stop is None else min(done, stop)
    return stop


def _unanswering(m: RunModel) -> dict[str, tuple[int | None, int]]:
    """Turns with a reply record that did not answer them (`RunModel.unanswering`: delivered to
    another chat's outbox, or carrying a copy of the user's message and not the answer): when
    a reply that did answer each came (None: none did), and the first one that did not."""
    if not m.unanswering:
        return {}
    out: dict[str, tuple[int | None, int]] = {}
    for index, r in m.of("reply"):
        turn = m.turns.get(r.turns[0]) if r.turns else None
        if turn is None or turn.id not in m.unanswering:
            continue
        wrong = m.unanswering[turn.id]
        if turn.id not in out:
            out[turn.id] = (None, wrong[0])
        if index not in wrong and out[turn.id][0] is None:
            out[turn.id] = (r.t, wrong[0])
    return out


def _misreply_words(m: RunModel, turn: Turn, index: int) -> str:
    """What was wrong with the reply record at `index`, credited to `turn`."""
    r = m.records[index]
    if r.chat != turn.chat:
        return f"its reply at {m.at(r.t)} went to chat {r.chat}, not {turn.chat}"
    return f"the reply at {m.at(r.t)} named it but carried no answer to it"


def _violation(m: RunModel, turn: Turn, start: int, behind: Turn | None, deadline: int, answered: int | None,
               misreply: int | None = None, unasked: int | None = None, early: bool = False) -> Violation:
    waited = ""
    if start > turn.arrival and behind is not None:
        waited = f" (behind {behind.id} until {m.at(start)})"
    delivered = f"{turn.id} delivered at {m.at(turn.arrival)}{waited}"
    wrong = f" ({_misreply_words(m, turn, misreply)})" if misreply is not None else ""
    records = (turn.index,) if misreply is None else (turn.index, misreply)
    if answered is None:
        admitted = ""
        if unasked is not None and early:
            admitted = (f" (a reply came at {m.at(unasked)}, before the LLM's answer: asked at {m.at(turn.asked)}, "
                        f"it answers {format_duration(m.config.turn_latency)} later)")
        elif unasked is not None:
            admitted = f" (a reply came at {m.at(unasked)}, but the LLM was not asked {'before it' if turn.request else 'for it'})"
        elif turn.request is None:
            admitted = " (the LLM was never asked)"
        return Violation(f"{delivered} was never answered{admitted}{wrong}; owed by {m.at(deadline)}",
                         records, deadline, turn.session, (turn.id,))
    return Violation(f"{delivered} was answered at {m.at(answered)}{wrong}; owed by {m.at(deadline)}",
                     (*records, turn.reply_index) if misreply is None else records, answered, turn.session, (turn.id,))
