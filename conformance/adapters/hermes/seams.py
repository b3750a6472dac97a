"""The seams through which sessiongate drives real Hermes code, installed once per process.

Importing it sets `HERMES_HOME` (`hermes_home.home()`) before the first Hermes import. Each
patch replaces one thing the simulation owns and names the Hermes code it stands in for:

- the LLM call (`AIAgent._interruptible_api_call` / `_interruptible_streaming_api_call`):
  parks the agent thread until the harness answers (`hermes_runtime.Generation`), with the
  usage the harness's answer reports; the compression summary call
  (`agent.context_compressor.call_llm`) is answered at once;
- `AIAgent.interrupt`: also wakes a parked call, as the real call's interrupt poll would;
- session-id randomness (`gateway.session.uuid`): a per-scenario counter;
- fire-and-forget threads (`gateway.run` eviction threads): run inline, in the order
  Hermes starts them;
- `gateway.run.asyncio.sleep`: the expiry watcher sleeps in virtual time, other sleeps
  take no virtual time;
- `SessionDB` connections: a write waits out the scenario's lock in virtual time as SQLite's
  busy timeout and `_execute_write`'s seeded, jittered retries would, and fails as they
  would past Hermes's patience; writes of a killed process are refused;
- the shutdown watchdog (`os._exit` backstop): the simulation owns process death;
- network plumbing the fake call never uses (OpenAI clients, TLS setup, the local-server
  probe), console prints and log files;
- speed only, same results (`hermes_speed`): config deep copies, YAML parsing, the schema's
  column table and this process's start time (both computed once per process).

Memory, Hindsight and the plugin hooks: `hermes_memory`.
"""

from __future__ import annotations

import asyncio
import copy
import functools
import importlib
import logging
import os
import random
import re
import sqlite3
import threading
import types
import uuid as _uuid
from contextvars import ContextVar
from importlib import metadata
from typing import Any

from conformance.adapters.hermes import forks as hermes_forks
from conformance.adapters.hermes import home as hermes_home
from conformance.adapters.hermes.speed import _copy_config, cache_own_start_time, cache_schema_columns
from sim.scenario import Usage


def quiet_hermes_logs() -> None:
    """Hermes's logs are not observations: its loggers at CRITICAL (`SESSIONGATE_HERMES_LOG`
    says otherwise), before Hermes is imported (its tool registry warns of a missing optional
    module at import) and again once installed. Every top-level module the installed
    distribution ships (`top_level.txt`: iot's split `hermes_state_lockowners` warned on stderr
    when a lock-retry loop gave up), and `hermes_plugins`, 0.17's platform plugins."""
    level = os.environ.get("SESSIONGATE_HERMES_LOG", "CRITICAL").upper()
    for name in _hermes_loggers():
        logging.getLogger(name).setLevel(level)


@functools.cache
def _hermes_loggers() -> tuple[str, ...]:
    names = {"gateway", "run_agent", "agent", "hermes_state", "plugins", "hermes_plugins", "tools", "hermes_cli"}
    try:
        top = metadata.distribution(hermes_forks.installed().distribution).read_text("top_level.txt")
    except (hermes_forks.HermesNotInstalled, metadata.PackageNotFoundError):
        top = None
    names.update(line.strip() for line in (top or "").splitlines() if line.strip())
    return tuple(sorted(names))


hermes_home.home()  # Hermes binds paths at import: HERMES_HOME first, whoever imports this module
quiet_hermes_logs()

import gateway.run as hermes_run  # noqa: E402
import gateway.session as hermes_session  # noqa: E402
import hermes_cli.config as hermes_config  # noqa: E402
import hermes_logging  # noqa: E402
import hermes_state  # noqa: E402
import httpx  # noqa: E402
import run_agent  # noqa: E402
from agent import model_metadata  # noqa: E402
from openai import OpenAI  # noqa: E402
from openai.types.chat import ChatCompletion  # noqa: E402

OWNER: ContextVar[Any] = ContextVar("sessiongate_hermes_owner", default=None)
"""The `hermes_runtime.Work` a piece of Hermes code runs for (copied into executor threads)."""

LIVE: Any = None  # the running hermes_runtime.Generation, or None
_installed = False
_real_sleep = asyncio.sleep


