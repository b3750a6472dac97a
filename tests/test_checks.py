"""Each check against hand-made logs that violate it: the clean reference log passes, the log a
buggy gateway would have written fails with exactly these words (I1-I4 here; I5-I8 and the
oracle in test_checks_more.py)."""

from __future__ import annotations

import pytest
from check_logs import ORACLE_CASES, SCENARIOS, drop, edit, find, insert, log, messages, move, rows

from conformance.checks import judge
from conformance.harness.verdict import CHECK_IDS
from conformance.observations import Obs

EXERCISED = {  # a scenario that exercises each check (examined > 0 on it)
    "I1": "idle", "I2": "heal", "I3": "idle", "I4": "idle", "I5": "new", "I6": "quiet", "I7": "reaped", "I8": "heal",
    "I9": "idle",
}


def both(*turns: str) -> list[list[str]]:
    """Visible user and assistant rows of these turns, as a snapshot stores them."""
    return [[role, turn, "visible"] for turn in turns for role in ("user", "assistant")]


def ended_at(records: tuple[Obs, ...] | list[Obs], session: str, before: int) -> list[Obs]:
    """The log with the session's on_session_end, then its finalize, moved before `before`."""
    out = move(records, find(records, "on_session_end", session=session), before)
    end = find(out, "on_session_end", session=session)
    return move(out, find(out, "on_session_finalize", session=session), end + 1, t=out[end].t)


def unended(records: tuple[Obs, ...] | list[Obs], session: str, nth: int = 0) -> list[Obs]:
    """The log without the session's `nth` on_session_end and the finalize after it."""
    out = drop(records, find(records, "on_session_end", session=session, nth=nth))
    return drop(out, find(out, "on_session_finalize", session=session, nth=nth))


@pytest.mark.parametrize("name", [*SCENARIOS, *ORACLE_CASES])
def test_reference_logs_pass_every_check(name: str) -> None:
    verdicts = judge(list(log(name)))
    assert {c: v.summary for c, v in verdicts.items() if v.status != "pass"} == {}


@pytest.mark.parametrize("check", CHECK_IDS)
def test_each_check_examines_something(check: str) -> None:
    verdict = judge(list(log(EXERCISED[check])))[check]
    assert verdict.status == "pass" and verdict.examined > 0


# -- I1 exactly-once end -----------------------------------------------------------------


def test_i1_boundary_without_end() -> None:
    records = log("idle")
    assert messages(drop(records, find(records, "on_session_end", session="s1")), "I1") == [
        "session s1 reached its idle boundary at 09:31 (idle 30m after the last user message at 09:01) but got no "
        "on_session_end (owed by 09:36: eager finalization within 5m)",
        "session s1 got on_session_finalize at 09:35 without an on_session_end",
    ]


def test_i1_a_declared_latency_cannot_outwait_quiescence() -> None:
    """The laziest eager gateway: it declared a year's latency and ended no expired session. The
    ends were owed after the final stop, so none was missing (the headline bug of hermes #11205
    passed catalog 01). A latency is held to what quiescence allows past the last boundary
    (`GatewayConfig.settle`: the idle TTL, two watcher ticks and a turn, here 1h10m02s)."""
    records = log("idle")
    yearly = edit(records, 0, detail={"profile": {**records[0].d("profile"), "latency": 365 * 86_400_000}})
    assert messages(yearly, "I1") == []
    unended_both = drop(yearly, *(find(yearly, kind, session=s) for s in ("s1", "s2")
                                  for kind in ("on_session_end", "on_session_finalize")))
    assert messages(unended_both, "I1") == [
        "session s1 reached its idle boundary at 09:31 (idle 30m after the last user message at 09:01) but got no "
        "on_session_end (owed by 10:41:02: eager finalization within 1h10m2s)",
        "session s2 reached its idle boundary at 09:32 (idle 30m after the last user message at 09:02) but got no "
        "on_session_end (owed by 10:42:02: eager finalization within 1h10m2s)",
    ]


def test_i1_no_end_is_owed_after_the_final_sigterm() -> None:
    """A backlog keeps t4 in flight until the final SIGTERM: s4's end, deferred by that turn,
    would be owed after it, so none is missing. s3's was owed before it: a log without it fails."""
    records = log("backlog-at-final-stop")
    assert find(records, "note", session="s4") > find(records, "sigterm")  # t4 interrupted by the final stop
    assert messages(records, "I1") == []
    assert messages(unended(records, "s3"), "I1") == [
        "session s3 reached its idle boundary at 09:17 (idle 5m after the last user message at 09:12) but got no "
        "on_session_end (owed by 10:01: eager finalization within 1m)"
    ]


