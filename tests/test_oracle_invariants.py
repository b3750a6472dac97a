"""The oracle asserts its own invariants once it has built (issue #22): a corrupted model fails
loudly, as an `OracleError`, and `judge` reports that as a checker error for every check, never a
verdict drawn from the wrong model nor a crash."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from check_logs import log

from conformance.checks import judge
from conformance.checks.model import NEVER, OracleError, RunModel, Window, invariants, run
from conformance.checks.model.facts import UNDONE
from conformance.harness.verdict import CHECK_IDS, CHECKER_ERROR


def _model(name: str = "resume") -> RunModel:
    return RunModel.build(log(name))


def _verify(model: RunModel) -> None:
    invariants.verify(model, model.turns, model.segments, model.acked_by_session)


def test_the_models_of_the_check_logs_keep_every_invariant() -> None:
    for name in ("idle", "new", "resume", "sigterm", "stopped", "resume-twice-at-once", "held-stop-after-held-turn"):
        _verify(_model(name))  # build verified it already; so does a second look


def _turn_in_two_segments(m: RunModel) -> None:
    first, second = m.segments["alice"][:2]
    second.turns.insert(0, first.turns[0])


def _turn_in_no_segment(m: RunModel) -> None:
    m.segments["alice"][0].turns.pop()


def _segments_overlap(m: RunModel) -> None:
    first, second = m.segments["alice"][:2]
    assert first.boundary is not None
    second.start = first.boundary - 1


def _unended_segment_followed(m: RunModel) -> None:
    m.segments["alice"][0].boundary = None


def _window_reversed(m: RunModel) -> None:
    seg = m.segments["alice"][0]
    seg.window = Window(seg.window.hi, seg.window.lo)


def _window_past_the_log(m: RunModel) -> None:
    m.segments["alice"][-1].window = Window(0, NEVER)


def _lives_overlap(m: RunModel) -> None:
    """The resumed life of s1 begins inside its first life."""
    lives = [seg for seg in m.segments["alice"] if seg.session == m.segments["alice"][0].session]
    assert len(lives) == 2
    lives[1].window = Window(lives[0].window.hi - 1, lives[1].window.hi)


def _acked_out_of_order(m: RunModel) -> None:
    session = next(s for s, turns in m.acked_by_session.items() if len(turns) > 1)
    m.acked_by_session[session].reverse()


def _admitted_turn_undone(m: RunModel) -> None:
    turn = next(t for t in m.turns.values() if t.request is not None)
    turn.done = UNDONE


def _session_kept_wrong(m: RunModel) -> None:
    turn = next(t for t in m.turns.values() if t.reply is not None)
    turn.session = f"{turn.session}-elsewhere"


CORRUPTIONS: dict[str, tuple[Callable[[RunModel], None], str]] = {
    "turn-in-two-segments": (_turn_in_two_segments, "out of order, or twice"),
    "turn-in-no-segment": (_turn_in_no_segment, "turns of"),
    "segments-overlap": (_segments_overlap, "before segment"),
    "unended-segment-followed": (_unended_segment_followed, "has no boundary"),
    "window-reversed": (_window_reversed, "has the window"),
    "window-past-the-log": (_window_past_the_log, "has the window"),
    "lives-overlap": (_lives_overlap, "inside the life before it"),
    "acked-out-of-order": (_acked_out_of_order, "out of order, or wrongly"),
    "admitted-turn-undone": (_admitted_turn_undone, "has no end"),
    "session-kept-wrong": (_session_kept_wrong, "as its records say"),
}


@pytest.mark.parametrize("corruption", sorted(CORRUPTIONS))
def test_a_corrupted_model_breaks_an_invariant_loudly(corruption: str) -> None:
    corrupt, words = CORRUPTIONS[corruption]
    model = _model()
    corrupt(model)
    with pytest.raises(OracleError, match=words):
        _verify(model)


def test_an_oracle_that_breaks_an_invariant_is_a_checker_error_for_every_check(monkeypatch: pytest.MonkeyPatch) -> None:
    """A bug in the building (here: windows set backwards) is no verdict on the gateway."""
    set_windows = run.set_windows

    def backwards(m: object, segments: list) -> None:  # type: ignore[type-arg]
        set_windows(m, segments)  # type: ignore[arg-type]
        for seg in segments:
            seg.window = Window(seg.window.hi, seg.window.lo)

    monkeypatch.setattr(run, "set_windows", backwards)
    verdicts = judge(log("resume"))
    assert sorted(verdicts) == sorted(CHECK_IDS)
    for verdict in verdicts.values():
        assert verdict.status == CHECKER_ERROR
        assert verdict.reason.startswith("checker error in the oracle: OracleError: segment ")
        assert "invariants.py:" in verdict.reason


def test_the_same_log_judged_by_a_sound_oracle_passes() -> None:
    assert {v.status for v in judge(log("resume")).values()} <= {"pass"}


@pytest.mark.parametrize(("variant", "seed"), [("drops-replies", 215), ("drops-replies", 279), ("answers-first-turn-only", 279)])
def test_two_resumes_into_one_session_with_one_switch_keep_their_lives_in_order(variant: str, seed: int) -> None:
    """The window invariant's first find: the second of two /resume lives into one session
    that found no switch of its own fell back to its start, before the first life's switch
    (s8 of bob: [0,548), [548,544), [544,994)). A life now begins no earlier than the last."""
    from conformance.harness.runner import run_scenario
    from reference_impl.variants import make
    from sim.generate import scenario_for_seed

    result = run_scenario(scenario_for_seed(seed), make(variant), f"reference:{variant}")
    assert CHECKER_ERROR not in {v.status for v in result.verdicts.values()}
    model = RunModel.build(result.records)
    for segments in model.segments.values():
        lives: dict[str | None, list[Window]] = {}
        for seg in segments:
            lives.setdefault(seg.session, []).append(seg.window)
        for windows in lives.values():
            assert all(w.lo <= w.hi for w in windows) and [w.lo for w in windows] == sorted(w.lo for w in windows)
