"""The optional `durable_parts` hook (a spilled log's final snapshot handed over one session at
a time) and the reference store's move to a temporary file: neither changes a byte of the log,
and a malformed part is the same verdict as the same garbage in a whole `durable_state`."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

import reference_impl.store as store_module
from conformance.harness.calls import parts_hook
from conformance.harness.runner import RunResult, run_scenario
from conformance.harness.spill import SpilledRecords, SpilledSessions
from conformance.harness.suite import catalog_paths
from conformance.observations import DurableState, StoredMessage, StoredSession
from reference_impl import ReferenceGateway
from reference_impl.selftest import HidesRoutingGateway
from sim.loader import load_file, load_text
from sim.scenario import Scenario

CATALOG = [load_file(p) for p in catalog_paths()]

# Only the final snapshot (no stop, checkpoint or deletion before it): a parent and a child, two lives.
SCENARIO = load_text(
    "name: parts\nchats: {alice: {}, bob: {}}\nevents:\n  - message: alice\n  - message: bob\n    after: 1m\n"
    "  - delegate: alice\n    after: 1m\n  - command: /new\n    chat: bob\n    after: 1m\n"
    "  - message: bob\n    after: 1m\n", "parts.yaml")


class Whole(ReferenceGateway):
    """The reference without the hook: every snapshot through `durable_state()`."""

    durable_parts = None


class Counted(ReferenceGateway):
    """The reference, counting the parts it hands over."""

    def __init__(self) -> None:
        super().__init__()
        self.parts = 0

    def durable_parts(self) -> tuple[Iterator[StoredSession], tuple[tuple[str, str], ...]]:
        sessions, routing = super().durable_parts()

        def counted() -> Iterator[StoredSession]:
            for s in sessions:
                self.parts += 1
                yield s

        return counted(), routing


def final(result: RunResult) -> Any:
    [snapshot] = [r for r in result.records if r.kind == "durable" and r.d("label") == "final"]
    return snapshot


@pytest.mark.parametrize("scenario", [SCENARIO, *CATALOG], ids=lambda s: s.name)
def test_the_parted_snapshot_is_the_whole_one(scenario: Scenario) -> None:
    whole = run_scenario(scenario, Whole(), "reference", spill_at=2)
    gateway = Counted()
    parted = run_scenario(scenario, gateway, "reference", spill_at=2)
    kept = run_scenario(scenario, ReferenceGateway(), "reference", spill_at=None)
    assert isinstance(parted.records, SpilledRecords)
    sessions = final(parted).d("sessions")
    assert type(sessions) is SpilledSessions and gateway.parts == len(sessions)
    assert parted.log_text() == whole.log_text() == kept.log_text()
    assert {c: repr(v) for c, v in parted.verdicts.items()} == {c: repr(v) for c, v in whole.verdicts.items()}
    assert parted.failure is None


def test_the_hook_is_asked_only_for_a_spilled_logs_final_snapshot() -> None:
    gateway = Counted()
    result = run_scenario(SCENARIO, gateway, "reference", spill_at=None)
    assert gateway.parts == 0 and result.failure is None and type(final(result).d("sessions")) is dict


def test_a_subclass_that_redefines_durable_state_is_asked_that() -> None:
    assert parts_hook(ReferenceGateway()) is not None
    assert parts_hook(Whole()) is None and parts_hook(HidesRoutingGateway()) is None
    result = run_scenario(SCENARIO, HidesRoutingGateway(), "hides", spill_at=2)
    assert final(result).d("routing") == {}


def _sessions(real: DurableState, garbage: str) -> tuple[list[Any], Any]:
    """The real snapshot's sessions and routing, with one kind of garbage put in."""
    sessions: list[Any] = list(real.sessions)
    routing: Any = real.routing
    if garbage == "twice":
        sessions.append(sessions[0])
    elif garbage == "row":
        first = sessions[0]
        sessions[0] = StoredSession(first.id, first.parent, (*first.messages, StoredMessage("user", 7, "visible")))  # type: ignore[arg-type]
    elif garbage == "not-a-session":
        sessions.insert(1, ("s9", None, ()))
    elif garbage == "parent":
        sessions[1] = StoredSession(sessions[1].id, 3, sessions[1].messages)  # type: ignore[arg-type]
    elif garbage == "routing":
        routing = (("alice", 7),)
    elif garbage == "routing-twice":
        routing = (*routing, routing[0])
    return sessions, routing


