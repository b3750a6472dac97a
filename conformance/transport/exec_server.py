"""Serve a Python gateway over the JSON-lines protocol: `python -m conformance.transport.exec_server NAME`.

This is the child end of `conformance.transport.exec_gateway`: it reads one request per line, runs it on
the gateway, and answers `done` or `fail`. While a request runs, the gateway's calls on the
harness (LLM, platform, memory, hooks, timers) go back to the parent as `call` lines, one
answer each, so the order of everything is the parent's and stays deterministic.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Sequence
from typing import IO, Any

from conformance.adapter import BackendBusy, BackendUnavailable, CrashPointFired, Gateway, Harness, Inbound
from conformance.harness import values
from conformance.harness.calls import exception_text, resources_hook, short_traceback
from conformance.harness.registry import resolve
from conformance.harness.runner import close_gateway
from conformance.observations import Resources
from conformance.observers import NO_RECALL
from conformance.transport import exec_gateway
from conformance.transport.wire import (
    VERSION,
    VERSIONS,
    chat_from_wire,
    dumps,
    resources_to_wire,
    state_to_wire,
)
from sim.clock import VirtualClock
from sim.loader import config_from_document


class ParentGone(SystemExit):
    """The parent closed the pipe: this child exits. Any other SystemExit is the gateway's, and
    its error at that step, as in process (`calls.GatewayCalls._call`)."""


class Channel:
    def __init__(self, reader: IO[str], writer: IO[str]) -> None:
        self.reader, self.writer = reader, writer

    def send(self, message: dict[str, Any]) -> None:
        self.writer.write(dumps(message))
        self.writer.flush()

    def call(self, name: str, **args: Any) -> Any:
        """Ask the parent's harness to do something; wait for its answer."""
        self.send({"call": name, "args": args})
        line = self.reader.readline()
        if not line:
            raise ParentGone(0)  # the parent went away
        answer = json.loads(line)
        if answer.get("error") == "unavailable":
            if isinstance(answer.get("ready_at"), int):
                raise BackendBusy(answer.get("message", "memory backend slow"), answer["ready_at"])
            raise BackendUnavailable(answer.get("message", "memory backend unavailable"))
        if answer.get("error") == "crashed":  # a crash point fired: unwind the step, as in process
            raise CrashPointFired(str(answer.get("point", args.get("point", ""))))
        if "error" in answer:
            raise RuntimeError(f"harness refused {name}: {answer['error']}")
        return answer.get("result")


class RemoteTimer:
    def __init__(self, channel: Channel, timer_id: int, when: int) -> None:
        self.channel, self.id, self.when, self.cancelled = channel, timer_id, when, False

    def cancel(self) -> None:
        if not self.cancelled:
            self.cancelled = True
            self.channel.call("timer.cancel", id=self.id)


class RemoteScheduler:
    def __init__(self, channel: Channel, clock: VirtualClock) -> None:
        self.channel, self.clock = channel, clock
        self.callbacks: dict[int, tuple[Callable[..., Any], tuple[Any, ...]]] = {}

    def now(self) -> int:
        return self.clock.now()

    def call_at(self, when: int, callback: Callable[..., Any], *args: Any) -> RemoteTimer:
        timer_id = int(self.channel.call("scheduler.call_at", when=when))
        self.callbacks[timer_id] = (callback, args)
        return RemoteTimer(self.channel, timer_id, max(when, self.clock.now()))


class _Proxy:
    """Forwards `obj.method(**kwargs)` as the call `prefix.method` with fixed argument names."""

    def __init__(self, channel: Channel, prefix: str, signatures: dict[str, tuple[str, ...]], **extra: Any) -> None:
        self._channel, self._prefix, self._signatures, self._extra = channel, prefix, signatures, extra

    def __getattr__(self, method: str) -> Callable[..., Any]:
        if method not in self._signatures:
            raise AttributeError(method)
        names = self._signatures[method]

        def forward(*args: Any) -> Any:
            payload = dict(zip(names, args, strict=True), **self._extra)
            if method == "on_session_end":
                payload["transcript"] = [list(pair) for pair in payload["transcript"]]
            if "texts" in payload or "prompt" in payload:
                for key in ("texts", "prompt"):
                    if key in payload:
                        payload[key] = list(payload[key])
            return self._channel.call(f"{self._prefix}.{method}", **payload)

        return forward


class _Llm(_Proxy):
    """`request(chat, session, prompt, *, recall=())`: the recall goes on the wire only when given."""

    def request(self, chat: str, session: str, prompt: Any, *, recall: Any = NO_RECALL) -> Any:
        payload: dict[str, Any] = {"chat": chat, "session": session, "prompt": list(prompt)}
        if recall is not NO_RECALL:  # a list of texts; anything else as it is, for the parent to refuse
            payload["recall"] = list(recall) if isinstance(recall, Sequence) and not isinstance(recall, (str, bytes)) else recall
        return self._channel.call("llm.request", **payload)


class _KeyedIngest(_Proxy):
    """`ingest(session, texts, keys=None)`: the keys go on the wire only when given (v2)."""

    def ingest(self, session: str, texts: Any, keys: Any = None) -> Any:
        payload: dict[str, Any] = {"session": session, "texts": list(texts), **self._extra}
        if keys is not None:
            payload["keys"] = list(keys)
        return self._channel.call("backend.ingest", **payload)


class RemoteHarness(Harness):
    def note(self, what: str, **detail: Any) -> None:
        self.scheduler.channel.call("note", what=what, detail=detail)  # type: ignore[attr-defined]

    def crash_point(self, point: str) -> None:
        """Asks the parent (v2); its answer 'crashed' raises `CrashPointFired` here."""
        self.scheduler.channel.call("crash_point", point=point)  # type: ignore[attr-defined]


