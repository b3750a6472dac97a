"""I6 reset policy: a turn lands in a new session iff its chat's entry was past a boundary
when the turn arrived; never mid-turn; slash commands and internal traffic do not move the
idle clock; a `/stop` abandons the turn in flight (no reply after it); a delegated task is
skipped only when its chat had no live session, runs in a child of the session live when it
arrived (a child serves one parent), and its result goes to its own chat (a user turn's reply
is I9's); the LLM is asked a turn in its session's own conversation, no other session's turn in
its context. The expected cuts come from the inputs alone
(`model.RunModel.segments`), never from what the gateway says it did (a `delegate_skipped`
note is its word, not evidence)."""

from __future__ import annotations

from conformance.checks.model import RunModel, Segment, Turn
from conformance.checks.model.facts import _ABSENT as ABSENT
from conformance.checks.text import boundary_words
from conformance.harness.verdict import Verdict, Violation


def check(m: RunModel) -> Verdict:
    violations: list[Violation] = []
    examined = 0
    owner: dict[str, tuple[str, int]] = {}
    for chat in sorted(m.segments):
        segments = m.segments[chat]
        for seg in segments:
            examined += len(seg.turns)
            violations += _turns(m, seg, segments)
            if seg.session is None or not seg.turns or seg.resumes is not None:
                continue
            previous = segments[seg.number - 1] if seg.number else None
            first = seg.turns[0]
            if previous is not None and first.request_t < seg.start:  # asked before the last segment ended (`chat_segments`)
                violations.append(Violation(
                    f"turn {first.id} was asked at {m.at(first.request_t)} in {seg.session}, before {previous.session} "
                    f"reached its boundary at {m.at(previous.boundary)} ({previous.reason}): the chat rotated mid-turn, "
                    f"ahead of the turn in flight that the rotation waited for", (first.request_index,), first.request_t,
                    seg.session, (first.id,)))
            if previous is not None and previous.session == seg.session:
                waited = first.arrival < previous.boundary  # behind the chat's turn or command, or held for a restart
                arrived = f"arrived at {m.at(first.arrival)}" + (" and waited until" if waited else ",")
                violations.append(Violation(
                    f"turn {first.id} {arrived} past {previous.session}'s {previous.reason} boundary at "
                    f"{m.at(previous.boundary)} ({boundary_words(m, previous)}): it should open a new session "
                    f"but landed in {seg.session}", (first.request_index,), first.arrival, seg.session, (first.id,)))
            elif seg.session in owner and owner[seg.session] != (chat, seg.number):
                other_chat, _ = owner[seg.session]
                violations.append(Violation(
                    f"session {seg.session} is reused: turn {first.id} of chat {chat} landed in a session that "
                    f"chat {other_chat} already used", (first.request_index,), first.arrival, seg.session, (first.id,)))
            owner.setdefault(seg.session, (chat, seg.number))
    for rule in (_answered_after_stop, _skipped_delegates, _delegate_children, _misdelivered_results, _foreign_context,
                 _served_out_of_order):
        judged, out = rule(m)
        examined += judged
        violations += out
    return Verdict("I6", "fail" if violations else "pass", tuple(violations), examined=examined)


def _turns(m: RunModel, seg: Segment, segments: list[Segment]) -> list[Violation]:
    """Each turn of the segment in the segment's session, and none cut mid-turn."""
    out: list[Violation] = []
    resumed = segments[seg.resumes].session if seg.resumes is not None else None
    for turn in seg.turns:
        assert turn.request_t != ABSENT  # admitted (`turn.request`, without the Stamp)
        if turn.reply_t != ABSENT and turn.reply_session != turn.request_session:
            out.append(Violation(
                f"turn {turn.id} started in {turn.request.session} but its reply landed in {turn.reply.session} "
                f"at {m.at(turn.reply.t)} (a reset mid-turn)", (turn.request_index, turn.reply_index),
                turn.reply.t, turn.request.session, (turn.id,)))
        elif resumed is not None and turn.session != resumed:
            out.append(Violation(
                f"after /resume at {m.at(seg.start)} turn {turn.id} landed in {turn.session}, "
                f"not the resumed session {resumed}", (turn.request_index,), turn.arrival, turn.session, (turn.id,)))
        elif turn.session != seg.session:
            out.append(Violation(
                f"turn {turn.id} arrived at {m.at(turn.arrival)}, before any boundary of {seg.session} "
                f"({boundary_words(m, seg) if seg.boundary else 'none reached'}): it belongs in {seg.session} "
                f"but landed in {turn.session}", (turn.request_index,), turn.arrival, turn.session, (turn.id,)))
    ends = m.ends_in(seg) if seg.session else []
    if ends:
        end_index, end = ends[0]
        for turn in seg.turns:
            if turn.request_index < end_index < turn.reply_index and turn.reply_t != ABSENT:
                out.append(Violation(
                    f"session {seg.session} ended at {m.at(end.t)} while turn {turn.id} was in flight "
                    f"(asked {m.at(turn.request.t)}, answered {m.at(turn.reply.t)}): a reset mid-turn",
                    (turn.request_index, end_index, turn.reply_index), end.t, seg.session, (turn.id,)))
    return out


