"""One HTML page comparing saved runs side by side, as wpt.fyi does for browsers: a row per
scenario, a column per run directory (a gateway or release), each cell the scenario's outcome
there, linked to that run's own report.

Rendered from the run directories' logs alone (`reports.rundir.load`, re-judged with the
expectations each run was made with). The page is a pure function of the runs and of the
paths from the page to them: no timestamps, no absolute paths, no script, so the same runs
give the same bytes.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from conformance.harness.runner import RunResult
from conformance.harness.suite import outcome
from conformance.harness.verdict import CHECK_IDS, CHECK_NAMES
from reports.rundir import Keyed, keyed, load
from reports.text import escape

CSS = """
body{font:14px/1.45 system-ui,sans-serif;color:#222;margin:24px;max-width:1600px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 6px}.muted{color:#666}
code{font:12px ui-monospace,monospace}
table{border-collapse:collapse;margin:8px 0}th,td{border:1px solid #ddd;padding:2px 7px;text-align:center;vertical-align:top}
th{background:#f3f3f3;font-weight:600}td.name,th.name{text-align:left}td a{color:inherit;text-decoration:none}
td.pass{background:#e3f4e3;color:#1f6b1f}td.fail,td.error,td.timeout,td.checker-error{background:#fde2e1;color:#a11;font-weight:bold}
td.xfail{background:#fff4d6;color:#8a6100}td.skip{background:#f4f4f4;color:#888}td.absent{color:#bbb}
tr.differs td.name{border-left:4px solid #4e79a7}td.zero{color:#bbb}
"""

# what a cell says for each outcome word (conformance.harness.suite.outcome)
WORDS = {"pass": "pass", "fail": "fail", "xfail": "expected failure", "skip": "unsupported", "error": "gateway error",
         "timeout": "timeout", "checker-error": "checker error"}


class CompareError(ValueError):
    """Two run directories given the same label, or none given."""


@dataclass(frozen=True)
class Column:
    """One run directory: its label, the path from the page to it, and its runs by scenario key."""

    label: str
    href: str
    gateway: str
    runs: dict[str, Keyed]


def column(directory: Path, page_dir: Path, label: str = "") -> Column:
    """A run directory read back (RunDirError if damaged), named `label` or its gateway."""
    gateway, results, _unloaded, strict = load(directory)
    runs = {k.key: k for k in keyed(results, gateway, recorded=True, strict=strict)}
    href = Path(os.path.relpath(directory.resolve(), page_dir.resolve())).as_posix()
    return Column(label or gateway, href, gateway, runs)


def cell(result: RunResult) -> tuple[str, str, str]:
    """(css class, text, tooltip) for one scenario's outcome in one run."""
    word = outcome(result)
    verdicts = result.verdicts
    if word == "fail":
        check = next(c for c in CHECK_IDS if c in verdicts and verdicts[c].status in ("fail", "xpass"))
        verdict = verdicts[check]
        text = f"{'unexpected pass' if verdict.status == 'xpass' else 'fail'} {check}"
        return "fail", text, f"{check} {CHECK_NAMES[check]}: {verdict.summary}"
    if word == "xfail":
        checks = [c for c in CHECK_IDS if c in verdicts and verdicts[c].status == "xfail"]
        return "xfail", f"{WORDS[word]} {','.join(checks)}", "; ".join(f"{c}: {verdicts[c].summary}" for c in checks)
    if word == "skip":
        return "skip", WORDS[word], result.skipped
    if result.failure is not None:
        return word, WORDS.get(word, word), result.failure.message
    if word == "checker-error":
        return word, WORDS[word], "; ".join(v.reason for v in verdicts.values() if v.status == word)
    return word, WORDS.get(word, word), ""


def render(columns: list[Column]) -> str:
    if not columns:
        raise CompareError("nothing to compare: give one or more run directories")
    labels = [c.label for c in columns]
    twice = sorted({label for label in labels if labels.count(label) > 1})
    if twice:
        raise CompareError(f"two run directories are labelled {', '.join(map(repr, twice))}: name them with --label")
    keys: list[str] = []
    seen: set[str] = set()
    for col in columns:  # the first run's order, then what later runs add, in their order
        for key in col.runs:
            if key not in seen:
                seen.add(key)
                keys.append(key)
    out = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
           f"<title>sessiongate compare: {escape(', '.join(labels))}</title><style>{CSS}</style></head><body>",
           "<h1>sessiongate compare</h1>",
           f'<p class="muted">{len(keys)} scenario{"s" if len(keys) != 1 else ""} × {len(columns)} run'
           f'{"s" if len(columns) != 1 else ""}. Each cell is the scenario\'s outcome in that run, judged from its '
           "saved logs with the expectations it was run with, and links to the run's own report; a marked row "
           "differs between runs. Hover a cell for the first violation.</p>"]
    out.append(_scenario_table(columns, keys))
    out.append("<h2>Checks</h2>")
    out.append('<p class="muted">Per check and run: the scenarios it fails, then those it fails as expected.</p>')
    out.append(_check_table(columns))
    out.append("</body></html>\n")
    return "\n".join(out)


def _scenario_table(columns: list[Column], keys: list[str]) -> str:
    head = "".join(f'<th id="col-{j}" title="{escape(c.gateway)} ({escape(c.href)})">'
                   f'<a href="{escape(c.href)}/report.html">{escape(c.label)}</a></th>' for j, c in enumerate(columns))
    rows = [f'<table id="scenarios"><tr><th class="name">scenario</th>{head}</tr>']
    for i, key in enumerate(keys):
        cells, words = [], set()
        for j, col in enumerate(columns):
            run = col.runs.get(key)
            if run is None:
                words.add("absent")
                cells.append(f'<td class="absent" id="c-{i}-{j}">not run</td>')
                continue
            css, text, tip = cell(run.result)
            words.add(text)
            target = f"{col.href}/report.html" + (f"#{run.anchor}" if css != "pass" and css != "skip" else "")
            cells.append(f'<td class="{css}" id="c-{i}-{j}" title="{escape(tip)}"><a href="{escape(target)}">{escape(text)}</a></td>')
        differs = ' class="differs"' if len(words) > 1 else ""
        rows.append(f'<tr id="r-{i}"{differs}><td class="name">{escape(key)}</td>{"".join(cells)}</tr>')
    totals = []
    for col in columns:
        counts: dict[str, int] = {}
        for run in col.runs.values():
            word = outcome(run.result)
            counts[word] = counts.get(word, 0) + 1
        totals.append("<td>" + escape(", ".join(f"{n} {WORDS.get(w, w)}" for w, n in sorted(counts.items()))) + "</td>")
    rows.append(f'<tr id="totals"><th class="name">total</th>{"".join(totals)}</tr>')
    rows.append("</table>")
    return "\n".join(rows)


def _check_table(columns: list[Column]) -> str:
    head = "".join(f"<th>{escape(c.label)}</th>" for c in columns)
    rows = [f'<table id="checks"><tr><th class="name">check</th>{head}</tr>']
    for check in CHECK_IDS:
        cells = []
        for col in columns:
            statuses = [run.result.verdicts[check].status for run in col.runs.values() if check in run.result.verdicts]
            failed, expected = statuses.count("fail") + statuses.count("xpass"), statuses.count("xfail")
            css = "fail" if failed else "xfail" if expected else "zero"
            cells.append(f'<td class="{css}">{failed} / {expected}</td>')
        rows.append(f'<tr id="k-{check}"><td class="name">{check} {escape(CHECK_NAMES[check])}</td>{"".join(cells)}</tr>')
    rows.append("</table>")
    return "\n".join(rows)
