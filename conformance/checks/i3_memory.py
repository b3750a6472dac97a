"""I3 no lost turn (memory): by quiescence every acknowledged turn reached every backend,
including what a batching provider still buffered at a session end, an eviction or SIGTERM
(and, for a gateway that claims crash durability, at a crash).

Buffered turns are owed at the boundary itself, not merely eventually: a session's turns
must reach every backend by its on_session_end, and every turn by a graceful SIGTERM,
unless that backend was failing at that moment.

A turn is ingested under its own session: one shipped under another session's id is in
the wrong session's memory (the cross-session hazard of the batching provider in the
seeds), so it does not count as reaching the backend, and it is named.
"""

from __future__ import annotations

from collections.abc import Callable

from conformance.checks.model import RunModel
from conformance.checks.text import turn_list
from conformance.verdict import Verdict, Violation


def check(m: RunModel) -> Verdict:
    backends = ["recorder", *(p.name for p in m.config.providers)]
    ingested: dict[str, set[str]] = {b: set() for b in backends}
    foreign: list[Violation] = []
    for index, r in m.of("ingest"):
        mine = ingested.setdefault(r.d("backend"), set())
        for turn_id in r.turns:
            turn = m.turns.get(turn_id)
            if turn is None or turn.session is None or turn.session == r.session:
                mine.add(turn_id)
            elif len(foreign) < 20:
                foreign.append(Violation(
                    f"backend '{r.d('backend')}' ingested {turn_id} of {turn.session} under session {r.session} "
                    f"at {m.at(r.t)}", (index,), r.t, turn.session, (turn_id,)))
    crashes = [i for i, _ in m.of("crash")]
    excused_before = crashes[-1] if crashes and not m.profile.get("crash_durable", True) else -1
    down = _failing(m)
    moments = _moments(m)
    violations: list[Violation] = foreign  # the cause first: what went under the wrong session
    examined = 0
    turns = sorted((t for t in m.turns.values() if t.acked and not t.delegate), key=lambda t: t.reply_index)
    for backend in backends:
        # A crash excuses what it lost, not what a session end or SIGTERM before it already owed.
        owed_before = {turn for index, t, owed in moments if index < excused_before and not down(backend, t) for turn in owed}
        missing = []
        for turn in turns:
            examined += 1
            if turn.id in ingested[backend] or (turn.reply_index < excused_before and turn.id not in owed_before):
                continue
            missing.append(turn)
        if not missing:
            continue
        sessions = list(dict.fromkeys(t.session or "?" for t in missing))
        first, last = missing[0].reply, missing[-1].reply
        assert first is not None and last is not None
        span = m.at(first.t) if last.t == first.t else f"from {m.at(first.t)} to {m.at(last.t)}"
        violations.append(Violation(
            f"backend '{backend}' never ingested {turn_list([t.id for t in missing])} "
            f"(session {', '.join(sessions)}, acknowledged {span})",
            tuple(t.reply_index for t in missing[:5]), first.t, sessions[0], tuple(t.id for t in missing)))
    violations.extend(_late(m, backends))
    return Verdict("I3", "fail" if violations else "pass", tuple(violations), examined=examined)


def _failing(m: RunModel) -> Callable[[str, int], bool]:
    """Whether a backend was failing (a `backend_fail` fault) at a moment."""
    failing: dict[str, list[tuple[int, int]]] = {}
    for _index, r in m.of("backend_fail"):
        failing.setdefault(r.d("backend"), []).append((r.t, r.d("until")))

    def down(backend: str, t: int) -> bool:
        return any(start <= t < until for start, until in failing.get(backend, []))

    return down


def _moments(m: RunModel) -> list[tuple[int, int, list[str]]]:
    """(index, t, turns owed by then), in log order: each session end owes its session's
    acknowledged turns, each SIGTERM every acknowledged turn."""
    moments: list[tuple[int, int, list[str]]] = []
    for index, end in m.of("on_session_end"):
        if end.session in m.chat_sessions():
            moments.append((index, end.t, [t.id for t in m.acked_in(end.session, before=index)]))
    for index, stop in m.of("sigterm"):
        owed = [t.id for t in m.turns.values() if t.acked and not t.delegate and t.reply_index < index]
        moments.append((index, stop.t, owed))
    return sorted(moments)


def _late(m: RunModel, backends: list[str]) -> list[Violation]:
    """Turns that reached a backend only after the session end or SIGTERM that owed them."""
    first: dict[str, dict[str, tuple[int, int]]] = {backend: {} for backend in backends}  # backend -> turn -> (index, t)
    for index, r in m.of("ingest"):
        mine = first.setdefault(r.d("backend"), {})
        for turn in r.turns:
            mine.setdefault(turn, (index, r.t))
    down = _failing(m)

    def what(index: int) -> str:  # words for a moment, built only for a violation
        r = m.records[index]
        if r.kind == "on_session_end":
            return f"{r.session}'s on_session_end at {m.at(r.t)}"
        return f"the {'final ' if r.d('final') else ''}SIGTERM at {m.at(r.t)}"

    out: list[Violation] = []
    reported: dict[str, set[str]] = {backend: set() for backend in backends}
    for index, t, owed in _moments(m):
        for backend in backends:
            if down(backend, t):
                continue
            mine, said = first[backend], reported[backend]
            late = [turn for turn in owed if (f := mine.get(turn)) is not None and f[1] > t and turn not in said]
            if not late:
                continue
            said.update(late)
            when = mine[late[0]]
            out.append(Violation(
                f"backend '{backend}' took {turn_list(late)} only at {m.at(when[1])}, after {what(index)}: "
                f"what a provider buffers is owed when the session ends or the gateway stops",
                (index, when[0]), when[1], m.turns[late[0]].session, tuple(late)))
    return out
