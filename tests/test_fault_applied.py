"""A fault the harness injects is verified as applied: a gateway that ignores
`delete_session_row` (or its cascade) is a gateway error at the deletion step, in process and
over the JSON-lines protocol alike, so no deletion scenario passes vacuously; one that takes more
rows than the cascade is noted and judged (I2)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from conformance.harness.runner import run_scenario
from conformance.harness.suite import catalog_paths
from conformance.observations import DurableState
from conformance.transport.isolation import isolated
from reference_impl.gateway import ReferenceGateway
from reference_impl.selftest import HidesRoutingGateway, IgnoresDeletionGateway
from sim.loader import load_file, load_text

DELETING = [p for p in catalog_paths() if any(e.kind in ("delete_session", "delete_parent") for e in load_file(p).events)]


class KeepsChildren(ReferenceGateway):
    """Deletes the row but never cascades (as with foreign keys off)."""

    def delete_session_row(self, session_id: str, keep_children: bool = False) -> None:
        super().delete_session_row(session_id, keep_children=True)


class AlwaysCascades(ReferenceGateway):
    """Cascades even a `delete_parent` (foreign keys on regardless)."""

    def delete_session_row(self, session_id: str, keep_children: bool = False) -> None:
        super().delete_session_row(session_id, keep_children=False)


def test_the_catalog_deletes_rows() -> None:
    assert len(DELETING) >= 10


@pytest.mark.parametrize("path", DELETING, ids=[p.stem for p in DELETING])
def test_ignoring_a_deletion_fails_every_deletion_scenario(path: Path) -> None:
    scenario = load_file(path)
    result = run_scenario(scenario, IgnoresDeletionGateway(), "selftest:ignores-deletion")
    assert not result.passed and result.failure is not None and result.failure.kind == "error"
    step = result.failure.step
    assert scenario.events[step - 1].kind in ("delete_session", "delete_parent")
    assert result.failure.message.startswith("the gateway ignored the deletion of s")
    assert result.failure.message.endswith(": its row is still in the store")
    assert {v.status for v in result.verdicts.values()} == {"error"}


def test_an_ignored_cascade_is_named() -> None:
    scenario = load_file(Path(__file__).parent.parent / "conformance/catalog/13-heal-parent-cascade.yaml")
    result = run_scenario(scenario, KeepsChildren(), "keeps-children")
    assert result.failure is not None and (result.failure.kind, result.failure.step) == ("error", 3)
    assert result.failure.message == (
        "the gateway ignored the deletion of s1: the row of s2, which its cascade takes, is still in the store")


class TakesTheWholeChat(ReferenceGateway):
    """Deleting the chat's live session takes its ended one too (OpenClaw 2026.9.6: one session
    id carries every segment between resets, and a deletion takes the id)."""

    def delete_session_row(self, session_id: str, keep_children: bool = False) -> None:
        super().delete_session_row(session_id, keep_children)
        if session_id == "s2":
            super().delete_session_row("s1", keep_children)


def test_a_deletion_taking_more_than_its_cascade_is_noted_and_judged() -> None:
    """Rows taken beyond the cascade are the gateway's doing, not an unapplied fault: the run goes
    on, a note names them, and I2 judges the acknowledged turns they held as missing."""
    scenario = load_file(Path(__file__).parent.parent / "conformance/catalog/12-heal-fk-row-present.yaml")
    result = run_scenario(scenario, AlwaysCascades(), "always-cascades")
    assert result.failure is None
    note = next(r for r in result.records if r.kind == "note" and r.d("what") == "deletion beyond its cascade")
    assert (note.session, note.d("removed")) == ("s1", ["s2"])
    scenario = load_file(Path(__file__).parent.parent / "conformance/catalog/51-delete-after-reset.yaml")
    result = run_scenario(scenario, TakesTheWholeChat(), "takes-the-whole-chat")
    assert result.failure is None and result.verdicts["I2"].status == "fail"
    assert "turn t1 (session s1" in result.verdicts["I2"].violations[0].message


def test_the_cascade_taken_is_recorded() -> None:
    scenario = load_file(Path(__file__).parent.parent / "conformance/catalog/13-heal-parent-cascade.yaml")
    records = run_scenario(scenario, ReferenceGateway(), "reference", check=False).records
    deletion = next(r for r in records if r.kind == "delete_session")
    assert (deletion.session, deletion.d("cascade")) == ("s1", ["s2"])


def test_an_ignored_deletion_over_exec_is_the_same_error() -> None:
    scenario = load_file(DELETING[0])
    here = run_scenario(scenario, IgnoresDeletionGateway(), "selftest:ignores-deletion")
    there = run_scenario(scenario, isolated("selftest:ignores-deletion"), "selftest:ignores-deletion")
    assert there.failure == here.failure and there.log_text() == here.log_text()


LOCKING = [p for p in catalog_paths() if any(e.kind == "db_locked" for e in load_file(p).events)]


@pytest.mark.parametrize("path", LOCKING, ids=[p.stem for p in LOCKING])
def test_ignoring_a_lock_is_an_error_where_the_gateway_wrote_through_it(path: Path) -> None:
    """The store at a lock's start and at its last instant: a row added in between was written
    through the lock (a gateway that ignores `lock_store` passed every locked scenario)."""
    from reference_impl.selftest import IgnoresLockGateway

    scenario = load_file(path)
    assert run_scenario(scenario, ReferenceGateway(), "reference").passed
    result = run_scenario(scenario, IgnoresLockGateway(), "selftest:ignores-lock")
    if result.failure is None:  # nothing to write while this scenario's lock held
        assert path.stem not in ("15-heal-locked-retry", "42-stop-during-locked-write", "45-every-message-answered")
        return
    assert scenario.events[result.failure.step - 1].kind == "db_locked"
    assert "the gateway ignored the store lock from " in result.failure.message
    assert result.failure.message.endswith("written while it held")


ENDED_BEFORE_DELETION = {  # each deletion comes after the chat's session ended (/new)
    "65-delete-ended-session-before-sweep", "109-new-session-after-deletions", "113-resume-into-a-deleted-session"}


@pytest.mark.parametrize("path", DELETING, ids=[p.stem for p in DELETING])
def test_a_deletion_the_routing_cannot_aim_is_an_error(path: Path) -> None:
    """Routing is the gateway's own word, and the harness aims a deletion by it."""
    from reference_impl.selftest import HidesRoutingGateway

    result = run_scenario(load_file(path), HidesRoutingGateway(), "selftest:hides-routing")
    if path.stem in ENDED_BEFORE_DELETION:  # no session live by the log: a gateway may keep no entry (the deletion takes nothing)
        assert result.failure is None
        return
    assert result.failure is not None and "the gateway's routing has no entry for " in result.failure.message
    assert result.failure.message.endswith("the deletion cannot be aimed")


