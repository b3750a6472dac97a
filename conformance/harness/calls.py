"""Calling the gateway under test: every call guarded (what it raises is its error at that step),
crash points, timer steps, resource samples, durable-state reads, and stopping and restarting it."""

from __future__ import annotations

import _thread
import copy
import marshal
import os
import posix
import signal
import threading
import traceback
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from operator import itemgetter
from sys import getrecursionlimit, setrecursionlimit
from typing import Any, NoReturn

from conformance.adapter import CrashPointFired, Gateway, Harness, Profile, Scheduler
from conformance.harness import values
from conformance.harness.errors import GatewayTimeout, RemoteGatewayError, signalled
from conformance.harness.spill import SPILL_AT, ObservationLog, SpilledSessions
from conformance.harness.swarm import Swarm
from conformance.harness.verdict import GatewayFailure
from conformance.harness.watchdog import StepTimedOut, Watch
from conformance.observations import CacheReplay, DurableState, Resources, ResourcesDeltas, StoredMessage, stored_rows
from conformance.observers import BadHandover, FakeLLM, HookBus, MemoryBackend, Platform, RecordingProvider, shown
from sim.clock import VirtualClock
from sim.engine import Engine
from sim.scenario import Chat, ConfigChange, CrashAt, Event, Message, Scenario


class Died(Exception):
    """A crash point fired and the runner has crashed the gateway: unwinds the runner's own
    step (a timer, an event, a restart) to where the run goes on."""


# Not steps where a crash point fires: views, crash itself, and boot (start, restart). One may
# fire while the restart step hands the gateway what the platform held (`_died_at`).
AHEAD = {"before_timers": True}  # in the record of a stop or /stop run ahead of its instant's timers (I9)
_NO_POINTS = frozenset({"profile", "resources", "durable_state", "close", "crash", "start", "restart"})


class GatewayRaised(Exception):
    """The gateway failed a call: carries its GatewayFailure out to `Run.execute`."""

    def __init__(self, failure: GatewayFailure) -> None:
        super().__init__(failure.describe())
        self.failure = failure


_TYPE_NAME = type.__dict__["__name__"]  # a class's own name, whatever its metaclass makes `__name__` do


def exception_text(err: BaseException) -> str:
    """`Type: message`, even for an exception of the gateway's whose `__str__` raises (SystemExit
    included: it is still the gateway's exception that is reported) or whose class's `__name__` is
    a metaclass property that raises or answers a non-str."""
    name = _TYPE_NAME.__get__(type(err))
    try:
        message = str(err)
    except BaseException as broken:
        if signalled(broken):
            raise
        message = f"<its message raised {_TYPE_NAME.__get__(type(broken))}>"
    return f"{name}: {message}"


def short_traceback(err: BaseException) -> tuple[str, ...]:
    """The last four frames and the exception, without the harness's own guards that raised
    it into the gateway's code (the step watchdog's tick, `os._exit`'s stand-in). No source line
    is read: only file, line number and function are shown, and a gateway's code compiled under a
    file name such as /dev/zero made `extract_tb` read it until memory ran out."""
    frames = [frame for frame in traceback.StackSummary.extract(traceback.walk_tb(err.__traceback__), lookup_lines=False)
              if frame.name != "_gateway_exit" and not frame.filename.endswith("watchdog.py")][-4:]
    lines = [f"{frame.filename.rsplit('/', 2)[-1]}:{frame.lineno} in {frame.name}" for frame in frames]
    return (*lines, exception_text(err))


_FORKS = [0]  # os.fork()s this process came out of: a run's calls compare it with the count at its start


def _forked() -> None:
    _FORKS[0] += 1


os.register_at_fork(after_in_child=_forked)


def _forked_child_returned() -> None:
    """A child the gateway forked inside a call is coming back into sessiongate: it ends here,
    quietly (no buffer flushed twice, no verdict or report written twice); the parent goes on."""
    REAL_EXIT(0)


REAL_EXIT = os._exit  # sessiongate's own way out; during a run `os._exit` is `_gateway_exit`


