"""I2 no lost turn (store): every acknowledged turn is in the durable store under its
session, in order, exactly once, from the end of its turn on.

Checked at every snapshot of the store in the log (checkpoints, stops, the final state):
each acknowledged turn's user row once under its session, its reply row beside it (the
last user row before the reply is the turn's own: a reply stored after another turn's
question, or before its own, is apart), in the order the turns were asked. After another
surface deletes a session's row, its earlier turns are owed again once the agent holding
them writes or lets go of them (its next flush, eviction, end, SIGTERM); if no live agent
held them, nothing can restore them (`deletions.py`).
A turn never acknowledged (abandoned by `/stop`, interrupted by SIGTERM or a crash) leaves
no row behind in any snapshot after it ended.
"""

from __future__ import annotations

from bisect import bisect_left

from conformance.checks.deletions import deletions, excused_from_store
from conformance.checks.model import NEVER, RunModel, Turn
from conformance.checks.model.facts import _ABSENT as ABSENT
from conformance.checks.text import SnapshotLabel, abandoned_words, turn_list
from conformance.harness.verdict import Verdict, Violation


def snapshot_rows(snapshot_detail: dict) -> dict[str, list[str]]:
    """session -> turn ids of its user rows, in stored order."""
    return {
        sid: [turn for role, turn, _vis in body["rows"] if role == "user" and turn]
        for sid, body in snapshot_detail.get("sessions", {}).items()
    }


def check(m: RunModel) -> Verdict:
    violations: list[Violation] = []
    reported: set[tuple[str, str]] = set()
    examined = 0
    acked = sorted((t for t in m.turns.values() if t.reply_t != ABSENT), key=lambda t: t.reply_index)  # acked
    acked_at = [t.reply_index for t in acked]
    sessions = [t.session or "" for t in acked]
    # Only a deletion of the session, or a crash without claimed durability, excuses a turn.
    excusable = {cut.session for cut in deletions(m)}
    crash_durable = m.profile.get("crash_durable", True)
    abandoned = sorted((t for t in m.turns.values() if m.unacknowledged(t) and t.done_index < NEVER), key=lambda t: t.done_index)
    abandoned_at = [t.done_index for t in abandoned]
    # session -> (its rows at the last snapshot, what was read of them): a session whose rows
    # are the same again is not read again (a log in memory only: a spilled one keeps no snapshot)
    # Each session's turn ids are kept in dicts, not sets: a session's few dozen turns take
    # ≈ 80 bytes each in a set, 30 in a dict (the final snapshot of a long run is every turn).
    parsed: dict[str, tuple[list, list[str], dict[str, None], dict[str, None], dict[str, str]]] | None = \
        {} if type(m.records) is list else None
    for index, snap in m.of("durable"):
        users: dict[str, list[str]] = {}  # session -> turn ids of its user rows, in stored order
        replied: dict[str, dict[str, None]] = {}  # session -> turns with an assistant row
        distinct: dict[str, dict[str, None]] = {}
        apart: dict[str, dict[str, str]] = {}  # session -> turns whose reply is not beside their question
        for sid, body in snap.d("sessions", {}).items():
            rows = body["rows"]
            last = parsed.get(sid) if parsed is not None else None
            if last is not None and last[0] == rows:
                users[sid], replied[sid], distinct[sid], apart[sid] = last[1], last[2], last[3], last[4]
                continue
            users[sid] = [turn for role, turn, _vis in rows if role == "user" and turn]
            replied[sid] = {turn: None for role, turn, _vis in rows if role == "assistant" and turn}
            distinct[sid] = dict.fromkeys(users[sid])
            apart[sid] = _apart(rows)
            if parsed is not None:
                parsed[sid] = (rows, users[sid], replied[sid], distinct[sid], apart[sid])
        where = _Where(users)
        label = SnapshotLabel(m, snap)  # its words (a local time) made only for a violation
        gone = abandoned[: bisect_left(abandoned_at, index)]
        examined += len(gone)
        violations += _left_behind(m, gone, snap.d("sessions", {}), label, index, snap.t, reported)
        owed_by_session: dict[str, list[str]] = {}
        upto = bisect_left(acked_at, index)
        examined += upto
        for k in range(upto):
            turn, session = acked[k], sessions[k]
            if (session in excusable or not crash_durable) and excused_from_store(m, turn, index):
                continue
            owed_by_session.setdefault(session, []).append(turn.id)
            mine = distinct.get(session, ())
            count = int(turn.id in mine)
            if count and len(mine) < len(users[session]):  # a turn stored twice somewhere in the session
                count = users[session].count(turn.id)
            if count == 1 and turn.id in replied[session]:
                if turn.id not in apart[session]:
                    continue
                after = apart[session][turn.id]
                where_reply = f"it follows {after}'s question" if after else "it comes before any question"
                problem = ("apart", f"turn {turn.id} of session {session} is stored with its reply apart from its question "
                                    f"({where_reply})")
            else:
                problem = _problem(m, turn, count, where)
            if (turn.id, problem[0]) in reported:
                continue
            reported.add((turn.id, problem[0]))
            violations.append(Violation(f"{problem[1]} at {label}", (turn.reply_index, index), snap.t, session, (turn.id,)))
        for session, owed in owed_by_session.items():
            wanted = set(owed)
            seen = list(dict.fromkeys(t for t in users.get(session, []) if t in wanted))
            if seen == owed or (session, "order") in reported:
                continue
            kept = set(seen)
            expected = sorted((t for t in owed if t in kept), key=lambda t: m.turns[t].request_index)
            if seen != expected:
                reported.add((session, "order"))
                violations.append(Violation(
                    f"session {session}'s stored turns are out of order at {label}: {turn_list(seen)}, "
                    f"asked as {turn_list(expected)}", (index,), snap.t, session))
    return Verdict("I2", "fail" if violations else "pass", tuple(violations), examined=examined)


