"""Hand-made observation logs for the check tests: small scenarios run once on the reference
gateway, and edits that turn a clean log into the one a buggy gateway would have written."""

from __future__ import annotations

import functools
from typing import Any

from conformance.checks import judge
from conformance.harness.runner import run_scenario
from conformance.observations import CacheReplay, Obs
from reference_impl import ReferenceGateway
from sim.loader import load_text

_HEAD = "start: 2026-03-02T09:00\nchats:\n  alice: {}\n  bob: {}\n"

SCENARIOS: dict[str, str] = {
    # Two chats, cap 1: bob's turn evicts alice's agent; both sessions expire at 09:3x.
    "idle": """
config: {reset: {mode: idle, idle_minutes: 30}, cache_cap: 1, providers: [{name: hindsight, retain_every_n_turns: 3}]}
events:
  - message: alice
  - message: alice
    after: 1m
  - message: bob
    after: 1m
  - advance: 40m
""",
    # /new ends s1 at once; t2 opens s2 (switch, reset, then its turn).
    "new": """
config: {reset: {mode: none}, providers: [{name: hindsight, retain_every_n_turns: 2}]}
events:
  - message: alice
  - command: /new
    chat: alice
    after: 1m
  - message: alice
    after: 1m
""",
    # /new ends s1, t2 opens s2, /resume ends s2 and reopens s1 for t3.
    "resume": """
config: {reset: {mode: none}}
events:
  - message: alice
  - command: /new
    chat: alice
    after: 1m
  - message: alice
    after: 1m
  - command: /resume
    chat: alice
    after: 1m
  - message: alice
    after: 1m
""",
    # A session that never ends, across a SIGTERM and restart; hindsight buffers 3 turns.
    "sigterm": """
config: {reset: {mode: none}, providers: [{name: hindsight, retain_every_n_turns: 3}]}
events:
  - message: alice
  - message: alice
    after: 1m
  - sigterm: true
    after: 1m
  - restart: true
    after: 1m
  - message: alice
    after: 1m
""",
    # s1's row is deleted; t3 heals it (t1, t2 replayed); t4 is a muted notification reply.
    "heal": """
config: {reset: {mode: idle, idle_minutes: 30}}
events:
  - message: alice
  - message: alice
    after: 1m
  - delete_session: alice
    after: 1m
  - checkpoint: deleted
    after: 30s
  - message: alice
    after: 30s
  - checkpoint: healed
    after: 1m
  - message: alice
    muted: true
    after: 1m
""",
    # After a restart (no agent cached) the parent s1 of delegate child s2 is deleted with foreign keys
    # off; the child goes on.
    "fk": """
config: {reset: {mode: none}}
events:
  - message: alice
  - delegate: alice
    after: 1m
  - sigterm: true
    after: 1m
  - restart: true
    after: 1m
  - delete_parent: alice
    after: 1m
  - delegate: alice
    after: 1m
""",
    # Deleting s1 cascades to its child s2; the next delegate turn recreates s2 without a parent (the
    # final SIGTERM heals s1, whose agent held t1).
    "orphan": """
config: {reset: {mode: none}}
events:
  - message: alice
  - delegate: alice
    after: 1m
  - delete_session: alice
    after: 1m
  - delegate: alice
    after: 1m
  - checkpoint: recreated
    after: 1m
""",
    # The deletion takes s1 and its child s2; t3 heals s1, then t4 heals s2, which names s1 again.
    "child-healed-after-parent": """
config: {reset: {mode: none}}
events:
  - message: alice
  - delegate: alice
    after: 1m
  - delete_session: alice
    after: 1m
  - message: alice
    after: 1m
  - delegate: alice
    after: 1m
""",
    # Reset policy none: s1's agent is reaped after the idle TTL (1h, swept every 5m), reloaded at 12:00.
    "reaped": """
config: {reset: {mode: none}, idle_ttl: 1h}
events:
  - message: alice
  - message: alice
    at: "12:00"
""",
    # A lazy chat, 10m idle TTL: s1's agent is reaped at 09:15; s1 expires at 09:30 and is ended
    # only when t2 arrives at 12:00 (its agent idle meanwhile, past its boundary: never-ending).
    "lazy-reaped": """
config: {reset: {mode: idle, idle_minutes: 30}, watcher_interval: lazy, idle_ttl: 10m}
events:
  - message: alice
  - message: alice
    at: "12:00"
""",
    # The same chat under a 5m watcher: s1's agent is reaped at 09:15, s1 ended at 09:35.
    "eager-reaped": """
config: {reset: {mode: idle, idle_minutes: 30}, watcher_interval: 5m, idle_ttl: 10m}
events:
  - message: alice
  - message: alice
    at: "12:00"
""",
    # A lazy gateway: s1 expires at 09:30 and is ended only when t2 arrives at 10:00.
    "lazy": """
config: {reset: {mode: idle, idle_minutes: 30}, watcher_interval: lazy}
events:
  - message: alice
  - message: alice
    at: "10:00"
""",
    # A turn (09:00-09:05) outlives the idle threshold (2m): the rotation waits for its reply.
    "inflight": """
config: {reset: {mode: idle, idle_minutes: 2}, watcher_interval: 1m, turn_latency: 5m}
events:
  - message: alice
  - message: alice
    at: "09:10"
""",
    # /stop (with no turn running) and a delegate turn do not move the idle clock: t3 opens s3.
    "quiet": """
config: {reset: {mode: idle, idle_minutes: 30}}
events:
  - message: alice
  - command: /stop
    chat: alice
    at: "09:20"
  - delegate: alice
    at: "09:25"
  - message: alice
    at: "09:40"
""",
    # /stop abandons t1 (asked 09:00, answer due 09:01); t2 at 09:02 is s1's only turn; /new ends s1.
    "stopped": """
config: {reset: {mode: none}, turn_latency: 1m}
events:
  - message: alice
  - command: /stop
    chat: alice
    after: 30s
  - message: alice
    at: "09:02"
  - command: /new
    chat: alice
    at: "09:05"
""",
    # SIGTERM at 09:00:20 interrupts t1; after the restart t2 is s1's only turn.
    "interrupted": """
config: {reset: {mode: none}, turn_latency: 1m}
events:
  - message: alice
  - sigterm: true
    after: 20s
  - restart: true
    at: "09:02"
  - message: alice
    at: "09:03"
""",
    # Reset policy none, 1h TTL, a 2h turn: s1's agent is busy (by the log) until 11:00, reaped ~12:05.
    "long-turn": """
config: {reset: {mode: none}, idle_ttl: 1h, turn_latency: 2h}
events:
  - message: alice
""",
    # Delegates with no live session to run from: before the chat's first message, and after /new.
    "no-live-session": """
config: {reset: {mode: none}}
events:
  - delegate: alice
  - message: alice
    after: 1m
  - command: /new
    chat: alice
    after: 1m
  - delegate: alice
    after: 1m
""",
}

