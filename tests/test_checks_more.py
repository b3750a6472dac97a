"""I5-I8 against hand-made logs that violate them, and what holds for every check: a failed
run is an error for each, and no check looks at the reference gateway."""

from __future__ import annotations

import ast
from pathlib import Path

from check_logs import drop, edit, find, insert, log, messages, move, rows, snapshots

from conformance import checks
from conformance.checks import judge
from conformance.checks.model import RunModel
from conformance.observations import Obs
from sim.clock import format_duration


def both(*turns: str, visibility: str = "visible") -> list[list[str]]:
    return [[role, turn, visibility] for turn in turns for role in ("user", "assistant")]


def relabel(records: tuple[Obs, ...] | list[Obs], turns: tuple[str, ...], session: str) -> list[Obs]:
    """The log of a gateway that ran these turns in another session."""
    out = list(records)
    for i, r in enumerate(out):
        if r.kind in ("llm_request", "reply", "sync_turn", "ingest") and r.turns and r.turns[0] in turns:
            out = edit(out, i, session=session)
    return out


# -- I5 ordering ---------------------------------------------------------------------------


def test_i5_end_after_every_sync_turn() -> None:
    records = log("new")
    sync = find(records, "sync_turn", turn="t1")
    assert messages(move(records, sync, find(records, "on_session_end", session="s1") + 1), "I5") == [
        "sync_turn for t1 of s1 came at 09:01, after s1's on_session_end at 09:01"
    ]


def test_i5_end_before_any_hook_of_the_successor() -> None:
    records = log("lazy")  # s1 ends when t2 arrives, before s2's switch, reset and turn
    late = move(records, find(records, "on_session_finalize", session="s1"), find(records, "llm_request", turn="t2"))
    late = move(late, find(late, "on_session_end", session="s1"), find(late, "on_session_finalize", session="s1"))
    assert messages(late, "I5") == ["on_session_switch of successor session s2 at 10:00 came before s1's on_session_end at 10:00"]
    no_switch = drop(late, find(late, "on_session_switch"))
    assert messages(no_switch, "I5") == ["on_session_reset of successor session s2 at 10:00 came before s1's on_session_end at 10:00"]


def test_i5_successor_of_a_resumed_life_is_the_next_life() -> None:
    """Three /resume queued behind one turn: the switch into s1's second life (between the
    second /resume and s2's switch into its own second life) is not a hook of s2's successor;
    the switch into s1's third life, moved before s2's second end, is."""
    records = log("resume-back-twice")
    assert messages(records, "I5") == []
    switch = find(records, "on_session_switch", session="s1", nth=1)
    early = move(records, switch, find(records, "on_session_end", session="s2", nth=1))
    assert messages(early, "I5") == ["on_session_switch of successor session s1 at 09:08 came before s2's on_session_end at 09:08"]


def test_i5_switch_strictly_after_the_end() -> None:
    records = log("new")
    end = find(records, "on_session_end", session="s1")
    switch = Obs(records[end].t, records[end].step, "on_session_switch", session="s9", detail={"previous": "s1"})
    assert messages(insert(records, end, switch), "I5") == ["on_session_switch s1 → s9 at 09:01 came before s1's on_session_end at 09:01"]


def test_i5_a_reset_names_the_session_it_begins() -> None:
    """`on_session_reset(new_id)`: naming the session that ended (after its end, or before it,
    once it had answered a turn) tells a plugin the wrong conversation was reset."""
    records = log("lazy")  # s1 ends when t2 arrives, then s2's switch, reset and turn
    assert messages(records, "I5") == []
    reset = find(records, "on_session_reset")
    assert messages(edit(records, reset, session="s1"), "I5") == [
        "on_session_reset at 10:00 named s1, which had ended at 10:00 (its on_session_end): a reset names the session it begins"]
    early = move(edit(records, reset, session="s1"), reset, find(records, "on_session_end", session="s1"))
    assert messages(early, "I5") == [
        "on_session_reset at 10:00 named s1, which had answered a turn at 09:00:02: a reset names the session it begins"]


