"""What the commands print: a scenario's line, the verdict table, the summary line, progress, and
the exit code a list of results gives."""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from conformance.adapter import HARNESS_POINTS
from conformance.harness.failure_db import FailureDB
from conformance.harness.runner import RunResult, played_note
from conformance.harness.suite import (
    XPASS_PREFIX,
    Expectations,
    line_ranges,
    load_all,
    outcome,
    passes_every_check,
    vacuous_checks,
    vacuous_note,
)
from conformance.harness.verdict import CHECK_IDS, CHECKER_ERROR, FAILING, Verdict
from sessiongate import ExitCode
from sessiongate.text import counted, readable
from sim.document import ScenarioError
from sim.scenario import Scenario

SYMBOL = {"pass": ".", "fail": "F", "xfail": "x", "xpass": "X", "error": "E", "timeout": "T", "skip": "s", "checker-error": "!"}


def cannot_start(result: RunResult) -> bool:
    """It failed before the scenario's first event (a handshake that timed out, a factory that
    raised): every other scenario would fail the same way, each after the same wait. A refusal
    (NotImplementedError at start: a config it says it cannot drive) is about its scenario."""
    failure = result.failure
    return failure is not None and failure.step == 0 and failure.event != "determinism" and not failure.refused


def skipped_note(result: RunResult) -> str:
    """A scenario can pass with its key event skipped: say so on its line, not only in `replay`.
    Skipped are events the gateway declares unsupported, a stop while it is down and a restart
    while it runs (a scenario that does not say what its author meant)."""
    if result.skipped:
        return f" (not judged: {result.skipped})"
    unsupported = result.profile.unsupported
    why = []
    left_out = ""
    for r in result.records:
        if r.kind == "skipped" and r.d("scope") == "config":
            left_out = f" (providers left out: {', '.join(r.d('providers'))})"
        elif r.kind == "skipped":
            event = r.d("event")
            if event == "muted":
                why.append("muted, unsupported: delivered plain")
            elif event in unsupported:
                why.append(f"{event}, unsupported")
            elif event == "restart":
                why.append("restart while running")
            elif event == "crash_at" and r.d("point") in HARNESS_POINTS:  # the gateway declares none, in process
                why.append(f"crash_at {r.d('point')}, the harness's point, in process with no crash point declared: "
                           f"--isolate kills there")
            elif event == "crash_at":
                why.append("crash_at, a point the gateway does not declare")
            else:
                why.append(f"{event} while down")
    if not why:
        return left_out
    return f"{left_out} ({len(why)} event{'s' if len(why) != 1 else ''} skipped: {'; '.join(dict.fromkeys(why))})"


def scenario_line(result: RunResult, *, every_violation: bool = False, expectations: Expectations | None = None) -> list[str]:
    """A scenario's outcome and, below it, why. `every_violation` lists each violation (replay);
    otherwise the first, and how many more (run). `expectations`: the file behind an xpass, whose
    line it names.
    Each line is `readable`: what the gateway chose (an id, an exception's text) cannot act on the
    terminal or run to megabytes."""
    return [readable(line) for line in _scenario_lines(result, every_violation, expectations)]


def _scenario_lines(result: RunResult, every_violation: bool, expectations: Expectations | None) -> list[str]:
    word = outcome(result)
    hollow = vacuous_note(result) if word == "pass" else ""  # a pass that judged less than it seems
    lines = [f"{word:<5} {result.scenario.name}{skipped_note(result)}{hollow}"]
    if result.failure is not None:
        lines.append(f"      {result.failure.describe()}")
        # The last line repeats the message; a stack from another language may say "at" itself.
        frames = [f.strip().removeprefix("at ").strip() for f in result.failure.traceback[:-1]]
        if frames:
            lines.append(f"      at {' > '.join(frames)}")
        return lines
    broken: dict[str, list[str]] = {}  # a checker error's reason -> the checks it stands for (the oracle's: all)
    for check, verdict in result.verdicts.items():
        if verdict.status == CHECKER_ERROR:
            broken.setdefault(verdict.reason, []).append(check)
        elif verdict.status == "xpass":
            lines.append(f"      {unexpected_pass(verdict, expectations, result.scenario.name)}")
        elif verdict.status != "fail":
            continue
        elif every_violation and verdict.violations:
            lines += [f"      {check} {violation.message}" for violation in verdict.violations]
        elif len(verdict.violations) > 1:
            more = len(verdict.violations) - 1
            lines.append(f"      {check} {verdict.violations[0].message} (+{more} more: replay or --report lists all)")
        else:
            lines.append(f"      {check} {verdict.summary}")
    lines += [f"      {','.join(checks)} {reason}" for reason, checks in broken.items()]
    return lines


