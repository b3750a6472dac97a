"""Checks that do not take the gateway's word (issue #19): hand-made logs, each proven both
ways. The reference's log passes; the log a lazy gateway would write fails with these words:
a reply after the /stop that abandoned its turn (I6), rows and ends holding a turn never
acknowledged (I2, I1), "busy" read from the log, not the gateway's flag (I7), half a turn
ingested or carried (I3, I1), a delegate skipped while its chat had a live session (I6)."""

from __future__ import annotations

import pytest
from check_logs import drop, edit, find, insert, log, messages, rows, snapshots

from conformance.observations import Obs, halves, ingested_halves
from sim.loader import ScenarioError, load_text


def both(*turns: str) -> list[list[str]]:
    return [[role, turn, "visible"] for turn in turns for role in ("user", "assistant")]


# -- 1. no reply after the /stop that abandoned a turn (I6) --------------------------------


def test_i6_a_reply_after_the_stop_that_abandoned_its_turn() -> None:
    records = log("stopped")
    assert messages(records, "I6") == []
    stop = find(records, "command", command="/stop")
    late = Obs(records[stop].t + 30_000, records[stop].step, "reply", "alice", "s1", ("t1",))
    assert messages(insert(records, stop + 2, late), "I6") == [
        "turn t1 (session s1, asked 09:00) was abandoned by /stop at 09:00:30 but its reply was delivered at "
        "09:01: a stopped turn gets no reply"
    ]


def test_i6_a_reply_before_the_stop_is_no_abandoned_turn() -> None:
    """The /stop found nothing in flight: a reply that came first acknowledged the turn."""
    records = log("stopped")
    stop = find(records, "command", command="/stop")
    early = Obs(records[stop].t - 10_000, records[stop].step, "reply", "alice", "s1", ("t1",))
    assert messages(insert(records, stop, early), "I6") == []


# -- 2. a turn never acknowledged leaves nothing behind (I2, I1) ----------------------------


def test_i2_a_stopped_turn_stored() -> None:
    records = log("stopped")
    assert messages(records, "I2") == []
    assert messages(rows(records, "final", "s1", [["user", "t1", "visible"], *both("t2")]), "I2") == [
        "turn t1 (session s1) was never acknowledged (abandoned by /stop at 09:00:30) but its user row in s1 is "
        "stored at snapshot 'final' (10:17): a turn never acknowledged leaves nothing behind"
    ]


def test_a_turn_folded_into_an_answered_request_is_not_left_behind() -> None:
    """t1, stopped, rides along in t2's prompt (the request lists both) and t2's reply answers
    it (I9's fold): its row and its place in the end are no leftovers."""
    records = log("stopped")
    folded = edit(records, find(records, "llm_request", turn="t2"), turns=("t2", "t1"))
    kept = rows(folded, "final", "s1", [["user", "t1", "visible"], *both("t2")])
    assert messages(kept, "I2") == []
    assert messages(edit(kept, find(kept, "on_session_end", session="s1"), turns=("t1", "t2")), "I1") == []


def test_i2_an_interrupted_turn_stored_at_the_sigterm() -> None:
    records = log("interrupted")
    assert messages(records, "I2") == []
    kept = rows(records, "sigterm", "s1", both("t1")[:1])
    assert messages(kept, "I2") == [
        "turn t1 (session s1) was never acknowledged (interrupted by the sigterm at 09:00:20) but its user row in s1 "
        "is stored at snapshot 'sigterm' (09:00:20): a turn never acknowledged leaves nothing behind"
    ]


def test_i2_a_turn_in_flight_may_be_stored_before_it_ends() -> None:
    """Judged only once the turn ended unacknowledged: a user row written at admission is fine
    while the turn is in flight (here, a checkpoint-like snapshot before the SIGTERM)."""
    records = log("interrupted")
    sigterm = find(records, "sigterm")
    early = records[find(records, "durable", label="sigterm")]._replace(t=records[sigterm].t - 10_000)
    early = early._replace(detail={**early.detail, "label": "early", "sessions": {
        "s1": {"parent": None, "rows": both("t1")[:1]}}})
    assert messages(insert(records, sigterm, early), "I2") == []


