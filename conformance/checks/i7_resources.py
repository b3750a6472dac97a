"""I7 bounded resources: never more idle agents cached than the cap; an agent of a `none`
session is still reaped after the idle TTL (plus one sweep interval); nothing runs after
shutdown."""

from __future__ import annotations

from conformance.checks.model import RunModel
from conformance.verdict import Verdict, Violation
from sim.clock import format_duration


def check(m: RunModel) -> Verdict:
    violations: list[Violation] = []
    samples = m.of("resources")
    cap, ttl = m.config.cache_cap, m.config.idle_ttl
    slack = int(m.profile.get("sweep_interval", 0))
    chat_of = {t.session: t.chat for t in m.turns.values() if t.session}
    activity: dict[str, list[int]] = {}
    for t in m.turns.values():
        for r in (t.request, t.reply):
            if r is not None and t.session:
                activity.setdefault(t.session, []).append(r.t)
    over_reported = leak_reported = False
    final_stop = next((i for i, r in m.of("sigterm") if r.d("final")), None)
    for n, (index, r) in enumerate(samples):
        idle = [sid for sid, busy in r.d("cached", []) if not busy]
        if len(idle) > cap and not over_reported:
            over_reported = True
            violations.append(Violation(
                f"the agent cache held {len(idle)} idle agents at {m.at(r.t)} (cap {cap}): {', '.join(idle)}",
                (index,), r.t))
        until = samples[n + 1][1].t if n + 1 < len(samples) else r.t
        for sid in idle:
            chat = chat_of.get(sid)
            if chat is None or m.policy(chat).mode != "none" or leak_reported:
                continue
            last = max((t for t in activity.get(sid, []) if t <= r.t), default=None)
            if last is not None and until - last > ttl + slack:
                leak_reported = True
                violations.append(Violation(
                    f"the agent of session {sid} (reset policy none) was still cached at {m.at(until - 1)}, idle since "
                    f"{m.at(last)} (idle TTL {format_duration(ttl)}, sweep every {format_duration(slack)})",
                    (index,), r.t, sid))
    if final_stop is not None:
        after = [(i, r) for i, r in samples if i > final_stop]
        if after:
            index, r = after[-1]
            cached, running = r.d("cached", []), r.d("running", 0)
            if cached or running:
                violations.append(Violation(
                    f"after shutdown the gateway still held {len(cached)} agents and {running} running tasks", (index,), r.t))
        for index, r in m.of("threads"):
            if index > final_stop and r.d("running", 0):
                violations.append(Violation(
                    f"after shutdown {r.d('running')} threads the gateway started were still running", (index,), r.t))
    return Verdict("I7", "fail" if violations else "pass", tuple(violations), examined=len(samples))