def test_i1_a_held_stop_abandons_the_turn_delivered_before_it() -> None:
    """t1, /new and /stop sent while the gateway was down: at the restart t1 starts, /stop
    abandons it, and the /new queued behind it ends s1. A log without that end fails."""
    records = log("held-stop-after-held-turn")
    assert messages(records, "I1") == [] and messages(records, "I6") == []
    assert messages(unended(records, "s1"), "I1") == [
        "session s1 reached its new boundary at 09:01 (/new) but got no on_session_end (owed by 09:06: eager "
        "finalization within 5m)"
    ]


def test_i1_each_resumed_life_ends() -> None:
    """Three /resume queued behind one turn: s1 lives three times; its second life (the first
    resume) ends at the second resume, and a log without that end fails."""
    records = log("resume-back-twice")
    assert messages(unended(records, "s1", nth=1), "I1") == [
        "session s1 reached its switch boundary at 09:08 (/resume left it) but got no on_session_end "
        "(owed by 09:13: eager finalization within 5m)"
    ]


def test_i1_two_ends() -> None:
    records = log("idle")
    stop = find(records, "sigterm", final=True)
    again = records[find(records, "on_session_end", session="s1")]._replace(t=records[stop].t)
    assert messages(insert(records, stop, again), "I1") == ["session s1 got 2 on_session_end calls: at 09:35 and 11:23:02"]


def test_i1_end_at_eviction_before_the_boundary() -> None:
    records = log("idle")
    assert messages(ended_at(records, "s1", find(records, "note", session="s1", what="evict")), "I1") == [
        "session s1 got on_session_end at 09:02:02 (at an eviction), before its idle boundary at 09:31 "
        "(idle 30m after the last user message at 09:01)"
    ]


def test_i1_no_end_at_shutdown_or_eviction_without_a_boundary() -> None:
    records = log("sigterm")
    stop = find(records, "sigterm")
    end = Obs(records[stop].t, records[stop].step, "on_session_end", session="s1", turns=("t1", "t2"))
    assert messages(insert(records, stop + 1, end), "I1") == [
        "session s1 got on_session_end at 09:02 (at sigterm) but never reached a boundary (reset policy none)"
    ]
    records = log("reaped")
    evict = find(records, "note", what="evict")
    fin = Obs(records[evict].t, records[evict].step, "on_session_finalize", session="s1", detail={"reason": "evict"})
    assert messages(insert(records, evict, fin), "I1") == [
        "session s1 got on_session_finalize at 10:05 (at an eviction) but never reached a boundary (reset policy none)"
    ]


def test_i1_end_later_than_declared() -> None:
    records = log("idle")  # eager: within the 5m watcher interval
    assert messages(ended_at(records, "s2", find(records, "advance")), "I1") == [
        "session s2 reached its idle boundary at 09:32 (idle 30m after the last user message at 09:02) but its "
        "on_session_end came only at 09:42 (owed by 09:37: eager finalization within 5m)"
    ]
    records = log("lazy")  # lazy: before the chat's next message is served
    late = ended_at(records, "s1", find(records, "llm_request", turn="t2") + 1)
    assert messages(late, "I1") == [
        "session s1 reached its idle boundary at 09:30 (idle 30m after the last user message at 09:00) but its "
        "on_session_end came only after the chat's next message t2 at 10:00 (lazy finalization)"
    ]


def test_i1_transcript_full_and_in_order() -> None:
    records = log("idle")
    end = find(records, "on_session_end", session="s1")
    assert messages(edit(records, end, turns=("t2",)), "I1") == [
        "on_session_end for s1 carried [t2] but its acknowledged turns are [t1, t2] (missing [t1])"
    ]
    assert messages(edit(records, end, turns=("t2", "t1")), "I1") == [
        "on_session_end for s1 carried [t2, t1] but its acknowledged turns are [t1, t2] (out of order)"
    ]
    assert messages(edit(records, end, turns=("t1", "t2", "t2", "t3")), "I1") == [
        "on_session_end for s1 carried [t1, t2, t2, t3] but its acknowledged turns are [t1, t2] "
        "([t3] of another session; [t2] repeated)"
    ]


def test_i1_transcript_carries_each_turns_reply() -> None:
    records = log("idle")
    end = find(records, "on_session_end", session="s1")
    assert records[end].d("replies") == ["t1", "t2"]
    assert messages(edit(records, end, detail={"replies": ["t1"]}), "I1") == [
        "on_session_end for s1 carried [t1, t2] without the reply of [t2]: a turn is the user's message and its reply"
    ]
    old = dict(records[end].detail)
    del old["replies"]  # a log from before replies were recorded: not judged on them
    assert messages([r._replace(detail=old) if i == end else r for i, r in enumerate(records)], "I1") == []


