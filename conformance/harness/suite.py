"""Running many scenarios against one gateway, with an expectations file applied.

An expectations file (like web-platform-tests' expectation files) marks (scenario, check)
pairs that are expected to fail on a gateway, each with a one-line reason:

    03-lru-evict-finalizable I1  # eviction soft-releases without on_session_end (gateway/run.py:_enforce_agent_cache_cap)

A marked failure becomes `xfail`; a marked pair that passes becomes `xpass`, which counts as
unexpected, so a fixed bug is noticed.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Container, Iterable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import cast

from conformance.adapter import Gateway
from conformance.harness.calls import exception_text
from conformance.harness.errors import signalled
from conformance.harness.registry import GatewayCodeFailed, UnknownGateway, expectation_names
from conformance.harness.runner import DEFAULT_BUDGET, RunResult, run_scenario
from conformance.harness.verdict import CHECK_IDS, CHECKER_ERROR, Verdict, Violation
from conformance.harness.watchdog import DEFAULT_STEP_TIMEOUT
from sessiongate import SessiongateError
from sim.document import ScenarioError
from sim.loader import load_file
from sim.scenario import Scenario

CATALOG = Path(__file__).parents[1] / "catalog"
SCENARIO_SUFFIXES = (".yaml", ".yml", ".json")  # what a folder of scenario files holds
XPASS_PREFIX = "expected to fail: "  # an xpass verdict's reason, before the file's; reports.rundir strips it
EXPECTATIONS = Path(__file__).parents[1] / "expectations"
FUZZ_NAME = re.compile(r"gen-\d+(?:-shrunk)*")  # what fuzz names a scenario, hence a saved failure (failure_db)


def catalog_paths() -> list[Path]:
    """The built-in catalog in its numbers' order (100 after 99, where the names' order would
    put it after 10)."""
    return sorted(CATALOG.glob("*.yaml"), key=_numbered)


def _numbered(path: Path) -> tuple[int, str]:
    number = path.name.split("-", 1)[0]
    return (int(number) if number.isdigit() else 1 << 30, path.name)


def catalog_file(name: str) -> Path | None:
    """A built-in catalog scenario named as the reports name it: `NAME`, `NAME.yaml` or
    `catalog/NAME.yaml` (so a report's name, pasted, runs anywhere)."""
    stem = name.removeprefix("catalog/").removesuffix(".yaml")
    path = CATALOG / f"{stem}.yaml"
    return path if "/" not in stem and path.is_file() else None


def scenario_paths(paths: Iterable[str]) -> list[Path]:
    """Files as given; folders expand to their *.yaml and *.json files, sorted."""
    out: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            out.extend(sorted(p for p in path.iterdir() if p.suffix in SCENARIO_SUFFIXES))
        else:
            out.append(path)
    return out


def load_all(paths: list[Path]) -> tuple[list[Scenario], list[ScenarioError]]:
    scenarios, errors = [], []
    for path in paths:
        try:
            scenarios.append(load_file(path))
        except ScenarioError as err:
            errors.append(err)
    return scenarios, errors


def text_lines(text: str) -> list[str]:
    """A text file's lines as an editor numbers them: split at line ends alone (`str.splitlines`
    also splits at U+2028, NEL, form feed and the like, which a reason may hold)."""
    return text.replace("\r\n", "\n").replace("\r", "\n").split("\n")


@dataclass(frozen=True)
class Expectations:
    """`pairs`: (scenario, check) -> reason, for a line `SCENARIO CHECK  # reason` (any failure of
    the check is expected). `signed`: (scenario, check) -> signature -> reason, for lines
    `SCENARIO CHECK SIGNATURE  # reason` (only violations with these signatures are expected:
    a new one in the same check fails, and one that no longer occurs is an unexpected pass).
    `SIGNATURE?` marks a violation that may or may not occur (as WPT's several expected statuses):
    for a gateway whose own threads make a run vary, said in its reason, never for a bug of ours."""

    pairs: dict[tuple[str, str], str]
    source: str = ""
    signed: dict[tuple[str, str], dict[str, str]] = field(default_factory=dict)
    lines: dict[tuple[str, str, str], int] = field(default_factory=dict)  # (scenario, check, signature or "") -> line number

    @staticmethod
    def parse(text: str, source: str) -> Expectations:
        pairs: dict[tuple[str, str], str] = {}
        signed: dict[tuple[str, str], dict[str, str]] = {}
        lines: dict[tuple[str, str, str], int] = {}
        for number, line in enumerate(text_lines(text), start=1):
            body, _, reason = line.partition("#")
            words = body.split()
            if not words:
                continue
            if len(words) not in (2, 3) or words[1] not in CHECK_IDS:
                raise ScenarioError(source, number, "", "expected 'SCENARIO CHECK [SIGNATURE]  # reason' with CHECK one of "
                                                        f"{', '.join(CHECK_IDS)}")
            if not reason.strip():
                raise ScenarioError(source, number, words[0], "every expected failure needs a one-line reason after '#'")
            key = (words[0], words[1])
            if (len(words) == 2 and key in signed) or (len(words) == 3 and key in pairs):
                raise ScenarioError(source, number, words[0], f"{words[1]} is listed both with and without a signature")
            if len(words) == 2:
                pairs[key] = reason.strip()
            else:
                signed.setdefault(key, {})[words[2]] = reason.strip()
            lines.setdefault((*key, words[2] if len(words) == 3 else ""), number)  # a repeated line: its first, as an editor finds it
        return Expectations(pairs, source, signed, lines)

    def where(self, scenario: str, check: str, signature: str = "") -> str:
        """`FILE:LINE` of an entry, as a scenario file's errors are placed: the line to edit."""
        shown = self.source or "the expectations file"
        number = self.lines.get((scenario, check, signature))
        return f"{shown}:{number}" if number is not None and self.source else shown

    def where_xpass(self, scenario: str, check: str, verdict: Verdict) -> str:
        """`FILE:LINE` of the entry an unexpected pass is about: the unsigned line, else the first
        (by signature) of the required signatures that did not occur, as `apply` words it."""
        if (scenario, check) in self.pairs:
            return self.where(scenario, check)
        entries = self.signed.get((scenario, check), {})
        occurred = {s for v in verdict.violations for s in v.signatures}
        gone = sorted(s for s in entries if not s.endswith("?") and s not in occurred)
        return self.where(scenario, check, gone[0]) if gone else self.where(scenario, check)

    @staticmethod
    def for_gateway(name: str, explicit: str | None = None) -> Expectations:
        """`explicit`, else the first of the gateway's expectation names with a file (see
        `registry.expectation_names`), else none."""
        if explicit:
            path = Path(explicit)
            if not path.exists():
                raise ScenarioError(str(path), 0, "", "expectations file not found")
            return Expectations.parse(path.read_text(encoding="utf-8"), str(path))
        for stem in expectation_names(name):
            path = EXPECTATIONS / f"{stem}.txt"
            if path.exists():
                return Expectations.parse(path.read_text(encoding="utf-8"), str(path))
        return Expectations({})

    @staticmethod
    def missing(name: str) -> str | None:
        """A line saying so when gateway `name`'s adapter names the installed release's files
        (`hermes`, `openclaw`), the catalog has files for other releases and none for this one:
        every failure it has in common with them then counts as new."""
        stems = expectation_names(name)
        head = name.partition(":")[0]
        known = sorted(path.stem for path in EXPECTATIONS.glob(f"{head}-*.txt"))
        if not known or stems == [name.replace(":", "-")] or any((EXPECTATIONS / f"{stem}.txt").exists() for stem in stems):
            return None
        return (f"note: no expectations file for {stems[0]} (looked for {', '.join(f'{stem}.txt' for stem in stems)}; "
                f"there are {', '.join(known)}): every failure counts; to write one: sessiongate update-expectations "
                f"--gateway {name} --expectations FILE")

    def scenarios(self) -> set[str]:
        """The scenario names the file mentions."""
        return {name for name, _check in (*self.pairs, *self.signed)}

    def lines_naming(self, scenario: str) -> list[int]:
        """The line numbers of the entries that name `scenario`, in file order."""
        return sorted(number for (name, _check, _signature), number in self.lines.items() if name == scenario)

    def typos(self, catalog: Iterable[str], own: Iterable[str] = ()) -> list[str]:
        """A warning for each entry a letter or two off a `catalog` scenario's name that names
        none of them nor of `own` (the author's own scenarios in the run, which are no typos): such
        an entry expects nothing. For a run of the whole catalog (`run`, the pytest plugin)."""
        names = sorted(catalog)
        near = {n: close[0] for n in sorted(self.scenarios() - set(names) - set(own))
                if (close := difflib.get_close_matches(n, names, n=1, cutoff=0.9))}
        return [f"warning: {self._at(n)}: names no catalog scenario {n!r} (did you mean {c!r}?): a typo expects nothing"
                for n, c in sorted(near.items(), key=lambda item: self.lines_naming(item[0])[:1])]

    def gone_saved_failures(self, run: Iterable[str], database: str) -> list[str]:
        """A warning for each entry naming a scenario as fuzz names a saved failure (`gen-N`,
        `gen-N-shrunk`) that no scenario of the run has (the catalog, the files given, the saved
        failures in `database`): the failure it was written for passed and left the database, so
        it expects nothing. Only such names: another unknown one may be a scenario of the
        author's that this run did not include. For a run that replays the saved failures."""
        names = set(run)
        gone = sorted((n for n in self.scenarios() - names if FUZZ_NAME.fullmatch(n)), key=lambda n: self.lines_naming(n)[:1])
        return [f"warning: {self._at(n)}: names {n!r}, which is no saved failure in {database} nor a scenario of this "
                f"run (a saved failure that passed was removed): {_stale_lines(self.lines_naming(n))}" for n in gone]

    def _at(self, scenario: str) -> str:
        """`FILE:LINE` of the first line naming `scenario`."""
        numbers = self.lines_naming(scenario)
        shown = self.source or "the expectations file"
        return f"{shown}:{numbers[0]}" if numbers and self.source else shown

    def apply(self, result: RunResult) -> RunResult:
        """Mark expected failures (`xfail`) and unexpected passes (`xpass`); keep on the result
        the entries that applied (`RunResult.expected`), so a report re-renders with them."""
        for check, verdict in list(result.verdicts.items()):
            key = (result.scenario.name, check)
            if key in self.signed:
                result.expected[check] = dict(self.signed[key])
                result.verdicts[check] = _signed(verdict, self.signed[key])
                continue
            reason = self.pairs.get(key)
            if reason is None:
                continue
            result.expected[check] = reason
            if verdict.status == "fail":
                result.verdicts[check] = verdict.with_status("xfail", reason)
            elif verdict.status == "pass":
                result.verdicts[check] = verdict.with_status("xpass", f"{XPASS_PREFIX}{reason}")
        return result

    @staticmethod
    def of_result(expected: dict[str, str | dict[str, str]], scenario: str) -> Expectations:
        """The entries a run recorded (`RunResult.expected`), as expectations again."""
        pairs = {(scenario, c): r for c, r in expected.items() if isinstance(r, str)}
        signed = {(scenario, c): dict(r) for c, r in expected.items() if isinstance(r, dict)}
        return Expectations(pairs, "", signed)


_DAY = re.compile(r"(?<![a-z0-9])(?:mon|tue|wed|thu|fri|sat|sun)-")


def written_with_weekdays(entries: dict[str, str], signature: str) -> str | None:
    """The entry of `entries` that named this violation before signatures dropped a time's
    weekday (2026-12-04: `…-finalize-tue-before-…@s1` is now `…-finalize-before-…@s1`): the
    same subject, and its slug without weekdays a prefix of this one (a slug was cut at 60
    characters, mid-word). So an author's reasons survive the change; None if no entry is such."""
    slug, _, subject = signature.partition("@")
    for old in entries:
        old_slug, _, old_subject = old.removesuffix("?").partition("@")
        dayless = _DAY.sub("", f"{old_slug}-").rstrip("-")
        if old_subject == subject and dayless != old_slug and slug.startswith(dayless):
            return old
    return None


def entry_naming(violation: Violation, entries: Container[str]) -> str | None:
    """The entry of `entries` that names `violation`: its signature, else the one written before
    slugs ended on a whole word (`Violation.signatures`); None if neither is there."""
    return next((s for s in violation.signatures if s in entries), None)


def _old_entry(entries: dict[str, str], signature: str, unused: list[str]) -> str:
    """What to add to `[not expected: …]`: the entry written for it with weekdays, else the
    closest of `unused` (entries that did not occur) of the same subject, likely a mistyped one."""
    if old := written_with_weekdays(entries, signature):
        return f"; {old} was written before signatures dropped weekdays: update-expectations keeps its reason"
    subject = signature.partition("@")[2]
    same = [s for s in unused if s.partition("@")[2] == subject]
    if close := difflib.get_close_matches(signature, same, n=1, cutoff=0.9):
        return f"; did you mean the entry {close[0]}, which did not occur?"
    return ""


def _signed(verdict: Verdict, entries: dict[str, str]) -> Verdict:
    """A verdict against signature entries: xfail if every violation is expected and every
    expected one occurred; a new violation fails (listed first, marked); one that no longer
    occurs is an unexpected pass (a fix to notice). A `SIGNATURE?` entry may be absent."""
    expected = {s.removesuffix("?"): r for s, r in entries.items()}
    required = sorted(s for s in entries if not s.endswith("?"))
    if verdict.status == "pass":
        if not required:
            return verdict  # every expected violation may be absent, and is
        return verdict.with_status("xpass", f"{XPASS_PREFIX}{expected[required[0]]}")
    if verdict.status != "fail":
        return verdict
    named = {v: entry for v in verdict.violations if (entry := entry_naming(v, expected)) is not None}
    occurred = {s for v in verdict.violations for s in v.signatures}
    new = [v for v in verdict.violations if v not in named]
    if new:
        claimed = {written_with_weekdays(entries, s) for s in occurred}  # entries that did occur, with weekdays
        unused = sorted(s.removesuffix("?") for s in entries if s.removesuffix("?") not in occurred and s not in claimed)
        marked = tuple(replace(v, message=f"{v.message} [not expected: {v.signature}{_old_entry(entries, v.signature, unused)}]",
                               kind=v.slug) for v in new)
        rest = tuple(v for v in verdict.violations if v in named)
        return Verdict(verdict.check, "fail", (*marked, *rest), "", verdict.examined)
    gone = sorted(set(required) - occurred)
    if gone:
        return verdict.with_status("xpass", f"{XPASS_PREFIX}{expected[gone[0]]} [{gone[0]} did not occur]")
    reasons = dict.fromkeys(expected[named[v]] for v in verdict.violations)
    return verdict.with_status("xfail", "; ".join(reasons))


def outcome(result: RunResult) -> str:
    """One word for a scenario: pass, fail, xfail (only expected failures), error or timeout (the
    gateway failed), checker-error (a check raised: its verdicts are incomplete), or skip (not
    judged: its config uses a feature the gateway declares unsupported)."""
    statuses = {v.status for v in result.verdicts.values()}
    if result.failure is not None:
        return result.failure.kind
    if result.skipped:
        return "skip"
    if CHECKER_ERROR in statuses:
        return CHECKER_ERROR
    if statuses & {"fail", "xpass"}:
        return "fail"
    if "xfail" in statuses:
        return "xfail"
    return "pass"


def _stale_lines(numbers: list[int]) -> str:
    if len(numbers) > 1:
        return f"its lines {line_ranges(numbers)} expect nothing; delete them"
    return "the line expects nothing; delete it"


def line_ranges(numbers: list[int]) -> str:
    """Sorted line numbers, runs of three or more as `FIRST-LAST`: `1-69`, not 69 numbers."""
    runs: list[list[int]] = []
    for number in numbers:
        if runs and number == runs[-1][-1] + 1:
            runs[-1].append(number)
        else:
            runs.append([number])
    return ", ".join(f"{run[0]}-{run[-1]}" if len(run) > 2 else ", ".join(map(str, run)) for run in runs)


def passes_every_check(result: RunResult) -> bool:
    """Every check passed, whatever an expectations file says (an `xpass` without violations is
    a check that passed where a line expects it to fail): how a saved failure is told fixed."""
    if result.failure is not None or result.skipped:
        return False
    return all(v.status == "pass" or (v.status == "xpass" and not v.violations) for v in result.verdicts.values())


def vacuous_checks(results: Iterable[RunResult]) -> int:
    """How many (scenario, check) verdicts passed having examined nothing."""
    return sum(v.vacuous for result in results for v in result.verdicts.values())


def vacuous_note(result: RunResult) -> str:
    """' (I3, I8 vacuous)': the checks that passed this scenario having examined nothing."""
    names = [check for check, verdict in result.verdicts.items() if verdict.vacuous]
    return f" ({', '.join(names)} vacuous)" if names else ""


def run_all(scenarios: list[Scenario], factory: Callable[[], Gateway], name: str,
            expectations: Expectations | None = None, budget: int = DEFAULT_BUDGET, strict: bool = False,
            step_timeout: float | None = DEFAULT_STEP_TIMEOUT) -> Iterator[RunResult]:
    """Each scenario on a fresh gateway. A factory that cannot make the first one is an
    `UnknownGateway` (nothing has run: a usage error); one that fails later makes that
    scenario an error and the run, and its report, go on."""
    for index, scenario in enumerate(scenarios):
        result = run_scenario(scenario, fresh_gateway(factory, name, unknown_raises=index == 0), name, budget=budget,
                              strict=strict, step_timeout=step_timeout)
        yield (expectations or Expectations({})).apply(result)


def fresh_gateway(factory: Callable[[], Gateway], name: str, unknown_raises: bool = False) -> Gateway:
    """`factory()`, or when it raises (anything: SystemExit too) a stand-in whose first call fails
    with the factory's message, so that scenario is the error. `unknown_raises`: an
    `UnknownGateway` propagates (before any scenario ran, a bad name is a usage error)."""
    try:
        return factory()
    except UnknownGateway as err:
        if unknown_raises:
            raise
        message = err.unplaced if isinstance(err, GatewayCodeFailed) else str(err)  # its trace says where
        return cast(Gateway, Unbuildable(message, err.__context__))  # enough of one for the runner to log the error
    except BaseException as err:  # a factory not from `resolve`
        if signalled(err):
            raise
        return cast(Gateway, Unbuildable(f"{name}: its factory raised {exception_text(err)}", err))


class FactoryFailed(SessiongateError, RuntimeError):
    """The gateway's factory raised, or made no gateway, for this scenario."""


class Unbuildable:
    """Stands in for a gateway its factory could not make: its first call, `profile`, raises,
    so the runner logs the scenario as an error at start (profile), with the factory's message."""

    def __init__(self, message: str, cause: BaseException | None = None) -> None:
        self.message = message
        self.cause = cause  # its traceback is the error's: the trace ends at the factory's line

    def profile(self, config: object) -> object:
        raise FactoryFailed(self.message).with_traceback(self.cause.__traceback__ if self.cause is not None else None)
