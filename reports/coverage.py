"""Lifecycle coverage: which (session state, event) and (boundary cause, hook path) pairs a set
of runs exercised, read from the observation logs alone.

A state is the state of a chat's current session just before the event (the evicted
session's state for an eviction). Global events (watcher tick, sweep, SIGTERM, crash, locked
DB) count once per chat that has a session. The final SIGTERM of quiescence is not counted.
Watcher ticks and sweeps come from `note` records (what=tick/watcher, what=sweep) when the
gateway writes them; otherwise they are inferred from background instants (gateway output
at an instant no input or reply explains): a watcher tick under eager finalization, a sweep
when the instant evicts for idle TTL or under lazy finalization. A tick that changes nothing
leaves no trace, so inferred counts are lower bounds.

`measure_code` runs scenarios under coverage.py for line coverage of a gateway's own package.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from conformance.checks.model import RunModel, Segment
from conformance.observations import CacheReplay, Obs

STATES = ("live+cached", "live+evicted", "past boundary", "ended", "deleted row", "shut down")
EVENTS = ("message", "command", "watcher tick", "sweep", "eviction", "SIGTERM", "crash", "delete", "locked DB")
CAUSES = ("idle", "daily", "new", "switch")
PATHS = ("watcher", "message", "command", "turn end", "restart", "not ended")
# Cells that cannot happen: no background work or second stop while the gateway is down, and
# an agent that is not cached cannot be evicted.
IMPOSSIBLE = frozenset({*(("shut down", e) for e in ("watcher tick", "sweep", "eviction", "SIGTERM", "crash")),
                        ("live+evicted", "eviction")})
# Cells only a gateway that breaks the contract lands in: /new and /resume end the session
# when the command takes effect (at once, or when the turn in flight ends), never later.
NONCONFORMING = frozenset((cause, path) for cause in ("new", "switch") for path in ("watcher", "message", "not ended"))

_CHAT_EVENTS = {"message": "message", "command": "command", "delete_session": "delete", "delete_parent": "delete"}
_GLOBAL_EVENTS = {"sigterm": "SIGTERM", "crash": "crash", "db_locked": "locked DB"}
_TICK_NOTES = {"tick": "watcher tick", "watcher": "watcher tick", "sweep": "sweep"}
_QUIET = frozenset({"resources", "durable"})
_TRIGGERS = {"message": "message", "delegate": "message", "command": "command", "reply": "turn end"}


@dataclass
class Table:
    """Counts per (row, column) cell, and which scenarios reached each cell."""

    rows: tuple[str, ...]
    columns: tuple[str, ...]
    counts: dict[tuple[str, str], int] = field(default_factory=dict)
    scenarios: dict[tuple[str, str], list[str]] = field(default_factory=dict)
    impossible: frozenset[tuple[str, str]] = frozenset()
    nonconforming: frozenset[tuple[str, str]] = frozenset()

    def add(self, row: str, column: str, scenario: str) -> None:
        cell = (row, column)
        self.counts[cell] = self.counts.get(cell, 0) + 1
        names = self.scenarios.setdefault(cell, [])
        if scenario not in names:
            names.append(scenario)

    def unreached(self) -> list[tuple[str, str]]:
        """Cells a conforming gateway can reach that no run reached."""
        skip = self.impossible | self.nonconforming
        return [(r, c) for r in self.rows for c in self.columns if (r, c) not in self.counts and (r, c) not in skip]

    def to_detail(self) -> dict[str, Any]:
        cells: dict[str, dict[str, Any]] = {}
        for r in self.rows:
            cells[r] = {}
            for c in self.columns:
                if (r, c) in self.impossible:
                    cells[r][c] = None
                else:
                    cells[r][c] = {"count": self.counts.get((r, c), 0), "scenarios": self.scenarios.get((r, c), [])}
        return {"rows": list(self.rows), "columns": list(self.columns), "cells": cells,
                "nonconforming": [[r, c] for r, c in sorted(self.nonconforming)]}


@dataclass
class Coverage:
    lifecycle: Table
    boundaries: Table
    crash_points: dict[str, list[str]] = field(default_factory=dict)  # declared point -> scenarios that fired it

    def unfired(self) -> list[str]:
        """Crash points the gateway declares (its logged profile) that no scenario fired."""
        return sorted(point for point, fired in self.crash_points.items() if not fired)

    def to_detail(self) -> dict[str, Any]:
        detail = {"lifecycle": self.lifecycle.to_detail(), "boundaries": self.boundaries.to_detail()}
        if self.crash_points:
            detail["crash_points"] = {point: self.crash_points[point] for point in sorted(self.crash_points)}
        return detail


def _crash_points(records: list[Obs], points: dict[str, list[str]]) -> None:
    """The points a log's profile declares, and the scenario under each one its crashes fired."""
    head = records[0] if records else None
    if head is None or head.kind != "scenario":
        return
    for point in (head.d("profile") or {}).get("crash_points", ()):
        points.setdefault(point, [])
    for r in records:
        if r.kind == "crash" and r.d("point") in points and head.d("name") not in points[r.d("point")]:
            points[r.d("point")].append(head.d("name"))


