"""Memory: a manager that fans turns and boundaries out to providers, in order.

`BatchingProvider` is the reference gateway's own batching plugin, shaped like Hindsight
(seed 001): it buffers turns and ships every N-th; it flushes at session end, eviction and
shutdown (before refusing new work). Its buffer is durable (an outbox in the store, apart
from the transcript, so another surface deleting a session's rows cannot take it), and a
watermark of shipped turn ids means nothing ships twice, even across a crash. A crash between
a ship and its watermark (crash point `batch-shipped`) re-ships at the restart; the backend
takes each text once, by its idempotency key.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple

from conformance.adapter import BackendBusy, BackendUnavailable, MemoryBackend, RecordingProvider
from reference_impl.store import Row, Store


class Turn(NamedTuple):
    session: str
    turn: str
    user: str
    assistant: str


class BatchingProvider:
    """Buffers turns per session; ships every `retain_every_n_turns`-th turn to its backend."""

    def __init__(self, name: str, every: int, backend: MemoryBackend, store: Store,
                 retry_at: Callable[[int], None] | None = None) -> None:
        self.name, self.every, self.backend, self.store = name, every, backend, store
        self.retry_at = retry_at  # asks for a retry at a virtual time: when a slow backend will be done
        self.buffers: dict[str, list[Turn]] = {}
        self.counts: dict[str, int] = {}
        self.shipped = store.ingested(name)
        self.shutting_down = False
        self.owed: set[str] = set()  # sessions whose flush was asked for and failed
        self.slow_calls: dict[str, list[set[str]]] = {}  # session -> the turns of each call a slow backend is completing
        self.recovering = False  # in `recover`: the slow calls died with the process

    def buffer(self, turn: Turn) -> bool:
        """Take the turn into the durable outbox and the buffer; True if a batch is now due."""
        self.store.outbox_add(self.name, turn.session, turn.turn, turn.user, turn.assistant)
        self.buffers.setdefault(turn.session, []).append(turn)
        self.counts[turn.session] = self.counts.get(turn.session, 0) + 1
        return self.counts[turn.session] % self.every == 0

    def flush(self, session: str) -> bool:
        """Ship the session's buffered turns not yet shipped (the watermark); clear on success."""
        buffer = self.buffers.get(session)
        if not buffer:
            return True
        pending = self.unshipped(buffer)
        if pending:
            if self.shutting_down:
                return False
            calls = self.calls(pending, self.slow_calls.pop(session, None))
            still: list[set[str]] = []
            split = False
            for k, call in enumerate(calls):
                if not call:
                    continue
                try:
                    self.deliver(session, call)
                except BackendBusy as err:
                    if self.recovering and len(call) > 1:  # made again a turn a call, at once (`recover`)
                        still += [{t.turn} for t in call]
                        split = True
                        continue
                    still.append({t.turn for t in call})
                    if self.retry_at is not None:
                        self.retry_at(err.ready_at)  # the moment a slow backend is done: late is late (I3)
                except BackendUnavailable:  # failing: the rest would fail too; kept as they were
                    still += [{t.turn for t in c} for c in calls[k:] if c]
                    break
            if still:
                self.slow_calls[session] = still
                self.owed.add(session)  # kept; retried at the next tick, flush or shutdown
                return self.flush(session) if split else False
        self.settle(session, buffer)
        self.owed.discard(session)
        return True

    def calls(self, pending: list[Turn], kept: list[set[str]] | None) -> list[list[Turn]]:
        """The backend calls a flush makes. Calls a slow or failing backend left (`kept`) are
        made again as they were, each landing when the backend said; turns buffered since go in
        a call of their own, made now too (one call with them all would be held back until the
        newest is done)."""
        if kept is None:  # the usual flush: one call (no list of calls made a turn)
            return [pending]
        calls = [[t for t in pending if t.turn in call] for call in kept]
        calls.append([t for t in pending if not any(t.turn in call for call in kept)])
        return calls

    def unshipped(self, buffer: Sequence[Turn]) -> list[Turn]:
        """The buffered turns the watermark does not list."""
        return [t for t in buffer if t.turn not in self.shipped]

    def deliver(self, session: str, pending: Sequence[Turn]) -> None:
        """Ship the batch, then save the watermark (durably: it outlives a crash)."""
        self.ship(session, pending)
        self.store.mark_ingested(self.name, [t.turn for t in pending])
        self.shipped.update(t.turn for t in pending)

    def ship(self, session: str, pending: Sequence[Turn]) -> None:
        """One backend call, keyed by turn and half (`keys`): a crash after it and before the
        watermark (crash point `batch-shipped`) re-ships the batch at the restart, and the
        backend takes each text once."""
        self.backend.ingest(session, self.texts(pending), self.keys(pending))
        self.store.crash_point("batch-shipped")  # the backend has them; the watermark not yet

    def texts(self, pending: Sequence[Turn]) -> list[str]:
        """What the batch ships: each turn's user message, then its reply."""
        return [text for t in pending for text in (t.user, t.assistant)]

    def keys(self, pending: Sequence[Turn]) -> list[str] | None:
        """The batch's idempotency keys, one per text: provider, turn and half."""
        return [f"{self.name}/{t.turn}/{half}" for t in pending for half in ("user", "assistant")]

    def settle(self, session: str, buffer: list[Turn]) -> None:
        """After a flush: the turns the watermark lists leave the outbox and the buffer; any
        other stays buffered for the next flush."""
        kept = self.unshipped(buffer)
        self.store.outbox_done(self.name, [t.turn for t in buffer if t.turn in self.shipped])
        if kept:
            self.buffers[session] = kept
        else:
            del self.buffers[session]

    def on_session_end(self, session: str) -> None:
        self.flush(session)

    def retry(self) -> None:
        """Ship what a failed backend call left behind."""
        for session in sorted(self.owed):
            self.flush(session)

    def shutdown(self) -> None:
        """Flush every buffer, then refuse new work. The order is load-bearing (seed 001)."""
        for session in sorted(self.buffers):
            self.flush(session)
        self.shutting_down = True

    def recover(self) -> None:
        """After a restart: ship what the outbox still holds (a crash or a failed shutdown).
        The calls a slow backend was completing died with the process, and one call with all
        of a session's turns would land when its newest is done: a recovered batch the backend
        refuses busy is made again a turn a call, so each lands at its own `ready` (the backend
        keeps it from the turn's first call; I3 holds a gateway back by then to it)."""
        for session, turn, user, assistant in self.store.outbox(self.name):
            self.buffers.setdefault(session, []).append(Turn(session, turn, user, assistant))
        self.recovering = True
        try:
            for session in list(self.buffers):
                self.flush(session)
        finally:
            self.recovering = False


