"""The observation log's two economies: `resources` records as deltas, and a log past its
threshold kept in a temporary file. Neither may change a verdict or a byte of the log."""

from __future__ import annotations

import enum
import json
import pickle
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conformance.checks.deletions import _cache_moves
from conformance.harness import spill
from conformance.harness.runner import RunResult, run_scenario
from conformance.harness.spill import ObservationLog, SpilledRecords
from conformance.harness.suite import catalog_paths
from conformance.observations import CacheReplay, Obs, Resources, ResourcesDeltas, log_text
from reference_impl.registry import reference
from reference_impl.variants import VARIANTS
from sim.loader import load_file
from sim.scenario import Scenario

CATALOG = [load_file(p) for p in catalog_paths()]
ZOO = Path(__file__).parent / "zoo_scenarios"


def changes(before: Resources | None, after: Resources) -> dict[str, Any]:
    """The detail of `after`'s record when the one before it was `before`, as the log holds it."""
    deltas = ResourcesDeltas()
    if before is not None:
        deltas.detail(before)
    return json.loads(json.dumps(deltas.detail(after)))


def test_resources_records_state_what_changed() -> None:
    """Which agents came and went, and what runs: not the gateway's order or its busy flags."""
    first = Resources((("s1", False), ("s2", False)), 1)
    assert changes(None, first) == {"cached": [["s1", False], ["s2", False]], "running": 1}
    touched = Resources((("s2", False), ("s1", True)), 1)  # LRU: s1 moved to the end, busy
    assert changes(first, touched) is None
    done = Resources((("s2", False), ("s1", False)), 2)
    assert changes(touched, done) == {"running": 2}
    evicted = Resources((("s1", False), ("s3", True)), 2)
    assert changes(done, evicted) == {"drop": ["s2"], "add": [["s3", True]]}
    many = Resources((("s5", False), ("s1", True), ("s4", True)), 2)  # each list sorted by session
    assert changes(evicted, many) == {"drop": ["s3"], "add": [["s4", True], ["s5", False]]}
    twice = Resources((("s1", False), ("s1", True)), 2)  # a session listed twice: stated whole
    assert changes(many, twice) == {"cached": [["s1", False], ["s1", True]], "running": 2}
    assert changes(twice, evicted) == {"cached": [["s1", False], ["s3", True]], "running": 2}
    assert changes(evicted, many) == {"drop": ["s3"], "add": [["s4", True], ["s5", False]]}


def test_replay_rebuilds_every_sample() -> None:
    """The records replayed give each sample's agents (a session listed twice: its listing)
    and what runs, whatever moved or flipped in between."""
    rng = random.Random(5)
    names = [f"s{i}" for i in range(6)]
    for _trial in range(2000):
        deltas, replay, cached = ResourcesDeltas(), CacheReplay(), []
        for step in range(20):
            roll = rng.random()
            if roll < 0.3 and cached:  # touched: to the end, busy or not
                sid, _busy = cached.pop(rng.randrange(len(cached)))
                cached.append((sid, rng.random() < 0.5))
            elif roll < 0.5:
                sid = rng.choice(names)
                if sid not in dict(cached):
                    cached.append((sid, rng.random() < 0.5))
            elif roll < 0.65 and cached:
                cached.pop(rng.randrange(len(cached)))
            elif roll < 0.8 and cached:
                k = rng.randrange(len(cached))
                cached[k] = (cached[k][0], not cached[k][1])
            elif roll < 0.85:
                rng.shuffle(cached)
            elif roll < 0.88:
                cached.append((rng.choice(names), rng.random() < 0.5))  # perhaps a repeat
            after = Resources(tuple(cached), rng.randrange(3))
            detail = deltas.detail(after)
            if step == 0:
                assert detail == after.to_detail()
            if detail is not None:
                replay.apply(json.loads(json.dumps(detail)))
            said = replay.resources()
            assert replay.running == after.running
            if len(dict(after.cached)) != len(after.cached):
                assert said == after
            else:
                assert sorted(sid for sid, _busy in said.cached) == sorted(dict(after.cached))
                assert detail is None or "cached" in detail or set(detail) <= {"drop", "add", "running"}


class _Samples:
    """A log of `resources` records, as `deletions._cache_moves` reads it (`RunModel.of`)."""

    def __init__(self, records: list[Obs]) -> None:
        self.records = records

    def of(self, kind: str) -> Iterator[tuple[int, Obs]]:
        return ((index, r) for index, r in enumerate(self.records) if r.kind == kind)


