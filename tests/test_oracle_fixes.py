"""Oracle fixes for any gateway, found reading Hermes's failures (#20): each case a gateway that
conforms where the oracle used to raise a false alarm, or a log the oracle used to excuse."""

from __future__ import annotations

from check_logs import drop, edit, find, insert, log, messages

from conformance.checks import judge
from conformance.harness.runner import run_scenario
from conformance.harness.suite import catalog_paths
from reference_impl.gateway import ReferenceGateway
from reference_impl.policy import chat_key
from sim.loader import load_file, load_text


class InterruptsOnNew(ReferenceGateway):
    """As Hermes does (gateway/run.py:_interrupt_and_clear_session): /new during a turn drops
    that turn, unanswered, and resets at once."""

    def deliver_command(self, chat, command):  # type: ignore[no-untyped-def]
        key = chat_key(chat)
        if command == "/new" and key in self.volatile.busy_chats:
            self.stop_turn(key)
        super().deliver_command(chat, command)


def test_a_turn_dropped_under_a_command_is_named_once_not_as_every_later_turn() -> None:
    """The command no longer waits for a reply that never comes (#20, item 5): t1 is unanswered
    (I9), the session ended mid-turn is I1's, and t2 in the new session is right (I6 passes)."""
    scenario = load_file(next(p for p in catalog_paths() if p.stem == "26-new-during-running-turn"))
    verdicts = judge(run_scenario(scenario, InterruptsOnNew(), "interrupts", check=False).records)
    assert verdicts["I6"].status == "pass"
    assert [v.message for v in verdicts["I9"].violations] == ["t1 delivered at 09:00 was never answered; owed by 09:01:01"]


def test_a_crash_excuses_what_it_lost_not_what_an_earlier_end_owed() -> None:
    """Catalog 38 (#20, item 8): /new ends s1 at 09:03, owing t1 and t2 to hindsight; a crash
    at 09:04 does not excuse them for a gateway without crash durability."""
    records = list(run_scenario(load_file(next(p for p in catalog_paths() if p.stem == "38-batch-end-flush-before-crash")),
                                ReferenceGateway(), "reference", check=False).records)
    head = edit(records, 0, detail={"profile": {**records[0].d("profile"), "crash_durable": False}})
    shipped = find(head, "ingest", turn="t1", backend="hindsight")
    assert head[shipped].turns == ("t1", "t2")
    lost = drop(head, shipped)
    assert messages(head, "I3") == []
    assert messages(lost, "I3") == [
        "backend 'hindsight' never ingested [t1, t2] (session s1, acknowledged from 09:00:02 to 09:01:02)"]


def test_a_turn_asked_again_is_answered_at_its_last_ask() -> None:
    """Hermes interrupts a turn and asks again (#20, item 6): after a deletion, the next turn's
    reply comes a turn latency after its second ask, which is its next flush, not a late one."""
    records = log("heal")
    request = find(records, "llm_request", turn="t3")
    reply = find(records, "reply", turn="t3")
    again = records[request]._replace(t=records[request].t + 30_000, detail={**records[request].detail, "request": "r9"})
    later = edit(records, reply, t=records[reply].t + 30_000)
    asked_twice = insert(later, request + 1, again)
    assert messages(asked_twice, "I8") == []
    assert messages(later, "I8") == [
        "session s1's row was deleted at 09:02 and not recreated at the next flush: turn t3 (asked 09:03) got its answer "
        "at 09:03:02 but was acknowledged only at 09:03:32"
    ]


RESUME_AFTER_NEW = """name: resume-after-new
start: 2026-03-02T09:00
config: {reset: {mode: none}}
chats:
  alice: {}
events:
  - message: alice
  - command: /new
    chat: alice
    after: 1m
  - command: /resume
    chat: alice
    after: 1m
  - message: alice
    after: 1m
"""


class SkipsResumeAfterNew(ReferenceGateway):
    """The reference before #20 item 4: after /new nothing is 'left behind', so /resume found no
    previous session and t2 opened a new one."""

    def resume_previous(self, route):  # type: ignore[no-untyped-def]
        if route.ended:
            return
        super().resume_previous(route)


