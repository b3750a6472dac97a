"""The checks: one module per invariant of the contract, each a pure function of the log.

`judge(records)` builds the oracle once (`model.RunModel`) and runs every check on it. A
run whose gateway failed (raised, hung, ran out of budget) gets an `error` verdict for every
check, naming the step: an incomplete log proves nothing either way. A check (or the oracle)
that raises gets a `checker-error` verdict naming it, the exception and, where a frame of the
checks held one, the record index: the other checks, and the run, go on.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Protocol

from conformance.checks import (
    i1_end,
    i2_store,
    i3_memory,
    i4_double,
    i5_order,
    i6_policy,
    i7_resources,
    i8_heal,
    i9_liveness,
    parts,
)
from conformance.checks.flights import Flights
from conformance.checks.model import RunModel
from conformance.harness.verdict import CHECK_IDS, CHECKER_ERROR, Verdict, Violation, strictly
from conformance.observations import Obs

CHECKS: dict[str, Callable[[RunModel], Verdict]] = {
    "I1": i1_end.check,
    "I2": i2_store.check,
    "I3": i3_memory.check,
    "I4": i4_double.check,
    "I5": i5_order.check,
    "I6": i6_policy.check,
    "I7": i7_resources.check,
    "I8": i8_heal.check,
    "I9": i9_liveness.check,
}
assert tuple(CHECKS) == CHECK_IDS


def judge(records: Sequence[Obs], strict: bool = False, in_parts: bool | None = None,
          phase: Callable[[str], object] = lambda name: None) -> dict[str, Verdict]:
    """Every check's verdict on one observation log (`strict`: a vacuous pass fails). A spilled
    log past `parts.WHOLE_RECORDS` (one whose whole model would not fit the memory bound) is
    judged in parts where it splits (`parts`; `in_parts` forces either way).
    `phase` is told each phase's name as it ends (the model, each check; the split, each part)."""
    head = records[1] if len(records) > 1 else None
    if head is not None and head.kind == "skipped" and head.d("scope") == "scenario":  # see Run.execute
        return {check: Verdict(check, "skip", reason=f"not judged: {head.d('reason')}") for check in CHECKS}
    split = None
    if in_parts if in_parts is not None else hasattr(records, "walk_kept") and len(records) > parts.WHOLE_RECORDS:
        try:
            split = parts.split_log(records, parts.PART_RECORDS if in_parts is None else 1)
        except Exception as err:  # the oracle cannot read this log: no check can judge it
            return {check: checker_error(check, "the oracle", err) for check in CHECKS}
        phase("split")
    verdicts = _judge_whole(records, phase) if split is None else _judge_parts(split, phase)
    return {check: strictly(v) for check, v in verdicts.items()} if strict else verdicts


def _judge_whole(records: Sequence[Obs], phase: Callable[[str], object]) -> dict[str, Verdict]:
    try:
        model = RunModel.build(records)
    except Exception as err:  # the oracle cannot read this log: no check can judge it
        return {check: checker_error(check, "the oracle", err) for check in CHECKS}
    if model.failure is not None:
        return _failed(model.failure)
    phase("model")
    verdicts = {}
    for check, fn in CHECKS.items():
        try:
            verdicts[check] = _once(_in_order(fn(model)))
        except Exception as err:  # this check is broken on this log; the others still judge it
            verdicts[check] = checker_error(check, check, err)
        phase(check)
    return verdicts


def _failed(failure: Obs) -> dict[str, Verdict]:
    """A run whose gateway failed: an incomplete log proves nothing either way."""
    status = "timeout" if failure.d("failure") == "timeout" else "error"
    reason = f"gateway {status} at step {failure.step} ({failure.d('event')}): {failure.d('message')}"
    return {check: Verdict(check, status, reason=reason) for check in CHECKS}


def _judge_parts(split: parts.LogSplit, phase: Callable[[str], object]) -> dict[str, Verdict]:
    """Every check on each part's model in turn, merged (`_merged`); I3 and I7 gather what
    they need of each part and judge once (`GATHERED`), on the model of the records every part
    reads (`parts`)."""
    try:
        shared = RunModel.build(split.shared())
    except Exception as err:
        return {check: checker_error(check, "the oracle", err) for check in CHECKS}
    if shared.failure is not None:
        return _failed(shared.failure)
    phase("shared")
    found: dict[str, list[Verdict]] = {check: [] for check in CHECKS}
    gathering = {check: gather() for check, gather in GATHERED.items()}
    for number in range(split.parts):
        try:
            model = RunModel.build(split.part(number))
        except Exception as err:
            return {check: checker_error(check, "the oracle", err) for check in CHECKS}
        for check, fn in CHECKS.items():
            try:
                if check in gathering:
                    gathering[check].add(model)
                else:
                    found[check].append(fn(model))
            except Exception as err:
                found[check].append(checker_error(check, check, err))
        del model
        phase(f"part {number + 1}/{split.parts}")
    for check, gathered in gathering.items():
        try:
            found[check].append(gathered.verdict(shared))
        except Exception as err:
            found[check].append(checker_error(check, check, err))
    phase("gathered")
    return {check: _once(_merged(check, verdicts)) for check, verdicts in found.items()}


