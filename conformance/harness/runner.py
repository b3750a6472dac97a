"""Runs one scenario against one gateway: events in, observations out, then the checks.

scenario -> engine on a virtual clock -> adapter calls -> observation log -> checks -> verdicts.
The runner ends every scenario with quiescence: restart a stopped gateway, advance past
every boundary, watcher tick and sweep, SIGTERM, snapshot the durable state, check.
"""

from __future__ import annotations

import builtins
import copy
import gc
import io
import json
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field, replace
from typing import Any, NoReturn

from conformance.adapter import HARNESS_POINTS, Gateway, Profile
from conformance.features import scenario_features
from conformance.harness import processes, values
from conformance.harness.calls import REAL_EXIT, Died, GatewayRaised, exception_text, exit_is_ours, short_traceback
from conformance.harness.errors import ON_SIGNAL, raise_interrupted, signalled
from conformance.harness.events import EventSteps
from conformance.harness.spill import SPILL_AT
from conformance.harness.swarm import Swarm, with_fires
from conformance.harness.verdict import GatewayFailure, Verdict
from conformance.harness.watchdog import DEFAULT_STEP_TIMEOUT, limit_for, watching
from conformance.observations import Obs, log_text
from sessiongate import ExitCode
from sim.clock import TZDATA
from sim.engine import EventBudgetExceeded
from sim.scenario import BEFORE_TIMERS, Scenario

DEFAULT_BUDGET = 2_000_000


def played_note(played: int, of: int, gateway: str = "", isolate: str = "--isolate") -> str:
    """What every run, report and plugin says when crashes were only played (`RunResult.crashes`):
    how to have them real, for an `exec:` child (its `hello` answer) or an in-process gateway."""
    if gateway.startswith("exec:"):
        return (f"note: {played} of {of} scenarios crash the gateway by a crash request only, which loses nothing the "
                f"child keeps in memory (answer hello with \"crash\": \"kill\" and keep the store in "
                f"SESSIONGATE_STATE_DIR: docs/protocol.md)")
    return (f"note: {played} of {of} scenarios crash the gateway by its own crash() call, which loses nothing it "
            f"keeps in memory ({isolate} kills one with open_store(): docs/contract.md)")


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
    # "" (no crash), "real" (the process was killed: an `exec:`/`--isolate` child with `open_store`, the
    # OpenClaw adapter) or "played" (the gateway's own `crash()`: what it kept in memory survived)
    crashes: str = ""

    def log_text(self) -> str:
        return log_text(self.records)

    @property
    def skipped_features(self) -> tuple[str, ...]:
        """The unsupported features that kept the scenario from being judged (`skipped`)."""
        for head in self.records[1:3]:
            if head.kind == "skipped" and head.d("scope") == "scenario":
                return tuple(map(str, head.d("features") or ()))
        return ()

    @property
    def skipped(self) -> str:
        """Why the whole scenario was not judged ('' if it was): its config uses a feature the
        gateway declares unsupported. Its record comes right after the scenario's, or after the
        one saying its providers were left out (a gateway without `providers`)."""
        for head in self.records[1:3]:
            if head.kind != "skipped":
                break
            if head.d("scope") == "scenario":
                return str(head.d("reason"))
        return ""

    @property
    def passed(self) -> bool:
        return self.failure is None and all(v.status in ("pass", "skip", "xfail") for v in self.verdicts.values())


def scenario_detail(scenario: Scenario, profile: Profile) -> dict[str, Any]:
    """The first log record: everything the checks need to know about the inputs."""
    from sim.writer import chats_document, config_document  # the canonical document form, shared with files

    return {
        "name": scenario.name,
        "seed": scenario.seed,
        "zone": scenario.zone,
        "start": scenario.start,
        "config": config_document(scenario.config),
        "chats": chats_document(scenario),
        "profile": profile.to_detail(),
        "tzdata": TZDATA,  # the tz database every zone of the run came from (sim.clock.load_zone)
    }