def lifecycle_coverage(logs: Iterable[list[Obs]]) -> Coverage:
    """Coverage over observation logs; each cell names the scenarios that reached it."""
    cover = Coverage(Table(STATES, EVENTS, impossible=IMPOSSIBLE), Table(CAUSES, PATHS, nonconforming=NONCONFORMING))
    for records in logs:
        _crash_points(records, cover.crash_points)
        try:
            model = RunModel.build(records)
        except Exception:  # a log the oracle cannot read reaches nothing (its verdicts are checker errors)
            continue
        for state, event in _state_events(model):
            cover.lifecycle.add(state, event, model.name)
        for cause, path in _boundary_paths(model):
            cover.boundaries.add(cause, path, model.name)
    return cover


class _Walk:
    """The gateway's state as the log unfolds: up or down, cached agents, ended and deleted rows."""

    def __init__(self, m: RunModel) -> None:
        self.m = m
        self.up = True
        self.cache = CacheReplay()  # resources records are deltas
        self.cached = self.cache.cached  # session -> busy, as of the record last taken in
        self.ends: dict[str, list[int]] = {}
        self.deleted: set[str] = set()
        for index, r in enumerate(m.records):
            if r.kind == "on_session_end" and r.session:
                self.ends.setdefault(r.session, []).append(index)

    def advance(self, r: Obs) -> None:
        """Take in record `r` (after counting the events it starts)."""
        kind = r.kind
        if kind == "resources":
            self.cache.apply(r.detail)
        elif kind in ("sigterm", "crash"):
            self.up = False
        elif kind == "restart":
            self.up = True
        elif kind in ("delete_session", "delete_parent") and r.session:
            self.deleted.add(r.session)
        elif kind == "note" and r.d("what") == "heal" and r.session:
            self.deleted.discard(r.session)
        elif kind == "durable":
            self.deleted -= set(r.d("sessions", {}))

    def segment(self, chat: str, index: int, session: str | None = None) -> Segment | None:
        """The chat's segment current at `index` (or the latest one of `session`)."""
        found = None
        for seg in self.m.segments.get(chat, []):
            if seg.start_index < index and (session is None or seg.session == session):
                found = seg
        return found

    def state(self, seg: Segment, index: int) -> str:
        session = seg.session
        if not self.up:
            return "shut down"
        if session in self.deleted:
            return "deleted row"
        if any(max(seg.start_index, seg.window.lo) <= i < index for i in self.ends.get(session or "", [])):
            return "ended"
        r = self.m.records[index]
        if seg.boundary is not None and (seg.boundary < r.t or (
                seg.boundary == r.t and not (r.kind == "command" and seg.reason in ("new", "switch")))):
            return "past boundary"  # but a /new or /resume is its own boundary: live just before it
        return "live+cached" if session in self.cached else "live+evicted"

    def chat_states(self, index: int) -> list[str]:
        out = []
        for chat in sorted(self.m.segments):
            seg = self.segment(chat, index)
            if seg is not None and seg.session is not None:
                out.append(self.state(seg, index))
        return out


def _state_events(m: RunModel) -> list[tuple[str, str]]:
    walk = _Walk(m)
    chat_of = {seg.session: chat for chat, segs in m.segments.items() for seg in segs if seg.session}
    background = _background_instants(m)
    noted = any(r.kind == "note" and r.d("what") in _TICK_NOTES for r in m.records)
    out: list[tuple[str, str]] = []
    for index, r in enumerate(m.records):
        kind = r.kind
        if kind in _CHAT_EVENTS and r.chat:
            turn = m.turns.get(r.turns[0]) if r.turns else None
            seg = walk.segment(r.chat, index)
            if not (turn and turn.delegate) and seg is not None and seg.session is not None:
                out.append((walk.state(seg, index), _CHAT_EVENTS[kind]))
        elif kind in _GLOBAL_EVENTS and not r.d("final"):
            out += [(state, _GLOBAL_EVENTS[kind]) for state in walk.chat_states(index)]
        elif kind == "note" and r.d("what") == "evict" and r.session in chat_of:
            seg = walk.segment(chat_of[r.session], index, r.session)
            if seg is not None:
                out.append((walk.state(seg, index), "eviction"))
        if kind == "note" and r.d("what") in _TICK_NOTES:
            out += [(state, _TICK_NOTES[r.d("what")]) for state in walk.chat_states(index)]
        elif not noted and index in background:
            for event in background[index]:
                out += [(state, event) for state in walk.chat_states(index)]
        walk.advance(r)
    return out


