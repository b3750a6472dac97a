"""A registered gateway in a child process of its own (`--isolate`), forked from a warm interpreter.

A child of `--isolate` is `python -m conformance.transport.exec_server NAME`: an interpreter and
sessiongate's modules, ≈ 0.16 s of CPU here before its first answer. Real crashes start one at
every crash and after every SIGTERM (`exec_gateway`, "Real crashes"), four a generated seed. So
this process keeps one server (`python -m conformance.transport.isolation`) that has imported
those modules once and, asked over a Unix socket, forks a child for each: the child takes the
pipes and the stderr file it is handed (SCM_RIGHTS), its environment, working directory and
memory cap, goes into a process group of its own and serves NAME as exec_server does. The
server imports nothing of a gateway's but sessiongate's own reference (a module imported there
would be imported once for every child, threads and all, and a fork does not copy threads).

The server is the children's parent: it reaps each when asked its status (`Forked.poll`), so a
pid is never reused while the parent may still signal it. A child under another environment
than the server's (a determinism run's other `PYTHONHASHSEED`, a `PYTHONPATH` set since), and any
the server cannot make, is started anew.
"""

from __future__ import annotations

import contextlib
import functools
import io
import json
import os
import resource
import signal
import socket
import subprocess
import sys
import time
import traceback
from typing import IO, Any

from conformance.harness.registry import resolve
from conformance.harness.watchdog import DEFAULT_STEP_TIMEOUT
from conformance.transport import exec_gateway
from conformance.transport.exec_gateway import ExecGateway

PRELOAD = ("conformance.transport.exec_server", "reference_impl.registry", "reference_impl.gateway")


class Forked:
    """What `exec_gateway` needs of a `subprocess.Popen`, for a child the server forked."""

    def __init__(self, server: Server, pid: int, stdin: IO[bytes], stdout: IO[bytes]) -> None:
        self.server, self.pid, self.stdin, self.stdout = server, pid, stdin, stdout
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            try:
                self.returncode = self.server.status(self.pid)
            except OSError:  # the server is gone (killed with the run): init reaps its orphans, status unknown
                try:
                    os.kill(self.pid, 0)
                except ProcessLookupError:
                    self.returncode = -signal.SIGKILL
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        pause = 0.0005
        while (code := self.poll()) is None:
            if deadline is not None and time.monotonic() >= deadline:
                raise subprocess.TimeoutExpired(f"gateway child {self.pid}", timeout or 0)
            time.sleep(pause)
            pause = min(pause * 2, 0.02)
        return code

    def kill(self) -> None:
        if self.returncode is None:  # not reaped yet: the pid is still this child's
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)


class Server:
    """This process's fork server: started at the first child, ended with this process."""

    def __init__(self) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock = ours
        self.proc = subprocess.Popen([sys.executable, "-m", "conformance.transport.isolation", str(theirs.fileno())],
                                     pass_fds=[theirs.fileno()], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL, process_group=0)
        theirs.close()
        self.owner = os.getpid()
        # What made its interpreter what it is: a child asked for under others (a PYTHONPATH a test
        # set since, another PYTHONHASHSEED, another working directory for `-m`'s path) is started anew.
        self.started_as = (os.getcwd(), _python_env(os.environ))

    def serves(self, env: dict[str, str]) -> bool:
        """Whether a child with `env`, started anew from here now, would be the interpreter it forks."""
        return self.started_as == (os.getcwd(), _python_env(env))

    def _ask(self, request: dict[str, Any], fds: list[int] | None = None) -> dict[str, Any]:
        data = json.dumps(request).encode() + b"\n"
        sent = socket.send_fds(self.sock, [data], fds) if fds else 0  # the fds go with the first bytes
        self.sock.sendall(data[sent:])
        answer = b""
        while not answer.endswith(b"\n"):
            chunk = self.sock.recv(65536)
            if not chunk:
                raise OSError("the fork server is gone")
            answer += chunk
        out: dict[str, Any] = json.loads(answer)
        return out

    def fork(self, name: str, env: dict[str, str], memory_mb: int | None, stderr_fd: int) -> Forked:
        child_in, to_child = os.pipe()
        from_child, child_out = os.pipe()
        try:
            answer = self._ask({"op": "fork", "name": name, "env": env, "cwd": os.getcwd(), "memory_mb": memory_mb},
                               [child_in, child_out, stderr_fd])
        except BaseException:
            for fd in (child_in, to_child, from_child, child_out):
                os.close(fd)
            raise
        os.close(child_in)
        os.close(child_out)
        return Forked(self, int(answer["pid"]), open(to_child, "wb"), open(from_child, "rb"))

    def status(self, pid: int) -> int | None:
        code = self._ask({"op": "status", "pid": pid})["code"]
        return None if code is None else int(code)

    def close(self) -> None:
        if os.getpid() != self.owner:  # a forked copy of this process: the server is not its own
            return
        with contextlib.suppress(OSError):
            self.sock.close()
        with contextlib.suppress(OSError):
            self.proc.kill()
        self.proc.wait()


_server: Server | None = None


def _python_env(env: Any) -> dict[str, str]:
    return {key: value for key, value in env.items() if key.startswith("PYTHON")}