# Logs on which an earlier oracle raised a false alarm against the reference gateway.
ORACLE_CASES: dict[str, str] = {
    # t2 arrives while t1 runs, /new after it: t2 still belongs in s1; /new ends s1 after t2.
    "queued-turn-before-new": """
config: {reset: {mode: idle, idle_minutes: 30}, turn_latency: 1m}
events:
  - message: alice
  - message: alice
    after: 10s
  - command: /new
    chat: alice
    after: 10s
  - message: alice
    at: "09:05"
""",
    # t2 arrives at 09:00:30 behind t1 (09:00-09:05): s1 expires at 09:02:00 while t1 runs, t2
    # opens s2 at 09:05 and runs to 09:10; s2's end is owed 5m after that reply, not after 09:02:30.
    "queued-turn-past-boundary": """
config: {reset: {mode: idle, idle_minutes: 2}, turn_latency: 5m}
events:
  - message: alice
  - message: alice
    after: 30s
""",
    # s1's boundary (09:30:30) passes while up; a SIGTERM at 09:33 restarts the 5m countdown.
    "stop-during-countdown": """
config: {reset: {mode: idle, idle_minutes: 30}}
events:
  - message: alice
    after: 30s
  - sigterm: true
    at: "09:33"
  - restart: true
    at: "09:34"
""",
    # t1 is in flight at s1's boundary and dies with a crash; s1 ends a tick after the restart.
    "crash-in-flight": """
config: {reset: {mode: idle, idle_minutes: 2}, watcher_interval: 1m, turn_latency: 5m}
events:
  - message: alice
  - crash: true
    at: "09:03"
  - restart: true
    at: "09:20"
""",
    # /resume waits behind t3, which /stop then abandons: /resume takes effect at the /stop.
    "stop-then-resume": """
config: {reset: {mode: none}, turn_latency: 1m}
events:
  - message: alice
  - command: /new
    chat: alice
    at: "09:02"
  - message: alice
    at: "09:03"
  - message: alice
    after: 10s
  - command: /resume
    chat: alice
    after: 10s
  - command: /stop
    chat: alice
    at: "09:04:30"
  - message: alice
    at: "09:06"
""",
    # Two /resume queued behind one turn take effect at once: s2 -> s1 -> s2, each life ending once.
    "resume-twice-at-once": """
config: {reset: {mode: none}, turn_latency: 1m}
events:
  - message: alice
  - command: /new
    chat: alice
    after: 2m
  - message: alice
    after: 1m
  - command: /resume
    chat: alice
    after: 10s
  - command: /resume
    chat: alice
    after: 10s
  - message: alice
    at: "09:10"
""",
    # Three /resume queued behind t2 (seeds 9072 and 51898 of the long profile, shrunk, found each
    # of these): s2 -> s1 -> s2 -> s1 at t2's reply. s1's two resumed lives begin at two different
    # switches into it, and the switch into s1's second life, between the second /resume and
    # s2's switch into its second life, is no hook of that life's successor.
    "resume-back-twice": """
config: {reset: {mode: none}, turn_latency: 3m}
events:
  - {message: alice}
  - {command: /new, chat: alice, after: 4m}
  - {message: alice, after: 1m}
  - {command: /resume, chat: alice, after: 10s}
  - {command: /resume, chat: alice, after: 10s}
  - {command: /resume, chat: alice, after: 10s}
""",
    # Four messages 6m apart, each turn 20m against an idle limit of 5m: each queued turn arrives
    # past its session's boundary, so s1..s3 each end as the next turn starts, and t4 (s4) is
    # still in flight at the final SIGTERM (10:06, the horizon counted from the last event).
    # s4's end would only be owed after that: nothing is (a dense-fault hunt found it).
    "backlog-at-final-stop": """
config: {reset: {mode: idle, idle_minutes: 5}, turn_latency: 20m, idle_ttl: 20m, watcher_interval: 1m}
events:
  - message: alice
  - {message: alice, after: 6m}
  - {message: alice, after: 6m}
  - {message: alice, after: 6m}
""",
    # Sent while the gateway is down, delivered in order at the restart: t1 starts, /new waits
    # behind it, /stop abandons it, then /new ends s1. The /stop is delivered after t1's request
    # although its arrival record precedes it (a dense-fault hunt found the model reading it
    # the other way).
    "held-stop-after-held-turn": """
config: {reset: {mode: none}}
events:
  - sigterm: true
  - message: alice
  - {command: /new, chat: alice}
  - {command: /stop, chat: alice}
  - {message: alice, after: 1m}
""",
    # s1's agent is evicted (cap 1) then its row deleted: t1 is gone for good (and must never come back); t3
    # recreates s1, and t3 and t4 are owed.
    "lost-then-live": """
config: {reset: {mode: idle, idle_minutes: 30}, cache_cap: 1}
events:
  - message: alice
  - message: bob
    after: 1m
  - delete_session: alice
    after: 1m
  - message: alice
    after: 1m
  - delete_session: alice
    after: 1m
  - message: alice
    after: 1m
""",
    # The row is deleted while the agent is cached, and bob's turn evicts it before alice writes again: the
    # eviction owes t1 back (the reference heals there).
    "evicted-before-next-write": """
config: {reset: {mode: idle, idle_minutes: 30}, cache_cap: 1}
events:
  - message: alice
  - delete_session: alice
    after: 1m
  - message: bob
    after: 1m
  - message: alice
    after: 1m
""",
    # s1's row is deleted under its live agent, then a SIGTERM: the stop owes t1 back (the reference heals).
    "deleted-then-stopped": """
config: {reset: {mode: none}}
events:
  - message: alice
  - delete_session: alice
    after: 1m
  - sigterm: true
    after: 1m
  - restart: true
    after: 1m
""",
    # As above, but a crash comes before any write-back: t1 is gone for good, t2 is owed.
    "deleted-then-crash": """
config: {reset: {mode: none}}
events:
  - message: alice
  - delete_session: alice
    after: 1m
  - crash: true
    after: 1m
  - restart: true
    after: 1m
  - message: alice
    after: 1m
""",
    # After a restart no agent holds s1; its deletion cascades to child s2. The next delegate turn's child
    # s3 is created without its parent, and s1 stays deleted.
    "unheld-parent": """
config: {reset: {mode: none}}
events:
  - message: alice
  - delegate: alice
    after: 1m
  - sigterm: true
    after: 1m
  - restart: true
    after: 1m
  - delete_session: alice
    after: 1m
  - delegate: alice
    after: 1m
  - checkpoint: after-child
    after: 1m
""",
    # s1's row is deleted under its agent, which the idle sweep evicts while the store is locked: its
    # write-back waits (kept in memory, out of the cache), and a second deletion finds no cached agent. The
    # reference's retry after the lock brings s1 back with t1: no resurrection (a fuzz run would show it).
    "locked-release": """
config: {reset: {mode: none}, idle_ttl: 5m}
events:
  - message: alice
  - delete_session: alice
    after: 1m
  - db_locked: 20m
    after: 1m
  - delete_session: alice
    at: "09:15"
  - checkpoint: after-lock
    at: "09:40"
""",
    # /new ends s1, whose row is then deleted (no agent holds it); /resume reopens s1 and t3 lands in it.
    "resume-deleted": """
config: {reset: {mode: none}}
events:
  - message: alice
  - command: /new
    chat: alice
    after: 1m
  - delete_session: alice
    after: 1m
  - message: alice
    after: 1m
  - command: /resume
    chat: alice
    after: 1m
  - checkpoint: resumed
    after: 1m
  - message: alice
    after: 1m
""",
    # Catalog 65: /new ends s1, its row is deleted at 09:02, a SIGTERM at 09:03, t2 opens s2 after the restart.
    "ended-deleted": """
config: {reset: {mode: none}}
events:
  - message: alice
  - command: /new
    chat: alice
    at: "09:01"
  - delete_session: alice
    at: "09:02"
  - sigterm: true
    at: "09:03"
  - restart: true
    at: "09:05"
  - message: alice
    at: "09:10"
""",
    # hindsight is slow (90 s a turn) from 09:00: t1's call is due at 09:01:32, t2's at 09:02:02; /new ends s1 at
    # 09:01:45, between the two (t2 is in flight then).
    "slow-two-calls": """
config: {reset: {mode: none}, providers: [{name: hindsight, retain_every_n_turns: 1}]}
events:
  - backend_slow: hindsight
    for: 10m
    delay: 90s
  - message: alice
  - message: alice
    at: "09:00:30"
  - command: /new
    chat: alice
    at: "09:01:45"
""",
    # s1 expires at 09:05; the /resume at 09:06 notices it and reopens s1, t2 lands in its new life, and s1's row is
    # deleted while that life is live (dense fuzz seed 30, shrunk): the reference heals it with t1 and t2.
    "reopened-deleted": """
config: {reset: {mode: idle, idle_minutes: 5}}
events:
  - message: alice
  - command: /resume
    chat: alice
    after: 6m
  - message: alice
    after: 2s
  - delete_session: alice
    after: 8s
""",
    # s1 ends at 09:35; its row is deleted afterwards: the end still owed (and carried) t1.
    "deleted-after-end": """
config: {reset: {mode: idle, idle_minutes: 30}}
events:
  - message: alice
  - delete_session: alice
    at: "09:50"
""",
    # Child s2 is born after s1's row was deleted (and healed); deleting s1 later leaves s2 dangling.
    "child-born-after-deletion": """
config: {reset: {mode: none}}
events:
  - message: alice
  - delete_session: alice
    after: 1m
  - message: alice
    after: 1m
  - delegate: alice
    after: 1m
  - delete_parent: alice
    after: 1m
""",
}