def _background_instants(m: RunModel) -> dict[int, list[str]]:
    """Index of the first record of each instant whose gateway output no input or reply explains."""
    out: dict[int, list[str]] = {}
    index, records = 0, m.records
    while index < len(records):
        t = records[index].t
        end = index
        while end < len(records) and records[end].t == t:
            end += 1
        loud = [i for i in range(index, end) if records[i].kind not in _QUIET]
        # A reply explains its instant even when the turn's memory sync came before it (the
        # reference syncs first, so a crash just after the reply loses nothing).
        if loud and index > 0 and records[loud[0]].kind not in ("reply", "error", "quiesce") \
                and records[loud[0]].kind not in _INPUTS and not any(records[i].kind == "reply" for i in loud):
            sweep = any(records[i].kind == "note" and records[i].d("what") == "evict" and records[i].d("why") == "idle_ttl"
                        for i in loud)
            events = ["watcher tick"] if m.watched else []
            if sweep or not m.eager:
                events.append("sweep")
            out[loud[0]] = events
        index = end
    return out


_INPUTS = frozenset(
    {"scenario", "message", "command", "delegate", "advance", "sigterm", "crash", "restart", "delete_session",
     "delete_parent", "db_locked", "backend_fail", "backend_slow", "checkpoint", "skipped"}
)


def _boundary_paths(m: RunModel) -> list[tuple[str, str]]:
    """For each boundary the contract sees: its cause and what triggered its on_session_end."""
    ends = [(i, r) for i, r in enumerate(m.records) if r.kind == "on_session_end"]
    out = []
    for chat in sorted(m.segments):
        for seg in m.segments[chat]:
            if seg.boundary is None or seg.reason is None or seg.session is None:
                continue
            mine = [i for i, r in ends if r.session == seg.session and i >= seg.start_index]
            out.append((seg.reason, _trigger(m, chat, mine[0]) if mine else "not ended"))
    return out


def _trigger(m: RunModel, chat: str, index: int) -> str:
    """What at the same instant, in the same chat, set off the record at `index`."""
    t = m.records[index].t
    for j in range(index - 1, -1, -1):  # back to the first record of another instant (no copy of the log)
        r = m.records[j]
        if r.t != t:
            break
        if r.kind == "restart":
            return "restart"
        if r.kind == "note" and r.d("what") in _TICK_NOTES:
            return "watcher"
        if r.kind in _TRIGGERS and r.chat == chat:
            return _TRIGGERS[r.kind]
    return "watcher"


def measure_code(paths: list[str], gateway: str, source: list[str], data_file: str = ".coverage") -> str:
    """Run scenario files against `gateway` under coverage.py, measuring the packages named
    in `source`. Parallel mode: each process (each xdist worker) saves its own suffixed data
    file and returns its name; once every process is done, `combine_code(data_file)` merges
    them. Lines that run at import count only if the package is first imported here."""
    import coverage

    from conformance.harness.registry import resolve
    from conformance.harness.runner import run_scenario
    from conformance.harness.suite import load_all, scenario_paths

    cov = coverage.Coverage(data_file=data_file, data_suffix=True, source=source)
    with warnings.catch_warnings():  # "module never imported", "no data collected": the caller says so in its words
        warnings.simplefilter("ignore", coverage.exceptions.CoverageWarning)
        cov.start()
        try:
            factory = resolve(gateway)
            scenarios, _errors = load_all(scenario_paths(paths))
            for scenario in scenarios:
                run_scenario(scenario, factory(), gateway, check=False)
        finally:
            cov.stop()
            cov.save()
    return str(cov.get_data().data_filename())


def combine_code(data_file: str = ".coverage") -> tuple[float, str]:
    """Merge the per-process data files beside `data_file` into it: (percent, text report)."""
    import io
    import os

    import coverage

    cov = coverage.Coverage(data_file=data_file)
    cov.combine([os.path.dirname(os.path.abspath(data_file))], keep=False)
    cov.save()
    text = io.StringIO()
    percent = float(cov.report(file=text, show_missing=False))
    return percent, text.getvalue()
