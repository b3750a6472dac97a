"""I7 bounded resources: never more idle agents cached than the cap; an idle agent is reaped
after the idle TTL (plus one sweep interval), idle since its last turn or since it entered the
cache, whichever is later (a gateway may load an agent without a turn, as at a `/resume`: the
resumed life's idle clock starts there), or, if later, after its session's boundary plus the
declared latency (a gateway may keep it for the end; a `none` session, or a lazy chat's past
its boundary, never ends by itself: its agent is held to the TTL); nothing runs after a
shutdown (any SIGTERM, until the next restart; no thread or process the gateway started
outlives the final one); nothing is held after a crash (a SIGKILL leaves no agent and no task:
one still listed is memory the gateway kept across it, which a real kill loses); and a stopped
gateway does not act, by the log: no call of its own (an LLM request, a reply, a memory or hook
call) after a crash, or after a SIGTERM's own step, until it is started again. Idle means no
turn of its session in flight by the log, whatever the gateway's own busy flag says: a turn the
LLM was asked for is in flight from its delivery (the gateway may store it, or wait out a
locked store, before it asks; a message the platform held, from its request) until its reply,
or until a /stop, SIGTERM or crash abandons it."""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Iterator, Sequence
from itertools import chain, islice
from typing import NamedTuple

from conformance.checks.flights import Flight, Flights
from conformance.checks.model import NEVER, RunModel
from conformance.checks.model.facts import _ABSENT as ABSENT
from conformance.checks.model.log import LogView
from conformance.harness.verdict import Verdict, Violation
from conformance.observations import CacheReplay, Obs, Resources
from sim.clock import format_duration


def check(m: RunModel) -> Verdict:
    return judge(m, Flights.from_model(m))


Lives = dict[str, list[tuple[int, int]]]  # session -> (start, boundary) of each life of it that reached a boundary


def lives_of(m: RunModel, into: Lives | None = None) -> Lives:
    """Each session's lives (its chats' segments) that reached a boundary, in order: when the
    life began and its boundary (idle, daily, or the command that ended it). Added `into` a
    gathering of several parts' (each chat is in one part)."""
    out: Lives = {} if into is None else into
    for segments in m.segments.values():
        for seg in segments:
            if seg.session is not None and seg.boundary is not None:
                out.setdefault(seg.session, []).append((seg.start, seg.boundary))
    return out


def judge(m: LogView, flights: Flights, acted: Iterable[Acted] | None = None, lives: Lives | None = None) -> Verdict:
    """I7 on the log's view (read for everything but the turns: a model whose `turns` is empty
    will do) and the turns' projection (`Flights`, gathered from the model or part by part);
    `acted`: what the gateway did while down (`acted_while_down`), and `lives`, each session's
    lives' boundaries (`lives_of`), gathered likewise (default: read off `m`, a model whose
    segments are whole)."""
    indexes = m.by_kind.get("resources", [])
    after_stops = _held_at(m, indexes)
    # A stretch no longer than the TTL and a sweep is within its deadline (an agent's idle clock
    # starts where its stretch does, but for a session some turn of which was answered in
    # another: `_activity` reads the answer under that one): only the others are kept.
    odd = {asked for ran, asked in zip(flights.session, flights.request_session, strict=True) if ran != asked and asked}
    over, stretches, held, loads = _replay(m, flights, indexes, set(after_stops.values()),
                                           m.config.idle_ttl + m.sweep_interval, odd)
    if stretches and lives is None:
        lives = lives_of(m)  # type: ignore[arg-type]  # a RunModel
    violations = over + _not_reaped(m, flights, stretches, loads, lives or {}) + _left_running(m, after_stops, held)
    violations += _acted(m, acted_while_down(m) if acted is None else acted)
    return Verdict("I7", "fail" if violations else "pass", tuple(violations), examined=len(indexes))


# The records of calls the gateway makes (on the LLM, the platform, memory and its hooks): a
# process that is down makes none. Its notes are its word, and a row deleted while it is down
# is the harness's doing, so neither counts.
ACTING_KINDS = ("llm_request", "reply", "sync_turn", "ingest", "ingest_busy", "ingest_failed", "ingest_repeated",
                "on_session_end", "on_session_switch", "on_session_finalize", "on_session_reset", "memory_shutdown")


