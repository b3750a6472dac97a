"""summary.json: every run's verdicts with evidence, and lifecycle coverage, in one
versioned, canonical document (docs/report-schema.md). Same runs, same bytes."""

from __future__ import annotations

from typing import Any

from conformance.harness.suite import outcome
from conformance.harness.verdict import CHECK_IDS
from reports.coverage import Coverage
from reports.rundir import Keyed, Unloaded, canonical_json
from sessiongate.text import cut

SCHEMA = 2  # 2: each verdict's `examined` and `vacuous`, and `totals.vacuous_checks`


def document(runs: list[Keyed], gateway: str, cover: Coverage, unloaded: list[Unloaded],
             strict: bool = False) -> dict[str, Any]:
    scenarios = []
    for run in runs:
        result = run.result
        scenarios.append({
            "key": run.key,
            "name": result.scenario.name,
            "gateway": result.gateway,
            "file": run.file,
            "seed": result.scenario.seed,
            "log": run.log_path,
            "outcome": outcome(result),
            "verdicts": {c: _bounded(result.verdicts[c].to_detail()) for c in CHECK_IDS if c in result.verdicts},
            **({"crashes": result.crashes} if result.crashes else {}),
        })
    words = [s["outcome"] for s in scenarios]
    totals: dict[str, int] = {w: words.count(w) for w in ("pass", "fail", "xfail", "error", "timeout", "checker-error")}
    if words.count("skip"):  # not judged (a feature the gateway lacks); left out when none: older reports read alike
        totals["skip"] = words.count("skip")
    totals["vacuous_checks"] = sum(v.vacuous for run in runs for v in run.result.verdicts.values())
    if played := sum(run.result.crashes == "played" for run in runs):  # left out when none, as `skip`
        totals["played_crashes"] = played
    return {"schema": SCHEMA, "gateway": gateway, "totals": totals, "scenarios": scenarios,
            "unloaded": [u.to_detail() for u in unloaded], "coverage": cover.to_detail(),
            **({"strict": True} if strict else {})}  # left out when not: older reports read alike


def _bounded(verdict: dict[str, Any]) -> dict[str, Any]:
    """A verdict's words as the gateway made them (an exception's message, a session id quoted in
    evidence), each `cut` to a bounded length: a message of 50 MB, repeated for nine checks,
    made a summary of 450 MB. The log keeps the whole of it."""
    if "reason" in verdict:
        verdict["reason"] = cut(verdict["reason"])
    for evidence in verdict["evidence"]:
        evidence["message"] = cut(evidence["message"])
        if "session" in evidence:
            evidence["session"] = cut(evidence["session"])
    return verdict


def render(runs: list[Keyed], gateway: str, cover: Coverage, unloaded: list[Unloaded], strict: bool = False) -> str:
    return canonical_json(document(runs, gateway, cover, unloaded, strict))