class SimulatedKill(BaseException):
    """Raised in a parked agent thread of a process the scenario killed (SIGKILL)."""


def generation_alive(generation: Any) -> bool:
    return generation is not None and generation.alive


def caller_alive() -> bool:
    """False when the calling code belongs to a killed or stopped Hermes process."""
    work = OWNER.get()
    return work is None or work.generation.alive


# -- the LLM ---------------------------------------------------------------------------

SUMMARY = "sessiongate: a summary of the earlier turns"  # no turn tag: a summary is no copy of a turn


def usage_of(usage: Usage) -> dict[str, int] | None:
    """What the completion's `usage` says (`sim.scenario.Usage`): 'large' is the whole context
    window the adapter configures (`hermes_home.CONTEXT_LENGTH`), which crosses both the
    agent's compression threshold (50%) and the gateway's session hygiene (85%,
    gateway/run.py:_handle_message_with_agent); 'none' leaves usage out, as some providers do."""
    if usage == "none":
        return None
    prompt = hermes_home.CONTEXT_LENGTH if usage == "large" else 1 if usage == "small" else int(usage)
    return {"prompt_tokens": prompt, "completion_tokens": 1, "total_tokens": prompt + 1}


def _completion(text: str, usage: Usage = "small") -> ChatCompletion:
    return ChatCompletion.model_validate({
        "id": "sessiongate", "object": "chat.completion", "created": 0, "model": "fake-model",
        "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}],
        "usage": usage_of(usage),
    })


def _fake_aux_call(task: str | None = None, **_: Any) -> ChatCompletion:
    """`agent.auxiliary_client.call_llm` as the context compressor imports it: the summary
    call of a compression (the agent's own or the gateway's session hygiene) is auxiliary,
    answered at once with a fixed summary (no turn tag) and noted, as the background review's
    calls are. Left real, it would try the network."""
    if LIVE is not None:
        LIVE.harness.note("hermes_aux_llm_call", task=task or "")
    return _completion(SUMMARY)


def text_of(content: Any) -> str:
    if isinstance(content, list):
        return " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return content if isinstance(content, str) else ""


REVIEW_ANSWER = "Nothing to save."
"""The background review's answer: what its prompt asks for when nothing is worth saving
(agent/background_review.py, every release and fork: "If nothing is worth saving, just say
'Nothing to save.' and stop."). An empty answer is a provider fault: the forks retry it after
a jittered 5-60 s backoff timed by `time.time()` (axisrow agent/conversation_loop.py:
run_conversation, iot agent/turn_empty_response.py:_retry_empty ->
agent/turn_recovery.py:interruptible_backoff_sleep), which under the freeze never ends."""


def _fake_api_call(agent: Any, api_kwargs: dict[str, Any], **_: Any) -> ChatCompletion:
    """Stands in for the HTTP round-trip: parks until the harness replies or Hermes interrupts."""
    work = OWNER.get()
    review = threading.current_thread().name == REVIEW_THREAD
    if work is None or review:  # not a chat turn: answer at once, say so
        if LIVE is not None:
            LIVE.harness.note("hermes_aux_llm_call", session=getattr(agent, "session_id", None))
        return _completion(REVIEW_ANSWER if review else "")
    if not work.generation.alive:
        raise SimulatedKill()
    if getattr(agent, "_interrupt_requested", False):
        raise InterruptedError("Agent interrupted before API call")
    prompt = [text_of(m.get("content")) for m in api_kwargs.get("messages", []) if m.get("role") in ("user", "assistant")]
    park = work.generation.park(work, agent, prompt)
    if park.outcome == "reply":
        return _completion(park.reply, park.usage)
    if park.outcome == "interrupt":
        raise InterruptedError("Agent interrupted during API call")
    raise SimulatedKill()


_real_interrupt = run_agent.AIAgent.interrupt
_http_client: Any = None


def _create_openai_client(self: Any, client_kwargs: dict[str, Any], *, reason: str, shared: bool) -> Any:
    """The OpenAI client is network plumbing the fake call never uses: one shared transport
    instead of a TLS context (and CA-bundle load) per agent and per request."""
    global _http_client
    if _http_client is None:
        _http_client = httpx.Client()
    kwargs = {k: v for k, v in client_kwargs.items() if k in ("api_key", "base_url", "default_headers", "timeout")}
    return OpenAI(**kwargs, http_client=_http_client, max_retries=0)


