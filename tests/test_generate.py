"""Generated scenarios: a seed names one scenario everywhere, and every scenario is loadable."""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings

from conformance.harness.runner import run_scenario
from reference_impl.gateway import ReferenceGateway
from reference_impl.variants import make
from sim.generate import scenario_for_seed
from sim.loader import load_text
from sim.scenario import BEFORE_TIMERS, BackendFail, BackendSlow, Crash, DeleteSession, Message, Restart, Scenario, Sigterm
from sim.strategies import scenarios
from sim.weights import DENSE, EVENT_WEIGHTS, PROFILE_NAMES, gen_profile
from sim.writer import dump_text

SEEDS = range(8)
DIGEST_SCRIPT = (
    "import hashlib; from sim.generate import scenario_for_seed; from sim.writer import dump_text; "
    f"print(hashlib.sha256(''.join(dump_text(scenario_for_seed(s)) for s in {list(SEEDS)!r}).encode()).hexdigest())"
)


def _digest() -> str:
    return hashlib.sha256("".join(dump_text(scenario_for_seed(s)) for s in SEEDS).encode()).hexdigest()


def _round_trip(scenario: Scenario) -> Scenario:
    return replace(load_text(dump_text(scenario)), source="", header="")


def test_same_seed_same_scenario() -> None:
    for seed in SEEDS:
        assert scenario_for_seed(seed) == scenario_for_seed(seed)
    assert scenario_for_seed(1) != scenario_for_seed(2)


