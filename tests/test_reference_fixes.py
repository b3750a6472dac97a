"""Reference fixes found by 4,000 long-profile seeds after today's checks, each pinned by its
shrunk scenario: the reference passes it, and the behaviour it had before fails."""

from __future__ import annotations

from conformance.harness.runner import run_scenario
from reference_impl.gateway import ReferenceGateway
from sim.loader import load_text

NESTED_LOCKS = """name: nested-locks
start: 2026-03-02T09:00
config: {reset: {mode: none}, turn_latency: 10s}
chats:
  alice: {}
events:
  - message: alice
  - db_locked: 5m
    after: 1s
  - db_locked: 5s
    after: 1m
  - message: alice
    after: 1m
"""

OVERLAPPING_DELEGATES = """name: overlapping-delegates
start: 2026-03-02T05:10:06
config: {reset: {mode: none}, turn_latency: 3m}
chats:
  alice: {}
events:
  - message: alice
  - delegate: alice
    after: 1m
  - delegate: alice
    after: 1m
  - crash: true
    after: 2m41s
"""


class ShortLockEndsLongOne(ReferenceGateway):
    """The reference before: a shorter lock inside a longer one replaced its end."""

    def lock_store(self, until: int) -> None:
        self.store.locked_until = until


def test_a_shorter_lock_inside_a_longer_one_ends_nothing() -> None:
    scenario = load_text(NESTED_LOCKS, "<nested-locks>")
    assert run_scenario(scenario, ReferenceGateway(), "reference").passed
    before = run_scenario(scenario, ShortLockEndsLongOne(), "short-lock-ends-long-one")
    assert before.failure is not None and "the gateway ignored the store lock from 09:00:01 to 09:05:01" in before.failure.message


def test_a_delegate_task_in_flight_is_not_written_with_the_one_before_it() -> None:
    """t2 and t3 run at once in the child s2; t2's reply wrote t3's question too, and the crash
    left it stored though t3 was never answered (seed 2534 of the long profile)."""
    result = run_scenario(load_text(OVERLAPPING_DELEGATES, "<overlapping-delegates>"), ReferenceGateway(), "reference")
    assert result.passed, {c: v.summary for c, v in result.verdicts.items() if v.status != "pass"}
    crash = next(r for r in result.records if r.kind == "durable" and r.d("label") == "crash")
    assert crash.d("sessions")["s2"]["rows"] == [["user", "t2", "visible"], ["assistant", "t2", "visible"]]


STOP_THEN_CRASH = """name: stop-then-crash-inside-a-due-command
start: 2026-06-15T17:46:32
config: {reset: {mode: idle, idle_minutes: 15}, turn_latency: 45s}
chats:
  bob: {}
events:
  - message: bob
  - {message: bob, after: 18m26s}
  - {command: /resume, chat: bob, after: 18s}
  - {command: /resume, chat: bob, after: 2s}
  - crash_at: {point: route-rotated, hit: 1, restart_after: 21s}
  - {command: /stop, chat: bob, after: 7s}
"""


class _ForgetsDueCommands(ReferenceGateway):
    """Keeps the commands waiting behind a turn in memory only: a crash inside one loses the rest."""

    def commands_due_now(self, key: str) -> None:
        pass


def test_commands_a_stop_made_due_survive_a_crash_inside_the_first() -> None:
    """Two /resume wait behind t2; /stop ends t2, so both are due; a crash point fires inside the
    first. The reference finished that one at the restart but lost the second: it kept the
    commands a /stop made due in memory, where a reply made them durable (generated seed 6457
    of the long profile with crash points, the generator's rare choices made common)."""
    scenario = load_text(STOP_THEN_CRASH, "<stop-then-crash>")
    run = run_scenario(scenario, ReferenceGateway(), "reference")
    assert run.passed, {c: v.summary for c, v in run.verdicts.items() if v.status != "pass"}
    assert [r.d("reason") for r in run.records if r.kind == "on_session_finalize"] == ["idle", "switch", "switch", "idle"]
    forgets = run_scenario(scenario, _ForgetsDueCommands(), "forgets")
    assert forgets.verdicts["I1"].status == "fail" and forgets.verdicts["I5"].status == "fail"


DUE_BEFORE_THE_BOUNDARY = """name: due-before-the-boundary-finished-after-it
start: 2026-03-28T11:34:48
config: {reset: {mode: idle, idle_minutes: 1}, turn_latency: 45s, providers: [{name: hindsight, retain_every_n_turns: 1}]}
chats:
  alice: {}
events:
  - message: alice
  - {command: /resume, chat: alice, after: 30s}
  - crash_at: {point: batch-shipped, hit: 1, restart_after: 35s}
    after: 10s
"""


class _NoticesAtRestart(ReferenceGateway):
    """Finishes a due command as if it took effect at the restart, not when it became due."""

    def expiry_reason(self, route, at=None):  # type: ignore[no-untyped-def]
        return super().expiry_reason(route)


