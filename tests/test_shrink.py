"""Shrinking keeps the same check failing and ends small; the file it writes reproduces it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from conformance.harness.runner import run_scenario
from reference_impl import ReferenceGateway
from sim.generate import scenario_for_seed
from sim.loader import load_file
from sim.scenario import Scenario
from sim.shrink import ddmin, shrink, write_beside


class _NoFinalize:
    """A hook bus that loses every on_session_finalize."""

    def __init__(self, hooks: Any) -> None:
        self._hooks = hooks

    def on_session_finalize(self, session: str, reason: str) -> None:
        pass

    def on_session_reset(self, session: str) -> None:
        self._hooks.on_session_reset(session)


class ForgetsFinalize(ReferenceGateway):
    """A broken gateway: sessions end without on_session_finalize, so I1 fails."""

    def end_session(self, route: Any, reason: str) -> None:
        hooks = self.h.hooks
        self.h.hooks = _NoFinalize(hooks)  # type: ignore[assignment]
        try:
            super().end_session(route, reason)
        finally:
            self.h.hooks = hooks


def _i1(gateway: Any, scenario: Scenario) -> str:
    return run_scenario(scenario, gateway, "test").verdicts["I1"].status


def _fails_i1(scenario: Scenario) -> bool:
    return _i1(ForgetsFinalize(), scenario) == "fail"


def test_ddmin_finds_the_minimal_cause() -> None:
    calls: list[list[int]] = []

    def fails(items: list[int]) -> bool:
        calls.append(items)
        return 3 in items and 17 in items

    assert ddmin(list(range(40)), fails) == [3, 17]
    assert len(calls) < 120


def test_shrinks_a_failing_generated_scenario(tmp_path: Path) -> None:
    seed, scenario = next((s, sc) for s in range(40) if _fails_i1(sc := scenario_for_seed(s))
                          and _i1(ReferenceGateway(), sc) == "pass")
    shrunk = shrink(scenario, _fails_i1)
    assert len(shrunk.scenario.events) <= 12 < len(scenario.events)
    assert shrunk.original_events == len(scenario.events) and not shrunk.exhausted
    assert _fails_i1(shrunk.scenario)
    original = tmp_path / f"gen-{seed}.yaml"
    path, reproduces = write_beside(original, shrunk.scenario, f"seed {seed}, I1", _fails_i1)
    assert path == tmp_path / f"gen-{seed}.shrunk.yaml"
    assert reproduces
    assert path.read_text().startswith(f"# seed {seed}, I1\n")
    assert _fails_i1(load_file(path))


def test_shrink_and_write_keeps_a_zoo_variant_caught(tmp_path: Path) -> None:
    variants = pytest.importorskip("reference_impl.variants")
    if "shutdown-ends-sessions" not in variants.VARIANTS:
        pytest.skip("variant shutdown-ends-sessions is not in the zoo")
    from conformance.search.fuzz import failing, shrink_and_write

    gateway = "reference:shutdown-ends-sessions"
    scenario = scenario_for_seed(0)
    result = run_scenario(scenario, variants.make("shutdown-ends-sessions"), gateway)
    check = next(iter(failing(result)))
    original = tmp_path / "gen-0.yaml"
    written = shrink_and_write(scenario, original, gateway, check, result.verdicts[check].status, control="reference")
    assert written.events <= 12 and written.reproduces
    text = Path(written.path).read_text()
    assert "seed 0" in text and f"failing: {check}" in text and f"{len(scenario.events)} events" in text


def busy_and_never_finalizes() -> Any:
    """A zoo variant (no on_session_finalize at idle expiry) that also keeps its scheduler busy:
    a timer every 10 ms for the scenario's first half hour, ~180,000 engine events, more than a
    shrink candidate's budget (`candidate_budget`) and well within a run's."""
    from reference_impl.variants import VARIANTS

    class Busy(VARIANTS["idle-expiry-no-finalize"]):  # type: ignore[misc, valid-type]
        def boot(self) -> None:
            super().boot()
            self.busy_until = self.h.clock.now() + 30 * 60_000
            self.h.scheduler.call_at(self.h.clock.now() + 10, self.busy)

        def busy(self) -> None:
            if self.running and self.h.clock.now() < self.busy_until:
                self.h.scheduler.call_at(self.h.clock.now() + 10, self.busy)

    return Busy()


def test_a_gateway_busier_than_a_candidates_budget_is_still_shrunk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Its every candidate used to run out of the candidate's event budget (a timeout, not the
    check's failure): nothing shrank and the file did not reproduce (zoo variant
    orphan-child-never-recreated on seed 92, a retry every second for hours). When the original
    fails only with a run's budget, the candidates get it too."""
    from conformance.search.fuzz import candidate_budget, shrink_and_write

    monkeypatch.setattr("conformance.search.fuzz.factory", lambda *_: busy_and_never_finalizes)
    scenario = load_file(Path(__file__).resolve().parents[1] / "conformance" / "catalog" / "01-idle-expiry-end-and-finalize.yaml")
    assert run_scenario(scenario, busy_and_never_finalizes(), "busy").verdicts["I1"].status == "fail"
    cut = run_scenario(scenario, busy_and_never_finalizes(), "busy", budget=candidate_budget(scenario))
    assert cut.failure is not None and cut.failure.kind == "timeout"
    written = shrink_and_write(scenario, tmp_path / "x.yaml", "busy", "I1", "fail")
    assert written.reproduces and written.events < len(scenario.events)
