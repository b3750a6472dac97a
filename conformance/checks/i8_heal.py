"""I8 heal: a live session whose row was deleted is recreated under the same id with its
full transcript at the next flush, and at the latest before its agent's memory is released;
a session deleted while no agent held it, or after it ended, comes back only by a turn of its own, never as a
side effect of another session's write, and never with what was deleted; a foreign-key
failure with the row present never duplicates it; a delegate child whose parent was
deleted is recreated without the parent; replayed history keeps its visibility flags.

Recreation is judged on the final durable state, against each session's latest deletion (an
earlier one is superseded: the store no longer shows what its heal wrote; I2 judges the
checkpoints); a resurrection on every snapshot after the deletion.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import Counter
from collections.abc import Mapping

from conformance.checks.deletions import ENDED, Deletion, deletions, excused_from_store, lost_cuts
from conformance.checks.model import NEVER, RunModel
from conformance.checks.model.facts import _ABSENT as ABSENT
from conformance.checks.text import SnapshotLabel, Words, turn_list
from conformance.harness.verdict import Verdict, Violation


def check(m: RunModel) -> Verdict:
    final = m.final
    if final is None:
        return Verdict("I8", "skip", reason="no final durable state in the log")
    sessions = final.d("sessions", {})
    violations: list[Violation] = []
    examined = 0
    cuts = deletions(m)
    latest = {cut.session: cut for cut in cuts}
    stuck_reported: set[str] = set()
    for cut in cuts:
        examined += 1
        violations += _same_id(m, cut)
        if cut.session not in stuck_reported and (stuck := _stuck(m, cut)):
            stuck_reported.add(cut.session)
            violations.append(stuck)
        if latest[cut.session] is cut:
            violations += _recreated(m, cut, _user_rows(sessions, cut.session))
    violations += _resurrected(m, cuts)
    for delete_index, r in m.of("delete_parent"):
        children = {t.session for t in m.turns.values()  # its chat's: the parent deleted is that chat's session
                    if t.delegate and t.session and t.reply_index > delete_index and t.chat == r.chat}
        for child in sorted(children):
            examined += 1
            counts = Counter(_user_rows(sessions, child) or [])
            doubled = sorted(t for t, n in counts.items() if n > 1)
            if doubled:
                violations.append(Violation(
                    f"delegate child {child} stores {turn_list(doubled)} twice after its parent {r.session} was deleted "
                    f"(a foreign-key failure with the child's row present must not replay)", (delete_index,), r.t, child, tuple(doubled)))
    # A child may drop its link to a parent deleted for good (`_dangling`), never to one stored.
    named, out = _parentless(m, sessions, {m.records[cut.index].chat or "" for cut in cuts})
    examined += named
    violations += out
    muted = {t.id for t in m.turns.values() if t.muted}
    for sid in sorted(sessions):  # one session's rows at a time (a spilled snapshot loads each as read)
        for role, turn, visibility in sessions[sid]["rows"]:
            if not turn or turn not in m.turns:
                continue
            examined += 1
            want = "hidden" if turn in muted else "visible"
            if visibility != want:
                violations.append(Violation(
                    f"{role} row of {turn} in {sid} is stored {visibility}; it was "
                    f"{'a muted notification reply' if turn in muted else 'not muted'} and must stay {want}",
                    (m.final_index,), final.t, sid, (turn,)))
                break
    return Verdict("I8", "fail" if violations else "pass", tuple(violations), examined=examined)


def _user_rows(sessions: Mapping[str, dict], sid: str) -> list[str] | None:
    """The turn ids of a stored session's user rows, in stored order (None: not stored). Read
    for the sessions a deletion names only: a run without one reads no row of the final state."""
    body = sessions.get(sid)
    return None if body is None else [turn for role, turn, _vis in body["rows"] if role == "user" and turn]


def _same_id(m: RunModel, cut: Deletion) -> list[Violation]:
    """The chat's next turns after the deletion stay in the deleted session (same id)."""
    chat = m.records[cut.index].chat or ""
    segment = None
    for seg in m.segments.get(chat, []):
        if seg.session == cut.session and seg.start_index <= cut.index:
            segment = seg
    if segment is None:
        return []
    for turn in segment.turns:
        if turn.request_index > cut.index and turn.session != cut.session:
            return [Violation(
                f"session {cut.session}'s row was deleted at {m.at(cut.t)} and turn {turn.id} then landed in "
                f"{turn.session} instead of the recreated {cut.session}", (cut.index, turn.request_index), cut.t,
                cut.session, (turn.id,))]
    return []


