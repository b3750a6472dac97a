"""One scenario's observation log as an inline SVG timeline, with its violations marked.

A lane per chat: a row of session spans (coloured by session, in order of first
appearance) with turns as ticks (filled = acknowledged), a row of memory and plugin hooks,
and a row per memory backend of ingests. A gateway lane on top holds stops, restarts,
checkpoints and locked-store windows; down windows shade every lane. Each violation is a
numbered red line in its session's lane, with rings on the records it cites.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from conformance.checks.model import RunModel
from conformance.harness.verdict import Violation
from conformance.observations import Obs
from reports.axis import Axis
from reports.text import escape
from sim.clock import format_duration

PALETTE = ("#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#76b7b2", "#edc948", "#ff9da7", "#9c755f", "#bab0ac")
RED = "#d62728"
WIDTH, LEFT, RIGHT = 1300, 150, 72
AXIS_H, GATEWAY_H, SESSION_H, HOOK_H, INGEST_H, LANE_GAP = 40, 38, 48, 20, 16, 12
CHAR_PX = 5.6  # rough width of a 9-10px character, for keeping labels apart
GATE_MARK = AXIS_H + 15  # baseline of the gateway lane's marks; its labels go on these rows
GATE_LABELS = (AXIS_H + 14.0, AXIS_H + 27.0)
HOOKS = {"on_session_end": "E", "on_session_finalize": "F", "on_session_switch": "S", "on_session_reset": "R"}
STOPS = {"sigterm": ("▼", "SIGTERM"), "crash": ("✖", "crash"), "restart": ("▲", "restart"), "error": ("⚠", "gateway failed")}
CHAT_MARKS = {"delete_session": ("✂", "delete"), "delete_parent": ("✂", "delete parent")}
NOTE_MARKS = {"evict": "⏏", "heal": "✚", "interrupted": "⊘", "stopped": "⊘"}


@dataclass(frozen=True)
class Numbered:
    """A violation as the report numbers it: number, check id, violation."""

    number: int
    check: str
    violation: Violation


def _t(v: str | float) -> str:
    return f"{v:.1f}" if isinstance(v, float) else escape(str(v))


class _Svg:
    def __init__(self) -> None:
        self.parts: list[str] = []

    def add(self, tag: str, body: str = "", title: str = "", **attrs: str | float) -> None:
        text = " ".join(f'{k.rstrip("_").replace("_", "-")}="{_t(v)}"' for k, v in attrs.items())
        inner = (f"<title>{escape(title)}</title>" if title else "") + body
        self.parts.append(f"<{tag} {text}>{inner}</{tag}>" if inner else f"<{tag} {text}/>")

    def text(self, x: float, y: float, words: str, title: str = "", **attrs: str | float) -> None:
        self.add("text", escape(words), title, x=x, y=y, **attrs)


class _Labels:
    """Labels kept apart on a few text rows; a label with no room is left out (its mark
    keeps the words as a tooltip)."""

    def __init__(self) -> None:
        self.taken: dict[float, list[tuple[float, float]]] = {}

    def place(self, x: float, words: str, rows: tuple[float, ...]) -> float | None:
        right = x + len(words) * CHAR_PX
        for y in rows:
            spans = self.taken.setdefault(y, [])
            if all(right + 3 <= lo or x >= hi + 3 for lo, hi in spans):
                spans.append((x, right))
                return y
        return None


class _Layout:
    """Where each chat's rows are, and which chat a session belongs to."""

    def __init__(self, m: RunModel) -> None:
        self.chats = sorted(m.chats)
        self.backends = ["recorder", *(p.name for p in m.config.providers)]
        self.chat_of: dict[str, str] = {}
        self.sessions: list[str] = []
        for r in m.records:
            if r.session and r.session not in self.sessions and r.kind != "on_session_reset":
                self.sessions.append(r.session)
            if r.kind in ("llm_request", "reply", "delete_session", "delete_parent") and r.chat and r.session:
                self.chat_of.setdefault(r.session, r.chat)
        for chat, segments in m.segments.items():
            for seg in segments:
                if seg.session:
                    self.chat_of.setdefault(seg.session, chat)
        self.top: dict[str, float] = {}
        y = AXIS_H + GATEWAY_H + LANE_GAP
        for chat in self.chats:
            self.top[chat] = y
            y += self.lane_height + LANE_GAP
        self.height = y + 6

    @property
    def lane_height(self) -> float:
        return SESSION_H + HOOK_H + INGEST_H * len(self.backends)

    def colour(self, session: str | None) -> str:
        if session is None or session not in self.sessions:
            return "#888"
        return PALETTE[self.sessions.index(session) % len(PALETTE)]

    def rows(self, chat: str) -> tuple[float, float, dict[str, float]]:
        """(session row mid-y, hook row mid-y, backend -> ingest row mid-y) of a chat's lane.
        Above the session row: a row of marks (deletions, notes, boundary causes); below it:
        turn ids."""
        top = self.top[chat]
        hooks = top + SESSION_H + HOOK_H / 2
        ingest = {b: top + SESSION_H + HOOK_H + INGEST_H * (i + 0.5) for i, b in enumerate(self.backends)}
        return top + 24, hooks, ingest


