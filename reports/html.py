"""One self-contained HTML report: verdict table, a timeline per failing run, coverage.

No script and nothing fetched: inline CSS and inline SVG, readable in any browser or
straight from a CI artifact. Passing runs are listed in a folded <details>.
"""

from __future__ import annotations

from conformance.checks.model import RunModel
from conformance.harness.runner import played_note
from conformance.harness.suite import outcome
from conformance.harness.verdict import CHECK_IDS, CHECK_NAMES
from reports.coverage import Coverage, Table
from reports.rundir import Keyed, Unloaded
from reports.text import escape
from reports.timeline import PALETTE, RED, Numbered, timeline_svg

SYMBOL = {"pass": "✓", "fail": "✗", "xfail": "x", "xpass": "X", "error": "E", "timeout": "T", "skip": "-", "checker-error": "!"}
BAD = ("fail", "error", "timeout", "checker-error")

CSS = """
body{font:14px/1.45 system-ui,sans-serif;color:#222;margin:24px;max-width:1400px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 6px}h3{font-size:14px;margin:16px 0 6px}
.muted{color:#666}code,pre{font:12px ui-monospace,monospace}pre{background:#f6f6f6;padding:6px 8px;white-space:pre-wrap;margin:6px 0}
table{border-collapse:collapse;margin:8px 0}th,td{border:1px solid #ddd;padding:2px 7px;text-align:center}
th{background:#f3f3f3;font-weight:600}td.name,th.name{text-align:left}
td.pass{color:#2a7d2a}td.fail,td.xpass,td.error,td.timeout,td.checker-error{background:#fde2e1;color:#a11;font-weight:bold}
td.xfail{background:#fff4d6;color:#8a6100}td.skip{color:#999}td.vacuous{color:#999;font-style:italic}td.zero{background:#fff4d6}td.na{color:#bbb}
section.run{border-top:2px solid #eee;margin-top:18px}.scroll{overflow-x:auto}h2.bad{color:#a11}
ol.evidence li{margin:3px 0}ol.evidence .check{font-weight:600;color:#a11}
.legend span{display:inline-block;margin-right:14px}.swatch{display:inline-block;width:12px;height:12px;
vertical-align:-1px;border-radius:2px;margin-right:4px}
.tick{display:inline-block;width:3px;height:13px;background:#4e79a7;border:1px solid #4e79a7;margin-right:4px;vertical-align:-2px}
.tick.open{background:#fff}details{margin:8px 0}summary{cursor:pointer;font-weight:600}
"""

LEGEND = (
    ("session span", f'<span class="swatch" style="background:{PALETTE[0]}55;border:1px solid {PALETTE[0]}"></span>'),
    ("turn acknowledged", '<span class="tick"></span>'),
    ("turn never acknowledged", '<span class="tick open"></span>'),
    ("E on_session_end, F on_session_finalize, S on_session_switch, R on_session_reset", ""),
    ("● sync_turn / ingest, ✕ ingest failed", ""),
    ("┆ contract boundary", ""),
    ("▼ SIGTERM ✖ crash ▲ restart ⚑ checkpoint", ""),
    ("✂ row deleted, ⏏ evicted, ✚ healed, ⊘ turn interrupted", ""),
    ("hatched: gateway down; amber: store locked; red band: backend failing", ""),
    ("numbered red line: a violation, ringed: the records it cites", f'<span class="swatch" style="background:{RED}"></span>'),
)


def render(runs: list[Keyed], gateway: str, cover: Coverage, unloaded: list[Unloaded]) -> str:
    results = [k.result for k in runs]
    words = [outcome(r) for r in results]
    shown = ("pass", "fail", "xfail", "skip", "error", "timeout", "checker-error")
    counts = ", ".join(f"{words.count(w)} {w}" for w in shown if words.count(w))
    out = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
           f"<title>sessiongate report: {escape(gateway)}</title><style>{CSS}</style></head><body>",
           f"<h1>sessiongate report: {escape(gateway)}</h1>",
           f'<p class="muted">{len(runs)} run{"s" if len(runs) != 1 else ""}: {escape(counts)}. '
           "Times are virtual, in each scenario's zone.</p>"]
    if played := sum(r.crashes == "played" for r in results):
        out.append(f'<p class="muted">{escape(played_note(played, len(runs), gateway))}</p>')
    if unloaded:
        out.append(f'<h2 class="bad">{len(unloaded)} scenario file{"s" if len(unloaded) != 1 else ""} not loaded</h2><ul>')
        out += [f"<li><code>{escape(u.text)}</code></li>" for u in unloaded]
        out.append("</ul>")
    out.append(_verdict_table(runs))
    failing = [k for k, w in zip(runs, words, strict=True) if w in BAD]
    expected = [k for k, w in zip(runs, words, strict=True) if w == "xfail"]
    passing = [k for k, w in zip(runs, words, strict=True) if w == "pass"]
    if failing or expected:
        out.append('<h2>Timelines</h2><p class="legend muted">' +
                   "".join(f"<span>{swatch}{escape(text)}</span>" for text, swatch in LEGEND) + "</p>")
    out += [_run_section(k) for k in failing]
    if expected:
        out.append(f"<details><summary>{len(expected)} run{'s' if len(expected) != 1 else ''} with expected failures only</summary>")
        out += [_run_section(k) for k in expected]
        out.append("</details>")
    if passing:
        out.append(f"<details><summary>{len(passing)} passing run{'s' if len(passing) != 1 else ''}</summary><ul>")
        out += [f"<li>{escape(k.key)} <span class=muted>{escape(k.file)} "
                f"seed {k.result.scenario.seed}</span></li>" for k in passing]
        out.append("</ul></details>")
    out.append("<h2>Lifecycle coverage</h2>")
    out.append('<p class="muted">How often each session state met each event, and how each boundary got its '
               "on_session_end, over these runs (read from the logs; see docs/coverage.md). "
               "Highlighted: never reached; n/a: cannot happen; grey: only a gateway that breaks the contract "
               "lands there.</p>")
    out += [_coverage_table(cover.lifecycle, "state before the event"), _coverage_table(cover.boundaries, "boundary cause")]
    out.append("</body></html>\n")
    return "\n".join(out)


