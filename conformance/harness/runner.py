"""Runs one scenario against one gateway: events in, observations out, then the checks.

scenario -> engine on a virtual clock -> adapter calls -> observation log -> checks -> verdicts.
The runner ends every scenario with quiescence: restart a stopped gateway, advance past
every boundary, watcher tick and sweep, SIGTERM, snapshot the durable state, check.
"""

from __future__ import annotations

import copy
import gc
import signal
import sys
import threading
import time
import traceback
from collections import Counter, deque
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field, replace
from typing import Any

from conformance.adapter import CrashPointFired, Gateway, Harness, Inbound, Profile, Scheduler
from conformance.features import scenario_features
from conformance.harness import values
from conformance.harness.errors import GatewayTimeout, Interrupted, RemoteGatewayError, raise_interrupted
from conformance.harness.spill import SPILL_AT, ObservationLog
from conformance.harness.verdict import GatewayFailure, Verdict
from conformance.observations import CacheReplay, DurableState, Obs, Resources, ResourcesDeltas, log_text
from conformance.observers import FakeLLM, HookBus, MemoryBackend, Platform, RecordingProvider
from sim.clock import TZDATA, VirtualClock
from sim.engine import Engine, EventBudgetExceeded
from sim.scenario import (
    BEFORE_TIMERS,
    Advance,
    BackendFail,
    BackendSlow,
    Chat,
    Checkpoint,
    Command,
    ConfigChange,
    Crash,
    CrashAt,
    DbLocked,
    Delegate,
    DeleteParent,
    DeleteSession,
    Event,
    Message,
    Restart,
    Scenario,
    Sigterm,
)

DEFAULT_BUDGET = 2_000_000

# `fuzz --crash-points`: FoundationDB's swarm. Each declared point is enabled with
# SWARM_ENABLE_PERCENT, then fires at each hit with a per-point chance from SWARM_FIRE_PERCENT;
# at most SWARM_MAX_FIRES fires a run, so a run ends and each fire stays one event to shrink.
SWARM_ENABLE_PERCENT = 50
SWARM_FIRE_PERCENT = (2, 10, 30, 100)
SWARM_MAX_FIRES = 2
SWARM_DOWNTIME_SECONDS = (5, 60)  # a fired point's process is back this long after (as a crash/restart pair is)


class Swarm:
    """Which crash points fire in one generated run, drawn from the seed's own random stream
    (`derive_seed(seed, 'crash-points')`: generation's stream is untouched, so a seed's
    scenario is the same with crash points on or off). Each fire is kept as (step, point, hit)
    so `with_fires` can write it down as a `crash_at` event: the file replays it exactly."""

    def __init__(self, seed: int, declared: frozenset[str]) -> None:
        import random

        from sim.engine import derive_seed

        rng = random.Random(derive_seed(seed, "crash-points"))
        self._rng = rng
        self.enabled: dict[str, int] = {}
        for point in sorted(declared):
            on = rng.randrange(100) < SWARM_ENABLE_PERCENT
            chance = SWARM_FIRE_PERCENT[rng.randrange(len(SWARM_FIRE_PERCENT))]
            if on:
                self.enabled[point] = chance
        self.fires: list[tuple[int, str, int, int | None]] = []
        self.run: Run | None = None

    def __call__(self, point: str) -> tuple[bool, int | None]:
        chance = self.enabled.get(point)
        if chance is None or len(self.fires) >= SWARM_MAX_FIRES or self._rng.randrange(100) >= chance:
            return False, None
        assert self.run is not None
        down = self._rng.randint(*SWARM_DOWNTIME_SECONDS) * 1000
        self.fires.append((self.run.event_step, point, self.run.harness.points.since[point], down))
        return True, down


def with_fires(scenario: Scenario, fires: Sequence[tuple[int, str, int, int | None]]) -> Scenario:
    """`scenario` with each fire written as the `crash_at` that arms it: just before the
    event whose step it fired in, or whose timers' (a hit counts from the start of that event;
    a fire in quiescence counts from the start of the last event), in that event's order among
    the timers of its instant (so it arms before the same callbacks the event came before)."""
    from dataclasses import replace

    events = list(scenario.events)
    for inserted, (step, point, hit, down) in enumerate(fires):
        index = min(step, len(scenario.events)) - 1 + inserted
        where = events[index]  # the event whose step, or whose timers' step, the point fired in
        if isinstance(where, Advance):  # it calls the gateway nothing: arm just after it (a file
            index += 1  # cannot say 'advance 0', which a crash_at before it would make of it)
        events.insert(index, CrashAt(where.t, point=point, hit=hit, restart_after=down, order=where.order))
    return replace(scenario, events=tuple(events))


