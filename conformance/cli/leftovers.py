"""Processes a run left behind: what an in-process gateway started and never ended.

An exec: gateway's child is ended with its process group (`exec_gateway`); a gateway run in
sessiongate's own process can start processes nobody ends, and one that holds sessiongate's
stdout keeps `sessiongate run | tee log` waiting after the run is over. The command line takes
a census of its descendants (`conformance.harness.processes`) before a command and ends the new
ones after it. Linux only: elsewhere the census is empty and nothing is ended.
"""

from __future__ import annotations

import contextlib
import os
import signal

from conformance.harness.processes import descendants, new_since

__all__ = ["descendants", "describe", "end_new"]


def end_new(before: dict[int, str]) -> dict[int, str]:
    """SIGKILL every descendant not in the `before` census and not sessiongate's own helper;
    returns what was ended (pid -> command name), in pid order."""
    left = new_since(before)
    for pid in left:
        with contextlib.suppress(ProcessLookupError, PermissionError):  # it ended, or is not ours to end
            os.kill(pid, signal.SIGKILL)
    return left


def describe(left: dict[int, str]) -> str:
    """The one-line warning for what `end_new` ended."""
    shown = ", ".join(f"{pid} {name}" for pid, name in list(left.items())[:5]) + (", …" if len(left) > 5 else "")
    return (f"warning: the run left {len(left)} process{'es' if len(left) != 1 else ''} running that the gateway "
            f"started ({shown}): ended")