def test_deletions_follow_the_cache_as_replayed() -> None:
    """The deletions' pass over the samples (agents in and out of the cache, for the sessions a
    deletion names) agrees with `CacheReplay` on any valid change, not only the runner's diffs."""
    rng = random.Random(11)
    names = [f"s{i}" for i in range(5)]
    for _trial in range(1000):
        details: list[dict[str, Any]] = []
        for _step in range(12):
            if rng.random() < 0.15:
                details.append({"cached": [[rng.choice(names), rng.random() < 0.5] for _ in range(rng.randrange(4))]})
                continue
            detail: dict[str, Any] = {key: rng.sample(names, rng.randrange(1, 3))
                                      for key in ("drop", "busy", "idle") if rng.random() < 0.4}
            if rng.random() < 0.5:
                detail["add"] = [[rng.choice(names), rng.random() < 0.5] for _ in range(rng.randrange(1, 3))]
            details.append(detail)
        wanted = set(rng.sample(names, 2))
        records = [Obs(10 * k, k, "resources" if k % 3 else "note", detail=d) for k, d in enumerate(details)]
        expected: dict[str, list[tuple[int, int, bool]]] = {}
        replay, inside = CacheReplay(), set()
        for index, r in enumerate(records):
            if r.kind == "resources":
                replay.apply(r.detail)
                now = wanted & set(replay.cached)
                for sid in inside ^ now:
                    expected.setdefault(sid, []).append((index, r.t, sid in now))
                inside = now
        assert _cache_moves(_Samples(records), wanted) == expected  # type: ignore[arg-type]


def test_spilled_records_read_back() -> None:
    now = iter(range(100, 10_000))
    log = ObservationLog(lambda: next(now), spill_at=3)
    for n in range(10):
        log.add("note", chat=f"c{n}", turns=(f"t{n}",), what="é" * n)
    records = log.records
    assert isinstance(records, SpilledRecords) and log.spilled and len(records) == 10
    plain = [Obs(100 + n, 0, "note", f"c{n}", None, (f"t{n}",), {"what": "é" * n}) for n in range(10)]
    assert list(records) == list(records) == plain  # iterable again and again
    assert records[0] == plain[0] and records[-1] == plain[-1] and records[4] == plain[4]
    assert records[2:5] == plain[2:5] and list(reversed(records)) == plain[::-1]
    assert log_text(records) == "".join(r.to_json() + "\n" for r in plain)
    assert pickle.loads(pickle.dumps(records)) == plain
    log.add("note", what="later")
    assert len(log.records) == 11 and log.records[-1].d("what") == "later"
    with pytest.raises(IndexError):
        records[11]
    assert list(records.walk(frozenset({"note"}))) == [Obs(0, 0, "note")] * 11
    assert list(records.walk(frozenset())) == list(records)
    assert [r.d("what") for r in records.pick([3, 10])] == ["é" * 3, "later"]


class Colour(enum.StrEnum):
    RED = "red"


def test_spilled_values_marshal_cannot_take_read_back_as_json() -> None:
    log = ObservationLog(lambda: 0, spill_at=1)
    log.add("note", colour=Colour.RED, when=(1, 2))
    log.add("note")
    (first, _second) = log.records
    assert first.detail == {"colour": "red", "when": [1, 2]} and type(first.d("colour")) is str
    assert log_text(log.records) == log_text([Obs(0, 0, "note", detail={"colour": Colour.RED, "when": (1, 2)}), Obs(0, 0, "note")])


def verdicts(result: RunResult) -> dict[str, str]:
    return {check: repr(v) for check, v in result.verdicts.items()}


@pytest.mark.parametrize("scenario", CATALOG, ids=lambda s: s.name)
def test_spilling_changes_no_byte_and_no_verdict(scenario: Scenario) -> None:
    kept = run_scenario(scenario, reference(), "reference", spill_at=None)
    spilled = run_scenario(scenario, reference(), "reference", spill_at=5)
    assert isinstance(spilled.records, SpilledRecords) and isinstance(kept.records, list)
    assert spilled.log_text() == kept.log_text()
    assert verdicts(spilled) == verdicts(kept)


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_spilled_variants_fail_the_same(variant: str) -> None:
    scenario = load_file(ZOO / f"{variant}.yaml")
    kept = run_scenario(scenario, reference(variant), variant, spill_at=None)
    spilled = run_scenario(scenario, reference(variant), variant, spill_at=2)
    assert spilled.log_text() == kept.log_text()
    assert verdicts(spilled) == verdicts(kept)