GARBAGE = ["twice", "row", "not-a-session", "parent", "routing", "routing-twice"]


@pytest.mark.parametrize("garbage", GARBAGE)
def test_a_malformed_part_is_the_verdict_the_whole_answer_gets(garbage: str) -> None:
    class WholeGarbage(Whole):
        def durable_state(self) -> DurableState:
            sessions, routing = _sessions(super().durable_state(), garbage)
            return DurableState(tuple(sessions), routing)

    class PartedGarbage(ReferenceGateway):
        def durable_parts(self) -> tuple[Iterator[StoredSession], Any]:
            sessions, routing = _sessions(ReferenceGateway.durable_state(self), garbage)
            return iter(sessions), routing

    whole = run_scenario(SCENARIO, WholeGarbage(), "garbage", spill_at=2)
    parted = run_scenario(SCENARIO, PartedGarbage(), "garbage", spill_at=2)
    assert whole.failure is not None and parted.failure is not None
    assert (parted.failure.kind, parted.failure.step, parted.failure.event) == ("error", whole.failure.step, "durable_state")
    assert parted.failure.message == whole.failure.message
    assert parted.failure.message.startswith("bad value in answer to durable_state: ")
    assert parted.log_text() == whole.log_text()


def test_a_hook_or_its_iterator_that_raises_is_the_gateways_error_at_its_step() -> None:
    class Raises(Whole):
        def durable_state(self) -> DurableState:
            raise RuntimeError("the store is gone")

    class PartRaises(ReferenceGateway):
        def durable_parts(self) -> tuple[Iterator[StoredSession], Any]:
            sessions, routing = super().durable_parts()

            def broken() -> Iterator[StoredSession]:
                yield next(sessions)
                raise RuntimeError("the store is gone")

            return broken(), routing

    whole = run_scenario(SCENARIO, Raises(), "raises", spill_at=2)
    parted = run_scenario(SCENARIO, PartRaises(), "raises", spill_at=2)
    assert whole.failure is not None and parted.failure is not None
    assert (parted.failure.kind, parted.failure.step, parted.failure.event, parted.failure.message) == (
        "error", whole.failure.step, "durable_state", "RuntimeError: the store is gone")


@pytest.mark.parametrize("answer", [None, DurableState(), ((), (), ())], ids=["none", "a-whole-state", "a-triple"])
def test_a_hook_answer_of_the_wrong_shape_is_a_bad_value(answer: object) -> None:
    class Odd(ReferenceGateway):
        def durable_parts(self) -> Any:
            return answer

    result = run_scenario(SCENARIO, Odd(), "odd", spill_at=2)
    assert result.failure is not None and result.failure.event == "durable_state"
    assert result.failure.message.startswith("bad value in answer to durable_state: expected a (sessions, routing) pair")


@pytest.mark.parametrize("scenario", [SCENARIO, *CATALOG], ids=lambda s: s.name)
def test_a_store_moved_to_a_temporary_file_changes_no_byte(scenario: Scenario, monkeypatch: pytest.MonkeyPatch) -> None:
    kept = run_scenario(scenario, ReferenceGateway(), "reference")
    moved: list[store_module.Store] = []
    size_up = store_module.Store._size_up

    def spy(self: store_module.Store) -> None:
        size_up(self)
        if not self._in_memory and self not in moved:
            moved.append(self)

    monkeypatch.setattr(store_module, "_SIZE_EVERY", 1)
    monkeypatch.setattr(store_module, "_ON_DISK_PAGES", 1)
    monkeypatch.setattr(store_module.Store, "_size_up", spy)
    on_disk = run_scenario(scenario, ReferenceGateway(), "reference")
    assert on_disk.log_text() == kept.log_text()
    assert {c: repr(v) for c, v in on_disk.verdicts.items()} == {c: repr(v) for c, v in kept.verdicts.items()}
    if any(r.kind == "durable" and r.d("sessions") for r in kept.records):  # a row was written: the store moved
        assert moved