@functools.cache
def log(name: str) -> tuple[Obs, ...]:
    """The reference gateway's log of scenario `name` (run once per test session)."""
    text = f"name: {name}\n{_HEAD}{SCENARIOS.get(name) or ORACLE_CASES[name]}"
    return tuple(run_scenario(load_text(text, f"<{name}>"), ReferenceGateway(), "reference", check=False).records)


def snapshots(records: tuple[Obs, ...] | list[Obs]) -> list[Obs]:
    """The log with every `resources` record stating the whole cache (a valid log too), so a
    test can edit one sample without its change carrying into the deltas after it."""
    replay, out = CacheReplay(), []
    for r in records:
        if r.kind == "resources":
            replay.apply(r.detail)
            r = r._replace(detail=replay.resources().to_detail())
        out.append(r)
    return out


def find(records: tuple[Obs, ...] | list[Obs], kind: str, *, session: str | None = None, turn: str | None = None,
         nth: int = 0, **detail: Any) -> int:
    """Index of the `nth` record of `kind` matching session, turn and detail values."""
    hits = [
        i for i, r in enumerate(records)
        if r.kind == kind and (session is None or r.session == session) and (turn is None or turn in r.turns)
        and all(r.d(k) == v for k, v in detail.items())
    ]
    return hits[nth]


