"""Heal bugs: a live session whose row was deleted, from hermes-agent #123583 / PR #124117 (seed 003).

The reference heals only a row confirmed gone, replays the whole in-memory transcript
with each row's own visibility, keeps the replay pending until a write succeeds, heals
before an agent's memory is released (eviction, idle sweep, end, SIGTERM), and creates a
delegate child without its deleted parent (never bringing the parent back). Each variant
takes one back.
"""

from __future__ import annotations

import sqlite3

from reference_impl.cache import Agent
from reference_impl.gateway import ReferenceGateway
from reference_impl.store import Route, Row, StoreLocked, is_foreign_key_error
from reference_impl.transcripts import WriteOutcome


class DeletedRowDropsTurns(ReferenceGateway):
    """deleted-row-drops-turns — hermes-agent #123583 (seed 003):

    "`_ensure_db_session` trusts the cached `_session_db_created` flag as proof the row
    exists ... every later turn's append fails the FK and is dropped with one WARNING per
    turn. The agent keeps answering; the durable transcript silently stops growing".

    Here: a foreign-key failure on the transcript write is logged and the batch counted as
    written; no heal.
    """

    def foreign_key_failed(self, agent: Agent) -> WriteOutcome:
        self.h.note("flush_failed", session=agent.session, error="FOREIGN KEY constraint failed")
        agent.flushed = len(agent.rows)  # the batch is dropped; the agent keeps answering
        return "written"


class HealReplaysTailOnly(ReferenceGateway):
    """heal-replays-tail-only — PR #124117 (seed 003):

    "The heal retry passed the caller's conversation_history through, so
    _db_flush_collect's id()-based history shortcut treated the prefix as already durable
    and skipped it. The row was recreated with only the new tail and the flush returned
    True: a silent partial restore."

    Here: the heal recreates the row but leaves the flush cursor, so only the tail lands.
    """

    def plan_replay(self, agent: Agent) -> None:
        agent.created = False  # recreate the row; the history prefix still counts as durable


class HealOnAnyFkDuplicates(ReferenceGateway):
    """heal-on-any-fk-duplicates — PR #124117 (seed 003):

    "The FK classifier behind session_row_missing also matches the sessions table's own
    parent_session_id / system_prompt_hash FKs, and session create is an upsert. Healing on
    the classification alone could replay the whole transcript into a still-live row and
    duplicate it. Heal only when get_session(session_id) confirms the row is gone."

    Here: a delegate child's upsert failing its deleted parent's foreign key is taken for a
    deleted row: the live child row is re-created and the whole transcript replayed into it.
    """

    def parent_refused(self, agent: Agent, now: int, err: sqlite3.IntegrityError) -> None:
        self.h.note("heal", session=agent.session)  # no check that the row is gone
        self.store.upsert_session(agent.session, agent.chat, None, agent.kind, now)
        agent.replay_pending = True


class HealMutedHidesHistory(ReferenceGateway):
    """heal-muted-hides-history — PR #124117 (seed 003):

    "On a muted notification-reply turn that also made _db_flush_collect treat every
    history row as new: each replayed row was written display_kind=hidden and the flag was
    stamped onto the live in-memory history dicts, hiding the user's whole past transcript
    from pollers from then on."

    Here: a replay writes every row with the current turn's visibility, in the store and in
    the agent's memory.
    """

    def write(self, agent: Agent) -> None:
        if agent.replay_pending and agent.rows:
            visibility = agent.rows[-1].visibility
            agent.rows = [row._replace(visibility=visibility) for row in agent.rows]
        super().write(agent)


class HealForgetsPendingReplay(ReferenceGateway):
    """heal-forgets-pending-replay — PR #124117 (seed 003):

    "When the heal recreated the session row but its single retry write then failed
    (database locked, turn lease, disk), the replay was carried only by the per-call
    _replay_history argument. The next flush found a live row, hit no FK error, ran no
    heal, and stamped the history prefix durable without writing it".

    Here the heal recreates the row at once and leaves the replay to the next flush (a
    write cannot fail between two statements of one simulated instant); that retry refused
    as locked forgets the replay, so the recreated row gets the tail only.
    """

    def write_failed(self, agent: Agent, err: sqlite3.Error) -> WriteOutcome:
        if isinstance(err, StoreLocked):
            agent.replay_pending = False  # the replay rode on this retry alone
        elif is_foreign_key_error(err) and self.heal(agent):
            self.create_row(agent)  # the row is back; the replay waits for the retry
        return "owed"


