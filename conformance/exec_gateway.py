"""A gateway in its own process, spoken to over stdin/stdout in JSON lines (docs/protocol.md).

Used for gateways in any language (`--gateway exec:"node my-gateway.js"`) and for isolation
(`--isolate`): a hung step is cut off after a wall-clock step timeout and a runaway child is
capped in memory, so one bad scenario cannot take the run down. The wall clock is read here,
and only here, to time a step out; it never reaches the observation log.
"""

from __future__ import annotations

import json
import os
import resource
import selectors
import shlex
import subprocess
import sys
import tempfile
import time
from typing import Any

from conformance.adapter import BackendUnavailable, GatewayTimeout, Harness, Inbound, Profile, RemoteGatewayError
from conformance.observations import DurableState, Resources
from conformance.wire import (
    VERSION,
    chat_to_wire,
    dumps,
    profile_from_wire,
    resources_from_wire,
    state_from_wire,
)
from sim.engine import Timer
from sim.loader import config_document
from sim.scenario import Chat, GatewayConfig

DEFAULT_STEP_TIMEOUT = 10.0


class ExecGateway:
    """Implements the adapter protocol by forwarding every call to a child process."""

    def __init__(self, argv: list[str], *, step_timeout: float = DEFAULT_STEP_TIMEOUT, memory_mb: int | None = None,
                 env: dict[str, str] | None = None) -> None:
        self.argv, self.step_timeout, self.memory_mb, self.env = argv, step_timeout, memory_mb, env
        self.proc: subprocess.Popen[bytes] | None = None
        self.h: Harness | None = None
        self.timers: dict[int, Timer] = {}
        self._buffer = b""
        self._stderr = tempfile.TemporaryFile()

    # -- the child process ----------------------------------------------------------------

    def _limits(self) -> None:  # runs in the child before exec
        if self.memory_mb:
            limit = self.memory_mb * 1024 * 1024
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    def _spawn(self) -> None:
        env = dict(os.environ, **(self.env or {}))
        try:
            self.proc = subprocess.Popen(self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr,
                                         env=env, preexec_fn=self._limits)
        except OSError as err:
            raise RemoteGatewayError(f"cannot start {shlex.join(self.argv)}: {err.strerror}") from None
        hello = self._request("hello", version=VERSION)
        if not isinstance(hello, dict) or hello.get("version") != VERSION:
            raise RemoteGatewayError(f"{shlex.join(self.argv)} does not speak protocol version {VERSION}: {hello!r}")

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.proc = None

    def _stderr_tail(self) -> str:
        self._stderr.seek(0)
        lines = self._stderr.read().decode("utf-8", "replace").strip().splitlines()
        return lines[-1] if lines else ""

    def _send(self, message: dict[str, Any]) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        try:
            self.proc.stdin.write(dumps(message).encode())
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            raise self._died() from None

    def _died(self) -> RemoteGatewayError:
        assert self.proc is not None
        code = self.proc.wait()
        why = f"killed by signal {-code}" if code < 0 else f"exited with status {code}"
        tail = self._stderr_tail()
        self.proc = None
        return RemoteGatewayError(f"gateway process {why}" + (f": {tail}" if tail else ""))

    def _read_line(self, deadline: float, what: str) -> dict[str, Any]:
        assert self.proc is not None and self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        with selectors.DefaultSelector() as selector:
            selector.register(fd, selectors.EVENT_READ)
            while b"\n" not in self._buffer:
                remaining = deadline - time.monotonic()
                if remaining <= 0 or not selector.select(remaining):
                    self.close()
                    raise GatewayTimeout(f"no answer to {what} within {self.step_timeout:g}s (wall clock); the process was killed")
                chunk = os.read(fd, 65536)
                if not chunk:
                    raise self._died()
                self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        try:
            message = json.loads(line)
        except ValueError:
            raise RemoteGatewayError(f"protocol error: not a JSON line in answer to {what}: {line[:120]!r}") from None
        if not isinstance(message, dict):
            raise RemoteGatewayError(f"protocol error: expected a JSON object in answer to {what}")
        return message

    def _request(self, op: str, **fields: Any) -> Any:
        if self.proc is None:
            raise RemoteGatewayError("gateway process is not running")
        if self.h is not None:
            fields["now"] = self.h.clock.now()
        self._send({"op": op, **fields})
        while True:
            message = self._read_line(time.monotonic() + self.step_timeout, op)
            if "call" in message:
                self._send(self._serve(message))
            elif "done" in message:
                return message.get("value")
            elif "fail" in message:
                fail = message["fail"] if isinstance(message["fail"], dict) else {"message": str(message["fail"])}
                raise RemoteGatewayError(str(fail.get("message", "")), tuple(fail.get("traceback", ())))
            else:
                raise RemoteGatewayError(f"protocol error: unexpected line in answer to {op}: {sorted(message)}")

    def _serve(self, message: dict[str, Any]) -> dict[str, Any]:
        """Carry out one call the child makes on the harness's observers."""
        h = self.h
        call = message["call"]
        if h is None:
            return {"error": f"{call} before start"}
        a = message.get("args", {})
        try:
            if call == "llm.request":
                return {"result": h.llm.request(a["chat"], a["session"], a["prompt"])}
            if call == "platform.send_reply":
                h.platform.send_reply(a["chat"], a["session"], a["text"])
            elif call == "recorder.sync_turn":
                h.recorder.sync_turn(a["session"], a["user"], a["assistant"])
            elif call == "recorder.on_session_end":
                h.recorder.on_session_end(a["session"], [tuple(pair) for pair in a["transcript"]])
            elif call == "recorder.on_session_switch":
                h.recorder.on_session_switch(a["old"], a["new"])
            elif call == "recorder.shutdown":
                h.recorder.shutdown()
            elif call == "backend.ingest":
                h.backends[a["backend"]].ingest(a["session"], a["texts"])
            elif call == "hooks.on_session_finalize":
                h.hooks.on_session_finalize(a["session"], a["reason"])
            elif call == "hooks.on_session_reset":
                h.hooks.on_session_reset(a["session"])
            elif call == "scheduler.call_at":
                timer_id = len(self.timers) + 1
                self.timers[timer_id] = h.scheduler.call_at(int(a["when"]), self._fire, timer_id)
                return {"result": timer_id}
            elif call == "timer.cancel":
                self.timers[int(a["id"])].cancel()
            elif call == "note":
                h.note(a["what"], **a.get("detail", {}))
            else:
                return {"error": f"unknown call {call!r}"}
        except BackendUnavailable as err:
            return {"error": "unavailable", "message": str(err)}
        except (KeyError, TypeError, ValueError) as err:
            return {"error": f"bad arguments to {call}: {err}"}
        return {"result": None}

    def _fire(self, timer_id: int) -> None:
        self._request("fire_timer", id=timer_id)

    # -- the adapter protocol ---------------------------------------------------------------

    def profile(self, config: GatewayConfig) -> Profile:
        if self.proc is None:
            self._spawn()
        return profile_from_wire(self._request("profile", config=config_document(config)))

    def start(self, config: GatewayConfig, harness: Harness) -> None:
        if self.proc is None:
            self._spawn()
        self.h = harness
        self._request("start", config=config_document(config), zone=harness.clock.zone.key,
                      backends=sorted(harness.backends))

    def deliver_message(self, message: Inbound) -> None:
        self._request("deliver_message", chat=chat_to_wire(message.chat), text=message.text, muted=message.muted)

    def deliver_command(self, chat: Chat, command: str) -> None:
        self._request("deliver_command", chat=chat_to_wire(chat), command=command)

    def deliver_reply(self, request_id: str, text: str) -> None:
        self._request("deliver_reply", request=request_id, text=text)

    def delegate(self, chat: Chat, text: str) -> None:
        self._request("delegate", chat=chat_to_wire(chat), text=text)

    def sigterm(self) -> None:
        self._request("sigterm")

    def crash(self) -> None:
        self._request("crash")

    def restart(self) -> None:
        self._request("restart")

    def delete_session_row(self, session_id: str, keep_children: bool = False) -> None:
        self._request("delete_session_row", session=session_id, keep_children=keep_children)

    def lock_store(self, until: int) -> None:
        self._request("lock_store", until=until)

    def durable_state(self) -> DurableState:
        return state_from_wire(self._request("durable_state"))

    def resources(self) -> Resources:
        return resources_from_wire(self._request("resources"))


def exec_gateway(command: str) -> ExecGateway:
    """`exec:COMMAND`: run COMMAND (shell words) as the gateway process."""
    return ExecGateway(shlex.split(command))


def isolated(name: str, *, step_timeout: float = DEFAULT_STEP_TIMEOUT, memory_mb: int | None = None,
             env: dict[str, str] | None = None) -> ExecGateway:
    """The registered gateway `name`, in a child process of its own."""
    return ExecGateway([sys.executable, "-m", "conformance.exec_server", name], step_timeout=step_timeout,
                       memory_mb=memory_mb, env=env)