class Run(EventSteps):
    """One scenario in flight. Use `run_scenario`."""

    untouched: Untouched  # set by `run_scenario` as the run starts

    def _quiesce(self) -> None:
        """Restart a stopped gateway and run past the horizon; a crash point that kills it on
        the way (recovery included) is a crash like any other: restart and run again."""
        while True:
            self.log.step = self.event_step  # quiescence's own records (not a timer's before them)
            try:
                if not self.up:
                    self._restart()
                horizon = self.clock.now() + self.config.horizon(self.profile.sweep_interval)
                self.log.add("quiesce", until=horizon)
                self._run_until(horizon)
            except Died:
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
            except Died:
                pass
            self._sample_resources()
        if before:
            engine.run_before(until)
        else:
            engine.run_until(until)

    def execute(self) -> RunResult:
        """Drive the scenario, then close the gateway: what `close()` raises is the scenario's
        error too (the first failure is kept). On the way out of an interrupt, closed anyway.
        What the gateway rebound of sessiongate's own footing (`Untouched`) is put back first,
        and is its error: the cause of whatever failed after it."""
        try:
            failure = self._drive()
        except BaseException as err:
            if (rebound := self.untouched.put_back(self.log.step)) is not None:
                failure = rebound
            elif not signalled(err):  # past every `_call`: a gateway attribute that raised when looked up, or our bug
                failure = self._escaped(err)
            else:
                with suppress(BaseException):  # the interrupt is what matters
                    close_gateway(self.gateway)
                raise
        try:
            self._call("close", close_gateway, self.gateway)
        except GatewayRaised as raised:
            failure = failure or raised.failure
        except BaseException:  # sessiongate's own code failed after a rebinding: put back below
            if self.untouched.put_back(self.log.step) is None:
                raise
        if (rebound := self.untouched.put_back(self.log.step)) is not None:
            failure = rebound
        if failure is None and self.exits:  # from a thread of the gateway's, where no call's guard catches it
            what, step = self.exits[0]
            failure = GatewayFailure("error", step, "thread", f"{what} called in process by a thread "
                                     f"the gateway started: sessiongate goes on")
        if failure is not None:
            self.log.add("error", failure=failure.kind, event=failure.event, message=failure.message)
        scenario = with_fires(self.scenario, self.swarm.fires) if self.swarm is not None and self.swarm.fires else self.scenario
        return RunResult(scenario, self.name, self.profile, self.log.hand_over(), failure=failure, crashes=self._crashes())

    def _crashes(self) -> str:
        """How the run's crashes were: none, real or played. Real only by sessiongate's own
        transports and adapters (`real_crashes`), never by a gateway's word."""
        if not self.crashes:
            return ""
        return "real" if self._kills_for_real() else "played"

    def _kills_for_real(self) -> bool:
        """Whether a crash kills the gateway's process: so says one of sessiongate's own
        transports or adapters (`real_crashes`), never a gateway. Such a gateway is killed at the
        harness's own crash points too, declared or not: its cooperation is not needed."""
        gateway = self.gateway
        return type(gateway).__module__.startswith("conformance.") and getattr(gateway, "real_crashes", False) is True

    def _escaped(self, err: BaseException) -> GatewayFailure:
        """What came out of `_drive` around every gateway call's guard, as this step's error: a
        run is never ended by it (the suite's own errors are verdicts too), and the traceback
        says whose it was."""
        return GatewayFailure("error", self.log.step, self.current_event,
                              f"{exception_text(err)} (raised outside a gateway call: by looking up one of the "
                              f"gateway's attributes, or by sessiongate itself)", short_traceback(err))

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
            if self.profile.crash_points or self._kills_for_real():  # killable inside a step: at the harness's points too
                self.profile = replace(self.profile, crash_points=self.profile.crash_points | HARNESS_POINTS)
        except GatewayRaised as raised:
            failure = raised.failure
        left_out = [spec.name for spec in scenario.config.providers] if failure is None and "providers" in self.profile.unsupported else []
        if left_out:
            scenario = self._without_providers(scenario, left_out)
        self.log.add("scenario", **scenario_detail(scenario, self.profile))
        if left_out:
            self.log.add("skipped", scope="config", features=["providers"], providers=left_out,
                         reason="the gateway declares no memory providers: the scenario runs with the recorder alone")
        if failure is None and self.profile.unsupported and (unjudged := sorted(scenario_features(scenario) & self.profile.unsupported)):
            # Judging it would judge a feature the gateway says it does not have: not run at all.
            self.log.add("skipped", scope="scenario", features=unjudged,
                         reason=f"the scenario uses {', '.join(unjudged)}, which the gateway declares unsupported")
            return None  # execute() closes the gateway and hands back the log as it is
        if failure is None and scenario.config.reset_default:
            if self.profile.reset_default is None:
                failure = GatewayFailure("error", 0, "start", "NotImplementedError: the scenario leaves the reset "
                                         "policy to the gateway (reset: default), and it reports none (Profile.reset_default; "
                                         "a gateway without one declares 'reset_default' unsupported)")
            else:
                self.config = scenario.config.with_default(self.profile.reset_default)
        try:
            if failure is not None:
                raise GatewayRaised(failure)
            census = processes.Census()  # what runs before the gateway starts is not its to answer for
            if self.profile.crash_points:
                self.harness.points.declared = self.profile.crash_points
                self.harness.scheduler.epoch = 0
                self.harness.platform.after_reply = self.harness.points.hit
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
            threads, left = census.left_running()
            if threads:  # harness-observed: threads the gateway started and left running
                self.log.add("threads", running=threads)
            if left:  # and processes (their command names: a pid differs run to run)
                self.log.add("processes", running=len(left), names=left)
            self._snapshot("final")
            self._verify_fired()
        except GatewayRaised as raised:
            failure = raised.failure
        except EventBudgetExceeded as err:
            failure = GatewayFailure("timeout", self.log.step, self.current_event,
                                     f"{err} at {self.clock.format()}: the gateway schedules work without end")
        return failure


