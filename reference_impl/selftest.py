"""Self-test gateways: misbehaving on purpose, so users can see how sessiongate reports each.

    selftest:raise             raises on the first message          -> an `error` verdict naming the step
    selftest:hang              loops forever on the first message   -> a `timeout` verdict (isolated, 2 s)
    selftest:swallows-interrupts  loops forever catching everything  -> a `timeout`, then sessiongate stops
                                  (in process nothing can stop it; under --isolate the run goes on)
    selftest:nondeterministic  session ids from unseeded randomness -> found by --check-determinism
    selftest:leaky-threads     leaves a thread running at shutdown  -> I7 fails
    selftest:runaway           sets timers without end              -> stopped by the event budget
    selftest:do-nothing        every method does nothing            -> I9 fails wherever a message is delivered
    selftest:ignores-deletion  ignores `delete_session_row`         -> an `error` at each deletion step
    selftest:ignores-lock      ignores `lock_store`                 -> an `error` at a lock it wrote through
    selftest:hides-routing     reports no routing                   -> an `error` at a deletion it cannot aim
    selftest:stale-routing     never updates a routing entry        -> an `error` at a deletion aimed at an old session
    selftest:ram-outbox        keeps its memory outbox on the store object, not in the database
                               -> passes in process (a crash there is its own call); I3 fails under
                                  --isolate, where a crash kills the process
"""

from __future__ import annotations

import random
import threading
import time
from contextlib import suppress

from conformance.adapter import Harness, Inbound, Profile
from conformance.harness.registry import UnknownGateway
from conformance.observations import DurableState, Resources
from reference_impl.gateway import ReferenceGateway
from reference_impl.memory import BatchingProvider, Turn
from reference_impl.store import Route, Store
from sim.scenario import Chat, GatewayConfig, ProviderSpec, ResetPolicy


class RaisingGateway(ReferenceGateway):
    def deliver_message(self, message: Inbound) -> None:
        raise RuntimeError("selftest: this gateway raises on every message")


class HangingGateway(ReferenceGateway):
    def deliver_message(self, message: Inbound) -> None:
        while True:  # a gateway stuck in a loop: only a wall-clock step timeout can stop it
            pass


class SwallowsInterruptsGateway(ReferenceGateway):
    def deliver_message(self, message: Inbound) -> None:
        while True:  # a retry loop that catches everything, the step watchdog's StepTimedOut and Ctrl-C included
            with suppress(BaseException):
                time.sleep(0.01)


class NondeterministicGateway(ReferenceGateway):
    def open_session(self, route, chat, arrival):  # type: ignore[no-untyped-def]
        self.store.next_id("session")  # keep the counter moving, then ignore it
        self.store.db.execute(
            "UPDATE counters SET value = value + ? WHERE name = 'session'", (random.SystemRandom().randrange(1, 1000),)
        )
        super().open_session(route, chat, arrival)


class LeakyThreadsGateway(ReferenceGateway):
    def start(self, config: GatewayConfig, harness: Harness) -> None:
        super().start(config, harness)
        self._never = threading.Event()
        threading.Thread(target=self._never.wait, name="selftest-leak", daemon=True).start()


class RunawayGateway(ReferenceGateway):
    def start(self, config: GatewayConfig, harness: Harness) -> None:
        super().start(config, harness)
        self.spin()

    def spin(self) -> None:
        """A timer that always sets another: virtual time crawls, events pile up."""
        self.h.scheduler.call_at(self.h.clock.now() + 1, self.spin)


class DoNothingGateway:
    """The laziest gateway: it never asks the LLM, never replies, stores nothing. Every check
    but liveness judges what was acknowledged, and nothing was: only I9 can fail it."""

    def profile(self, config: GatewayConfig) -> Profile:
        return Profile(reset_default=ResetPolicy() if config.reset_default else None)  # so `reset: default` runs too

    def start(self, config: GatewayConfig, harness: Harness) -> None:
        pass

    def deliver_message(self, message: Inbound) -> None:
        pass

    def deliver_command(self, chat: Chat, command: str) -> None:
        pass

    def deliver_reply(self, request_id: str, text: str) -> None:
        pass

    def delegate(self, chat: Chat, text: str) -> None:
        pass

    def sigterm(self) -> None:
        pass

    def crash(self) -> None:
        pass

    def restart(self, config: GatewayConfig | None = None) -> None:
        pass

    def delete_session_row(self, session_id: str, keep_children: bool = False) -> None:
        pass

    def lock_store(self, until: int) -> None:
        pass

    def durable_state(self) -> DurableState:
        return DurableState((), ())

    def resources(self) -> Resources:
        return Resources()
