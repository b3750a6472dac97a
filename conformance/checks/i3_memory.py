"""I3 no lost turn (memory): by quiescence every acknowledged turn reached every backend,
including what a batching provider still buffered at a session end, an eviction or SIGTERM
(and, for a gateway that claims crash durability, at a crash).

Buffered turns are owed at the boundary itself, not merely eventually: a session's turns
must reach every backend by its on_session_end, and every turn by a graceful SIGTERM,
unless that backend was failing at that moment. A slow backend (`backend_slow`) excuses
nothing: a turn whose call was made in time and that landed when the backend said it would
(the `ready` of the turn's first `ingest_busy`, made before the moment) is on time; one first
sent after the moment, or landed later than that `ready` (retried late, or merged into a call
with newer turns due later), is late; one never landed is lost. A call still in
flight at the moment that a later fault cut off when due (the backend failed the call made
again at its `ready`, or was failing then, or the gateway was stopped at `ready` and restarted
after it) is
excused as a failing backend is: the turn is still owed, at the next moment and by the end.
A SIGTERM cannot wait virtual time: at one, a slow backend is excused as a failing one is
(its turns still owed).

A turn is ingested under its own session: one shipped under another session's id is in
the wrong session's memory (the cross-session hazard of the batching provider in the
seeds), so it does not count as reaching the backend, and it is named. A turn is ingested
when both its halves are, the user's message and the reply (`observations.ingested_halves`):
a backend holding only one of them holds half a turn. A turn never acknowledged (stopped,
interrupted) leaves nothing behind: no backend takes either half of it. A delegate child has no
memory: no backend takes either half of a delegated task.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left
from collections.abc import Callable
from dataclasses import dataclass, field
from operator import attrgetter, itemgetter

from conformance.checks.ingests import MINE, MINE_BOTH, NOT_YET, OTHER, ingests
from conformance.checks.model import NEVER, RunModel, Turn
from conformance.checks.model.facts import _ABSENT as ABSENT
from conformance.checks.text import abandoned_words, turn_list
from conformance.harness.verdict import Verdict, Violation
from conformance.observations import ingested_halves

_HALF = {0: "user message", 1: "reply"}


def check(m: RunModel) -> Verdict:
    return findings(m).verdict(m)


@dataclass(slots=True)
class Late:
    """Turns a backend took only after the moment (a session end, a SIGTERM) that owed them: when
    the first of them was whole, and the ingest record that made it so."""

    turns: list[Turn]
    when: int
    where: int
    due: int | None = None  # when the slow backend said the first one's call, made in time, would land


@dataclass(slots=True)
class Findings:
    """What I3 found on one model, worded by `verdict`. A log judged in parts (`checks.parts`)
    gathers each part's (`add`) and words them once: a violation that lists the turns of many
    sessions (those a backend never took; those late at one SIGTERM) lists every part's."""

    backends: list[str]
    examined: int = 0
    foreign: list[Violation] = field(default_factory=list)  # ingested under another session
    missing: dict[str, list[Turn]] = field(default_factory=dict)  # backend -> turns it took nothing of (reply order)
    half: dict[tuple[str, int], list[Turn]] = field(default_factory=dict)  # (backend, half missing) -> turns
    late: dict[tuple[int, str], Late] = field(default_factory=dict)  # (moment's record, backend), in log order
    others: list[Violation] = field(default_factory=list)  # never acknowledged, delegated: a turn each

    def add(self, other: Findings) -> None:
        """Another part's findings (turns of one part are none of another's)."""
        self.examined += other.examined
        self.foreign += other.foreign
        self.others += other.others
        for backend, turns in other.missing.items():
            self.missing[backend] = sorted((*self.missing.get(backend, ()), *turns), key=attrgetter("reply_index"))
        for key, turns in other.half.items():
            self.half[key] = sorted((*self.half.get(key, ()), *turns), key=attrgetter("reply_index"))
        for key, late in other.late.items():
            mine = self.late.get(key)
            if mine is None:
                self.late[key] = late
                continue
            first = mine if mine.turns[0].index < late.turns[0].index else late  # a SIGTERM owes every part's turns
            mine.turns = sorted((*mine.turns, *late.turns), key=attrgetter("index"))
            mine.when, mine.where = first.when, first.where
        order = {backend: k for k, backend in enumerate(self.backends)}
        self.late = dict(sorted(self.late.items(), key=lambda item: (item[0][0], order[item[0][1]])))

    def verdict(self, m: RunModel) -> Verdict:
        violations: list[Violation] = list(self.foreign)  # the cause first: what went under the wrong session
        for backend in self.backends:
            if backend in self.missing:
                violations += _missing(m, backend, self.missing[backend])
            for half in (0, 1):
                if (backend, half) in self.half:
                    violations.append(_half_missing(m, backend, self.half[backend, half], _HALF[half]))
        for (index, backend), late in self.late.items():
            violations.append(_late_violation(m, index, backend, late))
        violations += self.others
        return Verdict("I3", "fail" if violations else "pass", tuple(violations), examined=self.examined)