def test_i1_an_end_carrying_a_stopped_turn() -> None:
    records = log("stopped")
    assert messages(records, "I1") == []
    end = find(records, "on_session_end", session="s1")
    assert messages(edit(records, end, turns=("t1", "t2")), "I1") == [
        "on_session_end for s1 at 09:05 carried turn t1, which was never acknowledged (abandoned by /stop at "
        "09:00:30): a turn never acknowledged leaves nothing behind"
    ]


def test_i3_a_backend_holding_a_stopped_turn() -> None:
    records = log("stopped")
    assert messages(records, "I3") == []
    stop = find(records, "command", command="/stop")
    shipped = Obs(records[stop].t, records[stop].step, "ingest", None, "s1", ("t1",), {"backend": "recorder", "replies": []})
    assert messages(insert(records, stop + 2, shipped), "I3") == [
        "backend 'recorder' ingested turn t1, which was never acknowledged (abandoned by /stop at 09:00:30): a turn "
        "never acknowledged leaves nothing behind"
    ]


# -- 3. busy from the log, not the gateway's flag (I7) --------------------------------------


def test_i7_an_agent_the_gateway_calls_busy_with_no_turn_in_flight_is_not_reaped() -> None:
    """Reset policy none, 1h TTL: the gateway keeps s1 cached after its turn and calls it busy."""
    records = snapshots(log("reaped"))
    assert messages(records, "I7") == []
    reload = find(records, "llm_request", turn="t2")
    stuck = [r._replace(detail={**r.detail, "cached": [["s1", True]]})
             if r.kind == "resources" and find(records, "reply", turn="t1") < i < reload else r
             for i, r in enumerate(records)]
    assert messages(stuck, "I7") == [
        "the agent of session s1 (reset policy none) stayed cached until 12:00, idle since 09:00:02 "
        "(idle TTL 1h, sweep every 5m: due out by 10:05:02)"
    ]


def test_i7_an_agent_with_a_turn_in_flight_is_busy_whatever_the_gateway_says() -> None:
    """A 2h turn: the agent is held past the TTL while the log has its turn in flight, even
    where the gateway calls it idle."""
    records = snapshots(log("long-turn"))
    assert messages(records, "I7") == []
    reply = find(records, "reply", turn="t1")
    idle = [r._replace(detail={**r.detail, "cached": [[sid, False] for sid, _busy in r.d("cached")]})
            if r.kind == "resources" and i < reply else r for i, r in enumerate(records)]
    assert messages(idle, "I7") == []


def test_i7_the_cap_counts_agents_idle_by_the_log() -> None:
    """Cap 1: after bob's turn the gateway keeps alice's s1 beside s2 and calls it busy."""
    records = snapshots(log("idle"))
    assert messages(records, "I7") == []
    evicted = find(records, "resources", cached=[["s2", True]])  # s1 evicted, s2 as listed when it came
    assert messages(edit(records, evicted, detail={"cached": [["s1", True], ["s2", False]]}), "I7") == [
        "the agent cache held 2 idle agents at 09:02:02 (cap 1): s1, s2"
    ]


def test_i7_an_agent_a_turn_leaves_idle_is_counted_once_that_instant_is_over() -> None:
    """The reference evicts s1 in the instant of bob's reply (the clean log above passes); a
    gateway that evicts a second later held two idle agents meanwhile, though no sample said so."""
    records = snapshots(log("idle"))
    evicted = find(records, "resources", cached=[["s2", True]])
    later = edit(records, evicted, t=records[evicted].t + 1_000)
    assert messages(later, "I7") == [
        "the agent cache held 2 idle agents at 09:02:02 (cap 1): s1, s2"
    ]


# -- 4. a turn ingested or carried is both halves (I3, I1) ----------------------------------