def test_resume_after_new_reopens_the_session_that_ended() -> None:
    """Hermes (and now the reference) reopen s1: /new left an empty successor, /resume goes back.
    The oracle used to count only sessions with turns and wanted t2 in a new session."""
    scenario = load_text(RESUME_AFTER_NEW, "<resume-after-new>")
    reopened = run_scenario(scenario, ReferenceGateway(), "reference")
    assert reopened.passed, {c: v.summary for c, v in reopened.verdicts.items() if v.status != "pass"}
    assert [r.session for r in reopened.records if r.kind == "reply"] == ["s1", "s1"]
    assert [r.session for r in reopened.records if r.kind == "on_session_end"] == ["s1"]  # life 1 at /new; life 2 never ends
    skipped = run_scenario(scenario, SkipsResumeAfterNew(), "skips")
    assert skipped.verdicts["I6"].violations[0].message.startswith("after /resume at 09:02 turn t2 landed in s2")


RESUME_NEW_RESUME = """\
name: resume-new-resume-behind-a-turn
config: {reset: {mode: idle, idle_minutes: 1}, turn_latency: 3m}
events:
  - message: alice
  - {command: /resume, chat: alice, after: 9s}
  - {command: /new, chat: alice, after: 52s}
  - {command: /resume, chat: alice, after: 2s}
"""


def test_two_reopens_of_one_session_at_one_record_each_begin_after_the_end_before() -> None:
    """Behind t1's 3-minute turn, /resume, /new, /resume take effect at its reply, past s1's idle
    boundary: s1 ends (idle), reopens, ends (/new), reopens, and idles out: three lives, three
    ends. The oracle began both reopened lives after the first end, so the middle life looked
    endless and the last one ended twice (generated seed 5398 of the long profile, with the
    generator's rare choices made common, failed the reference's I1 and I4)."""
    run = run_scenario(load_text(RESUME_NEW_RESUME, "<resume-new-resume>"), ReferenceGateway(), "reference")
    assert run.passed, {c: v.summary for c, v in run.verdicts.items() if v.status != "pass"}
    records = list(run.records)
    ends = [(i, r.t) for i, r in enumerate(records) if r.kind == "on_session_end"]
    reasons = [r.d("reason") for r in records if r.kind == "on_session_finalize"]
    assert reasons == ["idle", "new", "idle"] and ends[0][1] == ends[1][1] < ends[2][1]
    # Both ways: without the /new's end the middle life never ended; with it twice, it ended twice.
    middle = ends[1][0]
    assert "reached its new boundary" in judge(records[:middle] + records[middle + 2:])["I1"].violations[0].message
    twice = records[:middle + 2] + records[middle:middle + 2] + records[middle + 2:]
    assert "got 2 on_session_end calls" in judge(twice)["I4"].violations[0].message


DELETED_TWICE = """\
name: deleted-twice
config: {{reset: {{mode: none}}, turn_latency: 3m}}
events:
  - message: carol
  - {{delete_session: carol, after: 1h46m3s}}
  - {{message: carol, after: 1m}}
  - {{delete_session: carol, after: {second}}}
  - {{sigterm: true, after: 2s}}
"""


def test_a_second_deletion_owes_only_what_the_agent_loaded_after_the_first_lost_the_rest() -> None:
    """s1's agent left the cache (idle TTL) before the first deletion: t1 is gone for good. The
    agent t2 loads holds t2 only, so the second deletion owes t2 back (at the SIGTERM), never t1.
    The oracle owed t1 too, and failed the reference when t2 was still in flight at the stop
    (nothing to write back): generated seed 5063, long profile, with the rare choices common."""
    in_flight = run_scenario(load_text(DELETED_TWICE.format(second="52s"), "<x>"), ReferenceGateway(), "reference")
    assert in_flight.passed, {c: v.summary for c, v in in_flight.verdicts.items() if v.status != "pass"}
    assert any(r.kind == "note" and r.d("what") == "interrupted" for r in in_flight.records)
    healed = run_scenario(load_text(DELETED_TWICE.format(second="4m"), "<x>"), ReferenceGateway(), "reference")
    assert healed.passed
    # Both ways: the store without the healed row fails I8, owing t2 alone.
    stop = next(r.t for r in healed.records if r.kind == "sigterm")
    records = [r._replace(detail={**r.detail, "sessions": {}}) if r.kind == "durable" and r.t >= stop else r
               for r in healed.records]
    violation = judge(records)["I8"].violations[0]
    assert "never recreated: its agent held [t2] and the gateway stopped" in violation.message, violation.message