def findings(m: RunModel) -> Findings:
    backends = ["recorder", *(p.name for p in m.config.providers)]
    # What each backend took of each turn, and when each turn was whole in it, by the turn's
    # place in log order (`ingests`: one pass over the ingests, shared with I4).
    places = m.places()
    ordered, indexes = places
    taken = m.derived(ingests)
    took, whole = taken.took, taken.whole
    found = Findings(backends)
    for index, turn_id, session in taken.foreign:
        r = m.records[index]
        found.foreign.append(Violation(
            f"backend '{r.d('backend')}' ingested {turn_id} of {session} under session {r.session} "
            f"at {m.at(r.t)}", (index,), r.t, session, (turn_id,)))
    # A gateway that declares its crashes lossy (`crash_durable: false`) is excused a turn the
    # first crash after its acknowledgment took, unless an end or SIGTERM before that crash owed it.
    lossy = [i for i, _ in m.of("crash")] if not m.profile.get("crash_durable", True) else []
    down = _failing(m)
    moments = _moments(m)
    owed_count = sum(1 for t in ordered if t.reply_t != ABSENT and not t.delegate)  # acknowledged chat turns
    for backend in backends:
        mine = took[backend]
        found.examined += owed_count
        # Places of the turns the backend lacks a half of (under their own session): few in a
        # passing run, found by a scan in C rather than a look at every turn.
        lacking = mine.translate(_LACKS_BOTH)
        candidates = []
        at = lacking.find(1)
        while at >= 0:
            if (turn := ordered[at]).reply_t != ABSENT and not turn.delegate:
                candidates.append(turn)
            at = lacking.find(1, at + 1)
        if not candidates:
            continue
        if lossy:  # a crash excuses what it lost, not what a session end or SIGTERM before it already owed
            first_owed: dict[str, int] = {}
            for index, t, owed in moments:  # in log order: the first moment owing a turn is kept
                if not down(backend, t):
                    for turn in owed:
                        first_owed.setdefault(turn.id, index)
            candidates = [t for t in candidates if not _lost_in_crash(lossy, t, first_owed)]
        missing = sorted(candidates, key=lambda t: t.reply_index)
        if not missing:
            continue
        if none := [t for t in missing if not mine[places.of(t)] & MINE_BOTH]:
            found.missing[backend] = none
        for half, have in ((0, MINE[1]), (1, MINE[0])):
            if partial := [t for t in missing if mine[places.of(t)] & have]:
                found.half[backend, half] = partial
    found.late = _late(m, backends, whole, indexes, moments)
    found.others = (_unacknowledged(m, ordered, took) + _delegated(m, ordered, took) + _after_finalize(m, down)
                    + _paired_wrong(m))
    return found