class Acted(NamedTuple):
    """A call the gateway made while down: its record, and the stop it came after."""

    index: int
    t: int
    kind: str
    session: str | None
    stop: int


def acted_while_down(m: LogView) -> list[Acted]:
    """The gateway's calls from a crash, or from the end of a SIGTERM's own step (its drain and
    flush are in it), until the next restart. A crash is a SIGKILL: `crash()` itself may call
    nothing. A part of a split log finds its own (`conformance.checks._I7`)."""
    stops = sorted([*m.by_kind.get("sigterm", []), *m.by_kind.get("crash", [])])
    if not stops:
        return []
    restarts = m.by_kind.get("restart", [])
    out: dict[int, Acted] = {}
    for stop in stops:
        k = bisect_right(restarts, stop)
        until = restarts[k] if k < len(restarts) else len(m.records)
        r = m.records[stop]
        crash = r.kind == "crash"
        for kind in ACTING_KINDS:
            found = m.by_kind.get(kind)
            if not found:
                continue
            for index in found[bisect_right(found, stop):bisect_left(found, until)]:
                acted = m.records[index]
                if crash or acted.step != r.step:
                    out[index] = Acted(index, acted.t, kind, acted.session, stop)  # a later stop's, if two
    return [out[index] for index in sorted(out)]


def _acted(m: LogView, acted: Iterable[Acted]) -> list[Violation]:
    """One violation a stop the gateway acted after, naming its first few calls."""
    by_stop: dict[int, list[Acted]] = {}
    for a in sorted(acted):
        by_stop.setdefault(a.stop, []).append(a)
    out: list[Violation] = []
    for stop, calls in sorted(by_stop.items()):
        r = m.records[stop]
        which = _stop_name(r)
        what = ", ".join(f"{a.kind}{f' ({a.session})' if a.session else ''} at {m.at(a.t)}" for a in calls[:3])
        more = f" and {len(calls) - 3} more" if len(calls) > 3 else ""
        until = "" if r.kind == "crash" else " returned"
        out.append(Violation(f"after {which} at {m.at(r.t)}{until} the gateway still acted while down: {what}{more}",
                             (stop, *(a.index for a in calls)), calls[0].t, calls[0].session))
    return out


_Stretch = tuple[str, int, int, int, bool]  # (session, record index it began, from, until, left the cache)


class _Streams(NamedTuple):
    """The flights in three streams, each in log order and ended by NEVER: the asks (each
    admitted row's entry into flight, in order: `Flights.asks`), the answers (`Flights.order`)
    and the ends that are no reply (few); with the columns an event reads (times and sessions,
    by row)."""

    ask_at: Sequence[int]  # the records where they entered flight, by row
    answer_at: Sequence[int]  # the answers' records
    answer_rows: Sequence[int]  # and their rows
    asked: Sequence[int]  # by row: when it entered flight, when it was answered, its request's session
    answered: Sequence[int]
    sessions: Sequence[str | None]
    ends: list[Flight]


def _streams(flights: Flights) -> _Streams:
    asks = flights.asks()
    ask_at = flights.start_index[:asks]
    ask_at.append(NEVER)
    answer_at = flights.answer_index[:]
    answer_at.append(NEVER)
    ends = sorted(flights.ends)
    ends.append(_NO_END)
    return _Streams(ask_at, answer_at, flights.order, flights.start_t, flights.reply_t, flights.request_session, ends)


_NO_END: Flight = (NEVER, 0, -1, "")


def in_flight(flights: Flights) -> Iterator[Flight]:
    """(record index, time, +1 or -1, session) in log order: each admitted turn enters flight at
    its delivery (`flights._start_index`) and leaves it at its reply, or else where it ended (a
    /stop, SIGTERM, crash).
    "Busy" is this, read from the log: the gateway's own flag in `resources` is its word."""
    return _merged(_streams(flights), 0, 0, 0)