@dataclass
class RunResult:
    """Everything a run produced: the log (the final durable state is its last `durable`
    record) and the verdicts."""

    scenario: Scenario
    gateway: str
    profile: Profile
    records: Sequence[Obs]  # a list, or a spilled log read back from its file (conformance.harness.spill)
    verdicts: dict[str, Verdict] = field(default_factory=dict)
    failure: GatewayFailure | None = None
    expected: dict[str, Any] = field(default_factory=dict)  # check -> the expectations entry that applied (suite)

    def log_text(self) -> str:
        return log_text(self.records)

    @property
    def skipped(self) -> str:
        """Why the whole scenario was not judged ('' if it was): its config uses a feature the
        gateway declares unsupported."""
        head = self.records[1] if len(self.records) > 1 else None
        return str(head.d("reason")) if head is not None and head.kind == "skipped" and head.d("scope") == "scenario" else ""

    @property
    def passed(self) -> bool:
        return self.failure is None and all(v.status in ("pass", "skip", "xfail") for v in self.verdicts.values())


class _Died(Exception):
    """A crash point fired and the runner has crashed the gateway: unwinds the runner's own
    step (a timer, an event, a restart) to where the run goes on."""


# Not steps where a crash point fires: views, crash itself, and boot (start, restart). A crash
# inside a restart's recovery would leave the platform's held messages held past the `restart`
# record, where the checks take them as delivered: that needs the oracle's say first.
_NO_POINTS = frozenset({"profile", "resources", "durable_state", "close", "crash", "start", "restart"})


class _GatewayRaised(Exception):
    """The gateway failed a call: carries its GatewayFailure out to `Run.execute`."""

    def __init__(self, failure: GatewayFailure) -> None:
        super().__init__(failure.describe())
        self.failure = failure


def exception_text(err: BaseException) -> str:
    """`Type: message`, even for an exception of the gateway's whose `__str__` raises."""
    try:
        message = str(err)
    except Exception as broken:
        message = f"<its message raised {type(broken).__name__}>"
    return f"{type(err).__name__}: {message}"


def _short_traceback(err: BaseException) -> tuple[str, ...]:
    frames = traceback.extract_tb(err.__traceback__)[-4:]
    lines = [f"{frame.filename.rsplit('/', 2)[-1]}:{frame.lineno} in {frame.name}" for frame in frames]
    return (*lines, exception_text(err))


def scenario_detail(scenario: Scenario, profile: Profile) -> dict[str, Any]:
    """The first log record: everything the checks need to know about the inputs."""
    from sim.writer import scenario_document  # the canonical document form, shared with files

    document = scenario_document(scenario)
    return {
        "name": scenario.name,
        "seed": scenario.seed,
        "zone": scenario.zone,
        "start": scenario.start,
        "config": document["config"],
        "chats": document["chats"],
        "profile": profile.to_detail(),
        "tzdata": TZDATA,  # the tz database every zone of the run came from (sim.clock.load_zone)
    }


VERIFY_EVERY = 64  # samples through `resources_delta` between two checks of it against `resources()`


def resources_hook(gateway: object) -> Callable[[], Any] | None:
    """The gateway's optional `resources_delta`, unless a subclass redefines `resources()` below
    the class that defines the hook: its changes would not be what its `resources()` says."""
    hook = getattr(gateway, "resources_delta", None)
    if hook is None:
        return None
    mro = type(gateway).__mro__
    said, hooked = (next((k for k in mro if name in vars(k)), None) for name in ("resources", "resources_delta"))
    if said is not None and hooked is not None and said is not hooked and issubclass(said, hooked):
        return None
    return hook  # type: ignore[no-any-return]


class ResourcesChanges:
    """The runner's side of the optional `Gateway.resources_delta` hook: the cache as its
    answers rebuild it (`CacheReplay`), and whether it moved since the last whole state."""

    __slots__ = ("hook", "moved", "replay", "samples")

    def __init__(self, gateway: Gateway) -> None:
        self.hook = resources_hook(gateway)
        self.replay = CacheReplay()
        self.moved = False
        self.samples = 0


