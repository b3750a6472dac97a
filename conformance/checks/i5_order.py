"""I5 ordering: a session's on_session_end comes after every sync_turn of its turns and before
any hook of its successor; on_session_switch strictly after the end it follows."""

from __future__ import annotations

from conformance.checks.model import RunModel
from conformance.verdict import Verdict, Violation

SUCCESSOR_HOOKS = ("sync_turn", "on_session_switch", "on_session_reset", "on_session_end", "on_session_finalize")


def check(m: RunModel) -> Verdict:
    violations: list[Violation] = []
    examined = 0
    ends = m.of("on_session_end")
    syncs = m.of("sync_turn")
    for chat in sorted(m.segments):
        segments = m.segments[chat]
        for seg in segments:
            session = seg.session
            if session is None or seg.boundary is None:
                continue
            later_lives = [s.start_index for s in segments if s.session == session and s.start_index > seg.start_index]
            hi = min(later_lives, default=len(m.records))
            mine = [(i, r) for i, r in ends if r.session == session and i < hi and (seg.resumes is None or i >= seg.start_index)]
            if not mine:
                continue
            examined += 1
            end_index, end = mine[0]
            for i, r in syncs:
                if r.session == session and end_index < i < hi:
                    violations.append(Violation(
                        f"sync_turn for {', '.join(r.turns)} of {session} came at {m.at(r.t)}, after {session}'s "
                        f"on_session_end at {m.at(end.t)}", (end_index, i), r.t, session, r.turns))
            following = [s for s in segments if s.number > seg.number and s.session and s.session != session]
            if following:
                successor = following[0].session
                for i, r in m.of(*SUCCESSOR_HOOKS):
                    if i < end_index and r.session == successor and i >= seg.start_index:
                        violations.append(Violation(
                            f"{r.kind} of successor session {successor} at {m.at(r.t)} came before {session}'s "
                            f"on_session_end at {m.at(end.t)}", (i, end_index), r.t, session))
                        break
            for i, r in m.of("on_session_switch"):
                if r.d("previous") == session and seg.start_index <= i < end_index:
                    violations.append(Violation(
                        f"on_session_switch {session} → {r.session} at {m.at(r.t)} came before {session}'s "
                        f"on_session_end at {m.at(end.t)}", (i, end_index), r.t, session))
    return Verdict("I5", "fail" if violations else "pass", tuple(violations), examined=examined)