def test_i5_a_switch_names_the_session_the_chat_left() -> None:
    """`on_session_switch(old, new)` into a chat's next session names the session the chat
    left, the one its previous segment had (the sixth audit of lazy gateways, 2026-12-06: a
    switch naming the route's `previous` read before it was updated, none at the first
    rotation, passed everything; zoo `switch-names-stale-previous`)."""
    records = log("backlog-at-final-stop")  # s1..s4: each ends (idle) as the next turn starts
    assert messages(records, "I5") == []
    into_s2, into_s3 = find(records, "on_session_switch", session="s2"), find(records, "on_session_switch", session="s3")
    assert messages(edit(records, into_s2, detail={"previous": None}), "I5") == [
        "on_session_switch into s2 at 09:20 named no previous session; alice's previous session s1 ended at 09:05 (idle)"]
    assert messages(edit(records, into_s3, detail={"previous": "s1"}), "I5") == [
        "on_session_switch into s3 at 09:40 named s1; alice's previous session s2 ended at 09:11 (idle)"]
    back = log("resume")  # /resume ends s2 and goes back to s1: the switch names s2, the session left
    assert messages(back, "I5") == []
    assert messages(edit(back, find(back, "on_session_switch", session="s1"), detail={"previous": None}), "I5") == [
        "on_session_switch into s1 at 09:03 named no previous session; alice's previous session s2 ended at 09:03 (/resume)"]
    # Not judged: a session with no turn between (Hermes mints an empty successor at /new), and
    # the chat's first session, which has no session before it.
    assert messages(edit(records, into_s3, detail={"previous": "s9"}), "I5") == []
    first = find(records, "llm_request", turn="t1")
    switch = Obs(records[first].t, records[first].step, "on_session_switch", session="s1", detail={"previous": None})
    assert messages(insert(records, first, switch), "I5") == []


# -- I6 reset policy -----------------------------------------------------------------------


def test_i6_a_turn_asked_ahead_of_the_turn_a_rotation_waited_for() -> None:
    """Catalog 88: the /new waits behind t1, so t2, which arrived after it, opens s2 once t1 is
    done. A gateway that asked t2 in s2 at once (as Hermes's /new does, interrupting t1) put
    the oracle's s2 before s1's end: an OracleError in every check, the suite blaming itself.
    Its segment now starts at s1's boundary, and I6 names the rotation mid-turn."""
    from conformance.harness.runner import run_scenario
    from conformance.harness.suite import catalog_paths
    from reference_impl import ReferenceGateway
    from sim.loader import load_file

    path = next(p for p in catalog_paths() if p.stem == "88-session-begins-at-arrival")
    records = run_scenario(load_file(path), ReferenceGateway(), "reference", check=False).records
    assert messages(records, "I6") == []
    ask, arrived = find(records, "llm_request", turn="t2"), find(records, "message", turn="t2")
    early = edit(move(records, ask, arrived + 1), arrived + 1, t=records[arrived].t)
    verdicts = judge(early)
    assert all(v.status != "checker-error" for v in verdicts.values())
    assert messages(early, "I6") == [
        "turn t2 was asked at 03:59 in s2, before s1 reached its boundary at 04:00 (daily): the chat rotated mid-turn, "
        "ahead of the turn in flight that the rotation waited for"]


def test_i6_new_session_iff_past_a_boundary() -> None:
    assert messages(relabel(log("sigterm"), ("t3",), "s9"), "I6") == [
        "turn t3 arrived at 09:04, before any boundary of s1 (none reached): it belongs in s1 but landed in s9"
    ]
    assert messages(relabel(log("lazy"), ("t2",), "s1"), "I6") == [
        "turn t2 arrived at 10:00, past s1's idle boundary at 09:30 (idle 30m after the last user message at 09:00): "
        "it should open a new session but landed in s1"
    ]


def test_i6_never_mid_turn() -> None:
    records = log("inflight")  # t1 runs 09:00-09:05 past its 2m idle boundary
    assert messages(edit(records, find(records, "reply", turn="t1"), session="s2"), "I6")[0] == (
        "turn t1 started in s1 but its reply landed in s2 at 09:05 (a reset mid-turn)"
    )
    reply = find(records, "reply", turn="t1")
    early = move(records, find(records, "on_session_end", session="s1"), reply, t=records[reply].t - 120_000)
    assert messages(early, "I6") == [
        "session s1 ended at 09:03 while turn t1 was in flight (asked 09:00, answered 09:05): a reset mid-turn"
    ]


def test_i6_commands_and_internal_traffic_keep_the_idle_clock() -> None:
    records = log("quiet")  # /stop at 09:20, a delegate turn at 09:25: s1 still expires at 09:30
    assert messages(relabel(records, ("t3",), "s1"), "I6") == [
        "turn t3 arrived at 09:40, past s1's idle boundary at 09:30 (idle 30m after the last user message at 09:00): "
        "it should open a new session but landed in s1"
    ]


