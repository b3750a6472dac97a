"""The child process of an out-of-process gateway: its stderr (bounded on disk, quoted when it
dies), and its JSON lines read and written under a wall-clock deadline."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import selectors
import signal
import subprocess
import tempfile
import time
import weakref
from typing import Any

from conformance.harness.errors import GatewayTimeout, RemoteGatewayError
from conformance.transport.wire import (
    dumps,
)

MAX_LINE = 64 * 1024 * 1024  # a longer line is a protocol error, not a parent out of memory
EXCERPT = 120  # bytes of a bad line quoted in an error
STDERR_SCAN = 64 * 1024  # bytes at the end of a dead child's stderr searched for what to quote
STDERR_KEEP = 1024 * 1024  # stderr on disk past which all but its last STDERR_SCAN bytes are dropped
STDERR_POLL = 1.0  # seconds between stderr trims while a step waits for the child
STDERR_LINES = 3  # lines quoted when none looks like an error
STDERR_QUOTE = 300  # characters of stderr quoted at most
# An error line in any language: Python's and Node's `ValueError: …`, Java's `…Exception`, Go's `panic:`,
# Rust's `panicked at`, `error:` and `fatal:` from anything. Stack frames name functions, not errors.
ERROR_LINE = re.compile(r"\w*(?:Error|Exception)\b|(?i:\b(?:error|fatal|panic|panicked)\b)")
FRAME_STARTS = ("at ", 'File "')


def _excerpt(data: bytes) -> str:
    """The start of what the child printed, for an error message: enough to recognise, never
    megabytes; as a JSON string, which a child in any language reads (not Python's b'…')."""
    return json.dumps(data[:EXCERPT].decode("utf-8", "backslashreplace"), ensure_ascii=False) + ("…" if len(data) > EXCERPT else "")


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


class ChildProcess:
    """One child process and its pipes; `ExecGateway` speaks the protocol over them."""

    STEP_TIMEOUT = None  # timed by `step_timeout` here, the child killed: not by `harness.watchdog`

    def __init__(self, step_timeout: float) -> None:
        self.step_timeout = step_timeout  # wall-clock seconds a step may take; a dead child's time to exit
        self._op = ""  # the request in flight, or the last one
        self.proc: subprocess.Popen[bytes] | None = None
        self._ender: weakref.finalize | None = None  # ends self.proc and its process group, once
        self._buffer = bytearray()
        # The child's stderr, append-only so the parent can truncate it under the child; its tail
        # is kept in memory when it is trimmed, so a chatty child costs STDERR_KEEP of disk at most.
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 (lives as long as the gateway)
        # Closed with this object, or at exit for one kept to the end (OpenClaw's reused children):
        # never left to the file's own finalizer, which warns (`ResourceWarning: unclosed file`).
        weakref.finalize(self, self._stderr.close)
        fcntl.fcntl(self._stderr.fileno(), fcntl.F_SETFL, fcntl.fcntl(self._stderr.fileno(), fcntl.F_GETFL) | os.O_APPEND)
        self._stderr_kept = b""  # the tail of what a trim dropped

    def kill(self) -> None:
        """End the child and every process it started (its process group), and reap it."""
        if self._ender is not None:
            self._ender()  # also when the child has exited: what it started may still run
        self.proc, self._ender, self._buffer = None, None, bytearray()

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
            raise RemoteGatewayError(f"protocol error: unexpected line in answer to {what}: its keys {json.dumps(sorted(message))}, "
                                     "none of call, done, fail")
        return message
