"""I3 no lost turn (memory): by quiescence every acknowledged turn reached every backend,
including what a batching provider still buffered at a session end, an eviction or SIGTERM
(and, for a gateway that claims crash durability, at a crash)."""

from __future__ import annotations

from conformance.checks.model import RunModel
from conformance.checks.text import turn_list
from conformance.verdict import Verdict, Violation


def check(m: RunModel) -> Verdict:
    backends = ["recorder", *(p.name for p in m.config.providers)]
    ingested: dict[str, set[str]] = {b: set() for b in backends}
    for _index, r in m.of("ingest"):
        ingested.setdefault(r.d("backend"), set()).update(r.turns)
    crashes = [i for i, _ in m.of("crash")]
    excused_before = crashes[-1] if crashes and not m.profile.get("crash_durable", True) else -1
    violations: list[Violation] = []
    examined = 0
    turns = sorted((t for t in m.turns.values() if t.acked and not t.delegate), key=lambda t: t.reply_index)
    for backend in backends:
        missing = []
        for turn in turns:
            examined += 1
            if turn.id in ingested[backend] or turn.reply_index < excused_before:
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
    return Verdict("I3", "fail" if violations else "pass", tuple(violations), examined=examined)