def test_i6_resume_and_reuse() -> None:
    assert messages(relabel(log("resume"), ("t3",), "s3"), "I6") == [
        "after /resume at 09:03 turn t3 landed in s3, not the resumed session s1"
    ]
    assert messages(relabel(log("idle"), ("t3",), "s1"), "I6") == [
        "session s1 is reused: turn t3 of chat bob landed in a session that chat alice already used"
    ]


# -- I7 bounded resources ------------------------------------------------------------------


def test_i7_cache_cap() -> None:
    records = snapshots(log("idle"))
    sample = find(records, "resources", cached=[["s2", True]])  # s1 evicted (a flag is as of the record naming it)
    assert messages(edit(records, sample, detail={"cached": [["s1", False], ["s2", False]]}), "I7") == [
        "the agent cache held 2 idle agents at 09:02:02 (cap 1): s1, s2"
    ]


def test_i7_none_session_reaped_after_the_ttl() -> None:
    records = snapshots(log("reaped"))  # a gateway that keeps s1's agent from 09:00:02 until t2 at 12:00
    kept = drop(records, find(records, "note", what="evict"), find(records, "resources", cached=[], nth=1))
    assert messages(kept, "I7") == [
        "the agent of session s1 (reset policy none) stayed cached until 12:00, idle since 09:00:02 "
        "(idle TTL 1h, sweep every 5m: due out by 10:05:02)"
    ]


def test_i7_every_idle_agent_reaped_after_the_ttl() -> None:
    """The fifth audit of lazy gateways (2026-12-06): a sweep that reaped only the agents of
    `none` sessions passed the catalog and fuzz, I7 holding only those to the TTL. A lazy chat's
    session past its boundary is ended only at the chat's next message, so it is as never-ending:
    every idle agent is held to the TTL, or to its session's boundary if later."""
    records = snapshots(log("lazy-reaped"))  # the reference reaps s1's agent at 09:15
    assert messages(records, "I7") == []
    kept = drop(records, find(records, "note", session="s1", what="evict"), find(records, "resources", cached=[], nth=1))
    assert messages(kept, "I7") == [
        "the agent of session s1 (reset policy idle) stayed cached until 12:00, idle since 09:00:02 "
        "(idle TTL 10m, its session's boundary at 09:30, sweep every 5m: due out by 09:35)"
    ]


def test_i7_an_agent_may_be_kept_for_its_sessions_end() -> None:
    """A gateway may keep an idle agent past the TTL until its session's boundary, plus the
    declared latency (Hermes's idle sweep defers to the expiry watcher so that the end finds the
    live transcript: gateway/run.py:`_sweep_idle_cached_agents`), never past it and a sweep."""
    records = snapshots(log("eager-reaped"))  # reaped at 09:15, s1 ended by the 5m watcher at 09:35
    assert messages(records, "I7") == []
    records = drop(records, find(records, "note", session="s1", what="evict"))
    sample, end = find(records, "resources", cached=[], nth=1), find(records, "on_session_finalize", session="s1")
    kept_for_end = move(records, sample, end + 1, t=records[end].t)
    assert messages(kept_for_end, "I7") == []
    late = records[end].t + 6 * 60_000  # 09:41, a minute past the boundary, the latency and a sweep
    assert messages(move(records, sample, end + 1, t=late), "I7") == [
        "the agent of session s1 (reset policy idle) stayed cached until 09:41, idle since 09:00:02 "
        "(idle TTL 10m, its session's boundary at 09:30 and latency 5m, sweep every 5m: due out by 09:40)"
    ]


def test_i7_a_declared_sweep_period_cannot_outwait_quiescence() -> None:
    """A profile that claims to sweep once a year still owes a `none` session's idle agent out by
    the TTL plus what quiescence waits (I9 caps its bound the same way): the gateway that kept
    s1 for three hours passed with it before."""
    records = snapshots(log("reaped"))
    kept = drop(records, find(records, "note", what="evict"), find(records, "resources", cached=[], nth=1))
    yearly = edit(kept, 0, detail={"profile": {**kept[0].d("profile"), "sweep_interval": 365 * 86_400_000}})
    horizon = format_duration(RunModel.build(yearly).config.horizon())
    [message] = messages(yearly, "I7")
    assert message.startswith("the agent of session s1 (reset policy none) stayed cached until 12:00, idle since 09:00:02 "
                              f"(idle TTL 1h, sweep every {horizon}: due out by ")
    assert messages(edit(records, 0, detail={"profile": yearly[0].d("profile")}), "I7") == []


