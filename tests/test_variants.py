"""Each bug-zoo variant differs from the reference exactly where its report says.

Every variant runs its own scenario (tests/zoo_scenarios/<name>.yaml) beside the
reference, without the checks; the test reads one observable off both logs and compares
it with what the reference and the bug should produce.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from conformance.harness.runner import run_scenario
from conformance.observations import CacheReplay, Obs
from reference_impl.gateway import ReferenceGateway
from reference_impl.memory import BatchingProvider
from reference_impl.registry import reference, variant
from reference_impl.variants import VARIANTS, make
from sim.loader import load_file
from sim.scenario import ProviderSpec

SCENARIOS = Path(__file__).parent / "zoo_scenarios"


def ends(records: list[Obs], session: str | None = None) -> list[tuple[str | None, tuple[str, ...]]]:
    """(session, turns) of every on_session_end, in order."""
    return [(r.session, r.turns) for r in records if r.kind == "on_session_end" and session in (None, r.session)]


def final_rows(records: list[Obs], session: str) -> list[list[Any]]:
    """A session's rows in the last snapshot."""
    return next(r for r in reversed(records) if r.kind == "durable").d("sessions")[session]["rows"]


def final_cut(records: list[Obs], session: str) -> list[str] | None:
    """The turns of a session the last snapshot says a row named by its tag alone."""
    return next(r for r in reversed(records) if r.kind == "durable").d("sessions")[session].get("cut")


def final_parent(records: list[Obs], session: str) -> str | None:
    """The parent a session's row names in the last snapshot."""
    return next(r for r in reversed(records) if r.kind == "durable").d("sessions")[session]["parent"]


def count(records: list[Obs], kind: str, session: str | None = None) -> int:
    return sum(1 for r in records if r.kind == kind and session in (None, r.session))


def ingested(records: list[Obs], backend: str) -> list[str]:
    """Every turn the backend took, repeats included."""
    return [turn for r in records if r.kind == "ingest" and r.d("backend") == backend for turn in r.turns]


def ingested_before_end(records: list[Obs], backend: str, session: str) -> list[str]:
    """The turns the backend took before the session's first on_session_end."""
    end = next(i for i, r in enumerate(records) if r.kind == "on_session_end" and r.session == session)
    return ingested(records[:end], backend)


def stored(records: list[Obs], session: str, what: str = "turns", label: str = "final") -> Any:
    """One session in the durable state labelled `label` (the last such snapshot): its user
    turns, visibilities or parent (None if absent)."""
    final = [r for r in records if r.kind == "durable" and r.d("label") == label][-1]
    body = final.d("sessions").get(session)
    if body is None:
        return None
    if what == "parent":
        return body["parent"]
    if what == "visibility":
        return [visibility for _role, _turn, visibility in body["rows"]]
    return [turn for role, turn, _visibility in body["rows"] if role == "user"]


def sequence(records: list[Obs], kinds: tuple[str, ...], sessions: tuple[str, ...]) -> list[str]:
    """'kind session' of the given kinds, in log order."""
    return [f"{r.kind} {r.session}" for r in records if r.kind in kinds and r.session in sessions]


def replied(records: list[Obs]) -> list[str]:
    """The turns whose reply reached the chat, in order."""
    return [turn for r in records if r.kind == "reply" for turn in r.turns]


def reply_session(records: list[Obs], turn: str) -> str | None:
    return next((r.session for r in records if r.kind == "reply" and turn in r.turns), None)


def cached_at_checkpoint(records: list[Obs]) -> list[list[Any]]:
    """The cache as last sampled before the first checkpoint (each flag as the record that
    named its session said it)."""
    index = next(i for i, r in enumerate(records) if r.kind == "checkpoint")
    cache = CacheReplay()  # resources records are deltas
    for r in records[:index]:
        if r.kind == "resources":
            cache.apply(r.detail)
    return [[sid, busy] for sid, busy in cache.entries()]