def _harness(channel: Channel, zone: str, now: int, backends: list[str], seed: int = 0,
             state_dir: str | None = None) -> RemoteHarness:
    clock = VirtualClock(now, zone)
    recorder = _Proxy(channel, "recorder", {
        "sync_turn": ("session", "user", "assistant"),
        "on_session_end": ("session", "transcript"),
        "on_session_switch": ("old", "new"),
        "shutdown": (),
    })
    recorder.name = "recorder"  # type: ignore[attr-defined]
    return RemoteHarness(
        clock=clock,
        scheduler=RemoteScheduler(channel, clock),  # type: ignore[arg-type]
        llm=_Llm(channel, "llm", {"request": ("chat", "session", "prompt"),  # type: ignore[arg-type]
                                  "usage_of": ("request",)}),
        platform=_Proxy(channel, "platform", {"send_reply": ("chat", "session", "text")}),  # type: ignore[arg-type]
        recorder=recorder,  # type: ignore[arg-type]
        backends={name: _KeyedIngest(channel, "backend", {"ingest": ("session", "texts")}, backend=name)  # type: ignore[misc]
                  for name in backends},
        hooks=_Proxy(channel, "hooks", {"on_session_finalize": ("session", "reason"),  # type: ignore[arg-type]
                                        "on_session_reset": ("session",)}),
        log=None,  # type: ignore[arg-type]
        seed=seed,
        state_dir=state_dir,
    )


def serve(factory: Callable[[], Gateway], reader: IO[str], writer: IO[str]) -> None:
    channel = Channel(reader, writer)
    gateway = factory()
    harness: RemoteHarness | None = None
    # Real crashes: a gateway with `open_store`, given a state directory by the parent, is killed at
    # each crash, and the next child opens what it stored there (docs/protocol.md).
    state_dir = os.environ.get(exec_gateway.STATE_DIR) or None
    try:
        for line in reader:
            request = json.loads(line)
            op = request.get("op")
            if harness is not None and request.get("now") is not None and request["now"] > harness.clock.now():
                harness.clock.set(request["now"])
            try:
                value: Any = None
                if op == "hello":  # the version asked, if this end speaks it (a v1 parent gets v1)
                    value = {"version": request.get("version") if request.get("version") in VERSIONS else VERSION}
                    if resources_hook(gateway) is not None:
                        value["resources_delta"] = True
                    if state_dir is not None and callable(getattr(gateway, "open_store", None)):
                        value["crash"] = "kill"
                elif op == "profile":
                    value = values.profile(gateway.profile(config_from_document(request["config"]))).to_detail()
                elif op in ("start", "open_store"):  # open_store: a new process on the store a killed one left
                    harness = _harness(channel, request["zone"], request["now"], request["backends"], request.get("seed", 0),
                                       state_dir)
                    getattr(gateway, op)(config_from_document(request["config"]), harness)
                elif op == "deliver_message":
                    gateway.deliver_message(Inbound(chat_from_wire(request["chat"]), request["text"], request["muted"]))
                elif op == "deliver_command":
                    gateway.deliver_command(chat_from_wire(request["chat"]), request["command"])
                elif op == "deliver_reply":
                    gateway.deliver_reply(request["request"], request["text"])
                elif op == "delegate":
                    gateway.delegate(chat_from_wire(request["chat"]), request["text"])
                elif op == "restart" and "config" in request:
                    gateway.restart(config_from_document(request["config"]))
                elif op in ("sigterm", "crash", "restart"):
                    getattr(gateway, op)()
                elif op == "delete_session_row":
                    gateway.delete_session_row(request["session"], request["keep_children"])
                elif op == "lock_store":
                    gateway.lock_store(request["until"])
                elif op == "durable_state":
                    value = state_to_wire(values.durable_state(gateway.durable_state()))
                elif op == "resources":
                    value = resources_to_wire(values.resources(gateway.resources()))
                elif op == "resources_delta":
                    hook = resources_hook(gateway)
                    change = values.resources_change(hook() if hook is not None else gateway.resources())
                    value = resources_to_wire(change) if isinstance(change, Resources) else change
                elif op == "reset":  # the next scenario: a fresh gateway in this same process
                    close_gateway(gateway)
                    gateway, harness = factory(), None
                elif op == "fire_timer":
                    assert harness is not None
                    callback, args = harness.scheduler.callbacks.pop(request["id"])  # type: ignore[attr-defined]
                    callback(*args)
                else:
                    raise ValueError(f"unknown op {op!r}")
                channel.send({"done": True, "value": value})
            except ParentGone:
                raise
            except CrashPointFired:  # the step is unwound: the parent crashes this gateway next
                channel.send({"done": True, "value": None})
            except values.BadValue as err:  # the message the runner gives the same answer in process
                channel.send({"fail": {"message": f"bad value in answer to {op}: {err}"}})
            except BaseException as err:
                channel.send({"fail": {"message": exception_text(err), "traceback": list(short_traceback(err))}})
    finally:  # end of input (the parent is done), or the parent went away mid-call
        close_gateway(gateway)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m conformance.transport.exec_server GATEWAY_NAME", file=sys.stderr)
        return 2
    exec_gateway.as_child()  # a gateway run here is already isolated, in the group the parent kills
    protocol_out = sys.stdout
    sys.stdout = sys.stderr  # a stray print() in the gateway must not corrupt the protocol
    serve(resolve(args[0]), sys.stdin, protocol_out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
