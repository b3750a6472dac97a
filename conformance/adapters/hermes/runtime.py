"""One incarnation of the Hermes gateway process: a real GatewayRunner on its own event loop.

Agent turns run on Hermes's executor threads as in production; the fake LLM parks the
thread until the harness answers, so a turn is really in flight during its virtual latency
(routing happens when the message arrives; watcher ticks, commands and shutdown see a
running agent). Determinism comes from one rule: Hermes code runs on one thread at a time.
Whoever lets an agent thread go (a new executor job, a reply, an interrupt) blocks until
that thread parks again or finishes its job; `asyncio.to_thread` work runs inline on the
loop. Each adapter call returns once every piece of work is finished, parked, or waiting
for the watcher's next tick.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import threading
from collections.abc import Callable, Coroutine
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from conformance.adapter import CrashPointFired, Harness
from conformance.adapters.hermes import forks as hermes_forks
from conformance.adapters.hermes import seams
from conformance.adapters.hermes.clock import WATCHER_DELAY
from conformance.adapters.hermes.loop import InlineLoop, task_order
from conformance.adapters.hermes.store_waits import StoreWaits, WriterState
from sim.clock import SECOND
from sim.scenario import Chat, Usage

THREAD_TIMEOUT = 60.0  # real seconds an agent thread may run before the run counts as hung
AGENT_THREADS = 10  # gateway/run.py:GatewayRunner._get_executor: ThreadPoolExecutor(max_workers=10)


@dataclass(eq=False)
class Work:
    """A coroutine the adapter started on the runner's loop."""

    kind: str  # message | command | watcher | stop | boot
    chat: Chat | None
    generation: Generation
    task: asyncio.Task[Any] | None = None
    session: str | None = None  # the session its agent last asked the LLM about
    interrupted: bool = False
    idle: bool = False  # the watcher, waiting for its next tick
    queued: int = 0  # agent jobs waiting for a free executor worker (all of them parked)


@dataclass(eq=False)
class Park:
    """An agent thread blocked in the fake LLM call."""

    work: Work
    agent: Any
    session: str
    prompt: list[str]
    event: threading.Event = field(default_factory=threading.Event)
    request: str | None = None  # the harness's request id, once registered ('sleep' for a timed park)
    outcome: str | None = None  # reply | interrupt | kill
    reply: str = ""
    usage: Usage = "small"  # what the reply reports about token usage
    until: int | None = None  # a timed park (a write waiting on the locked store): woken at this virtual time


class AgentExecutor(ThreadPoolExecutor):
    """Hermes's agent executor (`GatewayRunner._get_executor`): a job submitted from the loop
    runs while the loop waits, until it parks in the LLM call or ends. With every worker
    parked, a job queues as in Hermes and starts when a woken worker finishes."""

    def __init__(self, generation: Generation) -> None:
        super().__init__(max_workers=AGENT_THREADS, thread_name_prefix="hermes-gateway")
        self.generation = generation

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        generation = self.generation
        on_loop = threading.get_ident() == generation.main_thread
        work = None
        if on_loop and generation.parked() >= AGENT_THREADS:
            work = seams.OWNER.get() or Work("untracked", None, generation)

        def job() -> Any:
            if work is not None:
                generation.queue(work, -1)  # started on the worker a finished job handed over
            try:
                return fn(*args, **kwargs)
            finally:
                generation.quiet()

        if work is not None:  # every worker is parked: the job waits in the executor's queue
            generation.queue(work, +1)
            generation.signal_progress()  # on the loop: the work now counts as blocked
            return super().submit(job)
        generation.release()
        future = super().submit(job)
        if on_loop:
            generation.wait_quiet("a new agent job")
        return future


