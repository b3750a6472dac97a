"""I7 judged from the turnless model and the turns' projection (`Flights`, added a chat at a time
in a shuffled order, as the partitioned judge of a long log gathers it) says exactly what
`check(m)` says: on every catalog scenario, on the reference and every zoo variant, and on
generated seeds."""

from __future__ import annotations

import random
from array import array
from collections import defaultdict
from dataclasses import replace
from types import SimpleNamespace

import pytest

from conformance.checks import i7_resources
from conformance.checks.flights import Flights
from conformance.checks.model import NEVER, RunModel, Turn
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
    """64 bytes a turn in arrays gathered by `add` (4 for a row or an input's record, 8 for any
    other number or name) and no object a turn (names are the model's own strings); from a
    model, the model's own ints in lists."""
    result = run_scenario(scenario_for_seed(3, "default"), reference(), "r", check=False)
    m = RunModel.build(result.records)
    turns = list(m.turns.values())
    flights = Flights()
    flights.add(turns)
    assert len(flights) == len(turns)
    rows = (flights.index, flights.start_t, flights.start_index, flights.reply_t)
    answers = (flights.order, flights.answer_index)
    assert all(isinstance(column, array) and len(column) == len(turns) for column in rows)
    assert all(isinstance(column, array) and len(column) == len(flights.order) <= len(turns) for column in answers)
    names = (flights.chat, flights.session, flights.request_session)
    assert all(len(column) == len(turns) for column in names)
    assert all(type(name) is str for name in flights.chat)
    size = sum(column.itemsize * len(column) for column in rows + answers) + 8 * sum(map(len, names))  # type: ignore[attr-defined]
    assert size <= 64 * len(turns)
    whole = Flights.from_model(m)
    assert all(isinstance(column, list) for column in (whole.index, whole.start_t, whole.reply_t, whole.answer_index))
    by_index = {turn.index: turn for turn in turns}
    assert all(started is (by_index[at].request_t if by_index[at].held else by_index[at].arrival)
               for at, started in zip(whole.index, whole.start_t, strict=True))


def flights_of(turns: list[Turn], seed: int, whole: bool) -> Flights:
    """The turns in a few batches in a seeded order (one batch through `from_model` if `whole`)."""
    rng = random.Random(seed)
    if whole:
        return Flights.from_model(SimpleNamespace(turns={turn.id: turn for turn in turns}))  # type: ignore[arg-type]
    shuffled = turns[:]
    rng.shuffle(shuffled)
    cuts = sorted(rng.sample(range(len(shuffled) + 1), rng.randint(0, min(4, len(shuffled) + 1))))
    flights = Flights()
    for lo, hi in zip([0, *cuts], [*cuts, len(shuffled)], strict=True):
        flights.add(shuffled[lo:hi] if rng.random() < 0.5 else iter(shuffled[lo:hi]))
    return flights


def made_up_turns(seed: int) -> list[Turn]:
    """Turns with every shape I7 reads: admitted (a request with a session) or not (none, or a
    request with no session), answered or not, ended with no reply at a record of its own, or
    at an ask's or answer's (a turn the gateway dropped ends at the next record, whatever it
    is), or never; inputs, asks and answers at records of their own, and no end after its request."""
    rng = random.Random(seed)
    records = rng.sample(range(10, 400), 200)
    turns: list[Turn] = []
    for n in range(rng.randint(0, 60)):
        turn = Turn(f"t{n}", rng.choice("abc"), 0, records.pop())
        turn.arrival = turn.index * 10 + rng.choice((0, 0, 3))
        if rng.random() < 0.9:  # asked: after its input's record (at once, or after a wait)
            turn.index, turn.request_index = sorted((turn.index, records.pop()))
            turn.arrival = turn.index * 10 + rng.choice((0, 0, 3))
            turn.request_t = turn.request_index * 10 + rng.choice((0, 0, 3))
            turn.request_session = turn.session = rng.choice(("s1", "s2", "s3", None))
            if rng.random() < 0.1:  # held by the platform: it arrives at the restart, before its request
                turn.held, turn.arrival = True, turn.request_t
        later = [at for at in records if at > turn.request_index]
        if later and rng.random() < 0.8:  # answered (some never asked: a reply with no turn in flight)
            turn.reply_index = rng.choice(later)
            records.remove(turn.reply_index)
            turn.reply_t = turn.reply_index * 10 + rng.choice((0, 0, 7))
            turn.reply_session = turn.session = rng.choice((turn.request_session, "s4"))
            turn.done_index, turn.done_t = turn.reply_index, turn.reply_t
        elif turn.request_session is not None and rng.random() < 0.8:
            others = [t.request_index for t in turns if t.request_index > turn.request_index]
            others += [t.reply_index for t in turns if t.reply_index > turn.request_index]
            turn.done_index = rng.choice(others) if others and rng.random() < 0.5 else turn.request_index + rng.randint(1, 50)
            turn.done_t = turn.done_index * 10 + rng.choice((-5, 0, 0, 5))
        turns.append(turn)
    return turns


