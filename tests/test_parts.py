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
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

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
            "idle-sweep-only-none", "busy-flag-stuck", "shutdown-ends-sessions", "sync-after-end"]


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


def _components_by_hand(records: list[Obs]) -> list[int]:
    """Each record's component, -1 for one naming nothing: the split's joins done the plain way
    (a dict union-find, no caches, no fast paths), the oracle of the split's own."""
    up: dict[tuple[str, str], tuple[str, str]] = {}

    def find(x: tuple[str, str]) -> tuple[str, str]:
        while up.setdefault(x, x) != x:
            x = up[x]
        return x

    def union(names: list[tuple[str, str]]) -> None:
        for other in names[1:]:
            up[find(other)] = find(names[0])

    first: list[tuple[str, str] | None] = []
    for chat in records[0].detail.get("chats") or {}:
        find(("n", chat))
    for r in records:
        keys = parts.NAMING_KINDS.get(r.kind)
        if keys is None:
            if r.kind == "durable":
                for sid, body in (r.detail.get("sessions") or {}).items():
                    parent = body.get("parent")
                    union([("n", sid), *([("n", parent)] if isinstance(parent, str) else []),
                           *(("t", row[1]) for row in body.get("rows") or () if isinstance(row[1], str))])
                for chat, sid in (r.detail.get("routing") or {}).items():
                    union([("n", chat), ("n", sid)])
            first.append(None)
            continue
        names = [("n", n) for n in (r.chat, r.session) if n is not None] + [("t", t) for t in r.turns]
        value = r.detail.get(keys[0]) if keys else None
        space = "n" if r.kind in ("on_session_switch", "delete_session") else "t"
        names += [(space, n) for n in ([value] if isinstance(value, str) else value or []) if isinstance(n, str)]
        union(names)
        first.append(names[0] if names else None)
    roots: dict[tuple[str, str], int] = {}
    return [-1 if name is None else roots.setdefault(find(name), len(roots)) for name in first]


def _same_components(records: list[Obs], split: parts.LogSplit | None) -> None:
    """The split's parts against `_components_by_hand`, each component its own part: every
    record of one component in one part, no two components in one part."""
    expected = _components_by_hand(records)
    if split is None:
        assert len({component for component in expected if component >= 0}) <= 1
        return
    by_component: dict[int, set[int]] = {}
    for label, component in zip(split.labels, expected, strict=True):
        if component >= 0:
            by_component.setdefault(component, set()).add(label)
    assert all(len(labels) == 1 for labels in by_component.values())
    labels = [next(iter(labels)) for labels in by_component.values()]
    assert len(set(labels)) == len(labels)


@pytest.mark.parametrize("source", ["catalog", "seeds"])
def test_the_splits_components_are_those_a_plain_union_find_finds(source: str) -> None:
    """The split's inlined joins and turn cache lose and add nothing, on the catalog's and
    generated seeds' logs as the reference writes them."""
    scenarios = _catalog() if source == "catalog" else [scenario_for_seed(seed, "default") for seed in range(40)]
    for scenario in scenarios:
        records = list(run_scenario(scenario, resolve("reference")(), "reference", check=False).records)
        _same_components(records, parts.split_log(records, 1))


_THREE = _TWO.replace("  bob: {}\n", "  bob: {}\n  carol: {}\n").replace(
    "  - advance: 40m\n", "  - message: carol\n    after: 1m\n  - message: alice\n    after: 1m\n  - advance: 40m\n")


@cache
def _three_chats() -> tuple[Obs, ...]:
    return tuple(run_scenario(load_text(_THREE), resolve("reference")(), "reference", check=False).records)


@settings(max_examples=300, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_the_split_joins_whatever_a_gateways_records_name_together(data: st.DataObject) -> None:
    """Records rewritten as a gateway could write them (a chat, a session, a turn id or a named
    detail entry of another chat's, in either namespace): the split's parts are still the plain
    union-find's components."""
    records = list(_three_chats())
    naming = [index for index, r in enumerate(records) if r.kind in parts.NAMING_KINDS]
    snapshots = [index for index, r in enumerate(records) if r.kind == "durable" and r.detail["sessions"]]
    pool = sorted({name for r in records for name in (r.chat, r.session, *r.turns) if name is not None})
    for _ in range(data.draw(st.integers(1, 4))):
        field = data.draw(st.sampled_from(["chat", "session", "turns", "detail", "row", "parent", "routing"]))
        at = data.draw(st.sampled_from(snapshots if field in ("row", "parent", "routing") else naming))
        r, name = records[at], data.draw(st.sampled_from(pool))
        if field in ("row", "parent", "routing"):  # a stored row's turn, a session's parent or a route: another chat's
            sessions = {sid: dict(body) for sid, body in r.detail["sessions"].items()}
            sid = data.draw(st.sampled_from(sorted(sessions)))
            if field == "row":
                sessions[sid]["rows"] = [*sessions[sid]["rows"], ["user", name, "visible"]]
            elif field == "parent":
                sessions[sid]["parent"] = name
            routing = {**r.detail["routing"], **({name: sid} if field == "routing" else {})}
            records[at] = r._replace(detail={**r.detail, "sessions": sessions, "routing": routing})
            continue
        if field == "chat":
            r = r._replace(chat=name)
        elif field == "session":
            r = r._replace(session=name)
        elif field == "turns":
            r = r._replace(turns=(*r.turns, name))
        elif keys := parts.NAMING_KINDS[r.kind]:
            value = r.detail.get(keys[0])
            listed = [value] if isinstance(value, str) else list(value) if isinstance(value, list | tuple) else []
            r = r._replace(detail={**r.detail, keys[0]: [*listed, name]})
        records[at] = r
    _same_components(records, parts.split_log(records, 1))
