"""One row per event kind, beside the event types: how a file spells it, whether a gateway may lack
it, how the generator makes it. Each stage that handles events keeps one handler per kind and
hands them to `covered` when its module is imported, so a kind a stage does not handle fails
at import, naming the kind and the stage.

Adding a kind: its `Event` subclass and name in `sim.scenario` (`EVENT_TYPES`), a row here, and
a handler in each of `STAGES` (the import tells which are missing).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from sim.scenario import EVENT_TYPES, Event


@dataclass(frozen=True)
class Kind:
    """How every stage treats one event kind."""

    name: str  # the key a file spells it with, and `Event.kind`
    spelled: str  # what a file writes: the loader reads this (`sim.load_events`), the writer prints it (`sim.writer`)
    optional: bool  # a gateway may declare it in `Profile.unsupported`: the runner then skips it (`conformance.features`)
    generated: str  # how the generator makes it (`sim.generate`)

    @property
    def type(self) -> type[Event]:
        return EVENT_TYPES[self.name]


KINDS: dict[str, Kind] = {row.name: row for row in (
    # Not optional: a gateway that declared it could pass every scenario by answering nothing.
    Kind("message", "{message: CHAT, text: TEXT, muted: BOOL, usage: USAGE}", False, "drawn, most often"),
    Kind("command", "{command: /new|/reset|/stop|/resume, chat: CHAT}", True, "drawn, one weight per command"),
    Kind("delegate", "{delegate: CHAT}", True, "drawn"),
    Kind("advance", "{advance: DURATION}", False, "drawn"),
    Kind("sigterm", "{sigterm: true}", True, "drawn, followed by its restart"),
    Kind("crash", "{crash: true}", True, "drawn, followed by its restart"),
    Kind("restart", "{restart: true, config: CHANGE}", True, "after each drawn sigterm and crash; never a config change"),
    Kind("delete_session", "{delete_session: CHAT}", True, "drawn"),
    Kind("delete_parent", "{delete_parent: CHAT}", True, "drawn, aimed at the last chat that delegated"),
    Kind("db_locked", "{db_locked: DURATION}", True, "drawn"),
    Kind("backend_fail", "{backend_fail: PROVIDER, for: DURATION}", True, "drawn (a message when no provider is configured)"),
    Kind("backend_slow", "{backend_slow: PROVIDER, for: DURATION, delay: DURATION}", True,
         "one window after the whole timeline is drawn, in some scenarios with a provider"),
    Kind("checkpoint", "{checkpoint: NAME}", False, "drawn"),
    Kind("crash_at", "{crash_at: {point: POINT, hit: N, restart_after: DURATION}}", False,
         "never: `fuzz --crash-points` fires crash points by a seeded swarm, written back as crash_at"),
)}
"""In `EVENT_TYPES` order (the loader's messages list the kinds in it)."""

STAGES: tuple[str, ...] = ("load", "write", "generate", "shrink", "apply")
"""The stages that keep a handler per kind: `sim.load_events`, `sim.writer`, `sim.generate`,
`sim.shrink`, `conformance.harness.events`."""
COVERED: set[str] = set()  # the stages whose handlers `covered` has checked in this process


class KindNotCovered(Exception):
    """A stage's handlers and the table disagree: a kind without a handler, or a handler for no kind."""


def covered(stage: str, handlers: Mapping[str, object]) -> None:
    """Check that `handlers` has exactly one entry per kind of the table; called by each stage at import."""
    missing = [name for name in KINDS if name not in handlers]
    unknown = [name for name in handlers if name not in KINDS]
    if missing or unknown:
        problems = [f"no {stage} handler for event kind {name!r}" for name in missing]
        problems += [f"{stage} handler for {name!r}, which is no event kind of sim.kinds.KINDS" for name in unknown]
        raise KindNotCovered("; ".join(problems))
    COVERED.add(stage)


if list(KINDS) != list(EVENT_TYPES):  # the table and the types are one list
    raise KindNotCovered(f"sim.kinds.KINDS lists {list(KINDS)}, but sim.scenario.EVENT_TYPES has {list(EVENT_TYPES)}")