def test_i1_transcript_carries_each_reply_after_its_own_message() -> None:
    """The audit of lazy gateways: every message, then every reply, passed as a whole transcript."""
    records = log("idle")
    end = find(records, "on_session_end", session="s1")
    assert records[end].d("apart") is None
    assert messages(edit(records, end, detail={"apart": ["t1"]}), "I1") == [
        "on_session_end for s1 carried the reply of [t1] apart from its own message (the last user message before "
        "it is not the turn's): a turn is the user's message and its reply, in order"
    ]
    assert messages(edit(records, end, detail={"apart": ["t9"]}), "I1") == []  # not a turn it carries


def test_the_recorder_logs_replies_apart_from_their_messages() -> None:
    from conformance.harness.spill import ObservationLog
    from conformance.observers import MemoryBackend, RecordingProvider

    log_ = ObservationLog(lambda: 0)
    recorder = RecordingProvider(log_, MemoryBackend("recorder", log_, lambda: 0))
    paired = [("user", "[t1] a"), ("assistant", "[t1] reply"), ("user", "[t2] b"), ("tool", "x"), ("assistant", "[t2] reply")]
    recorder.on_session_end("s1", paired)
    recorder.on_session_end("s1", [("user", "[t1] a\n[t2] b"), ("assistant", "[t2] reply")])  # a folded message
    recorder.on_session_end("s1", [("user", "[t1] a"), ("user", "[t2] b"), ("assistant", "[t1] reply"), ("assistant", "[t2] reply")])
    recorder.on_session_end("s1", [("assistant", "[t1] reply"), ("user", "[t1] a")])
    assert [r.d("apart") for r in log_] == [None, None, ["t1"], ["t1"]]


def test_i1_one_finalize_after_the_end() -> None:
    records = log("new")
    fin, end = find(records, "on_session_finalize", session="s1"), find(records, "on_session_end", session="s1")
    assert messages(move(records, fin, end), "I1") == ["session s1 got on_session_finalize at 09:01 before its on_session_end at 09:01"]
    assert messages(drop(records, fin), "I1") == ["session s1 got on_session_end at 09:01 but no on_session_finalize"]
    assert messages(insert(records, fin, records[fin]), "I1") == [
        "session s1 got 2 on_session_finalize calls: at 09:01 (at a command) and 09:01 (at a command)"
    ]


def test_i1_delegate_child_never_ends() -> None:
    records = log("orphan")
    reply = find(records, "reply", turn="t3")
    end = Obs(records[reply].t, records[reply].step, "on_session_end", session="s2", turns=("t2", "t3"))
    assert messages(insert(records, reply + 1, end), "I1") == [
        "delegate child session s2 got on_session_end at 09:03:02; a child reaches no boundary of its own"
    ]


def test_i1_an_end_owes_what_a_deleted_rows_live_agent_held() -> None:
    """s1's row is deleted under its live agent, which the LRU cap evicts before alice writes
    again: the eviction owes t1 back, so the end carries it (once excused, as a loss)."""
    records = log("evicted-before-next-write")
    end = find(records, "on_session_end", session="s1")
    assert messages(edit(records, end, turns=("t3",), detail={"replies": ["t3"]}), "I1") == [
        "on_session_end for s1 carried [t3] but its acknowledged turns are [t1, t3] (missing [t1])"]
    records = log("lost-then-live")  # evicted before the deletion: t1 was beyond restoring
    assert records[find(records, "on_session_end", session="s1")].turns == ("t3", "t4")
    assert messages(records, "I1") == []


# -- I2 no lost turn (store) ---------------------------------------------------------------


def test_i2_turn_missing_or_under_another_session() -> None:
    records = log("idle")
    assert messages(rows(records, "final", "s1", both("t1")), "I2") == [
        "turn t2 (session s1, acknowledged 09:01:02) is missing from the store at snapshot 'final' (11:23:02)"
    ]
    moved = rows(rows(records, "final", "s1", both("t1")), "final", "s2", both("t3", "t2"))
    assert messages(moved, "I2") == ["turn t2 of session s1 is stored under s2 instead at snapshot 'final' (11:23:02)"]


def test_i2_in_order_exactly_once_with_its_reply() -> None:
    records = log("idle")
    assert messages(rows(records, "final", "s1", both("t2", "t1")), "I2") == [
        "session s1's stored turns are out of order at snapshot 'final' (11:23:02): [t2, t1], asked as [t1, t2]"
    ]
    assert messages(rows(records, "final", "s1", both("t1", "t2", "t2")), "I2") == [
        "turn t2 is stored 2 times in session s1 at snapshot 'final' (11:23:02)"
    ]
    assert messages(rows(records, "final", "s1", [*both("t1"), ["user", "t2", "visible"]]), "I2") == [
        "turn t2 of session s1 is stored without its reply at snapshot 'final' (11:23:02)"
    ]