def edit(records: tuple[Obs, ...] | list[Obs], index: int, **changes: Any) -> list[Obs]:
    """The log with one record changed; `detail=` merges into the record's detail."""
    out = list(records)
    if "detail" in changes:
        changes["detail"] = {**out[index].detail, **changes["detail"]}
    out[index] = out[index]._replace(**changes)
    return out


def drop(records: tuple[Obs, ...] | list[Obs], *indexes: int) -> list[Obs]:
    return [r for i, r in enumerate(records) if i not in indexes]


def insert(records: tuple[Obs, ...] | list[Obs], index: int, record: Obs) -> list[Obs]:
    """The log with `record` placed before position `index`."""
    out = list(records)
    out.insert(index, record)
    return out


def move(records: tuple[Obs, ...] | list[Obs], index: int, before: int, **changes: Any) -> list[Obs]:
    """The log with record `index` moved before position `before` (of the original log),
    taking the time of the record it now precedes unless `t=` says otherwise."""
    record = records[index]
    changes.setdefault("t", records[before].t if before < len(records) else records[-1].t)
    moved = record._replace(**changes)
    out = [r for i, r in enumerate(records) if i != index]
    out.insert(before - (1 if index < before else 0), moved)
    return out


def rows(records: tuple[Obs, ...] | list[Obs], label: str, session: str, new_rows: list[list[Any]] | None,
         parent: str | None = None) -> list[Obs]:
    """The log with one session's rows in snapshot `label` replaced (None: the row is gone)."""
    index = find(records, "durable", label=label)
    sessions = {sid: dict(body) for sid, body in records[index].d("sessions").items()}
    if new_rows is None:
        del sessions[session]
    else:
        sessions[session] = {"parent": parent if parent is not None else sessions.get(session, {}).get("parent"),
                             "rows": new_rows}
    return edit(records, index, detail={"sessions": sessions})


def messages(records: tuple[Obs, ...] | list[Obs], check: str) -> list[str]:
    """What `check` says about the log: its violations' messages (none if it passes)."""
    verdict = judge(list(records))[check]
    assert (verdict.status == "fail") == bool(verdict.violations), verdict
    return [v.message for v in verdict.violations]
