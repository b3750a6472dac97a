"""I5 ordering: a session's on_session_end comes after every sync_turn of its turns and before
any hook of its successor; on_session_switch strictly after the end it follows; an
on_session_reset names the session that begins, not one that has answered or ended, nor a
delegate child."""

from __future__ import annotations

from itertools import islice

from conformance.checks.model import RunModel, Segment
from conformance.checks.model.facts import NEVER
from conformance.harness.verdict import Verdict, Violation
from conformance.observations import Obs


def check(m: RunModel) -> Verdict:
    violations: list[Violation] = []
    examined = 0
    switches: dict[str, list[tuple[int, str | None]]] = {}  # previous session -> (index, new session)
    for i, r in m.of("on_session_switch"):
        switches.setdefault(r.d("previous") or "", []).append((i, r.session))
    for chat in sorted(m.segments):
        segments = m.segments[chat]
        for seg in segments:
            session = seg.session
            if session is None or seg.boundary is None:
                continue
            ends = m.ends_in(seg)
            if not ends:
                continue
            examined += 1
            end_index, end = ends[0]
            for i, r in m.of_session("sync_turn", session, end_index + 1, seg.window[1]):
                violations.append(Violation(
                    f"sync_turn for {', '.join(r.turns)} of {session} came at {m.at(r.t)}, after {session}'s "
                    f"on_session_end at {m.at(end.t)}", (end_index, i), r.t, session, r.turns))
            successor = None  # the next segment of another session (a loop: no generator a segment)
            for later in islice(segments, seg.number + 1, None):
                if later.session and later.session != session:
                    successor = later
                    break
            # From this life's start: a /resume's life starts at the gateway's switch into it (its
            # window), which for resumes queued behind a turn comes after another life's hooks.
            lo = max(seg.start_index, seg.window[0])
            early = _successor_hook(m, lo, end_index, successor) if successor is not None else None
            if early is not None and successor is not None:
                i, r = early
                violations.append(Violation(
                    f"{r.kind} of successor session {successor.session} at {m.at(r.t)} came before {session}'s "
                    f"on_session_end at {m.at(end.t)}", (i, end_index), r.t, session))
            for i, new in switches.get(session, []):
                if seg.window[0] <= i < end_index and (early is None or early[0] != i):
                    violations.append(Violation(
                        f"on_session_switch {session} → {new} at {m.at(m.records[i].t)} came before {session}'s "
                        f"on_session_end at {m.at(end.t)}", (i, end_index), m.records[i].t, session))
    examined += _switches_name_the_session_left(m, violations)
    examined += _resets_name_new_sessions(m, violations)
    return Verdict("I5", "fail" if violations else "pass", tuple(violations), examined=examined)


def _resets_name_new_sessions(m: RunModel, violations: list[Violation]) -> int:
    """`on_session_reset(new_id)` names the session the reset begins: one that has answered no
    turn and had no end before it, and no delegate child. A reset that names the session it
    ended tells a plugin the old conversation was reset and the new one never was (the fourth
    audit of lazy gateways); one that names a child, that a subagent began a conversation (the
    sixth).
    How many resets it examined."""
    resets = list(m.of("on_session_reset"))
    if not resets:
        return 0
    answered: dict[str, int] = {}  # session -> the index of its first reply
    for turn in m.turns.values():
        if turn.reply_session is not None and 0 <= turn.reply_index < answered.get(turn.reply_session, NEVER):
            answered[turn.reply_session] = turn.reply_index
    children = m.delegate_sessions()
    for i, r in resets:
        session = r.session or ""
        if session in children:  # a child has no boundary of its own: nothing resets into it
            violations.append(Violation(
                f"on_session_reset at {m.at(r.t)} named {session}, a delegate child: a reset names the chat "
                f"session it begins", (i,), r.t, session))
            continue
        ended = m.first_of_session("on_session_end", session, 0, i)
        reply = answered.get(session, NEVER)
        if ended is None and reply >= i:
            continue
        if ended is not None:
            why = f"which had ended at {m.at(m.records[ended].t)} (its on_session_end)"
            at = ended
        else:
            why = f"which had answered a turn at {m.at(m.records[reply].t)}"
            at = reply
        violations.append(Violation(
            f"on_session_reset at {m.at(r.t)} named {session}, {why}: a reset names the session it begins",
            (at, i), r.t, session))
    return len(resets)


def _successor_hook(m: RunModel, lo: int, end_index: int, successor: Segment) -> tuple[int, Obs] | None:
    """The first hook of the successor's new life that came before `end_index`: a sync_turn
    of one of its turns, its switch or reset (from `lo`, the predecessor's start), or an end.
    Each kind's first index bounds the next kind's search (most segments find none)."""
    session = successor.session or ""
    first = end_index
    if syncs := m.of_session("sync_turn", session, hi=end_index):
        mine = {t.id for t in successor.turns}
        first = next((i for i, r in syncs if not mine.isdisjoint(r.turns)), end_index)
    for kind, start in (("on_session_switch", lo), ("on_session_reset", lo),
                        ("on_session_end", successor.window[0]), ("on_session_finalize", successor.window[0])):
        if (at := m.first_of_session(kind, session, start, first)) is not None:
            first = at
    return (first, m.records[first]) if first < end_index else None


def _switches_name_the_session_left(m: RunModel, violations: list[Violation]) -> int:
    """`on_session_switch(old, new)` into a chat's next session names as `old` the session the
    chat left: its previous segment's, which ended at the boundary between them (a reset's, an
    expiry's, or the one a /resume left). A switch is optional (no check requires one); one
    that names no previous session, or another session that had turns, tells a provider keyed
    by the old id that the conversation came from nowhere, or from elsewhere (the sixth audit of
    lazy gateways, 2026-12-06: the route's `previous` read before it was updated). Not judged: a
    switch into a chat's first session (none came before it), into a /resume's reopening of the
    session just ended (nothing was left behind), into a session no segment has (a delegate
    child, an empty session made at /new), and an `old` that had no turn (an empty session:
    Hermes mints the successor at /new, so two /new leave one between) or that the previous
    segment's turns landed in (a segment served by two sessions is I6's to judge).
    How many switches it examined."""
    switches = m.by_kind.get("on_session_switch")
    if not switches:
        return 0
    lives: dict[str, list[Segment]] = {}  # session -> the segments that are lives of it
    for segments in m.segments.values():
        for seg in segments:
            if seg.session is not None:
                lives.setdefault(seg.session, []).append(seg)
    examined = 0
    for i in switches:
        r = m.records[i]
        into = [seg for seg in lives.get(r.session or "", ()) if seg.window[0] <= i < seg.window[1]]
        if len(into) != 1 or into[0].number == 0 or into[0].reopens:
            continue
        seg = into[0]
        left = m.segments[seg.chat][seg.number - 1]
        if left.session is None or left.session == seg.session or left.boundary is None:
            continue
        examined += 1
        named = r.d("previous")
        if named == left.session or (named is not None and (
                (named not in m.chat_sessions() and named not in m.delegate_sessions())
                or any(t.session == named for t in left.turns))):
            continue
        why = left.command if left.reason == "new" else "/resume" if left.reason == "switch" else left.reason
        ends = m.ends_in(left)
        violations.append(Violation(
            f"on_session_switch into {seg.session} at {m.at(r.t)} named "
            f"{'no previous session' if named is None else named}; {seg.chat}'s previous session "
            f"{left.session} ended at {m.at(left.boundary)} ({why})",
            (ends[0][0], i) if ends and ends[0][0] < i else (i,), r.t, seg.session))
    return examined