def test_i2_a_row_that_kept_the_tag_and_lost_the_words_is_cut() -> None:
    """The audit of lazy gateways (2026-12-05): a gateway that stored each message as its `[tN]`
    tag alone passed everything, the checks reading rows by their tags. The runner lists such a
    session's turns under `cut` (`observations.whole_turns`); I2 says which half was lost."""
    records = log("idle")
    index = find(records, "durable", label="final")
    body = records[index].d("sessions")["s1"]
    assert "cut" not in body
    sessions = dict(records[index].d("sessions"))
    sessions["s1"] = {"parent": body["parent"], "rows": [r for r in body["rows"] if not (r[0] == "user" and r[1] == "t2")],
                      "cut": ["t2"]}
    assert messages(edit(records, index, detail={"sessions": sessions}), "I2") == [
        "turn t2 of session s1 is stored cut: its row keeps the tag but not what the user said at snapshot 'final' (11:23:02)"
    ]
    sessions["s1"] = {"parent": body["parent"], "rows": [r for r in body["rows"] if not (r[0] == "assistant" and r[1] == "t1")],
                      "cut": ["t1"]}
    assert messages(edit(records, index, detail={"sessions": sessions}), "I2") == [
        "turn t1 of session s1 is stored cut: its reply row keeps the tag but not the LLM's answer at snapshot 'final' "
        "(11:23:02)"
    ]


def test_a_stored_row_names_a_turn_by_its_words_not_its_tag_alone() -> None:
    from conformance.observations import StoredMessage, stored_rows

    said = {"t2": "ciao"}
    messages_ = (StoredMessage("user", "[t1] hello"), StoredMessage("assistant", "[t1] reply"),
                 StoredMessage("user", "[t2]"), StoredMessage("assistant", "[t2] rep"),
                 StoredMessage("user", "Mon 09:00 alice: [t3] hello (edited)"), StoredMessage("user", "[t4] hello\n[t5] ciao"))
    cut: list[str] = []
    out = stored_rows(messages_, {}, {}.setdefault, True, said, cut)
    assert [r[:2] for r in out] == [["user", "t1"], ["assistant", "t1"], ["user", None], ["assistant", None],
                                    ["user", "t3"], ["user", "t4"]]  # a row that names no turn whole names none
    assert cut == ["t2", "t2", "t5"]  # a wrapper around the words is no matter; t5's message was "hello", not "ciao"


@pytest.mark.parametrize(("kind", "where", "check", "said"), [
    ("ingest", {"backend": "hindsight", "turn": "t1"}, "I3",
     "backend 'hindsight' ingested [t1] without the user message (session s1, acknowledged 09:00:02; it took [t1] by "
     "the tag alone, not what the user said): a turn ingested is the user's message and its reply"),
    ("on_session_end", {"session": "s1"}, "I1",
     "on_session_end for s1 carried [] but its acknowledged turns are [t1] (missing [t1]; [t1] carried by the tag "
     "alone, not what the user said)"),
])
def test_a_message_carried_by_its_tag_alone_is_no_part_of_the_turn(kind: str, where: dict[str, str], check: str,
                                                                    said: str) -> None:
    """The audit of lazy gateways (2026-12-06): a provider shipping `[t1]` for `[t1] hello`, or an
    end's transcript carrying it so, passed I3 and I1, read by their tags. The backend and the
    recorder now list such a message under `cut`, not among the turns taken or carried."""
    records = log("new")
    index = find(records, kind, **where)
    assert messages(records, check) == []
    assert messages(edit(records, index, turns=(), detail={"cut": ["t1"]}), check) == [said]


def test_i3_a_batch_shipped_after_the_sessions_finalize_in_its_step_is_late() -> None:
    """The audit of lazy gateways (2026-12-06): a gateway whose providers flushed after the end
    hooks, in the same step, passed: I3 compared times, equal at one instant."""
    records = log("new")
    ingest = find(records, "ingest", backend="hindsight", turn="t1")
    finalize = find(records, "on_session_finalize", session="s1")
    assert ingest < finalize and records[ingest].t == records[finalize].t and messages(records, "I3") == []
    after = move(records, ingest, finalize + 1)
    assert messages(after, "I3") == [
        "backend 'hindsight' took [t1] only after s1's on_session_finalize at 09:01, in the step that ended it: what a "
        "provider buffers is owed when the session ends"]


