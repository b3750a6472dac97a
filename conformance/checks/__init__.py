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
from pathlib import Path

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
)
from conformance.checks.model import RunModel
from conformance.harness.verdict import CHECK_IDS, CHECKER_ERROR, Verdict, strictly
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


def judge(records: Sequence[Obs], strict: bool = False) -> dict[str, Verdict]:
    """Every check's verdict on one observation log (`strict`: a vacuous pass fails)."""
    head = records[1] if len(records) > 1 else None
    if head is not None and head.kind == "skipped" and head.d("scope") == "scenario":  # see Run.execute
        return {check: Verdict(check, "skip", reason=f"not judged: {head.d('reason')}") for check in CHECKS}
    try:
        model = RunModel.build(records)
    except Exception as err:  # the oracle cannot read this log: no check can judge it
        return {check: checker_error(check, "the oracle", err) for check in CHECKS}
    if model.failure is not None:
        failure = model.failure
        status = "timeout" if failure.d("failure") == "timeout" else "error"
        reason = f"gateway {status} at step {failure.step} ({failure.d('event')}): {failure.d('message')}"
        return {check: Verdict(check, status, reason=reason) for check in CHECKS}
    verdicts = {}
    for check, fn in CHECKS.items():
        try:
            verdicts[check] = _once(fn(model))
        except Exception as err:  # this check is broken on this log; the others still judge it
            verdicts[check] = checker_error(check, check, err)
    return {check: strictly(v) for check, v in verdicts.items()} if strict else verdicts


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


def _once(verdict: Verdict) -> Verdict:
    """Each distinct message once (two chats can point at the same broken session)."""
    seen: set[str] = set()
    kept = tuple(v for v in verdict.violations if not (v.message in seen or seen.add(v.message)))
    if len(kept) == len(verdict.violations):
        return verdict
    return Verdict(verdict.check, verdict.status, kept, verdict.reason, verdict.examined)
