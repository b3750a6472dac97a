"""I4 no double ingest: no turn ingested twice into a backend (its user message or its reply), stored twice (in one session
or in two), replied to twice or carried by two sessions' on_session_end; no on_session_end
twice for one life of a session."""

from __future__ import annotations

from array import array
from bisect import bisect_left
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field

from conformance.checks.ingests import ingests
from conformance.checks.model import RunModel
from conformance.checks.text import at_times
from conformance.harness.verdict import Verdict, Violation
from conformance.observations import ingested_halves


def check(m: RunModel) -> Verdict:
    violations: list[Violation] = []
    # A half a backend took again (`ingests`: one pass over the ingests, shared with I3); the
    # first ingest of each is found again for its violation only.
    taken = m.derived(ingests)
    examined = taken.first_users
    repeated = {key: [list(users), list(replies)] for key, (users, replies) in taken.repeated.items()}
    if repeated:
        _first_ingests(m, {(backend, half, turn): lists[half] for (backend, turn), lists in repeated.items()
                           for half in (0, 1) if lists[half]})

    # In log order of each turn's first ingest (turns of one record in the record's order).
    def order(item: tuple[tuple[str, str], list[list[int]]]) -> tuple[int, int]:
        (_backend, turn), (users, replies) = item
        at = (users or replies)[0]
        record = m.records[at]
        return at, (record.turns if users else ingested_halves(record)[1]).index(turn)

    for (backend, turn), (users, replies) in sorted(repeated.items(), key=order):
        indexes, what = (users, turn) if users else (replies, f"the reply of {turn}")
        violations.append(Violation(
            f"backend '{backend}' ingested {what} {len(indexes)} times: at {at_times(m, indexes[:3])}",
            tuple(indexes), m.records[indexes[1]].t, m.records[indexes[0]].session, (turn,)))
    violations += _stored_twice(m)
    violations += _ended_twice(m)
    # Each turn's first on_session_end, and, for a turn that a second session's end carried too,
    # session -> its first end index (a dict for every turn was most of I4's memory on long runs).
    end_session: dict[int, str] = {}
    inputs, turns = m.places().indexes, m.turns  # a turn's place in log order: bisect_left(inputs, turn.index)
    first_known = array("q", [-1]) * len(turns)  # by the turn's place
    first_unknown: dict[str, int] = {}
    carriers: dict[str, dict[str, int]] = {}
    for index, r in m.of("on_session_end"):
        examined += 1
        session = end_session[index] = r.session or ""
        for turn in r.turns:
            if (model_turn := turns.get(turn)) is not None:
                at = bisect_left(inputs, model_turn.index)
                first = first_known[at]
                if first < 0:
                    first = first_known[at] = index
            else:
                first = first_unknown.setdefault(turn, index)
            if first != index and end_session[first] != session:
                carriers.setdefault(turn, {end_session[first]: first}).setdefault(session, index)
    del first_known, first_unknown

    def first_carried(kv: tuple[str, dict[str, int]]) -> tuple[int, int]:  # its first end, and its place in it
        first = min(kv[1].values())
        return first, m.records[first].turns.index(kv[0])

    for turn, sessions in sorted(carriers.items(), key=first_carried):
        names = sorted(sessions, key=lambda s: sessions[s])
        violations.append(Violation(
            f"turn {turn} was delivered in on_session_end of {len(sessions)} sessions: {', '.join(names)}",
            tuple(sessions[s] for s in names), m.records[sessions[names[1]]].t, names[1], (turn,)))
    examined += len(m.turns)
    if twice := sorted((t for t in m.turns.values() if t.replies > 1), key=lambda t: t.index):
        replies: dict[str, list[int]] = defaultdict(list)
        for index, r in m.of("reply"):
            if r.turns:
                replies[r.turns[0]].append(index)
        for turn in twice:
            indexes = replies[turn.id]
            violations.append(Violation(
                f"turn {turn.id} was replied to {turn.replies} times: at {at_times(m, indexes[:3])}", tuple(indexes),
                m.records[indexes[1]].t, turn.session, (turn.id,)))
    return Verdict("I4", "fail" if violations else "pass", tuple(violations), examined=examined)


def _first_ingests(m: RunModel, unfound: dict[tuple[str, int, str], list[int]]) -> None:
    """Put each repeated half's first ingest at the head of its list (one more pass over the
    ingests, made only for a violation)."""
    for index, r in m.of("ingest"):
        backend = r.detail.get("backend")
        for half, ids in enumerate(ingested_halves(r)):
            for turn in ids:
                if (lists := unfound.pop((backend, half, turn), None)) is not None:
                    lists.insert(0, index)
        if not unfound:
            return


