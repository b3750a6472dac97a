"""A long log judged in parts (`conformance.checks.parts`) gets the verdicts the whole log gets.

The split joins every chat, session and turn a record names; each part's model is judged by
every check, I3 and I7 gather from every part and judge once. These tests judge logs both
ways (forced: `judge(records, in_parts=True)` makes every component its own part) and
compare: the catalog on the reference and on the zoo variants whose violations span chats,
generated seeds, and spilled logs read back from their file."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import pytest

from conformance.checks import CHECKS, judge, parts
from conformance.harness.registry import resolve
from conformance.harness.runner import run_scenario
from conformance.harness.suite import catalog_paths
from conformance.harness.verdict import CHECKER_ERROR, Verdict
from conformance.observations import Obs
from sim.generate import scenario_for_seed
from sim.loader import load_file, load_text

ROOT = Path(__file__).resolve().parent.parent

# Variants whose violations name turns of several chats, sessions deleted and healed, replies
# sent to another chat, a group sharing one session: what a split could cut wrongly.
VARIANTS = ["memory-ships-reply-twice", "batch-lost-on-shutdown", "batch-no-flush-on-session-end",
            "lru-evict-drops-unflushed", "replies-to-newest-chat", "group-shares-one-session", "deleted-row-drops-turns",
            "orphan-child-never-recreated", "parent-resurrected-for-child", "idle-sweep-never-reaps-none",
            "busy-flag-stuck", "shutdown-ends-sessions", "sync-after-end"]


def _norm(verdict: Verdict) -> tuple[object, ...]:
    """A verdict as compared: a log judged in parts lists its violations in log order."""
    return (verdict.check, verdict.status, verdict.examined, verdict.reason if verdict.status != "pass" else "",
            tuple(sorted((v.records, v.message, v.t, v.session, v.turns) for v in verdict.violations)))


def _same(records: list[Obs] | object, whole: dict[str, Verdict], parted: dict[str, Verdict]) -> None:
    assert list(whole) == list(parted)
    for check in whole:
        assert _norm(parted[check]) == _norm(whole[check]), check


@cache
def _catalog() -> list:
    return [load_file(path) for path in catalog_paths()]


@pytest.mark.parametrize("gateway", ["reference", *(f"reference:{name}" for name in VARIANTS)])
def test_the_catalog_judged_in_parts_gets_the_whole_logs_verdicts(gateway: str) -> None:
    make = resolve(gateway)
    split = 0
    for scenario in _catalog():
        records = run_scenario(scenario, make(), gateway, check=False).records
        split += parts.split_log(records, 1) is not None
        _same(records, judge(records, in_parts=False), judge(records, in_parts=True))
    assert split >= (10 if gateway == "reference" else 3)  # scenarios of several chats were judged in parts (16 on the reference)


@pytest.mark.parametrize("block", range(4))
def test_generated_seeds_judged_in_parts_get_the_whole_logs_verdicts(block: int) -> None:
    make = resolve("reference")
    split = 0
    for seed in range(block * 25, block * 25 + 25):
        records = run_scenario(scenario_for_seed(seed), make(), "reference", check=False).records
        split += parts.split_log(records, 1) is not None
        _same(records, judge(records, in_parts=False), judge(records, in_parts=True))
    assert split >= 15  # most seeds have several chats


def test_a_spilled_log_judged_in_parts_gets_the_in_memory_logs_verdicts() -> None:
    make = resolve("reference:memory-ships-reply-twice")
    for scenario in _catalog()[:24]:
        kept = run_scenario(scenario, make(), "reference:memory-ships-reply-twice")
        spilled = run_scenario(scenario, make(), "reference:memory-ships-reply-twice", check=False, spill_at=40)
        assert spilled.log_text() == kept.log_text()
        _same(kept.records, kept.verdicts, judge(spilled.records, in_parts=True))


def test_a_long_spilled_log_is_judged_in_parts_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    scenario = load_file(next(p for p in catalog_paths() if p.name.startswith("37-")))  # many chats
    kept = run_scenario(scenario, resolve("reference")(), "reference")
    spilled = run_scenario(scenario, resolve("reference")(), "reference", check=False, spill_at=40)
    monkeypatch.setattr(parts, "PART_RECORDS", 30)
    monkeypatch.setattr(parts, "WHOLE_RECORDS", len(spilled.records) - 1)
    phases: list[str] = []
    verdicts = judge(spilled.records, phase=phases.append)
    assert phases[0] == "split" and "shared" in phases and phases[-1] == "gathered"
    assert sum(name.startswith("part ") for name in phases) >= 2
    _same(kept.records, kept.verdicts, verdicts)
    assert judge(kept.records, phase=phases.append) == kept.verdicts  # a log in memory is judged whole
    monkeypatch.setattr(parts, "WHOLE_RECORDS", len(spilled.records))
    phases.clear()
    assert judge(spilled.records, phase=phases.append) == kept.verdicts  # a spilled log the memory bound allows, too
    assert phases[0] == "model", phases


_TWO = """
name: two-chats
start: 2026-03-02T09:00
chats:
  alice: {}
  bob: {}
config: {reset: {mode: idle, idle_minutes: 30}}
events:
  - message: alice
  - message: bob
    after: 1m
  - advance: 40m
