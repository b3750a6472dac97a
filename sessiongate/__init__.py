"""sessiongate's conventions in one place: its version, the root of its own errors, its exit codes.

Imports nothing of the project, so every package (sim, conformance, reference_impl, reports) can
raise these, and `sessiongate --help` stays cheap.
"""

from __future__ import annotations

from enum import IntEnum

__version__ = "0.1.0"


class SessiongateError(Exception):
    """The root of sessiongate's own errors: bad input, a bad name, a file it cannot read. Not the
    signals it raises into gateway code (a fired crash point, an interrupt: BaseException)."""


class UsageError(SessiongateError, ValueError):
    """A malformed option, argument, name or input file: the CLI prints it and exits with USAGE."""

    usage = True  # the CLI shows the command's usage line above it: False when the command line is not what is wrong


class ExitCode(IntEnum):
    """What a `sessiongate` command exits with (README, "Exit codes")."""

    OK = 0  # nothing unexpected failed
    FAILED = 1  # a check failed, the gateway errored or timed out, or a file did not load
    USAGE = 2  # a usage or input error: nothing was judged
    CHECKER_ERROR = 4  # a check raised on some log (sessiongate's bug): the verdicts are incomplete; wins over FAILED
    INTERRUPTED = 130  # SIGINT (Ctrl-C)
    BROKEN_PIPE = 141  # the reader of stdout left (`… | head`)
    TERMINATED = 143  # SIGTERM


def interrupted_code(stop: BaseException) -> ExitCode:
    """The exit code of a run a signal stopped (`KeyboardInterrupt(signum)` from the harness's handler)."""
    import signal

    return ExitCode.TERMINATED if stop.args and stop.args[0] == signal.SIGTERM else ExitCode.INTERRUPTED