def _merged(streams: _Streams, i: int, j: int, k: int) -> Iterator[Flight]:
    """The three streams merged from the i-th ask, j-th answer and k-th end on. An ask and an
    answer never share a record, so they merge by record alone; an end may share one, so it
    is compared whole (an equal one after)."""
    ask_at_of, answer_at_of, answer_rows, asked, answered, sessions, ends = streams
    ask_at, answer_at, end = ask_at_of[i], answer_at_of[j], ends[k]
    while True:
        event: Flight | None = None
        if ask_at < answer_at:
            event = (ask_at, asked[i], 1, sessions[i])  # type: ignore[assignment]  # admitted: a session
        elif answer_at < NEVER:
            row = answer_rows[j]
            event = (answer_at, answered[row], -1, sessions[row])  # type: ignore[assignment]
        if end[0] < NEVER and (event is None or end < event):
            yield end
            k += 1
            end = ends[k]
        elif event is None:
            return
        else:
            yield event
            if event[2] > 0:
                i += 1
                ask_at = ask_at_of[i]
            else:
                j += 1
                answer_at = answer_at_of[j]


def _with_ends(samples: Iterator[tuple[int, Obs]], indexes: Sequence[int], ends: list[Flight]
               ) -> Iterator[tuple[int, Obs | None]]:
    """The samples, and (record, None) for each end (the last is NEVER's: none) after the samples of
    records up to its own, if a sample comes after it."""
    if len(ends) == 1:
        return samples
    pieces: list[Iterable[tuple[int, Obs | None]]] = []
    before = 0  # samples placed
    for end in ends[:-1]:
        k = bisect_right(indexes, end[0])
        if k == len(indexes):
            break
        pieces += [islice(samples, k - before), ((end[0], None),)]
        before = k
    pieces.append(samples)
    return chain.from_iterable(pieces)


def _chat_of(flights: Flights) -> dict[str, str]:
    """Each session (a turn's) -> the chat of its last turn in the log."""
    last: dict[str, tuple[int, str]] = {}
    for at, sid, chat in zip(flights.index, flights.session, flights.chat, strict=True):
        if sid:
            seen = last.get(sid)
            if seen is None or at > seen[0]:
                last[sid] = (at, chat)
    return {sid: chat for sid, (_at, chat) in last.items()}


def _activity(flights: Flights, watched: set[str]) -> dict[str, list[int]]:
    """Each watched session -> when its turns entered flight and left it (answered, or abandoned
    by a /stop: the agent was in use until then, so its idle time counts from there), ascending."""
    out: dict[str, list[int]] = {}
    for sid, asked, answered in zip(flights.session, flights.start_t, flights.reply_t, strict=True):
        if sid in watched:
            times = out.setdefault(sid, [])  # type: ignore[arg-type]
            if asked != ABSENT:
                times.append(asked)
            if answered != ABSENT:
                times.append(answered)
    for _index, left, _into, sid in flights.ends:
        if sid in watched:
            out.setdefault(sid, []).append(left)
    for times in out.values():
        times.sort()
    return out


