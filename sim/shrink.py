"""Shrinking a failing scenario to a small one that fails the same way.

Delta debugging (ddmin, removing ever smaller chunks of the timeline), then simplifications
of the configuration (fewer chats, providers removed, policies simplified, the cache cap
raised…) and of the events (an `order: before-timers` put back to the default where the
failure does not need it, and kept where it does), repeated until nothing more goes. It works on `Scenario` objects, whose turn ids
survive the removal of other turns; a file renumbers them (the loader numbers turns in file
order), so `write_beside` loads what it wrote and says whether that still fails. What
"fails" means is the caller's predicate: the conformance side keeps the failure of one
check id (`conformance.search.fuzz.same_failure`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TypeVar

from sim.clock import HOUR, MINUTE, SECOND
from sim.kinds import covered
from sim.loader import load_text
from sim.scenario import (
    AFTER_TIMERS,
    Advance,
    Chat,
    Event,
    GatewayConfig,
    Message,
    ResetPolicy,
    Scenario,
)
from sim.writer import dump_text

T = TypeVar("T")
Predicate = Callable[[Scenario], bool]
DEFAULT_MAX_RUNS = 1500
MAX_RETIMED = 40  # retiming tries two candidates per event: only for short timelines


class _Budget:
    """Counts predicate calls (not seconds: a shrink is as deterministic as a run)."""

    def __init__(self, fails: Predicate, max_runs: int) -> None:
        self._fails, self.max_runs = fails, max_runs
        self.runs = 0
        self._seen: dict[Scenario, bool] = {}

    @property
    def spent(self) -> bool:
        return self.runs >= self.max_runs

    def fails(self, scenario: Scenario) -> bool:
        if scenario in self._seen:
            return self._seen[scenario]
        if self.spent:
            return False
        self.runs += 1
        verdict = self._seen[scenario] = bool(self._fails(scenario))
        return verdict


@dataclass(frozen=True)
class Shrunk:
    scenario: Scenario  # turn ids as in the original
    runs: int
    original_events: int
    exhausted: bool  # the run budget ran out before a fixpoint


def ddmin(items: Sequence[T], fails: Callable[[list[T]], bool]) -> list[T]:
    """A 1-minimal sublist that still fails: remove chunks of halving size while any goes."""
    current = list(items)
    chunks = 2
    while len(current) >= 2:
        size = -(-len(current) // chunks)
        removed = False
        start = 0
        while start < len(current):
            candidate = current[:start] + current[start + size:]
            if candidate and fails(candidate):
                current, removed = candidate, True
            else:
                start += size
        if removed:
            chunks = max(chunks - 1, 2)
        elif size == 1:
            break
        else:
            chunks = min(chunks * 2, len(current))
    return current


def _tidy(events: Sequence[Event]) -> tuple[Event, ...]:
    """Drop advances that no longer move time (a file cannot say 'advance 0')."""
    out: list[Event] = []
    for event in events:
        previous = out[-1].t if out else None
        if isinstance(event, Advance) and previous is not None and event.t <= previous:
            continue
        out.append(event)
    return tuple(out)


def _with_events(scenario: Scenario, events: Sequence[Event]) -> Scenario:
    return replace(scenario, events=_tidy(events))


_NAMES: dict[str, str | None] = {
    # What an event of each kind names that the shrinker may remove, taking the event with it: a
    # chat (its `chat`), a provider (its `provider`), or nothing (ddmin alone removes it).
    "message": "chat", "command": "chat", "delegate": "chat", "advance": None, "sigterm": None, "crash": None,
    "restart": None, "delete_session": "chat", "delete_parent": "chat", "db_locked": None, "backend_fail": "provider",
    "backend_slow": "provider", "checkpoint": None, "crash_at": None,
}
covered("shrink", _NAMES)


def _uses(event: Event, chat: str) -> bool:
    return _NAMES[event.kind] == "chat" and event.chat == chat  # type: ignore[attr-defined]


def _only_chats(s: Scenario, chats: tuple[Chat, ...]) -> Scenario:
    """`s` with only these chats: the others' events and their own finalization modes go."""
    names = {c.name for c in chats}
    modes = tuple(entry for entry in s.config.finalization_by_chat if entry[0] in names)
    return replace(s, chats=chats, config=replace(s.config, finalization_by_chat=modes),
                   events=_tidy([e for e in s.events if not any(_uses(e, c.name) for c in s.chats if c.name not in names)]))