class RoutingInTheRow(ReferenceGateway):
    """Keeps a chat's routing in its session's row (as OpenClaw's `session_nodes` do): a deleted
    row takes the chat's entry with it until a heal writes the row again."""

    def durable_state(self) -> DurableState:
        state = super().durable_state()
        rows = {s.id for s in state.sessions}
        return DurableState(state.sessions, tuple((chat, sid) for chat, sid in state.routing if sid in rows))


def test_a_second_deletion_of_a_row_that_took_its_routing_aims_at_nothing() -> None:
    """Catalog 80 deletes alice's row twice before she writes again: a store whose entry went
    with the row has none to show at the second, and the deletion takes nothing (it was an
    error, OpenClaw's). The first deletion still needs the entry (the gateway that hides its
    routing fails there, above)."""
    path = next(p for p in DELETING if p.stem == "80-second-delete-before-heal")
    result = run_scenario(load_file(path), RoutingInTheRow(), "routing-in-the-row")
    assert result.failure is None and result.passed
    deletions = [(r.session, r.d("cascade")) for r in result.records if r.kind == "delete_session"]
    assert deletions == [("s1", []), (None, [])]
    hidden = run_scenario(load_file(path), HidesRoutingGateway(), "selftest:hides-routing")
    assert hidden.failure is not None and hidden.failure.step == 3


