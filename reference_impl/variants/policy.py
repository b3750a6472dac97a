"""Reset-policy bugs, from the hermes-session-reset-policy plugin (seed 002) and CONTRACT I6.

The reference rotates a chat iff its entry is past a boundary when a message arrives (or
the watcher ticks), never mid-turn, from a clock only user messages move, with the daily
boundary in the gateway's local time, and every rotation owes the full boundary hooks.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, timedelta

from conformance.adapter import Inbound
from conformance.observations import first_turn
from reference_impl.cache import Agent, Row
from reference_impl.gateway import Pending, ReferenceGateway
from reference_impl.policy import ResetPolicyEvaluator, chat_key
from reference_impl.store import Route
from sim.clock import MINUTE, from_ms, load_zone, local_instant
from sim.scenario import Chat, GatewayConfig, ResetPolicy


class ResetMidTurn(ReferenceGateway):
    """reset-mid-turn — seed 002 (hermes-session-reset-policy):

    "Past the boundary, and with no turn in flight (the entry's durable active_turn_token
    marker), resets the conversation" — "A turn in flight is never reset; the clock is left
    untouched and the reset re-arms on the next message."

    Here: /new does not wait for the turn in flight. The session ends under the running
    turn, which then completes, is stored and synced in the session that already ended.
    """

    def deliver_command(self, chat: Chat, command: str) -> None:
        request = self.volatile.busy_chats.get(chat_key(chat))
        if command not in ("/new", "/reset") or request is None:
            super().deliver_command(chat, command)
            return
        running = self.volatile.cache.get(self.volatile.inflight[request].session)
        self.run_command(chat, command)  # no deferral
        if running is not None:
            self.volatile.cache.put(running)  # the running agent carries on with its turn


class ResumeRefusedMidTurn(ReferenceGateway):
    """resume-refused-mid-turn — hermes-agent 0.13.0–0.19.0 and its forks (catalog 78):

    `GatewayRunner._handle_message` handles a fixed set of commands while the chat's agent
    runs (/stop, /new, ...) and answers any other one "⏳ Agent is running — `/resume` can't
    run mid-turn" (the forks: `busy_policy` 'reject'); the contract defers a command to the
    turn's reply, never drops it.

    Here: a /resume that arrives while its chat's turn runs is dropped, so the chat stays in
    the session it meant to leave.
    """

    def deliver_command(self, chat: Chat, command: str) -> None:
        if command == "/resume" and chat_key(chat) in self.volatile.busy_chats:
            return
        super().deliver_command(chat, command)


class WatcherEndsBusySession(ReferenceGateway):
    """watcher-ends-busy-session — hermes-agent 0.19.0's expiry watcher (catalog 75):

    `SessionStore._is_session_expired` defers an expiry only for "active background
    processes", and `GatewayRunner._session_expiry_watcher` falls back to `_running_agents`
    "in case the agent is still mid-turn when the expiry fires"; seed 002's plugin instead:
    "A turn in flight is never reset".

    Here: the watcher does not see turns in flight, so it ends a session whose boundary passed
    while its turn runs; the running agent carries on, and the turn completes, is stored and
    synced in the session that already ended.
    """

    def tick(self) -> None:
        volatile = self.volatile
        running = [agent for agent in volatile.cache.agents.values() if agent.busy]
        busy, volatile.busy_chats = volatile.busy_chats, {}  # the watcher sees no turn in flight
        try:
            super().tick()
        finally:
            volatile.busy_chats = busy
        for agent in running:
            if volatile.cache.get(agent.session) is None:
                volatile.cache.put(agent)  # the running agent carries on with its turn


class CommandMovesIdleClock(ReferenceGateway):
    """command-moves-idle-clock — seed 002 (hermes-session-reset-policy):

    "the plugin's own srp_last_user_inbound session metadata, advanced only by messages that
    reach this hook (slash commands and internal/cron traffic never do" — unlike the
    gateway's updated_at, which every command bumps.

    Here: every slash command in a live session stamps the chat's idle clock.
    """

    def deliver_command(self, chat: Chat, command: str) -> None:
        super().deliver_command(chat, command)
        route = self.store.route(chat_key(chat))
        if route is not None and route.session_id is not None and not route.ended:
            route.last_user = self.h.clock.now()
            self.store.save_route(route)


class DailyBoundaryInUtc(ReferenceGateway):
    """daily-boundary-in-utc — seed 002 (hermes-session-reset-policy):

    "at_hour is the server's local time. For a user in another timezone the daily boundary
    can land in the middle of their evening, and the first message after it starts a fresh
    session mid-conversation."

    Here: the daily boundary is computed in UTC, not in the gateway's local time zone.
    """

    def make_policy(self) -> ResetPolicyEvaluator:
        return ResetPolicyEvaluator(load_zone("UTC"))


class _UtcDayPolicy(ResetPolicyEvaluator):
    """The reset-policy rules with the daily boundary after a session's start found from the UTC
    date of that start: a session is past it once that (possibly a day late) instant is."""

    def _window(self, at_hour: int, t: int) -> tuple[int, int]:
        day = from_ms(t, UTC).date()  # the bug: candidate days from the UTC date of `t`, not its local one
        after = next(boundary for boundary in (local_instant(day + timedelta(days=k), at_hour, 0, self.zone)
                                               for k in range(3)) if boundary > t)
        return local_instant(from_ms(after, self.zone).date() - timedelta(days=1), at_hour, 0, self.zone), after

    def expiry_reason(self, policy: ResetPolicy, anchor: int | None, last_user: int | None, now: int) -> str | None:
        reason = super().expiry_reason(policy, anchor, last_user, now)
        if reason == "daily" and anchor is not None and last_user is not None:
            instant = self.expiry_instant(policy, anchor, last_user)
            return reason if instant is not None and instant <= now else None
        return reason


class DailyDayFromUtc(ReferenceGateway):
    """daily-day-from-utc — CONTRACT, Boundaries (daily: the first local `at_hour` after the
    session began, in the gateway's zone); found by sessiongate's sixth audit of lazy gateways
    (2026-12-06: no catalog daily boundary fell where the local date differs from UTC's).

    Here: the daily boundary's candidate days start at the UTC date of the instant asked about,
    then take `at_hour` in the local zone: in a zone behind UTC an evening session (already the
    next day in UTC) skips its own evening's boundary, and the watcher ends it only a day later.
    """

    def make_policy(self) -> ResetPolicyEvaluator:
        return _UtcDayPolicy(self.h.clock.zone)


class _WallClockIdlePolicy(ResetPolicyEvaluator):
    """The reset-policy rules with the idle boundary found on naive local wall time: the last
    user message's local time plus `idle_minutes`, read back in the zone as the first of two
    repeated times (`fold=0`): off by the shift when the window spans a DST change."""

    def _wall(self, policy: ResetPolicy, last_user: int) -> ResetPolicy:
        local = from_ms(last_user, self.zone).replace(tzinfo=None) + timedelta(minutes=policy.idle_minutes)
        at = round(local.replace(tzinfo=self.zone, fold=0).timestamp() * 1000)  # the bug: wall time, not elapsed
        return replace(policy, idle_minutes=(at - last_user) // MINUTE)

    def expiry_reason(self, policy: ResetPolicy, anchor: int | None, last_user: int | None, now: int) -> str | None:
        wall = policy if last_user is None or policy.mode not in ("idle", "both") else self._wall(policy, last_user)
        return super().expiry_reason(wall, anchor, last_user, now)

    def expiry_instant(self, policy: ResetPolicy, anchor: int, last_user: int) -> int | None:
        wall = policy if policy.mode not in ("idle", "both") else self._wall(policy, last_user)
        return super().expiry_instant(wall, anchor, last_user)


class IdleWallClock(ReferenceGateway):
    """idle-wall-clock — CONTRACT, Boundaries (idle: `idle_minutes` after the last user message,
    in elapsed time); found by sessiongate's sixth audit of lazy gateways (2026-12-06: no catalog
    idle window spanned a DST change).

    Here: the idle boundary is the last user message's naive local wall time plus
    `idle_minutes`: a window spanning spring-forward ends an hour early, one spanning fall-back
    an hour early or late.
    """

    def make_policy(self) -> ResetPolicyEvaluator:
        return _WallClockIdlePolicy(self.h.clock.zone)


class TickSkipsWhenAnyBusy(ReferenceGateway):
    """tick-skips-when-any-busy — CONTRACT I1 (an eager session's end is owed within one watcher
    interval of its boundary) and Boundaries (a turn in flight defers its own chat's rotation);
    found by sessiongate's sixth audit of lazy gateways (2026-12-06: no catalog scenario had a
    chat expire while another chat's turn was in flight).

    Here: the expiry watcher defers every chat's end while any chat has a turn in flight.
    """

    def tick(self) -> None:
        volatile = self.volatile
        busy = volatile.busy_chats if volatile is not None else {}
        if not busy:
            super().tick()
            return
        volatile.busy_chats = {**{route.chat_key: "" for route in self.store.routes()}, **busy}  # all look busy
        try:
            super().tick()
        finally:
            volatile.busy_chats = busy


class MessageResetFiresNoHooks(ReferenceGateway):
    """message-reset-fires-no-hooks — seed 002 (hermes-session-reset-policy):

    "When the funnel is unreachable (older gateways, renamed internals) the plugin degrades
    to a bare SessionStore.reset_session() plus the lifecycle hook pair" — the funnel being
    what makes "everything a conversation boundary owes happen: ... the
    on_session_finalize/on_session_reset plugin hooks."

    Here: an expiry noticed by the next message rotates the chat with a bare routing reset:
    the old session gets no on_session_end and no on_session_finalize.
    """

    def start_turn(self, message: Inbound, arrival: int) -> None:
        route = self.store.route(chat_key(message.chat))
        if route is not None and route.session_id is not None and not route.ended and self.expiry_reason(route):
            route.ended = True  # rotated in the routing table only
            self.store.save_route(route)
        super().start_turn(message, arrival)


class NewEndsEndedSession(ReferenceGateway):
    """new-ends-ended-session — issue #21 (same-instant orderings):

    A `/new` "ends the current session" — here, whatever session the chat's routing entry
    names, read without asking whether it has already ended. Met at one instant with the
    watcher's tick that has just finalized that session (the tick first), it ends it again:
    a second `on_session_end` and `on_session_finalize` for one life. With the `/new` first,
    it notices the expiry itself and ends the session once, as the reference does.

    Here: a `/new` on an entry whose session has ended fires both end hooks for it again.
    """

    def command(self, key: str, command: str, when: int | None = None) -> None:
        route = self.store.route(key)
        if command in ("/new", "/reset") and route is not None and route.session_id is not None and route.ended:
            self.end_memory(route.session_id, "new", None)  # the entry's session, ended or not
            self.finalize(route.session_id, "new")
            return
        super().command(key, command, when)


class ResetCommandIgnored(ReferenceGateway):
    """reset-command-ignored — CONTRACT, Boundaries: "explicit: `/new` or `/reset` ends the current
    session at its effective time" (found by sessiongate's fourth audit of lazy gateways,
    2026-12-06: no catalog scenario typed `/reset`, so a gateway that knew only `/new` passed
    the whole catalog; generated seeds draw `/reset` and caught it).

    Here: `/reset` is a command the gateway does not know: it notices a boundary already past,
    as every command does, and ends nothing; only `/new` rotates the chat.
    """

    def command(self, key: str, command: str, when: int | None = None) -> None:
        super().command(key, "/unknown" if command == "/reset" else command, when)


class RestartKeepsOldPolicy(ReferenceGateway):
    """restart-keeps-old-policy — issue #21 (format gaps: a restart can change the configuration):

    A gateway that reads its reset policy once, at first boot, and keeps it in a process-wide
    cache a restart does not clear: an operator changes `session_reset` (idle → none), restarts,
    and sessions still expire by the old policy.

    Here: a restart that brings a new configuration rebuilds from the store under the old one.
    """

    def restart(self, config: GatewayConfig | None = None) -> None:
        super().restart(None)


class RestartConfigResetOnly(ReferenceGateway):
    """restart-config-reset-only — CONTRACT, A restart may change the configuration (the new
    policy judges everything from the stop on); found by sessiongate's sixth audit of lazy
    gateways (2026-12-06: every catalog restart that changed the configuration changed only
    `reset`).

    Here: a restart that brings a new configuration takes only its default `reset`; the
    per-platform and per-chat-type tables stay as the gateway first booted with them.
    """

    def restart(self, config: GatewayConfig | None = None) -> None:
        super().restart(None if config is None else replace(self.config, reset=config.reset))


class PlainRestartRevertsConfig(ReferenceGateway):
    """plain-restart-reverts-config — CONTRACT, A restart may change the configuration (the
    seventh audit of lazy gateways, 2026-12-06):

    "The restart record carries the whole configuration in force from then on".

    Here: a restart without a configuration boots under the one the gateway was first started
    with (`config or initial_config`), not the one in force: a policy an earlier restart
    brought is lost at the next plain restart or crash recovery.
    """

    def restart(self, config: GatewayConfig | None = None) -> None:
        first: GatewayConfig = self.__dict__.setdefault("first_config", self.config)
        super().restart(first if config is None else config)


class StopNoticesNothing(ReferenceGateway):
    """stop-notices-nothing — issue #21 (format gaps: a restart that changes the configuration):

    A command past the chat's boundary notices it, as a message does (docs/contract.md); a
    `/stop` that abandons the chat's turn and looks no further leaves the session live past its
    boundary. Under one policy nothing shows (the watcher ends it within its interval); a crash
    before that and a restart bringing another policy find the session live and keep it, an
    end the old boundary owed at the `/stop`. The reference had this bug (and the example
    gateway), found by generated seed 41 once restarts could change the policy.

    Here: a `/stop` notices no boundary.
    """

    def notice_expiry(self, key: str) -> None:
        return None


class DefaultPolicyMisreported(ReferenceGateway):
    """default-policy-misreported — issue #19 (`reset: default`: a release's own default policy):

    A gateway that reports one default reset policy in its profile and runs another: the
    scenario leaves the policy to it, it says `none` (as the reference does), and its sessions
    reset daily at 04:00 all the same (a built-in default the report does not match). The
    checks judge a `reset: default` scenario by the reported policy, so the report is what it
    owes; a conversation across 04:00 is split where the report says it is one.

    Here: where the gateway's default is in force, its policies reset daily at 04:00.
    """

    def policy_for(self, route: Route) -> ResetPolicy:
        policy = super().policy_for(route)
        return DAILY_AT_FOUR if self.config.reset_default and policy == self.config.reset else policy


DAILY_AT_FOUR = ResetPolicy(mode="daily", at_hour=4)


class GroupSharesOneSession(ReferenceGateway):
    """group-shares-one-session — issue #21 (format gaps: a group chat with several users):

    A gateway that keys a group's routing entry by the group alone: every user in it shares one
    session, so one user's `/new` ends everyone's conversation (Hermes's
    `group_sessions_per_user: false`; its threads share a session across users by default,
    gateway/session.py:build_session_key).

    Here: the routing key of a group or channel chat leaves out the user.
    """

    def route_key(self, chat: Chat) -> str:
        return chat_key(replace(chat, user=None) if chat.chat_type in ("group", "channel") else chat)


class RouteIgnoresPlatform(ReferenceGateway):
    """route-ignores-platform — CONTRACT words ("chat: a route (platform, chat type, chat id,
    thread, user)"; the seventh audit of lazy gateways, 2026-12-06):

    A gateway that keys a routing entry by the platform's chat id alone, as if ids were unique
    across platforms: Telegram chat 42 and Discord chat 42 share one session, and one user's
    `/new` ends the other's conversation.

    Here: every chat's routing key names one platform, whichever it came from (its policy is
    looked up by that key: a scenario with a policy per platform judges it by the default).
    """

    def route_key(self, chat: Chat) -> str:
        return chat_key(replace(chat, platform="any"))


class TimerRearmMissesResume(ReferenceGateway):
    """timer-rearm-misses-resume — CONTRACT I1 (an eager session's end is owed within one
    watcher interval of its boundary; the seventh audit of lazy gateways, 2026-12-06):

    "`/resume` ... reopens the chat's previous session (a new *life* of that id, whose idle
    and daily clocks restart at the resume)".

    Here: the watcher's timer sleeps while nothing is due, and a turn wakes it; a `/resume`
    does not: a session it reopens past its boundary, with nothing else going on, never
    reaches its next boundary's end.
    """

    def command(self, key: str, command: str, when: int | None = None) -> None:
        asleep = self.volatile.tick_timer is None
        super().command(key, command, when)
        timer = self.volatile.tick_timer
        if command == "/resume" and asleep and timer is not None:
            timer.cancel()
            self.volatile.tick_timer = None


class LazyChatStopsTheWatcher(ReferenceGateway):
    """lazy-chat-stops-the-watcher — issue #21 (format gaps: per-chat eager or lazy):

    A gateway that keeps one process-wide "watch" switch and turns it off when any chat is
    configured lazy: every other chat's expiry then waits for that chat's next message too,
    and an end owed within the watcher's interval comes hours late, or never.

    Here: once one chat is lazy, the watcher watches no chat.
    """

    def watched(self, route: Route) -> bool:
        if any(mode == "lazy" for _, mode in self.config.finalization_by_chat):
            return False
        return super().watched(route)


class EagerChatLeftLazy(ReferenceGateway):
    """eager-chat-left-lazy — issue #21 (format gaps: per-chat eager or lazy):

    A lazy gateway that reads the per-chat mode only to turn watching off, never on: a chat
    configured eager in a gateway with no watcher waits for its next message like the rest,
    although the gateway declares the latency it owes such a chat.

    Here: without a gateway-wide watcher, no chat is watched.
    """

    def watched(self, route: Route) -> bool:
        return self.config.watcher_interval is not None and super().watched(route)


class QueuedClockAtAdmission(ReferenceGateway):
    """queued-clock-at-admission — CONTRACT Boundaries: "the user-activity clock moves only with
    user messages, at their arrival" (found by sessiongate's audit of lazy gateways: no catalog
    scenario counted an idle boundary from a message that waited behind a turn; Hermes 0.13–0.19
    fail catalog 69 so, docs/hermes.md).

    Here: a message that waits behind a turn in flight stamps the chat's idle clock (and a new
    session's daily anchor) when it is admitted, not when it arrived: the boundary comes late.
    """

    def start_turn(self, message: Inbound, arrival: int) -> None:
        super().start_turn(message, self.h.clock.now())  # the admission, whenever the message arrived


class QueuedJudgedAtAdmission(ReferenceGateway):
    """queued-judged-at-admission — CONTRACT I6: "a turn lands in a new session iff its chat's
    entry was past a boundary when the turn arrived; never mid-turn (a turn in flight defers the
    rotation)" (found by a gateway author's first hour: an exec: gateway that kept a queued
    message in its session failed generated seed 43, because the oracle judged at admission).

    Here: a message that waited behind a turn in flight is judged when it is admitted: the
    boundary counted from the message before it may have passed by then, though the message
    itself arrived before it, and the chat is rotated under an active conversation.
    """

    def start_turn(self, message: Inbound, arrival: int) -> None:
        route = self.store.route(self.route_key(message.chat))
        if route is not None and route.session_id and not route.ended and (reason := self.expiry_reason(route)):
            self.end_session(route, reason)  # as of now, its admission
        super().start_turn(message, arrival)



class ContextKeptAcrossNew(ReferenceGateway):
    """context-kept-across-new — CONTRACT Words ("a new session (new id) takes the chat over":
    a session is its own transcript) and I6; found by sessiongate's audit of lazy gateways
    (2026-12-06: only the prompt's last text was read, so what else the LLM was sent was not
    judged).

    Here: the agent's conversation is kept per chat: after `/new`, a reset or an expiry the LLM
    is still sent the chat's earlier sessions before the new one's. The store, memory and the
    hooks are the reference's: only what the LLM sees carried over.
    """

    def prompt(self, agent: Agent) -> Sequence[str]:
        kept: dict[str, dict[str, list[Row]]] = self.__dict__.setdefault("kept", {})  # chat key -> session -> its rows
        sessions = kept.setdefault(agent.chat_key, {})
        sessions[agent.session] = agent.rows
        return [row.content for session, rows in sessions.items() if session != agent.session for row in rows] \
            + [row.content for row in agent.rows]


class ServesNewestFirst(ReferenceGateway):
    """serves-newest-first — contract, Boundaries ("The chat is served in arrival order"); found by
    sessiongate's audit of lazy gateways (2026-12-06), where a queue served newest first was
    reported as sessiongate's own error (the oracle assumed the order it checks).

    Here: a message that waits behind a turn goes ahead of the chat's earlier waiting messages.
    """

    def deliver_message(self, message: Inbound) -> None:
        key = self.route_key(message.chat)
        queue = self.volatile.queues.get(key)
        if key in self.volatile.busy_chats or queue:
            queue = self.volatile.queues.setdefault(key, deque())
            first = next((i for i, (kind, _payload, _at) in enumerate(queue) if kind == "message"), len(queue))
            queue.insert(first, ("message", message, self.h.clock.now()))
            return
        super().deliver_message(message)


class CommandNoticesNothing(ReferenceGateway):
    """command-notices-nothing — CONTRACT, Boundaries: "A command past a boundary notices it as a
    message does" (found by sessiongate's fourth audit of lazy gateways, 2026-12-06: no catalog
    scenario sent `/resume` to a lazy chat past its boundary; `stop-notices-nothing` is `/stop`'s).

    Here: `/new`, `/reset` and `/resume` look at no boundary: past one, `/resume` takes the
    session as live, so it neither ends it nor starts a new life of it (with no previous
    session it does nothing; with one, it switches away from the expired session), and the
    chat's next message notices the boundary and rotates the chat.
    """

    def notice_boundary_at_command(self, route: Route, when: int | None) -> None:
        pass


class GroupTurnsSerialized(ReferenceGateway):
    """group-turns-serialized — CONTRACT Words (the seventh audit of lazy gateways, 2026-12-06):

    "two users of one group are two chats of that group".

    Here: a group is served one turn at a time, whoever sent it (the lock is the group's chat
    id): a user's message waits behind another user's turn in flight, in that chat's queue, and
    starts when that turn is answered.
    """

    def deliver_message(self, message: Inbound) -> None:
        chat, volatile = message.chat, self.volatile
        key = self.route_key(chat)
        if chat.chat_type in ("group", "channel") and key not in volatile.busy_chats and not volatile.queues.get(key):
            group = chat_key(replace(chat, user=None))
            for other, request in volatile.busy_chats.items():
                if other != key and chat_key(replace(volatile.inflight[request].chat, user=None)) == group:
                    volatile.queues.setdefault(other, deque()).append(("message", message, self.h.clock.now()))
                    return
        super().deliver_message(message)


class MutedSkipsRotation(ReferenceGateway):
    """muted-skips-rotation — CONTRACT I6 (the seventh audit of lazy gateways, 2026-12-06):

    "Every admitted turn lands in its segment's session; a segment after a boundary has a new
    session" (a muted notification reply differs from a message only in its rows' visibility).

    Here: a muted notification never rotates the chat ("a notification is not the user coming
    back"): one that arrives past the boundary, before the watcher has ended the session, is
    answered in the expired session, and moves its idle clock.
    """

    def start_turn(self, message: Inbound, arrival: int) -> None:
        if not message.muted:
            super().start_turn(message, arrival)
            return
        chat, key = message.chat, self.route_key(message.chat)
        route = self.store.route(key) or Route(key, chat.name, None, None, None, None, False)
        if route.session_id is None or route.ended:  # no boundary noticed: a live session is kept, expired or not
            self.open_session(route, chat, arrival)
        route.last_user = arrival
        self.store.save_route(route)
        agent = self.route_agent(route)
        turn = first_turn(message.text)
        agent.rows.append(Row(turn, "user", message.text, "hidden"))
        agent.busy, agent.last_activity = True, self.h.clock.now()
        request = self.h.llm.request(chat.name, agent.session, self.prompt(agent))
        self.volatile.inflight[request] = Pending(chat, key, agent.session, turn or "")
        self.volatile.busy_chats[key] = request
        self.enforce_cap()


class RouteIgnoresThread(ReferenceGateway):
    """route-ignores-thread — CONTRACT words ("chat: a route (platform, chat type, chat id,
    thread, user)"; the eighth audit of lazy gateways, 2026-12-06):

    A gateway that keys a routing entry by platform, chat type and chat id (and user), leaving
    out the thread: two forum topics of one Telegram group share one session, and a `/new` in
    one topic ends the other's conversation.

    Here: every chat's routing key leaves its thread out.
    """

    def route_key(self, chat: Chat) -> str:
        return chat_key(replace(chat, thread=None))


class StopNoticesFirst(ReferenceGateway):
    """stop-notices-first — docs/contract.md, Boundaries (a command past the boundary notices it,
    as of when it takes effect; a message waiting behind a turn moved the chat's clock when it
    arrived), I1/I6; the eighth audit of lazy gateways, 2026-12-06 (caught only by a dense seed):

    A gateway whose `/stop` notices the boundary before it abandons the turn, by the clock of
    the turn in flight: a message that arrived in time and waits behind it has not moved the
    clock yet, so the session is ended early and that message lands in the next one.

    Here: a `/stop` abandons the turn and notices the boundary before it lets the chat's waiting
    messages in.
    """

    def deliver_command(self, chat: Chat, command: str) -> None:
        if command != "/stop":
            super().deliver_command(chat, command)
            return
        key = self.route_key(chat)
        waiting = self.volatile.queues.pop(key, None)  # held back while the boundary is noticed
        self.stop_turn(key)
        self.notice_expiry(key)
        if waiting:
            self.volatile.queues[key] = waiting
            self.drain_queue(key)
