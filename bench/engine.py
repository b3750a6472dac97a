"""Events per second of the bare sessiongate Engine, against SimPy and a bare heapq loop.

One workload for all three, in one process: N processes each wait for 10 timeouts, whose
whole-millisecond delays come from one seeded random.Random, so every implementation has
the same events to fire. The heapq loop is the floor: the textbook event loop, one heap
entry of (time, sequence, state) per event and no callbacks. The Engine keeps one heap
entry per distinct time, so it can beat the floor when events share a millisecond; a large
--max-delay makes ties rare. Wall time is read here, and only here: a benchmark measures
the machine; the simulator never does.

Run: python bench/engine.py [--quick] [--max-delay N]. The last line is `ratio vs simpy: X.XX`."""

from __future__ import annotations

import argparse
import gc
import random
import time
from collections.abc import Callable, Iterator
from heapq import heappop, heappush

import simpy

from sim.clock import VirtualClock
from sim.engine import Engine

SEED = 7
TIMEOUTS = 10
RUNS = 5
MAX_DELAY = 1000


def make_delays(processes: int, max_delay: int = MAX_DELAY, seed: int = SEED) -> list[list[int]]:
    """The delays each process waits, identical for every implementation."""
    rng = random.Random(seed)
    return [[rng.randint(1, max_delay) for _ in range(TIMEOUTS)] for _ in range(processes)]


def run_heapq(delays: list[list[int]]) -> int:
    """The floor: a heap of (time, sequence, remaining delays) and nothing else."""
    queue: list[tuple[int, int, Iterator[int]]] = []
    seq = 0
    for own in delays:
        pending = iter(own)
        seq += 1
        heappush(queue, (next(pending), seq, pending))
    now = fired = 0
    while queue:
        now, _, pending = heappop(queue)
        fired += 1
        delay = next(pending, None)
        if delay is not None:
            seq += 1
            heappush(queue, (now + delay, seq, pending))
    return fired


def run_engine(delays: list[list[int]]) -> int:
    """The Engine as a scenario uses it: each wake-up schedules the process's next one."""
    engine = Engine(VirtualClock(0), seed=SEED)
    call_later = engine.call_later

    def wake(pending: Iterator[int]) -> None:
        delay = next(pending, None)
        if delay is not None:
            call_later(delay, wake, pending)

    for own in delays:
        wake(iter(own))
    engine.run_until(max(map(sum, delays)))  # the last wake-up; finding it is part of the timed run
    return engine.processed if engine.peek() is None else -1


def run_simpy(delays: list[list[int]]) -> int:
    """SimPy's idiom: a generator process that yields one timeout per wait."""
    env = simpy.Environment()
    fired = 0

    def process(own: list[int]):
        nonlocal fired
        for delay in own:
            yield env.timeout(delay)
            fired += 1

    for own in delays:
        env.process(process(own))
    env.run()
    return fired


IMPLEMENTATIONS: dict[str, Callable[[list[list[int]]], int]] = {
    "heapq loop": run_heapq,
    "sessiongate": run_engine,
    "simpy": run_simpy,
}


def best_times(delays: list[list[int]], runs: int) -> dict[str, float]:
    """Best wall time of each implementation; runs interleave so drift hits all alike."""
    expected = len(delays) * TIMEOUTS
    best = dict.fromkeys(IMPLEMENTATIONS, float("inf"))
    for _ in range(runs):
        for name, run in IMPLEMENTATIONS.items():
            gc.collect()
            start = time.perf_counter()
            outcome = run(delays)
            elapsed = time.perf_counter() - start
            if outcome != expected:
                raise SystemExit(f"{name} fired {outcome} events, expected {expected}")
            best[name] = min(best[name], elapsed)
    return best


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1,000 processes instead of 10,000 (smoke test)")
    parser.add_argument("--max-delay", type=int, default=MAX_DELAY, help=f"delays are 1..N ms (default {MAX_DELAY}); larger N, fewer ties")
    args = parser.parse_args(argv)
    processes = 1_000 if args.quick else 10_000
    events = processes * TIMEOUTS
    best = best_times(make_delays(processes, args.max_delay), RUNS)
    rate = {name: events / seconds for name, seconds in best.items()}
    print(f"{processes:,} processes x {TIMEOUTS} timeouts of 1..{args.max_delay} ms = {events:,} events, best of {RUNS}")
    print(f"{'implementation':<14}{'events/s':>12}{'best run':>12}")
    for name, seconds in best.items():
        print(f"{name:<14}{rate[name]:>12,.0f}{seconds * 1000:>9.1f} ms")
    print(f"the heapq loop itself vs simpy: {rate['heapq loop'] / rate['simpy']:.2f}")
    print(f"ratio vs heapq loop: {rate['sessiongate'] / rate['heapq loop']:.2f}")
    print(f"ratio vs simpy: {rate['sessiongate'] / rate['simpy']:.2f}")


if __name__ == "__main__":
    main()