class Generation(StoreWaits):
    """Everything one Hermes process holds; a crash or SIGTERM ends it, a restart makes another."""

    def __init__(self, harness: Harness, on_done: Callable[[Work], None], uuid_counter: list[int],
                 chat_of_key: Callable[[str], Chat | None], lock_until: Callable[[], int],
                 jitter: random.Random, wake_at: Callable[[int, Park], Any]) -> None:
        self.harness, self.on_done, self.uuid_counter = harness, on_done, uuid_counter
        self.chat_of_key, self.lock_until, self.jitter, self.wake_at = chat_of_key, lock_until, jitter, wake_at
        self.writer = WriterState()
        self.alive = True
        self.crashed: str | None = None  # the crash point this process died at (`crash_point`)
        self.loop = InlineLoop()
        self.works: list[Work] = []
        self.parks: list[Park] = []  # appended by agent threads, under `lock`
        self.lock = threading.Lock()
        self.requests: dict[str, Park] = {}
        self.cond = threading.Condition()
        self.busy = 0  # agent jobs let go and not yet parked or finished
        self.queued = 0  # agent jobs waiting for a free worker
        self.progress: asyncio.Future[None] | None = None
        self.tick_gate = asyncio.Event()
        self.watcher_slept, self.watcher_due = 0.0, WATCHER_DELAY / SECOND  # its first sleep
        self.main_thread = threading.get_ident()
        self.runner: Any = None
        self.executor: AgentExecutor | None = None

    # -- running work ---------------------------------------------------------------------

    def boot(self, make_runner: Callable[[], Any], home: Path) -> None:
        """Build the runner, then do what `GatewayRunner.start()` does for sessions."""
        seams.LIVE = self
        self.runner = make_runner()
        self.executor = AgentExecutor(self)
        self.runner._executor = self.executor
        if not hasattr(self.runner, "_get_executor"):  # before 0.18.0 agents ran on the loop's default executor
            self.loop.set_default_executor(self.executor)
        self.runner._running = True  # what start() sets once adapters are up
        self.start("boot", None, self._recover(home))
        self.settle()
        # interval=1: its between-sweep loop (`for _ in range(interval): await asyncio.sleep(1)`)
        # sleeps once instead of 300 times; that one sleep lasts until the harness's next tick,
        # which comes one watcher interval (the scenario's, hermes_terms.watcher_interval) later.
        watcher = self.start("watcher", None, hermes_forks.expiry_watcher(self.runner))
        if getattr(self.runner, "_background_tasks", None) is None:
            self.runner._background_tasks = set()
        self.runner._background_tasks.add(watcher.task)  # as _spawn_supervised does: stop() cancels it
        self.settle()

    async def _recover(self, home: Path) -> None:
        """gateway/run.py:GatewayRunner.start, its steps that touch sessions. (No adapter is
        connected, so its startup auto-resume and redelivery have nobody to talk to; the store
        is still loaded, as the auto-resume's enumeration of pending sessions loads it, before
        start() returns and held input is handed over.)"""
        if not await hermes_forks.recover_sessions(self.runner, home):
            marker = home / ".clean_shutdown"
            if marker.exists():
                marker.unlink()
            elif hasattr(self.runner, "async_session_store"):  # 0.19.0
                await self.runner.async_session_store.suspend_recently_active()
            else:
                self.runner.session_store.suspend_recently_active()
            self.runner._suspend_stuck_loop_sessions()
        self.runner.session_store._ensure_loaded()  # _schedule_resume_pending_sessions (iot: _resume_pending_candidates)

    def start(self, kind: str, chat: Chat | None, coro: Coroutine[Any, Any, Any]) -> Work:
        work = Work(kind, chat, self)

        async def run() -> Any:
            seams.OWNER.set(work)
            return await coro

        work.task = self.loop.create_task(run())
        self.works.append(work)
        return work

    def settle(self) -> None:
        """Run the loop until every work is done, parked, or waiting for a tick; or until
        the process died at a crash point, which the adapter's call then raises."""
        self.loop.run_until_complete(self._settle())
        if self.crashed is not None:
            raise CrashPointFired(self.crashed)

    async def _settle(self) -> None:
        while self.crashed is None:  # a process dead at a crash point runs nothing more
            self._reap()
            pending = [w.task for w in self.works if w.task is not None and not w.task.done() and not self._blocked(w)]
            if not pending:
                return
            self.progress = self.loop.create_future()
            await asyncio.wait([*pending, self.progress], return_when=asyncio.FIRST_COMPLETED)

    def _blocked(self, work: Work) -> bool:
        if work.idle or work.queued:
            return True
        with self.lock:
            return any(p.work is work and p.outcome is None and p.request is not None for p in self.parks)

    def _reap(self) -> None:
        for work in [w for w in self.works if w.task is not None and w.task.done()]:
            self.works.remove(work)
            if work.task.cancelled() or self.crashed is not None:
                continue
            error = work.task.exception()
            if error is not None:
                raise error
            self.on_done(work)

    def signal_progress(self) -> None:
        if self.progress is not None and not self.progress.done():
            self.progress.set_result(None)

    def post(self, fn: Callable[..., Any], *args: Any) -> None:
        """Run `fn` on the loop thread (from any thread); a no-op once the loop is closed."""
        with contextlib.suppress(RuntimeError):
            self.loop.call_soon_threadsafe(fn, *args)

    def crash_point(self, point: str) -> None:
        """A place in Hermes's own code where the process may die (a seam calls it, on whatever
        thread runs Hermes now): when the scenario or fuzz's swarm fires it, the process is dead
        from this instant (writes refused, observers deaf, nothing more settles) and this
        thread unwinds; the adapter's call then raises `CrashPointFired`, and the runner
        crashes the gateway as at a `crash`. Asked through `harness.crash_point`, which in a
        child process (`--isolate`) asks the parent's harness: the child's own `points` are
        never armed, so reading them there let every point pass unfired."""
        if not self.alive:
            return
        try:
            self.harness.crash_point(point)
        except CrashPointFired:
            self.crashed, self.alive = point, False
            raise seams.SimulatedKill() from None

    # -- one agent thread at a time ---------------------------------------------------------

    def release(self) -> None:
        with self.cond:
            self.busy += 1

    def quiet(self, parking: bool = False) -> None:
        """Called on an agent thread as it parks or finishes a job. A finished job's worker
        goes straight to a queued job, which inherits its turn to run."""
        with self.cond:
            if parking or not self.queued:
                self.busy -= 1
                self.cond.notify_all()

    def queue(self, work: Work, change: int) -> None:
        with self.cond:
            self.queued += change
            work.queued += change

    def parked(self) -> int:
        with self.lock:
            return sum(1 for p in self.parks if p.outcome is None)

    def wait_quiet(self, what: str) -> None:
        with self.cond:
            if not self.cond.wait_for(lambda: self.busy <= 0, THREAD_TIMEOUT):
                raise RuntimeError(f"a Hermes agent thread ({what}) neither parked nor finished "
                                   f"within {THREAD_TIMEOUT:.0f}s")

    # -- the LLM seam (called on agent threads) ---------------------------------------------

    def park(self, work: Work, agent: Any, prompt: list[str]) -> Park:
        park = Park(work, agent, str(agent.session_id), prompt)
        with self.lock:
            self.parks.append(park)
        self.post(self._register, park)
        self.quiet(parking=True)
        if not park.event.wait(3600.0):  # real seconds: no scenario keeps a turn parked that long
            park.outcome = "kill"
        with self.lock:
            self.parks.remove(park)
        return park

    def _register(self, park: Park) -> None:
        if not self.alive or park.outcome is not None:
            return
        chat = park.work.chat or self.chat_of_key(getattr(park.agent, "_gateway_session_key", "") or "")
        park.request = self.harness.llm.request(chat.name if chat else "", park.session, park.prompt)
        self.requests[park.request] = park
        park.work.session = park.session
        self.signal_progress()

    def reply(self, request: str, text: str, usage: Usage = "small") -> bool:
        park = self.requests.get(request)
        if park is None:
            return False
        park.usage = usage
        self.wake(park, "reply", text)
        return True

    def interrupted(self, agent: Any) -> None:
        """`AIAgent.interrupt` was called: the real call's interrupt poll would now raise."""
        if threading.get_ident() != self.main_thread:
            self.post(self.interrupted, agent)
            return
        with self.lock:
            parks = [p for p in self.parks if p.agent is agent and p.outcome is None and p.until is None]
        for park in parks:
            self.wake(park, "interrupt")

    def wake(self, park: Park, outcome: str, reply: str = "") -> None:
        """Let one parked thread go, and wait until it parks again or ends its job."""
        if park.outcome is not None:
            return
        self.requests.pop(park.request or "", None)
        if outcome == "interrupt":
            park.work.interrupted = True
        park.outcome, park.reply = outcome, reply
        self.release()
        park.event.set()
        self.wait_quiet(f"woken with {outcome!r}")

    # -- the locked store (hermes_state.SessionDB._execute_write): `StoreWaits`, and -----------

    def timed_park(self, work: Work, until: int) -> None:
        """Block this agent thread until virtual time `until` (a harness timer wakes it)."""
        park = Park(work, None, "", [], until=until)
        with self.lock:
            self.parks.append(park)
        self.post(self._register_timed, park)
        self.quiet(parking=True)
        if not park.event.wait(3600.0):
            park.outcome = "kill"
        with self.lock:
            self.parks.remove(park)
        if park.outcome == "kill":
            raise seams.SimulatedKill()

    def _register_timed(self, park: Park) -> None:
        if not self.alive or park.outcome is not None:
            return
        park.request = "sleep"
        self.wake_at(park.until or 0, park)
        self.signal_progress()

    # -- the expiry watcher -----------------------------------------------------------------

    async def watcher_wait(self, work: Work) -> None:
        """The watcher's sleeps have added up to its period: it waits for the harness's tick."""
        self.watcher_slept, self.watcher_due = 0.0, 1.0
        work.idle = True
        self.signal_progress()
        await self.tick_gate.wait()
        self.tick_gate.clear()
        work.idle = False

    def tick(self) -> None:
        """The watcher's sleep is over: it sweeps once and sleeps again."""
        for work in self.works:
            if work.kind == "watcher":
                work.idle = False
        self.tick_gate.set()
        self.settle()

    # -- the end ----------------------------------------------------------------------------

    def stop(self) -> None:
        """SIGTERM: the real `GatewayRunner.stop()`, then the process is gone."""
        self.start("stop", None, self.runner.stop())
        self.settle()
        self.kill()

    def kill(self) -> None:
        """SIGKILL: nothing of this process acts again. Parked threads unwind with writes
        refused and observers deaf, and are joined before the next process starts."""
        self.alive = False
        if seams.LIVE is self:
            seams.LIVE = None
        with self.lock:
            parks = list(self.parks)
        for park in parks:
            park.outcome = "kill"
            park.event.set()
        if self.executor is not None:
            hermes_forks.end_pool(self.executor, THREAD_TIMEOUT)
        for name in ("_executor", "_housekeeping_executor"):  # the runner's own pools (iot's housekeeping pool,
            pool = getattr(self.runner, name, None)  # gateway/run.py:_get_housekeeping_executor): a death takes
            if isinstance(pool, Executor) and pool is not self.executor:  # their idle workers too, as `stop()` does
                hermes_forks.end_pool(pool, THREAD_TIMEOUT)
        for db in (getattr(self.runner, "session_store", None), getattr(self.runner, "_session_db", None)):
            conn = getattr(getattr(db, "_db", db), "_conn", None)
            if conn is not None:
                conn.close()
        self.loop.set_exception_handler(lambda loop, context: None)  # its pending tasks die unheard
        for task in sorted(asyncio.all_tasks(self.loop), key=task_order):
            with contextlib.suppress(BaseException):  # unwound now, deaf and refused, not by the GC at exit
                task.get_coro().close()
        self.loop.close()
        self.works.clear()
        hermes_forks.process_exit()