class OrphanChildNeverRecreated(ReferenceGateway):
    """orphan-child-never-recreated — PR #124117 (seed 003):

    "Deleting a parent session cascades to its delegate children. A live child then can
    never be recreated: create_session(parent_session_id=...) hits the parent FK on every
    flush for the agent's lifetime."

    Here: the row is always created with its parent, so a child whose parent was deleted
    fails every flush and its turn never completes.
    """

    def parent_refused(self, agent: Agent, now: int, err: sqlite3.IntegrityError) -> None:
        raise err  # the parent key stays: every flush fails it


class EvictDropsDeletedTranscript(ReferenceGateway):
    """evict-drops-deleted-transcript — PR #124117 (seed 003):

    "A session deleted while its chat is still running is recreated under the same id with
    the full in-memory transcript on the next save (the gateway session-key mapping expects
    the id to be stable)."

    Here the heal waits for that next save: an agent leaving the cache (LRU cap, idle sweep,
    end, SIGTERM) writes only what it believes unwritten, never notices its row is gone, and
    drops the only copy of the transcript.
    """

    def confirm_row(self, agent: Agent) -> None:
        return  # a clean agent's row is never checked: the next save alone would notice


class ParentResurrectedForChild(ReferenceGateway):
    """parent-resurrected-for-child — PR #124117 (seed 003):

    "Deleting a parent session cascades to its delegate children. A live child then can
    never be recreated: create_session(parent_session_id=...) hits the parent FK on every
    flush ... When the recreate fails and the parent row is gone, create once without the
    parent for that call only; agent._parent_session_id is restored because the relay and
    hooks still key on it."

    Here the child keeps its parent key the other way: the child's write puts the deleted
    parent's row back (with whatever of its transcript the gateway holds), so a session
    another surface deleted returns as a side effect of another session's write.
    """

    def orphan_row(self, agent: Agent, now: int) -> None:
        assert agent.parent is not None  # only a delegate child has a parent row to lose
        parent = self.volatile.cache.agents.get(agent.parent)
        self.store.upsert_session(agent.parent, agent.chat, None, "chat", now)
        if parent is not None:
            self.store.append(agent.parent, parent.rows[: parent.flushed])
        self.store.upsert_session(agent.session, agent.chat, agent.parent, agent.kind, now)


class AnswerRefusedAfterRowDeleted(ReferenceGateway):
    """answer-refused-after-row-deleted — OpenClaw, every release (2026.9.6's `fuzz` seed 16 first;
    catalog 84, docs/openclaw.md): a session deleted while its turn waits for the model has no
    transcript when the answer comes, so the append is refused (2026.9.6: a transcript conflict
    in `SessionManagerEntries.appendEntry` → `validatePreparedAssistantAppendSync`) and the
    chat gets a generic "Something went wrong".

    Here: an answer whose session's row is gone when it arrives is given up as a `/stop` gives
    up a turn, and the chat is sent a generic error instead.
    """

    def deliver_reply(self, request_id: str, text: str) -> None:
        pending = self.volatile.inflight.get(request_id)
        if pending is None or pending.delegate or not self.agent_of(pending).flushed or self.store.session_exists(pending.session):
            super().deliver_reply(request_id, text)  # a row never written is not gone
            return
        self.h.platform.send_reply(pending.chat.name, pending.session, "⚠️ Something went wrong while processing your request.")
        self.stop_turn(pending.key)


class EndKeepsAgent(ReferenceGateway):
    """end-keeps-agent — PR #124117 (seed 003) with CONTRACT Deletions (fifth audit of lazy
    gateways, 2026-12-06): "Deleting a session still open in a running chat doesn't stop that
    chat"; an ended one is not open, and what was deleted after its end is gone for good.

    Here: the ended session's agent goes back into the cache after its end (as if kept for a
    write-back retry its write did not need); the SIGTERM lets go of it, healing the deleted row.
    """

    def end_memory(self, session: str, reason: str, agent: Agent | None) -> None:
        super().end_memory(session, reason, agent)
        if agent is not None:
            self.volatile.cache.put(agent)