def _verdict_table(runs: list[Keyed]) -> str:
    head = "".join(f'<th title="{escape(CHECK_NAMES[c])}">{c}</th>' for c in CHECK_IDS)
    rows = [f'<table><tr><th class="name">run</th><th>outcome</th>{head}</tr>']
    rank = {word: n for n, word in enumerate((*BAD, "xfail", "pass"))}
    for k in sorted(runs, key=lambda k: rank.get(outcome(k.result), 0)):  # failing first, each group in run order
        word = outcome(k.result)
        name = escape(k.key)
        if word != "pass":
            name = f'<a href="#{k.anchor}">{name}</a>'
        cells = []
        for check in CHECK_IDS:
            verdict = k.result.verdicts.get(check)
            status = verdict.status if verdict else "error"
            tip = escape(verdict.summary if verdict else "no verdict")
            if verdict is not None and verdict.vacuous:
                cells.append('<td class="vacuous" title="passed having examined nothing">○</td>')
                continue
            cells.append(f'<td class="{status}" title="{tip}">{SYMBOL[status]}</td>')
        rows.append(f'<tr><td class="name">{name}</td><td class="{word}">{word}</td>{"".join(cells)}</tr>')
    rows.append("</table>")
    rows.append('<p class="muted">✓ pass ○ vacuous pass (examined nothing) ✗ fail x expected failure X unexpected pass '
                'E error T timeout - skip ! checker error</p>')
    return "\n".join(rows)


def numbered(k: Keyed) -> list[Numbered]:
    """Every violation of the run's failing (or expected-failing) checks, numbered from 1."""
    out: list[Numbered] = []
    for check in CHECK_IDS:
        verdict = k.result.verdicts.get(check)
        if verdict is not None and verdict.status in ("fail", "xfail"):
            for violation in verdict.violations:
                out.append(Numbered(len(out) + 1, check, violation))
    return out


CRASHES = {"played": " · crashes played (its own crash() call)", "real": " · crashes real (the process killed)"}


def _run_section(k: Keyed) -> str:
    result, scenario = k.result, k.result.scenario
    try:
        model: RunModel | None = RunModel.build(result.records)
    except Exception:  # the oracle cannot read this log: its checker-error verdicts say why
        model = None
    word = outcome(result)
    parts = [f'<section class="run" id="{k.anchor}"><h2>{escape(k.key)}: {word}</h2>',
             f'<p class="muted">{escape(k.file or "(no file)")} · seed {scenario.seed} · '
             f"zone {escape(scenario.zone)} · gateway {escape(result.gateway)} · "
             f"{escape(result.profile.finalization)} finalization{CRASHES.get(result.crashes, '')}</p>"]
    if scenario.header:
        parts.append(f"<pre>{escape(scenario.header, lines=True)}</pre>")
    items = numbered(k)
    if k.reproduce and word != "pass":
        parts.append(f"<p>reproduce: <code>{escape(k.reproduce)}</code></p>")
    if model is not None:
        parts.append(f'<div class="scroll">{timeline_svg(model, items, prefix=k.anchor)}</div>')
    else:
        parts.append('<p class="muted">no timeline: the oracle could not read this log (see the checker error below)</p>')
    if items and model is not None:
        parts.append('<ol class="evidence">')
        for item in items:
            v = item.violation
            when = f" <span class=muted>at {escape(model.at(v.t))}</span>" if v.t is not None else ""
            log = escape(k.log_path)  # record #i is line i + 1 of the run's log, beside this page
            links = ", ".join(f'<a href="{log}" title="line {i + 1} of {log}">#{i}</a>' for i in v.records)
            cited = f" <span class=muted>records {links}</span>" if v.records else ""
            parts.append(f'<li value="{item.number}"><span class="check">{item.check} {escape(CHECK_NAMES[item.check])}</span>: '
                         f"{escape(v.message)}{when}{cited}</li>")
        parts.append("</ol>")
    explained = ("error", "timeout", "xpass", "xfail", "checker-error")
    others = [(c, v) for c, v in result.verdicts.items() if v.status in explained and v.reason]
    reasons = sorted({f"{v.status}: {v.reason}" for _c, v in others})
    parts += [f"<p><b>{escape(line.split(':', 1)[0])}</b>:{escape(line.split(':', 1)[1])}</p>" for line in reasons]
    parts.append("</section>")
    return "\n".join(parts)


def _coverage_table(table: Table, corner: str) -> str:
    rows = [f'<table><tr><th class="name">{escape(corner)}</th>' + "".join(f"<th>{escape(c)}</th>" for c in table.columns) + "</tr>"]
    for r in table.rows:
        cells = []
        for c in table.columns:
            if (r, c) in table.impossible:
                cells.append('<td class="na">n/a</td>')
                continue
            count = table.counts.get((r, c), 0)
            tip = escape(", ".join(table.scenarios.get((r, c), [])[:12]))
            if (r, c) in table.nonconforming:
                cells.append(f'<td class="{"fail" if count else "na"}" title="only a nonconforming gateway lands here">{count}</td>')
            else:
                cells.append('<td class="zero">0</td>' if not count else f'<td title="{tip}">{count}</td>')
        rows.append(f'<tr><th class="name">{escape(r)}</th>{"".join(cells)}</tr>')
    rows.append("</table>")
    return "\n".join(rows)
