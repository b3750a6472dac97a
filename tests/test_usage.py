"""What the fake LLM reports about token usage (#20): scenario syntax, errors, round trip, the
log, the generator. The reference gateway never reads usage, so its verdicts do not move."""

from __future__ import annotations

from dataclasses import replace

import pytest

from conformance.harness.runner import run_scenario
from reference_impl.registry import reference
from sim.document import ScenarioError
from sim.generate import scenario_for_seed
from sim.loader import load_text
from sim.scenario import Message
from sim.shrink import shrink
from sim.weights import USAGE_PERCENT
from sim.writer import dump_text

SCENARIO = """name: usage
config: {reset: {mode: none}, usage: 5000}
events:
  - message: alice
  - message: alice
    after: 1m
    usage: large
  - message: alice
    after: 1m
    usage: none
  - message: alice
    after: 1m
    usage: small
"""


def test_usage_per_message_and_per_config() -> None:
    scenario = load_text(SCENARIO, "u.yaml")
    assert scenario.config.usage == 5000
    assert [e.usage for e in scenario.events if isinstance(e, Message)] == [None, "large", "none", "small"]
    assert load_text("name: x\nevents: [{message: a}]\n").config.usage == "small"


@pytest.mark.parametrize(("text", "expected"), [
    ("name: x\nevents:\n  - message: a\n    usage: huge\n",
     "u.yaml:4: events[0].usage: expected small, none, large or a token count like 120000, got 'huge'"),
    ("name: x\nevents:\n  - message: a\n    usage: -3\n",
     "u.yaml:4: events[0].usage: expected small, none, large or a token count like 120000, got -3"),
    ("name: x\nevents:\n  - message: a\n    usage: true\n",
     "u.yaml:4: events[0].usage: expected small, none, large or a token count like 120000, got true"),
    ("name: x\nconfig:\n  usage: [1]\nevents: [{message: a}]\n",
     "u.yaml:3: config.usage: expected small, none, large or a token count like 120000, got a list"),
    ("name: x\nevents:\n  - command: /new\n    chat: a\n    usage: none\n", "u.yaml:5: events[0].usage: unknown key"),
])
def test_bad_usage_names_file_line_and_field(text: str, expected: str) -> None:
    with pytest.raises(ScenarioError) as info:
        load_text(text, "u.yaml")
    assert str(info.value) == expected


def test_usage_round_trips_and_the_default_is_not_written() -> None:
    scenario = load_text(SCENARIO, "u.yaml")
    text = dump_text(scenario)
    assert replace(load_text(text), source="", header="") == replace(scenario, source="", header="")
    plain = load_text("name: x\nevents: [{message: a}]\n")
    assert "usage" not in dump_text(plain)


def test_the_log_says_what_each_answer_reported_and_the_reference_ignores_it() -> None:
    with_usage = run_scenario(load_text(SCENARIO, "u.yaml"), reference(), "reference")
    requests = [r for r in with_usage.records if r.kind == "llm_request"]
    assert [r.detail.get("usage") for r in requests] == [5000, "large", "none", None]  # 'small' is left out
    plain_text = SCENARIO.replace(", usage: 5000", "").replace("    usage: large\n", "").replace("    usage: none\n", "")
    plain = run_scenario(load_text(plain_text.replace("    usage: small\n", ""), "u.yaml"), reference(), "reference")
    stripped = [r._replace(detail={k: v for k, v in r.detail.items() if k != "usage"}) for r in with_usage.records[1:]]
    assert stripped == list(plain.records[1:])  # the scenario record differs by its config only
    assert {k: v.status for k, v in with_usage.verdicts.items()} == {k: v.status for k, v in plain.verdicts.items()}
    assert with_usage.passed and len(with_usage.verdicts) == 9


class _Asking:
    """The reference gateway, asking the harness what each answer reports as it arrives."""

    def __init__(self) -> None:
        self.inner, self.seen = reference(), []

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)

    def start(self, config: object, harness: object) -> None:
        self.harness = harness
        self.inner.start(config, harness)

    def deliver_reply(self, request_id: str, text: str) -> None:
        self.seen.append(self.harness.llm.usage_of(request_id))
        self.inner.deliver_reply(request_id, text)


def test_a_gateway_asks_the_usage_of_the_answer_it_is_given() -> None:
    gateway = _Asking()
    run_scenario(load_text(SCENARIO, "u.yaml"), gateway, "reference", check=False)  # type: ignore[arg-type]
    assert gateway.seen == [5000, "large", "none", "small"]


def test_generated_usage_is_rare_and_leaves_low_seeds_alone() -> None:
    with_usage = [s for s in range(200) if any(isinstance(e, Message) and e.usage for e in scenario_for_seed(s).events)]
    assert with_usage and len(with_usage) <= 200 * 2 * USAGE_PERCENT // 100
    assert min(with_usage) > 66  # seeds 0-66 are the scenarios they were before usage existed
    reported = set()
    for seed in with_usage:
        scenario = scenario_for_seed(seed)
        reported |= {e.usage for e in scenario.events if isinstance(e, Message)}
        assert replace(load_text(dump_text(scenario)), source="", header="") == scenario
    assert reported == {None, "none", "large"}


def test_shrinking_drops_usage_nothing_needs() -> None:
    scenario = load_text(SCENARIO, "u.yaml")
    shrunk = shrink(scenario, lambda s: any(isinstance(e, Message) for e in s.events)).scenario
    assert shrunk.config.usage == "small" and all(e.usage is None for e in shrunk.events if isinstance(e, Message))