class HealDropsChildParent(ReferenceGateway):
    """heal-drops-child-parent — CONTRACT I8 (a delegate child's row names its parent; the
    seventh audit of lazy gateways, 2026-12-06):

    "a child whose chat's session at the task's arrival is stored names a parent, a deletion
    and heal of either row in between or not".

    Here: a heal writes a delegate child's row back with its messages only, the parent column
    left empty, though the parent's row is stored (healed first, by the chat's own turn).
    """

    def create_row(self, agent: Agent) -> None:
        if agent.kind == "delegate" and agent.replay_pending:
            self.store.upsert_session(agent.session, agent.chat, None, agent.kind, self.h.clock.now())
            agent.created = True
            return
        super().create_row(agent)


class ResumeRestoresDeleted(ReferenceGateway):
    """resume-restores-deleted — CONTRACT I8 (the seventh audit of lazy gateways, 2026-12-06):

    "A session deleted while no agent held it, or after it ended, comes back only by a turn of
    its own ... and none after the deletion holds a turn the deletion took".

    Here: every end keeps the session's transcript with the chat's routing entry, for
    `/resume`; the end a `/resume` makes (reason `switch`) writes the previous session's row
    back from that copy when the store lacks it ("resume must bring the conversation back"),
    though another surface deleted it on purpose.
    """

    def end_session(self, route: Route, reason: str) -> None:
        copies: dict[str, list[Row]] = self.__dict__.setdefault("resume_copies", {})
        session = route.session_id
        assert session is not None
        agent = self.volatile.cache.get(session) or self.volatile.unflushed.get(session)
        copies[session] = list(agent.rows) if agent is not None else self.stored_transcript(session)
        super().end_session(route, reason)
        target = route.previous_id  # a /resume's: it switches to it next
        if reason == "switch" and target in copies and not self.store.session_exists(target):
            self.store.upsert_session(target, route.chat, None, "chat", self.h.clock.now())
            self.store.append(target, copies[target])


class SigtermSkipsChildren(ReferenceGateway):
    """sigterm-skips-children — CONTRACT I8, Deletions (the seventh audit of lazy gateways,
    2026-12-06):

    "The deleted turns ... are owed back from the first of: the session's next acknowledged
    turn (its next write), its agent leaving the cache (LRU cap, idle sweep, its end) and a
    SIGTERM."

    Here: the SIGTERM lets go of the chats' agents only (written back, healed); delegate
    children's agents are dropped as they are ("subagents are ephemeral"), so a child's row
    deleted under its live agent is never written back.
    """

    def release_at_shutdown(self, agent: Agent) -> None:
        if agent.kind != "delegate":
            self.release(agent)


class WarmRestartRevivesDeleted(ReferenceGateway):
    """warm-restart-revives-deleted — docs/contract.md, Deletions ("gone for good: no agent held
    it, and none may have kept it in memory ... or a stop has dropped every object since");
    the eighth audit of lazy gateways, 2026-12-06:

    A gateway that saves its agent cache at SIGTERM and loads it back at the restart (a warm
    start): a session deleted while the gateway was down comes back from the saved agent's
    transcript at its next write, with no turn of its own.

    Here: a restart after a SIGTERM puts the agents the stopped process held back into the
    cache (up to the cap); a crash still loses them.
    """

    def boot(self) -> None:
        stopped = self.volatile
        warm = list(stopped.cache.agents.values()) if stopped is not None and not stopped.running else []
        super().boot()
        for agent in warm[-self.config.cache_cap:]:
            self.volatile.cache.put(agent)


class SigtermSkipsBusy(ReferenceGateway):
    """sigterm-skips-busy — CONTRACT I8, Deletions ("owed back from the first of: the session's
    next acknowledged turn, its agent leaving the cache ... and a SIGTERM"), I2; the eighth
    audit of lazy gateways, 2026-12-06 (caught only by a dense seed):

    A gateway whose SIGTERM writes back only its idle agents, as if a busy one's rows would be
    written when its reply comes: the reply never comes (the stop abandons the turn), so a row
    deleted under the busy agent is never written back.

    Here: the SIGTERM lets go of idle agents only; a busy one is dropped as it is.
    """

    def release_at_shutdown(self, agent: Agent) -> None:
        if not agent.busy:
            self.release(agent)
