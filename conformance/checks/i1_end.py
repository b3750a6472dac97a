"""I1 exactly-once end: one on_session_end (full transcript) then one finalize per boundary.

A session that reached a boundary gets exactly one memory `on_session_end` carrying its
acknowledged turns in order, each whole (the user's message and the reply), and nothing of a
turn never acknowledged (stopped, interrupted), then exactly one `on_session_finalize`, within
the latency the gateway declared; a session that reached none gets neither (not at eviction,
not at shutdown), nor does a delegate child. A session that had no turn is finalized at most once.
"""

from __future__ import annotations

from collections import Counter
from itertools import islice

from conformance.checks.deletions import lost_cuts
from conformance.checks.model import NEVER, RunModel, Segment
from conformance.checks.model.facts import _ABSENT as ABSENT
from conformance.checks.model.facts import Downtime, eager_due
from conformance.checks.text import abandoned_words, at_times, boundary_words, describe_time_context, turn_list
from conformance.harness.verdict import Verdict, Violation
from conformance.observations import Obs
from sim.clock import format_duration


def _deadline(m: RunModel, seg: Segment, segments: list[Segment], lazy: bool) -> int | None:
    """When the end is owed at the latest (None: not yet owed); `_claim` says why."""
    assert seg.boundary is not None
    if lazy:
        following = _next_with_turns(seg, segments)
        return None if following is None else following.start
    # After the final stop nothing is owed (a turn a backlog kept in flight until then may leave
    # its session unended).
    stopped = m.stopped_at if m.final_stop is None else [*m.stopped_at, Downtime(m.final_stop, NEVER)]
    due = eager_due(seg.boundary, seg.turns, m.latency, stopped)
    return None if due >= NEVER else due + m.latency


def _claim(m: RunModel, seg: Segment, segments: list[Segment], lazy: bool) -> str:
    """How the gateway's claim makes the end owed by `_deadline` (words for a violation)."""
    if lazy:
        if _next_with_turns(seg, segments) is None:
            return "lazy finalization: owed at the chat's next message, and none came"
        return "lazy finalization: owed before the chat's next message"
    return f"eager finalization within {format_duration(m.latency)}" if m.latency else "immediate finalization"


def _what(m: RunModel, seg: Segment) -> str:
    """The segment's boundary in words (built only for a violation: words cost more than checks)."""
    return f"its {seg.reason} boundary at {m.at(seg.boundary)} ({boundary_words(m, seg)})"


def _next_with_turns(seg: Segment, segments: list[Segment]) -> Segment | None:
    return next((s for s in islice(segments, seg.number + 1, None) if s.turns), None)


def check(m: RunModel) -> Verdict:
    violations: list[Violation] = []
    examined = 0
    for chat in sorted(m.segments):
        segments = m.segments[chat]
        lazy_chat = m.finalization(chat) == "lazy"
        for seg in segments:
            if seg.session is None:
                continue
            examined += 1
            # A policy boundary of a lazy chat: the end is owed at the chat's next message.
            violations += _check_segment(m, seg, segments, lazy_chat and seg.reason in ("idle", "daily"))
    violations += _finalized_twice(m)
    for session in sorted(m.delegate_sessions()):  # a child ends with nothing: no end, no finalize
        hooks = sorted([*m.of_session("on_session_end", session), *m.of_session("on_session_finalize", session)],
                       key=_index)
        for i, r in hooks:
            violations.append(Violation(
                f"delegate child session {session} got {r.kind} at {m.at(r.t)}; a child reaches no boundary of its own",
                (i,), r.t, session))
    return Verdict("I1", "fail" if violations else "pass", tuple(violations), examined=examined)


def _index(hook: tuple[int, Obs]) -> int:
    return hook[0]


def _finalized_twice(m: RunModel) -> list[Violation]:
    """A session that had no turn (an empty successor a gateway minted at /new, say) is in no
    segment, so no life of it is judged; it may be finalized or not, but not twice (I4 holds
    its on_session_end so)."""
    finalized = {r.session for _i, r in m.of("on_session_finalize") if r.session}
    if not finalized:
        return []
    covered = {seg.session for segments in m.segments.values() for seg in segments}
    out = []
    for session in sorted(finalized - covered - m.delegate_sessions()):
        if len(fins := m.of_session("on_session_finalize", session)) > 1:
            out.append(Violation(
                f"session {session}, which had no turn, got {len(fins)} on_session_finalize calls: at "
                f"{at_times(m, [i for i, _ in fins])}", tuple(i for i, _ in fins), fins[1][1].t, session))
    return out