PATTERNS = ("quiet", "down")  # the fills the SVG defines for itself


def timeline_svg(m: RunModel, violations: list[Numbered], prefix: str = "") -> str:
    """The whole SVG element for one run. `prefix` makes its pattern ids its own: one page holds
    many timelines, and a repeated id made each use the first one (hiding that section blanked
    the others' hatching)."""
    lay = _Layout(m)
    times = [r.t for r in m.records]
    for r in m.records:
        if r.kind in ("db_locked", "backend_fail", "backend_slow"):
            times.append(r.d("until"))
    times += [seg.boundary for segs in m.segments.values() for seg in segs if seg.boundary is not None]
    times += [v.violation.t for v in violations if v.violation.t is not None]
    axis = Axis(times, LEFT, WIDTH - LEFT - RIGHT, m.zone)
    svg = _Svg()
    spots: dict[int, tuple[float, float]] = {}  # record index -> where its mark was drawn
    labels = _Labels()
    _frame(svg, m, lay, axis, labels)
    _windows(svg, m, lay, axis, labels)
    _sessions(svg, m, lay, axis, spots, labels)
    _marks(svg, m, lay, axis, spots, labels)
    _violations(svg, m, lay, axis, spots, violations)
    head = (f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{lay.height:.0f}" '
            f'viewBox="0 0 {WIDTH} {lay.height:.0f}" font-family="system-ui, sans-serif" font-size="11" '
            f'role="img" aria-label="timeline of {escape(m.name)}">')
    text = head + "".join(svg.parts) + "</svg>"
    for pattern in PATTERNS if prefix else ():
        text = text.replace(f'id="{pattern}"', f'id="{prefix}-{pattern}"').replace(f"url(#{pattern})", f"url(#{prefix}-{pattern})")
    return text


def _frame(svg: _Svg, m: RunModel, lay: _Layout, axis: Axis, labels: _Labels) -> None:
    bottom = lay.height - 6
    svg.text(8, 14, m.zone.key, fill="#555")
    for b in axis.breaks:
        svg.add("rect", x=b.x0 + 2, y=AXIS_H - 6, width=max(b.x1 - b.x0 - 4, 1.0), height=bottom - AXIS_H + 6,
                fill="url(#quiet)", title=f"{b.label} with nothing happening, squeezed")
        words = f"≈{b.label}"
        y = labels.place(b.x0, words, (AXIS_H - 9, AXIS_H - 22))
        if y is not None:
            svg.text(b.x0, y, words, fill="#888", font_style="italic", font_size="9")
    for tick in axis.ticks():
        svg.add("line", x1=tick.x, y1=AXIS_H - 6, x2=tick.x, y2=bottom, stroke="#e3e3e3")
        if labels.place(tick.x - 15, tick.label, (AXIS_H - 9,)) is not None:
            svg.text(tick.x, AXIS_H - 9, tick.label, text_anchor="middle", fill="#333")
        if tick.day and labels.place(tick.x - 30, tick.day, (AXIS_H - 22,)) is not None:
            svg.text(tick.x, AXIS_H - 22, tick.day, text_anchor="middle", fill="#777")
    svg.parts.insert(0, '<defs><pattern id="quiet" width="6" height="6" patternUnits="userSpaceOnUse" '
                        'patternTransform="rotate(45)"><rect width="6" height="6" fill="#fafafa"/>'
                        '<line x1="0" y1="0" x2="0" y2="6" stroke="#e6e6e6" stroke-width="2"/></pattern>'
                        '<pattern id="down" width="8" height="8" patternUnits="userSpaceOnUse" '
                        'patternTransform="rotate(45)"><line x1="0" y1="0" x2="0" y2="8" stroke="#999" '
                        'stroke-width="1" stroke-opacity="0.5"/></pattern></defs>')
    svg.text(8, GATE_MARK, "gateway", font_weight="bold", fill="#333")
    for chat in lay.chats:
        top = lay.top[chat]
        session_y, hook_y, ingest = lay.rows(chat)
        svg.add("rect", x=4, y=top - 4, width=WIDTH - 8, height=lay.lane_height + 8, fill="none", stroke="#ddd", rx=4)
        svg.text(8, session_y + 4, chat, font_weight="bold", fill="#222")
        svg.text(20, hook_y + 4, "hooks", fill="#777")
        for backend, y in ingest.items():
            svg.text(20, y + 4, f"ingest: {backend}", fill="#777")