def _paired_wrong(m: RunModel) -> list[Violation]:
    """A turn is its message, then its reply: the recorder's `sync_turn` handed the reply as the
    user's message (`swapped`), or one ingest call carrying a turn's reply before its message
    (`apart`), pairs them wrong for any memory that reads a call in order (the audit of lazy
    gateways, 2026-12-06: both halves were read by content alone). The first of a session (and
    backend): a log judged in parts says the same as judged whole."""
    out: list[Violation] = []
    swapped: set[str | None] = set()
    for index, r in m.of("sync_turn"):  # streamed: a spilled log reads them in one forward pass
        if "swapped" in r.detail and r.session not in swapped:
            swapped.add(r.session)
            out.append(Violation(
                f"sync_turn for {turn_list(list(r.turns))} of {r.session} at {m.at(r.t)} was handed the reply as the "
                f"user's message: sync_turn(session, user, assistant)", (index,), r.t, r.session, tuple(r.turns)))
    told: set[tuple[str, str | None]] = set()
    for index, r in m.of("ingest"):
        if "apart" not in r.detail:
            continue
        apart, backend = r.detail["apart"], r.detail.get("backend")
        if (backend, r.session) not in told:
            told.add((backend, r.session))
            out.append(Violation(
                f"backend '{backend}' took the {'reply' if len(apart) == 1 else 'replies'} of {turn_list(apart)} before "
                f"{'its message' if len(apart) == 1 else 'their messages'} in one call at {m.at(r.t)}: a turn is its "
                f"message, then its reply", (index,), r.t, r.session, tuple(apart)))
    return out


_STOPS = frozenset({"sigterm", "crash", "restart"})


def _after_finalize(m: RunModel, down: Callable[[str, int], bool]) -> list[Violation]:
    """A batch a provider ships at the session end's own instant, after the session's
    `on_session_finalize`: the end hooks ran on a buffer still unshipped (`_late` judges by
    time, and at one instant this is the order within the step; the audit of lazy gateways,
    2026-12-06). Finalize comes after every provider's end (I1), so a provider's own flush in its
    `on_session_end` is before it whatever the order of the providers. The records of that
    instant after each finalize are read, up to a stop: few."""
    out: list[Violation] = []
    records, chat_sessions, size = m.records, m.chat_sessions(), len(m.records)
    for index, fin in m.of("on_session_finalize"):
        session, t = fin.session, fin.t
        if session not in chat_sessions:
            continue
        told: set[str] = set()
        k = index + 1
        while k < size and (r := records[k]).t == t and r.kind not in _STOPS:
            if r.kind == "ingest" and r.session == session and not down(r.detail.get("backend"), t):
                users, replies = ingested_halves(r)
                late = [turn for turn in dict.fromkeys((*users, *replies)) if turn not in told
                        and (known := m.turns.get(turn)) is not None and known.session == session
                        and known.reply_t != ABSENT and known.reply_index < index]
                if late:
                    told.update(late)
                    out.append(Violation(
                        f"backend '{r.detail.get('backend')}' took {turn_list(late)} only after {session}'s "
                        f"on_session_finalize at {m.at(t)}, in the step that ended it: what a provider buffers is owed "
                        f"when the session ends", (index, k), t, session, tuple(late)))
            k += 1
    return out


def _lost_in_crash(crashes: list[int], turn: Turn, first_owed: dict[str, int]) -> bool:
    """Whether the first crash after the turn's acknowledgment came before anything owed it."""
    after = bisect_left(crashes, turn.reply_index + 1)
    return after < len(crashes) and crashes[after] < first_owed.get(turn.id, NEVER)


_LACKS_BOTH = bytes(int(b & MINE_BOTH != MINE_BOTH) for b in range(256))  # a `took` byte -> 1: a half missing