class Untouched:
    """What a gateway in process could rebind to turn sessiongate's own code against it: the
    builtins (a `print` that raises SystemExit(0) ended a run with exit 0 and no verdict; an
    `isinstance` that lies crashed it), `json` (a `dumps` that answers "{}" emptied the report),
    the checks that judge it (a `CHECKS` entry replaced passed a broken gateway), and this
    thread's tracer and profiler (one that raised SystemExit(0) at `judge`), and the gateway's own
    classes (what is set on one leaks into the next scenario). Taken as a run starts; at its end (or where sessiongate's own
    code failed) each is held to what it was by identity and put back, and a change is the
    gateway's error naming it (the fourth audit of hostile gateways). A name a gateway adds to
    the builtins is left: nothing of sessiongate's reads it."""

    __slots__ = ("builtins", "checks", "classes", "json", "judge", "profile", "rebound", "trace")

    def __init__(self, gateway: object) -> None:
        import conformance.checks as checks

        self.builtins, self.json = dict(vars(builtins)), dict(vars(json))  # json: the reports are written with it
        # The gateway's classes: an attribute rebound or added on one is there for the next
        # scenario's fresh instance (a method replaced on the class failed every later scenario).
        self.classes = [(cls, dict(vars(cls))) for cls in type(gateway).__mro__ if cls is not object]
        self.checks, self.judge = dict(checks.CHECKS), checks.judge
        self.trace, self.profile = sys.gettrace(), sys.getprofile()  # a coverage tracer's, say: kept
        self.rebound: GatewayFailure | None = None

    def put_back(self, step: object) -> GatewayFailure | None:
        """The first time something was found rebound: put back, and the failure that names it."""
        import conformance.checks as checks

        names: list[str] = []  # what sessiongate's own code runs on
        leaks: list[str] = []  # what the next scenario's gateway would start from
        for module, kept in ((builtins, self.builtins), (json, self.json)):
            now = vars(module)
            names += [f"{module.__name__}.{k}" for k, v in kept.items() if now.get(k, now) is not v]
            now.update(kept)
        for cls, kept in self.classes:
            now = vars(cls)
            changed = [k for k, v in now.items() if kept.get(k, kept) is not v]
            gone = [k for k in kept if k not in now]
            for k in changed:
                if k in kept:
                    setattr(cls, k, kept[k])
                else:
                    delattr(cls, k)
            for k in gone:
                setattr(cls, k, kept[k])
            leaks += [f"{cls.__name__}.{k}" for k in sorted(changed + gone)]
        if checks.judge is not self.judge:
            names.append("conformance.checks.judge")
            checks.judge = self.judge
        if self.checks != checks.CHECKS or any(checks.CHECKS[c] is not f for c, f in self.checks.items()):
            names.append("conformance.checks.CHECKS")
            checks.CHECKS.clear()
            checks.CHECKS.update(self.checks)
        if sys.gettrace() is not self.trace:  # a tracer that raised SystemExit(0) at `judge` ended a run green
            names.append("sys.settrace")
            sys.settrace(self.trace)
        if sys.getprofile() is not self.profile:
            names.append("sys.setprofile")
            sys.setprofile(self.profile)
        if (names or leaks) and self.rebound is None:
            shown = ", ".join((names + leaks)[:3]) + (", …" if len(names + leaks) > 3 else "")
            why = ("sessiongate runs on them, so no verdict of this run can stand" if names
                   else "set on its class, it would leak into the next scenario")
            self.rebound = GatewayFailure("error", step, "process", f"the gateway rebound {shown} in process (put back): "
                                          f"{why}; --isolate runs a gateway in a child")
        return self.rebound