def _stuck(m: RunModel, cut: Deletion) -> Violation | None:
    """The deleted session's next turn is written (and so acknowledged) when its answer comes,
    unless the store is locked then: a turn held back longer, or never answered by the final
    sigterm, shows a row that was not recreated at the next flush."""
    final_stop = next((i for i, r in m.of("sigterm") if r.d("final")), NEVER)
    locks = [(r.t, r.d("until", r.t)) for _i, r in m.of("db_locked")]
    pending = [t for t in m.turns.values()
               if t.session == cut.session and t.request_t != ABSENT and t.done_index > cut.index]  # `t.request`, `t.done`
    for turn in sorted(pending, key=lambda t: t.request_index)[:1]:
        assert turn.request is not None
        answer = turn.asked + m.config.turn_latency  # the answer to its last ask (a gateway may interrupt and ask again)
        if turn.reply is None and (turn.ended_by == "dropped" or turn.done[1] >= final_stop):
            late = "was never answered"
        elif turn.reply is not None and turn.reply.t > answer and not any(lo < turn.reply.t and hi > answer for lo, hi in locks):
            late = f"got its answer at {m.at(answer)} but was acknowledged only at {m.at(turn.reply.t)}"
        else:
            continue
        return Violation(
            f"session {cut.session}'s row was deleted at {m.at(cut.t)} and not recreated at the next flush: "
            f"turn {turn.id} (asked {m.at(turn.request.t)}) {late}", (cut.index, turn.request_index), cut.t,
            cut.session, (turn.id,))
    return None


def _owed_words(m: RunModel, cut: Deletion) -> tuple[int, Words] | None:
    """(record index, words) of what made the deleted turns owed back: the session's next
    acknowledged turn, or its agent letting go of the transcript (None: nothing did)."""
    flush = m.next_ack(cut.session, cut.index)
    # What its agent held: the turns since an earlier deletion that lost the stored ones (an
    # agent loaded after it holds none of those).
    lost = lost_cuts(m, cut.session, cut.index)
    held = [t.id for t in m.acked_in(cut.session, before=cut.index) if not lost or t.reply_index > lost[-1]]
    if cut.owed_at > m.final_index or cut.owed_by == "turn" or not held:  # an agent holding nothing owes no row
        if flush is None:
            return None
        return flush.reply_index, Words(lambda: f"turn {flush.id} ({m.at(flush.reply.t if flush.reply else None)}) and "
                                               "every later turn were dropped")

    def words() -> str:
        when = m.at(m.records[cut.owed_at].t)
        how = f"the gateway stopped at {when}" if cut.owed_by == "sigterm" else f"left the cache at {when}"
        return f"its agent held {turn_list(held)} and {how} without writing them back"

    return cut.owed_at, Words(words)


def _recreated(m: RunModel, cut: Deletion, stored: list[str] | None) -> list[Violation]:
    """Once owed (its next flush, or its agent letting go of the transcript) the row is back,
    with every turn it owes, each once."""
    owed_by = _owed_words(m, cut)
    if owed_by is None:
        return []
    owed_at, words = owed_by
    owed = [t.id for t in m.acked_in(cut.session) if excused_from_store(m, t, m.final_index) is None]
    if stored is None:
        later = [t.id for t in m.acked_in(cut.session) if t.reply_index > cut.index]
        return [Violation(
            f"session {cut.session}'s row was deleted at {m.at(cut.t)} and never recreated: {words}",
            (cut.index, owed_at), cut.t, cut.session, tuple(owed or later))]
    out = []
    if missing := [t for t in owed if t not in stored]:
        out.append(Violation(
            f"session {cut.session}'s row was deleted at {m.at(cut.t)} and recreated without {turn_list(missing)}: "
            f"the final store holds {turn_list(stored)}", (cut.index, owed_at), cut.t, cut.session, tuple(missing)))
    if doubled := sorted(t for t, n in Counter(stored).items() if n > 1):
        out.append(Violation(
            f"session {cut.session} stores {turn_list(doubled)} more than once after its row was deleted at {m.at(cut.t)}",
            (cut.index,), cut.t, cut.session, tuple(doubled)))
    return out + _dangling(m, cut, owed_at)


