"""The reference gateway's volatile state: everything its process holds in memory, in one
object, so a crash (SIGKILL) is one assignment: `ReferenceGateway.crash` drops it, and
`boot` builds a new one from the store (the disk), which is all that survives."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

from reference_impl.cache import Agent, AgentCache
from reference_impl.memory import MemoryManager
from reference_impl.policy import ExpiryQueue, ResetPolicyEvaluator
from sim.clock import MINUTE, SECOND
from sim.engine import Timer
from sim.scenario import Chat

SWEEP_INTERVAL = 5 * MINUTE  # idle sweeps in lazy mode, where there is no watcher
FLUSH_RETRY = SECOND
# Where durable and volatile state can part inside a step (`Harness.crash_point`, FDB's BUGGIFY).
CRASH_POINTS = frozenset({
    "batch-shipped",  # a batching provider's backend took a batch; its watermark is not saved
    "end-recorded",  # a session's end is recorded; the routing entry still points at it
    "route-rotated",  # the routing entry is rotated; the end hooks have not fired
    "heal-recreated",  # a deleted row is recreated; the transcript replay is not written
    "rows-chunk-written",  # a long write has committed some chunks of rows in its transaction
    "shutdown-flushing",  # SIGTERM has flushed some agents; others still hold turns
})


@dataclass(slots=True)
class Pending:
    """A turn in flight: asked of the LLM, not yet answered."""

    chat: Chat
    key: str
    session: str
    turn: str
    delegate: bool = False
    reply: str | None = None  # set when the reply is in but the store refused the write


@dataclass(slots=True)
class Volatile:
    """What the gateway process holds in memory, built by `boot` from the store."""

    policy: ResetPolicyEvaluator  # the reset-policy rules, in the gateway's local zone
    cache: AgentCache
    memory: MemoryManager
    tick_origin: int  # the watcher's grid: every interval since boot
    expiries: ExpiryQueue = field(default_factory=ExpiryQueue)
    running: bool = False  # up and serving: false from a SIGTERM on (a crash drops the whole state)
    unflushed: dict[str, Agent] = field(default_factory=dict)  # evicted agents whose write the store refused
    inflight: dict[str, Pending] = field(default_factory=dict)  # request id -> its turn
    busy_chats: dict[str, str] = field(default_factory=dict)  # chat key -> request id
    queues: dict[str, deque[tuple[str, Any, int]]] = field(default_factory=dict)  # chat key -> (kind, payload, arrival)
    due_chats: set[str] = field(default_factory=set)  # chats whose waiting commands the store holds as due
    children: dict[str, str] = field(default_factory=dict)  # parent session -> delegate child session
    timers: list[Timer] = field(default_factory=list)  # retries of refused writes
    tick_timer: Timer | None = None
    command_time: int | None = None  # while a command cut by a crash is finished: when it took effect
    reported_running: int = 0  # the `running` count last reported (`resources_delta`)
