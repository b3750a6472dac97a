"""Verdicts: what a check concluded, with the evidence a gateway author needs to act on it."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Literal

from sessiongate.text import word

Status = Literal["pass", "fail", "xfail", "xpass", "error", "timeout", "skip", "checker-error"]
CHECKER_ERROR = "checker-error"  # the check itself raised: a sessiongate bug, never the gateway's (conformance.checks.judge)
FAILING: tuple[Status, ...] = ("fail", "error", "timeout")  # a check's finding, or the gateway's error or hang
CHECK_IDS: tuple[str, ...] = ("I1", "I2", "I3", "I4", "I5", "I6", "I7", "I8", "I9")
CHECK_NAMES: dict[str, str] = {
    "I1": "exactly-once end",
    "I2": "no lost turn (store)",
    "I3": "no lost turn (memory)",
    "I4": "no double ingest",
    "I5": "ordering",
    "I6": "reset policy",
    "I7": "bounded resources",
    "I8": "heal",
    "I9": "liveness",
}


_WORD = re.compile(r"\w+")
_WEEKDAY = re.compile(r"\b(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) (?=\d)")  # a time's weekday ("at Wed 13:15"), a time's as much as its digits
SLUG_WORDS = 60  # characters: a slug ends with the word in which this one falls (Violation.slug)
SLUG_MAX = 100  # characters: a slug's hard limit, for one word that long
_SKIP = frozenset({"a", "an", "and", "at", "but", "by", "for", "from", "in", "is", "it", "its", "of", "on", "or", "the",
                   "to", "was", "were", "with", "session", "turn", "turns"})


@dataclass(frozen=True)
class Violation:
    """One thing that went wrong, in words, with the log records (by index) that show it.

    `kind` names what went wrong in a few words (a slug); left empty, it is made from the
    message's words without its times (a weekday included), numbers and ids: one bug on two
    days is one slug. With the subject (the session, else
    the turns) it is the violation's `signature`, which expectations files may name, so a new
    violation in an expected-failing scenario is not hidden by an old one."""

    message: str
    records: tuple[int, ...] = ()
    t: int | None = None
    session: str | None = None
    turns: tuple[str, ...] = ()
    kind: str = ""

    @property
    def signature(self) -> str:
        """`slug@subject`, one word of an expectations file line whatever the gateway's session ids
        hold (a space, a `#`, a newline: `sessiongate.text.word`)."""
        return self._signed(self.slug)

    @property
    def signatures(self) -> tuple[str, ...]:
        """The entries of an expectations file that name it: its signature, and (when it differs)
        the one written before slugs ended on a whole word, cut at exactly 60 characters
        (`…-got-no-on@s1`). Each is matched whole, never as a prefix: an old line names what it
        named before, and a new one cannot match a violation whose words only begin like it."""
        old = self._signed(self.cut_slug)
        return (self.signature,) if old == self.signature else (self.signature, old)

    def _signed(self, slug: str) -> str:
        subject = word(self.session or ",".join(self.turns))
        return f"{slug}@{subject}" if subject else slug

    @property
    def slug(self) -> str:
        """The words, up to the end of the one in which the 60th character falls: whole words, so
        a file of them reads and edits by hand (`…-got-no-on-session-end`, not `…-got-no-on`),
        and two violations the old cut told apart stay apart. A word running past 100 characters
        (text of the gateway's run together) is cut there."""
        if self.kind:
            return self.kind
        parts = self._parts()
        joined = "-".join(parts)
        if len(joined) <= SLUG_WORDS:
            return joined.strip("-") or "violation"
        start = end = 0
        for part in parts:  # the part in which character SLUG_WORDS falls, or the separator before it
            end = start + len(part)
            if end >= SLUG_WORDS:
                break
            start = end + 1
        cut = end if start < SLUG_WORDS else SLUG_WORDS
        return joined[:min(cut, SLUG_MAX)].strip("-") or "violation"

    @property
    def cut_slug(self) -> str:
        """The slug as made until 2026-12-05 (cut at exactly 60 characters, mid-word as often as not):
        what lines written then name. Always a prefix of `slug`."""
        if self.kind:
            return self.kind
        return "-".join(self._parts())[:SLUG_WORDS].strip("-") or "violation"

    def _parts(self) -> list[str]:
        """The message's words without its times (a weekday included), numbers, ids and filler."""
        words = [w.lower() for w in _WORD.findall(_WEEKDAY.sub("", self.message)) if not any(c.isdigit() for c in w)]
        return [w.replace("_", "-").strip("-") for w in words if w not in _SKIP]

    def to_detail(self) -> dict[str, Any]:
        out: dict[str, Any] = {"message": self.message, "records": list(self.records)}
        if self.t is not None:
            out["t"] = self.t
        if self.session is not None:
            out["session"] = self.session
        if self.turns:
            out["turns"] = list(self.turns)
        return out


@dataclass(frozen=True)
class Verdict:
    check: str
    status: Status
    violations: tuple[Violation, ...] = ()
    reason: str = ""  # for skip / error / timeout / xfail: why
    examined: int = 0  # how many items the check examined (sessions, turns…): 0 means vacuous

    @property
    def vacuous(self) -> bool:
        """It passed having examined nothing: the scenario never gave it anything to judge."""
        return self.status == "pass" and self.examined == 0

    @property
    def summary(self) -> str:
        if self.violations:
            first = self.violations[0].message
            more = len(self.violations) - 1
            return first + (f" (+{more} more)" if more else "")
        return self.reason

    def with_status(self, status: Status, reason: str = "") -> Verdict:
        return Verdict(self.check, status, self.violations, reason or self.reason, self.examined)

    def to_detail(self) -> dict[str, Any]:
        out: dict[str, Any] = {"status": self.status, "evidence": [v.to_detail() for v in self.violations],
                               "examined": self.examined, "vacuous": self.vacuous}
        if self.reason:
            out["reason"] = self.reason
        return out


VACUOUS = "examined nothing (--strict fails a vacuous check)"


def strictly(verdict: Verdict) -> Verdict:
    """Under --strict a check that examined nothing fails: a scenario meant to exercise it did not."""
    if not verdict.vacuous:
        return verdict
    return Verdict(verdict.check, "fail", (Violation(VACUOUS),), verdict.reason, verdict.examined)


@dataclass(frozen=True)
class GatewayFailure:
    """The gateway under test raised, hung or broke the protocol at a step."""

    kind: Literal["error", "timeout"]
    step: int | str  # the log's step (conformance.observations.Obs): "k.n" in a timer after event k
    event: str
    message: str
    traceback: tuple[str, ...] = field(default=())

    @property
    def refused(self) -> bool:
        """It raised NotImplementedError at start: a config it says it cannot drive (about that
        scenario, not a gateway that cannot start)."""
        return self.event == "start" and self.message.startswith("NotImplementedError")

    def describe(self) -> str:
        where = f"step {self.step} ({self.event})" if self.step else f"start ({self.event})"
        return f"gateway {self.kind} at {where}: {self.message}"
