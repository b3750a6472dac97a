"""The reference gateway's commands and boundaries: /new, /reset and /resume (journaled, so a
crash inside one is finished at the restart), every session's end, and the watcher's tick.
A part of `ReferenceGateway` (`reference_impl.gateway`), which supplies the rest."""

from __future__ import annotations

from reference_impl.cache import Agent
from reference_impl.store import Route, Row
from sim.scenario import Chat


class SessionBoundaries:
    """Commands, ends and the tick (the state they use is `ReferenceGateway`'s)."""

    # -- the chat's queue: what waits behind a turn --------------------------------------

    def waiting_commands(self, key: str) -> list[str]:
        """The commands in the chat's queue, in order (asked after every turn: most chats have none)."""
        queue = self.volatile.queues.get(key)
        return [payload[1] for kind, payload, _arrival in queue if kind == "command"] if queue else []

    def drain_queue(self, key: str) -> None:
        queue = self.volatile.queues.get(key)
        due = key in self.volatile.due_chats
        while queue and key not in self.volatile.busy_chats:
            kind, payload, arrival = queue.popleft()
            if kind == "message":
                self.start_turn(payload, arrival)
            else:
                if due:
                    self.store.command_taken(key)
                self.run_command(*payload)
        if due:
            self.volatile.due_chats.discard(key)
            self.store.clear_due(key)
        if queue is not None and not queue:
            del self.volatile.queues[key]

    def run_command(self, chat: Chat, command: str) -> None:
        self.command(self.route_key(chat), command)

    # -- commands -----------------------------------------------------------------------

    def command(self, key: str, command: str, when: int | None = None) -> None:
        """Carry out a command, journaled: a crash inside it (at `end-recorded` or
        `route-rotated`) is finished at the restart by `finish_commands` (`when`: the time it
        took effect, for one finished so)."""
        route = self.store.route(key)
        if route is None or route.session_id is None:
            self.store.journal_done(key)  # one taken from the due commands: nothing to finish
            return
        self.volatile.command_time = when
        self.store.journal_command(key, command)
        self.notice_boundary_at_command(route, when)
        if command in ("/new", "/reset"):
            if not route.ended:
                self.end_session(route, "new")
        elif command == "/resume":
            self.resume_previous(route)
        self.store.journal_done(key)
        self.volatile.command_time = None
        self.schedule_tick()

    def notice_boundary_at_command(self, route: Route, when: int | None) -> None:
        """A command past the boundary notices it, as a message does (as of when it took effect)."""
        if not route.ended and (reason := self.expiry_reason(route, when)):
            self.end_session(route, reason)

    def finish_commands(self) -> None:
        """After a crash: the commands it cut short, finished once (after the interrupted ends),
        then those a reply had made due. A /resume that had chosen its sessions switches between
        those, wherever it stopped; each resumed life begins when its /resume took effect."""
        for key, command, when, left, target in self.store.journal():
            route = self.store.route(key)
            if command == "/resume" and target is not None and route is not None:
                if route.session_id != target:
                    self.switch_to(route, left, target, when)  # its life began when the /resume took effect
                elif left is not None:
                    self.volatile.memory.switch(left, target)  # the route was switched; its hook had not fired
                self.store.journal_done(key)
            else:
                self.command(key, command, when)
        for key, _command, _when in self.store.due():
            self.store.command_taken(key)
            for key2, command, when, _left, _target in self.store.journal():
                if key2 == key:
                    self.command(key, command, when)

    def resume_previous(self, route: Route) -> None:
        """/resume: switch back to the chat's previous session; the one left behind ends. Past a
        boundary (its successor not begun, as after /new) the previous one is the session that
        just ended: it reopens, and nothing is left behind."""
        left = None if route.ended else route.session_id
        target = route.session_id if route.ended else route.previous_id
        if target is None:
            self.h.note("resume_skipped", chat=route.chat, reason="no previous session")
            return
        self.switch_back(route, left, target)

    def switch_back(self, route: Route, left: str | None, target: str) -> None:
        """Journal the switch, end the session left behind, then switch: its on_session_end
        comes strictly before the switch hook (seed 001)."""
        self.store.journal_switch(route.chat_key, left, target)
        if left is not None:
            self.end_session(route, "switch")
        self.switch_to(route, left, target, self.volatile.command_time)

    def switch_to(self, route: Route, left: str | None, target: str, now: int | None = None) -> None:
        """The rest of a /resume: a new life of `target`, the route to it, the switch hook."""
        self.enter_life(route, left, target, now)
        if left is not None:
            self.volatile.memory.switch(left, target)

    def enter_life(self, route: Route, left: str | None, target: str, now: int | None = None) -> None:
        """A new life of `target`, and the route to it from now (or from `now`)."""
        self.store.bump_life(target)
        now = self.h.clock.now() if now is None else now
        route.previous_id = left if left is not None else route.previous_id
        route.session_id, route.ended, route.anchor, route.last_user = target, False, now, now
        self.store.save_route(route)

    # -- boundaries -------------------------------------------------------------------

    def end_session(self, route: Route, reason: str) -> None:
        """The one way a session ends: full transcript to memory, then finalize; durably once."""
        session = route.session_id
        assert session is not None
        if not self.record_and_rotate(route, session, reason):
            return
        agent = self.volatile.cache.pop(session) or self.volatile.unflushed.pop(session, None)
        if agent is not None and not self.release(agent):
            self.volatile.unflushed[session] = agent
        self.end_memory(session, reason, agent)
        self.finalize(session, reason)  # nothing between the two can crash: both flags in one write
        self.store.mark_end_done(session, "memory_done", "finalize_done")

    def record_and_rotate(self, route: Route, session: str, reason: str) -> bool:
        """Record the end, then rotate the routing entry past it; False if this life had ended
        already (exactly once). The end first: a crash after it is finished at boot."""
        recorded = self.store.record_end(session, reason)
        self.h.crash_point("end-recorded")
        self.rotate(route)
        if recorded:
            self.h.crash_point("route-rotated")
        return recorded

    def rotate(self, route: Route) -> None:
        """The routing entry no longer leads to its session: the chat's next message opens another."""
        route.ended = True
        self.store.save_route(route)

    def end_memory(self, session: str, reason: str, agent: Agent | None) -> None:
        """Memory on_session_end with the full transcript: the live agent's, else the store's."""
        self.volatile.memory.end_session(session, agent.rows if agent is not None else self.stored_transcript(session))

    def stored_transcript(self, session: str) -> list[Row]:
        """An ending session's transcript when no agent holds it: the store's."""
        return self.store.transcript(session)

    def finalize(self, session: str, reason: str) -> None:
        self.h.hooks.on_session_finalize(session, reason)

    def finish_interrupted_ends(self) -> None:
        """A crash between recording an end and its hooks: finish them, once."""
        for session, reason, memory_done, finalize_done in self.store.unfinished_ends():
            if reason != "switch":  # a /resume cut short is finished by `finish_commands`
                self.close_route(session)
            if not memory_done:
                self.end_memory(session, reason, None)
                self.store.mark_end_done(session, "memory_done")
            if not finalize_done:
                self.finalize(session, reason)
                self.store.mark_end_done(session, "finalize_done")

    def close_route(self, session: str) -> None:
        """A crash after an end was recorded and before its routing entry was rotated: the
        entry still points at the ended session, and the chat's next message must not land
        in it."""
        for route in self.store.routes():
            if route.session_id == session and not route.ended and self.store.is_ended(session):
                route.ended = True
                self.store.save_route(route)

    def sweep(self, now: int) -> None:
        """The idle sweep: every agent idle past the TTL leaves the cache, whatever memory it
        still owes (a failed backend's turns are in the outbox, the provider's to retry)."""
        for agent in self.volatile.cache.stale(now):
            self.evict(agent, "idle_ttl")

    def tick(self) -> None:
        """The expiry watcher (of the watched chats), the idle sweep and retries of failed writes."""
        if not self.running:
            return
        watching = self.config.watcher_interval is not None or bool(self.config.finalization_by_chat)
        for route in self.store.routes() if watching else []:
            if route.session_id is None or route.ended or not self.watched(route):
                continue
            if route.chat_key in self.volatile.busy_chats or self.volatile.queues.get(route.chat_key):
                continue  # a turn in flight defers the rotation
            reason = self.expiry_reason(route)
            if reason:
                self.end_session(route, reason)
        self.sweep(self.h.clock.now())
        for session in sorted(self.volatile.unflushed):
            if self.flush(self.volatile.unflushed[session]):
                del self.volatile.unflushed[session]
        self.volatile.memory.retry()
        self.volatile.tick_timer = None
        self.schedule_tick()