def _check_segment(m: RunModel, seg: Segment, segments: list[Segment], lazy: bool) -> list[Violation]:
    session = seg.session or ""
    ends = m.ends_in(seg)
    lo, hi = seg.window  # (not a starred call: see `ends_in`)
    fins = m.of_session("on_session_finalize", session, lo, hi)
    if seg.boundary is None:
        out = [Violation(
            f"session {session} got on_session_end at {m.at(r.t)}{describe_time_context(m, i)} "
            f"but never reached a boundary ({boundary_words(m, seg)})", (i,), r.t, session) for i, r in ends]
        out += [Violation(
            f"session {session} got on_session_finalize at {m.at(r.t)}{describe_time_context(m, i)} "
            f"but never reached a boundary ({boundary_words(m, seg)})", (i,), r.t, session) for i, r in fins]
        return out
    due = _deadline(m, seg, segments, lazy)
    if not ends:
        out = []
        if due is not None:
            out.append(Violation(
                f"session {session} reached {_what(m, seg)} but got no on_session_end "
                f"(owed by {m.at(due)}: {_claim(m, seg, segments, lazy)})",
                (), seg.boundary, session, tuple(t.id for t in seg.turns)))
        if fins:
            i, r = fins[0]
            out.append(Violation(
                f"session {session} got on_session_finalize at {m.at(r.t)} without an on_session_end", (i,), r.t, session))
        return out
    out = []
    if len(ends) > 1:
        out.append(Violation(
            f"session {session} got {len(ends)} on_session_end calls: at {at_times(m, [i for i, _ in ends])}",
            tuple(i for i, _ in ends), ends[1][1].t, session))
    index, end = ends[0]
    if end.t < seg.boundary:
        out.append(Violation(
            f"session {session} got on_session_end at {m.at(end.t)}{describe_time_context(m, index)}, "
            f"before {_what(m, seg)}",
            (index,), end.t, session))
    elif due is not None and lazy and index > _next_request(seg, segments):
        following = _next_with_turns(seg, segments)
        assert following is not None
        out.append(Violation(
            f"session {session} reached {_what(m, seg)} but its on_session_end came only after the chat's next message "
            f"{following.turns[0].id} at {m.at(due)} (lazy finalization)", (index,), end.t, session))
    elif due is not None and not lazy and end.t > due:
        out.append(Violation(
            f"session {session} reached {_what(m, seg)} but its on_session_end came only at {m.at(end.t)} "
            f"(owed by {m.at(due)}: {_claim(m, seg, segments, lazy)})", (index,), end.t, session))
    out += _transcript(m, session, index, end)
    if fins and fins[0][0] < index:  # the first finalize came before the end (fins in log order)
        i, r = fins[0]
        out.append(Violation(
            f"session {session} got on_session_finalize at {m.at(r.t)} before its on_session_end at {m.at(end.t)}",
            (i, index), r.t, session))
    if not fins:
        out.append(Violation(
            f"session {session} got on_session_end at {m.at(end.t)} but no on_session_finalize", (index,), end.t, session))
    elif len(fins) > 1:
        out.append(Violation(
            f"session {session} got {len(fins)} on_session_finalize calls: at {at_times(m, [i for i, _ in fins])}",
            tuple(i for i, _ in fins), fins[1][1].t, session))
    return out


def _next_request(seg: Segment, segments: list[Segment]) -> int:
    """Record index of the chat's next message after the segment (lazy ends are owed before it)."""
    following = _next_with_turns(seg, segments)
    return following.turns[0].request_index if following is not None else NEVER


