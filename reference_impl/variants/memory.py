"""Batching-provider bugs: hermes-agent #88944 and its fix PR (seed 001).

The reference `BatchingProvider` flushes its buffer at session end, eviction and shutdown
(before refusing new work) and ships nothing twice (a durable watermark). Each variant
here takes one of those back; provider variants come in through `make_provider`.
"""

from __future__ import annotations

from collections.abc import Sequence

from reference_impl.gateway import ReferenceGateway
from reference_impl.memory import BatchingProvider, Turn
from reference_impl.store import Route
from sim.scenario import ProviderSpec


class NoEndFlushProvider(BatchingProvider):
    """A provider without on_session_end: the session's buffer is released with it, unshipped."""

    def on_session_end(self, session: str) -> None:
        self.buffers.pop(session, None)


class NoWatermarkProvider(BatchingProvider):
    """A provider whose buffer is the session's whole document, re-shipped by every flush: it
    ships each batch unkeyed and saves no watermark, so nothing leaves the buffer."""

    def deliver(self, session: str, pending: Sequence[Turn]) -> None:
        self.backend.ingest(session, self.texts(pending))  # unkeyed: the backend takes every re-shipped text again
        self.store.crash_point("batch-shipped")  # and no watermark after it


class ReplyTwiceProvider(BatchingProvider):
    """A provider that builds each shipped turn from the assistant message twice."""

    def texts(self, pending: Sequence[Turn]) -> list[str]:
        return [text for t in pending for text in (t.assistant, t.assistant)]


class TagsOnlyProvider(BatchingProvider):
    """A provider that ships each user message as its tag alone, the words after it cut off."""

    def texts(self, pending: Sequence[Turn]) -> list[str]:
        return [text for t in pending for text in (t.user.split(" ", 1)[0], t.assistant)]


class MessagesThenRepliesProvider(BatchingProvider):
    """A provider that ships a batch as every user message, then every reply."""

    def texts(self, pending: Sequence[Turn]) -> list[str]:
        return [t.user for t in pending] + [t.assistant for t in pending]


class RetryForgetsNewerProvider(BatchingProvider):
    """A provider whose retry makes again only the calls a failing backend refused: the turns
    buffered since go in no call and stay buffered, past the session's end, until a later flush."""

    def calls(self, pending: list[Turn], kept: list[set[str]] | None) -> list[list[Turn]]:
        calls = super().calls(pending, kept)
        return calls if kept is None else calls[:-1]  # without the call of the turns buffered since


class BatchNoFlushOnSessionEnd(ReferenceGateway):
    """batch-no-flush-on-session-end — hermes-agent #88944 (seed 001):

    "No on_session_end. MemoryProvider.on_session_end (agent/memory_provider.py:251) is the
    base-class hook for exactly this ... Hindsight — the only one that batches — did not.
    Its sole flush point was on_session_switch, which fires only when session_id rotates.
    Sessions that end without rotating ... never reached it."

    Here: the batching provider has no on_session_end flush; turns buffered when the
    session ends never reach its backend.
    """

    def make_provider(self, spec: ProviderSpec) -> BatchingProvider:
        return NoEndFlushProvider(spec.name, spec.retain_every_n_turns, self.h.backends[spec.name], self.store,
                                  self.retry_memory_at)


class BatchLostOnShutdown(ReferenceGateway):
    """batch-lost-on-shutdown — hermes-agent #88944 (seed 001):

    "shutdown() never flushed. It set _shutting_down, then drained the writer queue ...
    Ordering in shutdown() is load-bearing. The helper refuses to enqueue once
    _shutting_down is set ..., so the flush runs before that flag goes up. Reversed, it
    would silently discard the very buffer it exists to save."

    Here: SIGTERM raises every provider's shutting-down flag before the flushes, so each
    buffered turn is refused and dies with the process.
    """

    def sigterm(self) -> None:
        for provider in self.volatile.memory.providers:
            provider.shutting_down = True  # the flag goes up first...
        super().sigterm()  # ...so every flush below refuses to ship


class BatchFlushReshipsRetained(ReferenceGateway):
    """batch-flush-reships-retained — seed 001 (hermes-agent #88944 fix PR):

    "sync_turn skips a retain when the turn count hasn't reached a boundary, so
    on_session_end/shutdown must not re-ship turns already persisted." and "Clearing on
    flush is what makes the hook safe to call from several paths".

    Here: a flush ships the session's whole buffer without the watermark and keeps it, so
    every flush after a retain boundary ingests the retained turns again.
    """

    def make_provider(self, spec: ProviderSpec) -> BatchingProvider:
        return NoWatermarkProvider(spec.name, spec.retain_every_n_turns, self.h.backends[spec.name], self.store,
                                   self.retry_memory_at)


class MemoryShipsReplyTwice(ReferenceGateway):
    """memory-ships-reply-twice — CONTRACT Liveness (issue #19, a mutation survivor):

    "A turn ingested or carried means both halves, the user's message and the reply."

    Here: the batching provider ships each turn as its reply twice and never the user's
    message; every turn id still reaches the backend, so a check matching ids alone passed.
    """

    def make_provider(self, spec: ProviderSpec) -> BatchingProvider:
        return ReplyTwiceProvider(spec.name, spec.retain_every_n_turns, self.h.backends[spec.name], self.store,
                                  self.retry_memory_at)


