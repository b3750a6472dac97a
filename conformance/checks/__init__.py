"""The checks: one module per invariant of the contract, each a pure function of the log.

`judge(records)` builds the oracle once (`model.RunModel`) and runs every check on it. A
run whose gateway failed (raised, hung, ran out of budget) gets an `error` verdict for every
check, naming the step: an incomplete log proves nothing either way.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

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
from conformance.observations import Obs
from conformance.verdict import CHECK_IDS, Verdict, strictly

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
    model = RunModel.build(records)
    if model.failure is not None:
        failure = model.failure
        status = "timeout" if failure.d("failure") == "timeout" else "error"
        reason = f"gateway {status} at step {failure.step} ({failure.d('event')}): {failure.d('message')}"
        return {check: Verdict(check, status, reason=reason) for check in CHECKS}
    verdicts = {check: _once(fn(model)) for check, fn in CHECKS.items()}
    return {check: strictly(v) for check, v in verdicts.items()} if strict else verdicts


def _once(verdict: Verdict) -> Verdict:
    """Each distinct message once (two chats can point at the same broken session)."""
    seen: set[str] = set()
    kept = tuple(v for v in verdict.violations if not (v.message in seen or seen.add(v.message)))
    if len(kept) == len(verdict.violations):
        return verdict
    return Verdict(verdict.check, verdict.status, kept, verdict.reason, verdict.examined)
