"""The regression catalog is well formed: every file loads, says where it came from and what
breaks, and names only bug-zoo variants that exist."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from conformance.harness.suite import catalog_paths
from sim.loader import load_file

# The bug zoo's variant names (reference_impl.variants), kept here so this test stands alone.
KNOWN_VARIANTS = frozenset({
    "finalizes-delegate-child",
    "resets-delegate-child",
    "idle-sweep-only-none",
    "retry-merges-calls",
    "end-keeps-agent",
    "anchors-at-admission",
    "resume-keeps-clocks",
    "successor-begins-at-new",
    "empty-session-gets-no-end",
    "delegate-opens-session",
    "command-notices-nothing",
    "delegate-parent-is-first-session",
    "answers-before-the-llm",
    "stores-tags-only",
    "stop-ignored",
    "abandoned-turn-kept",
    "crash-keeps-admitted-row",
    "delegate-child-keyed-by-chat",
    "delegate-result-to-newest-chat",
    "end-carries-delegate-turns",
    "busy-flag-stuck",
    "crash-keeps-memory",
    "memory-ships-reply-twice",
    "delegate-always-skipped",
    "expiry-skips-end-without-agent",
    "idle-expiry-no-finalize",
    "lru-evict-drops-unflushed",
    "idle-sweep-evicts-before-daily-expiry",
    "idle-sweep-never-reaps-none",
    "evict-commit-then-expiry-double-end",
    "batch-no-flush-on-session-end",
    "batch-lost-on-shutdown",
    "batch-flush-reships-retained",
    "end-after-switch",
    "switch-names-stale-previous",
    "deleted-row-drops-turns",
    "heal-replays-tail-only",
    "heal-on-any-fk-duplicates",
    "heal-muted-hides-history",
    "heal-forgets-pending-replay",
    "answer-refused-after-row-deleted",
    "orphan-child-never-recreated",
    "heal-drops-child-parent",
    "evict-drops-deleted-transcript",
    "parent-resurrected-for-child",
    "reset-mid-turn",
    "command-moves-idle-clock",
    "daily-boundary-in-utc",
    "message-reset-fires-no-hooks",
    "shutdown-ends-sessions",
    "sync-after-end",
    "never-replies",
    "drops-replies",
    "answers-first-turn-only",
    "batch-reship-after-crash",
    "rotate-before-end-recorded",
    "crash-forgets-commands",
    "new-ends-ended-session",
    "restart-keeps-old-policy",
    "default-policy-misreported",
    "stop-notices-nothing",
    "group-shares-one-session",
    "route-ignores-platform",
    "lazy-chat-stops-the-watcher",
    "eager-chat-left-lazy",
    "stop-takes-first-busy-chat",
    "queued-clock-at-admission",
    "queued-judged-at-admission",
    "retry-drops-newer-turns",
    "watcher-ends-busy-session",
    "resume-refused-mid-turn",
    "stop-drops-outbox-first",
    "reply-before-memory",
    "reset-command-ignored",
    "stop-drops-queued",
    "daily-day-from-utc",
    "tick-skips-when-any-busy",
    "stop-kills-delegates",
    "cap-excludes-children",
    "restart-config-reset-only",
    "plain-restart-reverts-config",
    "resume-global-last",
    "resume-restores-deleted",
    "sigterm-skips-children",
    "timer-rearm-misses-resume",
    "idle-wall-clock",
    "child-parent-from-cache",
    "delegate-result-frees-chat",
    "group-turns-serialized",
    "session-id-reused-after-delete",
    "muted-skips-rotation",
    "route-ignores-thread",
    "sweep-keeps-owed",
    "slow-calls-keyed-by-session",
    "warm-restart-revives-deleted",
    "sigterm-skips-busy",
    "stop-notices-first",
    "group-delegate-first-user",
})
# Scenarios that need more events than a small one, and why.
LONG = {"83-crash-inside-long-write": "a write longer than one statement takes (reference_impl.tables._CHUNK "
                                      "rows) needs 33 turns in one session"}
FILE_NAME = re.compile(r"\d{2,3}-[a-z0-9]+(-[a-z0-9]+)*\.yaml")
PATHS = catalog_paths()


def test_catalog_has_at_least_32_scenarios() -> None:
    assert len(PATHS) >= 32


def test_catalog_numbers_are_unique() -> None:
    numbers = [p.name.split("-", 1)[0] for p in PATHS]
    assert len(numbers) == len(set(numbers)), numbers


def test_every_variant_has_a_scenario_that_exists_to_catch_it() -> None:
    named = {variant for path in PATHS for variant in load_file(path).catches}
    assert sorted(KNOWN_VARIANTS - named) == []


@pytest.mark.parametrize("path", PATHS, ids=[p.stem for p in PATHS])
def test_catalog_file_is_well_formed(path: Path) -> None:
    scenario = load_file(path)
    assert FILE_NAME.fullmatch(path.name), f"{path.name}: expected NN-short-slug.yaml"
    assert scenario.name == path.stem, "name: is the file name without .yaml"
    header = scenario.header.splitlines()
    assert any(line.startswith("source: ") for line in header), "header comment lacks a 'source:' line"
    assert sum(line.startswith("symptom: ") for line in header) == 1, "header comment needs one 'symptom:' line"
    assert set(scenario.catches) <= KNOWN_VARIANTS, f"unknown variants: {sorted(set(scenario.catches) - KNOWN_VARIANTS)}"
    most = 40 if path.stem in LONG else 15
    assert 3 <= len(scenario.events) <= most, f"{len(scenario.events)} events; keep a catalog scenario small"


def test_the_catalog_is_in_its_numbers_order() -> None:
    """Scenario 100 comes after 99, not after 10 as its name sorts."""
    from conformance.harness.suite import _numbered

    names = ["10-a.yaml", "100-b.yaml", "99-c.yaml", "09-d.yaml"]
    assert [n for n in sorted(names, key=lambda n: _numbered(Path(n)))] == ["09-d.yaml", "10-a.yaml", "99-c.yaml", "100-b.yaml"]
    assert [p.name for p in PATHS] == sorted((p.name for p in PATHS), key=lambda n: int(n.split("-", 1)[0]))