def test_same_scenario_under_any_hash_seed() -> None:
    here = _digest()
    for hash_seed in ("0", "4242"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        out = subprocess.run([sys.executable, "-c", DIGEST_SCRIPT], env=env, capture_output=True, text=True, check=True)
        assert out.stdout.strip() == here, f"PYTHONHASHSEED={hash_seed} changed the generated scenarios"


def test_generated_scenarios_are_named_sized_and_round_trip() -> None:
    for seed in SEEDS:
        scenario = scenario_for_seed(seed)
        assert scenario.name == f"gen-{seed}" and scenario.seed == seed
        assert 20 <= len(scenario.events) <= 203  # a stop brings its restart (and a held message); a slow backend, one more
        assert isinstance(scenario.events[0], Message)
        times = [e.t for e in scenario.events]
        assert times == sorted(times)
        assert _round_trip(scenario) == scenario


def test_messages_outnumber_faults_and_faults_target_real_providers() -> None:
    messages = total = 0
    for seed in range(30):
        scenario = scenario_for_seed(seed)
        providers = {p.name for p in scenario.config.providers}
        for event in scenario.events:
            total += 1
            messages += isinstance(event, Message)
            if isinstance(event, BackendFail):
                assert event.provider in providers
    assert messages / total > 0.6
    assert dict(EVENT_WEIGHTS)["message"] > sum(w for kind, w in EVENT_WEIGHTS if kind != "message")


def test_the_dense_profile_packs_faults_and_makes_the_rare_draws_common() -> None:
    """`--profile dense`: the default's size, with faults and commands packed close and every
    draw the default makes rarely (orders, a slow backend, usage, per-chat modes) common."""
    faults = total = slow = with_providers = ordered = 0
    for seed in range(30):
        scenario = scenario_for_seed(seed, "dense")
        assert scenario.name == f"gen-{seed}" and _round_trip(scenario) == scenario
        assert scenario != scenario_for_seed(seed)
        total += len(scenario.events)
        faults += sum(not isinstance(e, Message) for e in scenario.events)
        ordered += any(e.order == BEFORE_TIMERS for e in scenario.events)
        if scenario.config.providers:
            with_providers += 1
            slow += any(isinstance(e, BackendSlow) for e in scenario.events)
    assert faults / total > 0.4 and ordered == 30 and slow == with_providers > 0
    assert dict(DENSE.events)["message"] < sum(w for kind, w in DENSE.events if kind != "message")


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(scenarios(profile="small"))
def test_strategy_scenarios_round_trip(scenario: Scenario) -> None:
    assert scenario.events and scenario.chats
    assert _round_trip(scenario) == scenario


def test_seeds_reach_groups_of_two_users_and_restarts_that_change_the_policy() -> None:
    """Two format features the generator never drew, so fuzz could not find their bugs (`zoo
    --generated` never caught `group-shares-one-session` or `restart-keeps-old-policy`): a
    second user of another chat's group, and a restart bringing a new reset configuration.
    Both are drawn after everything else, so every other seed keeps its scenario."""
    shared = changed = twinned = 0
    for seed in range(200):
        scenario = scenario_for_seed(seed)
        groups = [c for c in scenario.chats if c.chat_id and c.user == "u2"]
        if groups:
            shared += 1
            [guest] = groups
            host = next(c for c in scenario.chats if c.platform_id == guest.chat_id and c is not guest and c.user != "u2")
            assert (host.chat_type, guest.chat_type, host.platform, host.user != guest.user) == ("group", "group", guest.platform, True)
        twins = [c for c in scenario.chats if c.chat_id and c.user != "u2" and c.thread is None]
        if twins:  # one chat id on two platforms (the seventh audit of lazy gateways: no seed reached it)
            twinned += 1
            [twin] = twins
            first = next(c for c in scenario.chats if c.platform_id == twin.chat_id and c is not twin and c.user != "u2")
            assert first.platform != twin.platform
        changes = [e.change for e in scenario.events if isinstance(e, Restart) and e.change is not None]
        changed += bool(changes)
        if groups or changes or twins:
            assert _round_trip(scenario) == scenario
    assert 3 <= shared <= 25 and 3 <= changed <= 30 and 3 <= twinned <= 25, (shared, changed, twinned)
    dense = sum(any(c.chat_id for c in scenario_for_seed(s, "dense").chats) for s in range(50))
    assert dense >= 10


def test_seeds_reach_threads_of_one_chat_deletions_while_down_and_long_outages() -> None:
    """Three draws the eighth audit of lazy gateways found no seed made (a route keyed without
    its thread, a warm restart reviving a row deleted while down, a sweep sparing agents whose
    memory is owed all passed every seed), each drawn after everything else."""
    threads = down = long = 0
    for seed in range(300):
        scenario = scenario_for_seed(seed)
        threaded = [c for c in scenario.chats if c.thread and c.chat_id]
        topics = [c for c in threaded if sum(d.chat_id == c.chat_id for d in threaded) == 2]  # two threads of one id
        if topics:
            threads += 1
            first, twin = topics
            assert (first.platform, first.chat_type, first.chat_id) == (twin.platform, twin.chat_type, twin.chat_id)
            assert first.chat_type == "thread" and first.thread != twin.thread
        events = scenario.events
        up = True
        for i, event in enumerate(events):
            if isinstance(event, (Sigterm, Crash)):
                up = False
            elif isinstance(event, Restart):
                up = True
            elif isinstance(event, DeleteSession) and not up:
                down += 1
                assert any(isinstance(e, Message) and e.chat == event.chat for e in events[:i])
        fails = [e for e in events if isinstance(e, BackendFail)]
        if any(b.t == a.t + a.duration and b.provider == a.provider for a in fails for b in fails):
            long += 1
            assert all(f.duration <= scenario.config.idle_ttl for f in fails)
        assert [e.t for e in events] == sorted(e.t for e in events)
        if topics or down or long:
            assert _round_trip(scenario) == scenario
    assert 3 <= threads <= 30 and 3 <= down <= 40 and 3 <= long <= 60, (threads, down, long)


@pytest.mark.parametrize(("variant", "seed"), [("group-shares-one-session", 4), ("restart-keeps-old-policy", 12),
                                              ("default-policy-misreported", 86)])
def test_generated_seeds_catch_the_variants_of_those_features(variant: str, seed: int) -> None:
    scenario = scenario_for_seed(seed)
    assert run_scenario(scenario, ReferenceGateway(), "reference").passed
    caught = run_scenario(scenario, make(variant), f"reference:{variant}")
    assert not caught.passed  # seed 4: the harness cannot aim a deletion at bob, who has no entry of his own


def test_seeds_reach_the_gateways_default_policy() -> None:
    """`reset: default`, the last feature of the format no seed drew (fuzz could not catch
    `default-policy-misreported`): drawn after everything else, so every other seed keeps its
    scenario, and written and loaded back as `reset: default`."""
    drawn = [seed for seed in range(400) if scenario_for_seed(seed).config.reset_default]
    assert 4 <= len(drawn) <= 30, drawn
    for seed in drawn[:5]:
        scenario = scenario_for_seed(seed)
        assert "reset: default" in dump_text(scenario) and _round_trip(scenario) == scenario
    assert sum(scenario_for_seed(s, "dense").config.reset_default for s in range(50)) >= 5


def test_a_size_in_another_mix_is_a_profile_of_its_own() -> None:
    """`--profile long+dense` and `small+dense`: the size of the first, the mix of the second
    (the probes that found most of the dense mix's defects swapped `PROFILES` entries by hand)."""
    assert PROFILE_NAMES == ("default", "dense", "long", "long+dense", "small", "small+dense")
    for seed in range(5):
        long_dense, small_dense = scenario_for_seed(seed, "long+dense"), scenario_for_seed(seed, "small+dense")
        assert len(long_dense.events) >= 180 and len(small_dense.events) <= 30
        assert gen_profile("long+dense").mix == DENSE and gen_profile("small+dense").events == gen_profile("small").events
        assert long_dense not in (scenario_for_seed(seed, "long"), scenario_for_seed(seed, "dense"))
        assert _round_trip(long_dense) == long_dense and _round_trip(small_dense) == small_dense
    assert any(e.order == BEFORE_TIMERS for e in scenario_for_seed(0, "small+dense").events)
    for bad in ("default+dense", "long+small", "dense+long", "huge"):
        with pytest.raises(ValueError, match=f"unknown profile '{re.escape(bad)}'; known: default, dense, long, long"):
            gen_profile(bad)
    with pytest.raises(ValueError, match="unknown profile 'huge'"):
        scenarios(profile="huge")


class _MakesUpTheWords(ReferenceGateway):
    """Stores each message as its tag and the word 'hello', whatever the user said: a gateway
    that keeps the tag and makes the rest up."""

    def write(self, agent):  # type: ignore[no-untyped-def]
        append = self.store.append
        self.store.append = lambda session, rows: append(  # type: ignore[method-assign]
            session, [row._replace(content=row.content.split(" ", 1)[0] + " hello") if row.role == "user" else row
                      for row in rows])
        try:
            super().write(agent)
        finally:
            del self.store.append


def test_generated_messages_say_words_a_gateway_cannot_make_up() -> None:
    """Every generated message said 'hello' (forty-fourth session): a gateway that stored `[tN]
    hello` made from the tag passed every seed. They say `MESSAGE_TEXTS` by turn number now
    (no choice drawn: each seed's events are as they were), one of them over a kilobyte."""
    from sim.weights import MESSAGE_TEXTS

    scenario = scenario_for_seed(0)
    said = [(e.turn, e.text) for e in scenario.events if isinstance(e, Message)]
    assert all(text == MESSAGE_TEXTS[int(turn[1:]) % len(MESSAGE_TEXTS)] for turn, text in said)
    assert len({text for _turn, text in said}) == len(MESSAGE_TEXTS) and max(map(len, MESSAGE_TEXTS)) > 1024
    caught = [seed for seed in range(5) if not run_scenario(scenario_for_seed(seed), _MakesUpTheWords(), "made-up").passed]
    assert caught == [0, 1, 2, 3, 4]


def _used(scenario: Scenario) -> frozenset[str]:
    """Every name of `conformance.features.FEATURES` the scenario uses: its event kinds, commands,
    muted messages, providers, and the settings `scenario_features` reads off its timeline."""
    from conformance.features import scenario_features
    from sim.scenario import Command

    used = {e.kind for e in scenario.events} | {e.name for e in scenario.events if isinstance(e, Command)}
    used |= {"muted"} if any(isinstance(e, Message) and e.muted for e in scenario.events) else set()
    used |= {"providers"} if scenario.config.providers else set()
    return frozenset(used) | scenario_features(scenario)


@pytest.mark.parametrize("profile", ["default", "dense"])
def test_a_fitted_seed_draws_none_of_what_it_avoids(profile: str) -> None:
    """`fuzz --fit`: each feature a gateway may declare unsupported, avoided alone, is used by
    none of 40 seeds fitted to it, where the same seeds unfitted use it (all but a few, which
    the draws make rare: then at least once). A stop that would cut a turn off waits for its
    reply instead (`restart_after_cut_off_turn`)."""
    from conformance.features import FEATURES

    never_drawn = {"crash_at", "checkpoint"}  # crash_at: `--crash-points` writes it; checkpoint is drawn and not optional
    for feature in sorted(FEATURES - never_drawn):
        avoid = frozenset({feature})
        plain = sum(feature in _used(scenario_for_seed(seed, profile)) for seed in range(40))
        fitted = [seed for seed in range(40) if feature in _used(scenario_for_seed(seed, profile, avoid))]
        assert fitted == [], f"{feature}: fitted seeds {fitted} use it"
        assert plain or profile == "default", f"{feature}: no dense seed of 0-39 uses it, so this proves nothing"


def test_an_empty_fit_is_the_seed_itself() -> None:
    """Fitting to a gateway that lacks nothing changes no seed: the digest of every profile's
    seeds holds (`bench/common.py digest`)."""
    assert all(scenario_for_seed(seed, profile, frozenset()) == scenario_for_seed(seed, profile)
               for profile in ("default", "dense") for seed in range(10))
    assert DENSE.without(frozenset()) is DENSE
