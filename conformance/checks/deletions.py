"""Row deletions by another surface, and what they excuse: derived once per log.

A deleted session row takes its stored turns with it. A gateway owes them back at the
session's next write (the next acknowledged turn) only if a live agent held the transcript
from the deletion until that write; otherwise nothing in the gateway could restore them.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from dataclasses import dataclass, field

from conformance.checks.model import NEVER, RunModel, Turn
from conformance.observations import CacheReplay


@dataclass(frozen=True)
class Deletion:
    """Another surface removed a session row. `lost`: nothing in the gateway could restore
    what was stored (why says which: no agent held it, it left the cache before the next
    write, or the session had already ended)."""

    session: str
    index: int
    t: int
    lost: bool
    why: str = ""
    gone_at: int = NEVER  # record index where the agent holding the transcript left the cache (before the next write)

    def lost_by(self, index: int) -> bool:
        """Whether the deleted turns were beyond restoring at record `index` (an end's transcript)."""
        return self.lost and (self.gone_at == NEVER or self.gone_at < index)


@dataclass
class _Cuts:
    all: list[Deletion] = field(default_factory=list)
    by_session: dict[str, list[Deletion]] = field(default_factory=dict)
    indexes: dict[str, list[int]] = field(default_factory=dict)  # parallel to by_session
    lost_upto: dict[str, list[int]] = field(default_factory=dict)  # lost_upto[s][k]: lost cuts among the first k
    crashes: list[int] = field(default_factory=list)
    crash_durable: bool = True


def deletions(m: RunModel) -> list[Deletion]:
    """Every session row removed, with cascades to delegate children (delete_session only)."""
    return _cuts(m).all


def lost_cuts(m: RunModel, session: str, index: int) -> list[int]:
    """The record indexes, in order, of the deletions of `session` before `index` that lost its
    stored turns as far as the log can tell. A loss because its agent left the cache before the
    next write is only possible (the gateway may have written the row back as the agent went),
    so an end may carry the turns after any of these cuts."""
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
            return "its row was deleted while no live agent held the transcript"
        flush = m.next_ack(session, indexes[hi - 1])
        if flush is None or flush.reply_index > at_index:
            return "its row was deleted and no flush has happened since"
    if not cuts.crash_durable:
        k = bisect_left(cuts.crashes, turn.reply_index)
        if k < len(cuts.crashes) and cuts.crashes[k] < at_index:
            return "the gateway does not claim crash durability"
    return None


def _cuts(m: RunModel) -> _Cuts:
    if "cuts" not in m.memo:
        m.memo["cuts"] = _derive(m)
    cuts: _Cuts = m.memo["cuts"]
    return cuts


def _derive(m: RunModel) -> _Cuts:
    crashes = [i for i, _ in m.of("crash")]
    crash_durable = bool(m.profile.get("crash_durable", True))
    if not m.by_kind.get("delete_session") and not m.by_kind.get("delete_parent"):
        return _Cuts(crashes=crashes, crash_durable=crash_durable)  # no deletion: skip the cache scan
    children: dict[str, list[tuple[int, str]]] = {}  # parent -> (child's first request, child)
    for child, (parent, born) in sorted(_parents(m).items()):
        children.setdefault(parent, []).append((born, child))
    replay = CacheReplay()  # resources records are deltas
    cached = replay.cached
    gone: dict[str, list[int]] = {}  # session -> indexes of samples where its agent left the cache
    ended: set[str] = set()
    raw: list[tuple[str, int, int, str]] = []  # (session, index, t, why-if-lost-so-far)
    kinds = ("resources", "on_session_end", "delete_session", "delete_parent")
    for index, r in m.of(*kinds):
        if r.kind == "resources":
            for sid in replay.apply(r.detail):
                if sid not in cached:
                    gone.setdefault(sid, []).append(index)
        elif r.kind == "on_session_end" and r.session:
            ended.add(r.session)
        elif r.session:
            removed = [r.session]
            if r.kind == "delete_session":
                removed += [child for born, child in children.get(r.session, []) if born < index]
            for sid in removed:
                why = ""
                if sid not in cached:
                    why = "no live agent held its transcript"
                elif sid in ended and not _live(m, sid, index):
                    why = "the session had already ended"
                raw.append((sid, index, r.t, why))
    out = _Cuts(crashes=crashes, crash_durable=crash_durable)
    for sid, index, t, why in raw:
        gone_at = NEVER
        if not why:
            flush = m.next_ack(sid, index)
            until = flush.reply_index if flush is not None else NEVER
            left = gone.get(sid, [])
            k = bisect_right(left, index)
            if k < len(left) and left[k] < until:
                why, gone_at = "its agent left the cache before the next write", left[k]
        cut = Deletion(sid, index, t, bool(why), why, gone_at)
        out.all.append(cut)
        out.by_session.setdefault(sid, []).append(cut)
    for sid, cuts in out.by_session.items():
        out.indexes[sid] = [c.index for c in cuts]
        counts = [0]
        for cut in cuts:
            counts.append(counts[-1] + cut.lost)
        out.lost_upto[sid] = counts
    return out


def _parents(m: RunModel) -> dict[str, tuple[str, int]]:
    """Delegate child session -> the chat session that spawned it, and the child's first request."""
    parents: dict[str, tuple[str, int]] = {}
    for turn in sorted(m.turns.values(), key=lambda t: t.request_index):
        if turn.delegate and turn.session and turn.request is not None and turn.session not in parents:
            parent = _chat_session_at(m, turn.chat, turn.request_index)
            if parent:
                parents[turn.session] = (parent, turn.request_index)
    return parents


def _live(m: RunModel, session: str, index: int) -> bool:
    """Whether `session` was the live session of some chat at record `index`."""
    if session in m.delegate_sessions():
        return True
    lives = m.memo.get("lives")
    if lives is None:
        lives = m.memo["lives"] = {}
        for segments in m.segments.values():
            for seg in segments:
                lives.setdefault(seg.session, []).append(seg)
    return any(
        seg.start_index <= index and not m.of_session("on_session_end", session, seg.start_index, index)
        for seg in lives.get(session, [])
    )


def _chat_session_at(m: RunModel, chat: str, index: int) -> str | None:
    current = None
    for seg in m.segments.get(chat, []):
        if seg.start_index <= index:
            current = seg.session
    return current