def _half_missing(m: RunModel, backend: str, partial: list[Turn], half: str) -> Violation:
    """Acknowledged turns of which the backend took one half only."""
    sessions = list(dict.fromkeys(t.session or "?" for t in partial))
    cut = _cut(m, backend, partial) if half == _HALF[0] else []
    how = f"; it took {turn_list(cut)} by the tag alone, not what the user said" if cut else ""
    return Violation(
        f"backend '{backend}' ingested {turn_list([t.id for t in partial])} without the {half}"
        f"{'s' if len(partial) > 1 else ''} (session {', '.join(sessions)}, acknowledged {_span(m, partial)}{how}): a "
        f"turn ingested is the user's message and its reply",
        tuple(t.reply_index for t in partial[:5]), _first_ack(partial), sessions[0], tuple(t.id for t in partial))


def _cut(m: RunModel, backend: str, turns: list[Turn]) -> list[str]:
    """Which of the turns the backend took a copy of the user's message of that kept the tag and
    lost the words (an ingest's `cut`, `observers.MemoryBackend.ingest`): read for a violation only."""
    found = {turn for _index, r in m.of("ingest") if r.detail.get("backend") == backend for turn in r.detail.get("cut", ())}
    return [t.id for t in turns if t.id in found]


def _span(m: RunModel, turns: list[Turn]) -> str:
    """When the turns (in acknowledgment order) were acknowledged: '09:00' or 'from 09:00 to 09:05'."""
    first, last = turns[0].reply, turns[-1].reply
    assert first is not None and last is not None
    return m.at(first.t) if last.t == first.t else f"from {m.at(first.t)} to {m.at(last.t)}"


def _first_ack(turns: list[Turn]) -> int:
    first = turns[0].reply
    assert first is not None
    return first.t


def _missing(m: RunModel, backend: str, missing: list[Turn]) -> list[Violation]:
    """Acknowledged turns of which the backend took nothing."""
    if not missing:
        return []
    sessions = list(dict.fromkeys(t.session or "?" for t in missing))
    return [Violation(
        f"backend '{backend}' never ingested {turn_list([t.id for t in missing])} "
        f"(session {', '.join(sessions)}, acknowledged {_span(m, missing)})",
        tuple(t.reply_index for t in missing[:5]), _first_ack(missing), sessions[0], tuple(t.id for t in missing))]


def _unacknowledged(m: RunModel, ordered: list[Turn], took: dict[str, bytearray]) -> list[Violation]:
    """Either half of a turn never acknowledged, in any backend: such a turn leaves nothing behind."""
    unacked = [at for at, turn in enumerate(ordered) if turn.reply_t == ABSENT and m.unacknowledged(turn)]
    out = []
    for backend, mine in took.items():
        never = [ordered[at] for at in unacked if mine[at] & MINE_BOTH]
        out += [Violation(
            f"backend '{backend}' ingested turn {turn.id}, which was never acknowledged ({abandoned_words(m, turn)}): "
            f"a turn never acknowledged leaves nothing behind", (turn.index,), turn.done[0] if turn.done[0] < NEVER else turn.arrival,
            turn.session, (turn.id,)) for turn in never]
    return out


def _delegated(m: RunModel, ordered: list[Turn], took: dict[str, bytearray]) -> list[Violation]:
    """Either half of a delegated task, in any backend, under any session: a delegate child has
    no memory (its turns are the child's work, not the user's conversation)."""
    delegates = [at for at, turn in enumerate(ordered) if turn.delegate]
    out = []
    for backend, mine in took.items():
        for at in delegates:
            if mine[at] & (MINE_BOTH | OTHER[2]):
                turn = ordered[at]
                out.append(Violation(
                    f"backend '{backend}' ingested delegated task {turn.id} (child session {turn.session}): a delegate "
                    f"child has no memory", (turn.index,), turn.reply_t if turn.reply_t != ABSENT else turn.arrival,
                    turn.session, (turn.id,)))
    return out


def _failing(m: RunModel) -> Callable[[str, int], bool]:
    """Whether a backend was failing (a `backend_fail` fault) at a moment."""
    failing: dict[str, list[tuple[int, int]]] = {}
    for _index, r in m.of("backend_fail"):
        failing.setdefault(r.d("backend"), []).append((r.t, r.d("until")))

    def down(backend: str, t: int) -> bool:  # asked a session end and backend: most backends never fail
        windows = failing.get(backend)
        return windows is not None and any(start <= t < until for start, until in windows)

    return down


