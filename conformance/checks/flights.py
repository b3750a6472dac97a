"""`Flights`: the fields of every turn that I7 reads, in columns (64 bytes a turn, no object a turn).

Why: the partitioned judge of a long (spilled) log builds one part's model at a time and drops it;
I7 is global (one agent cache for every chat), so it judges the turnless model plus this, gathered part by part."""

from __future__ import annotations

from array import array
from bisect import bisect_left
from collections import deque
from collections.abc import Iterable
from heapq import merge
from itertools import compress, islice, pairwise
from operator import gt
from struct import pack

from conformance.checks.model import NEVER, RunModel, Turn
from conformance.checks.model.facts import _ABSENT as ABSENT

Flight = tuple[int, int, int, str]  # (record index, time, +1 into flight / -1 out of it, session)

_UNSIGNED = "L" if array("L").itemsize == 8 else "Q"  # an unsigned type of 8 bytes, the cheapest to convert to


def _start_index(turn: Turn) -> int:
    """The record where an admitted turn entered flight: its input's, once the gateway was handed
    it (it may write, or wait out a locked store, before it asks the LLM: its agent is not idle
    meanwhile); a message the platform held, at its LLM request (after the restart that handed
    it over, where its input record is not)."""
    return turn.request_index if turn.held else turn.index


class Flights:
    """Every turn's fields that I7 reads, a row a turn, appended a batch at a time in any order.
    A column a field: numbers in arrays (`add`: 8 bytes a number, 4 for a row or an input's
    record index: 64 bytes a turn in all); chat and session names as references to the model's own strings, one
    a name (8 bytes a row: a code table would cost a dict look-up a row), None where the turn
    has none. `from_model` keeps the numbers in lists instead, the model's own ints.

    The rows are kept so that I7 reads its flights in log order with no sort and no object an
    event (`asks`): a batch's admitted turns (an LLM request with a session) first, by the
    record where they entered flight (`_start_index`), then the others; and the admitted turns
    with a reply by their reply's record (`order`, with `answer_index`). Made as a batch comes,
    while its turns are objects; several batches are put in one such order when first read.

    The ends of admitted turns that are no reply (a /stop, SIGTERM, crash: few) are kept beside."""

    __slots__ = ("_batches", "answer_index", "chat", "ends", "index", "order", "reply_t", "request_session",
                 "session", "start_index", "start_t")

    def __init__(self) -> None:
        self.index: array[int] | list[int] = array("I")  # the input's record index (`Turn.index`)
        self.chat: list[str] = []
        self.session: list[str | None] = []  # where it ran (`Turn.session`)
        # When an admitted turn entered flight (`_start_index`): its time and record; its LLM
        # request's session (None: not admitted).
        self.start_t: array[int] | list[int] = array("q")
        self.start_index: array[int] | list[int] = array("q")
        self.request_session: list[str | None] = []
        self.reply_t: array[int] | list[int] = array("q")  # its reply: when (ABSENT: none)
        # The rows of the admitted turns with a reply, by the reply's record, and that record.
        self.order: array[int] | list[int] = array("I")
        self.answer_index: array[int] | list[int] = array("q")
        self.ends: list[Flight] = []  # admitted turns that left flight with no reply: (record index, time, -1, session)
        self._batches: list[tuple[int, int]] = []  # each batch's first row and the end of its admitted rows

    @classmethod
    def from_model(cls, m: RunModel) -> Flights:
        """The projection of a whole model's turns (one batch). The model outlives it (`check`),
        so its numbers stay the turns' own ints, in lists (8 bytes a number, as in an array,
        while the model lives): no conversion, and an item of a list is the interpreter's
        cheapest read."""
        flights = cls()
        flights.index, flights.start_t, flights.start_index, flights.reply_t = [], [], [], []
        flights.order, flights.answer_index = [], []
        flights.add(m.turns.values())
        return flights

    def __len__(self) -> int:
        return len(self.index)

    def add(self, turns: Iterable[Turn]) -> None:
        """One batch of turns (a part's), before or after any other batch: its rows in the order
        above, then a column at a time (a comprehension reads a field of every turn, and an
        array takes the numbers whole)."""
        batch = turns if isinstance(turns, list) else list(turns)
        # Admitted: the walk sets a request's time, record and session together.
        rows = [turn for turn in batch if turn.request_session is not None]
        admitted = len(rows)
        rows.sort(key=_start_index)
        if admitted < len(batch):
            rows += [turn for turn in batch if turn.request_session is None]
        base = len(self.index)
        self._batches.append((base, base + admitted))
        _extend(self.index, [turn.index for turn in rows])
        self.chat += [turn.chat for turn in rows]
        self.session += [turn.session for turn in rows]
        self.request_session += [turn.request_session for turn in rows]
        # The numbers: none is negative in an admitted row but a reply's where there is none.
        _extend(self.start_t, [turn.request_t if turn.held else turn.arrival for turn in rows], admitted)
        _extend(self.start_index, list(map(_start_index, rows)), admitted)
        replies = [turn.reply_index for turn in rows]
        by_reply = sorted(range(admitted), key=replies.__getitem__)
        unanswered = bisect_left(by_reply, 0, key=replies.__getitem__)  # no reply (-1): first
        answered = by_reply[unanswered:]
        _extend(self.answer_index, [replies[row] for row in answered])
        _extend(self.order, [base + row for row in answered] if base else answered)
        replied = [turn.reply_t for turn in rows]
        if not unanswered or isinstance(self.reply_t, list):
            _extend(self.reply_t, replied, admitted)
        else:  # ABSENT: 0 here, then ABSENT in the column
            for row in by_reply[:unanswered]:
                replied[row] = 0
            _extend(self.reply_t, replied, admitted)
            for row in by_reply[:unanswered]:
                self.reply_t[base + row] = ABSENT
        self.ends += [(turn.done_index, turn.done_t, -1, turn.request_session)  # type: ignore[misc]  # admitted: a session
                      for turn in map(rows.__getitem__, by_reply[:unanswered]) if turn.done_index < NEVER]

    def asks(self) -> int:
        """How many rows, from the first, are the admitted turns, in order by their request's
        record (their asks in log order; `order` and `answer_index` are their answers). Several
        batches are put in one such order first (each column rebuilt in the rows' new order)."""
        if len(self._batches) > 1:
            self._merge_batches()
        return self._batches[0][1] if self._batches else 0

    def _merge_batches(self) -> None:
        """The batches' rows in one order, merged a row at a time (`heapq.merge` of the runs
        each batch keeps in order) into new columns: a log judged in parts gathers a batch a
        part, and lists of every turn's ints sorted beside the columns peaked ≈ 160 MB over
        them at 10^6 events; this holds a column's copy and an index (4 bytes a row) at a time."""
        ask = self.start_index
        admitted = array("I", merge(*(range(first, end) for first, end in self._batches), key=ask.__getitem__))
        nexts = [*(first for first, _end in self._batches[1:]), len(self)]  # where each batch's others end
        rows = array("I", admitted)
        for (_first, end), after in zip(self._batches, nexts, strict=True):
            rows.extend(range(end, after))
        self.index = _taken(self.index, rows)
        self.chat = list(map(self.chat.__getitem__, rows))
        self.session = list(map(self.session.__getitem__, rows))
        self.start_t = _taken(self.start_t, rows)
        self.start_index = _taken(ask, rows)
        self.request_session = list(map(self.request_session.__getitem__, rows))
        self.reply_t = _taken(self.reply_t, rows)
        self._batches = [(0, len(admitted))]
        place = array("I", bytes(4 * len(rows)))  # an admitted row's new place
        deque(map(place.__setitem__, admitted, range(len(admitted))), maxlen=0)
        del admitted, rows
        # The answers: each batch's are in order by their record, so the column is runs in
        # order (cut where the record goes down), merged.
        at, order = self.answer_index, self.order
        cuts = [0, *compress(range(1, len(at)), map(gt, at, islice(at, 1, None))), len(at)]
        merged = merge(*(zip(islice(at, a, b), islice(order, a, b), strict=True) for a, b in pairwise(cuts)))
        answer_index, new_order = _like(at, []), _like(order, [])
        for record, row in merged:
            answer_index.append(record)
            new_order.append(place[row])
        self.answer_index, self.order = answer_index, new_order