# variant -> (what to read off a log, the reference's value, the variant's value)
CASES: dict[str, tuple[Callable[[list[Obs]], Any], Any, Any]] = {
    "expiry-skips-end-without-agent": (lambda r: (ends(r), count(r, "on_session_finalize")),
                                       ([("s1", ("t1", "t2"))], 1), ([], 1)),
    "idle-expiry-no-finalize": (lambda r: (len(ends(r)), count(r, "on_session_finalize")), (1, 1), (1, 0)),
    "lru-evict-drops-unflushed": (lambda r: ingested(r, "hindsight"), ["t1", "t2", "t3"], ["t3"]),
    "idle-sweep-evicts-before-daily-expiry": (ends, [("s1", ("t1", "t2"))], [("s1", ())]),
    "idle-sweep-never-reaps-none": (cached_at_checkpoint, [], [["s1", True]]),
    "idle-sweep-only-none": (cached_at_checkpoint, [], [["s1", True]]),
    "evict-commit-then-expiry-double-end": (lambda r: ends(r, "s1"), [("s1", ("t1",))], [("s1", ("t1",))] * 2),
    "batch-no-flush-on-session-end": (lambda r: ingested(r, "hindsight"), ["t1", "t2"], []),
    "batch-lost-on-shutdown": (lambda r: ingested(r, "hindsight"), ["t1", "t2"], []),
    "batch-flush-reships-retained": (lambda r: ingested(r, "hindsight"),
                                     ["t1", "t2", "t3"], ["t1", "t2", "t1", "t2", "t3", "t1", "t2", "t3"]),
    "retry-drops-newer-turns": (lambda r: ingested_before_end(r, "hindsight", "s1"), ["t1", "t2", "t3"], ["t1", "t2"]),
    "end-after-switch": (lambda r: [x for x in sequence(r, ("on_session_end", "on_session_switch"), ("s1", "s2"))
                                    if x in ("on_session_end s2", "on_session_switch s1")],
                         ["on_session_end s2", "on_session_switch s1"], ["on_session_switch s1", "on_session_end s2"]),
    "switch-names-stale-previous": (lambda r: [(x.session, x.d("previous")) for x in r if x.kind == "on_session_switch"],
                                    [("s2", "s1"), ("s3", "s2")], [("s2", None), ("s3", "s1")]),
    "deleted-row-drops-turns": (lambda r: stored(r, "s1", label="after-t3"), ["t1", "t2", "t3"], None),
    "heal-replays-tail-only": (lambda r: stored(r, "s1"), ["t1", "t2"], ["t2"]),
    "heal-on-any-fk-duplicates": (lambda r: (stored(r, "s2"), stored(r, "s2", "parent")),
                                  (["t2", "t3"], None), (["t2", "t2", "t3"], None)),
    "heal-muted-hides-history": (lambda r: stored(r, "s1", "visibility"),
                                 ["visible", "visible", "hidden", "hidden"], ["hidden"] * 4),
    "heal-forgets-pending-replay": (lambda r: stored(r, "s1"), ["t1", "t2"], ["t2"]),
    "answer-refused-after-row-deleted": (replied, ["t1", "t2"], ["t1"]),
    "orphan-child-never-recreated": (lambda r: stored(r, "s2", label="child-recreated"), ["t2", "t3"], None),
    "heal-drops-child-parent": (lambda r: final_parent(r, "s2"), "s1", None),
    "evict-drops-deleted-transcript": (lambda r: stored(r, "s1"), ["t1"], None),
    "parent-resurrected-for-child": (lambda r: (stored(r, "s1"), stored(r, "s3", "parent")), (None, None), ([], "s1")),
    "reset-mid-turn": (lambda r: sequence(r, ("reply", "sync_turn", "on_session_end"), ("s1",)),
                       ["sync_turn s1", "reply s1", "on_session_end s1"], ["on_session_end s1", "sync_turn s1", "reply s1"]),
    "watcher-ends-busy-session": (lambda r: sequence(r, ("reply", "sync_turn", "on_session_end"), ("s1",)),
                                  ["sync_turn s1", "reply s1", "on_session_end s1"],
                                  ["on_session_end s1", "sync_turn s1", "reply s1"]),
    "resume-refused-mid-turn": (lambda r: reply_session(r, "t3"), "s1", "s2"),
    "command-moves-idle-clock": (lambda r: reply_session(r, "t2"), "s2", "s1"),
    "daily-boundary-in-utc": (lambda r: reply_session(r, "t2"), "s1", "s2"),
    "message-reset-fires-no-hooks": (lambda r: (count(r, "on_session_end", "s1"), count(r, "on_session_finalize", "s1")),
                                     (1, 1), (0, 0)),
    "shutdown-ends-sessions": (lambda r: ends(r, "s1"), [("s1", ("t1", "t2"))], [("s1", ("t1",)), ("s1", ("t1", "t2"))]),
    "sync-after-end": (lambda r: sequence(r, ("sync_turn", "on_session_end"), ("s1",)),
                       ["sync_turn s1", "on_session_end s1"], ["on_session_end s1", "sync_turn s1"]),
    "never-replies": (replied, ["t1", "t2"], []),
    "drops-replies": (lambda r: (replied(r), ingested(r, "recorder")), (["t1", "t2"], ["t1", "t2"]), ([], ["t1", "t2"])),
    "answers-first-turn-only": (replied, ["t1", "t2"], ["t1"]),
    "stop-ignored": (lambda r: reply_session(r, "t1"), None, "s1"),
    "abandoned-turn-kept": (lambda r: (stored(r, "s1"), ends(r, "s1")),
                            (["t2"], [("s1", ("t2",))]), (["t1", "t2"], [("s1", ("t1", "t2"))])),
    "crash-keeps-admitted-row": (lambda r: (stored(r, "s1", label="crash"), ends(r, "s1")),
                                 (["t1"], [("s1", ("t1", "t3"))]), (["t1", "t2"], [("s1", ("t1", "t2", "t3"))])),
    "busy-flag-stuck": (cached_at_checkpoint, [], [["s1", True]]),
    "crash-keeps-memory": (lambda r: [x.kind for x in r if x.kind in ("crash", "restart", "on_session_end")],
                           ["crash", "restart", "on_session_end", "on_session_end"],
                           ["crash", "on_session_end", "on_session_end", "restart"]),
    "memory-ships-reply-twice": (lambda r: [(r.turns, r.d("replies")) for r in r if r.kind == "ingest" and r.d("backend") == "hindsight"],
                                 [(("t1",), ["t1"])], [((), ["t1"])]),
    "delegate-always-skipped": (lambda r: reply_session(r, "t2"), "s2", None),
    "batch-reship-after-crash": (lambda r: ingested(r, "hindsight"), ["t1", "t2"], ["t1", "t2", "t1", "t2"]),
    "rotate-before-end-recorded": (lambda r: ends(r, "s1"), [("s1", ("t1",))], []),
    "crash-forgets-commands": (lambda r: reply_session(r, "t3"), "s1", "s2"),
    "stop-drops-outbox-first": (lambda r: ingested(r, "hindsight"), ["t1", "t2"], ["t1"]),
    "reply-before-memory": (lambda r: ingested(r, "recorder"), ["t1", "t2"], ["t2"]),
    "new-ends-ended-session": (lambda r: count(r, "on_session_end", "s1"), 1, 2),
    "restart-keeps-old-policy": (lambda r: (reply_session(r, "t2"), count(r, "on_session_end", "s1")), ("s1", 0), ("s2", 1)),
    "default-policy-misreported": (lambda r: reply_session(r, "t2"), "s1", "s2"),
    "stop-notices-nothing": (lambda r: [x.kind for x in r if x.kind in ("on_session_end", "crash")],
                             ["on_session_end", "crash"], ["crash", "on_session_end"]),
    "route-ignores-platform": (lambda r: (reply_session(r, "t2"), reply_session(r, "t3")), ("s2", "s2"), ("s1", "s2")),
    "group-shares-one-session": (lambda r: (reply_session(r, "t2"), ends(r, "s1")), ("s2", [("s1", ("t1",))]),
                                 ("s1", [("s1", ("t1", "t2"))])),
    "lazy-chat-stops-the-watcher": (lambda r: ends(r, "s1"), [("s1", ("t1",))], []),
    "eager-chat-left-lazy": (lambda r: ends(r, "s1"), [("s1", ("t1",))], []),
    "replies-to-newest-chat": (lambda r: [(r.chat, r.turns) for r in r if r.kind == "reply"],
                               [("alice", ("t1",)), ("bob", ("t2",))], [("bob", ("t1",)), ("bob", ("t2",))]),
    "echoes-message": (lambda r: [(r.turns, r.d("answers")) for r in r if r.kind == "reply"],
                       [(("t1",), None)], [(("t1",), [])]),
    "end-replies-apart": (lambda r: [(r.turns, r.d("replies"), r.d("apart")) for r in r if r.kind == "on_session_end"],
                          [(("t1", "t2"), ["t1", "t2"], None)], [(("t1", "t2"), ["t1", "t2"], ["t1"])]),
    "delegate-synced-to-memory": (lambda r: ingested(r, "recorder"), ["t1"], ["t1", "t2"]),
    "answers-without-llm": (lambda r: (replied(r), count(r, "llm_request")), (["t1"], 1), (["t1"], 0)),
    "answers-before-the-llm": (lambda r: [(x.t - r[0].t) // 1000 for x in r if x.kind == "reply"], [2], [0]),
    "delegate-parent-is-first-session": (lambda r: final_parent(r, "s4"), "s3", "s1"),
    "stores-tags-only": (lambda r: (final_rows(r, "s1"), final_cut(r, "s1")),
                         ([["user", "t1", "visible"], ["assistant", "t1", "visible"]], None),
                         ([["user", None, "visible"], ["assistant", None, "visible"]], ["t1", "t1"])),
    "batch-pairs-wrong": (lambda r: [(x.turns, x.d("apart")) for x in r if x.kind == "ingest" and x.d("backend") == "hindsight"],
                          [(("t1", "t2"), None)], [(("t1", "t2"), ["t1", "t2"])]),
    "sync-turn-swapped": (lambda r: [(x.turns, x.d("swapped")) for x in r if x.kind == "sync_turn"],
                          [(("t1",), None)], [(("t1",), True)]),
    "flush-after-finalize": (lambda r: [x.kind for x in r if x.kind in ("on_session_end", "on_session_finalize")
                                        or (x.kind == "ingest" and x.d("backend") == "hindsight")],
                             ["ingest", "on_session_end", "on_session_finalize"],
                             ["on_session_end", "on_session_finalize", "ingest"]),
    "delegate-result-dropped": (replied, ["t1", "t2"], ["t1"]),
    "serves-newest-first": (lambda r: [r.turns for r in r if r.kind == "llm_request"], [("t1",), ("t2",), ("t3",)],
                            [("t1",), ("t3",), ("t2",)]),
    "context-kept-across-new": (lambda r: [(r.turns, r.d("context")) for r in r if r.kind == "llm_request"],
                                [(("t1",), None), (("t2",), None)], [(("t1",), None), (("t2",), "t1")]),
    "memory-gets-tags-only": (lambda r: [(r.turns, r.d("replies"), r.d("cut")) for r in r if r.kind == "ingest"
                                         and r.d("backend") == "hindsight"],
                              [(("t1",), ["t1"], None)], [((), ["t1"], ["t1"])]),
    "end-carries-tags-only": (lambda r: [(r.turns, r.d("cut")) for r in r if r.kind == "on_session_end"],
                              [(("t1",), None)], [((), ["t1"])]),
    "stop-takes-first-busy-chat": (replied, ["t1"], ["t2"]),
    "queued-clock-at-admission": (lambda r: (reply_session(r, "t3"), ends(r, "s1")), ("s2", [("s1", ("t1", "t2"))]),
                                  ("s1", [("s1", ("t1", "t2", "t3"))])),
    "queued-judged-at-admission": (lambda r: (reply_session(r, "t3"), ends(r, "s1")), ("s1", [("s1", ("t1", "t2", "t3"))]),
                                   ("s2", [("s1", ("t1", "t2"))])),
    "delegate-child-keyed-by-chat": (lambda r: reply_session(r, "t4"), "s4", "s2"),
    "delegate-result-to-newest-chat": (lambda r: [(r.chat, r.turns) for r in r if r.kind == "reply"],
                                       [("alice", ("t1",)), ("alice", ("t2",)), ("bob", ("t3",))],
                                       [("alice", ("t1",)), ("bob", ("t2",)), ("bob", ("t3",))]),
    "end-carries-delegate-turns": (lambda r: ends(r, "s1"), [("s1", ("t1",))], [("s1", ("t1", "t2"))]),
    "retry-merges-calls": (lambda r: [(x.turns, x.t % 3_600_000) for x in r if x.kind == "ingest" and x.d("backend") == "hindsight"],
                           [(("t1",), 92_000), (("t2",), 122_000)], [(("t1", "t2"), 122_000)]),
    "end-keeps-agent": (lambda r: [x.session for x in r if x.kind == "note" and x.d("what") == "heal"], [], ["s1"]),
    "finalizes-delegate-child": (lambda r: [x.session for x in r if x.kind == "on_session_finalize"], ["s1", "s3"],
                                 ["s1", "s2", "s3"]),
    "resets-delegate-child": (lambda r: [x.session for x in r if x.kind == "on_session_reset"], ["s3"], ["s2", "s3"]),
    "reset-names-ended-session": (lambda r: [x.session for x in r if x.kind == "on_session_reset"], ["s2"], ["s1"]),
    "anchors-at-admission": (lambda r: reply_session(r, "t3"), "s3", "s2"),
    "reset-command-ignored": (lambda r: (ends(r, "s1"), reply_session(r, "t2")), ([("s1", ("t1",))], "s2"), ([], "s1")),
    "stop-drops-queued": (replied, ["t2"], []),
    "resume-keeps-clocks": (lambda r: reply_session(r, "t3"), "s1", "s3"),
    "successor-begins-at-new": (lambda r: reply_session(r, "t3"), "s2", "s3"),
    "empty-session-gets-no-end": (lambda r: (ends(r, "s1"), count(r, "on_session_finalize", "s1")),
                                  ([("s1", ())], 1), ([], 1)),
    "delegate-opens-session": (lambda r: reply_session(r, "t3"), "s1", "s2"),
    "command-notices-nothing": (lambda r: reply_session(r, "t2"), "s1", "s2"),
    "daily-day-from-utc": (lambda r: reply_session(r, "t2"), "s2", "s1"),
    "tick-skips-when-any-busy": (lambda r: [(x.session, x.t % 3_600_000) for x in r if x.kind == "on_session_end"][:1],
                                 [("s1", 1_860_000)], [("s1", 2_340_000)]),
    "stop-kills-delegates": (replied, ["t1", "t2"], ["t1"]),
    "cap-excludes-children": (lambda r: [(x.session, x.d("why")) for x in r if x.kind == "note" and x.d("what") == "evict"],
                              [("s1", "lru_cap"), ("s2", "idle_ttl")], [("s1", "idle_ttl"), ("s2", "idle_ttl")]),
    "restart-config-reset-only": (lambda r: reply_session(r, "t2"), "s2", "s1"),
    "plain-restart-reverts-config": (lambda r: (ends(r, "s1"), reply_session(r, "t2")), ([("s1", ("t1",))], "s2"),
                                     ([], "s1")),
    "resume-global-last": (lambda r: reply_session(r, "t4"), "s1", "s3"),
    "resume-restores-deleted": (lambda r: stored(r, "s1"), ["t3"], ["t1", "t3"]),
    "sigterm-skips-children": (lambda r: stored(r, "s2", label="sigterm"), ["t2"], None),
    "timer-rearm-misses-resume": (lambda r: ends(r, "s1"), [("s1", ("t1",)), ("s1", ("t1",))], [("s1", ("t1",))]),
    "idle-wall-clock": (lambda r: reply_session(r, "t2"), "s1", "s2"),
    "child-parent-from-cache": (lambda r: final_parent(r, "s2"), "s1", None),
    "delegate-result-frees-chat": (lambda r: sequence(r, ("sync_turn", "on_session_end"), ("s1",)),
                                   ["sync_turn s1", "sync_turn s1", "on_session_end s1"],
                                   ["sync_turn s1", "on_session_end s1", "sync_turn s1"]),
    "group-turns-serialized": (lambda r: [(x.turns, x.t % 3_600_000 // 60_000) for x in r if x.kind == "reply"],
                               [(("t1",), 3), (("t2",), 4), (("t3",), 8)], [(("t1",), 3), (("t2",), 6), (("t3",), 9)]),
    "session-id-reused-after-delete": (lambda r: reply_session(r, "t3"), "s3", "s1"),
    "muted-skips-rotation": (lambda r: (reply_session(r, "t2"), stored(r, "s2", "visibility")),
                             ("s2", ["hidden", "hidden", "visible", "visible"]), ("s1", None)),
    "route-ignores-thread": (lambda r: reply_session(r, "t2"), "s2", "s1"),
    "sweep-keeps-owed": (lambda r: [(x.session, x.d("why"), x.t % 3_600_000 // 1000) for x in r
                                    if x.kind == "note" and x.d("what") == "evict"],
                         [("s1", "idle_ttl", 720)], [("s1", "idle_ttl", 1320)]),
    "slow-calls-keyed-by-session": (lambda r: [(x.turns, x.t % 3_600_000 // 1000) for x in r
                                               if x.kind == "ingest" and x.d("backend") == "hindsight"],
                                    [(("t1",), 92), (("t2",), 122)], [(("t1", "t2"), 122)]),
    "warm-restart-revives-deleted": (lambda r: stored(r, "s1"), None, ["t1", "t2"]),
    "sigterm-skips-busy": (lambda r: stored(r, "s1", label="sigterm"), ["t1"], None),
    "stop-notices-first": (lambda r: reply_session(r, "t2"), "s1", "s2"),
    "group-delegate-first-user": (lambda r: final_parent(r, "s3"), "s2", "s1"),
}


def test_every_variant_has_a_case_and_a_scenario() -> None:
    assert sorted(CASES) == sorted(VARIANTS)
    assert sorted(p.stem for p in SCENARIOS.glob("*.yaml")) == sorted(VARIANTS)


@pytest.mark.parametrize("name", list(VARIANTS))
def test_variant_differs_where_its_report_says(name: str) -> None:
    scenario = load_file(SCENARIOS / f"{name}.yaml")
    assert scenario.catches == (name,)
    observe, want_reference, want_variant = CASES[name]
    clean = run_scenario(scenario, ReferenceGateway(), "reference", check=False)
    broken = run_scenario(scenario, make(name), f"reference:{name}", check=False)
    assert clean.failure is None and broken.failure is None
    assert observe(clean.records) == want_reference
    assert observe(broken.records) == want_variant


@pytest.mark.parametrize("name", list(VARIANTS))
def test_variant_puts_back_one_method(name: str) -> None:
    """One bug each: a direct subclass of the reference that overrides one method (a batching
    provider variant comes in through `make_provider` and overrides one method itself)."""
    cls = VARIANTS[name]
    assert cls.__bases__ == (ReferenceGateway,)
    own = [attr for attr, value in vars(cls).items() if callable(value)]
    assert len(own) == 1 and hasattr(ReferenceGateway, own[0])
    if own == ["make_provider"]:
        gateway = make(name)
        gateway.h = SimpleNamespace(backends={"p": None})  # type: ignore[assignment]
        gateway.store = SimpleNamespace(ingested=lambda provider: set())  # type: ignore[assignment]
        provider = gateway.make_provider(ProviderSpec("p", 3))
        assert type(provider).__bases__ == (BatchingProvider,)
        assert len([a for a, v in vars(type(provider)).items() if callable(v)]) == 1


def test_registry_resolves_variants() -> None:
    assert type(reference()) is ReferenceGateway
    assert type(reference("sync-after-end")) is VARIANTS["sync-after-end"]
    assert type(variant("heal-replays-tail-only")) is VARIANTS["heal-replays-tail-only"]
    with pytest.raises(KeyError, match="unknown variant"):
        make("no-such-bug")