def _replay(m: LogView, flights: Flights, indexes: Sequence[int], wanted: set[int], within: int = -1,
            odd: frozenset[str] | set[str] = frozenset()
            ) -> tuple[list[Violation], list[_Stretch], dict[int, Resources], dict[str, list[int]]]:
    """One pass over the resources samples (records are deltas, `CacheReplay`) and the turns'
    flights, in log order: the first moment over the cap; each stretch an agent of a turn's
    session sat cached with no turn in flight; what the gateway held at the samples
    `_left_running` reads; and when each watched session's agent entered the cache. An agent
    a turn leaves idle is counted from the end of that instant (the gateway may evict it in the
    same step), not from the gateway's next sample (a gateway calling it busy changes nothing).
    `within`: a stretch that left the cache no longer than this after it began is not kept (one
    a session of `odd` had always is); -1, every stretch."""
    cap = m.config.cache_cap
    # Every session a turn ran in is held to the TTL, whatever its chat's policy (or to its
    # boundary, `_not_reaped`): a lazy chat's session past its boundary is ended only at the
    # chat's next message, as never-ending as a `none` session (the fifth audit of lazy
    # gateways, 2026-12-06: a sweep reaping only `none` agents passed). A delegate child's tasks
    # are its turns.
    watched: set[str] = {sid for sid in set(flights.session) if sid}
    over: list[Violation] = []
    held: dict[int, Resources] = {}
    since: dict[str, tuple[int, int]] = {}  # session -> (index, t) it became cached with no turn in flight
    stretches: list[_Stretch] = []
    present: set[str] = set()  # watched sessions whose agent is in the cache
    loads: dict[str, list[int]] = {}  # session -> times its agent entered the cache
    flying: dict[str, int] = {}  # session -> turns in flight, if any (no entry at none)
    replay = CacheReplay()
    # Live views: `cached_keys & flying_keys` are the cached sessions with a turn in flight, in
    # one C operation over the smaller (the few in flight), so the cap needs no walk below the
    # cap and no set of them kept current at every flight and sample.
    cached_keys, flying_keys = replay.cached.keys(), flying.keys()
    streams = _streams(flights)
    ask_at_of, answer_at_of, answer_rows, asked, answered, sessions, ends = streams
    pending = NEVER  # an instant that left an agent idle, judged once it is over

    def judge_cap(index: int, t: int) -> None:
        entries = replay.listed if replay.listed is not None else replay.cached
        if over or len(entries) <= cap or (replay.listed is None and len(entries) - len(cached_keys & flying_keys) <= cap):
            return
        idle = [sid for sid, _busy in replay.entries() if not flying.get(sid)]
        if len(idle) > cap:
            over.append(Violation(f"the agent cache held {len(idle)} idle agents at {m.at(t)} (cap {cap}): {', '.join(idle)}",
                                  (index,), t))

    def settle(sid: str, index: int, t: int) -> None:
        idle = sid in replay.cached and not flying.get(sid)
        if idle and sid not in since:
            since[sid] = (index, t)
        elif not idle and sid in since:
            start_index, start = since.pop(sid)
            if t - start > within or sid in odd:
                stretches.append((sid, start_index, start, t, True))

    def fly(f_index: int, f_t: int, step: int, sid: str) -> None:
        """A turn starts (+1) or ends (-1) in flight; the instant an end leaves is judged once over."""
        nonlocal pending
        if f_t > pending:
            judge_cap(f_index, pending)
            pending = NEVER
        now_flying = flying.get(sid, 0) + step
        if now_flying:
            flying[sid] = now_flying
        else:
            del flying[sid]
        if step < 0:
            pending = min(pending, f_t)
        if sid in watched:
            settle(sid, f_index, f_t)

    # The loop below is the hot one (two samples and two flights a turn): the asks and answers
    # merged in it (`_merged` written out: a cursor each, no object an event), `fly` written out,
    # and `judge_cap` called only where the cache can be over the cap (its own test). An end that
    # is no reply (few) comes in among the samples, as (its record, None), after the samples of
    # records up to its own (those after the last sample come after the loop).
    t = 0
    cached = replay.cached  # the same dict throughout (`CacheReplay.apply` updates it in place)
    i = j = k = 0  # the next ask, answer and end
    ask_at, answer_at = ask_at_of[0], answer_at_of[0]
    for index, r in _with_ends(m.of("resources"), indexes, ends):
        while True:  # the asks and answers before this record
            if ask_at < answer_at:
                if ask_at >= index:
                    break
                f_index, f_t, step, sid = ask_at, asked[i], 1, sessions[i]
                i += 1
                ask_at = ask_at_of[i]
            else:
                if answer_at >= index:
                    break
                row = answer_rows[j]
                f_index, f_t, step, sid = answer_at, answered[row], -1, sessions[row]
                j += 1
                answer_at = answer_at_of[j]
            if f_t > pending:
                if replay.listed is not None or (len(cached) > cap and len(cached) - len(cached_keys & flying_keys) > cap):
                    judge_cap(f_index, pending)
                pending = NEVER
            now_flying = flying.get(sid, 0) + step  # type: ignore[call-overload]
            if now_flying:
                flying[sid] = now_flying  # type: ignore[index]
            else:
                del flying[sid]  # type: ignore[arg-type]
            if step < 0 and f_t < pending:
                pending = f_t
            if sid in watched:  # `settle` written out (every session is watched: a call a flight)
                if sid in cached and not now_flying:
                    if sid not in since:
                        since[sid] = (f_index, f_t)  # type: ignore[index]
                elif sid in since:
                    start_index, start = since.pop(sid)  # type: ignore[arg-type]
                    if f_t - start > within or sid in odd:
                        stretches.append((sid, start_index, start, f_t, True))  # type: ignore[arg-type]
        if r is None:  # the k-th end: it, after the ask or answer of its record if that is no greater
            while True:
                flight = next(_merged(streams, i, j, k))
                fly(*flight)
                if flight is ends[k]:
                    k += 1
                    break
                if flight[2] > 0:
                    i += 1
                    ask_at = ask_at_of[i]
                else:
                    j += 1
                    answer_at = answer_at_of[j]
            continue
        if r.t > pending and (replay.listed is not None or (len(cached) > cap and len(cached) - len(cached_keys & flying_keys) > cap)):
            judge_cap(index, pending)
        pending = NEVER
        t = r.t
        touched: set[str] | None = set() if watched else None  # the sessions of turns only are followed
        replay.apply(r.detail, touched)
        if replay.listed is not None or (len(cached) > cap and len(cached) - len(cached_keys & flying_keys) > cap):
            judge_cap(index, t)
        if index in wanted:
            held[index] = replay.resources()
        if touched is None:
            continue
        for sid in sorted(touched & watched):
            if sid in cached and sid not in present:
                present.add(sid)
                loads.setdefault(sid, []).append(t)
            elif sid not in cached:
                present.discard(sid)
            settle(sid, index, t)
    for flight in _merged(streams, i, j, k):
        fly(*flight)
        t = max(t, flight[1])
    if pending < NEVER:
        judge_cap(len(m.records) - 1, pending)
    stretches += [(sid, i, start, t, False) for sid, (i, start) in sorted(since.items()) if t - start > within or sid in odd]
    return over, stretches, held, loads


