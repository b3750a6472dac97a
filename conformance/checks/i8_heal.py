"""I8 heal: a live session whose row was deleted is recreated under the same id with its
full transcript at the next flush; a foreign-key failure with the row present never
duplicates it; a delegate child whose parent was deleted is recreated without the parent;
replayed history keeps its visibility flags.

Judged on the final durable state, against each session's latest deletion (an earlier one
is superseded: the store no longer shows what its heal wrote; I2 judges the checkpoints).
"""

from __future__ import annotations

from collections import Counter

from conformance.checks.deletions import Deletion, deletions, excused_from_store
from conformance.checks.i2_store import snapshot_rows
from conformance.checks.model import NEVER, RunModel
from conformance.checks.text import turn_list
from conformance.verdict import Verdict, Violation


def check(m: RunModel) -> Verdict:
    final = m.final
    if final is None:
        return Verdict("I8", "skip", reason="no final durable state in the log")
    rows = snapshot_rows(final.detail)
    sessions = final.d("sessions", {})
    violations: list[Violation] = []
    examined = 0
    cuts = deletions(m)
    latest = {cut.session: cut for cut in cuts}
    stuck_reported: set[str] = set()
    for cut in cuts:
        examined += 1
        violations += _same_id(m, cut)
        if cut.session not in stuck_reported and (stuck := _stuck(m, cut)):
            stuck_reported.add(cut.session)
            violations.append(stuck)
        if latest[cut.session] is cut:
            violations += _recreated(m, cut, rows.get(cut.session), sessions.get(cut.session, {}).get("parent"), sessions)
    for delete_index, r in m.of("delete_parent"):
        children = {t.session for t in m.turns.values() if t.delegate and t.session and t.reply_index > delete_index}
        for child in sorted(children):
            examined += 1
            counts = Counter(rows.get(child, []))
            doubled = sorted(t for t, n in counts.items() if n > 1)
            if doubled:
                violations.append(Violation(
                    f"delegate child {child} stores {turn_list(doubled)} twice after its parent {r.session} was deleted "
                    f"(a foreign-key failure with the child's row present must not replay)", (delete_index,), r.t, child, tuple(doubled)))
    muted = {t.id for t in m.turns.values() if t.muted}
    for sid, body in sorted(sessions.items()):
        for role, turn, visibility in body["rows"]:
            if not turn or turn not in m.turns:
                continue
            examined += 1
            want = "hidden" if turn in muted else "visible"
            if visibility != want:
                violations.append(Violation(
                    f"{role} row of {turn} in {sid} is stored {visibility}; it was "
                    f"{'a muted notification reply' if turn in muted else 'not muted'} and must stay {want}",
                    (m.final_index,), final.t, sid, (turn,)))
                break
    return Verdict("I8", "fail" if violations else "pass", tuple(violations), examined=examined)


def _same_id(m: RunModel, cut: Deletion) -> list[Violation]:
    """The chat's next turns after the deletion stay in the deleted session (same id)."""
    chat = m.records[cut.index].chat or ""
    segment = None
    for seg in m.segments.get(chat, []):
        if seg.session == cut.session and seg.start_index <= cut.index:
            segment = seg
    if segment is None:
        return []
    for turn in segment.turns:
        if turn.request_index > cut.index and turn.session != cut.session:
            return [Violation(
                f"session {cut.session}'s row was deleted at {m.at(cut.t)} and turn {turn.id} then landed in "
                f"{turn.session} instead of the recreated {cut.session}", (cut.index, turn.request_index), cut.t,
                cut.session, (turn.id,))]
    return []


def _stuck(m: RunModel, cut: Deletion) -> Violation | None:
    """The deleted session's next turn is written (and so acknowledged) when its answer comes,
    unless the store is locked then: a turn held back longer, or never answered by the final
    sigterm, shows a row that was not recreated at the next flush."""
    final_stop = next((i for i, r in m.of("sigterm") if r.d("final")), NEVER)
    locks = [(r.t, r.d("until", r.t)) for _i, r in m.of("db_locked")]
    pending = [t for t in m.turns.values() if t.session == cut.session and t.request is not None and t.done[1] > cut.index]
    for turn in sorted(pending, key=lambda t: t.request_index)[:1]:
        assert turn.request is not None
        answer = turn.asked + m.config.turn_latency  # the answer to its last ask (a gateway may interrupt and ask again)
        if turn.reply is None and (turn.ended_by == "dropped" or turn.done[1] >= final_stop):
            late = "was never answered"
        elif turn.reply is not None and turn.reply.t > answer and not any(lo < turn.reply.t and hi > answer for lo, hi in locks):
            late = f"got its answer at {m.at(answer)} but was acknowledged only at {m.at(turn.reply.t)}"
        else:
            continue
        return Violation(
            f"session {cut.session}'s row was deleted at {m.at(cut.t)} and not recreated at the next flush: "
            f"turn {turn.id} (asked {m.at(turn.request.t)}) {late}", (cut.index, turn.request_index), cut.t,
            cut.session, (turn.id,))
    return None


def _recreated(m: RunModel, cut: Deletion, stored: list[str] | None, parent: str | None, sessions: dict) -> list[Violation]:
    """After its next flush the row is back, with every turn it owes, each once."""
    flush = m.next_ack(cut.session, cut.index)
    if flush is None:
        return []
    owed = [t.id for t in m.acked_in(cut.session) if excused_from_store(m, t, m.final_index) is None]
    if stored is None:
        later = [t.id for t in m.acked_in(cut.session) if t.reply_index > cut.index]
        return [Violation(
            f"session {cut.session}'s row was deleted at {m.at(cut.t)} and never recreated: turn {flush.id} "
            f"({m.at(flush.reply.t if flush.reply else None)}) and every later turn were dropped",
            (cut.index, flush.reply_index), cut.t, cut.session, tuple(later))]
    out = []
    if missing := [t for t in owed if t not in stored]:
        out.append(Violation(
            f"session {cut.session}'s row was deleted at {m.at(cut.t)} and recreated without {turn_list(missing)}: "
            f"the final store holds {turn_list(stored)}", (cut.index, flush.reply_index), cut.t, cut.session, tuple(missing)))
    if doubled := sorted(t for t, n in Counter(stored).items() if n > 1):
        out.append(Violation(
            f"session {cut.session} stores {turn_list(doubled)} more than once after its row was deleted at {m.at(cut.t)}",
            (cut.index,), cut.t, cut.session, tuple(doubled)))
    dangled_later = any(i > cut.index and r.session == parent for i, r in m.of("delete_parent"))  # the surface's doing
    if parent is not None and parent not in sessions and not dangled_later:
        out.append(Violation(
            f"delegate child {cut.session} was recreated pointing at deleted parent {parent}", (cut.index,), cut.t, cut.session))
    return out
