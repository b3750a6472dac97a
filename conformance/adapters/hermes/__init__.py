"""`hermes`: sessiongate's adapter for the real hermes-agent gateway (written against 0.19.0).

It runs Hermes's own `GatewayRunner`, `SessionStore`, `SessionDB` (SQLite), `AIAgent`,
`MemoryManager`, Hindsight provider and plugin-hook registry; only the LLM, the clock, the
network and fire-and-forget threads are replaced (`hermes_seams`). Hermes is imported on the
first `start()`, after `HERMES_HOME` points at a private directory. How it drives Hermes and
what it cannot drive: docs/hermes.md.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import random
from collections import deque
from collections.abc import Callable
from typing import Any

from conformance.adapter import CrashPointFired, Harness, Inbound, Profile
from conformance.adapters.hermes import forks as hermes_forks
from conformance.adapters.hermes import home as hermes_home
from conformance.adapters.hermes import terms as hermes_terms
from conformance.adapters.hermes.clock import WATCHER_DELAY, FrozenClock
from conformance.observations import DurableState, Resources
from sim.clock import SECOND
from sim.engine import Timer
from sim.scenario import Chat, GatewayConfig, ResetPolicy

UNSUPPORTED = frozenset({
    "delegate", "delete_parent",  # Hermes delegates only inside a parent turn, on background threads (docs/hermes.md)
    "muted",  # no per-message visibility in any release (messages has no such column; gateway/session.py)
    "daily_min_idle_minutes",  # gateway/config.py:SessionResetPolicy has no such knob: it would be ignored
    "several_providers",  # one external memory provider at a time (agent/memory_manager.py:MemoryManager.add_provider)
    "finalization_by_chat",  # one watcher over every session (gateway/run.py:_session_expiry_watcher): no mode per chat
})
ADAPTER_STATE = "hermes-adapter.json"  # in a child's state directory, beside Hermes's home (`remember`)
CLEARING_COMMANDS = ("/stop", "/new", "/reset")  # mid-turn, these discard the queued follow-ups
# Hermes's own boundaries where a crash can part durable from volatile state, fired through the
# seams (`hermes_seams.crash_point`, `Generation.crash_point`): a SessionDB transaction committed
# before the step's routing and reply; the routing index about to be persisted (the session's
# rows already are); a memory end delivered before the hooks after it; a Hindsight batch in the
# backend before the provider's own bookkeeping of it.
CRASH_POINTS = frozenset({"sessiondb-committed", "routing-saving", "memory-ended", "hindsight-retained"})


def _failsafe(method: Callable[..., Any]) -> Callable[..., Any]:
    """An adapter call that raises ends the run: unfreeze the clock, kill the process."""

    @functools.wraps(method)
    def guarded(self: HermesGateway, *args: Any) -> Any:
        try:
            return method(self, *args)
        except CrashPointFired:  # the process died in Hermes's code: the runner's crash() ends it
            raise
        except BaseException:
            self.abandon()
            raise
        finally:
            self.remember()

    return guarded


class HermesGateway:
    """The real Hermes gateway behind the `Gateway` protocol. Registered as `hermes`."""

    def __init__(self) -> None:
        self.generation: Any = None
        self.timer: Timer | None = None
        self.clock: FrozenClock | None = None
        self.fast_yaml: Callable[[bool], None] | None = None
        self.reported_default: ResetPolicy | None = None  # what profile() said `reset: default` means here

    # -- lifecycle ------------------------------------------------------------------------

    def profile(self, config: GatewayConfig) -> Profile:
        """Hermes as it is: an eager watcher sweeping every `watcher_interval` (Hermes's own
        300 s for `lazy`, which it has no mode for; 60 s after boot) whose idle clock restarts
        when a turn's reply is recorded (gateway/session.py:SessionStore.update_session), so an
        end lags the contract's boundary by up to one interval plus one turn; memory sync is
        fire-and-forget and Hindsight buffers in RAM, so no crash durability; what it lacks is
        `UNSUPPORTED`, and a fork without Hindsight has no backend to fail
        (`hermes_forks.unsupported_events`). With `reset: default`, the release's own default policy."""
        interval = hermes_terms.watcher_interval(config)
        self.reported_default = hermes_terms.release_default_policy() if config.reset_default else None
        return Profile("eager", interval + config.turn_latency, crash_durable=False, sweep_interval=interval,
                       unsupported=UNSUPPORTED | hermes_forks.unsupported_events(), reset_default=self.reported_default,
                       crash_points=CRASH_POINTS)

    def start(self, config: GatewayConfig, harness: Harness) -> None:
        self.config, self.h = config, harness
        self.clock = FrozenClock(harness.clock)
        try:
            self.open(config, fresh=True)
            self.boot()
        except BaseException:
            self.abandon()
            raise
        self.remember()

    def open_store(self, config: GatewayConfig, harness: Harness) -> None:
        """A new process after a real kill (`--isolate`: the optional `Gateway.open_store`): Hermes's
        home as the killed process left it on disk, and what the platform knew (each chat's source
        and message ids, the sessions each chat has used, for `/resume`), read from
        `harness.state_dir`; nothing of Hermes's memory. `restart()` boots it."""
        self.config, self.h = config, harness
        self.clock = FrozenClock(harness.clock)
        try:
            self.open(config, fresh=False)
        except BaseException:
            self.abandon()
            raise

    def open(self, config: GatewayConfig, fresh: bool) -> None:
        if fresh:
            hermes_home.prepare(config)
        else:
            hermes_home.home()
        from conformance.adapters.hermes import patches as hermes_patches  # imports Hermes: HERMES_HOME is set by now
        from conformance.adapters.hermes import seams as hermes_seams
        from conformance.adapters.hermes import speed as hermes_speed

        hermes_patches.install()
        self.fast_yaml = hermes_speed.fast_yaml
        import gateway.run
        import gateway.session

        gateway.run._AGENT_CACHE_MAX_SIZE = config.cache_cap
        gateway.run._AGENT_CACHE_IDLE_TTL_SECS = config.idle_ttl / SECOND
        self.uuid_counter = [0]
        self.lock_until = -1
        self.message_ids = 0
        self.sources: dict[str, Any] = {}
        self.chat_by_key: dict[str, Chat] = {}
        self.keys: dict[str, str] = {}  # chat -> its Hermes session key (build_session_key)
        self.history: dict[str, list[str]] = {}  # chat -> the sessions it has used, for /resume
        self.busy: dict[str, Any] = {}  # chat -> the Work of its turn in flight
        self.waiting: dict[str, deque[Any]] = {}  # chat -> follow-ups held while busy
        self._session_key = gateway.session.build_session_key
        self.processes = 0 if fresh else self.recall()  # how many processes ran before this one
        # One stream a scenario, from its seed; a new process draws anew (its own uuid4s, its own jitter).
        again = f"/{self.processes}" if self.processes else ""
        self.jitter = random.Random(f"hermes-write-retry-jitter/{self.h.seed}{again}")
        hermes_seams.AGENT_IDS.seed(f"hermes-agent-ids/{self.h.seed}{again}")

    # -- real crashes: what outlives the process ---------------------------------------------

    def remember(self) -> None:
        """In a child with a state directory (`--isolate`, `exec:`), after each call: what the next
        process needs that is not Hermes's (the platform's chats and message ids; the sessions each
        chat used, as its user would recall them for `/resume`; how many session ids were drawn, as
        uuid4s never repeat). Written whole and renamed: a kill leaves the last call's."""
        state_dir = getattr(getattr(self, "h", None), "state_dir", None)
        if state_dir is None or not hasattr(self, "history"):
            return
        from conformance.transport.wire import chat_to_wire

        chats = [chat_to_wire(chat) for chat in self.chat_by_key.values()]  # first seen first, as the next process rebuilds them
        state = {"processes": self.processes, "uuid_counter": self.uuid_counter[0], "message_ids": self.message_ids,
                 "chats": chats, "history": self.history}
        path = os.path.join(state_dir, ADAPTER_STATE)
        with open(path + ".new", "w", encoding="utf-8") as file:
            json.dump(state, file, sort_keys=True)
        os.replace(path + ".new", path)

    def recall(self) -> int:
        """Read what `remember` wrote; returns this process's number (1 for the first after a kill)."""
        from conformance.transport.wire import chat_from_wire

        state_dir = self.h.state_dir
        if state_dir is None:
            raise RuntimeError("open_store without a state directory: nothing to reopen")
        with open(os.path.join(state_dir, ADAPTER_STATE), encoding="utf-8") as file:
            state = json.load(file)
        self.uuid_counter[0] = state["uuid_counter"]
        self.message_ids = state["message_ids"]
        for chat in state["chats"]:
            self.source(chat_from_wire(chat))
        self.history = {name: list(used) for name, used in state["history"].items()}
        return int(state["processes"]) + 1

    def boot(self) -> None:
        from gateway.config import load_gateway_config
        from gateway.run import GatewayRunner

        from conformance.adapters.hermes.runtime import Generation

        self.clock.enter()
        self.fast_yaml(True)
        self.busy, self.waiting, self.stopping = {}, {}, False
        self.generation = Generation(self.h, self.done, self.uuid_counter, self.chat_by_key.get, lambda: self.lock_until,
                                     self.jitter, self.wake_at)
        self.generation.boot(lambda: GatewayRunner(load_gateway_config()), hermes_home.home())
        if self.config.reset_default:  # the policy the profile reported must be the one Hermes applies
            in_force = hermes_terms.default_policy_of(self.generation.runner.config)
            if in_force != self.reported_default:
                raise RuntimeError(f"Hermes applies {in_force} by default, not the {self.reported_default} its profile reported")
        self.schedule_tick(self.h.clock.now() + WATCHER_DELAY)

    def schedule_tick(self, when: int) -> None:
        self.timer = self.h.scheduler.call_at(when, self.tick)

    @_failsafe
    def tick(self) -> None:
        """One real expiry-watcher sweep (and idle-agent sweep), at Hermes's own period."""
        self.clock.sync()
        self.generation.tick()
        self.observe_routing()
        self.schedule_tick(self.h.clock.now() + hermes_terms.watcher_interval(self.config))

    def end(self, how: str) -> None:
        """SIGTERM (the real stop()) or SIGKILL; either way the process, its timer and its
        frozen clock are gone afterwards."""
        generation = self.generation
        if how == "sigterm":
            self.clock.sync()
            self.stopping = True  # platform connections close during stop(): replies go nowhere
            generation.stop()  # CrashPointFired: the process died in its flushes; crash() ends the rest
        else:
            generation.kill()
        self.generation = None
        self.release()

    def release(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        if self.fast_yaml is not None:
            self.fast_yaml(False)
        if self.clock is not None:
            self.clock.exit()

    def abandon(self) -> None:
        """A call failed, so the run is over: leave nothing frozen, parked or running."""
        generation, self.generation = self.generation, None
        if generation is not None and generation.alive:
            with contextlib.suppress(Exception):
                generation.kill()
        self.release()

    @_failsafe
    def sigterm(self) -> None:
        self.end("sigterm")

    @_failsafe
    def crash(self) -> None:
        self.end("crash")

    @_failsafe
    def restart(self, config: GatewayConfig | None = None) -> None:
        if config is not None:  # an operator's edit while it was down: the new runner reads it
            self.config = config
            hermes_home.write_config(config)
        self.boot()

    # -- inbound ---------------------------------------------------------------------------

    def source(self, chat: Chat) -> Any:
        if chat.name not in self.sources:
            from gateway.config import Platform
            from gateway.session import SessionSource

            platform = Platform(hermes_home.PLATFORMS.get(chat.platform, chat.platform))
            source = SessionSource(platform=platform, chat_id=chat.platform_id, chat_type=chat.chat_type,
                                   user_id=chat.user or f"user-{chat.name}", user_name=chat.user or chat.name,
                                   thread_id=chat.thread)
            self.sources[chat.name] = source
            self.keys[chat.name] = key = self._session_key(source)
            self.chat_by_key[key] = chat
        return self.sources[chat.name]

    def event(self, chat: Chat, text: str) -> Any:
        """The platform's event for a message or command, stamped with the virtual now as a
        platform stamps its arrival: `MessageEvent.timestamp` defaults to the `datetime.now`
        bound when Hermes was imported, the machine's clock, which 0.17.0 stores as the user
        row's time and orders history by."""
        import datetime

        from gateway.platforms.base import MessageEvent

        self.message_ids += 1
        stamp = {"timestamp": datetime.datetime.now()} if _stamped(MessageEvent) else {}  # frozen: the virtual clock's
        return MessageEvent(text=text, source=self.source(chat), message_id=f"m{self.message_ids}", **stamp)

    @_failsafe
    def deliver_message(self, message: Inbound) -> None:
        self.clock.sync()
        chat = message.chat
        event = self.event(chat, message.text)
        if chat.name in self.busy:
            self.waiting.setdefault(chat.name, deque()).append(event)
            self.interrupt_for_follow_up(event)
        else:
            self.dispatch(chat, event)
        self.settle()

    def interrupt_for_follow_up(self, event: Any) -> None:
        """What Hermes's platform layer does with a follow-up while a turn runs
        (gateway/run.py:_handle_active_session_busy_message, default busy_input_mode
        'interrupt'): hold it as pending and interrupt the running agent."""
        from gateway.run import _AGENT_PENDING_SENTINEL

        runner = self.generation.runner
        if runner._busy_input_mode != "interrupt":
            return
        agent = runner._running_agents.get(self._session_key(event.source))
        if agent is not None and agent is not _AGENT_PENDING_SENTINEL:
            agent.interrupt(event.text)

    def dispatch(self, chat: Chat, event: Any) -> None:
        runner = self.generation.runner
        self.busy[chat.name] = self.generation.start("message", chat, runner._handle_message(event))

    @_failsafe
    def deliver_command(self, chat: Chat, command: str) -> None:
        self.clock.sync()
        text = command
        if command == "/resume":
            target = self.resume_target(chat)
            text = f"/resume {target}" if target else command
        if chat.name in self.busy and command in CLEARING_COMMANDS:
            self.waiting.pop(chat.name, None)  # _interrupt_and_clear_session drops the pending follow-up
        runner = self.generation.runner
        self.generation.start("command", chat, runner._handle_message(self.event(chat, text)))
        self.settle()

    @_failsafe
    def deliver_reply(self, request_id: str, text: str) -> None:
        self.clock.sync()
        if self.generation.reply(request_id, text, self.h.llm.usage_of(request_id)):
            self.settle()

    def delegate(self, chat: Chat, text: str) -> None:
        raise NotImplementedError("the hermes adapter declares 'delegate' unsupported")

    def settle(self) -> None:
        self.generation.settle()
        self.observe_routing()

    def done(self, work: Any) -> None:
        """A handler finished: deliver its reply the way the platform adapter would, then
        hand the chat its next held message."""
        if work.kind != "message":
            return
        chat = work.chat
        if self.busy.get(chat.name) is work:
            del self.busy[chat.name]
        text = str(work.task.result() or "")
        waiting = self.waiting.get(chat.name)
        stale = work.interrupted and bool(waiting)  # base.py: "Suppressing stale response"
        if text.strip() and not stale and not self.stopping:
            self.h.platform.send_reply(chat.name, work.session or self.current_session(chat) or "", text)
        if waiting and chat.name not in self.busy:
            self.dispatch(chat, waiting.popleft())

    # -- routing -----------------------------------------------------------------------------

    def current_session(self, chat: Chat) -> str | None:
        runner = self.generation.runner if self.generation is not None else None
        if runner is None:
            return None
        self.source(chat)
        entry = runner.session_store._entries.get(self.keys[chat.name])
        return entry.session_id if entry is not None else None

    def observe_routing(self) -> None:
        if self.generation is None or not self.generation.alive:
            return
        for chat in list(self.chat_by_key.values()):
            session = self.current_session(chat)
            used = self.history.setdefault(chat.name, [])
            if session and (not used or used[-1] != session):
                used.append(session)

    def previous_session(self, chat: Chat) -> str | None:
        """The last session before the current one that the chat's user talked in: Hermes's
        `/new` mints its successor at once (gateway/session.py:SessionStore.reset_session), so
        after two `/new`s the session before the current is an empty one nobody would name."""
        used = self.history.get(chat.name, [])
        if len(used) < 2:
            return None
        spoken = {s.id for s in self.durable_state().sessions if s.messages}
        return next((sid for sid in reversed(used[:-1]) if sid in spoken), used[-2])

    def resume_target(self, chat: Chat) -> str | None:
        """The session the chat's user names in `/resume`: the one before the current, or the
        current one itself once it has ended (CONTRACT, Boundaries: past a boundary, its
        successor not begun, `/resume` goes back to the session that ended). Hermes's expiry
        watcher finalizes an expired session and leaves the chat's entry on it
        (gateway/session.py:SessionStore.set_expiry_finalized), so the session before the
        current is not the one the user was in, and a bare `/resume` only lists named sessions
        (gateway/slash_commands.py:_handle_resume_command)."""
        runner = self.generation.runner if self.generation is not None else None
        if runner is not None:
            self.source(chat)
            store = runner.session_store
            entry = store._entries.get(self.keys[chat.name])
            expired = getattr(store, "_is_session_expired", None)
            if entry is not None and (getattr(entry, "expiry_finalized", False) or (expired is not None and expired(entry))):
                return str(entry.session_id)
        return self.previous_session(chat)

    # -- faults and views -------------------------------------------------------------------

    def delete_session_row(self, session_id: str, keep_children: bool = False) -> None:
        """Another surface (the CLI, the web UI) deletes the row on its own connection."""
        if keep_children:
            raise NotImplementedError("the hermes adapter declares 'delete_parent' unsupported")
        from hermes_state import SessionDB

        from conformance.adapters.hermes.seams import FOREIGN_SURFACE

        token = FOREIGN_SURFACE.set(True)
        try:
            db = SessionDB()
        finally:
            FOREIGN_SURFACE.reset(token)
        try:
            db.delete_session(session_id)
        finally:
            db.close()

    def lock_store(self, until: int) -> None:
        self.lock_until = until

    def wake_at(self, when: int, park: Any) -> None:
        """A write waiting on the lock resumes at `when` (see `Generation.pass_time`)."""
        self.h.scheduler.call_at(when, self.wake_writer, park)

    @_failsafe
    def wake_writer(self, park: Any) -> None:
        generation = self.generation
        if generation is None or park.work.generation is not generation or park.outcome is not None:
            return  # its process is gone (a crash or stop woke it already)
        self.clock.sync()
        generation.wake(park, "reply")
        self.settle()

    def durable_state(self) -> DurableState:
        """state.db read directly, as another surface would (`hermes_terms.durable_state`)."""
        return hermes_terms.durable_state(self.chat_by_key)

    def resources(self) -> Resources:
        generation = self.generation
        if generation is None or not generation.alive:
            return Resources()
        runner = generation.runner
        with runner._agent_cache_lock:
            entries = list(runner._agent_cache.items())
        cached = tuple((hermes_terms.cached_session(entry), key in runner._running_agents) for key, entry in entries)
        return Resources(cached, len(self.busy) + sum(1 for w in generation.works if w.kind == "watcher"))


@functools.cache
def _stamped(event_class: type) -> bool:
    """Whether the release's `MessageEvent` has a `timestamp` field (every release to 0.19.0
    and axisrow; iot's events carry none)."""
    import dataclasses

    return any(f.name == "timestamp" for f in dataclasses.fields(event_class))


def hermes(version: str | None = None) -> HermesGateway:
    """Entry point `hermes` of the `sessiongate.gateways` group. `hermes:0.19` also insists
    that the installed Hermes is a 0.19 release (`hermes:axisrow-0.20`: of that fork;
    the distribution is detected by `hermes_forks.installed`)."""
    found = hermes_forks.installed()
    if version is not None and not found.matches(version):
        raise ValueError(f"gateway hermes:{version} asked for, but {hermes_forks.describe()} is installed")
    if found.fork == "iot":  # its process-wide threads, before the run counts its own
        from conformance.adapters.hermes import seams  # noqa: F401  (HERMES_HOME first, then Hermes)

        hermes_forks.start_process_threads()
    return HermesGateway()


def _expectation_names(version: str) -> list[str]:
    """The installed release's expectations: 'hermes-0.19.0', then 'hermes-0.19'; for a fork
    'hermes-axisrow-0.20.1.2', then 'hermes-axisrow-0.20' (see `registry.expectation_names`)."""
    try:
        return hermes_forks.installed().expectation_names()
    except hermes_forks.HermesNotInstalled:
        return [f"hermes-{version}" if version else "hermes"]


hermes.expectation_names = _expectation_names  # type: ignore[attr-defined]