def _slow(m: RunModel) -> Callable[[str, int], bool]:
    """Whether a call to a backend could still be completing (a `backend_slow` window, and
    the delay of a call made at its last instant)."""
    windows: dict[str, list[tuple[int, int]]] = {}
    for _index, r in m.of("backend_slow"):
        windows.setdefault(r.d("backend"), []).append((r.t, r.d("until") + r.d("delay")))

    def slow(backend: str, t: int) -> bool:
        its = windows.get(backend)
        return its is not None and any(start <= t < until for start, until in its)

    return slow


def _moments(m: RunModel) -> list[tuple[int, int, list[Turn]]]:
    """(index, t, turns owed by then), in log order: each session end owes its session's
    acknowledged turns, each SIGTERM every acknowledged turn."""
    moments: list[tuple[int, int, list[Turn]]] = []
    chat_sessions = m.chat_sessions()
    for index, end in m.of("on_session_end"):
        if end.session in chat_sessions:
            moments.append((index, end.t, m.acked_in(end.session, before=index)))
    cut = [i for i, r in m.of("crash") if r.d("point")]
    for index, stop in m.of("sigterm"):
        if any(i > index and m.records[i].step == stop.step for i in cut):
            continue  # killed at a crash point inside its shutdown: not a graceful stop, it owes nothing
        owed = [t for t in m.turns.values() if t.reply_t != ABSENT and not t.delegate and t.reply_index < index]
        moments.append((index, stop.t, owed))
    return sorted(moments, key=itemgetter(0))


