"""I2 no lost turn (store): every acknowledged turn is in the durable store under its
session, in order, exactly once, from the end of its turn on.

Checked at every snapshot of the store in the log (checkpoints, stops, the final state).
After another surface deletes a live session's row, its earlier turns are owed again from
the session's next flush; if no live agent held them, nothing can restore them.
"""

from __future__ import annotations

from conformance.checks.model import RunModel, deletions, excused_from_store
from conformance.checks.text import turn_list
from conformance.verdict import Verdict, Violation


def snapshot_rows(snapshot_detail: dict) -> dict[str, list[str]]:
    """session -> turn ids of its user rows, in stored order."""
    return {
        sid: [turn for role, turn, _vis in body["rows"] if role == "user" and turn]
        for sid, body in snapshot_detail.get("sessions", {}).items()
    }


def check(m: RunModel) -> Verdict:
    cuts = deletions(m)
    violations: list[Violation] = []
    reported: set[tuple[str, str]] = set()
    examined = 0
    for index, snap in m.of("durable"):
        rows = snapshot_rows(snap.detail)
        where = {turn: sid for sid, turns in rows.items() for turn in turns}
        label = snap.d("label")
        owed_by_session: dict[str, list[str]] = {}
        for turn in sorted((t for t in m.turns.values() if t.acked and t.reply_index < index), key=lambda t: t.reply_index):
            examined += 1
            session = turn.session or ""
            if excused_from_store(m, turn, index, cuts):
                continue
            owed_by_session.setdefault(session, []).append(turn.id)
            stored_in = where.get(turn.id)
            if stored_in == session or (turn.id, "missing") in reported:
                continue
            reported.add((turn.id, "missing"))
            if stored_in is None:
                message = (f"turn {turn.id} (session {session}, acknowledged {m.at(turn.reply.t if turn.reply else None)}) "
                           f"is missing from the store at snapshot '{label}' ({m.at(snap.t)})")
            else:
                message = f"turn {turn.id} of session {session} is stored under {stored_in} at snapshot '{label}'"
            violations.append(Violation(message, (turn.reply_index, index), snap.t, session, (turn.id,)))
        for session, owed in owed_by_session.items():
            stored = [t for t in rows.get(session, []) if t in set(owed)]
            seen = list(dict.fromkeys(stored))
            expected = [t for t in owed if t in seen]
            if seen != expected and (session, "order") not in reported:
                reported.add((session, "order"))
                violations.append(Violation(
                    f"session {session}'s stored turns are out of order at snapshot '{label}': {turn_list(seen)}, "
                    f"acknowledged as {turn_list(expected)}", (index,), snap.t, session))
    return Verdict("I2", "fail" if violations else "pass", tuple(violations), examined=examined)