class GatewayExited(BaseException):
    """A gateway in this process called `os._exit(status)`, or sent the process itself a signal
    (`os.kill(os.getpid(), …)`, `os.killpg`, `signal.raise_signal`, `signal.pthread_kill`,
    `_thread.interrupt_main`): its error at that step, worded by `args[0]`. Let through, the
    exit would end sessiongate with the gateway's status and no report (`os._exit(0)`: a green
    CI; Hermes, for one, has an `os._exit` backstop in its shutdown), a SIGTERM or SIGINT would
    read as sessiongate told to stop, and a SIGKILL would end it with no report."""


class ExitsAsked(list):  # type: ignore[type-arg]
    """(what, step) of each `os._exit` or signal to the process a gateway's thread called during
    a run (`what`: the call, as `os._exit(0)`); `step` says the run's step at the time."""

    step: Callable[[], Any] = staticmethod(lambda: 0)


_SIGNALS_SENT = (os, "kill"), (os, "killpg"), (signal, "raise_signal"), (signal, "pthread_kill"), (_thread, "interrupt_main")
# The same functions under `posix`, where `os` took them from, and the other ways a process ends
# or becomes another program at once: each refused as `os._exit` is (fourth audit of hostile gateways).
_ALSO = (posix, "kill"), (posix, "killpg"), (os, "abort"), (posix, "abort"), (os, "execv"), (os, "execve"), \
    (posix, "execv"), (posix, "execve")


@contextmanager
def exit_is_ours() -> Iterator[ExitsAsked]:
    """During a run, `os._exit` in this process, and a signal sent to this process, raise
    `GatewayExited` where called (a forked child still exits and signals as it likes; a signal
    to another process, or signal 0, goes through); what other threads asked for is listed, for
    the runner to report. sessiongate's own signals go through the functions it kept at import."""
    pid, asked = os.getpid(), ExitsAsked()

    def refused(what: str) -> NoReturn:
        if threading.current_thread() is not threading.main_thread():
            asked.append((what, asked.step()))
            raise SystemExit(what)  # the thread ends, quietly; the runner reports it
        raise GatewayExited(what)

    def _gateway_exit(status: int) -> None:
        if os.getpid() != pid:
            REAL_EXIT(status)
        refused(f"os._exit({status!r})")

    def ours(group: int) -> bool:
        with suppress(OSError):
            return group == os.getpgrp()
        return False

    def _kill(target: int, signum: int) -> None:
        if os.getpid() == pid and signum and (target in (pid, 0, -1) or (target < 0 and ours(-target))):
            # no pid in the words: a message is the same run to run
            whom = "its own pid" if target == pid else "its own group" if target < -1 else str(target)
            refused(f"os.kill({whom}, {_signal_name(signum)})")
        _REAL[os, "kill"](target, signum)

    def _killpg(group: int, signum: int) -> None:
        if os.getpid() == pid and signum and (group == 0 or ours(group)):
            refused(f"os.killpg({'its own group' if group else 0}, {_signal_name(signum)})")
        _REAL[os, "killpg"](group, signum)

    def _raise_signal(signum: int) -> None:
        if os.getpid() != pid:
            _REAL[signal, "raise_signal"](signum)
            return
        refused(f"signal.raise_signal({_signal_name(signum)})")

    def _pthread_kill(thread_id: int, signum: int) -> None:
        if os.getpid() == pid and signum:
            refused(f"signal.pthread_kill(a thread of its own, {_signal_name(signum)})")
        _REAL[signal, "pthread_kill"](thread_id, signum)

    def _interrupt_main(signum: int = signal.SIGINT) -> None:
        if os.getpid() != pid:
            _REAL[_thread, "interrupt_main"](signum)
            return
        refused(f"_thread.interrupt_main({_signal_name(signum)})")

    def _abort() -> None:
        if os.getpid() != pid:
            _REAL[os, "abort"]()
        refused("os.abort()")

    def _exec(name: str) -> Callable[..., None]:
        def exec_(path: Any, *args: Any) -> None:
            if os.getpid() != pid:  # a forked child becoming its program, as sessiongate's own children do
                _REAL[os, name](path, *args)
                return
            refused(f"os.{name}({path!r}, …)")
        return exec_

    ours_now = {(os, "kill"): _kill, (os, "killpg"): _killpg, (signal, "raise_signal"): _raise_signal,
                (signal, "pthread_kill"): _pthread_kill, (_thread, "interrupt_main"): _interrupt_main,
                (posix, "kill"): _kill, (posix, "killpg"): _killpg, (os, "abort"): _abort, (posix, "abort"): _abort,
                (os, "execv"): _exec("execv"), (os, "execve"): _exec("execve"),
                (posix, "execv"): _exec("execv"), (posix, "execve"): _exec("execve")}
    previous, previous_posix = os._exit, posix._exit
    before = {key: getattr(*key) for key in (*_SIGNALS_SENT, *_ALSO) if hasattr(*key)}
    try:  # entered before the first is replaced: an interrupt between two of them still puts all back
        os._exit = posix._exit = _gateway_exit  # type: ignore[assignment]
        for (module, name), replacement in ours_now.items():
            if (module, name) in before:
                setattr(module, name, replacement)
        yield asked
    finally:
        os._exit, posix._exit = previous, previous_posix
        for (module, name), function in before.items():
            setattr(module, name, function)


