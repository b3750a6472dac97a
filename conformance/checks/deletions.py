"""Row deletions by another surface, and what they excuse: derived once per log.

A deleted session row takes its stored turns with it. A live agent holding the session's
transcript when the row went owes it back at the session's next write, and at the latest
when that memory is released (its agent leaves the cache, or a SIGTERM): seed 003's "a
session deleted while its chat is still running is recreated under the same id with the
full in-memory transcript". What truly cannot be recovered is excused: a row deleted while
no agent held the session, or after the session ended, or a crash before the write-back.
A session deleted while no agent held it, or after it ended, comes back only by a turn of its own.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from dataclasses import dataclass, field
from operator import attrgetter, itemgetter

from conformance.checks.model import NEVER, RunModel, Segment, Turn
from conformance.observations import CacheReplay

ENDED = "the session had already ended"  # `Deletion.why` of a row deleted after its session's end


@dataclass(frozen=True)
class Deletion:
    """Another surface removed a session row.

    `lost`: nothing in the gateway could restore what was stored (`why` says which), from
    record `lost_at` on (the deletion itself, or a crash before the write-back). Otherwise
    the deleted turns are owed back from record `owed_at`: the session's next acknowledged
    turn (`owed_by` "turn"), its agent leaving the cache ("release") or a SIGTERM ("sigterm").
    `for_good`: what was deleted is no longer the gateway's to write: by its own cache samples
    no agent held the session (and no write refused by a lock may have kept it in memory), or
    the session had ended before (and no lock since may have kept a refused write-back for a
    retry). The session may come back only by a turn of its own, and never with what was
    deleted."""

    session: str
    index: int
    t: int
    lost: bool
    why: str = ""
    lost_at: int = NEVER
    owed_at: int = NEVER
    owed_by: str = ""
    for_good: bool = False

    def lost_by(self, index: int) -> bool:
        """Whether the deleted turns were beyond restoring at record `index` (an end's transcript)."""
        return self.lost and self.lost_at < index


@dataclass
class _Cuts:
    all: list[Deletion] = field(default_factory=list)
    by_session: dict[str, list[Deletion]] = field(default_factory=dict)
    indexes: dict[str, list[int]] = field(default_factory=dict)  # parallel to by_session
    lost_upto: dict[str, list[int]] = field(default_factory=dict)  # lost_upto[s][k]: lost cuts among the first k
    crashes: list[int] = field(default_factory=list)
    crash_durable: bool = True


def deletions(m: RunModel) -> list[Deletion]:
    """Every session row removed, with the rows its cascade took (delete_session only: as
    the harness recorded them, else every delegate child the session spawned before)."""
    return _cuts(m).all


def lost_cuts(m: RunModel, session: str, index: int) -> list[int]:
    """The record indexes, in order, of the deletions of `session` before `index` that lost its
    stored turns by then: an end may carry only the turns after any of these cuts (a gateway
    may restore more than it owes, so the full transcript passes too)."""
    cuts = _cuts(m)
    found = []
    for cut in cuts.by_session.get(session, []):
        if cut.index >= index:
            break
        if cut.lost_by(index):
            found.append(cut.index)
    return found


def excused_from_store(m: RunModel, turn: Turn, at_index: int) -> str | None:
    """Why an acknowledged turn need not be in a store snapshot taken at `at_index`, if it need not."""
    cuts = _cuts(m)
    session = turn.session or ""
    if cuts.crash_durable and session not in cuts.indexes:
        return None
    indexes = cuts.indexes.get(session, [])
    lo, hi = bisect_left(indexes, turn.reply_index), bisect_right(indexes, at_index)
    if lo < hi:
        lost = cuts.lost_upto[session]
        if lost[hi] > lost[lo]:
            cut = next(c for c in cuts.by_session[session][lo:hi] if c.lost)
            return f"its row was deleted and {cut.why}"
        if cuts.by_session[session][hi - 1].owed_at > at_index:
            return "its row was deleted and the agent holding it has not written since"
    if not cuts.crash_durable:
        k = bisect_left(cuts.crashes, turn.reply_index)
        if k < len(cuts.crashes) and cuts.crashes[k] < at_index:
            return "the gateway does not claim crash durability"
    return None


def _cuts(m: RunModel) -> _Cuts:
    return m.derived(_derive)


def _derive(m: RunModel) -> _Cuts:
    crashes = [i for i, _ in m.of("crash")]
    crash_durable = bool(m.profile.get("crash_durable", True))
    if not m.by_kind.get("delete_session") and not m.by_kind.get("delete_parent"):
        return _Cuts(crashes=crashes, crash_durable=crash_durable)  # no deletion: skip the cache scan
    children: dict[str, list[tuple[int, str]]] = {}  # parent -> (child's first request, child)
    for child, (parent, born) in sorted(_parents(m).items()):
        children.setdefault(parent, []).append((born, child))
    locks = [(r.t, r.d("until", r.t)) for _i, r in m.of("db_locked")]
    sigterms = list(m.by_kind.get("sigterm", ()))
    stops = sorted([*sigterms, *crashes])
    deleted: list[tuple[str, int, int]] = []  # (session, index, t) of each row removed, in log order
    for index, r in m.of("delete_session", "delete_parent"):
        if not r.session:
            continue
        removed = [r.session]
        if "cascade" in r.detail:  # the rows the harness saw the cascade take (the store's own parent links)
            removed += r.d("cascade")
        elif r.kind == "delete_session":  # a log from before the harness recorded it
            removed += [child for born, child in children.get(r.session, []) if born < index]
        deleted += [(sid, index, r.t) for sid in removed]
    moves = _cache_moves(m, {sid for sid, _index, _t in deleted})
    # session -> (index, t) of samples where its agent left the cache
    gone = {sid: [(index, t) for index, t, cached in its if not cached] for sid, its in moves.items()}
    raw: list[tuple[str, int, int, str, bool]] = []  # (session, index, t, why-if-lost, for_good)
    for sid, index, t in deleted:
        why, for_good = "", False
        its = moves.get(sid, [])
        k = bisect_left(its, (index,))  # its last move before the deletion: into the cache, or out
        if not (k and its[k - 1][2]):
            why = "no live agent held its transcript"
            for_good = not _maybe_held(gone.get(sid, []), index, locks, stops)
        elif _ended_before(m, sid, index) and not _live(m, sid, index):
            why = ENDED  # an agent kept past the end owes it nothing (catalog 65)
            for_good = not _locked_since_end(m, sid, index, locks)
        raw.append((sid, index, t, why, for_good))
    out = _Cuts(crashes=crashes, crash_durable=crash_durable)
    for sid, index, t, why, for_good in raw:
        lost_at, owed_at, owed_by = (index if why else NEVER), NEVER, ""
        if not why:
            owed_at, owed_by = _owed(m, sid, index, gone.get(sid, []), sigterms)
            k = bisect_right(crashes, index)
            crash = crashes[k] if k < len(crashes) else NEVER
            if crash < owed_at or (owed_by == "sigterm" and _cut_short(m, owed_at, crash)):
                why, lost_at = "the gateway crashed before writing it back", crash
            elif owed_by in ("release", "sigterm") and any(lo <= m.records[owed_at].t < hi for lo, hi in locks):
                why, lost_at = "the store was locked when its agent let go of it", owed_at  # its write-back may wait
            if why:
                owed_at, owed_by = NEVER, ""
        cut = Deletion(sid, index, t, bool(why), why, lost_at, owed_at, owed_by, for_good)
        out.all.append(cut)
        out.by_session.setdefault(sid, []).append(cut)
    for sid, cuts in out.by_session.items():
        out.indexes[sid] = [c.index for c in cuts]
        counts = [0]
        for cut in cuts:
            counts.append(counts[-1] + cut.lost)
        out.lost_upto[sid] = counts
    return out


def _cache_moves(m: RunModel, sessions: set[str]) -> dict[str, list[tuple[int, int, bool]]]:
    """Session -> (index, t, cached after) of each `resources` sample that moved its agent into
    or out of the cache, for `sessions` only (those a deletion names). Replayed by
    `CacheReplay` itself, each record cut down to its entries naming those sessions (whether
    an agent is cached depends on those alone): the replay holds a few agents, not the cache."""
    moves: dict[str, list[tuple[int, int, bool]]] = {}
    if not sessions:
        return moves
    replay = CacheReplay()
    cached = replay.cached
    for index, r in m.of("resources"):
        naming = _naming(r.detail, sessions)
        if naming:
            touched: set[str] = set()
            replay.apply(naming, touched)
            for sid in sorted(touched):  # the sessions whose entry it touched
                now = sid in cached
                its = moves.setdefault(sid, [])
                if now != (its[-1][2] if its else False):
                    its.append((index, r.t, now))
    return moves


def _naming(detail: dict, sessions: set[str]) -> dict[str, list]:
    """A `resources` record's entries that move an agent of `sessions` in or out of the cache
    (a whole list, or `drop` and `add`: flags aside)."""
    if "cached" in detail:  # a whole list, even with none of them: it empties the others
        return {"cached": [entry for entry in detail["cached"] if entry[0] in sessions]}
    out: dict[str, list] = {}
    if "drop" in detail and not sessions.isdisjoint(detail["drop"]):
        out["drop"] = [sid for sid in detail["drop"] if sid in sessions]
    if "add" in detail and not sessions.isdisjoint(map(_entry_session, detail["add"])):  # most name none of them
        out["add"] = [entry for entry in detail["add"] if entry[0] in sessions]
    return out


_entry_session = itemgetter(0)  # an `add` entry's session: [session, busy]


def _ended_before(m: RunModel, session: str, index: int) -> bool:
    """Whether the session got an on_session_end before record `index`."""
    ends = m.by_session.get(("on_session_end", session))
    return bool(session and ends and ends[0] < index)


def _locked_since_end(m: RunModel, session: str, index: int, locks: list[tuple[int, int]]) -> bool:
    """Whether the store was locked at some time from the session's last end before record
    `index` to that record: a write-back the lock refused may be kept for a retry."""
    ends = m.by_session.get(("on_session_end", session), [])
    k = bisect_left(ends, index)
    ended, deleted = m.records[ends[k - 1]].t, m.records[index].t
    return any(lo <= deleted and ended < hi for lo, hi in locks)


def _cut_short(m: RunModel, stop: int, crash: int) -> bool:
    """A crash point killed the gateway inside this SIGTERM's shutdown (the `crash` record naming
    the point, in the SIGTERM's own step): the write-back it owed died with the process."""
    return crash < len(m.records) and m.records[crash].step == m.records[stop].step and bool(m.records[crash].d("point"))


def _owed(m: RunModel, session: str, index: int, gone: list[tuple[int, int]], sigterms: list[int]) -> tuple[int, str]:
    """When a held session's deleted turns are owed back: the first of its next acknowledged
    turn (its next write), its agent leaving the cache, and a SIGTERM."""
    options = [(NEVER, "")]
    flush = m.next_ack(session, index)
    if flush is not None:
        options.append((flush.reply_index, "turn"))
    k = bisect_right(gone, (index, NEVER))
    if k < len(gone):
        options.append((gone[k][0], "release"))
    k = bisect_right(sigterms, index)
    if k < len(sigterms):
        options.append((sigterms[k], "sigterm"))
    return min(options)


def _maybe_held(gone: list[tuple[int, int]], index: int, locks: list[tuple[int, int]], stops: list[int]) -> bool:
    """Whether a session no cached agent held may still sit in the gateway's memory: its agent
    last left the cache while the store was locked (the write-back may have been refused and
    kept for a retry), and no stop has dropped every object since."""
    k = bisect_left(gone, (index, -1))
    if k == 0:
        return False
    left, t = gone[k - 1]
    if any(left < stop < index for stop in stops):
        return False
    return any(lo <= t < hi for lo, hi in locks)


def _parents(m: RunModel) -> dict[str, tuple[str, int]]:
    """Delegate child session -> the chat session that spawned it, and the child's first request."""
    parents: dict[str, tuple[str, int]] = {}
    for turn in sorted(m.turns.values(), key=attrgetter("request_index")):
        if turn.delegate and turn.session and turn.request is not None and turn.session not in parents:
            parent = _chat_session_at(m, turn.chat, turn.request_index)
            if parent:
                parents[turn.session] = (parent, turn.request_index)
    return parents


def _live(m: RunModel, session: str, index: int) -> bool:
    """Whether `session` was the live session of some chat at record `index`."""
    if session in m.delegate_sessions():
        return True
    return any(_began(seg) <= index and not m.of_session("on_session_end", session, _began(seg), index)
               for seg in m.derived(_lives).get(session, []))


def _began(seg: Segment) -> int:
    """Where a life of the segment's session begins: its window's start (a /resume that reopens
    the session begins it after the end of the life before, logged after the command), else its
    first record."""
    return seg.window[0] or seg.start_index


def _lives(m: RunModel) -> dict[str | None, list[Segment]]:
    """Session -> its lives (segments), in chat order."""
    lives: dict[str | None, list[Segment]] = {}
    for segments in m.segments.values():
        for seg in segments:
            lives.setdefault(seg.session, []).append(seg)
    return lives


def _chat_session_at(m: RunModel, chat: str, index: int) -> str | None:
    current = None
    for seg in m.segments.get(chat, []):
        if seg.start_index <= index:
            current = seg.session
    return current