def test_i7_the_run_waits_out_the_sweep_it_excuses() -> None:
    """Quiescence runs until an agent idle since the last turn is due out of the cache (the TTL
    plus the declared sweep, capped): before, it stopped at the TTL plus a minute and a turn, so
    an agent idle since the last turn was never judged, and declaring a sweep of a year took the
    catalog's catches of a gateway that never reaps a `none` agent from 30 to 3."""
    import dataclasses

    from conformance.harness.runner import run_scenario
    from reference_impl import ReferenceGateway
    from reference_impl.variants.eviction import IdleSweepNeverReapsNone
    from sim.loader import load_text

    class Yearly(IdleSweepNeverReapsNone):
        def profile(self, config):  # type: ignore[no-untyped-def]
            return dataclasses.replace(super().profile(config), sweep_interval=365 * 86_400_000)

    scenario = load_text("name: last-turn-idle\nstart: 2026-03-02T09:00\nconfig: {reset: {mode: none}, watcher_interval: lazy}\n"
                         "chats: {alice: {}}\nevents:\n  - message: alice\n", "<last-turn-idle>")
    for gateway in (IdleSweepNeverReapsNone(), Yearly()):
        [violation] = run_scenario(scenario, gateway, "never-reaps").verdicts["I7"].violations
        assert violation.message.startswith("the agent of session s1 (reset policy none) stayed cached until ")
    assert run_scenario(scenario, ReferenceGateway(), "reference").verdicts["I7"].status == "pass"


def test_i7_nothing_left_after_shutdown() -> None:
    records = snapshots(log("sigterm"))
    assert messages(edit(records, find(records, "resources", running=0), detail={"running": 2}), "I7") == [
        "after the sigterm at 09:02 the gateway still held 2 running tasks"
    ]
    records = snapshots(log("reaped"))
    final = find(records, "resources", running=0, nth=-1)
    assert messages(edit(records, final, detail={"cached": [["s1", False]], "running": 1}), "I7")[-1] == (
        "after the final sigterm at 13:11:02 the gateway still held 1 agent (s1) and 1 running task"
    )
    threads = Obs(records[final].t, records[final].step, "threads", detail={"running": 2})
    assert messages(insert(records, final + 1, threads), "I7") == [
        "after the final sigterm at 13:11:02 2 threads the gateway started were still running"
    ]
    left = Obs(records[final].t, records[final].step, "processes", detail={"running": 1, "names": ["sleep"]})
    assert messages(insert(records, final + 1, left), "I7") == [
        "after the final sigterm at 13:11:02 1 process (sleep) the gateway started was still running"
    ]
    assert messages(insert(records, final + 1, left._replace(detail={"running": 2, "names": ["mcp", "sleep"]})),
                    "I7") == ["after the final sigterm at 13:11:02 2 processes (mcp, sleep) the gateway started were "
                              "still running"]


def test_i7_nothing_held_after_a_crash() -> None:
    """A SIGKILL leaves nothing: an agent or task still listed after `crash()` is the dead
    process's memory kept across it (crash-keeps-memory passed 82 of 83 catalog scenarios)."""
    records = snapshots(log("crash-in-flight"))
    after = find(records, "resources", running=0)
    assert after > find(records, "crash")
    assert messages(records, "I7") == []
    assert messages(edit(records, after, detail={"cached": [["s1", True]], "running": 1}), "I7") == [
        "after the crash at 09:03 the gateway still held 1 agent (s1) and 1 running task"
    ]
    # No sample after the crash: nothing changed, so what the last one before it listed is still held.
    assert messages(drop(records, after), "I7") == [
        "after the crash at 09:03 the gateway still held 1 agent (s1) and 1 running task"
    ]


def test_i7_a_stopped_gateway_does_not_act() -> None:
    """By the log, not the gateway's word: a call of its own after a crash (crash() included:
    a SIGKILL runs no code), or after a SIGTERM's own step, until the restart."""
    records = log("crash-in-flight")
    restart, t = find(records, "restart"), records[find(records, "restart")].t - 60_000
    down = move(records, find(records, "on_session_end"), restart, step="2.1", t=t)
    down = move(down, find(down, "on_session_finalize"), find(down, "restart"), step="2.1", t=t)
    assert messages(down, "I7")[-1] == (
        "after the crash at 09:03 the gateway still acted while down: on_session_end (s1) at 09:19, "
        "on_session_finalize (s1) at 09:19"
    )
    crash = find(records, "crash")
    ingest = Obs(records[crash].t, records[crash].step, "ingest", session="s1", detail={"backend": "recorder", "replies": []})
    assert messages(insert(records, crash + 1, ingest), "I7") == [
        "after the crash at 09:03 the gateway still acted while down: ingest (s1) at 09:03"
    ]
    records = log("sigterm")
    assert messages(records, "I7") == []  # its flush is in the SIGTERM's own step
    flush = find(records, "ingest", session="s1", nth=2)
    assert records[flush].step == records[find(records, "sigterm")].step
    assert messages(edit(records, flush, step="3.1"), "I7") == [
        "after the sigterm at 09:02 returned the gateway still acted while down: ingest (s1) at 09:02"
    ]