def test_halves_tell_the_user_message_from_the_reply() -> None:
    assert halves(["[t1] hello", "[t1] reply"]) == (("t1",), ("t1",))
    assert halves(["[t1] reply", "[t1] reply"]) == ((), ("t1",))
    assert halves(["User: [t1] reply please\nAssistant: [t1] reply\n", "[t2] hello"]) == (("t1", "t2"), ("t1",))
    assert halves(["[t3] reply (edited)"]) == (("t3",), ())
    # Hermes's Hindsight ships one text per message, labelled (`_build_turn_messages`).
    assert halves(["User: [t4] hello", "Assistant: [t4] reply"]) == (("t4",), ("t4",))


def test_a_message_whose_first_line_is_reply_is_refused() -> None:
    with pytest.raises(ScenarioError, match="first line cannot be 'reply'"):
        load_text("name: x\nstart: 2026-03-02T09:00\nchats: {alice: {}}\nevents:\n  - {message: alice, text: reply}\n")


def test_old_ingest_records_read_as_both_halves() -> None:
    records = log("idle")
    shipped = find(records, "ingest", turn="t1", backend="hindsight")
    old = {k: v for k, v in records[shipped].detail.items() if k != "replies"}
    assert ingested_halves(records[shipped]._replace(detail=old)) == (("t1", "t2"), ("t1", "t2"))
    logs = [r._replace(detail={k: v for k, v in r.detail.items() if k != "replies"}) if r.kind == "ingest" else r
            for r in records]
    assert messages(logs, "I3") == [] and messages(logs, "I4") == []


def test_i3_a_backend_holding_half_a_turn() -> None:
    records = log("idle")
    assert messages(records, "I3") == []
    shipped = find(records, "ingest", turn="t1", backend="hindsight")
    assert messages(edit(records, shipped, turns=(), detail={"replies": ["t1", "t2"]}), "I3") == [
        "backend 'hindsight' ingested [t1, t2] without the user messages (session s1, acknowledged from 09:00:02 to "
        "09:01:02): a turn "
        "ingested is the user's message and its reply"
    ]
    assert messages(edit(records, shipped, detail={"replies": ["t2"]}), "I3") == [
        "backend 'hindsight' ingested [t1] without the reply (session s1, acknowledged 09:00:02): a turn ingested is "
        "the user's message and its reply"
    ]


def test_i4_a_reply_ingested_twice() -> None:
    records = log("idle")
    shipped = find(records, "ingest", turn="t3", backend="hindsight")
    again = records[shipped]._replace(turns=(), detail={"backend": "hindsight", "replies": ["t3"]})
    assert messages(insert(records, shipped + 1, again), "I4") == [
        "backend 'hindsight' ingested the reply of t3 2 times: at 09:35 and 09:35"
    ]


def test_i1_an_end_carrying_half_a_turn() -> None:
    """A reply without its user message carries nothing of the turn; a message without its
    reply carries half of it."""
    records = log("stopped")
    end = find(records, "on_session_end", session="s1")
    assert messages(edit(records, end, turns=(), detail={"replies": ["t2"]}), "I1") == [
        "on_session_end for s1 carried [] but its acknowledged turns are [t2] (missing [t2])",
    ]
    assert messages(edit(records, end, detail={"replies": []}), "I1") == [
        "on_session_end for s1 carried [t2] without the reply of [t2]: a turn is the user's message and its reply",
    ]


# -- 5. a delegate skipped only without a live session (I6) ---------------------------------


def test_i6_a_delegate_skipped_while_its_chat_had_a_live_session() -> None:
    """t2 is delegated at 09:25 while s1 (idle 30m, last message 09:00) is live."""
    records = log("quiet")
    assert messages(records, "I6") == []
    asked = find(records, "llm_request", turn="t2")
    answered = find(records, "reply", turn="t2")
    skipped = drop(records, asked, answered)
    assert messages(skipped, "I6") == [
        "delegated task t2 arrived at 09:25 while chat alice's session s1 was live (its boundary comes at 09:30) but "
        "was never asked of the LLM: a delegate is skipped only when the chat has no live session"
    ]


def test_i6_a_delegate_without_a_live_session_may_be_skipped() -> None:
    """Before the chat's first message, and after /new with no message since: nothing to run from."""
    records = log("no-live-session")
    assert [r.d("what") for r in records if r.kind == "note"] == ["delegate_skipped", "delegate_skipped"]
    assert messages(records, "I6") == []