def _answered_after_stop(m: RunModel) -> tuple[int, list[Violation]]:
    """A /stop ends the turn it found in flight: a reply delivered after it answers a turn the
    user abandoned (the gateway ignored the /stop)."""
    out: list[Violation] = []
    examined = 0
    for turn in sorted((t for t in m.turns.values() if t.stopped is not None), key=lambda t: t.index):
        examined += 1
        assert turn.stopped is not None and turn.request is not None
        if turn.reply is not None:
            out.append(Violation(
                f"turn {turn.id} (session {turn.request.session}, asked {m.at(turn.request.t)}) was abandoned by /stop "
                f"at {m.at(turn.stopped[0])} but its reply was delivered at {m.at(turn.reply.t)}: a stopped turn "
                f"gets no reply", (turn.stopped[1], turn.reply_index), turn.reply.t, turn.reply.session, (turn.id,)))
    return examined, out


def _skipped_delegates(m: RunModel) -> tuple[int, list[Violation]]:
    """A delegated task may be skipped only when its chat has no live session: none yet, or
    the last one past its boundary. One that arrived (gateway up) while a segment of its chat
    was open and before that segment's boundary must be admitted (its llm_request)."""
    out: list[Violation] = []
    examined = 0
    for index, r in m.of("delegate"):
        if r.d("queued") or not r.turns:
            continue  # held while the gateway was down: when it is delivered is the gateway's
        turn = m.turns.get(r.turns[0])
        if turn is None or not turn.delegate:
            continue
        live = _live_segment(m, turn.chat, index, r.t)
        if live is None:
            continue
        examined += 1
        if turn.request is None:
            out.append(Violation(
                f"delegated task {turn.id} arrived at {m.at(r.t)} while chat {turn.chat}'s session {live.label()} was "
                f"live ({'no boundary reached' if live.boundary is None else 'its boundary comes at ' + m.at(live.boundary)}) "
                f"but was never asked of the LLM: a delegate is skipped only when the chat has no live session",
                (index,), r.t, live.session, (turn.id,)))
    return examined, out


def _live_segment(m: RunModel, chat: str, index: int, t: int) -> Segment | None:
    """The chat's segment open at record `index` (time `t`), if its boundary is still ahead."""
    for seg in reversed(m.segments.get(chat, [])):
        if seg.session is None or seg.start_index >= index:
            continue
        return seg if seg.boundary is None or seg.boundary > t else None
    return None


def _delegate_children(m: RunModel) -> tuple[int, list[Violation]]:
    """A delegated task runs in a child of the session live in its chat when it arrived, so two
    tasks that arrived in two sessions' lives never share a child: one keyed by its chat would
    carry the old session's task, context and parent into the new session's. A task held while
    the gateway was down (the session after the restart may spawn it), or with no live session,
    is not judged."""
    out: list[Violation] = []
    examined = 0
    first: dict[str, tuple[str, str]] = {}  # child session -> (the parent live at its first task, that task)
    for index, r in m.of("delegate"):
        if r.d("queued") or not r.turns:
            continue
        turn = m.turns.get(r.turns[0])
        if turn is None or not turn.delegate or turn.request is None or not turn.request_session:
            continue
        live = _live_segment(m, turn.chat, index, r.t)
        if live is None or live.session is None:
            continue
        examined += 1
        child, parent = turn.request_session, live.session
        if child not in first:
            first[child] = (parent, turn.id)
        elif first[child][0] != parent:
            before, task = first[child]
            out.append(Violation(
                f"delegated task {turn.id} arrived at {m.at(r.t)} while chat {turn.chat}'s session {parent} was live, "
                f"but ran in {child}, the child {before} spawned for {task}: a child serves one parent session",
                (index, turn.request_index), r.t, child, (turn.id,)))
    return examined, out


