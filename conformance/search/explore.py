"""`sessiongate explore --depth D`: every ordering of a small alphabet of steps, up to D steps.

The world: chats `a` and `b` (and `c`, used only to evict), idle policy 30m, watcher 5m,
agent cache cap 2 with a 10m idle TTL, one provider batching every 2 turns. The alphabet:

    ma mb    a message to a / b                      (then 1m passes)
    na nb    /new in a / b                           (then 1m passes)
    da db    another surface deletes a's / b's row   (then 1m passes)
    evict    a message to c: with cap 2, the least recently used agent is evicted (1m)
    tick     5m pass: one watcher interval
    idle     31m pass: past the idle boundary and the idle TTL
    term     SIGTERM, and a restart 1m later

Breadth first, one level per step. Each sequence runs as its own scenario (the prefix, a
checkpoint, then the runner's quiescence), which judges it and yields its *state*. Two
sequences are in the same state when a black-box observer could not tell their futures
apart, up to renaming; only one of them is extended. The state is the digest of:
  - the durable snapshot at the checkpoint: each chat's sessions (renamed `a0`, `a1`… in
    the order the chat used them) with their rows (turns renamed by their order in the
    session), parents, and the routing entries;
  - the semantic projection of the observation log so far, as a multiset, not a sequence:
    per session, the turns acknowledged, synced, ingested per backend, ended (with the
    transcript `on_session_end` carried) and the count of finalize/switch/reset hooks;
  - the agent cache at the checkpoint (renamed sessions, in the order of their last use by
    the log: a turn asked or answered, or entering the cache, as an LRU cache orders them;
    the log keeps which agents are cached, not the gateway's order or flags) and live task
    count;
  - the clock as far as the future can tell: per chat, minutes since its last message
    (capped at 31, past every threshold), and the minute within the watcher interval
    counted from the start and from the last restart.
Swapping a and b gives the same state (the chats are alike), so the smaller digest is used.
This merges histories that differ only in order or in ids; it is an abstraction (timers a
gateway keeps privately beyond those thresholds are not seen), documented as such.
"""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from conformance.harness.runner import run_scenario
from conformance.observations import CacheReplay, Obs
from conformance.search.fuzz import BAD, candidate_budget, factory
from sim.clock import MINUTE, SECOND, to_ms
from sim.scenario import (
    Advance,
    Chat,
    Checkpoint,
    Command,
    DeleteSession,
    Event,
    GatewayConfig,
    Message,
    ProviderSpec,
    ResetPolicy,
    Restart,
    Scenario,
    Sigterm,
)

ALPHABET = ("ma", "mb", "na", "nb", "da", "db", "evict", "tick", "idle", "term")
START = to_ms(datetime(2026, 1, 5, 9, 0, tzinfo=UTC))
WATCHER = 5 * MINUTE
CAP_MINUTES = 31
CONFIG = GatewayConfig(
    reset=ResetPolicy(mode="idle", idle_minutes=30),
    cache_cap=2,
    idle_ttl=10 * MINUTE,
    watcher_interval=WATCHER,
    providers=(ProviderSpec("hindsight", 2),),
    turn_latency=2 * SECOND,
)
CHATS = (Chat("a"), Chat("b"), Chat("c"))


def scenario_of(steps: Sequence[str]) -> Scenario:
    """The scenario for a sequence of steps, ending in the checkpoint 'state'."""
    events: list[Event] = []
    t, turns = START, 0
    for step in steps:
        if step in ("ma", "mb", "evict"):
            turns += 1
            events.append(Message(t, chat="c" if step == "evict" else step[1], turn=f"t{turns}", text="hello"))
        elif step in ("na", "nb"):
            events.append(Command(t, chat=step[1], name="/new"))
        elif step in ("da", "db"):
            events.append(DeleteSession(t, chat=step[1]))
        elif step == "term":
            events += [Sigterm(t), Restart(t + MINUTE)]
        t += {"tick": WATCHER, "idle": CAP_MINUTES * MINUTE}.get(step, MINUTE)
        if step in ("tick", "idle"):
            events.append(Advance(t))
    events.append(Checkpoint(t, name="state"))
    name = "explore-" + (".".join(steps) or "empty")
    return Scenario(name=name, zone="UTC", start=START, config=CONFIG, chats=CHATS, events=tuple(events))