def _windows(svg: _Svg, m: RunModel, lay: _Layout, axis: Axis, labels: _Labels) -> None:
    """Bands: the gateway down, the store locked, a backend failing."""
    bottom = lay.height - 6
    end = m.records[-1].t
    for down, up in m.stopped_at:
        x0, x1 = axis.x(down), axis.x(min(up, end))
        svg.add("rect", x=x0, y=AXIS_H, width=max(x1 - x0, 2.0), height=bottom - AXIS_H, fill="url(#down)",
                title=f"gateway down {m.at(down)}-{m.at(up) if up < 1 << 61 else 'end'}")
        y = labels.place(x0 + 3, "down", GATE_LABELS)
        if y is not None:
            svg.text(x0 + 3, y, "down", fill="#777", font_size="9")
    for r in m.records:
        if r.kind == "db_locked":
            x0, x1 = axis.x(r.t), axis.x(r.d("until"))
            what = f"store locked {m.at(r.t)}-{m.at(r.d('until'))} ({format_duration(r.d('until') - r.t)})"
            svg.add("rect", x=x0, y=AXIS_H + 2, width=max(x1 - x0, 3.0), height=bottom - AXIS_H - 2, fill="#f5a623",
                    fill_opacity="0.18", title=what)
            y = labels.place(x0 + 2, "db locked", GATE_LABELS)
            if y is not None:
                svg.text(x0 + 2, y, "db locked", fill="#b86e00", font_size="9")
        elif r.kind in ("backend_fail", "backend_slow"):
            x0, x1 = axis.x(r.t), axis.x(r.d("until"))
            for chat in lay.chats:
                y = lay.rows(chat)[2].get(r.d("backend"))
                if y is not None:
                    svg.add("rect", x=x0, y=y - INGEST_H / 2 + 1, width=max(x1 - x0, 3.0), height=INGEST_H - 2, fill=RED,
                            fill_opacity="0.15", title=f"backend {r.d('backend')} failing {m.at(r.t)}-{m.at(r.d('until'))}")


