"""A process that runs many scenarios (a fuzz worker) keeps a flat heap.

A run leaves its gateway in reference cycles (the gateway holds its timers, the timers its
bound methods), which only the cyclic collector frees. The runner turns that collector off
during a run; it must leave it able to collect afterwards. (Once, to skip the young
collection that followed each run, the run's objects were moved straight to the oldest
generation: no full collection ever came, and a 5,000-seed worker grew to 4.4 GB.)
"""

from __future__ import annotations

import gc
import weakref

from conformance.harness.runner import run_scenario
from reference_impl import ReferenceGateway
from sim.generate import scenario_for_seed


def test_finished_gateways_are_collected_without_an_explicit_collection() -> None:
    assert gc.isenabled()
    gateways: list[weakref.ref[ReferenceGateway]] = []
    for seed in range(60):
        gateway = ReferenceGateway()
        gateways.append(weakref.ref(gateway))
        run_scenario(scenario_for_seed(seed), gateway, "reference")
        del gateway
    alive = sum(ref() is not None for ref in gateways)
    assert alive <= 40, f"{alive} of 60 finished gateways are still in memory: their cycles are never collected"


def test_a_fuzz_worker_frees_each_seeds_gateway(tmp_path) -> None:
    """`run_seed` keeps the collector off until the run's log is freed (so it never walks
    it); the gateway's cycles must still go."""
    from conformance.search.fuzz import SeedTask, run_seed

    assert gc.isenabled()
    before = _gateways_alive()
    for seed in range(60):
        run_seed(SeedTask(seed, "reference", "default", str(tmp_path), shrink=False))
    alive = _gateways_alive() - before
    assert gc.isenabled()
    assert alive <= 40, f"{alive} of 60 seeds' gateways are still in memory: their cycles are never collected"


def _gateways_alive() -> int:
    return sum(isinstance(o, ReferenceGateway) for o in gc.get_objects())


def test_the_gateway_is_closed_before_the_log_is_judged(monkeypatch) -> None:
    """`close()` comes once the run is over and before judging, so a long run's judging does
    not carry the gateway's database; the reference gateway's own close() releases it."""
    import conformance.checks

    order: list[str] = []
    judge = conformance.checks.judge

    class Closing(ReferenceGateway):
        def close(self) -> None:
            order.append("close")
            super().close()

    def judging(records, strict=False):  # type: ignore[no-untyped-def]
        order.append("judge")
        return judge(records, strict)

    monkeypatch.setattr(conformance.checks, "judge", judging)
    gateway = Closing()
    result = run_scenario(scenario_for_seed(0), gateway, "reference")
    assert order == ["close", "judge"] and result.passed
    assert not hasattr(gateway, "store")  # the database and its read caches are gone