class Run:
    """One scenario in flight. Use `run_scenario`."""

    def __init__(self, scenario: Scenario, gateway: Gateway, name: str, budget: int, spill_at: int | None = SPILL_AT) -> None:
        self.scenario = scenario
        self.gateway = gateway
        self.name = name
        self.clock = VirtualClock(scenario.start, scenario.zone)
        self.engine = Engine(self.clock, seed=scenario.seed, budget=budget)
        self.log = ObservationLog(self.clock.now, spill_at)
        self.profile = Profile()  # replaced by what the gateway declares, first thing in execute()
        self.up = False
        self.inbox: deque[tuple[Event, Any]] = deque()  # what arrived while the gateway was down
        self.resources = ResourcesDeltas()  # what changed since the last sample
        self.changes: ResourcesChanges | None = None  # the gateway's own account of them: known after start
        self.current_event = "start"
        # The log's step: the scenario event being applied (1..N; 0 boot, N+1 quiescence), or
        # "k.n" for the n-th callback (a timer, an LLM answer, a crash point's restart) that ran
        # since event k began: a record a timer produced carries its own step, not event k's.
        self.event_step = 0
        self.timer_steps = 0  # callbacks since event `event_step` began
        self.final = False  # the final SIGTERM of quiescence: no crash point fires in it
        self.crash_ats: list[tuple[CrashAt, list[Any]]] = []  # each armed `crash_at`, with its entry in `points.armed`
        self.chats = {chat.name: chat for chat in reversed(scenario.chats)}  # the first of a name, as Scenario.chat
        backends = {"recorder": MemoryBackend("recorder", self.log, self.clock.now)}
        for spec in scenario.config.providers:
            backends[spec.name] = MemoryBackend(spec.name, self.log, self.clock.now)
        self.backends = backends  # the harness's own: a gateway may rebind what `Harness.backends` holds
        usage_by_turn = {e.turn: e.usage for e in scenario.events if isinstance(e, Message) and e.usage is not None}
        self.llm = FakeLLM(self.log, self.engine, scenario.config.turn_latency, self._deliver_reply,
                           scenario.config.usage, usage_by_turn)
        self.harness = Harness(
            clock=self.clock,
            scheduler=Scheduler(self.engine, self._timer),
            llm=self.llm,
            platform=Platform(self.log),
            recorder=RecordingProvider(self.log, backends["recorder"]),
            backends=dict(backends),
            hooks=HookBus(self.log),
            log=self.log,
            seed=scenario.seed,
        )
        self.config = scenario.config  # with the gateway's default reset policy in force, once it is known
        self.swarm: Swarm | None = None  # the seeded crash-point swarm of `fuzz --crash-points`, if any
        self.swarm_seed: int | None = None

    # -- calling the gateway -------------------------------------------------------------

    def _call(self, what: str, fn: Callable[..., Any], *args: Any) -> Any:
        """`fn(*args)` for the gateway: whatever it raises, SystemExit, KeyboardInterrupt and any
        other BaseException included, is its error at this step, never a crash or an exit of the
        run. Only the harness's own `Interrupted` (its signal handler) and budget pass through."""
        points = self.harness.points
        points.live = what not in _NO_POINTS and not self.final
        try:
            result = fn(*args)
        except CrashPointFired as fired:
            points.live = False
            if fired.point != points.fired:  # raised by the gateway itself, not the harness: its error
                raise _GatewayRaised(GatewayFailure("error", self.log.step, what, exception_text(fired))) from None
            self._died_at(fired.point)
            raise _Died(fired.point) from None
        except (EventBudgetExceeded, _GatewayRaised, Interrupted, _Died):
            raise
        except GatewayTimeout as err:
            raise _GatewayRaised(GatewayFailure("timeout", self.log.step, what, str(err))) from err
        except RemoteGatewayError as err:
            raise _GatewayRaised(GatewayFailure("error", self.log.step, what, str(err), err.traceback)) from err
        except BaseException as err:  # the gateway under test raised: an error verdict, never a crash
            if points.fired is not None:
                raise self._went_on(what, err) from err
            raise _GatewayRaised(
                GatewayFailure("error", self.log.step, what, exception_text(err), _short_traceback(err))
            ) from err
        finally:
            points.live = False
        if points.fired is not None:
            raise self._went_on(what, None)
        return result

    def _went_on(self, what: str, err: BaseException | None) -> _GatewayRaised:
        """A dead process does not run on: a gateway that caught its crash point's exception."""
        how = f"raised {exception_text(err)} instead" if err is not None else "returned normally"
        return _GatewayRaised(GatewayFailure("error", self.log.step, what,
                                             f"crash point {self.harness.points.fired!r} fired, and the gateway caught "
                                             f"CrashPointFired and {how}: a gateway must let it unwind the step"))

    def _died_at(self, point: str) -> None:
        """The process died at `point`: exactly a `crash` at this instant (the gateway's
        `crash()` drops what the dead process held), logged with the point's name."""
        self.log.add("crash", point=point)
        self.llm.epoch += 1
        self.harness.scheduler.void()
        self.up = False
        points = self.harness.points
        points.fired = None
        if points.restart_after is not None:
            self.engine.call_later(points.restart_after, self._restart_after_point)
        self._call("crash", self.gateway.crash)
        self._snapshot("crash")

    def _restart_after_point(self) -> None:
        """`crash_at`'s `restart_after`: the process is back (unless a scripted restart was first)."""
        if not self.up:
            self._timer_step()
            self._restart()

    def _timer_step(self) -> None:
        """A callback is about to call the gateway: its records get a step of their own ("k.n")."""
        self.timer_steps += 1
        self.log.step = f"{self.event_step}.{self.timer_steps}"

    def _timer(self, what: str, fn: Callable[..., Any], *args: Any) -> Any:
        """The scheduler's guard: a gateway timer fires in a step of its own, then runs as `_call`."""
        self._timer_step()
        return self._call(what, fn, *args)

    def _answer(self, what: str, check: Callable[[Any], Any], fn: Callable[..., Any], *args: Any) -> Any:
        """`_call`, and the answer validated (`conformance.harness.values`, as over the wire): a value of
        the wrong shape is the gateway's error at this step, naming the method and what was wrong."""
        answer = self._call(what, fn, *args)
        try:
            return check(answer)
        except values.BadValue as err:
            message = f"bad value in answer to {what}: {err}"
        except Exception as err:  # an answer whose own methods raise (a __eq__, an __iter__)
            message = f"bad value in answer to {what}: {exception_text(err)}"
        raise _GatewayRaised(GatewayFailure("error", self.log.step, what, message))

    def _chat(self, name: str) -> Chat:
        """A copy of the chat for each call, as a child process decodes one: what a gateway
        changes in it never reaches the harness, the log or the gateway's next call."""
        chat = self.chats[name]
        fresh = object.__new__(Chat)  # copy.copy, without its reduce protocol: a copy per message
        fresh.__dict__.update(chat.__dict__)
        return fresh

    def _deliver_reply(self, request_id: str, text: str) -> None:
        if self.up:
            self._timer_step()
            self._call(f"reply {request_id}", self.gateway.deliver_reply, request_id, text)

    def _sample_resources(self) -> None:
        if self.changes is None:  # an exec: child says in its hello whether it has the hook
            self.changes = ResourcesChanges(self.gateway)
        if self.changes.hook is not None:
            self._sample_changes()
            return
        detail = self.resources.detail(self._answer("resources", self._valid_resources, self.gateway.resources))
        if detail is not None:
            self.log.add("resources", **detail)

    def _sample_changes(self) -> None:
        """`_sample_resources` through the gateway's `resources_delta` hook: the changes it
        answers are logged as they come (validated), a whole state is diffed as a `resources()`
        sample. While changes have come since the last whole state, every `VERIFY_EVERY`th sample
        and the last are held to `resources()`: a hook that disagrees with it is the gateway's
        error, so it can never hide what `resources()` would show."""
        changes = self.changes
        assert changes is not None and changes.hook is not None
        answer = self._answer("resources_delta", self._valid_change, changes.hook)
        if type(answer) is dict:
            if answer:
                if not changes.moved:  # from the last whole state on
                    changes.replay = CacheReplay()
                    changes.replay.apply((self.resources.last or Resources()).to_detail())
                    changes.moved = True
                changes.replay.apply(answer)
                self.log.add("resources", **answer)
        elif answer is not None and (detail := self.resources.detail(answer)) is not None:
            self.log.add("resources", **detail)
        changes.samples += 1
        if changes.moved and (changes.samples % VERIFY_EVERY == 0 or self.final):
            said = changes.replay.resources()
            now = self._answer("resources", values.resources, self.gateway.resources)
            if now != said:
                differ = [f"{sid} {'busy' if busy else 'idle'}" for sid, busy in sorted(set(said.cached) ^ set(now.cached))]
                what = ", ".join(differ[:3]) + (", …" if len(differ) > 3 else "") if differ else "the order of the agents"
                if now.running != said.running:
                    what = f"running {said.running} against {now.running}" + (f"; {what}" if differ else "")
                raise _GatewayRaised(GatewayFailure("error", self.log.step, "resources_delta",
                                                    f"the changes resources_delta() answered disagree with resources() "
                                                    f"({what})"))

    def _valid_change(self, answer: Any) -> dict[str, Any] | Resources | None:
        """`values.resources_change`; a whole state as `_valid_resources`, diffed against the
        cache the changes since the last one built."""
        if not isinstance(answer, Resources):
            return values.resources_change(answer)
        changes = self.changes
        assert changes is not None
        if changes.moved:
            self.resources.last, self.resources.last_repeats = changes.replay.resources(), changes.replay.listed is not None
            changes.moved = False
        return self._valid_resources(answer)

    def _valid_resources(self, answer: Any) -> Resources:
        """`values.resources`, skipped when the cache is the last sample's (compared in C): it is
        asked after every event and timer."""
        last = self.resources.last
        if (last is not None and type(answer) is Resources and type(answer.cached) is tuple
                and answer.cached == last.cached and type(answer.running) is int and answer.running >= 0):
            return last if answer.running == last.running else Resources(last.cached, answer.running)
        return values.resources(answer)

    def _snapshot(self, label: str) -> None:
        self.log.add("durable", label=label, **self._durable().to_detail())

    def _durable(self) -> DurableState:
        state: DurableState = self._answer("durable_state", values.durable_state, self.gateway.durable_state)
        return state

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
        row is gone, and every row its cascade takes, and no other. A gateway that ignored the
        deletion would otherwise pass every deletion scenario vacuously; one that took more
        would have the checks judge rows it lost as if they were kept."""
        gone, after = {session, *cascade}, {s.id for s in self._durable().sessions}
        still = sorted(sid for sid in after if sid in gone)
        extra = sorted(s.id for s in before.sessions if s.id not in after and s.id not in gone)
        if still:
            what = "its row is still in the store" if session in still else (
                f"the row{'s' if len(still) > 1 else ''} of {', '.join(still)}, which its cascade takes, "
                f"{'are' if len(still) > 1 else 'is'} still in the store")
            message = f"the gateway ignored the deletion of {session}: {what}"
        elif extra:
            message = f"the gateway's deletion of {session} also removed {', '.join(extra)}, which its cascade does not take"
        else:
            return
        raise _GatewayRaised(GatewayFailure("error", self.log.step, self.current_event, message))

    def _verify_routed(self, chat: str, session: str | None) -> None:
        """A deletion is aimed by the gateway's routing (its own word), so the routing is held to
        the log, at a deletion: a chat whose session is live by the log (its last answer in it,
        no end since) must have an entry; and an entry naming a session the log shows ended,
        while the chat's turns since went to another and no `/resume` could have switched back,
        is stale. A gateway that hid its routing, or never updated it, would evade every
        deletion fault (the deletion would miss, or take an ended session and spare the live one)."""
        messages = {e.turn for e in self.scenario.events if isinstance(e, Message)}
        records = self.log.records
        if session is None:
            ended: set[str | None] = set()
            for r in reversed(records):
                if r.kind == "on_session_end":
                    ended.add(r.session)
                elif r.kind == "reply" and r.chat == chat and r.turns and r.turns[0] in messages:
                    if r.session in ended:
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
            if r.kind in ("reply", "llm_request") and r.chat == chat and r.turns and r.turns[0] in messages:
                if r.session == session:
                    end = None  # reopened (a /resume past its boundary): live again
                    continue
                since = since or r
        if end is not None and since is not None:
            self._misaimed(f"the gateway's routing names {session} for {chat}, which ended at {self.clock.format(end.t)}; "
                           f"the chat's turns since went to {since.session} ({since.turns[0]} at {self.clock.format(since.t)})")

    def _misaimed(self, why: str) -> None:
        raise _GatewayRaised(GatewayFailure("error", self.log.step, self.current_event, f"{why}: the deletion cannot be aimed"))

    def _verify_fired(self) -> None:
        """Every `crash_at` the gateway declared a point for fired: one that never did crashed
        nothing, and its scenario would pass having tested no crash (a gateway whose
        `crash_point` call is missing, or a `hit` the run never reaches). Checked at the end."""
        armed = self.harness.points.armed
        for event, entry in self.crash_ats:
            if any(entry is left for left in armed):
                reached = event.hit - entry[1]
                where = f"crash_at (line {event.line})" if event.line else "crash_at"
                raise _GatewayRaised(GatewayFailure(
                    "error", self.log.step, where, f"crash point {event.point!r}, armed for its hit {event.hit}, was reached "
                    f"{reached} time{'s' if reached != 1 else ''} after it: the scenario crashed nothing there (a declared "
                    "point must be passed with harness.crash_point)"))

    def _verify_locked(self, since: int, until: int, before: Counter[tuple[str, str, str | None]], step: int,
                       event: str) -> None:
        """A lock the harness injects is verified as applied (a `durable_state` read at its
        start and at its last instant): no row was written while it held. A gateway that
        ignored it would pass every locked-store scenario vacuously."""
        gained = _row_counts(self._durable()) - before
        if not gained:
            return
        sessions = sorted({sid for sid, _role, _turn in gained})
        rows = sum(gained.values())
        raise _GatewayRaised(GatewayFailure(
            "error", step, event, f"the gateway ignored the store lock from {self.clock.format(since)} to "
            f"{self.clock.format(until)}: {rows} row{'s' if rows != 1 else ''} of {', '.join(sessions)} written while it held"))

    # -- applying scenario events --------------------------------------------------------

    def _apply(self, step: int, event: Event) -> None:
        self.event_step, self.timer_steps = step, 0
        self.log.step = step
        self.current_event = f"{event.kind} (line {event.line})" if event.line else event.kind
        self.harness.points.since = {}  # a fired point's hit count, as a `crash_at` before this event would count it
        kind = event.kind
        if kind in self.profile.unsupported:
            self.log.add("skipped", event=kind, reason="the gateway declares it cannot take this event")
            return
        if isinstance(event, Command) and event.name in self.profile.unsupported:
            self.log.add("skipped", event=event.name, reason="the gateway declares it has no such command")
            return
        with suppress(_Died):  # a crash point killed it mid-event: the run goes on as after any crash
            self._apply_event(event, kind)
        self._sample_resources()

    def _apply_event(self, event: Event, kind: str) -> None:
        if isinstance(event, CrashAt):
            if event.point not in self.profile.crash_points:
                self.log.add("skipped", event=kind, reason=f"the gateway declares no crash point {event.point!r}")
            else:
                extra = {} if event.restart_after is None else {"restart_after": event.restart_after}
                self.log.add("crash_at", point=event.point, hit=event.hit, **extra)
                self.harness.points.arm(event.point, event.hit, event.restart_after)
                self.crash_ats.append((event, self.harness.points.armed[-1]))
        elif isinstance(event, Message):
            muted = event.muted
            if muted and "muted" in self.profile.unsupported:
                # Still a user turn (the rest of the scenario relies on it), but a plain one: the
                # log says what the gateway was given, so no check judges a visibility it lacks.
                self.log.add("skipped", event="muted", turns=(event.turn,),
                             reason="the gateway declares no muted messages: delivered as a plain message")
                event = replace(event, muted=False)
            self.log.add("message", chat=event.chat, turns=(event.turn,), muted=event.muted, queued=not self.up)
            self._to_gateway(event, f"[{event.turn}] {event.text}")
        elif isinstance(event, Command):
            self.log.add("command", chat=event.chat, command=event.name, queued=not self.up)
            self._to_gateway(event, None)
        elif isinstance(event, Delegate):
            self.log.add("delegate", chat=event.chat, turns=(event.turn,), queued=not self.up)
            self._to_gateway(event, None)
        elif isinstance(event, Advance):
            self.log.add("advance")
        elif isinstance(event, Checkpoint):
            self.log.add("checkpoint", name=event.name)
            self._snapshot(event.name)
        elif isinstance(event, Sigterm):
            self._stop("sigterm")
        elif isinstance(event, Crash):
            self._stop("crash")
        elif isinstance(event, Restart):
            self._restart(event.change)
        elif isinstance(event, (DeleteSession, DeleteParent)):
            before = self._durable()
            session = dict(before.routing).get(event.chat)
            self._verify_routed(event.chat, session)
            cascade = [] if session is None else self._cascade(kind, session, before)
            self.log.add(kind, chat=event.chat, session=session, **({"cascade": cascade} if kind == "delete_session" else {}))
            if session is not None:
                self._call(kind, self.gateway.delete_session_row, session, isinstance(event, DeleteParent))
                self._verify_deleted(session, cascade, before)
        elif isinstance(event, DbLocked):
            until = event.t + event.duration
            self.log.add("db_locked", until=until)
            before = _row_counts(self._durable())
            self._call("db_locked", self.gateway.lock_store, until)
            if until - 1 > event.t:  # the last instant still locked: nothing may have been written
                self.engine.timer(until - 1, self._verify_locked, event.t, until, before, self.log.step, self.current_event)
        elif isinstance(event, BackendFail):
            self.log.add("backend_fail", backend=event.provider, until=event.t + event.duration)
            self.backends[event.provider].down_until = event.t + event.duration
        elif isinstance(event, BackendSlow):
            self.log.add("backend_slow", backend=event.provider, until=event.t + event.duration, delay=event.delay)
            backend = self.backends[event.provider]
            backend.slow_until, backend.slow_delay = event.t + event.duration, event.delay

    def _to_gateway(self, event: Event, payload: Any) -> None:
        if not self.up:
            self.inbox.append((event, payload))  # the platform holds it until the gateway is back
            return
        self._dispatch(event, payload)

    def _dispatch(self, event: Event, payload: Any) -> None:
        if isinstance(event, Message):
            self._call(self.current_event, self.gateway.deliver_message, Inbound(self._chat(event.chat), payload, event.muted))
        elif isinstance(event, Command):
            self._call(self.current_event, self.gateway.deliver_command, self._chat(event.chat), event.name)
        elif isinstance(event, Delegate):
            self._call(self.current_event, self.gateway.delegate, self._chat(event.chat), f"[{event.turn}] delegated task")

    def _stop(self, how: str) -> None:
        if not self.up:
            self.log.add("skipped", event=how, reason="the gateway is not running")
            return
        self.log.add(how)
        self.llm.epoch += 1  # replies to the stopped process never arrive
        self._call(how, getattr(self.gateway, how))  # a crash point in a SIGTERM's flushes: `_Died`
        self.up = False
        self._snapshot(how)

    def _restart(self, change: ConfigChange | None = None) -> None:
        if self.up:
            self.log.add("skipped", event="restart", reason="the gateway is already running")
            return
        if change is None:
            self.log.add("restart", held=len(self.inbox))
            self._call("restart", self.gateway.restart)
        else:  # the configuration it comes back with, in the record: the checks judge by it
            from sim.writer import config_document

            self.config = change.apply(self.config)
            self.log.add("restart", held=len(self.inbox), config=config_document(self.config))
            self._call("restart", self.gateway.restart, copy.deepcopy(self.config))
        self.up = True
        while self.inbox:
            event, payload = self.inbox.popleft()
            self._dispatch(event, payload)

    # -- the whole run -------------------------------------------------------------------

    def _quiesce(self) -> None:
        """Restart a stopped gateway and run past the horizon; a crash point that kills it on
        the way (recovery included) is a crash like any other: restart and run again."""
        while True:
            self.log.step = self.event_step  # quiescence's own records (not a timer's before them)
            try:
                if not self.up:
                    self._restart()
                horizon = self.clock.now() + self.config.horizon()
                self.log.add("quiesce", until=horizon)
                self._run_until(horizon)
            except _Died:
                continue
            if self.up:
                return

    def _run_until(self, until: int, before: bool = False) -> None:
        """Run the callbacks due by `until` (`before`: only those due before it, so that what
        comes next at `until` runs ahead of that instant's timers: sim.engine, rule 3)."""
        engine = self.engine
        last = until - 1 if before else until
        while (due := engine.peek()) is not None and due <= last:
            try:  # noqa: SIM105 (once per engine event: a plain try costs nothing until it catches)
                engine.step()
            except _Died:
                pass
            self._sample_resources()
        if before:
            engine.run_before(until)
        else:
            engine.run_until(until)

    def execute(self) -> RunResult:
        """Drive the scenario, then close the gateway: what `close()` raises is the scenario's
        error too (the first failure is kept). On the way out of an interrupt, closed anyway."""
        try:
            failure = self._drive()
        except BaseException:
            with suppress(BaseException):  # the interrupt (or a harness bug) is what matters
                close_gateway(self.gateway)
            raise
        try:
            self._call("close", close_gateway, self.gateway)
        except _GatewayRaised as raised:
            failure = failure or raised.failure
        if failure is not None:
            self.log.add("error", failure=failure.kind, event=failure.event, message=failure.message)
        scenario = with_fires(self.scenario, self.swarm.fires) if self.swarm is not None and self.swarm.fires else self.scenario
        return RunResult(scenario, self.name, self.profile, self.log.records, failure=failure)

    def _without_providers(self, scenario: Scenario, names: list[str]) -> Scenario:
        """A gateway with no memory providers of its own (OpenClaw) runs the scenario with the
        recorder alone, and the log says so; its checks then judge the recorder only."""
        for name in names:
            self.backends.pop(name, None)
            self.harness.backends.pop(name, None)
        self.config = replace(self.config, providers=())
        return replace(scenario, config=replace(scenario.config, providers=()))  # the run's result keeps the scenario given

    def _drive(self) -> GatewayFailure | None:
        scenario = self.scenario
        failure: GatewayFailure | None = None
        try:
            self.profile = self._answer("profile", values.profile, self.gateway.profile, copy.deepcopy(scenario.config))
        except _GatewayRaised as raised:
            failure = raised.failure
        left_out = [spec.name for spec in scenario.config.providers] if failure is None and "providers" in self.profile.unsupported else []
        if left_out:
            scenario = self._without_providers(scenario, left_out)
        self.log.add("scenario", **scenario_detail(scenario, self.profile))
        if left_out:
            self.log.add("skipped", scope="config", features=["providers"], providers=left_out,
                         reason="the gateway declares no memory providers: the scenario runs with the recorder alone")
        if failure is None and (unjudged := sorted(scenario_features(scenario) & self.profile.unsupported)):
            # Judging it would judge a feature the gateway says it does not have: not run at all.
            self.log.add("skipped", scope="scenario", features=unjudged,
                         reason=f"the scenario uses {', '.join(unjudged)}, which the gateway declares unsupported")
            return None  # execute() closes the gateway and hands back the log as it is
        if failure is None and scenario.config.reset_default:
            if self.profile.reset_default is None:
                failure = GatewayFailure("error", 0, "start", "NotImplementedError: the scenario leaves the reset "
                                         "policy to the gateway (reset: default), and it reports none (Profile.reset_default)")
            else:
                self.config = scenario.config.with_default(self.profile.reset_default)
        try:
            if failure is not None:
                raise _GatewayRaised(failure)
            threads_before = {t.ident for t in threading.enumerate()}
            if self.profile.crash_points:
                self.harness.points.declared = self.profile.crash_points
                self.harness.scheduler.epoch = 0
                if self.swarm_seed is not None:
                    self.swarm = Swarm(self.swarm_seed, self.profile.crash_points)
                    self.swarm.run = self
            self._call("start", self.gateway.start, copy.deepcopy(self.config), self.harness)
            self.up = True
            self._sample_resources()
            for step, event in enumerate(scenario.events, start=1):
                self._run_until(event.t, event.order == BEFORE_TIMERS)
                self._apply(step, event)
                if step == 1 and self.swarm is not None:  # a swarm fires from the first event on
                    self.harness.points.swarm = self.swarm
            if scenario.events and scenario.events[-1].order == BEFORE_TIMERS:
                self._run_until(scenario.events[-1].t)  # its instant's timers, which it came before, end it
            # Quiescence: back up, past every boundary and sweep, then a graceful stop.
            self.event_step, self.timer_steps = len(scenario.events) + 1, 0
            self.log.step = self.event_step
            self.current_event = "quiescence"
            self._quiesce()
            self.log.step = self.event_step
            self.final = True
            self.log.add("sigterm", final=True)
            self.llm.epoch += 1
            self._call("sigterm", self.gateway.sigterm)
            self.up = False
            self._sample_resources()
            leaked = _left_running(threads_before)
            if leaked:  # harness-observed: threads the gateway started and left running
                self.log.add("threads", running=len(leaked))
            self._snapshot("final")
            self._verify_fired()
        except _GatewayRaised as raised:
            failure = raised.failure
        except EventBudgetExceeded as err:
            failure = GatewayFailure("timeout", self.log.step, self.current_event,
                                     f"{err} at {self.clock.format()}: the gateway schedules work without end")
        return failure


THREAD_GRACE = 1.0  # wall-clock seconds a thread the gateway started may take to end after the final stop


def _left_running(before: set[int | None]) -> list[threading.Thread]:
    """Threads started since `before` that are still running after the final stop. One that is
    ending as the stop returns (a worker finishing its last job) gets THREAD_GRACE to do so, so
    the count does not depend on when the thread scheduler lets it end; a loop that never ends
    is still counted."""
    deadline = time.monotonic() + THREAD_GRACE
    leaked = [t for t in threading.enumerate() if t.ident not in before and t.is_alive()]
    for thread in leaked:
        thread.join(max(0.0, deadline - time.monotonic()))
    return [t for t in leaked if t.is_alive()]


def _row_counts(state: DurableState) -> Counter[tuple[str, str, str | None]]:
    """Every stored row as (session, role, turn), counted: what a write adds to."""
    return Counter((s.id, m.role, m.turn) for s in state.sessions for m in s.messages)


def run_scenario(scenario: Scenario, gateway: Gateway, name: str = "gateway", *, budget: int = DEFAULT_BUDGET,
                 check: bool = True, spill_at: int | None = SPILL_AT, strict: bool = False,
                 crash_points: bool = False) -> RunResult:
    """Run `scenario` against a fresh `gateway` instance (closed at the end) and (by default)
    judge it (`strict`: a vacuous pass fails). A log longer than `spill_at` records (None: no
    limit) is kept in a temporary file. `crash_points`: a seeded `Swarm` fires the gateway's
    declared crash points; `result.scenario` is then the scenario with its fires written in."""
    with cyclic_gc_paused(), _stdio_kept(), _sigint_is_ours():
        run = Run(scenario, gateway, name, budget, spill_at)
        if crash_points:
            run.swarm_seed = scenario.seed
        result = run.execute()
        if check:
            from conformance.checks import judge

            result.verdicts = judge(result.records, strict)
    return result


@contextmanager
def _sigint_is_ours() -> Iterator[None]:
    """Ctrl-C during a run raises the harness's `Interrupted`, so it stops the run while a
    KeyboardInterrupt the gateway raises is the gateway's error. Only where Python's default
    handler is in place (the CLI installs `raise_interrupted` itself) and in the main thread."""
    if threading.current_thread() is not threading.main_thread() or signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        yield
        return
    signal.signal(signal.SIGINT, raise_interrupted)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def close_gateway(gateway: Gateway) -> None:
    """The run is over: release what the gateway holds (its optional `close()`: a child
    process, a database)."""
    close = getattr(gateway, "close", None)
    if close is not None:
        close()


@contextmanager
def _stdio_kept() -> Iterator[None]:
    """The process's stdout and stderr after a run are the ones before it. A gateway may swap
    them (Hermes wraps them, and a redirect left by one of its threads once blanked a fuzz
    run's output for good); the progress and verdicts printed after the run must still show."""
    stdout, stderr = sys.stdout, sys.stderr
    try:
        yield
    finally:
        sys.stdout, sys.stderr = stdout, stderr


@contextmanager
def cyclic_gc_paused() -> Iterator[None]:
    """No cyclic garbage collection during a run. The log is millions of small objects that
    live until the run ends, and every full collection walked all of them: half the time of a
    long run. Reference counting still frees everything acyclic at once; cycles wait until
    the run is over."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