def _interrupt(self: Any, *args: Any, **kwargs: Any) -> None:
    """Its arguments pass through: forks add some (axisrow: keyword-only `hard_cancel`)."""
    _real_interrupt(self, *args, **kwargs)
    if LIVE is not None:
        LIVE.interrupted(self)


# -- threads and sleeps in gateway.run ---------------------------------------------------

REVIEW_THREAD = "bg-review"  # run_agent.AIAgent._spawn_background_review, every 10 turns


class _FireAndForgetThread:
    """Threads Hermes starts and never joins, run to completion where Hermes starts them:
    `gateway.run`'s agent evictions ('agent-*') inline; `run_agent`'s background memory and
    skill review ('bg-review', whose LLM call is auxiliary) on its own thread, joined at once
    (it keeps its thread-locals; racing the next turn made generated seeds unrepeatable).
    Other threads stay real."""

    def __init__(self, group: Any = None, target: Any = None, name: str | None = None, args: Any = (),
                 kwargs: dict[str, Any] | None = None, *, daemon: bool | None = None) -> None:
        self.name = name or ""
        self._target, self._args, self._kwargs = target, args, kwargs or {}
        self._thread = None
        if not self.name.startswith("agent-"):
            self._thread = threading.Thread(group, target, name, args, kwargs, daemon=daemon)

    def start(self) -> None:
        if self._thread is not None:
            self._thread.start()
            if self.name == REVIEW_THREAD:
                self._thread.join()
        elif self._target is not None:
            self._target(*self._args, **self._kwargs)

    def is_alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def join(self, timeout: float | None = None) -> None:
        if self._thread is not None:
            self._thread.join(timeout)


def _review_joined(spawn: Any) -> Any:
    """`AIAgent._spawn_background_review`, its 'bg-review' thread joined before it returns, as
    `_FireAndForgetThread` joins it where run_agent's module-level `threading` is the seam's:
    0.13 and 0.14 import `threading` inside the method, so the review raced the next turn
    (catalog 83 on 0.14: its auxiliary call landed before or after the reply, run to run)."""

    @functools.wraps(spawn)
    def spawn_and_join(self: Any, *args: Any, **kwargs: Any) -> Any:
        before = {thread.ident for thread in threading.enumerate() if thread.name == REVIEW_THREAD}
        result = spawn(self, *args, **kwargs)
        for thread in threading.enumerate():
            if thread.name == REVIEW_THREAD and thread.ident not in before:
                thread.join()
        return result

    return spawn_and_join


async def _sleep(delay: float, result: Any = None) -> Any:
    """The watcher sleeps in virtual time; any other sleep in gateway.run takes none: it yields
    to the loop once. Nothing a sleeper polls for can need real time, because agent threads
    only run while the loop waits for them to park or finish (hermes_runtime), and a real
    1 ms sleep made 0.13.0's per-turn pollers (`_run_agent`: `track_agent`,
    `_start_stream_consumer`, `monitor_for_interrupt`) wall-bound and their wake-ups timing-dependent."""
    work = OWNER.get()
    if work is not None and work.kind == "watcher":
        generation = work.generation
        generation.watcher_slept += delay
        if generation.watcher_slept >= generation.watcher_due:  # its 60 s at boot, then 1 s per period
            await generation.watcher_wait(work)
        return result
    await _real_sleep(0)
    return result


def _module_proxy(module: types.ModuleType, name: str, **overrides: Any) -> types.ModuleType:
    """`module` with `overrides`; every other name is looked up in `module` when used, not
    copied: a copy made at install kept the real `time.monotonic` that freezegun later
    replaces in `time`, so Hermes code reading `hermes_state.time.monotonic` saw wall-clock
    time under the freeze (and a write-patience loop spun for its whole budget in real time)."""
    proxy = types.ModuleType(name)
    proxy.__dict__.update(overrides)
    proxy.__getattr__ = lambda attr: getattr(module, attr)  # PEP 562: only names not overridden
    return proxy