def _dangling(m: RunModel, cut: Deletion, owed_at: int) -> list[Violation]:
    """A recreated child does not point at a deleted parent: in any snapshot once it is owed
    back (the parent's own heal may bring the parent back later; a parent the surface deleted
    with foreign keys off after the cut is the surface's doing)."""
    dangled = [i for i, r in m.of("delete_parent") if i > cut.index]
    for index, parents in _parent_links(m):
        if index < owed_at:
            continue
        parent = parents.get(cut.session)
        if parent is not None and parent not in parents and not any(
                i < index and m.records[i].session == parent for i in dangled):
            return [Violation(
                f"delegate child {cut.session} was recreated pointing at deleted parent {parent}", (cut.index,), cut.t,
                cut.session)]
    return []


def _parentless(m: RunModel, stored: dict, cut_chats: set[str]) -> tuple[int, list[Violation]]:
    """A delegate child's row names its parent (contract: a delegate child): in the final
    store, a child whose task's session (its chat's session when the task arrived, live or
    past its boundary) is stored names a parent, even where the parent's row was not written
    yet when the child's was, or was deleted and healed since (the seventh audit of lazy
    gateways: a heal that wrote the child's row back without its parent passed, the rule
    judging only chats without a deletion); and, in chats without a deletion (`cut_chats`:
    there a deletion may have taken the parent for good), no session of the chat before
    that one. A task held while the gateway was down may be spawned by the session after
    the restart (catalog 57). A chat's question, so a log judged in parts asks it the same way."""
    out: list[Violation] = []
    examined = 0
    seen: set[str] = set()
    for turn in sorted((t for t in m.turns.values() if t.delegate and t.session), key=lambda t: t.index):
        child = turn.session
        body = stored.get(child)
        if body is None or child in seen:
            continue
        seen.add(child)
        examined += 1
        spawner = next((seg.session for seg in reversed(m.segments.get(turn.chat, []))
                        if seg.session is not None and seg.start_index < turn.index), None)
        parent = body.get("parent")
        if parent is None and spawner is not None and spawner in stored:
            out.append(Violation(
                f"delegate child {child} (task {turn.id} of chat {turn.chat} at {m.at(turn.arrival)}, while its session was "
                f"{spawner}) is stored naming no parent: a delegate child's row names the session that spawned it",
                (turn.index,), turn.arrival, child, (turn.id,)))
        elif turn.chat not in cut_chats and parent is not None and spawner is not None and parent != spawner and not turn.held \
                and parent in earlier_sessions(m, turn.chat, spawner):
            out.append(Violation(  # the audit of lazy gateways (2026-12-05): the chat's first session named
                f"delegate child {child} (task {turn.id} of chat {turn.chat} at {m.at(turn.arrival)}, while its session was "
                f"{spawner}) is stored naming {parent}, an earlier session of the chat, as its parent",
                (turn.index,), turn.arrival, child, (turn.id,)))
    return examined, out


def earlier_sessions(m: RunModel, chat: str, session: str) -> set[str]:
    """The chat's sessions whose segments all began before `session`'s first one: a parent named
    among them is a task's spawner taken from the chat's past (a held task, spawned after a
    restart, may name a later one: catalog 57)."""
    segments = m.segments.get(chat, [])
    first = next((seg.start_index for seg in segments if seg.session == session), None)
    if first is None:
        return set()
    return {seg.session for seg in segments if seg.session is not None and seg.start_index < first} - {session}


def _parent_links(m: RunModel) -> list[tuple[int, dict[str, str | None]]]:
    """Each snapshot's sessions and their parents, read once (a snapshot holds every stored
    row: the largest records of a long run, read from its file when the log spilled)."""
    return m.derived(_read_parent_links)