def state_digest(records: list[Obs], swap: bool = False) -> str:
    """The canonical digest of the state at the checkpoint (see the module docstring)."""
    rename_chat = {"a": "b", "b": "a"} if swap else {}
    cut = next(i for i, r in enumerate(records) if r.kind == "checkpoint")
    head = records[: cut + 2]  # through the checkpoint's durable snapshot
    now = records[cut].t
    sessions: dict[str, str] = {}
    per_chat: dict[str, int] = defaultdict(int)
    turn_names: dict[str, str] = {}
    per_session: dict[str, int] = defaultdict(int)

    def session(sid: str | None, chat: str | None = None) -> str:
        if sid is None:
            return "-"
        if sid not in sessions and chat is not None:
            chat = rename_chat.get(chat, chat)
            sessions[sid] = f"{chat}{per_chat[chat]}"
            per_chat[chat] += 1
        return sessions.get(sid, "?")

    def turn(tid: str, sid: str | None) -> str:
        if tid not in turn_names:
            owner = session(sid)
            turn_names[tid] = f"{owner}.{per_session[owner]}"
            per_session[owner] += 1
        return turn_names[tid]

    facts: list[Any] = []
    last_message: dict[str, int] = {}
    last_restart = START
    for r in head:
        if r.kind == "llm_request" and r.chat:
            session(r.session, r.chat)
        if r.kind == "message" and r.chat:
            last_message[rename_chat.get(r.chat, r.chat)] = r.t
        elif r.kind == "restart":
            last_restart = r.t
        elif r.kind in ("reply", "sync_turn", "ingest", "ingest_failed", "on_session_end"):
            facts.append([r.kind, session(r.session), r.d("backend"), [turn(t, r.session) for t in r.turns]])
        elif r.kind in ("on_session_finalize", "on_session_switch", "on_session_reset"):
            facts.append([r.kind, session(r.session), session(r.d("previous"))])
    durable = head[-1] if head[-1].kind == "durable" else None
    stored: list[Any] = []
    routing: list[Any] = []
    if durable is not None:
        for sid, body in durable.d("sessions", {}).items():
            rows = [[role, tid and turn(tid, sid), visibility] for role, tid, visibility in body["rows"]]
            stored.append([session(sid), session(body.get("parent")), rows])
        routing = sorted([rename_chat.get(chat, chat), session(sid)] for chat, sid in durable.d("routing", {}).items())
    cache = CacheReplay()  # resources records are deltas: the cache as of the checkpoint
    used: dict[str, int] = {}  # session -> its last use by the log: a turn asked or answered, or its agent loaded
    for index, r in enumerate(head):
        if r.kind == "resources":
            came = [sid for sid, _busy in r.d("cached") or r.d("add") or ()]
            cache.apply(r.detail)
            used.update((sid, index) for sid in came if sid not in used or r.d("add"))
        elif r.kind in ("llm_request", "reply") and r.session:
            used[r.session] = index
    cached = [session(sid) for sid in sorted(cache.cached, key=lambda sid: used.get(sid, -1))]
    clock = {chat: min((now - t) // MINUTE, CAP_MINUTES) for chat, t in sorted(last_message.items())}
    state = {
        "facts": sorted(facts, key=json.dumps),
        "stored": sorted(stored, key=json.dumps),
        "routing": routing,
        "cached": cached,
        "running": cache.running,
        "clock": clock,
        "phase": [(now - START) % WATCHER // MINUTE, (now - last_restart) % WATCHER // MINUTE],
    }
    return hashlib.sha256(json.dumps(state, sort_keys=True, separators=(",", ":")).encode()).hexdigest()[:24]


def evaluate(job: tuple[str, tuple[str, ...]]) -> tuple[str, dict[str, str]]:
    """Run one sequence: its state digest and the checks it fails."""
    gateway, steps = job
    scenario = scenario_of(steps)
    result = run_scenario(scenario, factory(gateway)(), gateway, budget=candidate_budget(scenario))
    bad = {check: v.summary for check, v in result.verdicts.items() if v.status in BAD}
    if result.failure is not None:
        return "failed:" + ".".join(steps), bad
    return min(state_digest(result.records), state_digest(result.records, swap=True)), bad
