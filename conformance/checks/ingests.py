"""What each backend took of each turn: the ingest records read once for I3 (what reached
memory, and when) and I4 (what reached it twice), derived once per log.

Each backend's halves of each of the model's turns are a byte by the turn's place in log
order (`RunModel.places`): MINE_* bits for a half taken under the turn's own session, OTHER_*
for one taken under another session's (a set of ids per backend and half was most of the
checks' memory on a long run). A half of a turn the model does not know counts nowhere for
I3; I4 keeps such ids in a set per backend and half, to find them taken twice.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left
from dataclasses import dataclass

from conformance.checks.model import RunModel
from conformance.observations import ingested_halves

MINE = (1, 2, 1 | 2)  # (user message, reply, both) taken under the turn's own session
OTHER = (4, 8, 4 | 8)  # under another session's
EITHER = (1 | 4, 2 | 8, 1 | 2 | 4 | 8)  # (the user message, the reply, either) under any session
MINE_BOTH = 1 | 2
NOT_YET = -(2**63)  # in `Ingests.whole`: not yet in whole (below any time: a turn not yet whole is never late)
FOREIGN_KEPT = 20  # halves under another session's id that I3 names


@dataclass(slots=True)
class Ingests:
    """What `ingests` read: each backend's halves of each turn, when each turn was whole, and
    what I3 and I4 each say of the ingests themselves (halves under another session, repeats)."""

    took: dict[str, bytearray]  # backend -> its byte a turn (MINE_* | OTHER_*): the configured backends, then others
    whole: dict[str, array[int]]  # configured backend -> when each turn was in whole (both halves), NOT_YET before
    foreign: list[tuple[int, str, str]]  # (ingest, turn, its session): the first halves taken under another session
    repeated: dict[tuple[str, str], list[list[int]]]  # (backend, turn) -> [user ingests, reply ingests] taking a half again
    first_users: int  # user messages taken for the first time, turn by backend (what I4 examined of the ingests)


def ingests(m: RunModel) -> Ingests:
    """The ingests as I3 and I4 read them, in one pass (derived once: the checks ask `m.derived(ingests)`)."""
    backends = ["recorder", *(p.name for p in m.config.providers)]
    places = m.places()
    size, indexes, turns_get = len(places.turns), places.indexes, m.turns.get
    took: dict[str, bytearray] = {b: bytearray(size) for b in backends}
    whole: dict[str, array[int]] = {b: array("q", [NOT_YET]) * size for b in backends}
    unknown: dict[str, tuple[set[str], set[str]]] = {}  # backend -> the unknown turns of each half it took
    foreign: list[tuple[int, str, str]] = []
    repeated: dict[tuple[str, str], list[list[int]]] = {}
    first_users = 0
    user_bits, reply_bits = EITHER[0], EITHER[1]  # read per id: locals, not a global's subscript
    for index, r in m.of("ingest"):
        backend = r.detail.get("backend")
        mine = took.get(backend)
        if mine is None:
            mine = took[backend] = bytearray(size)
        arrived = whole.get(backend)
        users, replies = ingested_halves(r)
        # Both halves in one record, the common case: each turn looked up once, for both.
        for half, ids in ((2, users),) if users == replies else ((0, users), (1, replies)):
            bits, other_bits, either = MINE[half], OTHER[half], EITHER[half]
            for turn_id in ids:
                turn = turns_get(turn_id)
                if turn is None:
                    again = _unknown_again(unknown.setdefault(backend, (set(), set())), half, turn_id)
                else:
                    at = bisect_left(indexes, turn.index)
                    before = mine[at]
                    again = before & either  # the halves of this pass taken before, under any session
                    session = turn.session
                    if session is None or session == r.session:
                        took_now = mine[at] = before | bits
                    else:
                        took_now = mine[at] = before | other_bits
                        if len(foreign) < FOREIGN_KEPT and (half != 1 or turn_id not in r.turns):  # one name per turn
                            foreign.append((index, turn_id, session))
                    # a turn reaches a backend when its second half does
                    if arrived is not None and took_now & user_bits and took_now & reply_bits and arrived[at] == NOT_YET:
                        arrived[at] = r.t
                if half != 1:
                    if again & user_bits:
                        _repeat(repeated, backend, 0, turn_id, index)
                    else:
                        first_users += 1
                if again & reply_bits:
                    _repeat(repeated, backend, 1, turn_id, index)
    return Ingests(took, whole, foreign, repeated, first_users)


def _unknown_again(seen: tuple[set[str], set[str]], half: int, turn: str) -> int:
    """A turn the model does not know: which of this pass's halves the backend took before
    (EITHER bits), its halves marked taken."""
    again = 0
    for one in (0, 1):
        if half in (one, 2):
            if turn in seen[one]:
                again |= EITHER[one]
            seen[one].add(turn)
    return again


def _repeat(repeated: dict[tuple[str, str], list[list[int]]], backend: str, half: int, turn: str, index: int) -> None:
    """A half taken again: its ingest, after the first (found again for a violation only)."""
    repeated.setdefault((backend, turn), [[], []])[half].append(index)
