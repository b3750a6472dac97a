"""Liveness bugs: a delivered message left unanswered (CONTRACT, Liveness; check I9).

The other checks judge acknowledged turns only, so each of these passes them all: a gateway
that never answers has nothing to lose, store or end. Found by sessiongate's own audit (a
do-nothing gateway passed the whole catalog), not by a gateway's report.
"""

from __future__ import annotations

from collections.abc import Sequence
from types import SimpleNamespace

from conformance.adapter import Inbound
from conformance.observations import first_turn, reply_text
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


class RepliesToNewestChat(ReferenceGateway):
    """replies-to-newest-chat — CONTRACT, Liveness: "its reply delivered" (found by sessiongate's
    audit of lazy gateways: every check took a reply record for its turn whatever chat it went to).

    Here: a reply goes out through the chat of the newest turn in flight (one process-wide
    "current chat"): while two chats' turns overlap, the first chat's answer reaches the second
    one, and the first is never answered. Alone, each chat is answered right.
    """

    def send_reply(self, pending: Pending) -> None:
        newest = next(reversed(self.volatile.busy_chats.values()), None)  # the request of the newest turn started
        current = self.volatile.inflight.get(newest) if newest is not None else None
        chat = current.chat.name if current is not None else pending.chat.name
        self.h.platform.send_reply(chat, pending.session, pending.reply or "")


class EchoesMessage(ReferenceGateway):
    """echoes-message — CONTRACT, Liveness: "its reply delivered, the turn acknowledged" (found by
    sessiongate's audit of lazy gateways: a reply record was read by the turn id in its text alone).

    Here: the text sent back is the user's own message (the prompt's last text), not the LLM's
    answer; the turn is stored, synced and ended with its real reply, so only the chat can tell.
    """

    def send_reply(self, pending: Pending) -> None:
        agent = self.agent_of(pending)
        echo = next(row.content for row in reversed(agent.rows) if row.role == "user" and row.turn == pending.turn)
        self.h.platform.send_reply(pending.chat.name, pending.session, echo)


class AnswersWithoutLlm(ReferenceGateway):
    """answers-without-llm — CONTRACT words ("admitted when the gateway asks the LLM") and
    Liveness (found by sessiongate's audit of lazy gateways: a gateway that never asked the LLM
    passed the catalog, every reset-policy check judging nothing, since they judge admitted turns).

    Here: the gateway is its own model: it composes each answer in the LLM's form
    (`[t7] reply`) and delivers it at once. No turn is ever admitted, so no turn's session is
    judged against its segment.
    """

    def start_turn(self, message: Inbound, arrival: int) -> None:
        llm, own = self.h.llm, []

        def request(chat: str, session: str, prompt: Sequence[str]) -> str:
            own.append(f"own-{first_turn(prompt[-1])}")  # never the LLM: an answer of its own, in the LLM's form
            return own[-1]

        self.h.llm = SimpleNamespace(request=request)  # type: ignore[assignment]
        try:
            super().start_turn(message, arrival)
        finally:
            self.h.llm = llm
        for request_id in own:
            self.deliver_reply(request_id, reply_text(request_id.removeprefix("own-")))


class AnswersBeforeTheLlm(ReferenceGateway):
    """answers-before-the-llm — CONTRACT, Liveness: "its reply delivered", the reply carrying the
    answer the LLM was asked for (found by sessiongate's audit of lazy gateways: the fake LLM's
    answer can be told from the message's tag, and only the order request-then-reply was judged).

    Here: as soon as the LLM is asked, the reply is made up from the message's tag and the turn
    completed with it (stored, synced, replied); the LLM's answer, when it comes, is dropped.
    """

    def start_turn(self, message: Inbound, arrival: int) -> None:
        super().start_turn(message, arrival)
        request = self.volatile.busy_chats.get(self.route_key(message.chat))
        pending = self.volatile.inflight.get(request) if request is not None else None
        if request is not None and pending is not None and pending.turn:
            self.deliver_reply(request, reply_text(pending.turn))