def test_a_due_command_finished_after_a_crash_notices_boundaries_as_of_when_it_was_due() -> None:
    """t1's reply makes the /resume due at 11:35:33 (s1 live, nothing before it: a no-op); a
    crash point fires in that step, and the restart at 11:36:08 finishes the /resume. Judged at
    the restart, s1's idle boundary (11:35:48) had passed: the reference ended s1 there and
    reopened it, two ends for one life (generated seed 212 of the dense profile, crash points)."""
    scenario = load_text(DUE_BEFORE_THE_BOUNDARY, "<due>")
    run = run_scenario(scenario, ReferenceGateway(), "reference")
    assert run.passed, {c: v.summary for c, v in run.verdicts.items() if v.status != "pass"}
    assert [r.d("reason") for r in run.records if r.kind == "on_session_finalize"] == ["idle"]
    assert any(r.kind == "note" and r.d("what") == "resume_skipped" for r in run.records)
    late = run_scenario(scenario, _NoticesAtRestart(), "notices-at-restart")
    assert late.verdicts["I4"].status == "fail" and "got 2 on_session_end calls" in late.verdicts["I4"].summary


STOP_PAST_THE_BOUNDARY = """name: stop-past-the-boundary
zone: UTC
start: 2026-11-01T16:07:16.997
config: {reset: {mode: idle, idle_minutes: 1}, watcher_interval: 5m}
chats:
  carol: {}
events:
  - message: carol
  - {command: /stop, chat: carol, after: 1m46s}
  - {crash: true, after: 1m}
  - restart: true
    config: {reset: {mode: daily, at_hour: 17}}
    after: 41s
"""


class _StopNoticesNothing(ReferenceGateway):
    """The reference before the fix: a /stop abandons the chat's turn and looks no further."""

    def notice_expiry(self, key: str) -> None:
        return None


def test_a_stop_past_the_boundary_notices_it_as_any_command_does() -> None:
    """s1 is idle past 16:08:16 when the /stop comes (16:09:02): a command past a boundary notices
    it (docs/contract.md), so s1 ends there. The reference did not, and under one policy nothing
    showed (its watcher ended s1 by 16:13); the crash at 16:10 and a restart bringing daily-at-17
    found s1 live and kept it until 17:00, an end the old boundary owed by 16:15 (generated
    seed 41 with restarts that change the policy)."""
    scenario = load_text(STOP_PAST_THE_BOUNDARY, "<stop>")
    run = run_scenario(scenario, ReferenceGateway(), "reference")
    assert run.passed, {c: v.summary for c, v in run.verdicts.items() if v.status != "pass"}
    stop = next(r for r in run.records if r.kind == "command")
    assert [(r.kind, r.t) for r in run.records if r.kind == "on_session_end"] == [("on_session_end", stop.t)]
    late = run_scenario(scenario, _StopNoticesNothing(), "stop-notices-nothing")
    assert late.verdicts["I1"].status == "fail" and "came only at 17:00" in late.verdicts["I1"].summary


WRITTEN_WITH_ANOTHER = """name: delegate-written-with-another-task
seed: 233489
zone: UTC
start: '2026-03-30T16:10:26.001'
config: {reset: {mode: none}, cache_cap: 64, idle_ttl: 1h, watcher_interval: 5m}
chats:
  alice: {platform: telegram, chat_type: dm}
events:
- {message: alice}
- {db_locked: 4m22s, after: 30s}
- {delegate: alice, after: 4s}
- {delete_parent: alice, after: 1m}
- {message: alice}
- crash_at: {point: heal-recreated, hit: 1, restart_after: 22s}
  after: 23s
- {delegate: alice}
"""


class _AcknowledgesAtItsOwnRetry(ReferenceGateway):
    """Acknowledges a turn whose write was refused only at its own retry, though another turn's
    write stored it first."""

    def acknowledge_written(self, request_id: str, session: str, agent: object) -> None:
        pass


def test_a_turn_written_with_another_task_is_acknowledged_in_that_step() -> None:
    """Two delegate tasks of the child s2 wait out a lock; when it ends, t4's retry writes t2's
    rows too, and the process dies (at s1's heal, the next timer of that instant) before t2's
    own retry: t2 was stored and never acknowledged. Its reply now goes out with the write
    (default seed 233,489 with crash points, shrunk 166 -> 7 events)."""
    scenario = load_text(WRITTEN_WITH_ANOTHER, "<delegate-written-with-another-task>")
    result = run_scenario(scenario, ReferenceGateway(), "reference")
    assert result.passed, {c: v.summary for c, v in result.verdicts.items() if v.status != "pass"}
    replies = [(r.step, r.turns) for r in result.records if r.kind == "reply" and r.session == "s2"]
    assert [turns for _step, turns in replies] == [("t2",), ("t4",)] and replies[0][0] == replies[1][0], replies
    before = run_scenario(scenario, _AcknowledgesAtItsOwnRetry(), "acknowledges-at-its-own-retry")
    assert before.verdicts["I2"].status == "fail", before.verdicts["I2"]
    assert "turn t2 (session s2) was never acknowledged" in before.verdicts["I2"].violations[0].message