def _sessions(svg: _Svg, m: RunModel, lay: _Layout, axis: Axis, spots: dict[int, tuple[float, float]],
              labels: _Labels) -> None:
    """Session spans, contract boundaries and turn ticks in each chat's session row."""
    end_at: dict[str, list[tuple[int, int]]] = {}
    for i, r in enumerate(m.records):
        if r.kind == "on_session_end" and r.session:
            end_at.setdefault(r.session, []).append((i, r.t))
    last = m.records[-1].t
    for chat in lay.chats:
        y, _hook_y, _ingest = lay.rows(chat)
        runs: list[list[int]] = []  # record indexes of this chat's turns, split where its session changes
        for i, r in enumerate(m.records):
            turn = m.turns.get(r.turns[0]) if r.turns else None
            if r.kind in ("llm_request", "reply") and r.chat == chat and r.session and not (turn and turn.delegate):
                if not runs or m.records[runs[-1][-1]].session != r.session:
                    runs.append([])
                runs[-1].append(i)
        for n, run in enumerate(runs):
            session = m.records[run[0]].session or ""
            start, busy = m.records[run[0]].t, m.records[run[-1]].t
            stop = m.records[runs[n + 1][0]].t if n + 1 < len(runs) else last
            stop = min((t for i, t in end_at.get(session, []) if i > run[-1] and t <= stop), default=stop)
            x0, x1 = axis.x(start), axis.x(max(stop, busy))
            colour = lay.colour(session)
            svg.add("rect", x=x0, y=y - 8, width=max(x1 - x0, 2.0), height=16, rx=3, fill=colour, fill_opacity="0.3",
                    stroke=colour, title=f"session {session}: {m.at(start)}-{m.at(stop)}")
            if x1 - x0 > len(session) * CHAR_PX + 8:
                svg.text(x0 + 5, y + 4, session, fill="#222", font_size="10")
        for seg in m.segments.get(chat, []):
            if seg.boundary is not None:
                x = axis.x(seg.boundary)
                svg.add("line", x1=x, y1=y - 12, x2=x, y2=y + 12, stroke="#333", stroke_width="1.5", stroke_dasharray="3,2",
                        title=f"{seg.reason} boundary of {seg.label()} at {m.at(seg.boundary)} (per the contract)")
                ly = labels.place(x + 2, seg.reason or "", (y - 13,))
                if ly is not None:
                    svg.text(x + 2, ly, seg.reason or "", fill="#333", font_size="9")
        for turn in sorted((t for t in m.turns.values() if t.chat == chat), key=lambda t: t.index):
            x = axis.x(turn.arrival)
            colour = lay.colour(turn.session) if turn.session else "#888"
            if turn.request is not None:
                done = turn.reply.t if turn.reply is not None else _stop_after(m, turn.request.t, last)
                svg.add("line", x1=axis.x(turn.request.t), y1=y + 9, x2=axis.x(done), y2=y + 9, stroke=colour, stroke_width="2")
            state = "acknowledged" if turn.acked else "not acknowledged"
            usage = m.records[turn.request_index].detail.get("usage") if turn.request_index >= 0 else None
            if usage is not None:  # what the fake LLM's answer reported, when not the default few tokens
                state += f"; its answer reports usage {usage}"
            svg.add("rect", x=x - 2, y=y - 10, width=4, height=20, fill=colour if turn.acked else "#fff", stroke=colour,
                    stroke_width="1.5", title=f"{turn.id}{' (delegate)' if turn.delegate else ''} at {m.at(turn.arrival)}: {state}")
            spots[turn.index] = (x, y)
            if turn.request is not None:
                spots[turn.request_index] = (axis.x(turn.request.t), y)
            if turn.reply is not None:
                spots[turn.reply_index] = (axis.x(turn.reply.t), y + 9)
            ly = labels.place(x - 5, turn.id, (y + 21,))
            if ly is not None:
                svg.text(x - 5, ly, turn.id, fill="#555", font_size="9")


