"""Applying each scenario event (`EventSteps._apply`), and verifying that each fault the harness
injects was applied (a gateway that ignored one would pass its scenarios vacuously)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from conformance.adapter import HARNESS_POINTS, Inbound
from conformance.harness.calls import AHEAD, Died, GatewayCalls, GatewayRaised
from conformance.harness.verdict import GatewayFailure
from conformance.observations import DurableState, Obs
from sim.kinds import covered
from sim.scenario import (
    BEFORE_TIMERS,
    Advance,
    BackendFail,
    BackendSlow,
    Checkpoint,
    Command,
    Crash,
    CrashAt,
    DbLocked,
    Delegate,
    DeleteParent,
    DeleteSession,
    Event,
    Message,
    Restart,
    Sigterm,
)


class EventSteps(GatewayCalls):
    """A run's scenario events, applied one at a time (`Run` drives them)."""

    @staticmethod
    def _cascade(kind: str, session: str, before: DurableState) -> list[str]:
        """The rows a deletion takes besides `session`'s: for `delete_session` of a stored row,
        every stored descendant (by the parent links in the store just before it), in id order
        (a row already gone cascades to nothing: its children's parent id just dangles)."""
        gone, parents = {session}, {s.id: s.parent for s in before.sessions}
        while kind == "delete_session" and session in parents and (
                more := {c for c, p in parents.items() if p in gone} - gone):
            gone |= more
        return sorted(gone - {session})

    def _verify_deleted(self, session: str, cascade: list[str], before: DurableState) -> None:
        """A fault the harness injects is verified as applied (one `durable_state` read): the
        row is gone, and every row its cascade takes. A gateway that ignored the deletion would
        otherwise pass every deletion scenario vacuously: a gateway error. Rows it took beyond
        the cascade are the gateway's own doing (a store that cannot delete one session alone):
        noted, and judged by the checks as the rows it lost (I2: acknowledged turns missing)."""
        gone, after = {session, *cascade}, {s.id for s in self._durable().sessions}
        still = sorted(sid for sid in after if sid in gone)
        extra = sorted(s.id for s in before.sessions if s.id not in after and s.id not in gone)
        if still:
            what = "its row is still in the store" if session in still else (
                f"the row{'s' if len(still) > 1 else ''} of {', '.join(still)}, which its cascade takes, "
                f"{'are' if len(still) > 1 else 'is'} still in the store")
            message = f"the gateway ignored the deletion of {session}: {what}"
            raise GatewayRaised(GatewayFailure("error", self.log.step, self.current_event, message))
        if extra:
            self.log.add("note", what="deletion beyond its cascade", session=session, removed=extra)

    def _verify_routed(self, chat: str, session: str | None) -> None:
        """A deletion is aimed by the gateway's routing (its own word), so the routing is held to
        the log, at a deletion: a chat whose session is live by the log (its last answer in it,
        no end since, and no deletion: a store may keep its routing in the row, as OpenClaw does)
        must have an entry; and an entry naming a session the log shows ended, while the chat's
        turns since went to another and no `/resume` could have switched back, is stale. A
        gateway that hid its routing, or never updated it, would evade every deletion fault (the
        deletion would miss, or take an ended session and spare the live one). A turn is its
        chat's by its message, never by the outbox its reply went to (a reply sent to another
        chat's outbox is I9's to judge, not a routing the deletion could not aim)."""
        chat_of = {e.turn: e.chat for e in self.scenario.events if isinstance(e, Message)}
        records = self.log.records
        if session is None:
            gone: set[str | None] = set()  # ended, or deleted (a store that keeps its routing in the row loses the entry with it)
            for r in reversed(records):
                if r.kind in ("on_session_end", "delete_session", "delete_parent"):
                    gone.add(r.session)
                elif r.kind == "reply" and r.turns and chat_of.get(r.turns[0]) == chat:
                    if r.session in gone:
                        return
                    self._misaimed(f"the gateway's routing has no entry for {chat}, whose session {r.session} is live "
                                   f"(answered at {self.clock.format(r.t)}, not ended)")
            return
        end = None  # the named session's last on_session_end, then: what the chat did after it
        since = None
        for r in records:
            if r.kind == "on_session_end" and r.session == session:
                end, since = r, None
            elif end is None:
                continue
            elif r.kind == "command" and r.chat == chat and r.d("command") == "/resume":
                return  # it may have switched back to the named session
            if r.kind in ("reply", "llm_request") and r.turns and chat_of.get(r.turns[0]) == chat:
                if r.session == session:
                    end = None  # reopened (a /resume past its boundary): live again
                    continue
                since = since or r
        if end is not None and since is not None and not _resume_waiting(records, chat, end, chat_of):
            self._misaimed(f"the gateway's routing names {session} for {chat}, which ended at {self.clock.format(end.t)}; "
                           f"the chat's turns since went to {since.session} ({since.turns[0]} at {self.clock.format(since.t)})")

    def _misaimed(self, why: str) -> None:
        raise GatewayRaised(GatewayFailure("error", self.log.step, self.current_event, f"{why}: the deletion cannot be aimed"))

    def _verify_fired(self) -> None:
        """Every `crash_at` the gateway declared a point for fired: one that never did crashed
        nothing, and its scenario would pass having tested no crash (a gateway whose
        `crash_point` call is missing, or a `hit` the run never reaches). Checked at the end."""
        armed = self.harness.points.armed
        for event, entry in self.crash_ats:
            if any(entry is left for left in armed):
                reached = event.hit - entry[1]
                where = f"crash_at (line {event.line})" if event.line else "crash_at"
                raise GatewayRaised(GatewayFailure(
                    "error", self.log.step, where, f"crash point {event.point!r}, armed for its hit {event.hit}, was reached "
                    f"{reached} time{'s' if reached != 1 else ''} after it: the scenario crashed nothing there (a declared "
                    "point must be passed with harness.crash_point)"))

    def _verify_locked(self, since: int, until: int, before: DurableState, step: int, event: str) -> None:
        """A lock the harness injects is verified as applied (a `durable_state` read at its
        start and at its last instant): no row was written while it held. A gateway that
        ignored it would pass every locked-store scenario vacuously."""
        gained = _rows_gained(before, self._durable())
        if not gained:
            return
        sessions = sorted({sid for sid, _role, _turn in gained})
        rows = sum(gained.values())
        raise GatewayRaised(GatewayFailure(
            "error", step, event, f"the gateway ignored the store lock from {self.clock.format(since)} to "
            f"{self.clock.format(until)}: {rows} row{'s' if rows != 1 else ''} of {', '.join(sessions)} written while it held"))
    def _apply(self, step: int, event: Event) -> None:
        self.event_step, self.timer_steps = step, 0
        self.log.step = step
        kind = event.kind  # a property (a look-up by class): read once an event
        self.current_event = f"{kind} (line {event.line})" if event.line else kind
        self.harness.points.since = {}  # a fired point's hit count, as a `crash_at` before this event would count it
        if kind in self.profile.unsupported:
            self.log.add("skipped", event=kind, reason="the gateway declares it cannot take this event")
            return
        if isinstance(event, Command) and event.name in self.profile.unsupported:
            self.log.add("skipped", event=event.name, reason="the gateway declares it has no such command")
            return
        try:  # noqa: SIM105 (once per event: a plain try costs nothing until it catches; suppress() is a call)
            APPLY[kind](self, event, kind)
        except Died:  # a crash point killed it mid-event: the run goes on as after any crash
            pass
        self._sample_resources()

    # -- one handler per kind (`APPLY`) ----------------------------------------------------

    def _crash_at(self, event: CrashAt, kind: str) -> None:
        if event.point not in self.profile.crash_points:
            reason = (f"the harness's own crash point {event.point!r} kills in process only a gateway that declares crash "
                      f"points (--isolate kills any)" if event.point in HARNESS_POINTS
                      else f"the gateway declares no crash point {event.point!r}")
            self.log.add("skipped", event=kind, point=event.point, reason=reason)
        else:
            extra = {} if event.restart_after is None else {"restart_after": event.restart_after}
            self.log.add("crash_at", point=event.point, hit=event.hit, **extra)
            self.harness.points.arm(event.point, event.hit, event.restart_after)
            self.crash_ats.append((event, self.harness.points.armed[-1]))

    def _message(self, event: Message, kind: str) -> None:
        muted = event.muted
        if muted and "muted" in self.profile.unsupported:
            # Still a user turn (the rest of the scenario relies on it), but a plain one: the
            # log says what the gateway was given, so no check judges a visibility it lacks.
            self.log.add("skipped", event="muted", turns=(event.turn,),
                         reason="the gateway declares no muted messages: delivered as a plain message")
            event = replace(event, muted=False)
        self.log.add("message", chat=event.chat, turns=(event.turn,), muted=event.muted, queued=not self.up)
        if event.text != "hello":
            self.said[event.turn] = event.text
        self._to_gateway(event, f"[{event.turn}] {event.text}")

    def _command(self, event: Command, kind: str) -> None:
        ahead = event.order == BEFORE_TIMERS and event.name == "/stop"  # as a stop's record says it (`_stop`)
        self.log.add("command", chat=event.chat, command=event.name, queued=not self.up, **(AHEAD if ahead else {}))
        self._to_gateway(event, None)

    def _delegate(self, event: Delegate, kind: str) -> None:
        self.log.add("delegate", chat=event.chat, turns=(event.turn,), queued=not self.up)
        self.said[event.turn] = DELEGATED
        self._to_gateway(event, None)

    def _advance(self, event: Advance, kind: str) -> None:
        self.log.add("advance")

    def _checkpoint(self, event: Checkpoint, kind: str) -> None:
        self.log.add("checkpoint", name=event.name)
        self._snapshot(event.name)

    def _stop_event(self, event: Sigterm | Crash, kind: str) -> None:
        self._stop(kind, ahead=event.order == BEFORE_TIMERS)

    def _restart_event(self, event: Restart, kind: str) -> None:
        self._restart(event.change)

    def _delete(self, event: DeleteSession | DeleteParent, kind: str) -> None:
        before = self._durable()
        session = dict(before.routing).get(event.chat)
        self._verify_routed(event.chat, session)
        cascade = [] if session is None else self._cascade(kind, session, before)
        self.log.add(kind, chat=event.chat, session=session, **({"cascade": cascade} if kind == "delete_session" else {}))
        if session is not None:
            self._call(kind, self.gateway.delete_session_row, session, isinstance(event, DeleteParent))
            self._verify_deleted(session, cascade, before)

    def _db_locked(self, event: DbLocked, kind: str) -> None:
        until = event.t + event.duration
        self.log.add("db_locked", until=until)
        before = self._durable()
        self._call("db_locked", self.gateway.lock_store, until)
        if until - 1 > event.t:  # the last instant still locked: nothing may have been written
            self.engine.timer(until - 1, self._verify_locked, event.t, until, before, self.log.step, self.current_event)

    def _backend_fail(self, event: BackendFail, kind: str) -> None:
        self.log.add("backend_fail", backend=event.provider, until=event.t + event.duration)
        self.backends[event.provider].down_until = event.t + event.duration

    def _backend_slow(self, event: BackendSlow, kind: str) -> None:
        self.log.add("backend_slow", backend=event.provider, until=event.t + event.duration, delay=event.delay)
        backend = self.backends[event.provider]
        backend.slow_until, backend.slow_delay = event.t + event.duration, event.delay

    # -- the gateway's inbox ---------------------------------------------------------------

    def _to_gateway(self, event: Event, payload: Any) -> None:
        if not self.up:
            self.inbox.append((event, payload, len(self.log) - 1))  # the platform holds it until the gateway is back
            return
        self._dispatch(event, payload)

    def _dispatch(self, event: Event, payload: Any) -> None:
        if isinstance(event, Message):
            self._call(self.current_event, self.gateway.deliver_message, Inbound(self._chat(event.chat), payload, event.muted))
        elif isinstance(event, Command):
            self._call(self.current_event, self.gateway.deliver_command, self._chat(event.chat), event.name)
        elif isinstance(event, Delegate):
            self._call(self.current_event, self.gateway.delegate, self._chat(event.chat), f"[{event.turn}] {DELEGATED}")