def _simplifications(s: Scenario) -> Iterator[Scenario]:
    """Each candidate is one simpler scenario; the first that still fails is kept."""
    config = s.config
    for chat in s.chats[1:] if len(s.chats) > 1 else ():
        yield _only_chats(s, tuple(c for c in s.chats if c != chat))
    if len(s.chats) > 1:
        yield _only_chats(s, (s.chats[-1],))
    for provider in config.providers:
        yield replace(s, config=replace(config, providers=tuple(p for p in config.providers if p != provider)),
                      events=_tidy([e for e in s.events
                                    if not (_NAMES[e.kind] == "provider" and e.provider == provider.name)]))  # type: ignore[attr-defined]
    for index, provider in enumerate(config.providers):
        if provider.retain_every_n_turns > 1:
            providers = list(config.providers)
            providers[index] = replace(provider, retain_every_n_turns=1)
            yield replace(s, config=replace(config, providers=tuple(providers)))
    if config.reset_by_platform:
        yield replace(s, config=replace(config, reset_by_platform=()))
    if config.reset_by_chat_type:
        yield replace(s, config=replace(config, reset_by_chat_type=()))
    modes = config.finalization_by_chat
    if modes:  # every chat in the gateway's mode, else one back at a time
        yield replace(s, config=replace(config, finalization_by_chat=()))
        for entry in modes if len(modes) > 1 else ():
            yield replace(s, config=replace(config, finalization_by_chat=tuple(e for e in modes if e != entry)))
    for policy in _simpler_policies(config.reset):
        yield replace(s, config=replace(config, reset=policy))
    defaults = GatewayConfig()
    for name, value in (("cache_cap", defaults.cache_cap), ("idle_ttl", HOUR), ("watcher_interval", 5 * MINUTE),
                        ("turn_latency", 2 * SECOND), ("usage", defaults.usage)):
        if getattr(config, name) != value:
            yield replace(s, config=replace(config, **{name: value}))
    if s.zone != "UTC":
        yield replace(s, zone="UTC")
    plain = tuple(Chat(c.name) for c in s.chats)
    if plain != s.chats:
        yield replace(s, chats=plain)
    if any(isinstance(e, Message) and e.muted for e in s.events):
        yield replace(s, events=tuple(replace(e, muted=False) if isinstance(e, Message) else e for e in s.events))
    if any(isinstance(e, Message) and e.usage is not None for e in s.events):  # every answer reports the config's usage
        yield replace(s, events=tuple(replace(e, usage=None) if isinstance(e, Message) else e for e in s.events))
    before = [i for i, e in enumerate(s.events) if e.order != AFTER_TIMERS]
    if before:  # every event after the timers of its instant, as before orders could be chosen; else one at a time
        yield replace(s, events=tuple(replace(e, order=AFTER_TIMERS) if e.order != AFTER_TIMERS else e for e in s.events))
        for i in before if len(before) > 1 and len(s.events) <= MAX_RETIMED else ():
            yield replace(s, events=(*s.events[:i], replace(s.events[i], order=AFTER_TIMERS), *s.events[i + 1:]))
    yield from _retimed(s)


def _retimed(s: Scenario) -> Iterator[Scenario]:
    """Shorter waits: the scenario starts at its first event, or a long gap is halved or cut
    to a minute (everything after it moves earlier with it)."""
    if len(s.events) > MAX_RETIMED or not s.events:
        return
    if s.events[0].t > s.start:
        yield replace(s, start=s.events[0].t)
    previous = s.start
    for index, event in enumerate(s.events):
        gap = event.t - previous
        previous = event.t
        for shorter in sorted({MINUTE, gap // 2 // SECOND * SECOND}):
            if gap > MINUTE and shorter < gap:
                shift = gap - shorter
                events = s.events[:index] + tuple(replace(e, t=e.t - shift) for e in s.events[index:])
                yield replace(s, events=events)


def _simpler_policies(policy: ResetPolicy) -> Iterator[ResetPolicy]:
    if policy.mode != "none":
        yield ResetPolicy()
    if policy.mode == "both":
        yield replace(policy, mode="idle", at_hour=ResetPolicy().at_hour, daily_min_idle_minutes=0)
        yield replace(policy, mode="daily", idle_minutes=ResetPolicy().idle_minutes)
    if policy.daily_min_idle_minutes:
        yield replace(policy, daily_min_idle_minutes=0)


def shrink(scenario: Scenario, fails: Predicate, *, max_runs: int = DEFAULT_MAX_RUNS) -> Shrunk:
    """The smallest scenario found that `fails` still holds for (the original must fail)."""
    budget = _Budget(fails, max_runs)
    current = scenario
    while not budget.spent:
        before = current
        current = _with_events(before, ddmin(before.events, lambda items, base=before: budget.fails(_with_events(base, items))))
        changed = True
        while changed and not budget.spent:
            changed = False
            for candidate in _simplifications(current):
                if budget.fails(candidate):
                    current, changed = candidate, True
                    break
        if current == before:
            break
    return Shrunk(current, budget.runs, len(scenario.events), budget.spent)


def write_beside(original: Path, shrunk: Scenario, header: str, fails: Predicate) -> tuple[Path, bool]:
    """Write `<original stem>.shrunk.yaml` next to `original`; True if the file, loaded back
    (turn ids renumbered in file order), still fails."""
    path = original.with_name(f"{original.stem}.shrunk.yaml")
    path.write_text(dump_text(shrunk, header), encoding="utf-8")
    return path, fails(load_text(path.read_text(encoding="utf-8"), str(path)))
