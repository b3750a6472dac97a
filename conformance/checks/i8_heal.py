"""I8 heal: a live session whose row was deleted is recreated under the same id with its
full transcript at the next flush; a foreign-key failure with the row present never
duplicates it; a delegate child whose parent was deleted is recreated without the parent;
replayed history keeps its visibility flags."""

from __future__ import annotations

from collections import Counter

from conformance.checks.i2_store import snapshot_rows
from conformance.checks.model import RunModel, deletions
from conformance.checks.text import turn_list
from conformance.verdict import Verdict, Violation


def check(m: RunModel) -> Verdict:
    violations: list[Violation] = []
    final = m.final
    if final is None:
        return Verdict("I8", "skip", reason="no final durable state in the log")
    rows = snapshot_rows(final.detail)
    sessions = final.d("sessions", {})
    examined = 0
    for cut in deletions(m):
        examined += 1
        if cut.lost:
            continue
        later = [t for t in m.acked_in(cut.session) if t.reply_index > cut.index]
        if not later:
            continue
        stored = rows.get(cut.session)
        flush = later[0]
        if stored is None:
            violations.append(Violation(
                f"session {cut.session}'s row was deleted at {m.at(cut.t)} and never recreated: turn {flush.id} "
                f"({m.at(flush.reply.t if flush.reply else None)}) and every later turn were dropped",
                (cut.index, flush.reply_index), cut.t, cut.session, tuple(t.id for t in later)))
            continue
        owed = [t.id for t in m.acked_in(cut.session)]
        missing = [t for t in owed if t not in stored]
        if missing:
            violations.append(Violation(
                f"session {cut.session}'s row was deleted at {m.at(cut.t)}; after the next flush (turn {flush.id}) the "
                f"store holds {turn_list(stored)}: {turn_list(missing)} not replayed",
                (cut.index, flush.reply_index), cut.t, cut.session, tuple(missing)))
        doubled = sorted(t for t, n in Counter(stored).items() if n > 1)
        if doubled:
            violations.append(Violation(
                f"session {cut.session} stores {turn_list(doubled)} more than once after its row was deleted at {m.at(cut.t)}",
                (cut.index,), cut.t, cut.session, tuple(doubled)))
        parent = sessions.get(cut.session, {}).get("parent")
        if parent is not None and parent not in sessions:
            violations.append(Violation(
                f"delegate child {cut.session} was recreated pointing at deleted parent {parent}", (cut.index,), cut.t, cut.session))
    for delete_index, r in m.of("delete_parent"):
        children = {t.session for t in m.turns.values() if t.delegate and t.session and t.reply_index > delete_index}
        for child in sorted(children):
            counts = Counter(rows.get(child, []))
            doubled = sorted(t for t, n in counts.items() if n > 1)
            if doubled:
                examined += 1
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
                    (final and m.records.index(final),), final.t, sid, (turn,)))
                break
    return Verdict("I8", "fail" if violations else "pass", tuple(violations), examined=examined)