DELEGATED = "delegated task"  # a delegate task's text after its tag


def _resume_waiting(records: Sequence[Obs], chat: str, end: Obs, chat_of: dict[str, str]) -> bool:
    """Whether a /resume of the chat that came before `end` was still waiting then, so that it
    took effect after it and may have switched back: behind the chat's turns in flight (until
    their replies), or held while the gateway was down (until the step of the restart that
    delivered it). Read only when an entry looks stale. Kept waiting where unsure (a /stop or a
    stop may have ended its wait): a stale entry may then pass, a live one never fails."""
    unreplied: set[str] = set()
    waiting: list[set[str]] = []  # for each /resume waiting behind turns: those turns
    held = False  # a /resume held while down
    delivered_in: object = None  # the step of the restart that delivered it
    for r in records:
        kind = r.kind
        if kind == "on_session_end" and r == end:
            return bool(waiting) or held or (delivered_in is not None and r.step == delivered_in)
        if kind == "restart" and held:
            held, delivered_in = False, r.step
        if kind == "command":
            if r.chat != chat:
                continue
            if r.d("command") == "/resume":
                if r.d("queued"):
                    held = True
                elif unreplied:
                    waiting.append(set(unreplied))
            continue
        turn = r.turns[0] if r.turns else None
        if turn is None or chat_of.get(turn) != chat:  # the chat's turns, wherever their replies went
            continue
        if kind == "message":
            unreplied.add(turn)
        elif kind == "reply":
            unreplied.discard(turn)
            if waiting:
                waiting = [rest for behind in waiting if (rest := behind - {turn})]
    return False