class Gathered(Protocol):
    """A check judged once on a log judged in parts: what it needs of each part's model
    gathered (`add`), then judged on the model of the records every part reads (`verdict`)."""

    def add(self, m: RunModel) -> None: ...

    def verdict(self, shared: RunModel) -> Verdict: ...


class _I3:
    """I3 words some violations over many sessions (what a backend never took; what came late
    at a SIGTERM): its findings from every part, worded once."""

    def __init__(self) -> None:
        self.found: i3_memory.Findings | None = None

    def add(self, m: RunModel) -> None:
        found = i3_memory.findings(m)
        if self.found is None:
            self.found = found
        else:
            self.found.add(found)

    def verdict(self, shared: RunModel) -> Verdict:
        return (self.found or i3_memory.Findings([])).verdict(shared)


class _I7:
    """I7 judges one agent cache shared by every chat: the turns' flights (`Flights`) gathered
    from every part, judged with the shared model's resource samples."""

    def __init__(self) -> None:
        self.flights = Flights()
        self.acted: set[i7_resources.Acted] = set()  # a record every part reads is found in each
        self.lives: i7_resources.Lives = {}  # each chat's segments are in one part

    def add(self, m: RunModel) -> None:
        self.flights.add(m.turns.values())
        self.acted.update(i7_resources.acted_while_down(m))
        i7_resources.lives_of(m, self.lives)

    def verdict(self, shared: RunModel) -> Verdict:
        return i7_resources.judge(shared, self.flights, self.acted | set(i7_resources.acted_while_down(shared)), self.lives)


GATHERED: dict[str, Callable[[], Gathered]] = {"I3": _I3, "I7": _I7}


def _merged(check: str, verdicts: list[Verdict]) -> Verdict:
    """One verdict of the parts' verdicts: a checker error if any part had one, else a failure
    if any part failed; the violations by their instant as `_in_order` has them, and at one
    instant in log order (by their records, then their words): the parts' own orders cannot
    be merged into the one check's order."""
    for verdict in verdicts:
        if verdict.status == CHECKER_ERROR:
            return verdict
    violations = sorted((v for verdict in verdicts for v in verdict.violations), key=_reading_order)
    status = "fail" if any(verdict.status == "fail" for verdict in verdicts) else "pass"
    return Verdict(check, status, tuple(violations), "", sum(verdict.examined for verdict in verdicts))


_CHECKS_DIR = str(Path(__file__).parent)


def checker_error(check: str, culprit: str, err: Exception) -> Verdict:
    """`check`'s verdict when `culprit` (a check, or the oracle) raised `err`: what, where in
    the code, and the record it was reading when a frame of the checks names one (`index`)."""
    frames = traceback.extract_tb(err.__traceback__)
    where = f" ({frames[-1].filename.rsplit('/', 1)[-1]}:{frames[-1].lineno} in {frames[-1].name})" if frames else ""
    innermost = None  # the frame of the checks that raised (outer ones may hold a stale `index`)
    tb = err.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename.startswith(_CHECKS_DIR):
            innermost = tb.tb_frame
        tb = tb.tb_next
    index = innermost.f_locals.get("index") if innermost is not None else None
    at = f" at record {index}" if type(index) is int else ""
    return Verdict(check, CHECKER_ERROR, reason=f"checker error in {culprit}{at}: {type(err).__name__}: {err}{where}")


def _instant(v: Violation) -> tuple[bool, int]:
    return (v.t is None, v.t or 0)


def _reading_order(v: Violation) -> tuple[bool, int, tuple[int, ...], str]:
    return (v.t is None, v.t or 0, v.records, v.message)


def _in_order(verdict: Verdict) -> Verdict:
    """The violations in the order a reader follows them: by the instant each is at (a boundary,
    a turn), those of no instant last; at one instant, in the check's own order (I4 tells
    repeats in the order of their first ingest). A check finds them session by session, which
    read s2, s1, s4 for boundaries at 09:31, 09:30 and 10:12."""
    if len(verdict.violations) < 2:
        return verdict
    ordered = tuple(sorted(verdict.violations, key=_instant))
    return verdict if ordered == verdict.violations else replace(verdict, violations=ordered)


def _once(verdict: Verdict) -> Verdict:
    """Each distinct message once (two chats can point at the same broken session)."""
    seen: set[str] = set()
    kept = tuple(v for v in verdict.violations if not (v.message in seen or seen.add(v.message)))
    if len(kept) == len(verdict.violations):
        return verdict
    return Verdict(verdict.check, verdict.status, kept, verdict.reason, verdict.examined)