def unexpected_pass(verdict: Verdict, expectations: Expectations | None, scenario: str) -> str:
    """An xpass in words, placed as a scenario file's error is (`FILE:LINE: …`): the check
    passed, and that line, which says it fails, is the one to edit."""
    reason = verdict.reason.removeprefix(XPASS_PREFIX)
    if expectations is None or not expectations.source:
        return f"{verdict.check} passed, but the expectations file says it fails: {reason}"
    where = expectations.where_xpass(scenario, verdict.check, verdict)
    return f"{shown_path(where)}: {verdict.check} passed, but this line says it fails: {reason}"


def shown_path(path: str) -> str:
    """`path` relative to the working directory when it is under it: short, and still exact."""
    try:
        return str(Path(path).resolve().relative_to(Path.cwd()))
    except ValueError:
        return path


def verdict_table(results: list[RunResult]) -> list[str]:
    names = [readable(r.scenario.name) for r in results]
    width = max(map(len, names), default=8)
    lines = [f"{'scenario':<{width}}  " + " ".join(f"{c:>2}" for c in CHECK_IDS)]
    for result, name in zip(results, names, strict=True):
        cells = " ".join(f"{_cell(result.verdicts[c]) if c in result.verdicts else 'E':>2}" for c in CHECK_IDS)
        lines.append(f"{name:<{width}}  {cells}")
    lines.append("(. pass  v pass that examined nothing  F fail  x expected failure  X unexpected pass  E error  T timeout  "
                 "s skip  ! checker error)")
    return lines


def _cell(verdict: Verdict) -> str:
    return "v" if verdict.status == "pass" and verdict.vacuous else SYMBOL[verdict.status]


def summary_line(results: list[RunResult], unloaded: int = 0) -> str:
    words = [outcome(r) for r in results]
    failed = sum(1 for w in words if w in FAILING)
    line = f"{counted(len(results), 'scenario')}, {words.count('pass')} passed, {failed} failed"
    errors, timeouts = words.count("error"), words.count("timeout")  # the gateway, not a check, failed these
    if errors or timeouts:
        line += " (" + ", ".join(filter(None, [f"{errors} gateway error{'s' if errors != 1 else ''}" if errors else "",
                                               f"{timeouts} timeout{'s' if timeouts != 1 else ''}" if timeouts else ""])) + ")"
    if words.count("xfail"):
        line += f", {counted(words.count('xfail'), 'expected failure')}"
    if words.count("skip"):  # neither passed nor failed: not judged (an unsupported feature)
        line += f", {words.count('skip')} skipped"
    if unloaded:
        line += f", {unloaded} file{'s' if unloaded != 1 else ''} not loaded"
    if checker := words.count(CHECKER_ERROR):  # neither passed nor failed: a check could not judge them
        line += f", {checker} checker error{'s' if checker != 1 else ''} (a sessiongate bug)"
    if vacuous := vacuous_checks(results):
        line += f"; {vacuous} check{'s' if vacuous != 1 else ''} vacuous (examined nothing)"
    # A pass without its crash or its deletion says less than its `pass`: each scenario's line
    # names what it skipped, and the last line counts them too.
    if declined := [events for r, w in zip(results, words, strict=True) if w == "pass" and (events := _declined(r))]:
        counts: dict[str, int] = {}
        for event in (event for events in declined for event in events):
            counts[event] = counts.get(event, 0) + 1
        kinds = ", ".join(f"{kind} {n}" for kind, n in sorted(counts.items()))
        line += f"; {len(declined)} pass{'es' if len(declined) != 1 else ''} skipped events the gateway declares it lacks ({kinds})"
    # Likewise a pass judged by the lazy rules (an end owed only by the chat's next message) in
    # a scenario with a watcher: the eager bound was never asked of it.
    if lazily := sum(1 for r, w in zip(results, words, strict=True) if w == "pass" and _lazily(r)):
        line += f"; {lazily} pass{'es' if lazily != 1 else ''} judged lazily (the gateway declares no watcher where the scenario has one)"
    return line


def _lazily(result: RunResult) -> bool:
    """The gateway declared `finalization: lazy` for a scenario whose config runs a watcher: its
    chats without a mode of their own were held to the lazy rules."""
    return result.profile.finalization == "lazy" and result.scenario.config.watcher_interval is not None


