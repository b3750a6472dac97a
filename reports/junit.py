"""JUnit XML: one testcase per (run, check), so CI shows which invariant broke where.

classname is the scenario, name is the check ('I1 exactly-once end'); one testsuite per
gateway. A failure carries every violation message; an expected failure is skipped with
its reason; a gateway error or timeout is an error, and so is a check that raised (type
'checker-error') and a scenario file that could not be loaded (classname = the file, name =
'load'). A pass that examined nothing carries the property `vacuous=true`, each testcase of a
run that crashed the gateway `crashes=played` or `crashes=real`; a failing
testcase's `system-out` says how to reproduce it. Every text is `sessiongate.text.readable`: a
control character anywhere (a scenario name with \x01, a session id with ESC) is written as its
escape, so the file always parses, and a message of megabytes is cut. No timestamps: same runs,
same bytes.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

from conformance.harness.verdict import CHECK_IDS, CHECK_NAMES, Verdict
from reports.rundir import Keyed, Unloaded
from sessiongate.text import readable


def _clean(text: str) -> str:
    return readable(text, lines=True)


def _case(suite: ET.Element, classname: str, check: str, verdict: Verdict | None, reproduce: str, crashes: str = "") -> str:
    """Add one testcase; returns its status. A failing one says how to reproduce it; a run that
    crashed the gateway says whether the crash was `played` or `real` (`RunResult.crashes`)."""
    case = ET.SubElement(suite, "testcase", classname=_clean(classname), name=f"{check} {CHECK_NAMES[check]}", time="0")
    status = verdict.status if verdict is not None else "error"
    if verdict is None:
        ET.SubElement(case, "error", message="no verdict", type="error")
        return status
    if verdict.vacuous or crashes:  # a pass that examined nothing, crashes only played: CI tools show the property
        properties = ET.SubElement(case, "properties")
        if verdict.vacuous:
            ET.SubElement(properties, "property", name="vacuous", value="true")
        if crashes:
            ET.SubElement(properties, "property", name="crashes", value=crashes)
    evidence = _clean("\n".join(v.message for v in verdict.violations))
    if status == "fail":
        node = ET.SubElement(case, "failure", message=_clean(verdict.summary), type=check)
        node.text = evidence
    elif status == "xpass":
        node = ET.SubElement(case, "failure", message=_clean(f"unexpected pass: {verdict.reason}"), type="xpass")
    elif status == "xfail":
        node = ET.SubElement(case, "skipped", message=_clean(f"expected failure: {verdict.reason}"))
        node.text = evidence
    elif status == "skip":
        ET.SubElement(case, "skipped", message=_clean(verdict.reason or "skipped"))
    elif status in ("error", "timeout", "checker-error"):
        ET.SubElement(case, "error", message=_clean(verdict.reason), type=status)
    if status in ("fail", "xpass", "error", "timeout", "checker-error") and reproduce:
        ET.SubElement(case, "system-out").text = _clean(f"reproduce: {reproduce}")
    return status


def render(runs: list[Keyed], gateway: str, unloaded: list[Unloaded]) -> str:
    root = ET.Element("testsuites", name=_clean(f"sessiongate {gateway}"))
    suites: dict[str, ET.Element] = {}
    totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    tallies: dict[str, dict[str, int]] = {}
    for run in runs:
        name = run.result.gateway
        if name not in suites:
            suites[name] = ET.SubElement(root, "testsuite", name=_clean(name))
            tallies[name] = dict.fromkeys(totals, 0)
        classname = run.key.rsplit("/", 1)[-1] if "/" in run.key and run.key.startswith(f"{name}/") else run.key
        reproduce = run.reproduce
        for check in CHECK_IDS:
            status = _case(suites[name], classname, check, run.result.verdicts.get(check), reproduce, run.result.crashes)
            tally = tallies[name]
            tally["tests"] += 1
            tally["failures"] += status in ("fail", "xpass")
            tally["errors"] += status in ("error", "timeout", "checker-error")
            tally["skipped"] += status in ("xfail", "skip")
    if unloaded:
        if gateway not in suites:
            suites[gateway] = ET.SubElement(root, "testsuite", name=_clean(gateway))
            tallies[gateway] = dict.fromkeys(totals, 0)
        for file in unloaded:
            case = ET.SubElement(suites[gateway], "testcase", classname=_clean(file.file), name="load", time="0")
            ET.SubElement(case, "error", message=_clean(file.text), type="load")
            tallies[gateway]["tests"] += 1
            tallies[gateway]["errors"] += 1
    for name, suite in suites.items():
        for key, value in tallies[name].items():
            suite.set(key, str(value))
            totals[key] += value
        suite.set("time", "0")
    for key, value in totals.items():
        root.set(key, str(value))
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