def server() -> Server | None:
    """This process's server, started if need be; None where it cannot run (then children are
    started anew)."""
    global _server
    if _server is not None and _server.proc.poll() is None and _server.owner == os.getpid():
        return _server
    if not hasattr(socket, "send_fds") or not hasattr(os, "fork"):
        return None
    try:
        _server = Server()
    except OSError:
        return None
    import atexit

    atexit.register(_server.close)
    return _server


def isolated(name: str, *, step_timeout: float = DEFAULT_STEP_TIMEOUT, memory_mb: int | None = None,
             env: dict[str, str] | None = None, reuse: bool = False) -> Any:
    """The registered gateway `name`, in a child process of its own; in process when this process
    already is one (`selftest:hang` under `--isolate`: the parent's `--step-timeout` applies).
    Its children are forked by this process's server (`ExecGateway`'s `start`), unless an
    environment is imposed (a determinism run's other PYTHONHASHSEED needs a new interpreter)."""
    if exec_gateway._in_a_child:
        return resolve(name)()
    return ExecGateway([sys.executable, "-m", "conformance.transport.exec_server", name], step_timeout=step_timeout,
                       memory_mb=memory_mb, env=env, reuse=reuse, start=functools.partial(fork, name) if env is None else None)


def fork(name: str, env: dict[str, str], memory_mb: int | None, stderr_fd: int) -> Forked | None:
    """A child serving gateway `name`, forked; None if the server cannot make one."""
    current = server()
    if current is None or not current.serves(env):
        return None
    try:
        forked = current.fork(name, env, memory_mb, stderr_fd)
    except (OSError, ValueError, KeyError):
        return None
    exec_gateway.LIVE_CHILDREN.add(current.proc.pid)  # sessiongate's own: no census counts it or what it forks
    return forked


# -- the server --------------------------------------------------------------------------------


def _child(name: str, fds: list[int], env: dict[str, str], cwd: str, memory_mb: int | None) -> int:
    """In the forked child: become what `python -m conformance.transport.exec_server NAME` is."""
    os.setpgid(0, 0)  # a group of its own, as the parent's `process_group=0` gives a started child
    signal.signal(signal.SIGINT, signal.default_int_handler)  # the server ignores it; a child is a plain interpreter
    if memory_mb:
        limit = memory_mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    os.environ.clear()
    os.environ.update(env)
    os.chdir(cwd)
    sys.stdin = io.TextIOWrapper(io.BufferedReader(io.FileIO(0, "r", closefd=False)), encoding="utf-8")
    sys.stdout = io.TextIOWrapper(io.BufferedWriter(io.FileIO(1, "w", closefd=False)), encoding="utf-8",
                                  line_buffering=True)
    sys.stderr = io.TextIOWrapper(io.BufferedWriter(io.FileIO(2, "w", closefd=False)), encoding="utf-8",
                                  errors="backslashreplace", line_buffering=True)
    sys.argv = [sys.argv[0], name]
    import runpy  # what `python -m conformance.transport.exec_server NAME` runs, in this warm interpreter
    import warnings

    # The module is preloaded (warm): runpy's "found in sys.modules … prior to execution" warning
    # went to every child's stderr, and was what a child killed before saying anything was quoted by.
    warnings.filterwarnings("ignore", message=".*found in sys.modules after import of package", category=RuntimeWarning)
    runpy.run_module("conformance.transport.exec_server", run_name="__main__", alter_sys=True)
    return 0


def serve(sock: socket.socket) -> None:
    """Fork a child for each `fork` request; answer each `status` request, reaping the child once
    it has ended (its code kept for a later ask)."""
    ended: dict[int, int] = {}
    buffered = b""
    fds: list[int] = []  # handed with a request's first bytes: kept until its line is whole
    while True:
        message, handed, _flags, _address = socket.recv_fds(sock, 65536, 3)
        if not message:
            return  # the parent is gone: its children go with their groups
        buffered += message
        fds += handed
        while b"\n" in buffered:
            line, buffered = buffered.split(b"\n", 1)
            request = json.loads(line)
            if request["op"] == "fork":
                pid = os.fork()
                if pid == 0:
                    code = 1
                    try:
                        sock.close()
                        code = _child(request["name"], fds, request["env"], request["cwd"], request["memory_mb"])
                    except SystemExit as stop:
                        code = stop.code if isinstance(stop.code, int) else 1
                    except BaseException:
                        traceback.print_exc()
                    finally:
                        with contextlib.suppress(BaseException):
                            sys.stdout.flush()
                            sys.stderr.flush()
                        os._exit(code)
                for fd in fds:
                    os.close(fd)
                fds = []
                sock.sendall(json.dumps({"pid": pid}).encode() + b"\n")
            else:
                pid = int(request["pid"])
                code: int | None = ended.get(pid)
                if code is None:
                    try:
                        done, status = os.waitpid(pid, os.WNOHANG)
                    except ChildProcessError:  # reaped before: killed with its group, say
                        done, status = pid, 9
                    if done:
                        code = ended[pid] = os.waitstatus_to_exitcode(status)
                sock.sendall(json.dumps({"code": code}).encode() + b"\n")


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent ends it; a terminal's Ctrl-C is the parent's
    for module in PRELOAD:
        __import__(module)
    serve(socket.socket(fileno=int(args[0])))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
