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
from collections.abc import Mapping
from operator import attrgetter, itemgetter
from typing import NamedTuple

from conformance.checks.deletions import deletions, excused_from_store
from conformance.checks.model import NEVER, RunModel, Turn
from conformance.checks.model.facts import _ABSENT as ABSENT
from conformance.checks.text import SnapshotLabel, abandoned_words, turn_list
from conformance.harness.verdict import Verdict, Violation


def check(m: RunModel) -> Verdict:
    violations: list[Violation] = []
    reported: set[tuple[str, str]] = set()
    examined = 0
    acked = sorted([t for t in m.turns.values() if t.reply_t != ABSENT], key=attrgetter("reply_index"))  # acked
    acked_at = [t.reply_index for t in acked]
    sessions = [t.session or "" for t in acked]
    # Only a deletion of the session, or a crash without claimed durability, excuses a turn.
    excusable = {cut.session for cut in deletions(m)}
    crash_durable = m.profile.get("crash_durable", True)
    abandoned = sorted([t for t in m.turns.values() if t.reply_t == ABSENT and m.unacknowledged(t) and t.done_index < NEVER],
                       key=attrgetter("done_index"))  # the test of a reply first: no call a replied turn
    abandoned_at = [t.done_index for t in abandoned]
    # session -> (its rows at the last snapshot, what was read of them): a session whose rows
    # are the same again is not read again (a log in memory only: a spilled one keeps no snapshot)
    # Each session's turn ids are kept in dicts, not sets: a session's few dozen turns take
    # ≈ 80 bytes each in a set, 30 in a dict. A snapshot is judged session by session, so a
    # spilled log's final snapshot (every turn of a long run) is read one session at a time.
    parsed: dict[str, _Read] | None = {} if type(m.records) is list else None
    # session -> (its rows as read, its owed turns) when last judged, in such a log: a session the
    # same in both at a later snapshot adds nothing (whatever was wrong was said then).
    judged: dict[str, tuple[_Read, list[int]]] | None = {} if parsed is not None else None
    for index, snap in m.of("durable"):
        stored = snap.d("sessions", {})
        where = _Where(stored)
        label = SnapshotLabel(m, snap)  # its words (a local time) made only for a violation
        gone = abandoned[: bisect_left(abandoned_at, index)]
        examined += len(gone)
        violations += _left_behind(m, gone, stored, label, index, snap.t, reported)
        # session -> its owed turns' places in `acked`, made per snapshot (a list of every turn's
        # place kept for the whole check held ≈ 30 MB more at 10^6 events than it saved)
        owed_by_session: dict[str, list[int]] = {}
        upto = bisect_left(acked_at, index)
        examined += upto
        for k in range(upto):
            turn, session = acked[k], sessions[k]
            if (session in excusable or not crash_durable) and excused_from_store(m, turn, index):
                continue
            owed_by_session.setdefault(session, []).append(k)
        found: list[tuple[int, Violation]] = []  # (place in `acked`, violation): said in acknowledgment order
        out_of_order: list[Violation] = []
        for session, owed in owed_by_session.items():
            body = stored.get(session)
            read = _NOTHING
            if body:
                last_read = parsed.get(session) if parsed is not None else None
                if last_read is not None and last_read.rows == body["rows"]:
                    read = last_read  # unchanged since the last snapshot: as read then (no call)
                else:
                    read = _read(body["rows"])
                    if parsed is not None:
                        parsed[session] = read
            if judged is not None:
                last = judged.get(session)
                if last is not None and last[0] is read and last[1] == owed:
                    continue
                judged[session] = (read, owed)
            users, replied, distinct, apart = read.users, read.replied, read.distinct, read.apart
            cut = body.get("cut") if body else None  # turns a row named by their tag alone (`observations.whole_turns`)
            doubled = len(distinct) < len(users)  # a turn stored twice somewhere in the session
            for k in owed:
                turn = acked[k]
                count = 1 if turn.id in distinct else 0
                if count and doubled:
                    count = users.count(turn.id)
                if count == 1 and turn.id in replied:
                    if turn.id not in apart:
                        continue
                    after = apart[turn.id]
                    where_reply = f"it follows {after}'s question" if after else "it comes before any question"
                    problem = ("apart", f"turn {turn.id} of session {session} is stored with its reply apart from its "
                                        f"question ({where_reply})")
                elif cut and turn.id in cut and count < 2:
                    lost = "its row keeps the tag but not what the user said" if count == 0 else \
                        "its reply row keeps the tag but not the LLM's answer"
                    problem = ("cut", f"turn {turn.id} of session {session} is stored cut: {lost}")
                else:
                    problem = _problem(m, turn, count, where)
                if (turn.id, problem[0]) in reported:
                    continue
                reported.add((turn.id, problem[0]))
                found.append((k, Violation(f"{problem[1]} at {label}", (turn.reply_index, index), snap.t, session,
                                           (turn.id,))))
            ids = [acked[k].id for k in owed]
            wanted = set(ids)
            seen = list(dict.fromkeys([t for t in users if t in wanted]))
            if seen == ids or (session, "order") in reported:
                continue
            kept = set(seen)
            expected = sorted((t for t in ids if t in kept), key=lambda t: m.turns[t].request_index)
            if seen != expected:
                reported.add((session, "order"))
                out_of_order.append(Violation(
                    f"session {session}'s stored turns are out of order at {label}: {turn_list(seen)}, "
                    f"asked as {turn_list(expected)}", (index,), snap.t, session))
        violations += [violation for _k, violation in sorted(found, key=itemgetter(0))] + out_of_order
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


class _Read(NamedTuple):
    """What I2 reads of one session's rows: its user rows' turn ids in stored order, the turns
    with an assistant row, the distinct user turns, and the turns whose reply is apart."""

    rows: list
    users: list[str]
    replied: dict[str, None]
    distinct: dict[str, None]
    apart: dict[str, str]


_NOTHING = _Read([], [], {}, {}, {})


def _read(rows: list) -> _Read:
    """One session's rows read."""
    # One pass over the rows (a run's last snapshot is every row of it). A reply is apart when the
    # last user row before it is another turn's (rows of other roles between them are no matter):
    # kept with that turn, '' for none.
    users: list[str] = []
    replied: dict[str, None] = {}
    apart: dict[str, str] = {}
    asking = ""
    for role, turn, _vis in rows:
        if not turn:
            continue
        if role == "user":
            users.append(turn)
            asking = turn
        elif role == "assistant":
            replied[turn] = None
            if turn != asking:
                apart.setdefault(turn, asking)
    return _Read(rows, users, replied, dict.fromkeys(users), apart)


class _Where:
    """Which sessions of a snapshot hold a turn's user row (built on first use: for a violation)."""

    def __init__(self, sessions: Mapping[str, dict]) -> None:
        self.sessions, self.table = sessions, None

    def others(self, turn: str, session: str) -> list[str]:
        if self.table is None:
            self.table = {}
            for sid in sorted(self.sessions):
                for t in dict.fromkeys(t for role, t, _vis in self.sessions[sid]["rows"] if role == "user" and t):
                    self.table.setdefault(t, []).append(sid)
        return [sid for sid in self.table.get(turn, []) if sid != session]


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