def _declined(result: RunResult) -> list[str]:
    """The events of a run the gateway declared away (an unsupported kind, a muted message
    delivered plain, a crash point it does not declare): the scenario ran without them."""
    unsupported = result.profile.unsupported
    out = []
    for r in result.records:
        if r.kind == "skipped" and r.d("scope") != "config":
            event = r.d("event")
            if event in unsupported or event in ("muted", "crash_at"):
                out.append(event)
    return out


def played_crashes(results: list[RunResult]) -> str | None:
    """A line saying how many scenarios crashed the gateway only by its own `crash()` call, where
    what it kept in memory survived (None if none did): their passes say less than a real kill's."""
    played = sum(1 for r in results if r.crashes == "played")
    return played_note(played, len(results), results[0].gateway) if played else None


def exit_code(results: list[RunResult], unloaded: int = 0) -> int:
    """CHECKER_ERROR if a check raised on any run (the verdicts are incomplete), else FAILED if
    anything unexpected failed or a file did not load, else OK."""
    words = {outcome(r) for r in results}
    if CHECKER_ERROR in words:
        return ExitCode.CHECKER_ERROR
    return ExitCode.FAILED if unloaded or words & set(FAILING) else ExitCode.OK


def saved_failures(db: FailureDB | None, given: Sequence[Scenario] = ()) -> list[Scenario]:
    """The gateway's saved failures (`conformance.harness.failure_db`), to run first, said in one line;
    a saved file that no longer loads is said and skipped, never the run's error. One that is a
    scenario the run was `given` (its `# reproduce:` line names the saved file) runs once, as given."""
    if db is None:
        return []
    saved, broken = load_all(db.saved())
    for error in broken:
        print(f"warning: skipping a saved failure that does not load: {error}", file=sys.stderr)
    if given:
        named = {replace(scenario, source="", header="") for scenario in given}
        saved = [scenario for scenario in saved if replace(scenario, source="", header="") not in named]
    if saved:
        print(f"replaying {len(saved)} saved failure{'s' if len(saved) != 1 else ''} first ({db.shown()}; "
              "--no-failure-db skips them)")
    return saved


def forget_if_fixed(db: FailureDB | None, result: RunResult, expectations: Expectations | None = None) -> None:
    """A saved failure whose every check passes now leaves the database, though an expectations
    file's lines for it make its run an unexpected pass: they are named, to delete."""
    if db is None or not passes_every_check(result) or not result.scenario.source:
        return
    db.forget(Path(result.scenario.source))
    name = result.scenario.name
    stale = ""
    if expectations is not None and expectations.source and (numbers := expectations.lines_naming(name)):
        where = shown_path(expectations.source)
        stale = (f"; {where}:{numbers[0]} expects it to fail: delete that line" if len(numbers) == 1 else
                 f"; {where} lines {line_ranges(numbers)} expect it to fail: delete them")
    print(f"      {name} passes now: removed from {db.shown()}{stale}")


def write_report(results: list[RunResult], directory: str | None, gateway: str,
                  unloaded: list[ScenarioError] | None = None, strict: bool = False) -> None:
    if not directory:
        return
    from reports import write_all  # here: the renderers cost a run that writes no report nothing

    write_all(results, directory, gateway, unloaded or [], strict=strict)
    print(f"report written to {directory}")


class Progress:
    """One progress line on stderr: rewritten in place on a terminal; otherwise (a CI log) every
    tenth of the way and at least once a minute, so a long run never looks hung."""

    QUIET_FOR = 60.0  # seconds without a line, at most, off a terminal

    def __init__(self, total: int, what: str = "seeds") -> None:
        self.total, self.what = total, what
        self.started = time.monotonic()
        self.tty = sys.stderr.isatty()
        self.step = max(1, total // 10)
        self.last = self.started

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def update(self, done: int, failed: int) -> None:
        now = time.monotonic()
        if not self.tty and done % self.step and done != self.total and now - self.last < self.QUIET_FOR:
            return
        self.last = now
        rate = done / max(self.elapsed(), 1e-9)
        line = f"{done}/{self.total} {self.what}, {rate:.1f} {self.what}/s, {failed} failed"
        sys.stderr.write(f"\r{line}\x1b[K" if self.tty else line + "\n")
        sys.stderr.flush()

    def clear(self) -> None:
        """Make room for a line on stdout (the terminal shares one screen)."""
        if self.tty:
            sys.stderr.write("\r\x1b[K")
            sys.stderr.flush()

    def close(self) -> None:
        if self.tty:
            sys.stderr.write("\n")