def test_i7_what_a_stopped_gateway_did_is_found_in_parts_too() -> None:
    """A log judged in parts finds each part's calls while down (they name sessions, so the
    shared model, which I7 judges, does not hold them)."""
    from conformance.checks import parts
    from conformance.harness.runner import run_scenario
    from reference_impl.registry import reference
    from sim.loader import load_file

    scenario = load_file(Path(__file__).parent / "zoo_scenarios" / "crash-keeps-memory.yaml")
    records = run_scenario(scenario, reference("crash-keeps-memory"), check=False).records
    assert parts.split_log(records, 1) is not None  # alice and bob: two parts
    whole, parted = judge(records, in_parts=False)["I7"], judge(records, in_parts=True)["I7"]
    acted = [v.message for v in whole.violations if "acted while down" in v.message]
    assert acted == ["after the crash at 09:01 the gateway still acted while down: on_session_end (s1) at 09:03, "
                     "on_session_finalize (s1) at 09:03, on_session_end (s2) at 09:03 and 1 more"]
    assert sorted(v.message for v in parted.violations) == sorted(v.message for v in whole.violations)
    assert judge(run_scenario(scenario, reference(), check=False).records, in_parts=True)["I7"].status == "pass"


# -- I8 heal -------------------------------------------------------------------------------


def test_i8_recreated_at_the_next_flush() -> None:
    records = log("heal")
    gone = rows(rows(records, "healed", "s1", None), "final", "s1", None)
    assert messages(gone, "I8") == [
        "session s1's row was deleted at 09:02 and never recreated: turn t3 (09:03:02) and every later turn were dropped"
    ]
    reply = find(records, "reply", turn="t3")
    late = move(records, reply, find(records, "checkpoint", name="healed"), t=records[reply].t + 30_000)
    assert messages(late, "I8") == [
        "session s1's row was deleted at 09:02 and not recreated at the next flush: turn t3 (asked 09:03) got its "
        "answer at 09:03:02 but was acknowledged only at 09:03:32"
    ]


def test_i8_with_the_full_transcript_under_the_same_id() -> None:
    records = log("heal")
    tail = rows(rows(records, "healed", "s1", both("t3")), "final", "s1", both("t3") + both("t4", visibility="hidden"))
    assert messages(tail, "I8") == [
        "session s1's row was deleted at 09:02 and recreated without [t1, t2]: the final store holds [t3, t4]"
    ]
    assert messages(relabel(records, ("t3", "t4"), "s9"), "I8") == [
        "session s1's row was deleted at 09:02 and turn t3 then landed in s9 instead of the recreated s1"
    ]


def test_i8_foreign_key_failure_with_the_row_present_never_replays() -> None:
    records = log("fk")
    assert messages(rows(records, "final", "s2", both("t2", "t2", "t3")), "I8") == [
        "delegate child s2 stores [t2] twice after its parent s1 was deleted "
        "(a foreign-key failure with the child's row present must not replay)"
    ]


def test_i8_child_recreated_without_its_deleted_parent() -> None:
    records = log("orphan")
    assert messages(rows(records, "recreated", "s2", both("t2", "t3"), parent="s1"), "I8") == [
        "delegate child s2 was recreated pointing at deleted parent s1"
    ]
    stuck = drop(records, find(records, "reply", turn="t3"))
    assert messages(stuck, "I8") == [
        "session s2's row was deleted at 09:02 and not recreated at the next flush: turn t3 (asked 09:03) was never answered"
    ]


