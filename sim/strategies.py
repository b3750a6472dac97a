"""Hypothesis strategies for whole scenarios: `from sim.strategies import scenarios`.

They drive the same builder as `sim.generate.scenario_for_seed`, with the same weight
tables, but every decision is a Hypothesis integer draw, so a failing example shrinks
towards the first (plainest) option of each table and towards fewer events.

    @given(scenarios(profile="small"))
    def test_my_gateway(scenario): ...
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from sim.generate import build_scenario
from sim.scenario import Scenario
from sim.weights import gen_profile


class DrawnChoices:
    """`sim.generate.Choices` answered by Hypothesis draws."""

    def __init__(self, draw: Any) -> None:
        self._draw = draw

    def integer(self, low: int, high: int) -> int:
        return int(self._draw(st.integers(low, high)))


@st.composite
def _scenario(draw: Any, profile: str) -> Scenario:
    seed = draw(st.integers(0, 2**32 - 1))
    return build_scenario(DrawnChoices(draw), f"hypothesis-{seed}", seed, profile)


def scenarios(profile: str = "default") -> st.SearchStrategy[Scenario]:
    """Whole scenarios: chats, configuration and a timeline (profile 'default' or 'small')."""
    gen_profile(profile)  # an unknown name is a ValueError naming the known ones
    return _scenario(profile)
