"""The Hermes runner's event loop: work for the default executor (`asyncio.to_thread`) runs inline,
its result set one callback later, as a worker that had finished at once would set it."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any


class InlineLoop(asyncio.SelectorEventLoop):
    """The runner's event loop. Work for the default executor while none is set
    (`asyncio.to_thread`: `AsyncSessionStore`) runs at once, on the loop, and its result is
    set one callback later, in the order a worker that had finished at once would set it,
    without the thread-safe hand-off (a concurrent future chained to this loop through its
    self-pipe: a tenth of the catalog's CPU, mostly in watcher sweeps)."""

    def run_in_executor(self, executor: Any, func: Callable[..., Any], *args: Any) -> asyncio.Future[Any]:
        if executor is not None or self._default_executor is not None:  # type: ignore[attr-defined]
            return super().run_in_executor(executor, func, *args)
        self._check_closed()
        future = self.create_future()
        try:
            result, error = func(*args), None
        except BaseException as raised:  # concurrent.futures' worker hands every exception over
            result, error = None, raised
        self.call_soon(_settle_future, future, result, error)
        return future


def task_order(task: asyncio.Task[Any]) -> int:
    """Creation order ('Task-12' is the 12th task this process made)."""
    name = task.get_name()
    return int(name[5:]) if name.startswith("Task-") and name[5:].isdigit() else 0


def _settle_future(future: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    """asyncio.futures._chain_future's _set_state, for a worker's outcome."""
    if future.cancelled():
        return
    if error is not None:
        future.set_exception(asyncio.futures._convert_future_exc(error))  # type: ignore[attr-defined]
    else:
        future.set_result(result)