def test_i8_a_child_healed_after_its_parent_names_it() -> None:
    """The seventh audit of lazy gateways: a child's parent link was judged only in chats
    without a deletion, so a heal writing the child back without its (stored) parent passed."""
    records = log("child-healed-after-parent")
    assert messages(records, "I8") == []
    final = find(records, "durable", label="final")
    assert records[final].d("sessions")["s2"]["parent"] == "s1"
    sessions = records[final].d("sessions")
    parentless = edit(records, final, detail={"sessions": {**sessions, "s2": {**sessions["s2"], "parent": None}}})
    assert messages(parentless, "I8") == [
        "delegate child s2 (task t2 of chat alice at 09:01, while its session was s1) is stored naming no parent: "
        "a delegate child's row names the session that spawned it"]


def test_i8_owed_before_the_agent_lets_go() -> None:
    """A row deleted under a live agent is owed back when that agent leaves the cache, not
    only at the next write (seed 003): the laziest gateway, healing at the next write alone,
    keeps only t3. Before this was excused as 'its agent left the cache before the next write'."""
    records = log("evicted-before-next-write")
    assert messages(records, "I8") == [] and messages(records, "I2") == []
    tail = rows(records, "final", "s1", both("t3"))
    assert messages(tail, "I8") == ["session s1's row was deleted at 09:01 and recreated without [t1]: the final store holds [t3]"]
    assert messages(tail, "I2") == [
        "turn t1 (session s1, acknowledged 09:00:02) is missing from the store at snapshot 'final' (10:44:02)"]


def test_i8_owed_at_a_sigterm() -> None:
    records = log("deleted-then-stopped")
    gone = rows(rows(records, "sigterm", "s1", None), "final", "s1", None)
    assert messages(gone, "I8") == [
        "session s1's row was deleted at 09:01 and never recreated: its agent held [t1] and the gateway stopped at "
        "09:02 without writing them back"
    ]
    assert messages(gone, "I2") == [
        "turn t1 (session s1, acknowledged 09:00:02) is missing from the store at snapshot 'sigterm' (09:02)"]


def test_i8_a_crash_before_the_write_back_excuses_the_loss() -> None:
    """What a crash took before any write-back is excused; had it been a SIGTERM, it is owed."""
    records = log("deleted-then-crash")
    assert messages(records, "I8") == [] and messages(records, "I2") == [] and messages(records, "I1") == []
    stopped = edit(records, find(records, "crash"), kind="sigterm")
    assert messages(stopped, "I8") == [
        "session s1's row was deleted at 09:01 and recreated without [t1]: the final store holds [t2]"]


def test_i8_a_deleted_session_comes_back_only_by_a_turn_of_its_own() -> None:
    """After a restart no agent holds s1 when its row is deleted: a child's write that puts s1
    back (to keep its parent key) is named, with the child's turn as evidence."""
    records = log("unheld-parent")
    assert messages(records, "I8") == []
    back = rows(rows(records, "after-child", "s1", []), "after-child", "s3", both("t3"), parent="s1")
    assert messages(back, "I8") == [
        "session s1's row was deleted at 09:04 while no agent held it and is back at snapshot 'after-child' (09:06) "
        "with no turn of its own since (delegate child s3, pointing at it, wrote t3 at 09:05:02): a deleted session "
        "comes back only by its own heal or a new turn in it"
    ]


def test_i8_a_resume_into_a_deleted_session_is_its_own_comeback() -> None:
    """s1's row, deleted after its end, may come back when /resume switches the chat into it
    (a gateway may write the row there); without that switch it is a resurrection."""
    records = log("resume-deleted")
    assert messages(records, "I8") == []
    back = rows(records, "resumed", "s1", [])
    assert messages(back, "I8") == []
    assert messages(drop(back, find(back, "on_session_switch", session="s1")), "I8") == [
        "session s1's row was deleted at 09:02 while no agent held it and is back at snapshot 'resumed' (09:05) "
        "with no turn of its own since: a deleted session comes back only by its own heal or a new turn in it"
    ]


def test_i3_a_slow_turn_merged_into_a_later_call_lands_late() -> None:
    """The slow backend keeps a turn's `ready` from its first call: t1's lands at 09:01:32,
    before s1's end. A gateway that makes t1's call again with t2 merged in (due when t2's is,
    09:02:02) lands t1 after the end (fifth audit, `retry-merges-calls`)."""
    records = log("slow-two-calls")
    assert messages(records, "I3") == []
    hindsight = {"backend": "hindsight"}
    merged = edit(records, find(records, "ingest_busy", turn="t1", nth=1, **hindsight),
                  turns=("t1", "t2"), detail={"replies": ["t1", "t2"], "ready": records[find(
                      records, "ingest_busy", turn="t2", **hindsight)].d("ready")})
    merged = edit(merged, find(merged, "ingest", turn="t2", **hindsight), turns=("t1", "t2"),
                  detail={"replies": ["t1", "t2"]})
    merged = drop(merged, find(merged, "ingest", turn="t1", **hindsight))
    assert messages(merged, "I3") == [
        "backend 'hindsight' took [t1] only at 09:02:02, after s1's on_session_end at 09:01:45 (the slow backend said "
        "its call made by then would land at 09:01:32): what a provider buffers is owed when the session ends or the "
        "gateway stops"
    ]