def _not_reaped(m: LogView, flights: Flights, stretches: list[_Stretch], loads: dict[str, list[int]],
                lives: Lives) -> list[Violation]:
    """Each stretch an agent sat idle in the cache, against the TTL (every policy's alike), or,
    if later, the boundary of the session's life it went idle in, plus the declared latency: a
    gateway may keep the agent of a session that ends for that end (Hermes's sweep defers to
    the expiry watcher so that `on_session_end` finds the live transcript), never past it (a
    lazy chat's session past its boundary ends only at the chat's next message, if any)."""
    if not stretches:
        return []
    ttl, slack = m.config.idle_ttl, m.sweep_interval  # as declared, capped at the horizon (LogView)
    activity = _activity(flights, {s[0] for s in stretches})
    chat_of: dict[str, str] | None = None  # read only to name a late agent's policy
    out: list[Violation] = []
    reported: set[str] = set()
    for sid, index, start, until, left in sorted(stretches, key=lambda s: s[1]):
        if sid in reported:
            continue
        times = activity.get(sid, [])
        k = bisect_right(times, start)  # its last turn activity before it went idle
        last = times[k - 1] if k else start
        entries = loads.get(sid, [])
        j = bisect_right(entries, start)  # and when it last entered the cache
        loaded = entries[j - 1] if j and entries[j - 1] > last else None
        idle = loaded if loaded is not None else last
        due = idle + ttl
        if until - due <= slack:
            continue  # out by the TTL (the common case: no boundary to look up)
        boundary = _boundary(lives.get(sid), idle)
        if boundary is not None and boundary + m.latency > due:
            due = boundary + m.latency
        else:
            boundary = None
        if until - due > slack:
            reported.add(sid)
            how = f"stayed cached until {m.at(until)}" if left else f"was still cached at {m.at(until)}"
            if chat_of is None:
                chat_of = _chat_of(flights)
            mode = m.policy(chat_of[sid], idle).mode
            held_for = ""
            if boundary is not None:
                latency = f" and latency {format_duration(m.latency)}" if m.latency else ""
                held_for = f", its session's boundary at {m.at(boundary)}{latency}"
            out.append(Violation(
                f"the agent of session {sid} (reset policy {mode}) {how}, idle since {m.at(idle)}"
                f"{' (when it entered the cache)' if loaded is not None else ''} "
                f"(idle TTL {format_duration(ttl)}{held_for}, sweep every {format_duration(slack)}: "
                f"due out by {m.at(due + slack)})",
                (index,), until, sid))
    return out