def test_i7_still_catches_the_agent_never_reaped() -> None:
    """The zoo's I7 variant, judged from deltas in a spilled log."""
    variant = "idle-sweep-never-reaps-none"
    result = run_scenario(load_file(ZOO / f"{variant}.yaml"), reference(variant), variant, spill_at=2)
    assert isinstance(result.records, SpilledRecords)
    assert result.verdicts["I7"].status == "fail"
    assert "stayed cached until" in result.verdicts["I7"].violations[0].message


def test_reports_of_a_spilled_run_are_the_same_files(tmp_path: Path) -> None:
    import reports

    scenarios = CATALOG[:6]
    kept = [run_scenario(s, reference("reset-mid-turn"), "v", spill_at=None) for s in scenarios]
    spilled = [run_scenario(s, reference("reset-mid-turn"), "v", spill_at=3) for s in scenarios]
    assert all(isinstance(r.records, SpilledRecords) for r in spilled)
    reports.write_all(kept, str(tmp_path / "kept"), "v")
    reports.write_all(spilled, str(tmp_path / "spilled"), "v")
    files = sorted(p.relative_to(tmp_path / "kept") for p in (tmp_path / "kept").rglob("*") if p.is_file())
    assert len(files) > 6
    for name in files:
        assert (tmp_path / "spilled" / name).read_bytes() == (tmp_path / "kept" / name).read_bytes(), name



def _spilled_notes(sizes: list[int]) -> tuple[SpilledRecords, list[Obs]]:
    log = ObservationLog(lambda: 0, spill_at=1)
    for n, size in enumerate(sizes):
        log.add("note", chat=f"c{n}", what="x" * size)
    records = log.records
    assert isinstance(records, SpilledRecords)
    return records, [Obs(0, 0, "note", f"c{n}", None, (), {"what": "x" * size}) for n, size in enumerate(sizes)]


def test_spilled_records_read_back_whatever_the_block_size() -> None:
    """`pick` reads the file a block at a time: with every block size from shorter than a
    record to several records long, records straddle blocks, end on a block's last byte or one
    past it, and are longer than a block, and every one reads back as written."""
    records, plain = _spilled_notes([(7 * n) % 45 for n in range(60)])  # 35 to 79 bytes each
    for block in range(20, 260):
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(spill, "BLOCK", block)
            assert list(records) == plain, block
            assert list(records.pick(range(1, len(plain), 3))) == plain[1::3], block


@settings(max_examples=100, deadline=None, derandomize=True)
@given(sizes=st.lists(st.integers(0, 120), min_size=1, max_size=60), block=st.integers(16, 200), data=st.data())
def test_spilled_records_picked_in_any_ascending_choice(sizes: list[int], block: int, data: st.DataObject) -> None:
    records, plain = _spilled_notes(sizes)
    chosen = sorted(data.draw(st.sets(st.integers(0, len(sizes) - 1))))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(spill, "BLOCK", block)
        assert list(records.pick(chosen)) == [plain[i] for i in chosen]


def test_a_batch_with_a_record_that_cannot_be_written_leaves_the_file_as_it_was() -> None:
    records, plain = _spilled_notes([3, 4])
    with pytest.raises(TypeError):
        records.extend([Obs(0, 0, "note", "c9"), Obs(0, 0, "other", detail={"what": object()})])
    assert len(records) == 2 and list(records) == plain and list(records.kinds()) == ["note", "note"]
    assert list(records.walk(frozenset())) == plain


def test_net_says_which_sessions_came_and_went() -> None:
    """`CacheReplay.net` (the runner's cut of a hook's answer) leaves the replay as `apply`
    does and answers what `membership` diffs between before and after, and `running`."""
    from conformance.observations import membership

    rng = random.Random(7)
    names = [f"s{i}" for i in range(6)]
    for _trial in range(3000):
        start = [[sid, rng.random() < 0.5] for sid in rng.sample(names, rng.randrange(len(names)))]
        netted, applied = CacheReplay(), CacheReplay()
        for replay in (netted, applied):
            replay.apply({"cached": start, "running": 1})
        change: dict[str, Any] = {}
        for key in ("drop", "busy", "idle"):
            if rng.random() < 0.5:
                change[key] = [rng.choice(names) for _ in range(rng.randrange(1, 4))]
        if rng.random() < 0.7:
            change["add"] = [[rng.choice(names), rng.random() < 0.5] for _ in range(rng.randrange(1, 4))]
        if rng.random() < 0.3:
            change["running"] = rng.randrange(3)
        before = dict(netted.cached)
        detail = netted.net(change)
        applied.apply(change)
        assert list(netted.cached.items()) == list(applied.cached.items()) and netted.running == applied.running
        want = membership(before, netted.cached)
        if netted.running != 1:
            want["running"] = netted.running
        assert detail == (want or None), (start, change)
