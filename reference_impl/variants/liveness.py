"""Liveness bugs: a delivered message left unanswered (CONTRACT, Liveness; check I9).

The other checks judge acknowledged turns only, so each of these passes them all: a gateway
that never answers has nothing to lose, store or end. Found by sessiongate's own audit (a
do-nothing gateway passed the whole catalog), not by a gateway's report.
"""

from __future__ import annotations

from reference_impl.gateway import Pending, ReferenceGateway


class NeverReplies(ReferenceGateway):
    """never-replies — CONTRACT, Liveness: "every delivered user message is answered".

    Here: every LLM answer is ignored; each turn stays in flight and its chat waits for good.
    """

    def deliver_reply(self, request_id: str, text: str) -> None:
        return


class DropsReplies(ReferenceGateway):
    """drops-replies — CONTRACT, Liveness: "reply delivered, turn acknowledged".

    Here: the turn is completed (stored, synced to memory) but its reply never reaches the
    chat: the user is never answered.
    """

    def send_reply(self, pending: Pending) -> None:
        return


class AnswersFirstTurnOnly(ReferenceGateway):
    """answers-first-turn-only — CONTRACT, Liveness: "every delivered user message".

    Here: only the first turn of each session gets its reply delivered; every later reply
    is dropped.
    """

    def send_reply(self, pending: Pending) -> None:
        answered: set[str] = self.__dict__.setdefault("answered", set())
        if pending.session not in answered:
            answered.add(pending.session)
            super().send_reply(pending)