def _marks(svg: _Svg, m: RunModel, lay: _Layout, axis: Axis, spots: dict[int, tuple[float, float]], labels: _Labels) -> None:
    """Hooks, ingests, stops and restarts, deletions and the gateway's notes."""
    hook_x: dict[str | None, float] = {}
    for i, r in enumerate(m.records):
        x = axis.x(r.t)
        chat = r.chat or (lay.chat_of.get(r.session) if r.session else None)
        rows = lay.rows(chat) if chat in lay.top else None
        words = _words(m, r)
        if r.kind in STOPS or r.kind in ("checkpoint", "quiesce", "skipped", "memory_shutdown"):
            mark, label = STOPS.get(r.kind, ("·", r.kind))
            if r.kind == "sigterm" and r.d("final"):
                label = "final SIGTERM"
            elif r.kind == "checkpoint":
                mark, label = "⚑", str(r.d("name"))
            elif r.kind == "memory_shutdown":
                mark, label = "◦", ""
            svg.text(x, GATE_MARK, mark, words, text_anchor="middle", fill=RED if r.kind in ("crash", "error") else "#333",
                     font_size="12")
            ly = labels.place(x + 6, label, GATE_LABELS) if label else None
            if ly is not None:
                svg.text(x + 6, ly, label, fill="#555", font_size="9")
            spots[i] = (x, GATE_MARK - 4)
        elif r.kind in HOOKS and rows is not None:
            x = max(x, hook_x.get(chat, -1e9) + 13)  # an end and its finalize at one instant sit side by side
            hook_x[chat] = x
            colour = lay.colour(r.session if r.kind != "on_session_switch" else r.d("previous"))
            svg.add("rect", x=x - 6, y=rows[1] - 7, width=12, height=13, rx=2, fill=colour, title=words)
            svg.text(x, rows[1] + 3.5, HOOKS[r.kind], words, text_anchor="middle", fill="#fff", font_size="9", font_weight="bold")
            spots[i] = (x, rows[1])
        elif r.kind == "sync_turn" and rows is not None:
            svg.add("circle", cx=x, cy=rows[1], r=2.5, fill=lay.colour(r.session), title=words)
            spots[i] = (x, rows[1])
        elif r.kind in ("ingest", "ingest_failed") and rows is not None and r.d("backend") in rows[2]:
            y = rows[2][r.d("backend")]
            if r.kind == "ingest":
                svg.add("circle", cx=x, cy=y, r=3, fill=lay.colour(r.session), title=words)
            else:
                svg.text(x, y + 4, "✕", words, text_anchor="middle", fill=RED, font_size="11")
            spots[i] = (x, y)
        elif (r.kind in CHAT_MARKS or (r.kind == "note" and r.d("what") in NOTE_MARKS)) and rows is not None:
            mark, label = CHAT_MARKS.get(r.kind) or (NOTE_MARKS[r.d("what")], str(r.d("what")))
            y = rows[0] - 13
            svg.text(x, y, mark, words, text_anchor="middle", fill="#a33" if r.kind != "note" else "#555", font_size="11")
            ly = labels.place(x + 6, label, (y,))
            if ly is not None:
                svg.text(x + 6, ly, label, fill="#777", font_size="9")
            spots[i] = (x, y - 4)
        elif r.kind == "db_locked":
            spots[i] = (x, AXIS_H + 8)


def _stop_after(m: RunModel, t: int, last: int) -> int:
    """When the gateway next stopped after `t` (a turn in flight then never got its reply)."""
    stops = [down for down, _up in m.stopped_at if down >= t]
    if m.final_stop is not None:
        stops.append(m.final_stop)
    return min(stops, default=last)


def _words(m: RunModel, r: Obs) -> str:
    """A record as a tooltip: time, kind, where, turns, details."""
    parts = [m.at(r.t), r.kind]
    if r.chat:
        parts.append(f"chat={r.chat}")
    if r.session:
        parts.append(f"session={r.session}")
    if r.turns:
        parts.append(",".join(r.turns))
    parts += [f"{k}={_value(v)}" for k, v in sorted(r.detail.items()) if v not in (None, False) and k != "queued"]
    return " ".join(parts)


def _value(value: object) -> str:
    """A detail as JSON, its keys sorted: a record read back from a saved log has its keys in
    the log's order, one the run made in the gateway's, and the page must not differ."""
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)


def _violations(svg: _Svg, m: RunModel, lay: _Layout, axis: Axis, spots: dict[int, tuple[float, float]],
                violations: list[Numbered]) -> None:
    placed: dict[int, int] = {}  # rounded x -> badges already there, to stack them
    for item in violations:
        v = item.violation
        t = v.t if v.t is not None else (m.records[v.records[0]].t if v.records else None)
        if t is None:
            continue
        x = axis.x(t)
        chat = lay.chat_of.get(v.session) if v.session else None
        top, bottom = (lay.top[chat] - 4, lay.top[chat] + lay.lane_height + 4) if chat in lay.top else (AXIS_H, lay.height - 6)
        svg.add("line", x1=x, y1=top, x2=x, y2=bottom, stroke=RED, stroke_width="1.5", stroke_dasharray="5,3")
        stack = placed.get(round(x / 12), 0)
        placed[round(x / 12)] = stack + 1
        by = top + 4 + stack * 17
        svg.add("circle", cx=x, cy=by, r=8, fill=RED, title=f"{item.number}. {item.check}: {v.message}")
        svg.text(x, by + 4, str(item.number), text_anchor="middle", fill="#fff", font_weight="bold", font_size="10")
        for index in v.records:
            if index in spots:
                sx, sy = spots[index]
                svg.add("circle", cx=sx, cy=sy, r=8, fill="none", stroke=RED, stroke_width="2",
                        title=f"{item.number}. cited record #{index}")
