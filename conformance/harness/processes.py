"""The processes and threads this one started that still run: the census behind I7's "nothing
runs after the final stop", and behind the command line's ending of what a run left.

A gateway in sessiongate's own process can start processes (a tool server, a helper) and leave
them running after its final SIGTERM. The runner counts its threads and descendants before the
start and after the final stop (`Census`); the command line ends what is new when it is over
(`conformance.cli.leftovers`). Linux only, from /proc: elsewhere the census is empty. A process
that left the tree (double-forked, reparented to init) is not counted; sessiongate's own helpers
(an exec: gateway's child and what it started, multiprocessing's resource tracker and
forkserver) never are.
"""

from __future__ import annotations

import os
import sys
import threading
import time

PROC = "/proc"


def _read(path: str) -> str:
    """A /proc file's text, with no buffered file object (a census is taken twice a run: a
    third of the time of `open`)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        chunks = []
        while chunk := os.read(fd, 1 << 16):
            chunks.append(chunk)
    finally:
        os.close(fd)
    return b"".join(chunks).decode(errors="replace")


def _stat(pid: int) -> tuple[int, str] | None:
    """(parent pid, command name) of a running process; None if it is gone or a zombie (which
    runs nothing)."""
    try:
        stat = _read(f"{PROC}/{pid}/stat")
    except OSError:  # it exited while we looked
        return None
    name, _, rest = stat.partition(" (")[2].rpartition(") ")
    fields = rest.split()
    if not fields or fields[0] in ("Z", "X"):
        return None
    return int(fields[1]), name


def _children(pid: int) -> list[int] | None:
    """The children of `pid`, from each of its threads' `children` file (a few reads, where the
    whole table is hundreds); None where the kernel has no such file."""
    try:
        tasks = os.listdir(f"{PROC}/{pid}/task")
    except OSError:
        return []  # gone
    out: list[int] = []
    for tid in tasks:
        try:
            out.extend(map(int, _read(f"{PROC}/{pid}/task/{tid}/children").split()))
        except FileNotFoundError:
            if not os.path.exists(f"{PROC}/{pid}/task/{tid}"):
                continue  # the thread ended
            return None  # no `children` files: CONFIG_PROC_CHILDREN off
        except OSError:
            continue
    return out


def _table() -> dict[int, list[int]]:
    """parent pid -> its children's pids, from every process /proc shows (the slow way)."""
    children: dict[int, list[int]] = {}
    try:
        entries = os.listdir(PROC)
    except OSError:
        return children
    for entry in entries:
        if entry.isdigit() and (stat := _stat(int(entry))) is not None:
            children.setdefault(stat[0], []).append(int(entry))
    return children


def descendants(root: int | None = None) -> dict[int, str]:
    """The running descendants of `root` (default: this process), pid -> command name."""
    root = os.getpid() if root is None else root
    table: dict[int, list[int]] | None = None
    found: dict[int, str] = {}
    stack = [root]
    while stack:
        pid = stack.pop()
        children = _children(pid) if table is None else table.get(pid, [])
        if children is None:
            table = _table()
            children = table.get(pid, [])
        for child in children:
            if child not in found and (stat := _stat(child)) is not None:
                found[child] = stat[1]
                stack.append(child)
    return found


def tasks() -> set[int]:
    """The native ids of this process's threads, from /proc/self/task, including those Python's
    `threading` does not list (started with `_thread`, or by C code). Empty without /proc."""
    try:
        return set(map(int, os.listdir(f"{PROC}/self/task")))
    except OSError:
        return set()


def ours() -> set[int]:
    """Processes of sessiongate's own that outlive a run or a command by design: the exec:
    gateway children it keeps for the next scenario (each ended with its process group when
    its gateway goes, `exec_gateway`), with what they started, and multiprocessing's resource
    tracker and forkserver (started by a `spawn` or `forkserver` pool)."""
    pids: set[int] = set()
    exec_gateway = sys.modules.get("conformance.transport.exec_gateway")
    for child in getattr(exec_gateway, "LIVE_CHILDREN", ()):
        pids |= {child, *descendants(child)}
    try:
        from multiprocessing import forkserver, resource_tracker
    except ImportError:  # pragma: no cover
        return pids
    for helper in (getattr(resource_tracker, "_resource_tracker", None), getattr(forkserver, "_forkserver", None)):
        pid = getattr(helper, "_pid", None) or getattr(helper, "_forkserver_pid", None)
        if isinstance(pid, int):
            pids.add(pid)
    return pids


def new_since(before: dict[int, str]) -> dict[int, str]:
    """Descendants not in the `before` census and not sessiongate's own, in pid order."""
    now = descendants()
    if not now:
        return {}
    mine = ours()
    return {pid: name for pid, name in sorted(now.items()) if pid not in before and pid not in mine}


GRACE = 1.0  # wall-clock seconds a thread or process the gateway started may take to end after the final stop


class Census:
    """What runs in and under this process when a gateway starts: taken before its start and
    compared after its final stop (`left_running`), so that only what it started counts."""

    __slots__ = ("processes", "tasks", "threads")

    def __init__(self) -> None:
        self.threads = {t.ident for t in threading.enumerate()}
        self.tasks = tasks()
        self.processes = descendants()

    def left_running(self, grace: float = GRACE) -> tuple[int, list[str]]:
        """(threads, the processes' command names, sorted) started since the census that still
        run. One that is ending as the stop returns (a worker finishing its last job, a helper
        sent SIGTERM) gets `grace` wall-clock seconds to do so, so the count does not depend on
        the scheduler; a loop that never ends is counted. Threads are those `threading` lists
        and those only the OS does (started with `_thread`, or by C code)."""
        deadline = time.monotonic() + grace
        leaked = [t for t in threading.enumerate() if t.ident not in self.threads and t.is_alive()]
        for thread in leaked:
            thread.join(max(0.0, deadline - time.monotonic()))
        alive = [t for t in leaked if t.is_alive()]
        known = self.tasks | {t.native_id for t in alive if t.native_id is not None}
        unlisted = tasks() - known  # a joined thread's OS thread may linger a moment: waited for too
        left = new_since(self.processes)
        while (unlisted or left) and time.monotonic() < deadline:
            time.sleep(0.01)
            unlisted, left = tasks() - known, new_since(self.processes)
        return len(alive) + len(unlisted), sorted(left.values())