class StoresBeforeAsking(ReferenceGateway):
    """Stores a message before it asks the LLM, as Hermes does (its turn lease and session row,
    `SessionDB._execute_write`): under a locked store its agent is loaded and busy, waiting, with
    no LLM request yet."""

    def start_turn(self, message, arrival):  # type: ignore[no-untyped-def]
        key = self.route_key(message.chat)
        route = self.store.route(key)
        until = self.store.locked_until
        if until <= self.h.clock.now() or route is None or route.session_id is None or route.ended:
            super().start_turn(message, arrival)
            return
        agent = self.route_agent(route)  # loaded for the turn, which waits out the lock
        agent.busy = True
        self.volatile.busy_chats[key] = ""
        self.volatile.timers.append(self.h.scheduler.call_at(until, self.after_lock, message, arrival, key))

    def after_lock(self, message, arrival, key):  # type: ignore[no-untyped-def]
        del self.volatile.busy_chats[key]
        super().start_turn(message, arrival)


STORES_FIRST = """\
name: stores-before-asking
start: 2026-03-02T09:00
zone: Europe/Berlin
config: {reset: {mode: none}, cache_cap: 1, turn_latency: 10s}
events:
  - message: bob
  - {message: alice, at: "09:00:30"}
  - {db_locked: 2m, at: "09:01"}
  - {message: bob, at: "09:01:30"}
"""


def test_an_agent_waiting_to_ask_is_in_flight_not_idle() -> None:
    """A turn is in flight from its delivery, not from its LLM request: bob's agent, loaded for
    t3 while the store is locked (09:01:30-09:03), is busy beside alice's idle one (cap 1); the
    cap holds once t3 is answered. I7 counted it idle (no request yet) and failed the gateway."""
    result = run_scenario(load_text(STORES_FIRST), StoresBeforeAsking(), "stores-first", check=False)
    asked = [r.t for r in result.records if r.kind == "llm_request" and r.turns == ("t3",)]
    assert asked == [load_text(STORES_FIRST).start + 3 * 60_000]  # it waited the lock out
    verdicts = judge(result.records)
    assert verdicts["I7"].status == "pass", verdicts["I7"].violations
    assert all(v.status == "pass" for v in verdicts.values()), {c: v.violations for c, v in verdicts.items() if v.violations}


AT_THE_STOP = """\
name: boundary-at-the-crash-instant
start: 2026-10-24T02:00:54
zone: UTC
config: {reset: {mode: idle, idle_minutes: 5}, watcher_interval: 5m}
chats: {alice: {platform: telegram, chat_type: dm}}
events:
  - message: alice
  - crash_at: {point: end-recorded, hit: 1, restart_after: 48s}
    after: 5m1ms
  - message: alice
  - restart: true
    config: {reset: {mode: none}}
    after: 33s
"""


def test_an_end_the_crash_cut_short_at_the_boundary_instant_is_finished_at_the_restart() -> None:
    """Small+dense seed 31122, shrunk: s1 is past its idle boundary from 02:05:54.001 (5 minutes
    after t1, exclusive), and t2 at that very instant notices it; the gateway dies at its crash
    point inside the end, and the restart (policy `none` from the crash on) finishes the end in
    its own step, as the contract allows. The old policy judged only the instants before the
    stop, so a boundary at the stop's own instant was not found and I1 called the end one with
    no boundary. Finished later than the restart's step, it is still one (the new policy keeps
    the entry)."""
    records = list(run_scenario(load_text(AT_THE_STOP), ReferenceGateway(), "reference", check=False).records)
    verdicts = judge(records)
    assert all(v.status == "pass" for v in verdicts.values()), {c: v.violations for c, v in verdicts.items() if v.violations}
    end, final, quiet = find(records, "on_session_end"), find(records, "on_session_finalize"), find(records, "quiesce")
    assert records[end].step == records[find(records, "restart")].step
    late = [*records[:end], *records[end + 2: quiet + 1], records[end]._replace(step=records[quiet].step),
            records[final]._replace(step=records[quiet].step), *records[quiet + 1:]]
    assert messages(late, "I1")[0] == ("session s1 got on_session_end at 02:06:27 (at restart) but never reached a "
                                       "boundary (reset policy none)")


