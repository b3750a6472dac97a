"""Bugs only a crash inside a step finds (`crash_at`, `fuzz --crash-points`): issue #21.

Each is what the reference did before its crash points found it; a crash between two steps
never lands where these part durable from volatile state. One override each.
"""

from __future__ import annotations

from collections.abc import Sequence

from reference_impl.cache import Agent
from reference_impl.gateway import Pending, ReferenceGateway
from reference_impl.memory import BatchingProvider, Turn
from reference_impl.store import Route
from sim.scenario import ProviderSpec


class UnkeyedProvider(BatchingProvider):
    """Ships a batch with no idempotency keys: the backend cannot tell a re-ship from news."""

    def keys(self, pending: Sequence[Turn]) -> None:
        return None


class BatchReshipAfterCrash(ReferenceGateway):
    """batch-reship-after-crash — the batching provider ships, then saves its watermark:

    a crash between the two (crash point `batch-shipped`) leaves the outbox holding turns the
    backend already took, and the restart's recovery ships them again: a double ingest (I4).
    The fix keys every text by provider, turn and half, so the backend takes each once.
    """

    def make_provider(self, spec: ProviderSpec) -> BatchingProvider:
        return UnkeyedProvider(spec.name, spec.retain_every_n_turns, self.h.backends[spec.name], self.store)


class RotateBeforeEndRecorded(ReferenceGateway):
    """rotate-before-end-recorded — the routing entry is rotated before the end is recorded:

    a crash between the two (crash point `route-rotated`) leaves the chat routed past a
    session whose end nobody owes any more: the restart finds no unfinished end, and the
    session never gets `on_session_end` (I1). The fix records the end first.
    """

    def record_and_rotate(self, route: Route, session: str, reason: str) -> bool:
        self.rotate(route)
        self.h.crash_point("route-rotated")
        return self.store.record_end(session, reason)


class CrashForgetsCommands(ReferenceGateway):
    """crash-forgets-commands — a command is carried out in memory only:

    a crash inside it (crash point `end-recorded`, as /resume ends the session it leaves)
    finishes the end at the restart but never the command: the chat stays on the ended
    session instead of the one it resumed (I6, I1). The fix journals each command and
    finishes it at the restart.
    """

    def finish_commands(self) -> None:
        for key, _command, _when, _left, _target in self.store.journal():
            self.store.journal_done(key)


class StopDropsOutboxFirst(ReferenceGateway):
    """stop-drops-outbox-first — a SIGTERM clears the memory outbox before it flushes:

    the outbox is crash insurance, and a graceful stop ships every buffer itself, so the
    insurance goes first, as a clean-shutdown flag written before the shutdown is done. A
    crash inside the stop (crash point `shutdown-flushing`, between two agents' flushes)
    leaves the agents not yet flushed with their batches in memory only: the restart's
    recovery finds an empty outbox, and their turns never reach the backend (I3). The fix
    lets the flushes themselves empty the outbox, as each batch lands.
    """

    def sigterm(self) -> None:
        self.store.db.execute("DELETE FROM memory_outbox")
        super().sigterm()



class ReplyBeforeMemory(ReferenceGateway):
    """reply-before-memory — the reply goes out before the turn is owed to memory:

    a crash right after the reply (the harness's own crash point `reply-sent`) finds the turn
    acknowledged and stored, but the recorder never got its sync_turn and no provider's outbox
    holds it: no backend ever ingests it (I3); a /new waiting behind the turn was not yet due
    either, so it is never carried out (I1, I6). What the reference did until the harness could
    kill a gateway at its own observation boundaries. The fix owes memory first
    (`hand_memory`), then replies, then ships what is due.
    """

    def acknowledge(self, request_id: str, pending: Pending, agent: Agent) -> None:
        del self.volatile.inflight[request_id]
        self.send_reply(pending)
        agent.busy, agent.last_activity = self.still_busy(agent.session), self.h.clock.now()
        if not pending.delegate:
            turn = self.answered_turn(pending, agent)
            self.volatile.memory.ship(turn.session, self.hand_memory(pending.key, turn))
            self.hand_on(pending.key)
        self.enforce_cap()