def _read_parent_links(m: RunModel) -> list[tuple[int, dict[str, str | None]]]:
    return [(index, {sid: body.get("parent") for sid, body in snap.d("sessions", {}).items()})
            for index, snap in m.of("durable")]


def _resurrected(m: RunModel, cuts: list[Deletion]) -> list[Violation]:
    """A session deleted while no agent held it, or after it ended, comes back only by a turn of
    its own (its next admitted turn, or a /resume into it; judged against the session's latest
    deletion before each snapshot), and never with the turns such a deletion took (in every
    later snapshot)."""
    by_session: dict[str, list[Deletion]] = {}
    for cut in cuts:
        by_session.setdefault(cut.session, []).append(cut)
    if not any(cut.for_good for cut in cuts):
        return []
    requests: dict[str, list[int]] = {}  # session -> its own comebacks: its turns asked, switches into it (/resume)
    for turn in m.turns.values():
        if turn.session and turn.request_t != ABSENT:  # asked (`turn.request`, without the Stamp), in a session
            requests.setdefault(turn.session, []).append(turn.request_index)
    for sid in by_session:
        requests.setdefault(sid, []).extend(i for i, _r in m.of_session("on_session_switch", sid))
    for segments in m.segments.values():  # a /resume past the boundary reopens the ended session: no switch
        for seg in segments:
            if seg.reopens and seg.session in by_session:
                requests[seg.session].append(seg.window[0])
    for indexes in requests.values():
        indexes.sort()
    out: list[Violation] = []
    reported: set[str] = set()
    for index, snap in m.of("durable"):
        stored = snap.d("sessions", {})
        for sid in sorted(by_session):
            if sid in reported or sid not in stored:
                continue
            before = [c for c in by_session[sid] if c.index < index]
            for_good = [c for c in before if c.for_good]
            if not for_good:
                continue
            cut = before[-1]
            label = SnapshotLabel(m, snap)
            asked = requests.get(sid, [])
            k = bisect_right(asked, cut.index)
            if cut.for_good and (k == len(asked) or asked[k] > index):
                reported.add(sid)
                out.append(Violation(
                    f"session {sid}'s row was deleted at {m.at(cut.t)} {_when(cut)} and is back at {label} "
                    f"with no turn of its own since{_writers(m, sid, cut.index, index, stored)}: "
                    f"{_comes_back(cut)}", (cut.index, index), snap.t, sid))
                continue
            cut = for_good[-1]  # what it took is gone for good, whatever came after
            taken = {t.id for t in m.acked_in(sid, before=cut.index)}
            if back := [t for role, t, _vis in stored[sid]["rows"] if role == "user" and t in taken]:
                reported.add(sid)
                out.append(Violation(
                    f"session {sid}'s row was deleted at {m.at(cut.t)} {_when(cut)}, and its deleted "
                    f"transcript reappeared: {label} holds {turn_list(list(dict.fromkeys(back)))} again",
                    (cut.index, index), snap.t, sid, tuple(dict.fromkeys(back))))
    return out


def _when(cut: Deletion) -> str:
    return "after it had ended" if cut.why == ENDED else "while no agent held it"


def _comes_back(cut: Deletion) -> str:
    if cut.why == ENDED:  # catalog 65: an agent kept past the end wrote the deleted row back
        return "an ended session's deleted row is no longer the gateway's to write; it comes back only by a new turn in it"
    return "a deleted session comes back only by its own heal or a new turn in it"


def _writers(m: RunModel, session: str, lo: int, hi: int, stored: dict) -> str:
    """The evidence of whose write brought `session` back: its delegate children's turns
    acknowledged in between (words, or nothing)."""
    children = sorted(sid for sid, body in stored.items() if body.get("parent") == session)
    written = [t for child in children for t in m.acked_in(child) if lo < t.reply_index < hi]
    if not written:
        return ""
    first = min(written, key=lambda t: t.reply_index)
    return f" (delegate child {first.session}, pointing at it, wrote {first.id} at {m.at(first.reply.t if first.reply else None)})"