RETRY_AFTER_LOCK = """\
name: crash-in-the-retry-after-a-lock
start: 2026-06-17T01:14:52
zone: UTC
config: {reset: {mode: idle, idle_minutes: 15}, watcher_interval: 5m, turn_latency: 0s}
chats: {bob: {}}
events:
  - message: bob
  - {message: bob, after: 23m47s}
  - {db_locked: 2m49s, after: 43s}
  - {message: bob, after: 1m1s999ms}
  - {command: /resume, chat: bob, after: 50s}
  - crash_at: {point: heal-recreated, hit: 1, restart_after: 31s}
    after: 4s
  - {delete_session: bob}
"""


def test_a_crash_inside_the_write_retried_after_a_lock_takes_the_turn_and_what_waited_behind_it() -> None:
    """Dense seed 12209 with crash points, shrunk: t3's write waits out a lock that ends at
    01:42:11; the gateway retries a second after each refusal, so at 01:42:11.999, where it
    heals s2 (deleted meanwhile) and dies at its crash point. The oracle ended t3 at the lock's
    end ("dropped"), so the /resume queued behind it took effect then (I1: s2's end owed) and I8
    called t3 never answered. t3 was owed its reply until its deadline and died with the process
    before it, and the /resume with it. A crash after the deadline still leaves t3 dropped."""
    records = list(run_scenario(load_text(RETRY_AFTER_LOCK), ReferenceGateway(), "reference", check=False).records)
    crash = find(records, "crash")
    assert records[crash].t - records[find(records, "db_locked")].d("until") == 999
    verdicts = judge(records)
    assert all(v.status == "pass" for v in verdicts.values()), {c: v.violations for c, v in verdicts.items() if v.violations}
    hour = 3_600_000  # the same log, the process dying an hour later: past t3's deadline
    later = [*records[:crash], *(r._replace(t=r.t + hour) for r in records[crash:])]
    assert [m for m in messages(later, "I8") if "never answered" in m] == [
        "session s2's row was deleted at 01:41:17 and not recreated at the next flush: turn t3 (asked 01:40:23) was "
        "never answered"]
    assert any("switch boundary" in m for m in messages(later, "I1"))


STOP_BEHIND_A_WAITING_TURN = """\
name: stop-while-a-turn-waits
start: 2026-10-24T11:16:00
zone: UTC
config:
  reset: {mode: none}
  reset_by_chat_type: {group: {mode: idle, idle_minutes: 1}}
  watcher_interval: 5m
  turn_latency: 3m
chats: {alice: {platform: discord, chat_type: group, user: u1}}
events:
  - message: alice
  - {message: alice, after: 1m1s}
  - {command: /stop, chat: alice, after: STOP}
  - {sigterm: true, after: 3m41s1ms}
  - restart: true
    config: {reset_by_chat_type: {group: {mode: daily, at_hour: 0}}}
    after: 57s
"""


