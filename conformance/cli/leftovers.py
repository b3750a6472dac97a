"""Processes a run left behind: what an in-process gateway started and never ended.

An exec: gateway's child is ended with its process group (`exec_gateway`); a gateway run in
sessiongate's own process can start processes nobody ends, and one that holds sessiongate's
stdout keeps `sessiongate run | tee log` waiting after the run is over. The command line takes
a census of its descendants (from /proc) before a command and ends the new ones after it.
Linux only: elsewhere the census is empty and nothing is ended.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from pathlib import Path

PROC = Path("/proc")


def _parents() -> dict[int, tuple[int, str]]:
    """pid -> (parent pid, command name) of every process /proc shows (empty without /proc)."""
    out: dict[int, tuple[int, str]] = {}
    try:
        entries = list(PROC.iterdir())
    except OSError:
        return out
    for entry in entries:
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:  # it exited while we looked
            continue
        name, _, rest = stat.partition(" (")[2].rpartition(") ")
        fields = rest.split()
        if fields and fields[0] not in ("Z", "X"):  # a zombie runs nothing
            out[int(entry.name)] = (int(fields[1]), name)
    return out


def descendants(root: int | None = None) -> dict[int, str]:
    """The running descendants of `root` (default: this process), pid -> command name."""
    root = os.getpid() if root is None else root
    table = _parents()
    children: dict[int, list[int]] = {}
    for pid, (parent, _name) in table.items():
        children.setdefault(parent, []).append(pid)
    found: dict[int, str] = {}
    stack = list(children.get(root, ()))
    while stack:
        pid = stack.pop()
        if pid not in found:
            found[pid] = table[pid][1]
            stack.extend(children.get(pid, ()))
    return found


def _ours() -> set[int]:
    """Processes of sessiongate's own that outlive a command by design: multiprocessing's
    resource tracker and forkserver (started by a `spawn` or `forkserver` pool), and the exec:
    gateway children it keeps for the next scenario, each ended with its process group when its
    gateway goes (`exec_gateway`), with what they started."""
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


def end_new(before: dict[int, str]) -> dict[int, str]:
    """SIGKILL every descendant not in the `before` census and not sessiongate's own helper;
    returns what was ended (pid -> command name), in pid order."""
    left = {pid: name for pid, name in sorted(descendants().items()) if pid not in before and pid not in _ours()}
    for pid in left:
        with contextlib.suppress(ProcessLookupError, PermissionError):  # it ended, or is not ours to end
            os.kill(pid, signal.SIGKILL)
    return left


def describe(left: dict[int, str]) -> str:
    """The one-line warning for what `end_new` ended."""
    shown = ", ".join(f"{pid} {name}" for pid, name in list(left.items())[:5]) + (", …" if len(left) > 5 else "")
    return (f"warning: the run left {len(left)} process{'es' if len(left) != 1 else ''} running that the gateway "
            f"started ({shown}): ended")
