"""I4 no double ingest: no turn ingested twice into a backend, stored twice, replied twice or
carried by two sessions' on_session_end; no on_session_end twice for one session's life."""

from __future__ import annotations

from collections import Counter, defaultdict

from conformance.checks.model import RunModel
from conformance.checks.text import describe_time_context
from conformance.verdict import Verdict, Violation


def check(m: RunModel) -> Verdict:
    violations: list[Violation] = []
    examined = 0
    seen: dict[tuple[str, str], list[int]] = defaultdict(list)
    for index, r in m.of("ingest"):
        for turn in r.turns:
            seen[(r.d("backend"), turn)].append(index)
    for (backend, turn), indexes in sorted(seen.items(), key=lambda kv: kv[1][0]):
        examined += 1
        if len(indexes) > 1:
            times = " and ".join(f"{m.at(m.records[i].t)}{describe_time_context(m, i)}" for i in indexes[:3])
            violations.append(Violation(
                f"backend '{backend}' ingested {turn} {len(indexes)} times: at {times}",
                tuple(indexes), m.records[indexes[1]].t, m.records[indexes[0]].session, (turn,)))
    for index, snap in m.of("durable"):
        for sid, body in sorted(snap.d("sessions", {}).items()):
            counts = Counter((role, turn) for role, turn, _vis in body["rows"] if turn)
            doubled = sorted({turn for (_role, turn), n in counts.items() if n > 1})
            if doubled:
                violations.append(Violation(
                    f"session {sid} stores {', '.join(doubled)} more than once at snapshot '{snap.d('label')}' ({m.at(snap.t)})",
                    (index,), snap.t, sid, tuple(doubled)))
        if violations and snap.d("label") != "final":
            continue
    carriers: dict[str, set[str]] = defaultdict(set)
    for _index, r in m.of("on_session_end"):
        for turn in r.turns:
            carriers[turn].add(r.session or "")
    for turn, sessions in sorted(carriers.items()):
        if len(sessions) > 1:
            violations.append(Violation(
                f"turn {turn} was delivered in on_session_end of {len(sessions)} sessions: {', '.join(sorted(sessions))}",
                (), None, None, (turn,)))
    for turn in sorted(m.turns.values(), key=lambda t: t.index):
        if turn.replies > 1:
            violations.append(Violation(f"turn {turn.id} was replied to {turn.replies} times", (turn.reply_index,),
                                        turn.reply.t if turn.reply else None, turn.session, (turn.id,)))
    violations = _dedupe(violations)
    return Verdict("I4", "fail" if violations else "pass", tuple(violations), examined=examined)


def _dedupe(violations: list[Violation]) -> list[Violation]:
    out, seen = [], set()
    for v in violations:
        key = (v.session, v.turns, v.message.split(" at snapshot")[0])
        if key not in seen:
            seen.add(key)
            out.append(v)
    return out