def _late(m: RunModel, backends: list[str], whole: dict[str, array[int]], indexes: array[int],
          moments: list[tuple[int, int, list[Turn]]]) -> dict[tuple[int, str], Late]:
    """Turns that reached a backend (`whole`: when each turn was in whole, by its place among
    `indexes`) only after the session end or SIGTERM (`moments`) that owed them."""
    down = _failing(m)
    in_flight: dict[str, dict[str, list[tuple[int, int]]]] = {}  # backend -> turn -> [(sent, ready)]
    for _index, r in m.of("ingest_busy"):
        for turn in dict.fromkeys(t for half in ingested_halves(r) for t in half):
            in_flight.setdefault(r.d("backend"), {}).setdefault(turn, []).append((r.t, r.d("ready")))
    failed: dict[str, dict[str, set[int]]] = {}  # backend -> turn -> when a call carrying it failed
    # (index, t) of each stop, and the t of its restart (NEVER: none). By index, not the model's
    # index-free `stopped_at`: ends a stop's own shutdown delivers come after its record at its
    # instant, and a stop that came before the moment excuses nothing at it.
    stopped: list[tuple[int, int, int]] = []
    if in_flight:
        for _index, r in m.of("ingest_failed"):
            for turn in dict.fromkeys(t for half in ingested_halves(r) for t in half):
                failed.setdefault(r.d("backend"), {}).setdefault(turn, set()).add(r.t)
        for index, r in m.of("sigterm", "crash", "restart"):
            if r.kind == "restart":
                if stopped and stopped[-1][2] == NEVER:
                    stopped[-1] = (*stopped[-1][:2], r.t)
            elif not stopped or stopped[-1][2] != NEVER:  # a crash point inside a shutdown stops nothing more
                stopped.append((index, r.t, NEVER))
    slow = _slow(m)

    def cut_off(backend: str, turn: str, moment_index: int, ready: int) -> bool:
        """A fault that came after the moment kept a call from completing at its `ready`: the
        backend failed it then, or was failing then (a call made at `ready` would have failed:
        a gateway that sends its turns in order stops at the first the backend refuses), or
        the gateway was stopped then (and restarted later)."""
        return ready in failed.get(backend, {}).get(turn, ()) or down(backend, ready) or any(
            index > moment_index and t <= ready < restart for index, t, restart in stopped)

    def on_its_way(backend: str, turn: str, moment_index: int, moment: int, landed: int) -> bool:
        """Sent to a slow backend by the moment, and landed at the time it said it would (the
        `ready` of the turn's first call: the backend keeps it, and a call made again with newer
        turns merged in, due later, lands the older one late); or still in flight at the moment
        and cut off when due by a later fault (excused as a failing backend is: the turn is
        still owed, at the next moment and by the end)."""
        calls = in_flight.get(backend, {}).get(turn, ())
        return bool(calls) and any(
            sent <= moment and (landed <= calls[0][1] or (moment < ready and cut_off(backend, turn, moment_index, ready)))
            for sent, ready in calls)

    found: list[tuple[int, str, list[str]]] = []  # (moment, backend, its late turns)
    reported: dict[str, set[str]] = {backend: set() for backend in backends}
    # No turn whole after a moment is late at it: the last moment most runs have, the final
    # SIGTERM, owes every turn and finds none (NOT_YET if the backend took none whole).
    last_whole = {backend: max(whole[backend], default=NOT_YET) for backend in backends}
    for index, t, owed in moments:
        stop = m.records[index].kind == "sigterm"
        for backend in backends:
            if last_whole[backend] <= t or down(backend, t) or (stop and slow(backend, t)):  # a stop cannot wait virtual time
                continue
            said, arrived = reported[backend], whole[backend]
            # NOT_YET (never whole) is below any moment's time: such a turn is never late
            late = [turn.id for turn in owed if (f := arrived[bisect_left(indexes, turn.index)]) > t
                    and turn.id not in said and not on_its_way(backend, turn.id, index, t, f)]
            if not late:
                continue
            said.update(late)
            found.append((index, backend, late))
    where = _whole_at(m, {(backend, late[0]) for _index, backend, late in found})
    out: dict[tuple[int, str], Late] = {}
    for index, backend, late in found:
        turns = [m.turns[turn] for turn in late]
        calls = in_flight.get(backend, {}).get(late[0], ())
        due = calls[0][1] if calls and calls[0][0] <= m.records[index].t else None
        out[index, backend] = Late(turns, whole[backend][bisect_left(indexes, turns[0].index)], where[backend, late[0]], due)
    return out


def _late_violation(m: RunModel, index: int, backend: str, late: Late) -> Violation:
    r = m.records[index]
    what = (f"{r.session}'s on_session_end at {m.at(r.t)}" if r.kind == "on_session_end"
            else f"the {'final ' if r.d('final') else ''}SIGTERM at {m.at(r.t)}")
    due = "" if late.due is None else f" (the slow backend said its call made by then would land at {m.at(late.due)})"
    return Violation(
        f"backend '{backend}' took {turn_list([t.id for t in late.turns])} only at {m.at(late.when)}, after {what}{due}: "
        f"what a provider buffers is owed when the session ends or the gateway stops",
        (index, late.where), late.when, late.turns[0].session, tuple(t.id for t in late.turns))


def _whole_at(m: RunModel, wanted: set[tuple[str, str]]) -> dict[tuple[str, str], int]:
    """(backend, turn) -> the ingest record that brought the turn's second half to that backend
    (as `check` found it: one more pass over the ingests, made only for a violation)."""
    if not wanted:
        return {}
    halves: dict[tuple[str, str], list[bool]] = {key: [False, False] for key in wanted}
    out: dict[tuple[str, str], int] = {}
    for index, r in m.of("ingest"):
        backend = r.detail.get("backend")
        users, replies = ingested_halves(r)
        for turn in dict.fromkeys((*users, *replies)):
            key = (backend, turn)
            if key not in halves or key in out:
                continue
            seen = halves[key]
            seen[0] = seen[0] or turn in users
            seen[1] = seen[1] or turn in replies
            if seen[0] and seen[1]:
                out[key] = index
        if len(out) == len(halves):
            break
    return out