def test_a_stop_acts_at_once_not_behind_the_turn_waiting_for_the_one_it_stops() -> None:
    """Long+dense seed 10442 with crash points, shrunk: t2 waits behind t1 (3 minutes a turn),
    the /stop a second later ends t1, and t2 starts in s2 (s1 idle past 11:17, before t2
    arrived; a second later since I6 judges a turn at its arrival). s2 is idle past 11:18:01; its
    end is not owed before the SIGTERM at 11:20:43 (t2 in flight until 11:20:02, then the
    5-minute watcher), so the daily policy of the restart judges it and ends it at midnight.
    The oracle placed the /stop after t2's reply, as if queued behind it, where it "noticed"
    s2's idle boundary, so I1 held the gateway to it. A /stop that truly comes after t2's reply
    does notice it: that end, dropped from the log, fails I1."""
    records = list(run_scenario(load_text(STOP_BEHIND_A_WAITING_TURN.replace("STOP", "1s")), ReferenceGateway(),
                                "reference", check=False).records)
    assert records[find(records, "llm_request", turn="t2")].t == records[find(records, "command")].t  # t2 starts after it
    verdicts = judge(records)
    assert all(v.status == "pass" for v in verdicts.values()), {c: v.violations for c, v in verdicts.items() if v.violations}
    assert [r.d("reason") for r in records if r.kind == "on_session_finalize"] == ["idle", "daily"]
    after_reply = list(run_scenario(load_text(STOP_BEHIND_A_WAITING_TURN.replace("STOP", "5m30s")), ReferenceGateway(),
                                    "reference", check=False).records)
    assert messages(after_reply, "I1") == []
    end = find(after_reply, "on_session_end", session="s2")
    assert after_reply[end].step == after_reply[find(after_reply, "command")].step  # the /stop noticed s2's boundary
    assert messages(drop(drop(after_reply, end + 1), end), "I1")[0].startswith(
        "session s2 reached its idle boundary at 11:18:01 (idle 1m after the last user message at 11:17:01) but got no "
        "on_session_end")


STOPPED_TURNS_THEN_IDLE = """\
name: stopped-turns-then-idle
seed: 3439
zone: UTC
start: '2026-01-13T11:36:19'
config: {reset: default, cache_cap: 64, idle_ttl: 1h, watcher_interval: 30s, turn_latency: 3m}
chats:
  alice: {platform: telegram, chat_type: dm}
events:
- {message: alice}
- {message: alice, after: 56s}
- {message: alice, after: 55s}
- {message: alice, after: 1s}
- {command: /stop, chat: alice, after: 5m35s}
- {command: /stop, chat: alice, after: 42s}
"""


def test_an_agent_is_idle_from_the_stop_that_abandoned_its_last_turn() -> None:
    """Long seed 3439 with crash points, shrunk: t2's reply at 11:42:19, then t3 and t4 asked
    and each abandoned by a /stop, the last at 11:44:28; the reference evicts the agent (policy
    none, TTL 1h, 30 s sweep) at 12:43:49. I7 counted its idle time from t2's reply (due out by
    12:42:49), as if the agent had sat idle while t3 and t4 were in flight. It counts from the
    /stop now: an agent never evicted fails, due out by 12:44:58."""
    records = list(run_scenario(load_text(STOPPED_TURNS_THEN_IDLE), ReferenceGateway(), "reference", check=False).records)
    assert [r.d("turn") for r in records if r.kind == "note" and r.d("what") == "stopped"] == ["t3", "t4"]
    assert messages(records, "I7") == []
    kept = drop(records, find(records, "resources", drop=["s1"]))  # the eviction's sample gone: never evicted
    assert messages(kept, "I7")[0] == ("the agent of session s1 (reset policy none) was still cached at 12:49:28, idle since "
                                       "11:44:28 (idle TTL 1h, sweep every 30s: due out by 12:44:58)")


HELD_RESET_THEN_CRASH = """\
name: held-reset-lost-in-a-crash
start: 2026-04-03T23:01:24
zone: UTC
config: {reset: {mode: none}, watcher_interval: 5m}
chats: {bob: {}, carol: {}}
events:
  - message: carol
  - {sigterm: true, after: 57s}
  - {message: bob, after: 5s498ms}
  - {command: /reset, chat: bob, after: 1m}
  - {command: /reset, chat: carol, after: 12s}
  - crash_at: {point: end-recorded, hit: 1, restart_after: 23s}
    after: 4s
"""