def test_a_moved_store_keeps_its_rows_and_foreign_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(store_module, "_SIZE_EVERY", 1)
    monkeypatch.setattr(store_module, "_ON_DISK_PAGES", 1)
    store = store_module.Store(lambda: 0)
    store.upsert_session("s1", "alice", None, "chat", 0)
    store.append("s1", [store_module.Row("t1", "user", "[t1] hi")])
    assert not store._in_memory
    assert store.db.execute("PRAGMA foreign_keys").fetchone() == (1,)
    assert [s.messages for s in store.read_sessions()] == [(StoredMessage("user", "[t1] hi"),)]
    store.upsert_session("s2", "alice", "s1", "delegate", 0)
    store.delete_session("s1")  # cascades to the child, as in memory
    assert list(store.read_sessions()) == []
    store.close()


class Slow(ReferenceGateway):
    """The reference handing its sessions over slowly: each under the step limit, all of them over it."""

    def __init__(self, each: float, stall: bool = False) -> None:
        super().__init__()
        self.each, self.stall = each, stall

    def durable_parts(self) -> tuple[Iterator[StoredSession], tuple[tuple[str, str], ...]]:
        import time

        sessions, routing = super().durable_parts()

        def slow() -> Iterator[StoredSession]:
            for s in sessions:
                time.sleep(self.each)
                yield s
            while self.stall:  # a hang after the last session: no progress
                time.sleep(0.01)

        return slow(), routing


def test_each_session_handed_over_is_progress_to_the_step_watchdog() -> None:
    """A long run's final snapshot may take longer than a step's limit; a part of it does not.
    A hook that stops handing sessions over is still a timeout at its step."""
    many = load_text("name: many\nchats: {" + ", ".join(f"c{n}: {{}}" for n in range(12)) + "}\nevents:\n"
                     + "".join(f"  - message: c{n}\n" for n in range(12)), "many.yaml")
    result = run_scenario(many, Slow(0.04), "reference", spill_at=2, step_timeout=0.2)
    assert result.failure is None and len(final(result).d("sessions")) == 12  # 0.48 s in all, 0.04 s a part
    stalled = run_scenario(many, Slow(0.0, stall=True), "reference", spill_at=2, step_timeout=0.2)
    assert stalled.failure is not None and stalled.failure.kind == "timeout"
    assert "durable_state" in stalled.failure.event


def test_a_streamed_snapshot_is_read_back_with_its_sessions_left_in_the_file() -> None:
    """Each check of each part of a long log reads the final snapshot: its sessions stay in the
    log's file, read one when asked (a part's selection reads none), and equal the whole run's."""
    import pickle

    from conformance.harness import spill

    parted = run_scenario(SCENARIO, ReferenceGateway(), "reference", spill_at=2)
    kept = run_scenario(SCENARIO, ReferenceGateway(), "reference", spill_at=None)
    records = parted.records
    assert isinstance(records, SpilledRecords)
    [at] = [i for i, r in enumerate(kept.records) if r.kind == "durable" and r.d("label") == "final"]
    sessions = records[at].d("sessions")
    assert type(sessions._blobs) is spill._BlobsInFile  # type: ignore[attr-defined]
    assert sessions == kept.records[at].d("sessions") == next(records.pick([at])).d("sessions")
    one = sorted(sessions)[:1]
    chosen = sessions.select(set(one))
    assert type(chosen._blobs) is spill._BlobsInFile and list(chosen) == one  # type: ignore[attr-defined]
    assert chosen[one[0]] == kept.records[at].d("sessions")[one[0]]
    copied = pickle.loads(pickle.dumps(sessions))
    assert type(copied._blobs) is dict and copied == sessions  # another process gets the blobs
    assert records[at]._replace(detail={}) == kept.records[at]._replace(detail={})
    assert {k: v for k, v in records[at].detail.items() if k != "sessions"} == \
        {k: v for k, v in kept.records[at].detail.items() if k != "sessions"}
