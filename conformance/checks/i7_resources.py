"""I7 bounded resources: never more idle agents cached than the cap; an agent of a `none`
session is still reaped after the idle TTL (plus one sweep interval); nothing runs after
a shutdown (any SIGTERM, until the next restart; no thread the gateway started outlives
the final one)."""

from __future__ import annotations

from bisect import bisect_right

from conformance.checks.model import RunModel
from conformance.observations import Obs
from conformance.verdict import Verdict, Violation
from sim.clock import format_duration


def check(m: RunModel) -> Verdict:
    samples = m.of("resources")
    violations = _over_cap(m, samples) + _not_reaped(m, samples) + _left_running(m, samples)
    return Verdict("I7", "fail" if violations else "pass", tuple(violations), examined=len(samples))


def _over_cap(m: RunModel, samples: list[tuple[int, Obs]]) -> list[Violation]:
    cap = m.config.cache_cap
    for index, r in samples:
        cached = r.d("cached", [])
        if len(cached) <= cap:  # no more idle agents than agents
            continue
        idle = [sid for sid, busy in cached if not busy]
        if len(idle) > cap:
            return [Violation(f"the agent cache held {len(idle)} idle agents at {m.at(r.t)} (cap {cap}): {', '.join(idle)}",
                              (index,), r.t)]
    return []


def _not_reaped(m: RunModel, samples: list[tuple[int, Obs]]) -> list[Violation]:
    """Each stretch an agent of a `none` session sat idle in the cache, against the TTL."""
    ttl, slack = m.config.idle_ttl, int(m.profile.get("sweep_interval", 0))
    chat_of = {t.session: t.chat for t in m.turns.values() if t.session}
    # Only agents of `none` sessions are held to the TTL here: follow no other.
    watched = {sid for sid, chat in chat_of.items() if m.policy(chat).mode == "none"}
    if not watched:
        return []
    activity: dict[str, list[int]] = {}
    for t in sorted(m.turns.values(), key=lambda t: t.index):
        for r in (t.request, t.reply):
            if r is not None and t.session in watched:
                activity.setdefault(t.session, []).append(r.t)
    for times in activity.values():
        times.sort()
    out: list[Violation] = []
    reported: set[str] = set()
    since: dict[str, tuple[int, int]] = {}  # session -> (index, t) of the sample it became idle-cached
    stretches: list[tuple[str, int, int, int, bool]] = []  # (session, index, from, until, left)
    for index, r in samples:
        idle = {sid for sid, busy in r.d("cached", []) if not busy and sid in watched}
        for sid in sorted(set(since) - idle):
            start_index, start = since.pop(sid)
            stretches.append((sid, start_index, start, r.t, True))
        for sid in sorted(idle - set(since)):
            since[sid] = (index, r.t)
    last_t = samples[-1][1].t if samples else 0
    stretches += [(sid, i, start, last_t, False) for sid, (i, start) in sorted(since.items())]
    for sid, index, start, until, left in sorted(stretches, key=lambda s: s[1]):
        if sid in reported:
            continue
        times = activity.get(sid, [])
        k = bisect_right(times, start)  # its last turn activity before it went idle
        last = times[k - 1] if k else start
        if until - last > ttl + slack:
            reported.add(sid)
            how = f"stayed cached until {m.at(until)}" if left else f"was still cached at {m.at(until)}"
            out.append(Violation(
                f"the agent of session {sid} (reset policy none) {how}, idle since {m.at(last)} "
                f"(idle TTL {format_duration(ttl)}, sweep every {format_duration(slack)}: due out by {m.at(last + ttl + slack)})",
                (index,), until, sid))
    return out


def _left_running(m: RunModel, samples: list[tuple[int, Obs]]) -> list[Violation]:
    """What the gateway held after each SIGTERM: the last sample before it started again."""
    out: list[Violation] = []
    sample_at = [i for i, _ in samples]
    restarts = [i for i, _ in m.of("restart")]
    for stop, r in m.of("sigterm"):
        k = bisect_right(restarts, stop)
        until = restarts[k] if k < len(restarts) else len(m.records)
        j = bisect_right(sample_at, until - 1)
        if not j:
            continue
        index, state = samples[j - 1]
        cached, running = [sid for sid, _busy in state.d("cached", [])], state.d("running", 0)
        if cached or running:
            which = "the final sigterm" if r.d("final") else "the sigterm"
            held = [f"{_count(len(cached), 'agent')}{_names(cached)}"] if cached else []
            held += [_count(running, "running task")] if running else []
            out.append(Violation(
                f"after {which} at {m.at(r.t)} the gateway still held {' and '.join(held)}", (stop, index), r.t))
    final_stop = next((i for i, r in m.of("sigterm") if r.d("final")), None)
    for index, r in m.of("threads"):  # harness-observed: threads the gateway started and left running
        if final_stop is not None and index > final_stop and r.d("running", 0):
            out.append(Violation(
                f"after the final sigterm at {m.at(m.records[final_stop].t)} {_count(r.d('running'), 'thread')} "
                f"the gateway started {'was' if r.d('running') == 1 else 'were'} still running", (final_stop, index), r.t))
    return out


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def _names(sessions: list[str]) -> str:
    if not sessions:
        return ""
    return f" ({', '.join(sessions[:3])}{', …' if len(sessions) > 3 else ''})"