_REAL = {key: getattr(*key) for key in (*_SIGNALS_SENT, *_ALSO) if hasattr(*key)}  # sessiongate's own, kept at import


def _signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except (ValueError, TypeError):
        return repr(signum)


_session = itemgetter(0)  # a cached entry's session: (session, busy)
VERIFY_EVERY = 64  # samples through `resources_delta` between two checks of it against `resources()`


def resources_hook(gateway: object) -> Callable[[], Any] | None:
    """The gateway's optional `resources_delta`, unless a subclass redefines `resources()` below
    the class that defines the hook: its changes would not be what its `resources()` says."""
    return _hook(gateway, "resources_delta", "resources")


def parts_hook(gateway: object) -> Callable[[], Any] | None:
    """The gateway's optional `durable_parts`, unless a subclass redefines `durable_state()`
    below the class that defines the hook: its parts would not be what its `durable_state()` says."""
    return _hook(gateway, "durable_parts", "durable_state")


def _hook(gateway: object, name: str, whole: str) -> Callable[[], Any] | None:
    """`gateway.name`, or None when it has none or a subclass of the class defining it redefines `whole`."""
    hook = getattr(gateway, name, None)
    if hook is None:
        return None
    mro = type(gateway).__mro__
    said, hooked = (next((k for k in mro if attr in vars(k)), None) for attr in (whole, name))
    if said is not None and hooked is not None and said is not hooked and issubclass(said, hooked):
        return None
    return hook  # type: ignore[no-any-return]


class _Malformed:
    """What `GatewayCalls._read_parts` found wrong in a part (raised by checking it, not by the
    gateway's code), raised again outside the call as a bad answer (`GatewayCalls._checked`)."""

    __slots__ = ("error",)

    def __init__(self, error: BaseException) -> None:
        self.error = error


def _raise_malformed(malformed: _Malformed) -> None:
    raise malformed.error


class ResourcesChanges:
    """The runner's side of the optional `Gateway.resources_delta` hook: the cache as its
    answers rebuild it (`CacheReplay`), whether it moved since the last whole state, and whether
    the hook has earned its sparse checks (`trusted`: its account matched a `resources()` that
    listed an agent, since the gateway last started)."""

    __slots__ = ("hook", "moved", "replay", "samples", "trusted")

    def __init__(self, gateway: Gateway) -> None:
        self.hook = resources_hook(gateway)
        self.replay = CacheReplay()
        self.moved = False
        self.samples = 0
        self.trusted = False