def _replies(m: RunModel, session: str, index: int, end: Obs, carried: list[str]) -> list[Violation]:
    """A turn is the user's message and the reply to it: the end carries the reply of each
    acknowledged turn it carries (logs from before replies were recorded are not judged)."""
    replies = end.detail.get("replies")
    if replies is None:
        return []
    replied = set(replies)
    # (each list made only when a set test in C says it has something: the common end has neither)
    if not replied.issuperset(carried) and (
            missing := [t for t in carried if t not in replied and m.turns[t].reply_index < index]):
        return [Violation(
            f"on_session_end for {session} carried {turn_list(carried)} without the "
            f"{'reply' if len(missing) == 1 else 'replies'} of {turn_list(missing)}: a turn is the user's "
            f"message and its reply", (index,), end.t, session, tuple(missing))]
    if (named := end.detail.get("apart")) and not (mine := set(carried)).isdisjoint(named):
        apart = [t for t in named if t in mine]
        return [Violation(
            f"on_session_end for {session} carried the {'reply' if len(apart) == 1 else 'replies'} of "
            f"{turn_list(apart)} apart from {'its own message' if len(apart) == 1 else 'their own messages'} (the "
            f"last user message before {'it' if len(apart) == 1 else 'each'} is not the turn's): a turn is the "
            f"user's message and its reply, in order", (index,), end.t, session, tuple(apart))]
    return []


def _unacknowledged(m: RunModel, session: str, index: int, end: Obs) -> list[Violation]:
    """What the end carries of turns never acknowledged (abandoned by /stop, interrupted by
    SIGTERM or a crash): such a turn leaves nothing behind."""
    ids = [*end.turns, *end.detail.get("replies", ())]
    turns = m.turns  # a replied turn (nearly every one an end carries) is acknowledged: no call for it
    never = [turn for t in dict.fromkeys(ids)
             if (turn := turns.get(t)) is not None and turn.reply_t == ABSENT and m.unacknowledged(turn)]
    if not never:
        return []
    return [Violation(
        f"on_session_end for {session} at {m.at(end.t)} carried turn {turn.id}, which was never acknowledged "
        f"({abandoned_words(m, turn)}): a turn never acknowledged leaves nothing behind",
        (index,), end.t, session, (turn.id,)) for turn in never]


def _transcript(m: RunModel, session: str, index: int, end: Obs) -> list[Violation]:
    """The end carries the session's acknowledged turns and nothing of any other."""
    return _unacknowledged(m, session, index, end) + _acknowledged(m, session, index, end)


def _acknowledged(m: RunModel, session: str, index: int, end: Obs) -> list[Violation]:
    """The session's acknowledged turns, in order, once, each whole (what a deletion
    destroyed for good may be missing)."""
    full = [t.id for t in m.acked_in(session, before=index)]
    turns = m.turns
    carried = [t for t in end.turns if (turn := turns.get(t)) is not None and turn.reply_t != ABSENT]  # `turn.acked`
    if carried == full:
        return _replies(m, session, index, end, carried)
    acked = m.acked_in(session, before=index)
    cuts = lost_cuts(m, session, index)
    for cut in reversed(cuts):  # what came after any deletion that may have lost the rest
        if carried == [t.id for t in acked if t.reply_index > cut]:
            return _replies(m, session, index, end, carried)
    lost = cuts[-1] if cuts else -1
    after_loss = [t.id for t in acked if t.reply_index > lost]
    expected = full if any(t not in after_loss for t in carried if t in full) else after_loss
    problems = []
    if missing := [t for t in expected if t not in carried]:
        cut = [t for t in end.detail.get("cut", ()) if t in missing]
        problems.append(f"missing {turn_list(missing)}" + (f"; {turn_list(cut)} carried by the tag alone, not what the "
                                                          f"user said" if cut else ""))
    if late := [t for t in dict.fromkeys(carried) if t not in full and m.turns[t].session == session]:
        problems.append(f"{turn_list(late)} acknowledged only after the end")
    if foreign := [t for t in dict.fromkeys(carried) if m.turns[t].session != session]:
        problems.append(f"{turn_list(foreign)} of another session")
    counts = Counter(carried)
    if repeated := [t for t in counts if counts[t] > 1]:
        problems.append(f"{turn_list(repeated)} repeated")
    if not problems:
        problems.append("out of order")
    return [Violation(
        f"on_session_end for {session} carried {turn_list(carried)} but its acknowledged turns are "
        f"{turn_list(expected)} ({'; '.join(problems)})", (index,), end.t, session, tuple(missing))]
