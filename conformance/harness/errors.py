"""How a step fails other than by the gateway raising: a wall-clock timeout, a remote gateway's
failure, and sessiongate itself told to stop."""

from __future__ import annotations

from collections.abc import Callable

from sessiongate import SessiongateError


class GatewayTimeout(SessiongateError):
    """A gateway step took longer than the wall-clock step timeout (isolated gateways)."""


class Interrupted(KeyboardInterrupt):
    """sessiongate itself was told to stop: its own SIGINT/SIGTERM handler (`raise_interrupted`)
    raises this, and only this stops a run. A KeyboardInterrupt (or SystemExit…) that a gateway
    raises is that gateway's error at its step; a KeyboardInterrupt, so every `except
    KeyboardInterrupt` outside the runner still reads it as Ctrl-C."""


_RAISED: list[Interrupted] = []  # every Interrupted the handler raised: the harness's own, by identity
ON_SIGNAL: list[Callable[[int], object]] = []  # the run in progress, told of each signal first (`runner`)


def raise_interrupted(signum: int, _frame: object) -> None:
    """The harness's signal handler: `Interrupted(signum)`, distinguishable from the gateway's own.
    The run in progress hears of it first: a second signal it has not stopped at (a gateway that
    caught the first `Interrupted` and went on) ends the process there, with its report."""
    if ON_SIGNAL:
        ON_SIGNAL[-1](signum)
    stop = Interrupted(signum)
    _RAISED.append(stop)
    raise stop


def signalled(err: BaseException) -> bool:
    """`err` is an `Interrupted` the harness's own handler raised (a gateway can raise one too:
    that one is the gateway's error at its step, and never stops a run)."""
    return isinstance(err, Interrupted) and any(err is stop for stop in _RAISED)


class RemoteGatewayError(SessiongateError):
    """A gateway in another process failed a step, died, or broke the wire protocol."""

    def __init__(self, message: str, traceback: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.traceback = traceback