"""


def _two_chats() -> list[Obs]:
    return list(run_scenario(load_text(_TWO), resolve("reference")(), "reference", check=False).records)


def test_two_chats_are_two_parts_each_with_its_own_records() -> None:
    records = _two_chats()
    split = parts.split_log(records, 1)
    assert split is not None and split.parts == 2
    assert split.chats == [{"alice"}, {"bob"}]
    for number, chat in enumerate(("alice", "bob")):
        part = split.part(number)
        walked = [r for _index, r in part.walk(frozenset())]
        assert {r.chat for r in walked if r.chat} == {chat}
        assert list(part[0].detail["chats"]) == [chat]
        final = part[max(i for i, r in enumerate(records) if r.kind == "durable")]
        assert set(final.detail["routing"]) == {chat}
        sessions = {r.session for r in walked if r.kind == "llm_request"}
        assert set(final.detail["sessions"]) == sessions
        assert part.size == len(walked)
        assert all(r.kind in parts.GLOBAL_KINDS for r in walked if not (r.chat or r.session or r.turns))


def test_a_reply_sent_to_the_other_chat_joins_the_two() -> None:
    records = _two_chats()
    at = next(i for i, r in enumerate(records) if r.kind == "reply" and r.chat == "alice")
    records[at] = records[at]._replace(chat="bob")
    assert parts.split_log(records, 1) is None  # one component: judged whole
    _same(records, judge(records, in_parts=False), judge(records, in_parts=True))


def test_a_turn_ingested_under_the_other_chats_session_joins_the_two() -> None:
    records = _two_chats()
    bob_session = next(r.session for r in records if r.kind == "llm_request" and r.chat == "bob")
    at = next(i for i, r in enumerate(records) if r.kind == "ingest" and r.turns == ("t1",))
    records[at] = records[at]._replace(session=bob_session)
    assert parts.split_log(records, 1) is None


def test_a_log_naming_a_kind_the_split_does_not_know_is_judged_whole() -> None:
    records = _two_chats()
    records.insert(3, Obs(records[3].t, records[3].step, "mystery", "alice"))
    assert parts.split_log(records, 1) is None


def test_a_check_that_raises_on_a_part_is_a_checker_error_and_the_others_judge(monkeypatch: pytest.MonkeyPatch) -> None:
    records = _two_chats()

    def broken(m: object) -> Verdict:
        raise RuntimeError("boom")

    monkeypatch.setitem(CHECKS, "I1", broken)
    verdicts = judge(records, in_parts=True)
    assert verdicts["I1"].status == CHECKER_ERROR and "boom" in verdicts["I1"].reason
    assert all(v.status == "pass" for check, v in verdicts.items() if check != "I1")


def test_a_gateway_failure_is_every_checks_error_in_parts_too() -> None:
    records = _two_chats()
    records.insert(5, Obs(records[5].t, 3, "error", detail={"failure": "error", "event": "message", "message": "boom"}))
    verdicts = judge(records, in_parts=True)
    assert {v.status for v in verdicts.values()} == {"error"}
    assert verdicts == judge(records, in_parts=False)


def test_every_kind_the_harness_logs_is_known_to_the_split() -> None:
    """A new record kind must be classified: naming nothing (every part reads it) or naming
    chats, sessions or turns (with the detail keys that name more)."""
    logged: set[str] = set()
    for path in (ROOT / "conformance").rglob("*.py"):
        logged |= set(re.findall(r"""log\.add(?:_detail)?\(\s*"([a-z_]+)\"""", path.read_text()))
    assert logged, "no log.add call found"
    assert not parts.GLOBAL_KINDS & set(parts.NAMING_KINDS)
    assert logged <= parts.GLOBAL_KINDS | set(parts.NAMING_KINDS), logged - parts.GLOBAL_KINDS - set(parts.NAMING_KINDS)
    assert all(len(keys) <= 1 for keys in parts.NAMING_KINDS.values())  # split_log reads one detail key a kind


def test_the_resource_samples_are_read_by_the_shared_model_alone_unless_a_session_is_deleted() -> None:
    """A steady run logs two samples an event: only I7 reads them (on the shared model), unless
    a deletion asks what became of the deleted session's agent; then every part reads them."""
    records = _two_chats()
    spilled = run_scenario(load_text(_TWO), resolve("reference")(), "reference", check=False, spill_at=4).records
    samples = [i for i, r in enumerate(records) if r.kind == "resources"]
    assert samples
    for log in (records, spilled):
        split = parts.split_log(log, 1)
        assert split is not None and {split.labels[i] for i in samples} == {parts.SHARED}
        assert all(r.kind != "resources" for _index, r in split.part(0).walk(frozenset()))
        assert [i for i, r in split.shared().walk(frozenset()) if r.kind == "resources"] == samples
    alice = next(r for r in records if r.kind == "llm_request" and r.chat == "alice")
    deleted = [*records[:-2], Obs(records[-3].t, records[-3].step, "delete_session", "alice", alice.session), *records[-2:]]
    split = parts.split_log(deleted, 1)
    assert split is not None and {split.labels[i] for i, r in enumerate(deleted) if r.kind == "resources"} == {parts.GLOBAL}
    _same(deleted, judge(deleted, in_parts=False), judge(deleted, in_parts=True))