def test_i1_a_session_with_no_turn_is_finalized_at_most_once() -> None:
    """A gateway that mints the successor at /new (Hermes, OpenClaw) has a session with no turn,
    in no segment: finalizing it once is its choice, twice is not (Hermes's s2 in catalog 93,
    before the adapter named the right /resume target, was finalized twice unjudged)."""
    records = log("new")
    at = find(records, "on_session_finalize", session="s1") + 1
    fin = records[at - 1]._replace(session="s9")
    once = insert(records, at, fin)
    assert messages(once, "I1") == []
    assert messages(insert(once, at + 1, fin), "I1") == [
        "session s9, which had no turn, got 2 on_session_finalize calls: at 09:01 (at a command) and 09:01 (at a command)"]


def test_i1_and_i5_a_delegate_child_gets_no_finalize_and_no_reset() -> None:
    """A subagent's child has no boundary of its own: neither finalized with its parent (zoo
    `finalizes-delegate-child`) nor begun by a reset (`resets-delegate-child`): the sixth audit
    of lazy gateways (2026-12-06), whose two variants passed everything."""
    records = log("quiet")  # the delegate t2 runs in s2, a child of s1; s1 expires, t3 opens s3
    assert messages(records, "I1") == [] and messages(records, "I5") == []
    fin = find(records, "on_session_finalize", session="s1")
    child_fin = records[fin]._replace(session="s2")
    assert messages(insert(records, fin + 1, child_fin), "I1") == [
        "delegate child session s2 got on_session_finalize at 09:35; a child reaches no boundary of its own"]
    asked = find(records, "llm_request", session="s2")
    reset = Obs(records[asked].t, records[asked].step, "on_session_reset", session="s2")
    assert messages(insert(records, asked, reset), "I5") == [
        "on_session_reset at 09:25 named s2, a delegate child: a reset names the chat session it begins"]


def test_i8_a_reopened_session_is_live_from_its_reopening() -> None:
    """A /resume past the boundary ends s1's first life and reopens it (the end logged after the
    command): s1 is live again when its row is deleted, so its turns are owed back. Dense fuzz
    seed 30: a session was taken for ended there, which excused the heal."""
    records = log("reopened-deleted")
    assert messages(records, "I8") == []
    assert messages(rows(records, "final", "s1", both("t2")), "I8") == [
        "session s1's row was deleted at 09:06:10 and recreated without [t1]: the final store holds [t2]"]


def test_i8_an_ended_session_deleted_stays_deleted() -> None:
    """Catalog 65: s1's agent, kept cached past the session's end (the samples say no agent
    left), writes s1 back at the SIGTERM after its row was deleted: what it owed was written at
    the end, so that is a resurrection (fifth audit, `end-keeps-agent`). A lock between the
    end and the deletion may have kept a refused write-back for a retry: then it is not."""
    records = log("ended-deleted")
    assert messages(records, "I8") == []
    kept = drop(records, find(records, "resources", drop=["s1"]))
    assert messages(kept, "I8") == []
    back = rows(kept, "sigterm", "s1", both("t1"))
    assert messages(back, "I8") == [
        "session s1's row was deleted at 09:02 after it had ended and is back at snapshot 'sigterm' (09:03) with no "
        "turn of its own since: an ended session's deleted row is no longer the gateway's to write; it comes back "
        "only by a new turn in it"
    ]
    end = records[find(records, "on_session_end", session="s1")]
    lock = Obs(end.t, end.step, "db_locked", None, None, (), {"until": end.t + 30_000})
    assert messages(insert(back, find(back, "delete_session"), lock), "I8") == []


def test_i8_a_write_back_a_lock_delayed_is_no_resurrection() -> None:
    """s1's agent left the cache while the store was locked: its write-back may still be
    pending in memory, so s1 coming back after a later deletion is its own heal. Without the
    lock the same log is a resurrection."""
    records = log("locked-release")
    assert messages(records, "I8") == [] and messages(records, "I2") == []
    assert messages(drop(records, find(records, "db_locked")), "I8") == [
        "session s1's row was deleted at 09:15 while no agent held it and is back at snapshot 'after-lock' (09:40) "
        "with no turn of its own since: a deleted session comes back only by its own heal or a new turn in it"
    ]