def _taken(column: array[int] | list[int], rows: array[int]) -> array[int] | list[int]:
    """The column's items at these rows, in a column of the same kind (no list between)."""
    taken = map(column.__getitem__, rows)
    return list(taken) if isinstance(column, list) else array(column.typecode, taken)


def _like(column: array[int] | list[int], values: list[int]) -> array[int] | list[int]:
    """The values in a column of the same kind."""
    return values if isinstance(column, list) else array(column.typecode, values)


def _extend(column: array[int] | list[int], values: list[int], clean: int | None = None) -> None:
    """`column.extend(values)`, where none of the first `clean` (all, if None) is negative. Into
    an array of 4 bytes, item by item (an unsigned int converts cheaply); of 8 bytes, those
    through an unsigned array of the same size (the bytes are the same for a non-negative
    number), whose items convert without the argument parser the signed ones go through (≈ 7x
    cheaper: an unsigned long, "L", without the byte-array conversion an unsigned long long
    goes through), the rest packed by `struct` (≈ 2.5x cheaper)."""
    if isinstance(column, list):
        column += values
        return
    if column.itemsize == 4:
        column.fromlist(values)
        return
    if clean is not None and clean < len(values):
        _extend(column, values[:clean])
        column.frombytes(pack(f"{len(values) - clean}q", *values[clean:]))
        return
    try:
        column.frombytes(array(_UNSIGNED, values).tobytes())
    except OverflowError:  # a negative number
        column.frombytes(pack(f"{len(values)}q", *values))
