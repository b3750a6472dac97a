"""What the oracle asserts of itself once it has built (`verify`): a model that breaks one of
these is a bug in sessiongate, reported as a checker error, not a verdict drawn from it.

Each holds by construction whatever the gateway did (they say nothing of the gateway), and
each costs one pass over the turns or segments."""

from __future__ import annotations

from itertools import pairwise

from conformance.checks.model.facts import _ABSENT as ABSENT
from conformance.checks.model.facts import NEVER, OracleError, Segment, Turn
from conformance.checks.model.log import LogView


def verify(view: LogView, turns: dict[str, Turn], segments: dict[str, list[Segment]],
           acked: dict[str, list[Turn]]) -> None:
    """Raise `OracleError` naming the first invariant the model breaks."""
    size = len(view.records)
    walked = getattr(view.records, "size", size)  # one part of a log judged in parts walks its own records
    if sum(map(len, view.by_kind.values())) != walked:
        raise OracleError(f"the index by kind holds {sum(map(len, view.by_kind.values()))} records of {walked}")
    admitted, replied = _turns_are_placed(turns, size, segments)
    _segments_partition_turns(segments, admitted)
    for chat, chat_segments in segments.items():
        _segments_do_not_overlap(chat, chat_segments)
        _windows_are_ordered(chat, chat_segments, size)
    _acked_in_reply_order(acked, replied)


def _turns_are_placed(turns: dict[str, Turn], size: int, segments: dict[str, list[Segment]]) -> tuple[int, int]:
    """Every turn's records follow its input, inside the log; every admitted turn is done; its
    session is its reply's once acked, else its request's.
    Returns how many admitted chat turns the segments must hold, and how many turns were replied
    in a session (one pass over the turns for every invariant that counts them)."""
    admitted = replied = 0
    for turn in turns.values():
        index = turn.index
        if not 0 <= index < size:
            raise OracleError(f"turn {turn.id}'s input is record {index}, outside the log of {size}")
        if turn.request_t != ABSENT:  # admitted (the plain fields: `turn.request` builds a Stamp)
            if not index < turn.request_index < size:
                raise OracleError(f"turn {turn.id} was asked at record {turn.request_index}, not after its input")
            if turn.done_t == NEVER and turn.done_index == NEVER:  # `turn.done == UNDONE`, without a Moment made
                raise OracleError(f"admitted turn {turn.id} has no end")
            if not turn.delegate and turn.chat in segments:
                admitted += 1
        if turn.reply_t != ABSENT:
            if not index < turn.reply_index < size:
                raise OracleError(f"turn {turn.id} was replied at record {turn.reply_index}, not after its input")
            if turn.reply_session:
                replied += 1
        ran = turn.reply_session if turn.reply_t != ABSENT else turn.request_session if turn.request_t != ABSENT else None
        if turn.session != ran:
            raise OracleError(f"turn {turn.id} is kept in session {turn.session!r}, not {ran!r} as its records say")
    return admitted, replied


def _segments_partition_turns(segments: dict[str, list[Segment]], admitted: int) -> None:
    """Every admitted chat turn is in exactly one segment, its chat's, and the chat's segments
    hold its turns in the order they were asked."""
    placed = 0
    for chat, chat_segments in segments.items():
        last = -1
        for number, seg in enumerate(chat_segments):
            if seg.number != number or seg.chat != chat:
                raise OracleError(f"segment {seg.label()} is numbered {seg.number} of chat {seg.chat!r}, "
                                  f"at place {number} of chat {chat!r}")
            for turn in seg.turns:
                if turn.chat != chat or turn.delegate or turn.request_t == ABSENT:
                    raise OracleError(f"segment {seg.label()} holds turn {turn.id}, not an admitted turn of {chat!r}")
                if turn.request_index <= last:
                    raise OracleError(f"turn {turn.id} is in segment {seg.label()} out of order, or twice")
                last = turn.request_index
            placed += len(seg.turns)
    if placed != admitted:
        raise OracleError(f"the segments hold {placed} turns of {admitted} admitted")
def _segments_do_not_overlap(chat: str, segments: list[Segment]) -> None:
    """Each segment starts where (or after) the one before it ended: only the last may be
    unended, and none starts before the last turn of the one before it was asked."""
    for before, after in pairwise(segments):
        if before.boundary is None:
            raise OracleError(f"segment {before.label()} of {chat!r} has no boundary, but segment {after.label()} follows it")
        if after.start < before.boundary or after.start_index < before.start_index:
            raise OracleError(f"segment {after.label()} of {chat!r} starts at {after.start} (record {after.start_index}), "
                              f"before segment {before.label()} ended at {before.boundary}")
        if before.turns and after.start_index < before.turns[-1].request_index:
            raise OracleError(f"segment {after.label()} of {chat!r} starts at record {after.start_index}, "
                              f"before the last turn of {before.label()} was asked")


def _windows_are_ordered(chat: str, segments: list[Segment], size: int) -> None:
    """Each life's window is a range inside the log, and one session's lives follow each other."""
    last_hi: dict[str | None, int] = {}
    for seg in segments:
        lo, hi = seg.window
        if not 0 <= lo <= hi <= size:
            raise OracleError(f"segment {seg.label()} of {chat!r} has the window [{lo}, {hi}) in a log of {size}")
        if lo < last_hi.get(seg.session, 0):
            raise OracleError(f"segment {seg.label()} of {chat!r} begins a life at record {lo}, "
                              f"inside the life before it (to {last_hi[seg.session]})")
        last_hi[seg.session] = hi


def _acked_in_reply_order(acked: dict[str, list[Turn]], replied: int) -> None:
    """Each acknowledged turn is listed once, under its session, in reply order."""
    listed = 0
    for session, session_turns in acked.items():
        last = -1
        for turn in session_turns:
            if turn.reply_t == ABSENT or turn.reply_session != session or turn.reply_index <= last:
                raise OracleError(f"turn {turn.id} is listed as acknowledged in {session} out of order, or wrongly")
            last = turn.reply_index
        listed += len(session_turns)
    if listed != replied:
        raise OracleError(f"{listed} acknowledged turns are listed by session, of {replied}")
