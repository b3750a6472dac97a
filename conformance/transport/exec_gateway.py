"""A gateway in its own process, spoken to over stdin/stdout in JSON lines (docs/protocol.md).

Used for gateways in any language (`--gateway exec:"node my-gateway.js"`) and for isolation
(`--isolate`): a hung step is cut off after a wall-clock step timeout and a runaway child is
capped in memory, so one bad scenario cannot take the run down. The wall clock is read here,
and only here, to time a step out; it never reaches the observation log.

The child runs in a process group of its own, and every way it ends (step timeout, death, end
of scenario, an interrupted run, the interpreter exiting) kills that whole group: what the child
started itself must not outlive the run. Its pipes and stderr are `conformance.transport.child`'s.

A child that answers hello with `"crash": "kill"` keeps its store in `SESSIONGATE_STATE_DIR`, a
directory of this gateway's: each crash kills it (and each SIGTERM, once answered), and the next
request starts a new child that opens (`open_store`) the store the dead one left. What a gateway keeps only
in memory then dies with it, as under a real SIGKILL (docs/protocol.md, "Real crashes").
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import shlex
import shutil
import subprocess
import tempfile
import time
import weakref
from collections.abc import Callable
from typing import Any, TypeVar

from conformance.adapter import BackendBusy, BackendUnavailable, CrashPointFired, Harness, Inbound, Profile
from conformance.harness.errors import GatewayTimeout, RemoteGatewayError
from conformance.harness.values import BadValue, resources_change
from conformance.harness.watchdog import DEFAULT_STEP_TIMEOUT
from conformance.observations import DurableState, Resources
from conformance.observers import NO_RECALL, BadHandover
from conformance.transport.child import ChildProcess, _clip, _end_process
from conformance.transport.wire import (
    VERSION,
    VERSIONS,
    chat_to_wire,
    profile_from_wire,
    resources_from_wire,
    state_from_wire,
)
from sim.engine import Timer
from sim.scenario import Chat, GatewayConfig
from sim.writer import config_document

T = TypeVar("T")
LIVE_CHILDREN: set[int] = set()  # pids of the children this process runs now (`leftovers` leaves them be)
STARTUP_TIMEOUT = 30.0  # for `hello`: starting an interpreter on a loaded machine is not a gateway step
HANDSHAKE = "start-up handshake"  # prefixes an error in `hello`, which the runner attributes to its first call
STATE_DIR = "SESSIONGATE_STATE_DIR"  # the environment variable naming a child's state directory (real crashes)

_in_a_child = False  # set by `as_child()` in the Python child end (exec_server)


def as_child() -> None:
    """Mark this process as a gateway child (`conformance.transport.exec_server`). Its parent times its steps
    out and kills its process group, so here `isolation.isolated` runs a gateway in process (a second child
    would time steps out on a clock of its own, hidden behind the parent's), and an exec gateway
    stays in this process group (one of its own would survive the parent's kill)."""
    global _in_a_child
    _in_a_child = True


class ExecGateway(ChildProcess):
    """Implements the adapter protocol by forwarding every call to a child process."""

    def __init__(self, argv: list[str], *, step_timeout: float = DEFAULT_STEP_TIMEOUT, memory_mb: int | None = None,
                 env: dict[str, str] | None = None, reuse: bool = False,
                 start: Callable[[dict[str, str], int | None, int], Any] | None = None) -> None:
        super().__init__(step_timeout)
        self.argv, self.memory_mb, self.env = argv, memory_mb, env
        # Starts the child some cheaper way than `argv` (env, memory cap, stderr fd -> a Popen look-alike),
        # or says it cannot (None): `isolation.isolated`'s children are forked from a warm interpreter.
        self.start_child = start
        self.reuse = reuse  # close() resets the child for the next scenario instead of killing it
        self.h: Harness | None = None
        self.timers: dict[int, Timer] = {}
        self._answered = True  # the last request got its done/fail: the child is between requests
        self.version = VERSION  # what the child answered hello with
        self.deltas = False  # whether it said it answers `resources_delta`
        self._crashed: str | None = None  # the crash point that fired in the request in flight (v2)
        self.kills = False  # whether the child said in its hello that a crash may kill it ("crash": "kill")
        self.state_dir: str | None = None  # its SESSIONGATE_STATE_DIR, made at the first start, removed with this gateway
        self._boot: dict[str, Any] | None = None  # what `start` said, for `open_store` in a child started after a kill
        self._killed = False  # a crash (or a SIGTERM) killed the child: the next request starts a new one
        self._locked_until: int | None = None  # the last `lock_store`: another surface's lock outlives a killed child
        self.spawned = 0  # children started: a test reads it

    @property
    def real_crashes(self) -> bool:
        """Whether a crash kills the child (`RunResult.crashes`)."""
        return self.kills

    # -- the child process ----------------------------------------------------------------

    def _limits(self) -> None:  # runs in the child before exec
        if self.memory_mb:
            limit = self.memory_mb * 1024 * 1024
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    def _spawn(self) -> None:
        if self.state_dir is None:
            self.state_dir = tempfile.mkdtemp(prefix="sg-state-")
            weakref.finalize(self, shutil.rmtree, self.state_dir, True)
        env = dict(os.environ, **(self.env or {}), **{STATE_DIR: self.state_dir})
        self.spawned += 1
        # A process group of its own: a terminal's Ctrl-C reaches sessiongate, which then ends the
        # child, and one killpg ends what the child started too. In a gateway child, its group.
        group = not _in_a_child
        forked = self.start_child(env, self.memory_mb, self._stderr.fileno()) if self.start_child and group else None
        if forked is not None:
            self.proc = forked  # type: ignore[assignment]  # a Popen look-alike
        else:
            try:
                self.proc = subprocess.Popen(self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr,
                                             env=env, preexec_fn=self._limits, process_group=0 if group else None)
            except OSError as err:
                raise RemoteGatewayError(f"cannot start {shlex.join(self.argv)}: {err.strerror}") from None
        self._ender = weakref.finalize(self, _end_process, self.proc, group, os.getpid())
        LIVE_CHILDREN.add(self.proc.pid)
        # `hello` goes out inside the first call the runner makes (profile, or start): say that it was
        # the start-up that failed, or the user reads it as a fault of that step.
        try:
            hello = self._request("hello", wait=max(self.step_timeout, STARTUP_TIMEOUT), version=VERSION)
        except GatewayTimeout as err:
            raise GatewayTimeout(f"{HANDSHAKE}: {err}") from None
        except RemoteGatewayError as err:
            raise RemoteGatewayError(f"{HANDSHAKE}: {err}", err.traceback) from None
        if not isinstance(hello, dict) or hello.get("version") not in VERSIONS:
            self.kill()
            raise RemoteGatewayError(f"{HANDSHAKE}: {shlex.join(self.argv)} does not speak protocol version {VERSION} "
                                     f"(or {', '.join(map(str, VERSIONS[:-1]))}): it answered hello with {_clip(json.dumps(hello))}"
                                     + ("" if isinstance(hello, dict) else f", not an object like {{\"version\": {VERSION}}}"))
        self.version = hello["version"]  # 1: no crash points, no ingest keys
        self.deltas = hello.get("resources_delta") is True  # the child answers `resources_delta` (optional)
        self.kills = hello.get("crash") == "kill"  # its crashes are real (optional)

    def close(self) -> None:
        """End of a scenario: kill the child, or with `reuse` ready a healthy one for the next."""
        if self.reuse and self.proc is not None and self.proc.poll() is None and self._answered and not self._buffer:
            try:
                self._request("reset")
            except (RemoteGatewayError, GatewayTimeout):
                pass
            else:
                self.h = None
                self.timers.clear()
                self._stderr.truncate(0)
                self._stderr_kept = b""
                self._boot, self._locked_until = None, None
                self._empty_state_dir()  # the next scenario's child finds no store of this one's
                return
        self.kill()

    def kill(self) -> None:
        """End the child and every process it started (its process group), and reap it: this
        gateway is done with it (end of scenario, timeout, death)."""
        self._end_child()
        self.h = None
        self.timers.clear()
        self._killed, self._boot, self._locked_until = False, None, None

    def _die(self) -> None:
        """A real crash (or the end of a SIGTERM): the child is ended as by `kill`, and the timers
        it set die with it; the harness and what it stored in the state directory stay."""
        for timer in self.timers.values():
            timer.cancel()
        self.timers.clear()
        self._end_child()
        self._killed = True

    def _end_child(self) -> None:
        if self.proc is not None:
            LIVE_CHILDREN.discard(self.proc.pid)
        super().kill()

    def _reopen(self) -> None:
        """A new child after a kill, on the store the dead one left (`open_store`); a lock another
        surface holds on that store (`lock_store`) holds for the new child too."""
        self._killed = False
        self._spawn()
        try:
            self._request("open_store", **(self._boot or {}))
        except RemoteGatewayError as err:  # said as what failed: not the request that found the child dead
            raise RemoteGatewayError(f"open_store, in a child started after a real crash: {err}", err.traceback) from None
        if self._locked_until is not None and self.h is not None and self._locked_until > self.h.clock.now():
            self._request("lock_store", until=self._locked_until)

    def _empty_state_dir(self) -> None:
        if self.state_dir is not None:
            for entry in os.scandir(self.state_dir):
                if entry.is_dir(follow_symlinks=False):
                    shutil.rmtree(entry.path, ignore_errors=True)
                else:
                    with contextlib.suppress(OSError):
                        os.unlink(entry.path)

    def _request(self, op: str, wait: float | None = None, **fields: Any) -> Any:
        """Send one request, serve the child's calls, return the `done` value. `wait`: seconds
        of wall clock for the whole step, calls included (default: the step timeout)."""
        if self.proc is None and self._killed:
            self._reopen()
        if self.proc is None:
            raise RemoteGatewayError("gateway process is not running")
        if self.h is not None and op != "hello":  # a child started after a kill says hello mid-scenario
            fields["now"] = self.h.clock.now()
        self._answered, self._op = False, op
        self._send({"op": op, **fields})
        wait = wait or self.step_timeout
        deadline = time.monotonic() + wait
        while True:
            message = self._read_line(deadline, op, wait)
            if "call" in message:
                if self._crashed is not None:  # the process is dead: what it still asks is not carried out
                    self._send({"error": "crashed", "point": self._crashed})
                    continue
                self._send(self._serve(message))
            elif "done" in message or ("fail" in message and self._crashed is not None):
                self._answered = True
                if self._crashed is not None:  # the step unwound at its crash point: the runner crashes it
                    point, self._crashed = self._crashed, None
                    raise CrashPointFired(point)
                return message.get("value")
            elif "fail" in message:
                self._answered = True
                fail = message["fail"] if isinstance(message["fail"], dict) else {"message": str(message["fail"])}
                trace = fail.get("traceback")
                raise RemoteGatewayError(str(fail.get("message", "")), tuple(map(str, trace)) if isinstance(trace, list) else ())

    def _decoded(self, op: str, decode: Callable[[Any], T], **fields: Any) -> T:
        value = self._request(op, **fields)
        try:
            return decode(value)
        except BadValue as err:  # the shape is right, a value is not: as in process (runner)
            raise RemoteGatewayError(f"protocol error: bad value in answer to {op}: {err}") from None
        except (KeyError, IndexError, TypeError, ValueError, AttributeError) as err:
            raise RemoteGatewayError(f"protocol error: bad value in answer to {op}: {type(err).__name__}: {err}") from None

    def _serve(self, message: dict[str, Any]) -> dict[str, Any]:
        """Carry out one call the child makes on the harness's observers."""
        h = self.h
        call = message["call"]
        if h is None:
            return {"error": f"{call} before start"}
        a = message.get("args", {})
        try:
            if call == "llm.request":
                # `recall` is optional: what the gateway adds from memory (`FakeLLM.request`)
                return {"result": h.llm.request(a["chat"], a["session"], a["prompt"], recall=a.get("recall", NO_RECALL))}
            if call == "llm.usage_of":  # what the answer being delivered reports (`FakeLLM.usage_of`)
                return {"result": h.llm.usage_of(a["request"])}
            if call == "platform.send_reply":
                try:
                    h.platform.send_reply(a["chat"], a["session"], a["text"])
                except CrashPointFired as fired:  # the harness's own point (`HARNESS_POINTS`): dead from here on
                    self._crashed = fired.point
                    return {"error": "crashed", "point": fired.point}
            elif call == "recorder.sync_turn":
                h.recorder.sync_turn(a["session"], a["user"], a["assistant"])
            elif call == "recorder.on_session_end":
                h.recorder.on_session_end(a["session"], [tuple(pair) for pair in a["transcript"]])
            elif call == "recorder.on_session_switch":
                h.recorder.on_session_switch(a["old"], a["new"])
            elif call == "recorder.shutdown":
                h.recorder.shutdown()
            elif call == "backend.ingest":
                keys = a.get("keys") if self.version >= 2 else None
                h.backends[a["backend"]].ingest(a["session"], a["texts"], keys)
            elif call == "crash_point" and self.version >= 2:
                try:
                    h.crash_point(str(a["point"]))
                except CrashPointFired as fired:
                    self._crashed = fired.point
                    return {"error": "crashed", "point": fired.point}
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
        except BackendBusy as err:  # a slow backend: unavailable until `ready_at`, for a child that knows only failures
            return {"error": "unavailable", "message": str(err), "ready_at": err.ready_at}
        except BackendUnavailable as err:
            return {"error": "unavailable", "message": str(err)}
        except BadHandover as err:  # worded already: "bad value handed to platform.send_reply: session: …"
            return {"error": str(err)}
        except (KeyError, TypeError, ValueError) as err:
            return {"error": f"bad arguments to {call}: {err}"}
        return {"result": None}

    def _fire(self, timer_id: int) -> None:
        self._request("fire_timer", id=timer_id)

    # -- the adapter protocol ---------------------------------------------------------------

    def profile(self, config: GatewayConfig) -> Profile:
        if self.proc is None:
            self._spawn()
        return self._decoded("profile", profile_from_wire, config=config_document(config))

    def start(self, config: GatewayConfig, harness: Harness) -> None:
        if self.proc is None:
            self._spawn()
        self.h = harness
        self._boot = {"config": config_document(config), "zone": harness.clock.zone.key,
                      "backends": sorted(harness.backends), "seed": harness.seed}
        self._request("start", **self._boot)

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
        if self.kills:  # its shutdown is done: the process exits, and what it kept in memory with it
            self._die()

    def crash(self) -> None:
        if self.kills:
            self._die()
        else:  # the child plays dead itself
            self._request("crash")

    def restart(self, config: GatewayConfig | None = None) -> None:
        if config is None:
            self._request("restart")
        else:  # the configuration the restart brings (a child that cannot declares `restart_config`)
            if self._boot is not None:
                self._boot["config"] = config_document(config)  # a child started after a kill opens under it
            self._request("restart", config=config_document(config))

    def delete_session_row(self, session_id: str, keep_children: bool = False) -> None:
        self._request("delete_session_row", session=session_id, keep_children=keep_children)

    def lock_store(self, until: int) -> None:
        self._locked_until = until
        self._request("lock_store", until=until)

    def durable_state(self) -> DurableState:
        return self._decoded("durable_state", state_from_wire)

    def resources(self) -> Resources:
        return self._decoded("resources", resources_from_wire)

    @property
    def resources_delta(self) -> Callable[[], dict[str, Any] | Resources | None] | None:
        """The optional hook, if the child said in its hello that it answers it (else None)."""
        return self._resources_delta if self.deltas else None

    def _resources_delta(self) -> dict[str, Any] | Resources | None:
        return self._decoded("resources_delta", _change_from_wire)


def _change_from_wire(value: Any) -> dict[str, Any] | Resources | None:
    """A `resources_delta` answer: null, a whole state (it has `cached`), or the changes."""
    if isinstance(value, dict) and "cached" in value:
        return resources_from_wire(value)
    return resources_change(value)


def exec_gateway(command: str) -> ExecGateway:
    """`exec:COMMAND`: run COMMAND (shell words) as the gateway process."""
    return ExecGateway(shlex.split(command))