def test_i3_a_turn_handed_to_memory_the_wrong_way_round() -> None:
    """The audit of lazy gateways (2026-12-06): `sync_turn(session, assistant, user)`, or a batch
    of every message then every reply, passed: the halves were read by content alone."""
    records = log("new")
    sync = find(records, "sync_turn", turn="t1")
    ingest = find(records, "ingest", backend="hindsight", turn="t1")
    assert messages(records, "I3") == []
    assert messages(edit(records, sync, detail={"swapped": True}), "I3") == [
        "sync_turn for [t1] of s1 at 09:00:02 was handed the reply as the user's message: sync_turn(session, user, "
        "assistant)"]
    assert messages(edit(records, ingest, detail={"apart": ["t1"]}), "I3") == [
        "backend 'hindsight' took the reply of [t1] before its message in one call at 09:01: a turn is its message, "
        "then its reply"]


def test_a_backend_reads_the_pairing_of_a_call_by_its_order() -> None:
    from conformance.observations import halves_in, read_call

    calls = ["[t1] hi\n[t1] reply\n[t2] yo\n[t2] reply", "[t1] hi\n[t2] yo\n[t1] reply\n[t2] reply",
             "[t1] reply\n[t1] hi", "[t1] reply", "[t2] reply\n[t3] hi\n[t3] reply"]
    assert [read_call(call)[:2] for call in calls] == [halves_in(call) for call in calls]  # the halves, as ever
    assert [read_call(call)[2] for call in calls] == [
        [],
        ["t1", "t2"],  # every message, then every reply
        ["t1"],  # the reply before its own message
        [], []]  # a reply alone in its call: its message may come in another


def test_i6_the_llm_asked_with_another_sessions_turn_in_its_context() -> None:
    """The audit of lazy gateways (2026-12-06): an agent that kept the chat's earlier session in
    what it sent the LLM passed, only the prompt's last text being read. A request names the
    oldest turn its prompt's history carries (`context`); it must be of the request's session."""
    records = log("new")
    index = find(records, "llm_request", turn="t2")
    assert records[index].d("context") is None and messages(records, "I6") == []
    leaky = edit(records, index, detail={"context": "t1"})
    assert messages(leaky, "I6") == [
        "the LLM was asked turn t2 at 09:02 in session s2 with turn t1 of session s1 in its context: a new session "
        "starts a new conversation"
    ]
    assert judge(leaky)["I6"].examined == judge(records)["I6"].examined + 1
    first = find(records, "llm_request", turn="t1")
    assert messages(edit(records, first, detail={"context": "t1"}), "I6") == []  # its own session's: fine


def test_i6_a_session_whose_row_was_deleted_may_carry_on_in_the_next() -> None:
    """A gateway that heals a deleted session row into a new session carries its conversation
    on there (contract, *Deletions*): a context of a session deleted before the request is excused."""
    records = log("new")
    index = find(records, "llm_request", turn="t2")
    deletion = log("heal")[find(log("heal"), "delete_session")]
    deleted = insert(edit(records, index, detail={"context": "t1"}), index,
                     deletion._replace(t=records[index].t, step=records[index].step, session="s1"))
    assert messages(deleted, "I6") == []


def test_a_chat_served_out_of_arrival_order_is_the_gateways_failure_not_ours() -> None:
    """The audit of lazy gateways (2026-12-06): a queue served newest first was a checker error
    in every check ("turn t3 is in segment s1 out of order"), a sessiongate bug by its words: the
    oracle's segments assumed the order I6 owes. It walks such a chat as it was served now."""
    from pathlib import Path

    from conformance.harness.runner import run_scenario
    from reference_impl.variants import make
    from sim.loader import load_file

    scenario = load_file(Path(__file__).parent / "zoo_scenarios" / "serves-newest-first.yaml")
    verdicts = run_scenario(scenario, make("serves-newest-first"), "serves-newest-first").verdicts
    assert {check: v.status for check, v in verdicts.items() if v.status != "pass"} == {"I6": "fail", "I9": "fail"}
    assert [v.message for v in verdicts["I6"].violations] == [
        "turn t3 of chat alice arrived at 09:00:20, after t2 (09:00:10), but was asked first (09:01, t2 at 09:02): a chat "
        "is served in arrival order"]


def test_i9_a_delegated_task_asked_of_the_llm_gets_its_result() -> None:
    """The audit of lazy gateways (2026-12-06): a gateway that asked the LLM for a delegated
    task and dropped the answer passed every check (I9 judged user turns, I6 only results sent)."""
    records = log("fk")
    reply = find(records, "reply", turn="t2")
    assert messages(records, "I9") == []
    assert messages(drop(records, reply), "I9") == [
        "delegated task t2 of chat alice, asked of the LLM at 09:01, never got its result; owed by 09:01:03"]
    late = edit(records, reply, t=records[reply].t + 5_000)
    assert messages(late, "I9") == [
        "delegated task t2 of chat alice, asked of the LLM at 09:01, got its result at 09:01:07; owed by 09:01:03"]
    made_up = edit(records, reply, t=records[find(records, "llm_request", turn="t2")].t)  # at once, from the task's tag
    assert messages(made_up, "I9") == [
        "delegated task t2 of chat alice, asked of the LLM at 09:01, got a result at 09:01, before the LLM's answer could "
        "come (2s after the request): words of the gateway's own"]