APPLY: dict[str, Callable[[EventSteps, Any, str], None]] = {
    # What the harness does with each kind of event (`EventSteps._apply`, once the gateway's
    # `Profile.unsupported` has not skipped it).
    "message": EventSteps._message, "command": EventSteps._command, "delegate": EventSteps._delegate,
    "advance": EventSteps._advance, "sigterm": EventSteps._stop_event, "crash": EventSteps._stop_event,
    "restart": EventSteps._restart_event, "delete_session": EventSteps._delete, "delete_parent": EventSteps._delete,
    "db_locked": EventSteps._db_locked, "backend_fail": EventSteps._backend_fail, "backend_slow": EventSteps._backend_slow,
    "checkpoint": EventSteps._checkpoint, "crash_at": EventSteps._crash_at,
}
covered("apply", APPLY)


def _rows_gained(before: DurableState, after: DurableState) -> Counter[tuple[str, str, str | None]]:
    """The stored rows `after` holds beyond `before`, as (session, role, turn), counted. A session
    whose messages are the same (immutable) tuple in both gained nothing and is not counted:
    most of the store, at every lock."""
    had = {s.id: s.messages for s in before.sessions}
    gained: Counter[tuple[str, str, str | None]] = Counter()
    for s in after.sessions:
        old = had.get(s.id, ())
        if old is not s.messages:
            gained += Counter((s.id, m.role, m.turn) for m in s.messages) - Counter((s.id, m.role, m.turn) for m in old)
    return gained