# -- the store ---------------------------------------------------------------------------

_WRITE = re.compile(r"\s*(BEGIN\s+IMMEDIATE|BEGIN\s+EXCLUSIVE|INSERT|UPDATE|DELETE|REPLACE)\b", re.IGNORECASE)


class _GatedConnection:
    """A SessionDB connection whose writes fail like SQLite's would: 'database is locked'
    while the scenario holds the lock, and not at all from a process that was killed."""

    def __init__(self, conn: sqlite3.Connection, generation: Any, foreign: bool) -> None:
        self._conn, self._generation, self._foreign = conn, generation, foreign
        self._busy_ms = int(conn.execute("PRAGMA busy_timeout").fetchone()[0])  # sqlite3.connect(timeout=1.0)

    def _check(self, sql: str) -> None:
        if not _WRITE.match(sql):
            return
        if self._generation is not None and not self._generation.alive:
            raise sqlite3.OperationalError("attempt to write a readonly database (the process was killed)")
        if not self._foreign and LIVE is not None and not self._conn.in_transaction:  # BEGIN took the lock already
            LIVE.lock_attempt(self._busy_ms)  # waits (in virtual time) or raises 'database is locked'

    def execute(self, sql: str, *args: Any) -> Any:
        self._check(sql)
        return self._conn.execute(sql, *args)

    def executemany(self, sql: str, *args: Any) -> Any:
        self._check(sql)
        return self._conn.executemany(sql, *args)

    def commit(self) -> None:
        """A transaction is durable here; what the step does after it (the routing, the reply)
        is not yet: crash point `sessiondb-committed`."""
        committed = self._conn.in_transaction
        self._conn.commit()
        if committed and not self._foreign and self._generation is not None:
            self._generation.crash_point("sessiondb-committed")

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)


def _retry_sleep(seconds: float) -> None:
    """`time.sleep` in hermes_state: only `SessionDB._execute_write`'s jittered retry backoff,
    which (with the failed attempt's busy wait) passes in virtual time (`Generation.retry_sleep`)."""
    if LIVE is not None:
        LIVE.retry_sleep(seconds)


def _retry_jitter(low: float, high: float) -> float:
    """`random.uniform` in hermes_state (the retry jitter): drawn from the scenario's seed."""
    return LIVE.jitter.uniform(low, high) if LIVE is not None else (low + high) / 2


def crash_point(point: str, generation: Any = None) -> None:
    """Fire `point` in the calling process (`generation`, default the live one), if it is armed."""
    generation = generation if generation is not None else LIVE
    if generation is not None:
        generation.crash_point(point)


_real_store_save = hermes_session.SessionStore._save


def _store_save(self: Any, *args: Any, **kwargs: Any) -> Any:
    """`SessionStore._save` (the routing index, sessions.json and its DB mirror), after crash
    point `routing-saving`."""
    crash_point("routing-saving")
    return _real_store_save(self, *args, **kwargs)


FOREIGN_SURFACE: ContextVar[bool] = ContextVar("sessiongate_foreign_surface", default=False)
_real_sessiondb_init = hermes_state.SessionDB.__init__


def _sessiondb_init(self: Any, *args: Any, **kwargs: Any) -> None:
    _real_sessiondb_init(self, *args, **kwargs)
    if self._conn is not None and not getattr(self, "read_only", False):
        work = OWNER.get()
        generation = work.generation if work is not None else LIVE
        self._conn = _GatedConnection(self._conn, generation, FOREIGN_SURFACE.get())


def next_session_uuid(counter: list[int]) -> _uuid.UUID:
    counter[0] += 1
    return _uuid.UUID(int=counter[0] << 96)  # hex[:8] is the counter: ids read 20260328_090000_00000001


def _optional_module(name: str) -> types.ModuleType | None:
    """A Hermes module some releases lack (the adapter feature-detects, never version-checks)."""
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError:
        return None