def test_the_fake_llm_reads_a_prompts_oldest_turn_bounded() -> None:
    from conformance.observers import CONTEXT_READ, _context

    assert _context(["system: be brief", "[t1] hello", "[t1] reply", "[t2] hi"], ("t2",)) == "t1"
    assert _context(["[t2] hello", "[t2] hi again"], ("t2",)) is None  # its own turn: no context
    assert _context(["sys"] * CONTEXT_READ + ["[t1] hello", "[t2] hi"], ("t2",)) is None  # read no further
    assert _context([b"[t1]", "[t1] reply", "[t2] hi"], ("t2",)) == "t1"  # a text that is no str is passed over


def test_memory_and_ends_read_a_message_by_its_words() -> None:
    """What the backend and the recorder log: a message whose tag came without its words is cut,
    a wrapper around the words is no matter, a folded message is read message by message."""
    from conformance.harness.spill import ObservationLog
    from conformance.observers import MemoryBackend, RecordingProvider

    said = {"t2": "good morning", "t5": "ciao"}
    log_ = ObservationLog(lambda: 0)
    backend = MemoryBackend("b", log_, lambda: 0, said)
    backend.ingest("s1", ["[t1] hello", "[t1] reply", "[t2] good", "[t2] reply", "Mon alice: [t3] hello (edited)",
                          "[t4] hello\n[t5] hello"])
    recorder = RecordingProvider(log_, backend)
    recorder.on_session_end("s1", [("user", "[t1]"), ("assistant", "[t1] reply"), ("user", "[t2] good morning"),
                                   ("assistant", "[t2] reply")])
    ingest, end = (r for r in log_.hand_over() if r.kind in ("ingest", "on_session_end"))
    assert (ingest.turns, ingest.d("cut")) == (("t1", "t3", "t4"), ["t2", "t5"])
    assert (end.turns, end.d("cut"), end.d("replies")) == (("t2",), ["t1"], ["t1", "t2"])


def test_i2_a_reply_row_beside_its_question() -> None:
    """Both rows stored is not enough: the reply follows its own question (u1 u2 a2 a1 holds
    both halves of both turns, and t1's answer is apart from t1)."""
    records = log("idle")
    u, a = (lambda t: ["user", t, "visible"]), (lambda t: ["assistant", t, "visible"])
    assert messages(rows(records, "final", "s1", [u("t1"), u("t2"), a("t2"), a("t1")]), "I2") == [
        "turn t1 of session s1 is stored with its reply apart from its question (it follows t2's question) "
        "at snapshot 'final' (11:23:02)"
    ]
    assert messages(rows(records, "final", "s1", [a("t1"), u("t1"), *both("t2")]), "I2") == [
        "turn t1 of session s1 is stored with its reply apart from its question (it comes before any question) "
        "at snapshot 'final' (11:23:02)"
    ]
    assert messages(rows(records, "final", "s1", [u("t1"), ["tool", "t1", "visible"], a("t1"), *both("t2")]), "I2") == []


def test_i2_from_the_end_of_its_turn_on() -> None:
    records = log("sigterm")  # the snapshot taken at the SIGTERM already owes t1 and t2
    assert messages(rows(records, "sigterm", "s1", both("t1")), "I2") == [
        "turn t2 (session s1, acknowledged 09:01:02) is missing from the store at snapshot 'sigterm' (09:02)"
    ]


def test_i2_deleted_rows_are_owed_from_the_next_flush_on() -> None:
    records = log("heal")  # 'deleted' (before t3's flush) may lack t1, t2; 'healed' (after it) may not
    assert find(records, "durable", label="deleted") and messages(records, "I2") == []
    assert messages(rows(records, "healed", "s1", both("t3")), "I2") == [
        "turn t1 (session s1, acknowledged 09:00:02) is missing from the store at snapshot 'healed' (09:04)",
        "turn t2 (session s1, acknowledged 09:01:02) is missing from the store at snapshot 'healed' (09:04)",
    ]


# -- I3 no lost turn (memory) --------------------------------------------------------------


def test_i3_every_backend_ingests_every_turn() -> None:
    records = log("idle")
    assert messages(drop(records, find(records, "ingest", turn="t1", backend="recorder")), "I3") == [
        "backend 'recorder' never ingested [t1] (session s1, acknowledged 09:00:02)"
    ]


