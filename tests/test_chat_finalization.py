"""Finalization per chat (issue #21, format gaps): `config.finalization_by_chat` gives a chat
its own eager or lazy mode beside the gateway-wide one, and I1 holds each chat to its own."""

from __future__ import annotations

from dataclasses import replace

import pytest

from conformance.checks import judge
from conformance.features import config_features
from conformance.harness.runner import run_scenario
from conformance.harness.suite import catalog_paths, outcome
from conformance.observations import Obs
from reference_impl.gateway import ReferenceGateway
from reference_impl.variants import make
from sim.document import ScenarioError
from sim.loader import load_file, load_text
from sim.writer import dump_text

CATALOG = {p.stem: p for p in catalog_paths()}
BESIDE_WATCHER = CATALOG["61-lazy-chat-beside-watcher"]
IN_LAZY_GATEWAY = CATALOG["62-eager-chat-in-lazy-gateway"]
HEAD = "name: x\nconfig:\n  watcher_interval: 5m\n  finalization_by_chat:\n"  # its entries from line 5


def test_a_chat_mode_loads_round_trips_and_is_a_feature() -> None:
    scenario = load_text(HEAD + "    bob: lazy\nchats: {alice: {}, bob: {}}\nevents: [{message: alice}]\n", "x.yaml")
    assert scenario.config.finalization_by_chat == (("bob", "lazy"),)
    assert scenario.config.finalization_for("bob") == "lazy" and scenario.config.finalization_for("alice") is None
    assert replace(load_text(dump_text(scenario), "x.yaml"), source="x.yaml") == scenario
    assert "finalization_by_chat" in config_features(scenario.config)
    assert "finalization_by_chat" not in config_features(replace(scenario.config, finalization_by_chat=()))


@pytest.mark.parametrize(("entry", "message"), [
    ("    carol: lazy", "x.yaml:5: config.finalization_by_chat.carol: no chat named 'carol' in the scenario (its chats: alice, bob)"),
    ("    bob: sometimes", "x.yaml:5: config.finalization_by_chat.bob: expected one of eager, lazy, got 'sometimes'"),
    ("    b/b: lazy", "x.yaml:5: config.finalization_by_chat.b/b: chat names are letters, digits, '.', '_' or '-'"),
])
def test_a_bad_entry_names_file_line_and_field(entry: str, message: str) -> None:
    with pytest.raises(ScenarioError) as caught:
        load_text(HEAD + entry + "\nchats: {alice: {}, bob: {}}\nevents: [{message: alice}]\n", "x.yaml")
    assert str(caught.value) == message


@pytest.mark.parametrize("path", [BESIDE_WATCHER, IN_LAZY_GATEWAY], ids=lambda p: p.stem)
def test_the_reference_keeps_each_chat_to_its_own_mode(path) -> None:  # type: ignore[no-untyped-def]
    result = run_scenario(load_file(path), ReferenceGateway(), "reference")
    assert outcome(result) == "pass"
    ends = {r.session: r.t for r in result.records if r.kind == "on_session_end"}
    boundary = result.records[0].t + 30 * 60_000 + 2_000  # alice's and bob's: 30m after 09:00 (+ the reply)
    assert ends["s1"] - boundary <= 5 * 60_000  # alice, eager: by the watcher
    bob = next(r.t for r in result.records if r.kind == "message" and r.turns == ("t3",))
    assert ends["s2"] == bob  # bob, lazy: at his next message, two hours on


def _without_modes(records: list[Obs]) -> list[Obs]:
    """The same log with the chats' own modes struck from its configuration."""
    head = records[0]
    config = {k: v for k, v in head.detail["config"].items() if k != "finalization_by_chat"}
    return [head._replace(detail={**head.detail, "config": config}), *records[1:]]


def test_i1_reads_each_chats_mode_from_the_log() -> None:
    """Proven both ways: judged as if bob were watched, the reference's lazy end of bob's s2
    is two hours late; judged as if alice were lazy, the variant's missing end is owed only at
    a next message that never comes."""
    clean = run_scenario(load_file(BESIDE_WATCHER), ReferenceGateway(), "reference")
    verdict = judge(_without_modes(list(clean.records)))["I1"]
    assert verdict.status == "fail"
    assert "session s2 reached its idle boundary at 09:30" in verdict.violations[0].message
    assert "eager finalization within 5m" in verdict.violations[0].message
    broken = run_scenario(load_file(IN_LAZY_GATEWAY), make("eager-chat-left-lazy"), "reference:eager-chat-left-lazy")
    assert broken.verdicts["I1"].status == "fail"
    assert judge(_without_modes(list(broken.records)))["I1"].status == "pass"


@pytest.mark.parametrize(("path", "variant"), [(BESIDE_WATCHER, "lazy-chat-stops-the-watcher"),
                                               (IN_LAZY_GATEWAY, "eager-chat-left-lazy")], ids=lambda v: getattr(v, "stem", v))
def test_a_gateway_that_mixes_the_modes_up_fails_i1(path, variant: str) -> None:  # type: ignore[no-untyped-def]
    result = run_scenario(load_file(path), make(variant), f"reference:{variant}")
    assert {name for name, v in result.verdicts.items() if v.status == "fail"} == {"I1"}
    assert result.verdicts["I1"].violations[0].message == (
        "session s1 reached its idle boundary at 09:30 (idle 30m after the last user message at 09:00) but got no "
        "on_session_end (owed by 09:35: eager finalization within 5m)")


def test_a_gateway_without_chat_modes_skips_such_scenarios() -> None:
    class NoChatModes(ReferenceGateway):
        def profile(self, config):  # type: ignore[no-untyped-def]
            return replace(super().profile(config), unsupported=frozenset({"finalization_by_chat"}))

    result = run_scenario(load_file(BESIDE_WATCHER), NoChatModes(), "no-chat-modes")
    assert outcome(result) == "skip"


def test_the_shrinker_drops_a_removed_chats_mode() -> None:
    """A chat the shrinker removes takes its mode with it, so a shrunk file always loads again
    (a bug that needs only some chat's mode kept that mode's chat, here bob)."""
    from sim.shrink import shrink
    from sim.writer import dump_text as dump

    scenario = load_text(HEAD + "    bob: lazy\nchats: {alice: {}, bob: {}}\nevents: [{message: alice}, {message: bob}]\n", "x.yaml")
    def fails(s) -> bool:  # type: ignore[no-untyped-def]
        return any(getattr(e, "chat", None) == "alice" for e in s.events) and bool(s.config.finalization_by_chat)

    shrunk = shrink(scenario, fails).scenario
    assert shrunk.config.finalization_by_chat == (("bob", "lazy"),) and "bob" in [c.name for c in shrunk.chats]
    assert load_text(dump(shrunk), "x.yaml").config == shrunk.config


def test_a_chats_mode_is_its_own_else_the_watchers() -> None:
    config = load_text(HEAD + "    bob: lazy\nchats: {alice: {}, bob: {}}\nevents: [{message: alice}]\n", "x.yaml").config
    assert (config.finalization_of("alice"), config.finalization_of("bob")) == ("eager", "lazy")
    lazy = replace(config, watcher_interval=None, finalization_by_chat=(("alice", "eager"),))
    assert (lazy.finalization_of("alice"), lazy.finalization_of("bob")) == ("eager", "lazy")
