"""A gateway in its own process, spoken to over stdin/stdout in JSON lines (docs/protocol.md).

Used for gateways in any language (`--gateway exec:"node my-gateway.js"`) and for isolation
(`--isolate`): a hung step is cut off after a wall-clock step timeout and a runaway child is
capped in memory, so one bad scenario cannot take the run down. The wall clock is read here,
and only here, to time a step out; it never reaches the observation log.

The child runs in a process group of its own, and every way it ends (step timeout, death, end
of scenario, an interrupted run, the interpreter exiting) kills that whole group: what the child
started itself must not outlive the run.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import resource
import selectors
import shlex
import signal
import subprocess
import sys
import tempfile
import time
import weakref
from collections.abc import Callable
from typing import Any, TypeVar

from conformance.adapter import BackendBusy, BackendUnavailable, CrashPointFired, Gateway, Harness, Inbound, Profile
from conformance.harness.errors import GatewayTimeout, RemoteGatewayError
from conformance.harness.registry import resolve
from conformance.harness.values import BadValue, resources_change
from conformance.observations import DurableState, Resources
from conformance.transport.wire import (
    VERSION,
    VERSIONS,
    chat_to_wire,
    dumps,
    profile_from_wire,
    resources_from_wire,
    state_from_wire,
)
from sim.engine import Timer
from sim.scenario import Chat, GatewayConfig
from sim.writer import config_document

T = TypeVar("T")
LIVE_CHILDREN: set[int] = set()  # pids of the children this process runs now (`leftovers` leaves them be)
DEFAULT_STEP_TIMEOUT = 10.0
STARTUP_TIMEOUT = 30.0  # for `hello`: starting an interpreter on a loaded machine is not a gateway step
MAX_LINE = 64 * 1024 * 1024  # a longer line is a protocol error, not a parent out of memory
EXCERPT = 120  # bytes of a bad line quoted in an error
HANDSHAKE = "start-up handshake"  # prefixes an error in `hello`, which the runner attributes to its first call
STDERR_SCAN = 64 * 1024  # bytes at the end of a dead child's stderr searched for what to quote
STDERR_KEEP = 1024 * 1024  # stderr on disk past which all but its last STDERR_SCAN bytes are dropped
STDERR_POLL = 1.0  # seconds between stderr trims while a step waits for the child
STDERR_LINES = 3  # lines quoted when none looks like an error
STDERR_QUOTE = 300  # characters of stderr quoted at most
# An error line in any language: Python's and Node's `ValueError: …`, Java's `…Exception`, Go's `panic:`,
# Rust's `panicked at`, `error:` and `fatal:` from anything. Stack frames name functions, not errors.
ERROR_LINE = re.compile(r"\w*(?:Error|Exception)\b|(?i:\b(?:error|fatal|panic|panicked)\b)")
FRAME_STARTS = ("at ", 'File "')

_in_a_child = False  # set by `as_child()` in the Python child end (exec_server)


def as_child() -> None:
    """Mark this process as a gateway child (`conformance.transport.exec_server`). Its parent times its steps
    out and kills its process group, so here `isolated` runs a gateway in process (a second child
    would time steps out on a clock of its own, hidden behind the parent's), and an exec gateway
    stays in this process group (one of its own would survive the parent's kill)."""
    global _in_a_child
    _in_a_child = True


def _excerpt(data: bytes) -> str:
    """The start of what the child printed, for an error message: enough to recognise, never megabytes."""
    return repr(data[:EXCERPT]) + ("…" if len(data) > EXCERPT else "")


def _clip(text: str) -> str:
    """At most STDERR_QUOTE characters of `text`, for a one-line error message."""
    return text if len(text) <= STDERR_QUOTE else text[: STDERR_QUOTE - 1] + "…"


def _end_process(proc: subprocess.Popen[bytes], group: bool, owner: int) -> None:
    """SIGKILL the child and, with `group`, every process in its process group; reap the child and
    close its pipes. Also a `weakref.finalize` callback, so a gateway that is dropped, or alive when
    the interpreter exits, takes its processes with it."""
    if os.getpid() != owner:  # a forked copy of the parent: the child is not this process's to end
        return
    if group:
        with contextlib.suppress(ProcessLookupError):  # the group is empty already
            os.killpg(proc.pid, signal.SIGKILL)  # the pgid stays reserved while any member lives
    proc.kill()  # a no-op once the child is reaped
    proc.wait()
    for pipe in (proc.stdin, proc.stdout):
        if pipe is not None:
            with contextlib.suppress(OSError):
                pipe.close()


class ExecGateway:
    """Implements the adapter protocol by forwarding every call to a child process."""

    def __init__(self, argv: list[str], *, step_timeout: float = DEFAULT_STEP_TIMEOUT, memory_mb: int | None = None,
                 env: dict[str, str] | None = None, reuse: bool = False) -> None:
        self.argv, self.step_timeout, self.memory_mb, self.env = argv, step_timeout, memory_mb, env
        self.reuse = reuse  # close() resets the child for the next scenario instead of killing it
        self.proc: subprocess.Popen[bytes] | None = None
        self._ender: weakref.finalize | None = None  # ends self.proc and its process group, once
        self.h: Harness | None = None
        self.timers: dict[int, Timer] = {}
        self._buffer = bytearray()
        self._answered = True  # the last request got its done/fail: the child is between requests
        self._op = ""  # the request in flight, or the last one
        self.version = VERSION  # what the child answered hello with
        self.deltas = False  # whether it said it answers `resources_delta`
        self._crashed: str | None = None  # the crash point that fired in the request in flight (v2)
        # The child's stderr, append-only so the parent can truncate it under the child; its tail
        # is kept in memory when it is trimmed, so a chatty child costs STDERR_KEEP of disk at most.
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 (lives as long as the gateway)
        fcntl.fcntl(self._stderr.fileno(), fcntl.F_SETFL, fcntl.fcntl(self._stderr.fileno(), fcntl.F_GETFL) | os.O_APPEND)
        self._stderr_kept = b""  # the tail of what a trim dropped

    # -- the child process ----------------------------------------------------------------

    def _limits(self) -> None:  # runs in the child before exec
        if self.memory_mb:
            limit = self.memory_mb * 1024 * 1024
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    def _spawn(self) -> None:
        env = dict(os.environ, **(self.env or {}))
        # A process group of its own: a terminal's Ctrl-C reaches sessiongate, which then ends the
        # child, and one killpg ends what the child started too. In a gateway child, its group.
        group = not _in_a_child
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
                                     f"(or {', '.join(map(str, VERSIONS[:-1]))}): it answered hello with {_clip(repr(hello))}")
        self.version = hello["version"]  # 1: no crash points, no ingest keys
        self.deltas = hello.get("resources_delta") is True  # the child answers `resources_delta` (optional)

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
                return
        self.kill()

    def kill(self) -> None:
        """End the child and every process it started (its process group), and reap it."""
        if self.proc is not None:
            LIVE_CHILDREN.discard(self.proc.pid)
        if self._ender is not None:
            self._ender()  # also when the child has exited: what it started may still run
        self.proc, self._ender, self.h, self._buffer = None, None, None, bytearray()
        self.timers.clear()

    def _stderr_tail(self) -> str:
        """What to quote of the child's stderr when it dies: its last error line (the last line is
        often noise, like Node's version banner under the stack), else its last few lines."""
        self._stderr.seek(0, os.SEEK_END)
        self._stderr.seek(max(0, self._stderr.tell() - STDERR_SCAN))
        text = (self._stderr_kept + self._stderr.read())[-STDERR_SCAN:]
        raw = [line for line in text.decode("utf-8", "replace").splitlines() if line.strip()]
        if any(line.startswith("Traceback (most recent call last)") for line in raw):
            # A Python traceback: its exception line, the last one not indented (its frames are,
            # and their paths are long on a CI runner; a message behind them would be cut).
            heads = [line for line in raw if not line[:1].isspace() and not line.startswith("Traceback")]
            if heads:
                return _clip(heads[-1].strip())
        lines = [line.strip() for line in raw]
        errors = [line for line in lines if ERROR_LINE.search(line) and not line.startswith(FRAME_STARTS)]
        return _clip(errors[-1] if errors else " | ".join(lines[-STDERR_LINES:]))

    def _trim_stderr(self) -> None:
        """Bound the child's stderr on disk (300 MB was seen in one step): past STDERR_KEEP, keep
        its last STDERR_SCAN bytes in memory, all `_stderr_tail` reads, and empty the file (the
        child appends, so it writes on at the new end)."""
        size = os.fstat(self._stderr.fileno()).st_size
        if size <= STDERR_KEEP:
            return
        self._stderr.seek(size - STDERR_SCAN)
        self._stderr_kept = self._stderr.read(STDERR_SCAN)
        self._stderr.truncate(0)

    def _send(self, message: dict[str, Any]) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        try:
            self.proc.stdin.write(dumps(message).encode())
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            raise self._died("stdin") from None

    def _died(self, closed: str = "stdout") -> RemoteGatewayError:
        """The child closed its stdout or its stdin: give it a step timeout to exit, end its group,
        say why. A line it printed that is not protocol is the cause, whichever way the race between
        its exit and our write went; otherwise its exit status and what its stderr says (`_stderr_tail`)."""
        assert self.proc is not None
        try:
            code = self.proc.wait(timeout=self.step_timeout)
            why = f"killed by signal {-code}" if code < 0 else f"exited with status {code}"
        except subprocess.TimeoutExpired:
            why = f"closed its {closed} without exiting, and was killed"
        self._drain()
        end = self._buffer.find(b"\n")
        line, rest = (bytes(self._buffer[:end]), b"") if end >= 0 else (b"", bytes(self._buffer))
        self.kill()
        if line.strip():
            try:
                self._parse(line, self._op)
            except RemoteGatewayError as err:
                return err
        if rest.strip():
            why += f" (its stdout ended in an unfinished line: {_excerpt(rest)})"
        tail = self._stderr_tail()
        return RemoteGatewayError(f"gateway process {why}" + (f": {tail}" if tail else ""))

    def _drain(self) -> None:
        """Read what the child left on stdout, without waiting (a process it started may hold the pipe
        open), up to the first whole line."""
        assert self.proc is not None and self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        with selectors.DefaultSelector() as selector:
            selector.register(fd, selectors.EVENT_READ)
            while b"\n" not in self._buffer and len(self._buffer) <= MAX_LINE and selector.select(0):
                chunk = os.read(fd, 65536)
                if not chunk:
                    break
                self._buffer += chunk

    def _read_line(self, deadline: float, what: str, wait: float) -> dict[str, Any]:
        assert self.proc is not None and self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        scanned = 0
        with selectors.DefaultSelector() as selector:
            selector.register(fd, selectors.EVENT_READ)
            while (end := self._buffer.find(b"\n", scanned)) < 0:
                if len(self._buffer) > MAX_LINE:
                    raise RemoteGatewayError(f"protocol error: a line longer than {MAX_LINE >> 20} MiB in answer to {what}")
                self._trim_stderr()
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    self.kill()
                    raise GatewayTimeout(f"no answer to {what} within {wait:g}s (wall clock); the process was killed")
                if not selector.select(min(remaining, STDERR_POLL)):
                    continue
                chunk = os.read(fd, 65536)
                if not chunk:
                    raise self._died()
                scanned = len(self._buffer)
                self._buffer += chunk
        line = bytes(self._buffer[:end])
        del self._buffer[: end + 1]
        return self._parse(line, what)

    @staticmethod
    def _parse(line: bytes, what: str) -> dict[str, Any]:
        """One line from the child as a protocol message, or the protocol error quoting it."""
        try:
            message = json.loads(line)
        except ValueError:
            raise RemoteGatewayError(f"protocol error: not a JSON line in answer to {what}: {_excerpt(line)}") from None
        if not isinstance(message, dict):
            raise RemoteGatewayError(f"protocol error: expected a JSON object in answer to {what}: {_excerpt(line)}")
        if not {"call", "done", "fail"} & message.keys():
            raise RemoteGatewayError(f"protocol error: unexpected line in answer to {what}: {sorted(message)}")
        return message

    def _request(self, op: str, wait: float | None = None, **fields: Any) -> Any:
        """Send one request, serve the child's calls, return the `done` value. `wait`: seconds
        of wall clock for the whole step, calls included (default: the step timeout)."""
        if self.proc is None:
            raise RemoteGatewayError("gateway process is not running")
        if self.h is not None:
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
        self._request("start", config=config_document(config), zone=harness.clock.zone.key,
                      backends=sorted(harness.backends), seed=harness.seed)

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

    def restart(self, config: GatewayConfig | None = None) -> None:
        if config is None:
            self._request("restart")
        else:  # the configuration the restart brings (a child that cannot declares `restart_config`)
            self._request("restart", config=config_document(config))

    def delete_session_row(self, session_id: str, keep_children: bool = False) -> None:
        self._request("delete_session_row", session=session_id, keep_children=keep_children)

    def lock_store(self, until: int) -> None:
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


def isolated(name: str, *, step_timeout: float = DEFAULT_STEP_TIMEOUT, memory_mb: int | None = None,
             env: dict[str, str] | None = None, reuse: bool = False) -> Gateway:
    """The registered gateway `name`, in a child process of its own; in process when this process
    already is one (`selftest:hang` under `--isolate`: the parent's `--step-timeout` applies)."""
    if _in_a_child:
        return resolve(name)()
    return ExecGateway([sys.executable, "-m", "conformance.transport.exec_server", name], step_timeout=step_timeout,
                       memory_mb=memory_mb, env=env, reuse=reuse)