def install() -> bool:
    """The common seams, once per process (False when they are in already); per-scenario state
    is reached through `LIVE`. `patches.install()` runs this, the memory seams, then the rest."""
    global _installed
    if _installed:
        return False
    if not str(hermes_state.DEFAULT_DB_PATH).startswith(str(hermes_home.home())):
        raise RuntimeError("Hermes was imported before the sessiongate adapter set HERMES_HOME; "
                           "import conformance.adapters.hermes.seams first")
    _installed = True
    agent_cls = run_agent.AIAgent
    agent_cls._interruptible_api_call = _fake_api_call
    agent_cls._interruptible_streaming_api_call = _fake_api_call
    # On the class that defines it: the iot fork's `hard_interrupt` calls its mixin's `interrupt`
    # directly ("Bypasses dynamic dispatch"), which a wrapper on AIAgent alone never sees.
    next(k for k in agent_cls.__mro__ if "interrupt" in vars(k)).interrupt = _interrupt
    agent_cls._spawn_background_review = _review_joined(agent_cls._spawn_background_review)
    agent_cls._create_openai_client = _create_openai_client
    context_compressor = _optional_module("agent.context_compressor")
    if context_compressor is not None and hasattr(context_compressor, "call_llm"):
        context_compressor.call_llm = _fake_aux_call  # the compression summary (an auxiliary LLM call)
    agent_cls._safe_print = lambda self, *args, **kwargs: None  # console output is not an observation
    for module in (hermes_run, hermes_session, hermes_state, run_agent):
        module.print = lambda *args, **kwargs: None  # shadows the builtin in that module only
    for module_name, function in (("agent.ssl_guard", "verify_ca_bundle_with_fallback"),  # from 0.18.0
                                  ("agent.ssl_verify", "resolve_httpx_verify")):  # from 0.18.1
        module = _optional_module(module_name)
        if module is not None:  # one TLS context
            setattr(module, function, functools.cache(getattr(module, function)))
    model_metadata.detect_local_server_type = lambda base_url, api_key="": None  # its HTTP probe: nobody answers
    hermes_logging.setup_logging = lambda **kwargs: None  # log files + a process-lifetime listener thread
    from agent import title_generator

    if not hasattr(title_generator, "_auto_title_enabled"):  # before 0.19.0 the config's 'enabled: false' is
        title_generator.maybe_auto_title = lambda *args, **kwargs: None  # ignored: no 'auto-title' thread either
    hermes_session.uuid = types.SimpleNamespace(uuid4=_session_uuid)
    run_agent.uuid = _module_proxy(_uuid, "uuid", uuid4=_agent_uuid)
    return True


def _session_uuid() -> _uuid.UUID:
    return next_session_uuid(LIVE.uuid_counter)


AGENT_IDS = random.Random("hermes-agent-ids")
"""The stream of `run_agent`'s own uuid4s, seeded per scenario by `HermesGateway.open`."""


def _agent_uuid() -> _uuid.UUID:
    """`uuid.uuid4()` inside run_agent.py, from a seeded stream: an agent made without a
    session id names its own (`AIAgent.__init__`, 0.14: `<time>_<uuid4().hex[:6]>`), and 0.14
    fired `on_session_end` for such an id in catalog 83, a different one each run."""
    return _uuid.UUID(int=AGENT_IDS.getrandbits(128), version=4)


def install_after_memory() -> None:
    """The seams that go in after the memory providers' (`patches.install()`), forks' shims last."""
    hermes_run.threading = _module_proxy(threading, "threading", Thread=_FireAndForgetThread)
    run_agent.threading = _module_proxy(threading, "threading", Thread=_FireAndForgetThread)
    hermes_run.asyncio = _module_proxy(asyncio, "asyncio", sleep=_sleep)
    hermes_run.arm_shutdown_watchdog = lambda *a, done_event=None, **k: done_event or threading.Event()
    hermes_config.copy = _module_proxy(copy, "copy", deepcopy=_copy_config)
    hermes_state.SessionDB.__init__ = _sessiondb_init
    hermes_session.SessionStore._save = _store_save
    cache_schema_columns(hermes_state.SessionDB)
    cache_own_start_time(_optional_module("gateway.status"))
    hermes_state.time = _module_proxy(hermes_state.time, "time", sleep=_retry_sleep)
    hermes_state.random = _module_proxy(hermes_state.random, "random", uniform=_retry_jitter)
    hermes_forks.install_shims(_session_uuid)  # forks of hermes-agent: what differs is adapted there
    quiet_hermes_logs()