class HidesRoutingGateway(ReferenceGateway):
    """A gateway whose durable state shows no routing: the harness aims a deletion by it, so
    without a check every deletion would miss and its scenario pass vacuously."""

    def durable_state(self) -> DurableState:
        return DurableState(super().durable_state().sessions, ())


class StaleRoutingStore(Store):
    """A store whose routing entry keeps its first session: the UPDATE of a known entry is
    never issued (its read cache moves on, so the gateway itself never notices)."""

    def save_route(self, route: Route) -> None:
        known = self._routing.get(route.chat_key)
        if known is None:
            super().save_route(route)
            return
        self._routing[route.chat_key] = (route.chat_key, known[1], route.session_id, route.previous_id,
                                         route.last_user, route.anchor, bool(route.ended))
        self.saved_routes[route.chat_key] = None


class StaleRoutingGateway(ReferenceGateway):
    """A gateway whose durable routing names a chat's first session for ever: a deletion
    aimed by it would take an ended session and spare the live one, so every deletion
    scenario after a reset would pass vacuously (the one gap the mutation run left)."""

    def make_store(self) -> Store:
        return StaleRoutingStore(self.h.clock.now, self.store_path())


class IgnoresLockGateway(ReferenceGateway):
    """A gateway that ignores the harness's injected store lock: its writes go through, and
    without the harness's check every locked-store scenario would pass as if it held."""

    def lock_store(self, until: int) -> None:
        return


class IgnoresDeletionGateway(ReferenceGateway):
    """A gateway that ignores the harness's injected row deletion: without the harness's
    check that the fault was applied, every deletion scenario would pass vacuously."""

    def delete_session_row(self, session_id: str, keep_children: bool = False) -> None:
        return


class RamOutboxProvider(BatchingProvider):
    """The batching provider with its outbox (crash insurance) held on the store object rather
    than written to its database: in process the store object outlives `crash()`, as the
    reference's does (it plays the disk), so the outbox seems durable; a killed process takes it."""

    def ram(self) -> dict[str, list[Turn]]:
        outboxes: dict[str, dict[str, list[Turn]]] = self.store.__dict__.setdefault("ram_outboxes", {})
        return outboxes.setdefault(self.name, {})

    def buffer(self, turn: Turn) -> bool:
        self.ram().setdefault(turn.session, []).append(turn)
        self.buffers.setdefault(turn.session, []).append(turn)
        self.counts[turn.session] = self.counts.get(turn.session, 0) + 1
        return self.counts[turn.session] % self.every == 0

    def settle(self, session: str, buffer: list[Turn]) -> None:
        kept = [t for t in self.ram().get(session, []) if t.turn not in self.shipped]
        if kept:
            self.ram()[session] = kept
        else:
            self.ram().pop(session, None)
        super().settle(session, buffer)

    def recover(self) -> None:
        for session, turns in sorted(self.ram().items()):
            self.buffers.setdefault(session, []).extend(turns)
        super().recover()


class RamOutboxGateway(ReferenceGateway):
    """A gateway whose buffered memory turns are insured against a crash only in its own
    memory (`RamOutboxProvider`): what a real crash shows and a cooperative one cannot."""

    def make_provider(self, spec: ProviderSpec) -> BatchingProvider:
        return RamOutboxProvider(spec.name, spec.retain_every_n_turns, self.h.backends[spec.name], self.store,
                                 self.retry_memory_at)


GATEWAYS = {
    "raise": RaisingGateway,
    "hang-in-process": HangingGateway,
    "swallows-interrupts": SwallowsInterruptsGateway,
    "nondeterministic": NondeterministicGateway,
    "leaky-threads": LeakyThreadsGateway,
    "runaway": RunawayGateway,
    "do-nothing": DoNothingGateway,
    "ignores-deletion": IgnoresDeletionGateway,
    "ignores-lock": IgnoresLockGateway,
    "hides-routing": HidesRoutingGateway,
    "stale-routing": StaleRoutingGateway,
    "ram-outbox": RamOutboxGateway,
}
# The modes `--gateway selftest:MODE` takes (the README lists them): `hang` runs `hang-in-process` in a child.
MODES = tuple("hang" if mode == "hang-in-process" else mode for mode in GATEWAYS)


def selftest(mode: str | None = None):  # type: ignore[no-untyped-def]
    if mode == "hang":
        from conformance.transport.isolation import isolated

        return isolated("selftest:hang-in-process", step_timeout=2.0)
    if mode not in GATEWAYS:
        raise UnknownGateway(f"unknown self-test {mode!r}; known: hang, {', '.join(sorted(set(GATEWAYS) - {'hang-in-process'}))}")
    return GATEWAYS[mode]()