class MemoryManager:
    """Delivers sync_turn, session ends and switches to the recorder and every provider."""

    def __init__(self, recorder: RecordingProvider, providers: Sequence[BatchingProvider], store: Store) -> None:
        self.recorder, self.providers, self.store = recorder, list(providers), store

    def owe(self, turn: Turn) -> list[BatchingProvider]:
        """The recorder's sync_turn, and the turn in every provider's durable outbox; the
        providers whose batch is now due. The gateway calls it before the turn's reply, and
        `ship` after: a crash once the turn is acknowledged finds it owed on disk, and one
        before the reply finds nothing shipped but the recorder's copy. The recorder ships
        each turn at once and keeps no buffer, so it needs no watermark (one was written per
        turn and never read); the batching providers keep theirs."""
        self.recorder.sync_turn(turn.session, turn.user, turn.assistant)
        due = []  # every outbox first: a crash in one provider's ship must not cost the next provider the turn
        for provider in self.providers:  # a plain loop: no comprehension's frame a turn
            if provider.buffer(turn):
                due.append(provider)
        return due

    def ship(self, session: str, due: Sequence[BatchingProvider]) -> None:
        """The batches `owe` found due: after the reply (a crash at their ship, `batch-shipped`,
        finds the turn acknowledged and in the outbox)."""
        for provider in due:
            provider.flush(session)

    def end_session(self, session: str, transcript: Sequence[Row]) -> None:
        """Batching providers flush their buffer, then on_session_end with the full transcript.
        Flushes first: a crash between them (at `batch-shipped`) leaves the end to the restart,
        which ships the outbox before it finishes the end, so a session's turns still reach
        every backend by its end."""
        for provider in self.providers:
            provider.on_session_end(session)
        self.recorder.on_session_end(session, [(r.role, r.content) for r in transcript])

    def switch(self, old: str | None, new: str) -> None:
        self.recorder.on_session_switch(old, new)

    def flush(self, session: str) -> None:
        """An agent leaves the cache: nothing ends, but nothing may stay only in its RAM."""
        for provider in self.providers:
            provider.flush(session)

    def retry(self) -> None:
        for provider in self.providers:
            provider.retry()

    def owes(self) -> bool:
        """Whether a provider holds a failed flush for a retry (asked after every turn: a plain
        loop, no generator's frame)."""
        for provider in self.providers:  # noqa: SIM110 (any() of a generator costs a frame a turn)
            if provider.owed:
                return True
        return False

    def shutdown(self) -> None:
        for provider in self.providers:
            provider.shutdown()
        self.recorder.shutdown()

    def recover(self) -> None:
        for provider in self.providers:
            provider.recover()
