"""The compact forms a long run keeps (issue #24 (b)) read as the plain ones they replace:
a `MessageTimeline` as the tuple of its messages, and I3's late-turn evidence (the ingest that
completed the turn, found again for a violation) as when every ingest's index was kept."""

from __future__ import annotations

import pickle

import pytest
from check_logs import find, log, move

from conformance.checks import judge
from conformance.harness.runner import run_scenario
from conformance.harness.spill import ObservationLog, SpilledSessions
from conformance.observations import Obs, log_text
from reference_impl import ReferenceGateway
from sim.clock import MINUTE
from sim.scenario import Chat, GatewayConfig, Message, MessageTimeline, ResetPolicy, Scenario

START = 1_767_225_600_000


def _timeline(count: int) -> tuple[MessageTimeline, tuple[Message, ...]]:
    times = [START + k * 7 * MINUTE for k in range(count)]  # past the idle boundary now and then
    chats = [k % 3 for k in range(count)]
    names = ("a", "b", "c")
    plain = tuple(Message(t, chat=names[c], turn=f"t{k}", text="hi") for k, (t, c) in enumerate(zip(times, chats, strict=True), 1))
    return MessageTimeline(times, chats, names, "hi"), plain


def test_timeline_reads_as_the_tuple_of_its_messages() -> None:
    timeline, plain = _timeline(50)
    assert len(timeline) == 50 and tuple(timeline) == plain
    assert timeline == plain and plain == timeline and hash(timeline) == hash(plain)
    assert timeline[0] == plain[0] and timeline[-1] == plain[-1] and timeline[10:20] == plain[10:20]
    assert timeline != plain[:-1] and timeline == _timeline(50)[0]
    with pytest.raises(IndexError):
        timeline[50]
    with pytest.raises(ValueError):
        MessageTimeline([START], [], ("a",))


def test_a_scenario_on_a_timeline_runs_as_on_its_tuple() -> None:
    timeline, plain = _timeline(120)
    config = GatewayConfig(reset=ResetPolicy(mode="idle", idle_minutes=30))
    chats = tuple(Chat(name) for name in ("a", "b", "c"))
    logs = []
    for events in (timeline, plain):
        scenario = Scenario(name="timeline", start=START, config=config, chats=chats, events=events)
        result = run_scenario(scenario, ReferenceGateway(), "reference")
        assert result.passed, result.verdicts
        logs.append(result.log_text())
    assert logs[0] == logs[1]


def test_i3_late_turn_names_the_ingest_that_completed_it() -> None:
    records = log("new")  # hindsight ships s1's t1 at its /new end (09:01)
    ingest = find(records, "ingest", turn="t1", backend="hindsight")
    final = find(records, "sigterm", final=True)
    moved = move(records, ingest, final + 1)
    [late] = judge(moved)["I3"].violations
    end = find(moved, "on_session_end", session="s1")
    assert late.records == (end, find(moved, "ingest", turn="t1", backend="hindsight"))


def test_a_spilled_snapshot_reads_as_its_dict_one_session_at_a_time() -> None:
    sessions = {"s1": {"parent": None, "rows": [["user", "t1", "visible"], ["assistant", "t1", "visible"]]},
                "s2": {"parent": "s1", "rows": []}}
    log = ObservationLog(lambda: 0, spill_at=1)
    log.add("durable", label="final", sessions=sessions, routing={"a": "s1"})
    log.add("note")
    snap = log.records[0]
    read = snap.d("sessions")
    assert isinstance(read, SpilledSessions) and read == sessions and sessions == read
    assert list(snap.detail) == ["label", "sessions", "routing"] and read["s1"] == sessions["s1"] and "s2" in read
    assert dict(read.items()) == sessions and pickle.loads(pickle.dumps(read)) == sessions
    assert log_text(log.records) == log_text([Obs(0, 0, "durable", detail={"label": "final", "sessions": sessions,
                                                                           "routing": {"a": "s1"}}), Obs(0, 0, "note")])


def test_a_spilled_runs_final_snapshot_is_packed_as_made_and_judged_the_same() -> None:
    timeline, _plain = _timeline(60)
    scenario = Scenario(name="packed", start=START, config=GatewayConfig(reset=ResetPolicy(mode="idle", idle_minutes=30)),
                        chats=tuple(Chat(name) for name in ("a", "b", "c")), events=timeline)
    kept = run_scenario(scenario, ReferenceGateway(), "reference", spill_at=None)
    spilled = run_scenario(scenario, ReferenceGateway(), "reference", spill_at=5)
    final = [r for r in spilled.records if r.kind == "durable" and r.d("label") == "final"]
    assert len(final) == 1 and type(final[0].d("sessions")) is SpilledSessions and len(final[0].d("sessions")) >= 3
    assert spilled.log_text() == kept.log_text()
    assert {c: repr(v) for c, v in spilled.verdicts.items()} == {c: repr(v) for c, v in kept.verdicts.items()}