def _misdelivered_results(m: RunModel) -> tuple[int, list[Violation]]:
    """A delegated task's result goes to its own chat's outbox and carries the answer (the
    walk's `unanswering`, which I9 judges for user turns). Read off the delegate records: few."""
    out: list[Violation] = []
    examined = 0
    for _index, d in m.of("delegate"):
        turn = m.turns.get(d.turns[0]) if d.turns else None
        if turn is None or not turn.delegate or turn.reply_t == ABSENT:
            continue
        examined += 1
        wrong = m.unanswering.get(turn.id)
        if not wrong:
            continue
        r = m.records[wrong[0]]
        words = f"went to chat {r.chat}, not {turn.chat}" if r.chat != turn.chat else "carried no answer to it"
        out.append(Violation(f"delegated task {turn.id}'s result at {m.at(r.t)} {words}", (turn.index, wrong[0]),
                             r.t, r.session, (turn.id,)))
    return examined, out


def _foreign_context(m: RunModel) -> tuple[int, list[Violation]]:
    """A session is its own conversation: the LLM is asked a turn with no turn of another session
    in its context (the oldest turn its prompt's history carries, an `llm_request`'s `context`).
    A chat whose agent kept the ended session's history past `/new`, a reset or an expiry started
    no new session where the user can tell. A session whose row was deleted before the request
    is excused: a gateway that heals one carries its conversation on in the new session
    (contract, *Deletions*); a delegate's request is not judged (its child may be told its
    parent's context). Judged across a boundary: two turns of one segment in two sessions are the
    segment rules' to name. Once a pair of sessions."""
    out: list[Violation] = []
    examined = 0
    deleted: dict[str, int] = {}  # session -> the record its row was first deleted at
    for index, r in m.of("delete_session", "delete_parent"):
        if r.session is not None:
            deleted.setdefault(r.session, index)
    said: set[tuple[str, str]] = set()
    place: dict[str, Segment] | None = None
    for index, r in m.of("llm_request"):
        context = r.detail.get("context")
        if context is None or not r.turns:
            continue
        own, old = m.turns.get(r.turns[0]), m.turns.get(context)
        if own is None or old is None or own.delegate or old.delegate:
            continue
        examined += 1
        if old.session is None or old.session == r.session or deleted.get(old.session, index) < index:
            continue
        if place is None:  # each turn's segment: built at the first context of another session (few runs)
            place = {t.id: seg for segs in m.segments.values() for seg in segs for t in seg.turns}
        seg = place.get(own.id)
        if seg is not None and (place.get(old.id) is seg or (seg.resumes is not None and
                                                              m.segments[seg.chat][seg.resumes].session == old.session)):
            continue  # no boundary between them, or the session resumed: a turn in the wrong session is for the segment rules
        if (r.session or "", old.session) not in said:
            said.add((r.session or "", old.session))
            out.append(Violation(
                f"the LLM was asked turn {own.id} at {m.at(r.t)} in session {r.session} with turn {old.id} of session "
                f"{old.session} in its context: a new session starts a new conversation", (index,), r.t, r.session,
                (own.id,)))
    return examined, out


def _served_out_of_order(m: RunModel) -> tuple[int, list[Violation]]:
    """A chat is served in arrival order: no turn is asked of the LLM before one of its chat that
    arrived earlier and was still waiting (a queue served newest first answers the last message
    first). The model lists such chats (`Facts.served_out_of_order`, found in C), and walks
    their segments in the order they were served (`segments.chat_segments`). The first such
    pair a chat; the turns are counted as examined by the segment rules."""
    out: list[Violation] = []
    for chat in m.facts.served_out_of_order:
        latest: Turn | None = None  # the turn asked last of those that arrived so far
        for turn in m.turns.values():  # in arrival order
            if turn.chat != chat or turn.delegate or turn.request_t == ABSENT:
                continue
            if latest is None or turn.request_index > latest.request_index:
                latest = turn
                continue
            out.append(Violation(
                f"turn {turn.id} of chat {turn.chat} arrived at {m.at(turn.arrival)}, after {latest.id} "
                f"({m.at(latest.arrival)}), but was asked first ({m.at(turn.request_t)}, {latest.id} at "
                f"{m.at(latest.request_t)}): a chat is served in arrival order", (turn.request_index, latest.request_index),
                turn.request_t, turn.session, (turn.id, latest.id)))
            break
    return 0, out