@pytest.mark.parametrize("whole", [False, True])
def test_the_flights_come_in_log_order(whole: bool) -> None:
    """`in_flight` (the streams `_replay` merges) against a plain sort of every flight, whatever
    the batches and their order: ends compared whole where they share a record."""
    for seed in range(300):
        turns = made_up_turns(seed)
        expected = sorted_flights(turns)
        flights = flights_of(turns, seed, whole)
        if whole and seed % 2:
            flights.add(made_up_turns(seed + 1000)[:0])  # a second batch, empty
        assert list(i7_resources.in_flight(flights)) == expected
        assert len(flights) == len(turns)


@pytest.mark.parametrize("whole", [False, True])
def test_the_replay_reads_the_flights_in_log_order(whole: bool) -> None:
    """`_replay` merges the streams itself, among the samples (an end that is no reply comes in
    as a mark of its own, after a sample of its record): with every chat under `none`, the
    stretches it reports a session's agent idle in the cache trace the flights and the samples
    (here each drops an agent, or loads it again, or nothing) in the order read, against the
    same made from a plain sort of the flights, each after the samples up to its record."""
    for seed in range(300):
        rng = random.Random(seed)
        turns = made_up_turns(seed)
        used = {at for turn in turns for at in (turn.request_index, turn.reply_index)}
        samples = sorted(rng.sample([at for at in range(1, 420) if at not in used], rng.randint(0, 30)))
        watched = sorted({turn.session for turn in turns if turn.session})
        records = {0: SimpleNamespace(t=0, detail={"cached": [[sid, False] for sid in watched]})}
        cached = set(watched)
        changes: dict[int, tuple[str, str]] = {}
        for at in samples:
            sid = rng.choice([*watched, ""])
            change = "" if not sid else "drop" if sid in cached else "add"
            cached.symmetric_difference_update({sid} if change else set())
            changes[at] = (change, sid)
            detail = {"drop": [sid]} if change == "drop" else {"add": [[sid, False]]} if change == "add" else {}
            records[at] = SimpleNamespace(t=at * 10, detail=detail)
        indexes = sorted(records)
        m = SimpleNamespace(config=SimpleNamespace(cache_cap=1000), policies=lambda _chat: [SimpleNamespace(mode="none")],
                            of=lambda _kind, records=records, indexes=indexes: ((at, records[at]) for at in indexes),
                            records=range(500))
        _over, stretches, _held, _loads = i7_resources._replay(m, flights_of(turns, seed, whole), indexes, set())  # type: ignore[arg-type]
        assert stretches == traced(sorted_flights(turns), watched, changes)


def sorted_flights(turns: list[Turn]) -> list[tuple[int, int, int, str]]:
    """Every flight I7 reads, by a plain sort (ends compared whole)."""
    admitted = [turn for turn in turns if turn.request_session is not None]
    return sorted([(t.request_index if t.held else t.index, t.request_t if t.held else t.arrival, 1, t.request_session)  # type: ignore[misc]
                   for t in admitted]
                  + [(t.reply_index, t.reply_t, -1, t.request_session) for t in admitted if t.reply_index >= 0]
                  + [(t.done_index, t.done_t, -1, t.request_session) for t in admitted
                     if t.reply_index < 0 and t.done_index < NEVER])


def traced(flights: list[tuple[int, int, int, str]], watched: list[str], changes: dict[int, tuple[str, str]]
           ) -> list[tuple[str, int, int, int, bool]]:
    """The idle stretches of the agents of `watched` sessions, all cached at record 0 (time 0),
    the samples at the records of `changes` (time: 10 a record) dropping or loading one."""
    since = dict.fromkeys(watched, (0, 0))
    cached = set(watched)
    flying: dict[str, int] = defaultdict(int)
    stretches: list[tuple[str, int, int, int, bool]] = []

    def settle(sid: str, at: int, t: int) -> None:
        idle = sid in cached and not flying[sid]
        if idle and sid not in since:
            since[sid] = (at, t)
        elif not idle and sid in since:
            stretches.append((sid, *since.pop(sid), t, True))

    for item in sorted([(at, 0, ()) for at in changes] + [(flight[0], 1, flight) for flight in flights]):
        if item[1] == 0:
            change, sid = changes[item[0]]
            cached.symmetric_difference_update({sid} if change else set())
            if change:
                settle(sid, item[0], item[0] * 10)
        else:
            at, t, step, sid = item[2]  # type: ignore[misc]
            flying[sid] += step
            if sid in watched:
                settle(sid, at, t)
    last = max([max(changes, default=0) * 10, *(t for at, t, _step, _sid in flights if at >= max(changes, default=0))])
    return stretches + [(sid, at, start, last, False) for sid, (at, start) in sorted(since.items())]