def run_scenario(scenario: Scenario, gateway: Gateway, name: str = "gateway", *, budget: int = DEFAULT_BUDGET,
                 check: bool = True, spill_at: int | None = SPILL_AT, strict: bool = False,
                 crash_points: bool = False, step_timeout: float | None = DEFAULT_STEP_TIMEOUT) -> RunResult:
    """Run `scenario` against a fresh `gateway` instance (closed at the end) and (by default)
    judge it (`strict`: a vacuous pass fails). A log longer than `spill_at` records (None: no
    limit) is kept in a temporary file. `crash_points`: a seeded `Swarm` fires the gateway's
    declared crash points; `result.scenario` is then the scenario with its fires written in.
    `step_timeout`: wall-clock seconds a step of a gateway in this process may take (None: no
    limit; `harness.watchdog`)."""
    with _process_kept(), cyclic_gc_paused(), _stdio_kept() as stdio, _sigint_is_ours(), exit_is_ours() as exits:
        run = Run(scenario, gateway, name, budget, spill_at)
        run.untouched = Untouched(gateway)
        if crash_points:
            run.swarm_seed = scenario.seed
        run.exits, exits.step = exits, lambda: run.log.step
        stuck = Stuck(run, stdio, strict)
        run.watch.give_up, run.watch.alarm_lost = stuck.timed_out, stuck.alarm_lost
        heard = threading.current_thread() is threading.main_thread()  # where signal handlers run
        if heard:
            ON_SIGNAL.append(stuck.signalled)
        try:
            with watching(run.watch, limit_for(gateway, step_timeout)):
                result = run.execute()
        finally:
            if heard:
                ON_SIGNAL.remove(stuck.signalled)
        if check:
            from conformance.checks import judge

            result.verdicts = judge(result.records, strict)
    return result


FINISH: list[Callable[[RunResult | None, int], object]] = []  # the command's way to end with its report (`when_stuck`)


