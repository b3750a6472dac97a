"""`Flights`: the fields of every turn that I7 reads, in columns (64 bytes a turn, no object a turn).

Why: the partitioned judge of a long (spilled) log builds one part's model at a time and drops it;
I7 is global (one agent cache for every chat), so it judges the turnless model plus this, gathered part by part."""

from __future__ import annotations

from array import array
from collections.abc import Iterable

from conformance.checks.model import NEVER, RunModel, Turn

Flight = tuple[int, int, int, str]  # (record index, time, +1 into flight / -1 out of it, session)


class Flights:
    """Every turn's fields that I7 reads, a row a turn, appended a batch at a time in any order:
    I7 puts what it reads in log order by record index, so the order of rows (and of batches)
    changes nothing. A column a field: integers in 8-byte arrays; chat and session names as
    references to the model's own strings, one a name (8 bytes a row: a code table would cost a
    dict look-up a row), None where the turn has none.

    The ends of admitted turns that are no reply (a /stop, SIGTERM, crash: few) are kept beside."""

    __slots__ = ("chat", "ends", "index", "reply_index", "reply_t", "request_index", "request_session", "request_t",
                 "session")

    def __init__(self) -> None:
        self.index = array("q")  # the input's record index (`Turn.index`)
        self.chat: list[str] = []
        self.session: list[str | None] = []  # where it ran (`Turn.session`)
        self.request_t = array("q")  # its LLM request: when (ABSENT: none), the record (-1: none), the session
        self.request_index = array("q")
        self.request_session: list[str | None] = []
        self.reply_t = array("q")  # its reply: when (ABSENT: none), the record (-1: none)
        self.reply_index = array("q")
        self.ends: list[Flight] = []  # admitted turns that left flight with no reply: (record index, time, -1, session)

    @classmethod
    def from_model(cls, m: RunModel) -> Flights:
        """The projection of a whole model's turns (one batch)."""
        flights = cls()
        flights.add(m.turns.values())
        return flights

    def __len__(self) -> int:
        return len(self.index)

    def add(self, turns: Iterable[Turn]) -> None:
        """One batch of turns (a part's), before or after any other batch. A column at a time:
        a comprehension reads a field of every turn, and an array takes the numbers whole."""
        batch = turns if isinstance(turns, list) else list(turns)
        _extend(self.index, [turn.index for turn in batch])
        self.chat += [turn.chat for turn in batch]
        self.session += [turn.session for turn in batch]
        _extend(self.request_t, [turn.request_t for turn in batch])
        _extend(self.request_index, [turn.request_index for turn in batch])
        self.request_session += [turn.request_session for turn in batch]
        _extend(self.reply_t, [turn.reply_t for turn in batch])
        _extend(self.reply_index, [turn.reply_index for turn in batch])
        # Admitted (the walk sets a request's time, record and session together), never acked, ended.
        self.ends += [(turn.done_index, turn.done_t, -1, turn.request_session) for turn in batch
                      if turn.reply_index < 0 and turn.done_index < NEVER and turn.request_session is not None]


def _extend(column: array[int], values: list[int]) -> None:
    """`column.extend(values)`, the common case (no negative number) through an unsigned array:
    its items convert without the argument parser the signed ones go through (≈ 4x cheaper).
    The bytes are the same for a non-negative number."""
    try:
        column.frombytes(memoryview(array("Q", values)).cast("B"))
    except OverflowError:
        column.extend(values)