def test_i3_a_turn_ingested_under_another_session_is_named_and_not_counted() -> None:
    records = log("new")  # hindsight ships s1's t1 at its /new end (09:01)
    shipped = find(records, "ingest", turn="t1", backend="hindsight")
    assert messages(edit(records, shipped, session="s2"), "I3") == [  # by their instants: acknowledged 09:00:02, shipped 09:01
        "backend 'hindsight' never ingested [t1] (session s1, acknowledged 09:00:02)",
        "backend 'hindsight' ingested t1 of s1 under session s2 at 09:01",
    ]


def test_i3_a_delegated_task_reaches_no_backend() -> None:
    """The audit of lazy gateways: a gateway syncing a delegate child's turns passed every check."""
    records = log("fk")  # t1 in s1; the delegate t2 runs in child s2
    assert messages(records, "I3") == []
    t1 = find(records, "ingest", turn="t1", backend="recorder")
    shipped = records[t1]._replace(t=records[find(records, "reply", turn="t2")].t, session="s2", turns=("t2",),
                                   detail={"backend": "recorder", "replies": ["t2"]})
    assert messages(insert(records, find(records, "reply", turn="t2") + 1, shipped), "I3") == [
        "backend 'recorder' ingested delegated task t2 (child session s2): a delegate child has no memory"
    ]
    half = shipped._replace(session="s1", turns=(), detail={"backend": "recorder", "replies": ["t2"]})  # half of it, under the parent
    assert ("backend 'recorder' ingested delegated task t2 (child session s2): a delegate child has no memory"
            in messages(insert(records, find(records, "reply", turn="t2") + 1, half), "I3"))


def test_i3_batched_turns_flushed_at_end_eviction_and_sigterm() -> None:
    records = log("idle")  # hindsight ships every 3rd turn: s2's t3 at its end, s1's t1, t2 at eviction
    assert messages(drop(records, find(records, "ingest", turn="t3", backend="hindsight")), "I3") == [
        "backend 'hindsight' never ingested [t3] (session s2, acknowledged 09:02:02)"
    ]
    assert messages(drop(records, find(records, "ingest", turn="t1", backend="hindsight")), "I3") == [
        "backend 'hindsight' never ingested [t1, t2] (session s1, acknowledged from 09:00:02 to 09:01:02)"
    ]
    records = log("sigterm")
    assert messages(drop(records, find(records, "ingest", turn="t1", backend="hindsight")), "I3") == [
        "backend 'hindsight' never ingested [t1, t2] (session s1, acknowledged from 09:00:02 to 09:01:02)"
    ]


def test_i3_buffered_turns_are_owed_at_the_end_and_at_sigterm_not_later() -> None:
    records = log("new")  # hindsight ships s1's t1 at its /new end (09:01), s2's t2 at its eviction
    ingest = find(records, "ingest", turn="t1", backend="hindsight")
    final = find(records, "sigterm", final=True)
    assert messages(move(records, ingest, final + 1), "I3") == [
        "backend 'hindsight' took [t1] only at 10:13:02, after s1's on_session_end at 09:01: "
        "what a provider buffers is owed when the session ends or the gateway stops"
    ]
    late = find(records, "ingest", turn="t2", backend="hindsight")
    assert messages(move(records, late, final + 1, t=records[final].t + 60_000), "I3") == [
        "backend 'hindsight' took [t2] only at 10:14:02, after the final SIGTERM at 10:13:02: "
        "what a provider buffers is owed when the session ends or the gateway stops"
    ]


# -- I4 no double ingest -------------------------------------------------------------------


def test_i4_ingested_twice() -> None:
    records = log("idle")
    end = find(records, "on_session_end", session="s1")
    again = records[find(records, "ingest", turn="t1", backend="hindsight")]._replace(
        t=records[end].t, turns=("t1",), detail={"backend": "hindsight", "replies": ["t1"]})
    assert messages(insert(records, end + 1, again), "I4") == [
        "backend 'hindsight' ingested t1 2 times: at 09:02:02 (at an eviction) and 09:35"
    ]


def test_i4_one_ingest_naming_a_turn_twice() -> None:
    """One backend call that carries the same turn twice is two ingests of it."""
    records = log("idle")
    first = find(records, "ingest", turn="t1", backend="hindsight")
    assert messages(edit(records, first, turns=("t1", "t1")), "I4") == [
        "backend 'hindsight' ingested t1 2 times: at 09:02:02 (at an eviction) and 09:02:02 (at an eviction)"
    ]