def _left_behind(m: RunModel, gone: list[Turn], sessions: dict, label: SnapshotLabel, index: int, t: int,
                 reported: set[tuple[str, str]]) -> list[Violation]:
    """Rows of turns that ended unacknowledged before this snapshot (each turn said once)."""
    if not gone:
        return []
    wanted = {turn.id: turn for turn in gone if (turn.id, "abandoned") not in reported}
    holders: dict[str, dict[str, list[str]]] = {}  # turn -> session -> roles stored
    for sid in sorted(sessions):
        for role, turn, _vis in sessions[sid]["rows"]:
            if turn in wanted:
                holders.setdefault(turn, {}).setdefault(sid, []).append(role)
    out = []
    for turn_id in sorted(holders, key=lambda k: wanted[k].index):
        turn = wanted[turn_id]
        reported.add((turn_id, "abandoned"))
        where = "; ".join(f"{' and '.join(dict.fromkeys(roles))} row in {sid}" for sid, roles in holders[turn_id].items())
        out.append(Violation(
            f"turn {turn_id} (session {turn.session}) was never acknowledged ({abandoned_words(m, turn)}) but its "
            f"{where} is stored at {label}: a turn never acknowledged leaves nothing behind",
            (turn.done[1], index) if turn.done[1] < len(m.records) else (index,), t, turn.session, (turn_id,)))
    return out


class _Where:
    """Which sessions of a snapshot hold a turn's user row (built on first use)."""

    def __init__(self, rows: dict[str, list[str]]) -> None:
        self.rows, self.table = rows, None

    def others(self, turn: str, session: str) -> list[str]:
        if self.table is None:
            self.table = {}
            for sid in sorted(self.rows):
                for t in dict.fromkeys(self.rows[sid]):
                    self.table.setdefault(t, []).append(sid)
        return [sid for sid in self.table.get(turn, []) if sid != session]


def _apart(rows: list) -> dict[str, str]:
    """Turns whose reply row does not follow their own question, each with the turn whose
    question the reply follows ('' for none): beside means the last user row before it is its
    own (rows of other roles, a tool's, between them are no matter)."""
    out: dict[str, str] = {}
    asking = ""
    for role, turn, _vis in rows:
        if not turn:
            continue
        if role == "user":
            asking = turn
        elif role == "assistant" and turn != asking:
            out.setdefault(turn, asking)
    return out


def _problem(m: RunModel, turn: Turn, stored: int, where: _Where) -> tuple[str, str]:
    """(kind, words) of what is wrong with one owed turn in one snapshot."""
    session = turn.session or ""
    if stored == 0:
        others = where.others(turn.id, session)
        if others:
            return "missing", f"turn {turn.id} of session {session} is stored under {', '.join(others)} instead"
        acked = m.at(turn.reply.t if turn.reply else None)
        return "missing", f"turn {turn.id} (session {session}, acknowledged {acked}) is missing from the store"
    if stored > 1:
        return "twice", f"turn {turn.id} is stored {stored} times in session {session}"
    return "reply", f"turn {turn.id} of session {session} is stored without its reply"
