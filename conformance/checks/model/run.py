"""`RunModel`: the log's view plus what the oracle derived from it (turns, segments), and the
questions the checks ask of both."""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from operator import attrgetter
from typing import NamedTuple, TypeVar

from conformance.checks.model.facts import _ABSENT as ABSENT
from conformance.checks.model.facts import Downtime, Facts, Segment, Turn
from conformance.checks.model.invariants import verify
from conformance.checks.model.log import LogView
from conformance.checks.model.segments import chat_segments, mark_done, set_windows
from conformance.checks.model.walk import walk_log
from conformance.observations import Obs

T = TypeVar("T")
_request_index = attrgetter("request_index")


@dataclass(slots=True, kw_only=True)
class RunModel(LogView):
    turns: dict[str, Turn]
    segments: dict[str, list[Segment]]
    failure: Obs | None
    stopped_at: list[Downtime]  # index-free times
    acked_by_session: dict[str, list[Turn]] = field(default_factory=dict, repr=False)  # in reply order
    # turn -> its reply records that did not answer it: sent to another chat, or carrying a copy
    # of its message and not its answer (`reply` records' `answers`). They acknowledge the turn
    # for every other check (the gateway holds it answered); I9 does not count them.
    unanswering: dict[str, list[int]] = field(default_factory=dict, repr=False)
    facts: Facts = field(default_factory=Facts, repr=False)

    @staticmethod
    def build(records: Sequence[Obs]) -> RunModel:
        """The model of one log, its own invariants asserted (`invariants.verify`: an
        `OracleError` here is a sessiongate bug, which `judge` reports as a checker error)."""
        walked = walk_log(records)
        view = walked.view
        model = RunModel(records=view.records, name=view.name, zone=view.zone, config=view.config, chats=view.chats,
                         profile=view.profile, final_stop=view.final_stop, final_index=view.final_index,
                         by_kind=view.by_kind, by_session=view.by_session, changes=view.changes, turns=walked.turns,
                         segments={}, failure=walked.failure, stopped_at=walked.stopped_at,
                         acked_by_session=walked.acked_by_session, unanswering=walked.unanswering)
        by_chat: dict[str, list[Turn]] = defaultdict(list)
        for turn in model.turns.values():
            if turn.request_t != ABSENT:  # admitted
                by_chat[turn.chat].append(turn)
        mark_done(model, by_chat, walked.commands)
        for chat in by_chat:
            by_chat[chat] = turns = [t for t in by_chat[chat] if not t.delegate]
            asked = list(map(_request_index, turns))  # in arrival order (the turns' own): served so, the rule
            if asked != sorted(asked):
                model.facts.served_out_of_order.append(chat)
        for chat in sorted(model.chats):
            model.segments[chat] = chat_segments(model, chat, by_chat.get(chat, []), walked.commands.get(chat, []),
                                                 model.stopped_at, chat not in model.facts.served_out_of_order)
            set_windows(model, model.segments[chat])
        verify(model, model.turns, model.segments, model.acked_by_session)
        return model

    # -- derived views ------------------------------------------------------------------

    def derived(self, derive: Callable[[RunModel], T]) -> T:
        """A view a check derives from the model (`deletions`' cuts, say), computed once per
        model: named, and typed, by the function that derives it."""
        views = self.facts.derived
        if derive not in views:
            views[derive] = derive(self)
        return views[derive]  # type: ignore[no-any-return]

    def places(self) -> Places:
        """The model's turns in log order, and a turn's place among them: I3 and I4 keep a
        byte a turn by it, not a set of ids. Derived once."""
        return self.derived(_turn_places)

    def ends_in(self, seg: Segment) -> list[tuple[int, Obs]]:
        """The on_session_end calls that belong to this life of the segment's session."""
        lo, hi = seg.window  # unpacked: a call with positional arguments, not a starred one
        return self.of_session("on_session_end", seg.session or "", lo, hi)

    def chat_sessions(self) -> set[str]:
        return self._sessions()[0]

    def delegate_sessions(self) -> set[str]:
        return self._sessions()[1]

    def _sessions(self) -> tuple[set[str], set[str]]:
        """The chat turns' sessions and the delegates', made together in one pass over the turns."""
        facts = self.facts
        if facts.chat_sessions is None or facts.delegate_sessions is None:
            chat: set[str] = set()
            delegate: set[str] = set()
            for t in self.turns.values():
                session = t.session
                if session:
                    (delegate if t.delegate else chat).add(session)
            facts.chat_sessions, facts.delegate_sessions = chat, delegate
        return facts.chat_sessions, facts.delegate_sessions

    def folded(self) -> dict[str, int]:
        """When each turn a gateway folded into another turn's request (its prompt's last message
        carried both) was answered: at that request's reply. The reply is credited to the
        request's first turn; the others are answered by it too (I9), and are no turn left
        unacknowledged (I1, I2, I3)."""
        facts = self.facts
        if facts.folded is not None:
            return facts.folded
        # The folding requests first (few: a request mostly carries one turn), then the replies
        # credited to their first turns only (an (index, t) kept for every reply was most of
        # I9's memory on a long run).
        folding = [(index, r.turns) for index, r in self.of("llm_request") if len(r.turns) >= 2]
        out: dict[str, int] = {}
        if folding:
            wanted = {turns[0] for _index, turns in folding}
            replies: dict[str, list[tuple[int, int]]] = defaultdict(list)  # credited turn -> (index, t) of its replies
            for index, r in self.of("reply"):
                if r.turns and r.turns[0] in wanted:
                    replies[r.turns[0]].append((index, r.t))
            for index, turns in folding:
                answer = next((t for i, t in replies.get(turns[0], ()) if i > index), None)
                if answer is not None:
                    for turn in turns[1:]:
                        out[turn] = min(out.get(turn, answer), answer)
        facts.folded = out
        return out

    def unacknowledged(self, turn: Turn) -> bool:
        """A turn that must leave nothing behind: never replied, nor answered folded into another."""
        folded = self.facts.folded
        return turn.reply_t == ABSENT and turn.id not in (folded if folded is not None else self.folded())

    # -- acknowledged turns by session --------------------------------------------------

    def acked_in(self, session: str, before: int | None = None) -> list[Turn]:
        """Acknowledged turns of `session`, in acknowledgment order (optionally before an index)."""
        turns = self.acked_by_session.get(session, [])
        if before is None:
            return list(turns)
        return turns[: bisect_left(self._ack_indexes(session), before)]

    def next_ack(self, session: str, after: int) -> Turn | None:
        """The first turn of `session` acknowledged after record `after` (its next flush)."""
        turns = self.acked_by_session.get(session, [])
        k = bisect_right(self._ack_indexes(session), after)
        return turns[k] if k < len(turns) else None

    def _ack_indexes(self, session: str) -> list[int]:
        table = self.facts.ack_indexes
        if session not in table:
            table[session] = [t.reply_index for t in self.acked_by_session.get(session, [])]
        return table[session]


class Places(NamedTuple):
    """The model's turns in log order (of their inputs) and their inputs' record indexes: a
    turn's place is `bisect_left(indexes, turn.index)`, written out where it is asked per
    ingested id (a call a look-up cost more than the bisect). The indexes are a list of the
    turns' own `index` ints: as small as an 8-byte array, and a bisect's every probe of an
    array made an int (it cost twice as much)."""

    turns: list[Turn]
    indexes: list[int]

    def of(self, turn: Turn) -> int:
        """The turn's place in log order."""
        return bisect_left(self.indexes, turn.index)


def _turn_places(m: RunModel) -> Places:
    ordered = sorted(m.turns.values(), key=attrgetter("index"))
    return Places(ordered, [turn.index for turn in ordered])