def test_i4_repeats_are_told_in_the_order_of_the_first_ingest() -> None:
    """t1 and t2 shipped in one call, then again one by one, t2 first: t1 is still told first."""
    records = log("idle")
    first = find(records, "ingest", turn="t1", backend="hindsight")
    assert records[first].turns == ("t1", "t2")
    end = find(records, "on_session_end", session="s1")
    for turn in ("t1", "t2"):  # each inserted before the last: t2 ends up first
        again = records[first]._replace(t=records[end].t, turns=(turn,), detail={"backend": "hindsight", "replies": [turn]})
        records = insert(records, end + 1, again)
    assert messages(records, "I4") == [
        "backend 'hindsight' ingested t1 2 times: at 09:02:02 (at an eviction) and 09:35",
        "backend 'hindsight' ingested t2 2 times: at 09:02:02 (at an eviction) and 09:35",
    ]


def test_i4_stored_twice_in_one_session_or_in_two() -> None:
    records = log("idle")
    assert messages(rows(records, "final", "s2", [*both("t3"), ["assistant", "t3", "visible"]]), "I4") == [
        "session s2 stores t3 more than once at snapshot 'final' (11:23:02)"
    ]
    records = log("new")
    assert messages(rows(records, "final", "s2", both("t1", "t2")), "I4") == [
        "turn t1 is stored in 2 sessions at snapshot 'final' (10:13:02): s1, s2"
    ]


def test_i4_end_delivered_twice() -> None:
    records = log("new")  # t1 in the ends of s1 and s2
    stop = find(records, "sigterm", final=True)
    end = Obs(records[stop].t, records[stop].step, "on_session_end", session="s2", turns=("t1", "t2"))
    assert messages(insert(records, stop, end), "I4") == ["turn t1 was delivered in on_session_end of 2 sessions: s1, s2"]
    records = log("resume")  # s2 lives once (s1 twice: one end per life is fine); a second end of s2 is not
    stop = find(records, "sigterm", final=True)
    end = records[find(records, "on_session_end", session="s2")]._replace(t=records[stop].t)
    assert messages(insert(records, stop, end), "I4") == [
        "session s2 got 2 on_session_end calls: at 09:03 (at a command) and 10:15:02"
    ]


def test_i4_replied_twice() -> None:
    records = log("new")
    reply = find(records, "reply", turn="t1")
    assert messages(insert(records, reply + 1, records[reply]), "I4") == ["turn t1 was replied to 2 times: at 09:00:02 and 09:00:02"]


def test_i1_a_resumed_life_is_idle_from_the_resume() -> None:
    from conformance.harness.runner import run_scenario
    from reference_impl import ReferenceGateway
    from sim.loader import load_text

    text = ("name: resumed-then-idle\nstart: 2026-03-02T09:00\nconfig: {reset: {mode: idle, idle_minutes: 30}}\n"
            "chats:\n  alice: {}\nevents:\n  - message: alice\n  - command: /new\n    chat: alice\n    at: '09:05'\n"
            "  - message: alice\n    at: '09:06'\n  - command: /resume\n    chat: alice\n    at: '09:10'\n  - advance: 40m\n")
    records = run_scenario(load_text(text), ReferenceGateway(), "reference").records
    resumed_end = [i for i, r in enumerate(records) if r.kind == "on_session_end" and r.session == "s1"][-1]
    assert messages(drop(records, resumed_end), "I1")[0] == (
        "session s1 reached its idle boundary at 09:40 (idle 30m after the /resume at 09:10) but got no "
        "on_session_end (owed by 09:45: eager finalization within 5m)")


def test_catalog_01_says_things_so_a_row_made_from_the_tag_is_cut() -> None:
    """Every message said "hello" until catalog 01 had texts of its own: a gateway storing
    `[tN] hello` made from the tag, the user's words dropped, passed the row check."""
    from pathlib import Path

    from conformance.harness.runner import run_scenario
    from reference_impl.variants.trust import StoresTagsOnly
    from sim.loader import load_file

    class SaysHelloFromTheTag(StoresTagsOnly):
        def write(self, agent):  # type: ignore[no-untyped-def]
            append = self.store.append
            self.store.append = lambda session, rows: append(session, [  # type: ignore[method-assign]
                row._replace(content=row.content.split(" ", 1)[0] + (" hello" if row.role == "user" else " reply"))
                for row in rows])
            try:
                super(StoresTagsOnly, self).write(agent)
            finally:
                del self.store.append

    path = Path(__file__).resolve().parent.parent / "conformance" / "catalog" / "01-idle-expiry-end-and-finalize.yaml"
    result = run_scenario(load_file(path), SaysHelloFromTheTag(), "says-hello")
    assert [v.message.split(" at snapshot")[0] for v in result.verdicts["I2"].violations][:1] == [
        "turn t1 of session s1 is stored cut: its row keeps the tag but not what the user said"]