def test_a_held_command_waiting_for_a_turn_is_lost_with_the_crash_right_after_its_request() -> None:
    """Dense seed 93099 with crash points, shrunk: bob's t2 and /reset and carol's /reset are
    held while the gateway is down; at the restart t2 is asked, bob's /reset waits behind it,
    carol's ends s1 and the gateway dies at `end-recorded`. A held command takes its place just
    after the request of the turn it waits for: here the crash's own record, so the oracle took
    bob's /reset as acted on at the crash and owed s2's end (I1). It is lost with t2. The same
    log with the crash an hour later, past t2's answer (the gateway dropped t2 and should then
    have reset): s2's end is owed, and the reference's log, which has none, fails I1."""
    records = list(run_scenario(load_text(HELD_RESET_THEN_CRASH), ReferenceGateway(), "reference", check=False).records)
    crash = find(records, "crash")
    assert records[crash - 1].kind == "llm_request" and records[crash - 1].turns == ("t2",)
    verdicts = judge(records)
    assert all(v.status == "pass" for v in verdicts.values()), {c: v.violations for c, v in verdicts.items() if v.violations}
    hour = 3_600_000
    later = [*records[:crash], *(r._replace(t=r.t + hour) for r in records[crash:])]
    assert any(m.startswith("session s2 reached its new boundary") for m in messages(later, "I1")), messages(later, "I1")


LOST_THEN_OWED = """name: lost-then-owed
start: 2026-03-02T09:00
config:
  reset: {mode: none}
  providers: [{name: hindsight, retain_every_n_turns: 3}]
chats:
  alice: {}
events:
  - crash_at: {point: reply-sent, restart_after: 30s}
  - message: alice
  - message: alice
    after: 2m
  - command: /new
    chat: alice
    after: 1m
  - crash: true
    after: 1m
  - restart: true
    after: 1m
"""


def test_a_lossy_crash_excuses_what_it_took_even_when_a_later_end_owes_it() -> None:
    """Hermes 0.13-0.18.0 on catalog 86 (found 2026-12-05): a gateway declaring `crash_durable:
    false` loses t1's buffered batch at the crash just after t1's reply; /new later ends s1,
    owing t1 and t2, and a crash follows. The crash that took t1 came before anything owed it,
    so it is excused; t2, acknowledged after it and owed by the end, is not."""
    records = list(run_scenario(load_text(LOST_THEN_OWED), ReferenceGateway(), "reference", check=False).records)
    head = edit(records, 0, detail={"profile": {**records[0].d("profile"), "crash_durable": False}})
    assert [r.d("point") for r in head if r.kind == "crash"] == ["reply-sent", None]
    t1 = find(head, "ingest", turn="t1", backend="hindsight")
    t2 = find(head, "ingest", turn="t2", backend="hindsight")
    assert head[t1].turns == ("t1",) and head[t2].turns == ("t2",)
    assert messages(drop(head, t1), "I3") == []
    assert messages(drop(head, t2), "I3") == [
        "backend 'hindsight' never ingested [t2] (session s1, acknowledged 09:02:02)"]


QUEUED_BEHIND_A_STOP = """
name: queued-behind-a-stop
start: 2026-06-16T03:37:21.001
config: {reset: {mode: idle, idle_minutes: 1}, watcher_interval: 5m, turn_latency: 3m}
events:
  - message: alice
  - {message: alice, after: 7s}
  - {message: alice, after: 59s999ms}
  - {command: /stop, chat: alice, after: 2s}
"""


def test_messages_that_waited_behind_a_turn_join_the_session_they_arrived_in() -> None:
    """CONTRACT I6: a turn is judged "when the turn arrived". t2 and t3 wait behind t1, each
    short of the boundary the message before it set (t3 by 2 ms); the /stop abandons t1 and
    notices the chat past t2's boundary, but t2 and t3 arrived before it and are s1's. The
    oracle judged each at its admission, and the /stop before them: it wanted t2 (then t3) in
    a new session, and failed a reference that keeps them (dense seed 191; a gateway author's
    exec: gateway on seed 43). A gateway that judges at admission fails I6."""
    from reference_impl.variants import VARIANTS

    scenario = load_text(QUEUED_BEHIND_A_STOP)
    records = run_scenario(scenario, ReferenceGateway(), "reference", check=False).records
    assert [r.session for r in records if r.kind == "reply"] == ["s1", "s1"]
    assert all(v.status != "fail" for v in judge(records).values())
    late = run_scenario(scenario, VARIANTS["queued-judged-at-admission"](), "late", check=False).records
    assert [r.session for r in late if r.kind == "reply"] == ["s2", "s3"]
    assert messages(late, "I6")[0].startswith("turn t2 arrived at 03:37:28, before any boundary of s1")
