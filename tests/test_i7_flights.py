"""I7 judged from the turnless model and the turns' projection (`Flights`, added a chat at a time
in a shuffled order, as the partitioned judge of a long log gathers it) says exactly what
`check(m)` says: on every catalog scenario, on the reference and every zoo variant, and on
generated seeds."""

from __future__ import annotations

import random
from collections import defaultdict
from dataclasses import replace

import pytest

from conformance.checks import i7_resources
from conformance.checks.flights import Flights
from conformance.checks.model import RunModel, Turn
from conformance.checks.model.facts import Facts
from conformance.harness.runner import run_scenario
from conformance.harness.suite import catalog_paths
from reference_impl.registry import reference
from reference_impl.variants import VARIANTS
from sim.generate import scenario_for_seed
from sim.loader import load_file

SCENARIOS = [load_file(p) for p in catalog_paths()]


def batched(m: RunModel, seed: int) -> Flights:
    """The model's turns a chat at a time, the chats in a seeded shuffle, every other batch reversed."""
    by_chat: dict[str, list[Turn]] = defaultdict(list)
    for turn in m.turns.values():
        by_chat[turn.chat].append(turn)
    chats = sorted(by_chat)
    random.Random(seed).shuffle(chats)
    flights = Flights()
    for k, chat in enumerate(chats):
        flights.add(by_chat[chat][::-1] if k % 2 else iter(by_chat[chat]))
    return flights


def assert_same(records: object, seed: int) -> str:
    m = RunModel.build(records)  # type: ignore[arg-type]
    expected = i7_resources.check(m)
    turnless = replace(m, turns={}, facts=Facts())  # what the partitioned judge hands I7: no turn
    got = i7_resources.judge(turnless, batched(m, seed))
    assert repr(got) == repr(expected)
    assert got == expected
    return expected.status


@pytest.mark.parametrize("variant", [None, *VARIANTS])
def test_catalog_judged_from_flights_as_from_the_model(variant: str | None) -> None:
    statuses = []
    for n, scenario in enumerate(SCENARIOS):
        result = run_scenario(scenario, reference(variant) if variant else reference(), "r", check=False)
        if result.failure is None:
            statuses.append(assert_same(result.records, n))
    assert statuses


@pytest.mark.parametrize("chunk", range(8))
def test_generated_seeds_judged_from_flights_as_from_the_model(chunk: int) -> None:
    for seed in range(chunk * 40, chunk * 40 + 40):
        result = run_scenario(scenario_for_seed(seed, "default"), reference(), "r", check=False)
        assert_same(result.records, seed)


def test_a_caught_variant_is_caught_from_flights() -> None:
    """I7's zoo variant fails I7 judged either way (its catalog scenario)."""
    caught = []
    for variant in VARIANTS:
        for n, scenario in enumerate(SCENARIOS):
            if variant not in scenario.catches:
                continue
            result = run_scenario(scenario, reference(variant), "r", check=False)
            if result.failure is None and assert_same(result.records, n) == "fail":
                caught.append(variant)
    assert caught


def test_the_projection_is_small() -> None:
    """64 bytes a turn in columns, and no object a turn (names are the model's own strings)."""
    result = run_scenario(scenario_for_seed(3, "default"), reference(), "r", check=False)
    m = RunModel.build(result.records)
    flights = Flights.from_model(m)
    assert len(flights) == len(m.turns)
    columns = (flights.index, flights.request_t, flights.request_index, flights.reply_t, flights.reply_index)
    assert all(column.itemsize == 8 and len(column) == len(m.turns) for column in columns)
    assert all(type(name) is str for name in flights.chat)