class GatewayCalls:
    """The state of one scenario in flight, and every call to its gateway (`Run` drives it)."""

    def __init__(self, scenario: Scenario, gateway: Gateway, name: str, budget: int, spill_at: int | None = SPILL_AT) -> None:
        self.scenario = scenario
        self.gateway = gateway
        self.name = name
        self.clock = VirtualClock(scenario.start, scenario.zone)
        self.engine = Engine(self.clock, seed=scenario.seed, budget=budget)
        # A message that is answered writes four records or more (its input, the LLM request and
        # answer, the reply): a scenario of spill_at/4 of them will spill, so its log does at once.
        self.log = ObservationLog(self.clock.now, spill_at, expected=4 * sum(type(e) is Message for e in scenario.events))
        self.profile = Profile()  # replaced by what the gateway declares, first thing in execute()
        self.up = False
        self.crashes = 0  # scripted and at crash points: whether they were real is `RunResult.crashes`
        # What arrived while the gateway was down: each event, its payload and its record's index.
        self.inbox: deque[tuple[Event, Any, int]] = deque()
        self.resources = ResourcesDeltas()  # what changed since the last sample
        self.changes: ResourcesChanges | None = None  # the gateway's own account of them: known after start
        # Across `durable_state` reads: a stored row's content -> its turns; a session's rows at
        # the last snapshot; the sessions the last read held, checked (`values.durable_state`).
        self.row_turns: dict[str, tuple[str | None, ...]] = {}
        self.snapshot_rows: dict[str, tuple[tuple[StoredMessage, ...], str | None, dict[str, Any]]] = {}
        self.said: dict[str, str] = {}  # turn -> the text of its message, where not 'hello' (`stored_rows`, `not_whole`)
        self.stored_known: dict[str, tuple[str | None, tuple[StoredMessage, ...]]] = {}
        self.current_event = "start"
        self.watch = Watch()  # the calls in progress, for the step watchdog (`harness.watchdog`)
        self.exits: list[tuple[str, Any]] = []  # (call, step) of an os._exit or self-signal a gateway's thread made (`exit_is_ours`)
        # The log's step: the scenario event being applied (1..N; 0 boot, N+1 quiescence), or
        # "k.n" for the n-th callback (a timer, an LLM answer, a crash point's restart) that ran
        # since event k began: a record a timer produced carries its own step, not event k's.
        self.event_step = 0
        self.timer_steps = 0  # callbacks since event `event_step` began
        self.final = False  # the final SIGTERM of quiescence: no crash point fires in it
        self.crash_ats: list[tuple[CrashAt, list[Any]]] = []  # each armed `crash_at`, with its entry in `points.armed`
        self.chats = {chat.name: chat for chat in reversed(scenario.chats)}  # the first of a name, as Scenario.chat
        backends = {"recorder": MemoryBackend("recorder", self.log, self.clock.now, self.said)}
        for spec in scenario.config.providers:
            backends[spec.name] = MemoryBackend(spec.name, self.log, self.clock.now, self.said)
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
        self.recursion_limit = getrecursionlimit()  # put back after each call (`_call`)

    # -- calling the gateway -------------------------------------------------------------

    def _call(self, what: str, fn: Callable[..., Any], *args: Any) -> Any:
        """`fn(*args)` for the gateway: whatever it raises, SystemExit, KeyboardInterrupt and any
        other BaseException included, is its error at this step, never a crash or an exit of the
        run. Only the harness's own `Interrupted` (raised by its signal handler) passes through:
        nothing else the harness raises can come out of a gateway call (no harness service a
        gateway calls runs the engine or another gateway call), so a `Died`, `GatewayRaised` or
        `EventBudgetExceeded` that does was raised by the gateway, and is its error too."""
        points = self.harness.points
        points.live = what not in _NO_POINTS and not self.final
        forks = _FORKS[0]
        watch = self.watch
        seq = watch.seq = watch.seq + 1
        watch.depth += 1
        watch.what = what
        try:
            result = fn(*args)
        except CrashPointFired as fired:
            points.live = False
            if fired.point != points.fired:  # raised by the gateway itself, not the harness: its error
                raise GatewayRaised(GatewayFailure("error", self.log.step, what, exception_text(fired))) from None
            self._died_at(fired.point)
            raise Died(fired.point) from None
        except GatewayTimeout as err:
            raise GatewayRaised(GatewayFailure("timeout", self.log.step, what, str(err))) from err
        except StepTimedOut as err:
            raise GatewayRaised(GatewayFailure("timeout", self.log.step, what,
                                               f"no answer to {what} within {err.args[0]:g}s (wall clock), in process: "
                                               f"the step was interrupted", short_traceback(err))) from None
        except RemoteGatewayError as err:
            raise GatewayRaised(GatewayFailure("error", self.log.step, what, str(err), err.traceback)) from err
        except BaseException as err:  # the gateway under test raised: an error verdict, never a crash
            if signalled(err):
                raise
            if watch.interrupted == seq:
                raise self._caught_timeout(what, f"raised {exception_text(err)} instead") from err
            if points.fired is not None:
                raise self._went_on(what, err) from err
            message = (str(err) if type(err) is BadHandover  # worded as a bad answer is
                       else f"{err.args[0]} called in process: sessiongate goes on" if type(err) is GatewayExited
                       else exception_text(err))
            raise GatewayRaised(GatewayFailure("error", self.log.step, what, message, short_traceback(err))) from err
        finally:
            watch.depth -= 1
            points.live = False
            if _FORKS[0] != forks:
                _forked_child_returned()
            if getrecursionlimit() != self.recursion_limit:  # lowered, the harness's own code after the call would fail
                setrecursionlimit(self.recursion_limit)
        if watch.interrupted == seq:
            raise self._caught_timeout(what, "returned")
        if points.fired is not None:
            raise self._went_on(what, None)
        return result

    def _caught_timeout(self, what: str, how: str) -> GatewayRaised:
        """The step ran past the limit and was interrupted, and the gateway caught `StepTimedOut`:
        still its timeout (a slow step is not made good by swallowing the interrupt)."""
        return GatewayRaised(GatewayFailure("timeout", self.log.step, what,
                                            f"no answer to {what} within {self.watch.limit:g}s (wall clock), in process: the "
                                            f"step was interrupted, and the gateway caught StepTimedOut and {how}"))

    def _went_on(self, what: str, err: BaseException | None) -> GatewayRaised:
        """A dead process does not run on: a gateway that caught its crash point's exception."""
        how = f"raised {exception_text(err)} instead" if err is not None else "returned normally"
        return GatewayRaised(GatewayFailure("error", self.log.step, what,
                                             f"crash point {self.harness.points.fired!r} fired, and the gateway caught "
                                             f"CrashPointFired and {how}: a gateway must let it unwind the step"))

    def _died_at(self, point: str) -> None:
        """The process died at `point`: exactly a `crash` at this instant (the gateway's
        `crash()` drops what the dead process held), logged with the point's name. Died while
        handed what the platform held at a restart: what it had not been handed yet stays held
        until the next restart, and the record lists their records (`held`)."""
        self.log.add("crash", point=point, **({"held": [index for _e, _p, index in self.inbox]} if self.inbox else {}))
        self.crashes += 1
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
        return self._checked(what, check, self._call(what, fn, *args))

    def _checked(self, what: str, check: Callable[[Any], Any], answer: Any) -> Any:
        """`check(answer)`, or the gateway's error at this step naming `what` and what was wrong."""
        try:
            return check(answer)
        except values.BadValue as err:
            message = f"bad value in answer to {what}: {err}"
        except BaseException as err:  # an answer whose own methods raise (a __eq__, an __iter__), SystemExit too
            if signalled(err):
                raise
            message = f"bad value in answer to {what}: {exception_text(err)}"
        raise GatewayRaised(GatewayFailure("error", self.log.step, what, message))

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
        """What the gateway holds now, logged as a `resources` record when it changed: through
        its `resources_delta` hook if it has one (the usual case, asked after every event and
        timer: no call in between), else by diffing `resources()` (`_sample_whole`). Either way
        the record says which agents came and went, and what runs (`ResourcesDeltas`): the
        hook's changes validated and cut to that (`CacheReplay.net`), a whole state it answers
        diffed as a `resources()` sample. Its account is held to `resources()` at every sample until it
        matched one that listed an agent (after each start and restart: a hook that says nothing
        is caught at the first agent), then every `VERIFY_EVERY`th sample and every sample of
        the final stop: a hook that disagrees with it is the gateway's error. Between two of
        those checks the hook is the gateway's word (docs/protocol.md)."""
        changes = self.changes
        if changes is None:  # an exec: child says in its hello whether it has the hook
            changes = self.changes = ResourcesChanges(self.gateway)
        if changes.hook is None:
            self._sample_whole()
            return
        answer = self._call("resources_delta", changes.hook)
        if type(answer) is dict:  # validated in place; `_checked` again only to word what is wrong
            try:
                answer = values.resources_change(answer)
            except BaseException as err:
                if signalled(err):
                    raise
                answer = self._checked("resources_delta", values.resources_change, answer)
        elif answer is not None:  # None (nothing changed, the usual answer) needs no validation
            answer = self._checked("resources_delta", self._valid_change, answer)
        if type(answer) is dict:
            if answer:
                if not changes.moved:  # from the last whole state on
                    changes.replay = CacheReplay()
                    changes.replay.apply((self.resources.last or Resources()).to_detail())
                    changes.moved = True
                    if self.resources.last is None:  # the log's first record states the cache whole
                        changes.replay.apply(answer)
                        self.log.add_detail("resources", changes.replay.resources().to_detail())
                        answer = {}
                if answer and (detail := changes.replay.net(answer)) is not None:
                    self.log.add_detail("resources", detail)
        elif answer is not None and (detail := self.resources.detail(answer)) is not None:
            self.log.add_detail("resources", detail)
        changes.samples += 1
        if not changes.trusted or changes.samples % VERIFY_EVERY == 0 or self.final:
            said = changes.replay.resources() if changes.moved else self.resources.last or Resources()
            now = self._answer("resources", values.resources, self.gateway.resources)
            said_ids, now_ids = sorted(map(_session, said.cached)), sorted(map(_session, now.cached))
            if said_ids != now_ids or now.running != said.running:  # which agents, not their order or flags
                differ = sorted(set(said_ids) ^ set(now_ids)) or ["a session listed twice"]
                what = ", ".join(differ[:3]) + (", …" if len(differ) > 3 else "") if said_ids != now_ids else ""
                if now.running != said.running:
                    what = f"running {said.running} against {now.running}" + (f"; {what}" if what else "")
                raise GatewayRaised(GatewayFailure("error", self.log.step, "resources_delta",
                                                    f"the changes resources_delta() answered disagree with resources() "
                                                    f"({what})"))
            changes.trusted = changes.trusted or bool(now.cached)

    def _sample_whole(self) -> None:
        """`_sample_resources` of a gateway without the hook: `resources()`, diffed against the last sample."""
        detail = self.resources.detail(self._answer("resources", self._valid_resources, self.gateway.resources))
        if detail is not None:
            self.log.add_detail("resources", detail)

    def _valid_change(self, answer: Any) -> dict[str, Any] | Resources | None:
        """`values.resources_change`; a whole state as `_valid_resources`, diffed against the
        cache the changes since the last one built."""
        if not isinstance(answer, Resources):
            return values.resources_change(answer)
        changes = self.changes
        assert changes is not None
        if changes.moved:
            self.resources.resync(changes.replay.resources())
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
        # A spilled log's final snapshot (every stored row of a long run) is packed session by
        # session as it is made: it goes to the file as that, and is read back so; from a
        # gateway with the `durable_parts` hook, one session at a time as it hands them over.
        final_spilled = label == "final" and self.log.spilled
        hook = parts_hook(self.gateway) if final_spilled else None
        if hook is not None:
            self.row_turns, self.snapshot_rows, self.stored_known = {}, {}, {}  # a long run's: every row
            self.log.add("durable", label=label, **self._parted(hook))
            return
        pack = SpilledSessions.pack if final_spilled else None
        final = label == "final"  # the caches go before the judging (a long run's final snapshot is every row)
        self.log.add("durable", label=label, **self._durable().to_detail(self.row_turns, self.snapshot_rows, pack, not final,
                                                                          self.said))
        if final:
            self.row_turns, self.snapshot_rows, self.stored_known = {}, {}, {}

    def _parted(self, hook: Callable[[], Any]) -> dict[str, Any]:
        """The final snapshot through the gateway's `durable_parts`: the detail `to_detail`
        packs from the whole answer, each session checked as `values.durable_state` checks it
        and packed as it comes. What checking a part finds wrong is a bad answer to
        `durable_state`, worded as for the whole answer; what the gateway's code raises (the
        hook, or its iterator) is its error at this step, as from `durable_state()`."""
        read = self._call("durable_state", self._read_parts, hook, self.watch, self.said)
        if type(read) is _Malformed:
            self._checked("durable_state", _raise_malformed, read)
        detail: dict[str, Any] = read
        return detail

    @staticmethod
    def _read_parts(hook: Callable[[], Any], watch: Watch, said: dict[str, str]) -> dict[str, Any] | _Malformed:
        """Run inside the call's guard (the gateway's code runs in `hook()` and in each step of
        its iterator); what checking raises comes back as `_Malformed`. Each session handed over
        is progress to the step watchdog (a long run's million rows may take longer than a
        step's limit, a session of them does not): the limit is a part's."""
        answer = hook()
        try:
            if not (isinstance(answer, values.SEQUENCES) and len(answer) == 2):
                raise values.BadValue(f"expected a (sessions, routing) pair from durable_parts, got {shown(answer)}")
            sessions, routing = answer[0], answer[1]
            if not hasattr(type(sessions), "__iter__"):
                raise values.BadValue(f"sessions: expected an iterable of StoredSession, got {shown(sessions)}")
        except BaseException as err:
            if signalled(err):
                raise
            return _Malformed(err)
        seen: set[str] = set()
        blobs: dict[str, bytes] = {}
        turns: dict[str, tuple[str | None, ...]] = {}  # none known: the parts are fresh rows (and none kept: every row's text)
        for i, part in enumerate(sessions):  # each step the gateway's code
            try:
                s = values.stored_session(i, part, seen)
                share: dict[str | None, str | None] = {}
                cut: list[str] = []
                rows = stored_rows(s.messages, turns, share.setdefault, False, said, cut)
                blobs[s.id] = marshal.dumps({"parent": s.parent, "rows": rows, **({"cut": cut} if cut else {})})
            except BaseException as err:
                if signalled(err):
                    raise
                return _Malformed(err)
            del part, s
            watch.strikes = 0
        try:
            pairs = values.routing(routing)
        except BaseException as err:
            if signalled(err):
                raise
            return _Malformed(err)
        return {"sessions": SpilledSessions(sorted(blobs.items())), "routing": {chat: sid for chat, sid in pairs}}

    def _durable(self) -> DurableState:
        state: DurableState = self._answer("durable_state", self._valid_durable, self.gateway.durable_state)
        return state

    def _valid_durable(self, answer: Any) -> DurableState:
        return values.durable_state(answer, self.stored_known)

    def _stop(self, how: str, ahead: bool = False) -> None:
        """`ahead`: the stop runs before the timers due at its instant (`order: before-timers`),
        which its record says (I9: a reply due at that instant, in time, never came)."""
        if not self.up:
            self.log.add("skipped", event=how, reason="the gateway is not running")
            return
        self.log.add(how, **(AHEAD if ahead else {}))
        self.crashes += how == "crash"
        self.llm.epoch += 1  # replies to the stopped process never arrive
        self._call(how, getattr(self.gateway, how))  # a crash point in a SIGTERM's flushes: `Died`
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
        if self.changes is not None:  # a new process's hook earns its sparse checks again
            self.changes.trusted = False
        while self.inbox:
            event, payload, _index = self.inbox.popleft()
            self._dispatch(event, payload)