def test_i8_a_deleted_transcript_never_reappears() -> None:
    """s1's agent was evicted before its row was deleted: t1 is gone for good. A new turn
    recreates s1, and a later deletion under its live agent is healed, but never with t1."""
    records = log("lost-then-live")
    assert messages(records, "I8") == []
    assert messages(rows(records, "final", "s1", both("t1", "t3", "t4")), "I8") == [
        "session s1's row was deleted at 09:02 while no agent held it, and its deleted transcript reappeared: "
        "snapshot 'final' (10:46:02) holds [t1] again"
    ]


def test_i8_replayed_history_keeps_its_visibility() -> None:
    records = log("heal")
    hidden = both("t1", visibility="hidden") + both("t2", "t3") + both("t4", visibility="hidden")
    assert messages(rows(records, "final", "s1", hidden), "I8") == [
        "user row of t1 in s1 is stored hidden; it was not muted and must stay visible"
    ]
    assert messages(rows(records, "final", "s1", both("t1", "t2", "t3", "t4")), "I8") == [
        "user row of t4 in s1 is stored visible; it was a muted notification reply and must stay hidden"
    ]


# -- every check -----------------------------------------------------------------------------


def test_a_failed_run_is_an_error_for_every_check() -> None:
    records = list(log("idle"))
    cut = find(records, "advance")
    error = Obs(records[cut].t, 4, "error", detail={"failure": "error", "event": "advance", "message": "RuntimeError: boom"})
    verdicts = judge([*records[:cut], error])
    assert {v.status for v in verdicts.values()} == {"error"}
    assert verdicts["I1"].reason == "gateway error at step 4 (advance): RuntimeError: boom"


def test_a_log_without_a_final_state_skips_i8() -> None:
    records = log("idle")
    verdict = judge(drop(records, find(records, "durable", label="final")))["I8"]
    assert (verdict.status, verdict.reason) == ("skip", "no final durable state in the log")


def test_no_check_imports_the_reference_gateway() -> None:
    for path in sorted(Path(checks.__file__).parent.glob("*.py")):
        tree = ast.parse(path.read_text())
        names = [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
        names += [n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
        assert not [n for n in names if n.startswith("reference_impl")], path.name


def test_a_boundary_a_reset_made_names_reset_not_new() -> None:
    """The messages name the command typed: a `/reset` the gateway ignored is `(/reset)`."""
    from conformance.harness.runner import run_scenario
    from conformance.harness.suite import catalog_paths
    from reference_impl.variants import make
    from sim.loader import load_file

    path = next(p for p in catalog_paths() if p.stem == "89-reset-ends-the-session")
    result = run_scenario(load_file(path), make("reset-command-ignored"), "reference:reset-command-ignored")
    first = result.verdicts["I1"].violations[0].message
    assert first.startswith("session s1 reached its new boundary at 09:05 (/reset) but got no on_session_end"), first
    assert "(/new)" not in " ".join(v.message for c in ("I1", "I6") for v in result.verdicts[c].violations)


def test_a_turn_that_waited_past_the_boundary_is_worded_as_waiting() -> None:
    """A message that arrived before the boundary, behind the chat's turn and a `/new`, and was
    started ahead of that `/new` (the eighth audit's `due_after_queue`) lands in the session that
    ended: I6 said it "arrived at 03:59, past s1's daily boundary at 04:00", an arrival before
    the boundary worded as after it. It waited until past it."""
    from conformance.harness.runner import run_scenario
    from conformance.harness.suite import catalog_paths
    from reference_impl.gateway import ReferenceGateway
    from sim.loader import load_file

    class MessagesFirst(ReferenceGateway):
        def drain_queue(self, key: str) -> None:
            queue = self.volatile.queues.get(key)
            if queue:
                ordered = sorted(queue, key=lambda item: item[0] != "message")  # the waiting messages first
                queue.clear()
                queue.extend(ordered)
            super().drain_queue(key)

    [path] = [p for p in catalog_paths() if p.stem == "88-session-begins-at-arrival"]
    result = run_scenario(load_file(path), MessagesFirst(), "messages-first")
    assert [v.message.split(" (")[0] for v in result.verdicts["I6"].violations][:1] == [
        "turn t2 arrived at 03:59 and waited until past s1's daily boundary at 04:00"]