def test_a_stale_routing_entry_is_an_error_at_the_deletion() -> None:
    """A routing entry that still names an ended session aims the deletion at the wrong row:
    the live session would be spared and the deletion scenario pass vacuously (the mutation
    run's one gap: `Store.save_route` never issuing its UPDATE)."""
    from reference_impl.selftest import StaleRoutingGateway

    path = next(p for p in DELETING if p.stem == "51-delete-after-reset")
    assert run_scenario(load_file(path), ReferenceGateway(), "reference").passed
    result = run_scenario(load_file(path), StaleRoutingGateway(), "selftest:stale-routing")
    assert result.failure is not None and result.failure.step == 4
    assert result.failure.message == (
        "the gateway's routing names s1 for alice, which ended at 09:01; the chat's turns since went to s2 (t2 at 09:02): "
        "the deletion cannot be aimed")


WAITING_RESUME = """\
name: resume-waiting-behind-turns
start: '2026-01-06T19:29:14'
config: {{reset: {{mode: idle, idle_minutes: 5}}, turn_latency: 3m}}
events:
  - message: alice
  - {{message: alice, after: 5s}}
  - {{message: alice, after: 5m1s}}
{resume}  - {{delete_session: alice, after: 6m11s}}
"""


def test_a_resume_waiting_behind_turns_at_the_end_may_switch_back() -> None:
    """The /resume came before s1's idle end but waited behind t2 and t3, so it took effect at
    t3's reply and switched back to s1: the routing naming s1 is right. The harness read only
    a /resume arriving after the end, and called the reference's routing stale (generated seed
    6639 of the long profile with crash points, the generator's rare choices made common)."""
    from reference_impl.selftest import StaleRoutingGateway

    resumed = load_text(WAITING_RESUME.format(resume="  - {command: /resume, chat: alice, after: 2s}\n"), "<x>")
    result = run_scenario(resumed, ReferenceGateway(), "reference")
    assert result.passed, result.failure
    assert [(r.kind, r.session) for r in result.records if r.kind in ("on_session_switch",)][-1] == ("on_session_switch", "s1")
    # Both ways: with no /resume the entry must follow the chat to s2, and one left on s1 is stale.
    plain = load_text(WAITING_RESUME.format(resume=""), "<x>")
    assert run_scenario(plain, ReferenceGateway(), "reference").passed
    stale = run_scenario(plain, StaleRoutingGateway(), "selftest:stale-routing")
    assert stale.failure is not None and stale.failure.message.startswith("the gateway's routing names s1 for alice")


class RepliesToTheGroup(ReferenceGateway):
    """Sends a group user's reply to the group's own id: in this scenario that is alice's chat."""

    def send_reply(self, pending: Any) -> None:
        self.h.platform.send_reply(pending.chat.platform_id, pending.session, pending.reply or "")


WRONG_OUTBOX = """\
name: reply-in-another-outbox
start: '2026-03-09T02:05:05'
config: {reset: {mode: idle, idle_minutes: 1}}
chats:
  alice: {platform: cli, chat_type: group, user: u1}
  bob: {platform: cli, chat_type: group, user: u2, chat_id: alice}
events:
  - message: alice
  - {message: bob, after: 6m}
  - {delete_session: alice, after: 19s}
"""


def test_a_reply_in_another_chats_outbox_is_not_that_chats_turn() -> None:
    """bob's reply went to alice's outbox: the harness read it as alice's turn in s2, called
    her routing (s1, ended; right) stale and stopped the run at the deletion, so the real
    verdict, I9's, was never given (the fourth audit of lazy gateways). A turn is its chat's by
    its message."""
    scenario = load_text(WRONG_OUTBOX, "<x>")
    assert run_scenario(scenario, ReferenceGateway(), "reference").passed
    result = run_scenario(scenario, RepliesToTheGroup(), "replies-to-the-group")
    assert result.failure is None
    assert result.verdicts["I9"].status == "fail"
    assert "went to chat alice, not bob" in result.verdicts["I9"].summary