@contextmanager
def when_stuck(finish: Callable[[RunResult | None, int], object]) -> Iterator[None]:
    """While in this block, a run whose gateway cannot be stopped in this process ends the
    process through `finish(result, exit_code)`: `result` is the stuck scenario's (its step's
    timeout, judged), or None when a second signal stopped it (only the scenarios that finished
    count); `finish` prints and writes the report. The process then exits with `exit_code`."""
    FINISH.append(finish)
    try:
        yield
    finally:
        FINISH.remove(finish)


class Stuck:
    """What a run does when its gateway cannot be stopped: it caught the step's `StepTimedOut`
    and kept running the same call for another step timeout, or caught the harness's
    `Interrupted` and was still running at a second SIGINT/SIGTERM. No exception unwinds such
    a gateway, and waiting hangs the command for good with no report; so the process ends here,
    from inside the gateway's call, after `when_stuck`'s `finish` (or, outside any, a line on
    stderr). Only a child process (`--isolate`, `exec:`) can be stopped and the run go on."""

    def __init__(self, run: Run, stdio: tuple[Any, Any], strict: bool) -> None:
        self.run, self.stdio, self.strict = run, stdio, strict

    def signalled(self, signum: int) -> None:
        """Before the handler raises `Interrupted` into the run: a second signal ends it here, and
        the first lets the step watchdog end it at its next tick if a gateway call still runs."""
        if self.run.watch.signum:
            self.end(None, 128 + signum)
        self.run.watch.signum = signum

    def timed_out(self, limit: float) -> None:
        run = self.run
        if run.watch.signum:
            self.end(None, 128 + run.watch.signum)
        failure = GatewayFailure("timeout", run.log.step, run.watch.what,
                                 f"no answer to {run.watch.what} within {limit:g}s (wall clock), in process, and the "
                                 f"gateway went on after the step was interrupted (it caught StepTimedOut): nothing "
                                 f"stops it in this process, so sessiongate stops here; run it with --isolate")
        self.end(failure, ExitCode.FAILED)

    def alarm_lost(self, limit: float) -> None:
        """From the ticks' backstop thread: the gateway silenced SIGALRM and its call runs on."""
        run = self.run
        failure = GatewayFailure("timeout", run.log.step, run.watch.what,
                                 f"no answer to {run.watch.what} within {3 * limit:g}s (wall clock), in process, and no "
                                 f"tick of the step watchdog came (SIGALRM ignored, blocked or cancelled by the gateway, or "
                                 f"a call that never returns to Python): nothing stops it in this process, so sessiongate "
                                 f"stops here; run it with --isolate")
        self.end(failure, ExitCode.FAILED)

    def end(self, failure: GatewayFailure | None, code: int) -> NoReturn:
        with suppress(BaseException):
            signal.setitimer(signal.ITIMER_REAL, 0)  # no tick into what follows
        sys.stdout, sys.stderr = self.stdio
        try:
            result = None
            if failure is not None:
                run = self.run
                run.log.add("error", failure=failure.kind, event=failure.event, message=failure.message)
                result = RunResult(run.scenario, run.name, run.profile, run.log.hand_over(), failure=failure)
                from conformance.checks import judge

                result.verdicts = judge(result.records, self.strict)
            if FINISH:
                FINISH[-1](result, code)
            elif result is not None and result.failure is not None:
                print(f"sessiongate: {result.scenario.name}: {result.failure.describe()}", file=sys.stderr)
        finally:
            for stream in (sys.stdout, sys.stderr):
                with suppress(BaseException):
                    stream.flush()
            REAL_EXIT(code)


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


_KEPT_SIGNALS = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGPIPE", "SIGCHLD", "SIGALRM")
                      if hasattr(signal, name))


try:
    import resource
except ImportError:  # not on every platform
    resource = None  # type: ignore[assignment]
_KEPT_LIMITS = tuple(getattr(resource, name) for name in ("RLIMIT_FSIZE", "RLIMIT_NOFILE", "RLIMIT_CPU", "RLIMIT_AS",
                                                          "RLIMIT_CORE") if hasattr(resource, name))


