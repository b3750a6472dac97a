"""I1 exactly-once end: one on_session_end (full transcript) then one finalize per boundary.

A session that reached a boundary gets exactly one memory `on_session_end` carrying its
acknowledged turns in order, then exactly one `on_session_finalize`, within the latency the
gateway declared; a session that reached none gets neither (not at eviction, not at shutdown).
"""

from __future__ import annotations

from conformance.checks.model import RunModel, Segment, deletions
from conformance.checks.text import boundary_words, describe_time_context, turn_list
from conformance.observations import Obs
from conformance.verdict import Verdict, Violation
from sim.clock import format_duration


def _window(m: RunModel, seg: Segment, segments: list[Segment]) -> tuple[int, int]:
    """Record indexes that belong to this segment's life of its session (resume reopens it)."""
    later = [s.start_index for s in segments if s.session == seg.session and s.start_index > seg.start_index]
    return seg.start_index if seg.resumes is not None else 0, min(later, default=len(m.records))


def _deadline(m: RunModel, seg: Segment, segments: list[Segment]) -> tuple[int | None, str]:
    """When the end is owed at the latest, and how the gateway's claim makes it so."""
    assert seg.boundary is not None
    if not m.eager and seg.reason in ("idle", "daily"):
        following = [s for s in segments if s.number > seg.number and s.turns]
        if not following:
            return None, "lazy finalization: owed at the chat's next message, and none came"
        return following[0].start, "lazy finalization: owed before the chat's next message"
    due = seg.boundary
    for turn in seg.turns:  # a turn in flight defers the rotation until its reply
        if turn.request is not None and turn.request.t < due and turn.reply is not None and turn.reply.t > due:
            due = turn.reply.t
    back = m.down_at(due)
    if back is not None:
        due = back
    claim = f"eager finalization within {format_duration(m.latency)}" if m.latency else "immediate finalization"
    return due + m.latency, claim


def check(m: RunModel) -> Verdict:
    ends: dict[str, list[tuple[int, Obs]]] = {}
    finals: dict[str, list[tuple[int, Obs]]] = {}
    for index, r in m.of("on_session_end", "on_session_finalize"):
        (ends if r.kind == "on_session_end" else finals).setdefault(r.session or "", []).append((index, r))
    lost = {}
    for cut in deletions(m):
        if cut.lost:
            lost.setdefault(cut.session, cut.index)
    violations: list[Violation] = []
    examined = 0
    for chat in sorted(m.segments):
        segments = m.segments[chat]
        for seg in segments:
            session = seg.session
            if session is None:
                continue
            examined += 1
            lo, hi = _window(m, seg, segments)
            mine = [(i, r) for i, r in ends.get(session, []) if lo <= i < hi]
            fins = [(i, r) for i, r in finals.get(session, []) if lo <= i < hi]
            if seg.boundary is None:
                for i, r in mine:
                    violations.append(Violation(
                        f"session {session} got on_session_end at {m.at(r.t)}{describe_time_context(m, i)} "
                        f"but never reached a boundary ({boundary_words(m, seg)})", (i,), r.t, session))
                for i, r in fins:
                    violations.append(Violation(
                        f"session {session} got on_session_finalize at {m.at(r.t)} but never reached a boundary", (i,), r.t, session))
                continue
            due, claim = _deadline(m, seg, segments)
            what = f"its {seg.reason} boundary at {m.at(seg.boundary)} ({boundary_words(m, seg)})"
            if not mine:
                if due is not None:
                    violations.append(Violation(
                        f"session {session} reached {what} but got no on_session_end (owed by {m.at(due)}: {claim})",
                        (), seg.boundary, session, tuple(t.id for t in seg.turns)))
                continue
            if len(mine) > 1:
                times = " and ".join(f"{m.at(r.t)}{describe_time_context(m, i)}" for i, r in mine)
                violations.append(Violation(
                    f"session {session} got {len(mine)} on_session_end calls: at {times}",
                    tuple(i for i, _ in mine), mine[1][1].t, session))
            index, end = mine[0]
            if end.t < seg.boundary:
                violations.append(Violation(
                    f"session {session} got on_session_end at {m.at(end.t)}{describe_time_context(m, index)}, "
                    f"before {what}", (index,), end.t, session))
            elif due is not None and (end.t > due if m.eager or seg.reason not in ("idle", "daily") else index > _first_request(seg, segments)):
                violations.append(Violation(
                    f"session {session}'s on_session_end came at {m.at(end.t)}, after {what} plus what it declared "
                    f"({claim}: by {m.at(due)})", (index,), end.t, session))
            expected = [t.id for t in m.acked_in(session, before=index) if lost.get(session, 1 << 62) < t.reply_index or session not in lost]
            acked = {t.id for t in m.acked_in(session)}
            carried = [t for t in end.turns if t in acked]
            if carried != expected:
                missing = [t for t in expected if t not in carried]
                detail = f"missing {turn_list(missing)}" if missing else "out of order or repeated"
                violations.append(Violation(
                    f"on_session_end for {session} carried {turn_list(carried)} but its acknowledged turns are "
                    f"{turn_list(expected)} ({detail})", (index,), end.t, session, tuple(missing)))
            after = [(i, r) for i, r in fins if i > index]
            before = [(i, r) for i, r in fins if i < index]
            if before:
                violations.append(Violation(
                    f"on_session_finalize for {session} at {m.at(before[0][1].t)} came before its on_session_end",
                    (before[0][0], index), before[0][1].t, session))
            if not fins:
                violations.append(Violation(
                    f"session {session} got on_session_end at {m.at(end.t)} but no on_session_finalize", (index,), end.t, session))
            elif len(fins) > 1:
                violations.append(Violation(
                    f"session {session} got {len(fins)} on_session_finalize calls", tuple(i for i, _ in fins), fins[1][1].t, session))
            elif not after and not before:
                pass
    for session in sorted(m.delegate_sessions()):
        for i, r in ends.get(session, []):
            violations.append(Violation(
                f"delegate child session {session} got on_session_end at {m.at(r.t)}; a child reaches no boundary of its own",
                (i,), r.t, session))
    return Verdict("I1", "fail" if violations else "pass", tuple(violations), examined=examined)


def _first_request(seg: Segment, segments: list[Segment]) -> int:
    following = [s for s in segments if s.number > seg.number and s.turns]
    return following[0].turns[0].request_index if following else 1 << 62