class MemoryGetsTagsOnly(ReferenceGateway):
    """memory-gets-tags-only — CONTRACT I3 ("every acknowledged turn reached every backend", as
    the user said it; found by sessiongate's audit of lazy gateways, 2026-12-06: a backend's
    ingest was read by the `[tN]` tags alone).

    Here: the batching provider ships each user message as its tag, the words cut off (a field
    cut to its first word); the reply, the store and the ends keep everything.
    """

    def make_provider(self, spec: ProviderSpec) -> BatchingProvider:
        return TagsOnlyProvider(spec.name, spec.retain_every_n_turns, self.h.backends[spec.name], self.store,
                                self.retry_memory_at)


class RetryDropsNewerTurns(ReferenceGateway):
    """retry-drops-newer-turns — issue #24 (a mutation survivor of the batching provider's retry):

    While a backend is down every write fails and its turns are kept; the next write retries
    them and must add the turns buffered since (CONTRACT I3: every acknowledged turn reaches
    every backend).

    Here: a retry makes again only the refused calls; the turns buffered since stay buffered
    when the backend is back, and ship only at a later flush (the final SIGTERM), after the
    session's end.
    """

    def make_provider(self, spec: ProviderSpec) -> BatchingProvider:
        return RetryForgetsNewerProvider(spec.name, spec.retain_every_n_turns, self.h.backends[spec.name], self.store,
                                         self.retry_memory_at)


class FlushAfterFinalize(ReferenceGateway):
    """flush-after-finalize — seed 001 (hermes-agent #88944: a batching provider's buffer is owed
    at on_session_end) and CONTRACT I3; found by sessiongate's audit of lazy gateways
    (2026-12-06: I3 compared times, and at one instant the order within the step was not judged).

    Here: a session's end runs the recorder's on_session_end and on_session_finalize first and
    only then has the batching providers flush, in the same step: every turn still arrives, at
    the end's own instant, after the hooks that said the session was done.
    """

    def end_session(self, route: Route, reason: str) -> None:
        memory, session = self.volatile.memory, route.session_id
        providers, memory.providers = memory.providers, []
        try:
            super().end_session(route, reason)
        finally:
            memory.providers = providers
        for provider in providers:
            provider.on_session_end(session or "")


class BatchPairsWrong(ReferenceGateway):
    """batch-pairs-wrong — CONTRACT I3 ("a turn ingested is the user's message and its reply",
    the reply after its own message; found by sessiongate's audit of lazy gateways, 2026-12-06:
    a backend's halves were read by content alone, not by the order that pairs them).

    Here: the batching provider ships a batch as every user message, then every reply: each
    turn is there whole, but a memory that pairs a message with the text after it pairs t1's
    message with t2's.
    """

    def make_provider(self, spec: ProviderSpec) -> BatchingProvider:
        return MessagesThenRepliesProvider(spec.name, spec.retain_every_n_turns, self.h.backends[spec.name], self.store,
                                           self.retry_memory_at)


class SyncTurnSwapped(ReferenceGateway):
    """sync-turn-swapped — the memory provider protocol, `sync_turn(session, user, assistant)`,
    and CONTRACT I3; found by sessiongate's audit of lazy gateways (2026-12-06: both halves
    were read by content, wherever they came).

    Here: the turn handed to memory has its message and its reply the wrong way round: the
    recorder's `sync_turn` gets the reply as the user's message, and each provider ships the
    reply before its message.
    """

    def hand_memory(self, key: str, turn: Turn) -> list[BatchingProvider]:
        return super().hand_memory(key, turn._replace(user=turn.assistant, assistant=turn.user))


class MergedRetryProvider(BatchingProvider):
    def calls(self, pending: list[Turn], kept: list[set[str]] | None) -> list[list[Turn]]:
        return [pending]  # the calls a slow backend left, made again as one with the turns buffered since


class RetryMergesCalls(ReferenceGateway):
    """retry-merges-calls — CONTRACT I3 (a slow backend: "a turn whose call was made in time and
    that landed when the backend said it would is on time ... late is late"; fifth audit of lazy
    gateways, 2026-12-06):

    Here: a flush makes the calls a slow backend left again as one call with the turns
    buffered since, which the backend completes when its newest turn is done: an older turn
    lands after the session end that owed it, though its own call was due before.
    """

    def make_provider(self, spec: ProviderSpec) -> BatchingProvider:
        return MergedRetryProvider(spec.name, spec.retain_every_n_turns, self.h.backends[spec.name], self.store,
                                   self.retry_memory_at)


class SlowCallsKeyedBySession(ReferenceGateway):
    """slow-calls-keyed-by-session — CONTRACT I3 (a slow backend: "a turn whose call was made in
    time and that landed when the backend said it would is on time ... late is late"; the
    eighth audit of lazy gateways, 2026-12-06):

    A gateway that remembers the calls a slow backend is completing by session alone, in one
    table its providers share: a healthy provider's flush takes the slow one's calls as its
    own, and the slow one makes its turns again as one call, which lands when the newest is
    done, after the session end that owed the oldest.

    Here: once a process is up, its providers keep their slow calls in one dict.
    """

    def boot(self) -> None:
        super().boot()
        shared: dict[str, list[set[str]]] = {}
        for provider in self.volatile.memory.providers:
            shared.update(provider.slow_calls)
            provider.slow_calls = shared