def _boundary(lives: list[tuple[int, int]] | None, idle: int) -> int | None:
    """The boundary of the session's life that had begun by `idle`, if that life reached one
    no earlier (none: a `none` session, a life past its boundary, or one never past it)."""
    if not lives:
        return None
    if len(lives) > 1:
        lives = sorted(lives)  # a session two chats shared: their lives interleave
    k = bisect_right(lives, (idle, NEVER))
    if not k:
        return None
    boundary = lives[k - 1][1]
    return boundary if boundary >= idle else None


def _held_at(m: LogView, indexes: Sequence[int]) -> dict[int, int]:
    """For each SIGTERM and crash (by record index): the last resources sample before the gateway
    started again."""
    out: dict[int, int] = {}
    restarts = m.by_kind.get("restart", [])
    for stop in sorted([*m.by_kind.get("sigterm", []), *m.by_kind.get("crash", [])]):
        k = bisect_right(restarts, stop)
        until = restarts[k] if k < len(restarts) else len(m.records)
        j = bisect_right(indexes, until - 1)
        if j:  # no sample after the stop: nothing changed since the last one
            out[stop] = indexes[j - 1]
    last: dict[int, int] = {}  # a sample -> the last stop before it (a crash point in a SIGTERM's flush: the crash)
    for stop, index in out.items():
        last[index] = stop
    return {stop: index for index, stop in last.items()}


def _left_running(m: LogView, after_stops: dict[int, int], held: dict[int, Resources]) -> list[Violation]:
    """What the gateway held after each SIGTERM and crash: the last sample before it started again."""
    out: list[Violation] = []
    for stop, index in after_stops.items():
        state, r = held[index], m.records[stop]
        cached, running = [sid for sid, _busy in state.cached], state.running
        if cached or running:
            which = _stop_name(r)
            held_now = [f"{_count(len(cached), 'agent')}{_names(cached)}"] if cached else []
            held_now += [_count(running, "running task")] if running else []
            out.append(Violation(
                f"after {which} at {m.at(r.t)} the gateway still held {' and '.join(held_now)}", (stop, index), r.t))
    final_stop = next((i for i in m.by_kind.get("sigterm", []) if m.records[i].d("final")), None)
    for index, r in m.of("threads"):  # harness-observed: threads the gateway started and left running
        if final_stop is not None and index > final_stop and r.d("running", 0):
            out.append(Violation(
                f"after the final sigterm at {m.at(m.records[final_stop].t)} {_count(r.d('running'), 'thread')} "
                f"the gateway started {'was' if r.d('running') == 1 else 'were'} still running", (final_stop, index), r.t))
    for index, r in m.of("processes"):  # harness-observed: processes it started and left running (in process)
        if final_stop is not None and index > final_stop and (n := r.d("running", 0)):
            names = _names([str(name) for name in r.d("names") or ()])
            out.append(Violation(
                f"after the final sigterm at {m.at(m.records[final_stop].t)} {n} process{'' if n == 1 else 'es'}{names} "
                f"the gateway started {'was' if n == 1 else 'were'} still running", (final_stop, index), r.t))
    return out


def _stop_name(r: Obs) -> str:
    return "the crash" if r.kind == "crash" else "the final sigterm" if r.d("final") else "the sigterm"


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def _names(sessions: list[str]) -> str:
    if not sessions:
        return ""
    return f" ({', '.join(sessions[:3])}{', …' if len(sessions) > 3 else ''})"