@contextmanager
def _process_kept() -> Iterator[None]:
    """The working directory, the handlers of SIGINT, SIGTERM, SIGPIPE, SIGCHLD and SIGALRM, the
    signals blocked and the recursion limit after a run are the ones before it, whatever the
    gateway did with them in this process (a daemon changes to `/`; a server installs its own
    handlers or blocks SIGALRM): a report and the failure database are written where the
    command was started, a later SIGTERM still stops sessiongate with its report, the next
    scenario's step timeout still fires, and `sessiongate … | head` still ends quietly. So are
    the umask and the limits on file size, open files, CPU and memory (an `RLIMIT_FSIZE` of 0
    left by a gateway lost the report: fourth audit of hostile gateways). Not a contract
    matter: no verdict. (The recursion limit is also put back after each gateway call:
    the checks run under it.)"""
    try:
        cwd: str | None = os.getcwd()
    except OSError:  # the folder was removed before the run: nothing to go back to
        cwd = None
    main = threading.current_thread() is threading.main_thread()
    handlers = [(signum, signal.getsignal(signum)) for signum in _KEPT_SIGNALS] if main else []
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, ()) if main and hasattr(signal, "pthread_sigmask") else None
    limit = sys.getrecursionlimit()
    umask = os.umask(0o022)
    os.umask(umask)
    limits = [(kind, resource.getrlimit(kind)) for kind in _KEPT_LIMITS] if resource is not None else []
    try:
        yield
    finally:
        os.umask(umask)
        for kind, kept in limits:
            with suppress(OSError, ValueError):  # a hard limit lowered unprivileged: cannot be raised again
                if resource is not None and resource.getrlimit(kind) != kept:
                    resource.setrlimit(kind, kept)
        if cwd is not None:
            with suppress(OSError):  # removed under us during the run
                os.chdir(cwd)
        for signum, handler in handlers:
            if handler is not None and signal.getsignal(signum) is not handler:
                signal.signal(signum, handler)
        if blocked is not None:
            signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
        sys.setrecursionlimit(limit)


@contextmanager
def _stdio_kept() -> Iterator[tuple[Any, Any]]:
    """The process's stdout and stderr after a run are the ones before it. A gateway may swap
    them (Hermes wraps them, and a redirect left by one of its threads once blanked a fuzz
    run's output for good); the progress and verdicts printed after the run must still show.
    During the run, what the gateway prints goes to stderr, as an exec: child's does: stdout
    carries sessiongate's verdicts only. What it does to the files beneath them is undone too:
    an `os.close(1)`, a `dup2` of /dev/null over fd 1 or 2 (a daemon's habit), or a
    `sys.__stdout__.close()` left the run's verdicts unprinted and ended it with a traceback; an
    `os.closerange(3, …)` that took the copies kept here ended it with a traceback too."""
    stdout, stderr = sys.stdout, sys.stderr
    kept = [(fd, os.dup(fd), _identity(fd)) for fd in (1, 2) if _identity(fd) is not None]
    sys.stdout = stderr
    try:
        yield stdout, stderr
    finally:
        for fd, copy, identity in kept:
            if _identity(copy) != identity:  # the gateway closed our copy (`os.closerange(3, …)`): nothing to put back from
                continue
            if _identity(fd) != identity:
                os.dup2(copy, fd)
            os.close(copy)
        sys.stdout, sys.stderr = _open_again(stdout, 1), _open_again(stderr, 2)


def _identity(fd: int) -> tuple[int, int] | None:
    """(device, inode) of what `fd` is open on; None if it is closed."""
    try:
        st = os.fstat(fd)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def _open_again(stream: Any, fd: int) -> Any:
    """`stream`, or, closed by the gateway, a new text stream on `fd` (a closed stream cannot
    say which it was on: stdout's is 1, stderr's 2)."""
    if not getattr(stream, "closed", False):
        return stream
    return io.TextIOWrapper(io.BufferedWriter(io.FileIO(fd, "w", closefd=False)), encoding="utf-8",
                            errors="backslashreplace", line_buffering=True)


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