def _stored_twice(m: RunModel) -> list[Violation]:
    """Rows stored twice in one session, or one turn stored in two sessions (each said once)."""
    out: list[Violation] = []
    said: set[tuple[str, ...]] = set()
    # The last snapshot without a repeat, kept for the next (a log in memory only: a spilled one
    # keeps no snapshot), see `_repeats`.
    last = _Held(bytearray(len(m.places().turns))) if type(m.records) is list else None
    for index, snap in m.of("durable"):
        if not _repeats(m, snap.d("sessions", {}), last):
            continue
        holders: dict[str, str] = {}  # turn -> first session holding its user row
        shared: dict[str, list[str]] = {}
        sessions = snap.d("sessions", {})
        for sid in sorted(sessions):  # one session's rows at a time (a spilled snapshot loads each as read)
            body = sessions[sid]
            seen: set[tuple[str, str]] = set()
            doubled: set[str] = set()
            for role, turn, _vis in body["rows"]:
                if not turn:
                    continue
                if (role, turn) in seen:
                    doubled.add(turn)
                    continue
                seen.add((role, turn))
                if role == "user":
                    first = holders.setdefault(turn, sid)
                    if first != sid:
                        shared.setdefault(turn, [first]).append(sid)
            if doubled and (sid, *sorted(doubled)) not in said:
                said.add((sid, *sorted(doubled)))
                out.append(Violation(
                    f"session {sid} stores {', '.join(sorted(doubled))} more than once at snapshot '{snap.d('label')}' "
                    f"({m.at(snap.t)})", (index,), snap.t, sid, tuple(sorted(doubled))))
        for turn, sids in shared.items():
            if (turn,) not in said:
                said.add((turn,))
                out.append(Violation(
                    f"turn {turn} is stored in {len(sids)} sessions at snapshot '{snap.d('label')}' ({m.at(snap.t)}): "
                    f"{', '.join(sids)}", (index,), snap.t, sids[0], (turn,)))
    return out


@dataclass(slots=True)
class _Held:
    """What `_repeats` read of the last snapshot without a repeat: each session's rows, and the
    places and unknown ids of their user turns; every such place marked in `held` (a byte a
    turn) and every unknown id in `strays`."""

    held: bytearray
    sessions: dict[str, tuple[list, array[int], list[str]]] = field(default_factory=dict)
    strays: set[str] = field(default_factory=set)


def _repeats(m: RunModel, sessions: Mapping[str, dict], last: _Held | None = None) -> bool:
    """Whether a snapshot repeats a row in a session or a user turn across sessions (the
    common answer, no). A user turn the model knows is marked held by its place (a byte a turn:
    a set of every stored turn was I4's memory at a long run's final snapshot); one it does
    not know, in a set. `last`: the last snapshot without a repeat, updated to this one: a
    session whose rows are the same again is neither read nor marked again (those sessions
    held no turn twice then, so a repeat needs a session read now); the others' marks are
    taken back first."""
    places = m.places()
    indexes, turns_get = places.indexes, m.turns.get
    keep = last is not None  # a spilled log's snapshot keeps nothing for the next: its final one is every row
    if last is None:
        last = _Held(bytearray(len(places.turns)))
    held, strays, before = last.held, last.strays, last.sessions
    kept: dict[str, tuple[list, array[int], list[str]]] = {}
    for sid, entry in before.items():
        body = sessions.get(sid)
        if body is not None and body["rows"] == entry[0]:
            kept[sid] = entry
            continue
        for at in entry[1]:
            held[at] = 0
        strays.difference_update(entry[2])
    last.sessions = kept
    for sid, body in sessions.items():
        if sid in kept:
            continue
        rows = body["rows"]  # (role, turn) distinct in the session: each role's turns distinct (no pair a row)
        users: list[str] = []
        replies: list[str] = []
        others: list[tuple[str, str]] = []
        for role, turn, _vis in rows:  # one pass over a snapshot's rows (every row of the run at the last)
            if turn:
                if role == "user":
                    users.append(turn)
                elif role == "assistant":
                    replies.append(turn)
                else:
                    others.append((role, turn))
        if len(set(users)) != len(users) or len(set(replies)) != len(replies) or len(set(others)) != len(others):
            return _forget(last)
        mine, unknown = array("i"), []
        for turn_id in users:
            turn = turns_get(turn_id)
            if turn is None:
                unknown.append(turn_id)
            else:
                mine.append(bisect_left(indexes, turn.index))
        if keep:
            kept[sid] = (rows, mine, unknown)  # taken back by the next snapshot, marked or not
        for at in mine:
            if held[at]:
                return _forget(last)
            held[at] = 1
        for turn_id in unknown:
            if turn_id in strays:
                return _forget(last)
            strays.add(turn_id)
    return False


def _forget(last: _Held) -> bool:
    """A repeat: nothing of this snapshot is kept for the next (it is read whole again)."""
    last.held[:] = bytes(len(last.held))
    last.strays.clear()
    last.sessions = {}
    return True


def _ended_twice(m: RunModel) -> list[Violation]:
    """More than one on_session_end in one life of a session (a /resume starts a new life)."""
    out: list[Violation] = []
    covered: set[str] = set()
    lives = []  # (session, (index, t) of its ends) of each life ended more than once: not the records (they carry every turn)
    for chat in sorted(m.segments):
        for seg in m.segments[chat]:
            if seg.session is not None:
                covered.add(seg.session)
                if len(ends := m.ends_in(seg)) > 1:
                    lives.append((seg.session, [(i, r.t) for i, r in ends]))
    for session in sorted({r.session for _i, r in m.of("on_session_end") if r.session} - covered):
        if len(ends := m.of_session("on_session_end", session)) > 1:
            lives.append((session, [(i, r.t) for i, r in ends]))
    for session, times in lives:
        out.append(Violation(
            f"session {session} got {len(times)} on_session_end calls: at {at_times(m, [i for i, _ in times])}",
            tuple(i for i, _ in times), times[1][1], session))
    return out
