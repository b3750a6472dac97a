"""pytest plugin (entry point `pytest11`): conformance scenarios as pytest items.

    pytest --sessiongate-gateway NAME --sessiongate-seeds 0:500 [--no-sessiongate-catalog] -n auto
    pytest --sessiongate-gateway NAME --sessiongate-scenarios myscen/ [--sessiongate-expectations FILE]
    pytest myscen/mine.yaml --sessiongate-gateway NAME
    pytest --sessiongate-gateway NAME --sessiongate-isolate   (a child process each: crashes are real kills)

adds one item per catalog scenario and one per generated seed, so pytest-xdist, --junitxml,
-k, --lf and friends work on them. A failing item shows each failing check's evidence.

Your own scenarios, as `sessiongate run PATHS` takes them: `--sessiongate-scenarios PATH` (a
file, or a folder's *.yaml, *.yml and *.json; repeatable), or a scenario file named as a pytest
argument (a folder argument is left to pytest: `tests/` holds YAML that is not scenarios). With
either, the catalog is left out unless `--sessiongate-catalog` is given. Expected failures come
from `--sessiongate-expectations FILE` (as `run --expectations`), else the gateway's own file.

Without a --sessiongate-* option it does nothing at all (every pytest run loads it).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from sessiongate import SessiongateError


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("sessiongate", "sessiongate conformance scenarios")
    group.addoption("--sessiongate-gateway", metavar="NAME", help="run conformance scenarios against this gateway")
    group.addoption("--sessiongate-seeds", metavar="A:B", help="also run the generated scenarios of seeds A <= seed < B")
    group.addoption("--sessiongate-profile", default="default", help="generation profile (default: default)")
    group.addoption("--sessiongate-fit", action="store_true", default=False,
                    help="seeds drawn without what the gateway declares unsupported, as `fuzz --fit`")
    group.addoption("--sessiongate-scenarios", metavar="PATH", action="append", default=[],
                    help="also run these scenario files or folders (repeatable); leaves the catalog out")
    group.addoption("--sessiongate-expectations", metavar="FILE",
                    help="expected-failures file (default: conformance/expectations/<gateway>.txt)")
    group.addoption("--sessiongate-strict", action="store_true", default=False,
                    help="a check that examined nothing (vacuous) fails, as `run --strict`")
    group.addoption("--sessiongate-catalog", dest="sessiongate_catalog", action="store_true", default=None,
                    help="include the built-in catalog (the default without your own scenarios)")
    group.addoption("--no-sessiongate-catalog", dest="sessiongate_catalog", action="store_false",
                    help="leave the built-in catalog out")
    group.addoption("--sessiongate-no-failure-db", action="store_true", default=False,
                    help="do not run the gateway's saved failures first (.sessiongate/failures/, as run and fuzz do)")
    group.addoption("--sessiongate-isolate", action="store_true", default=False,
                    help="each scenario in a child process, as `run --isolate` (a gateway with open_store() is "
                         "then killed for real at each crash)")


def _active(config: pytest.Config) -> bool:
    return any(config.getoption(name) for name in ("sessiongate_gateway", "sessiongate_seeds", "sessiongate_scenarios",
                                                      "sessiongate_expectations"))


@dataclass(frozen=True)
class Settings:
    """The options, checked once: a bad one is a usage error before anything is collected."""

    gateway: str
    expectations: Any  # conformance.harness.suite.Expectations (imported only when the plugin is active)
    seeds: range
    scenarios: tuple[Path, ...]  # from --sessiongate-scenarios
    named: frozenset[Path]  # scenario files given as pytest arguments, resolved
    catalog: bool
    strict: bool = False  # --sessiongate-strict: a vacuous check fails
    failure_db: bool = True  # run the gateway's saved failures first (conformance.harness.failure_db)
    isolate: bool = False  # --sessiongate-isolate: each scenario in a child process
    avoid: frozenset[str] = frozenset()  # --sessiongate-fit: what the gateway declares unsupported, never drawn


SETTINGS = pytest.StashKey[Settings]()


def _named_scenario_files(config: pytest.Config) -> frozenset[Path]:
    """Arguments that are scenario files: pytest itself would answer 'not found' for them."""
    from conformance.harness.suite import SCENARIO_SUFFIXES

    here = config.invocation_params.dir
    paths = (here / arg.split("::")[0] for arg in config.args)
    return frozenset(p.resolve() for p in paths if p.suffix in SCENARIO_SUFFIXES and p.is_file())


def _settings(config: pytest.Config) -> Settings:
    from conformance.cli.args import load_expectations, parse_seeds, scenario_files
    from conformance.transport.factory import check_gateway
    from sessiongate import UsageError  # an unknown gateway and a scenario file's error are UsageErrors too

    gateway = config.getoption("sessiongate_gateway") or "reference"
    raw: list[str] = config.getoption("sessiongate_scenarios")
    try:
        check_gateway(gateway)
        seeds = config.getoption("sessiongate_seeds")
        seed_range = parse_seeds(seeds) if seeds else range(0)
        try:
            scenarios = tuple(scenario_files(raw)) if raw else ()
        except UsageError as err:
            raise UsageError(f"--sessiongate-scenarios {err}") from None
        expectations = load_expectations(gateway, config.getoption("sessiongate_expectations"))
        avoid: frozenset[str] = frozenset()
        if config.getoption("sessiongate_fit") and seed_range:
            from conformance.search.fuzz import Isolation, declared_unsupported

            avoid = declared_unsupported(gateway, Isolation(config.getoption("sessiongate_isolate")))
    except UsageError as err:
        raise pytest.UsageError(f"sessiongate: {err}") from None
    named = _named_scenario_files(config)
    catalog = config.getoption("sessiongate_catalog")
    return Settings(gateway, expectations, seed_range, scenarios, named,
                    catalog if catalog is not None else not (scenarios or named), config.getoption("sessiongate_strict"),
                    not config.getoption("sessiongate_no_failure_db"), config.getoption("sessiongate_isolate"), avoid)


def pytest_configure(config: pytest.Config) -> None:
    if _active(config):
        config.stash[SETTINGS] = _settings(config)


class ScenarioFailed(SessiongateError):
    """A scenario's verdicts include a failure; carries the evidence to show."""


class ScenarioItem(pytest.Item):
    """One scenario against one gateway: a scenario file, or a generated seed."""

    def __init__(self, *, gateway: str, path: Path | None = None, seed: int | None = None, profile: str = "default",
                 expectations: Any = None, saved: Any = None, avoid: frozenset[str] = frozenset(), **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.gateway, self.scenario_path, self.seed, self.profile, self.avoid = gateway, path, seed, profile, avoid
        self.expectations = expectations
        self.saved = saved  # the FailureDB this saved failure is in: it leaves it when it passes

    def scenario(self) -> Any:
        from sim.generate import scenario_for_seed
        from sim.loader import load_file

        if self.scenario_path is not None:
            return load_file(self.scenario_path)
        return scenario_for_seed(self.seed or 0, self.profile, self.avoid)

    def runtest(self) -> None:
        from conformance.harness.registry import resolve
        from conformance.harness.runner import run_scenario, when_stuck
        from conformance.harness.suite import Expectations, outcome, passes_every_check
        from sessiongate.text import readable

        settings = self.config.stash.get(SETTINGS, None)
        strict = settings is not None and settings.strict
        if settings is not None and settings.isolate and not self.gateway.startswith("exec:"):
            from conformance.transport.isolation import isolated

            gateway = isolated(self.gateway)
        else:
            gateway = resolve(self.gateway)()
        with when_stuck(self._stuck):
            result = run_scenario(self.scenario(), gateway, self.gateway, strict=strict)
        if result.crashes:  # counted by the terminal summary (from xdist's workers too)
            self.user_properties.append(("sessiongate_crashes", result.crashes))
        result = (self.expectations or Expectations.for_gateway(self.gateway)).apply(result)
        word = outcome(result)
        if self.saved is not None and passes_every_check(result) and self.scenario_path is not None:
            self.saved.forget(self.scenario_path)  # though an expectations line for it makes this an xpass
        if word == "skip":
            pytest.skip(result.skipped)
        if word == "xfail":
            pytest.xfail(readable("; ".join(f"{c}: {v.reason}" for c, v in result.verdicts.items() if v.status == "xfail")))
        if word != "pass":
            raise ScenarioFailed(self._evidence(result))

    def _stuck(self, result: Any, code: int) -> None:
        """The gateway cannot be stopped in this process (`runner.when_stuck`), which ends now,
        before pytest can report: say why on the terminal, past pytest's capture."""
        from sessiongate.text import readable

        capture = self.config.pluginmanager.getplugin("capturemanager")
        if capture is not None:
            capture.suspend_global_capture(in_=True)
        why = (result.failure.describe() if result is not None and result.failure is not None
               else f"stopped by signal {code - 128}, which the gateway caught")
        print(f"\n{self.nodeid}: {readable(why)}\nsessiongate: the gateway cannot be stopped in this process, so "
              f"pytest ends here (exit {code}); under pytest-xdist the worker's crash fails the item and the run goes on",
              file=sys.__stderr__, flush=True)

    def _evidence(self, result: Any) -> str:
        from conformance.cli.lines import unexpected_pass
        from conformance.harness.shell import command
        from sessiongate.text import readable

        bad = [check for check, v in result.verdicts.items() if v.status in ("fail", "xpass", "error", "timeout", "checker-error")]
        lines = [f"{result.scenario.name} on {self.gateway}: {', '.join(bad)} not passing"]
        if result.failure is not None:
            lines.append(f"  {result.failure.describe()}")
            lines += [f"    {frame}" for frame in result.failure.traceback]
        for check, verdict in result.verdicts.items():
            if verdict.status in ("pass", "skip", "xfail"):
                continue
            if verdict.status == "xpass":
                lines.append(f"  xpass: {unexpected_pass(verdict, self.expectations, result.scenario.name)}")
                continue
            lines.append(f"  {check} {verdict.status}: {verdict.reason if not verdict.violations else ''}".rstrip())
            for violation in verdict.violations[:10]:
                lines.append(f"    - {violation.message}")
            if len(verdict.violations) > 10:
                lines.append(f"    … and {len(verdict.violations) - 10} more")
        if self.seed is not None:
            profile = ["--profile", self.profile] if self.profile != "default" else []
            fit = ["--fit"] if self.avoid else []
            lines.append("reproduce: " + command("replay", "--seed", str(self.seed), "--gateway", self.gateway, *profile, *fit))
        else:
            lines.append("reproduce: " + command("replay", _shown(self.scenario_path, self.config.invocation_params.dir),
                                                 "--gateway", self.gateway))
        return "\n".join(map(readable, lines))  # what the gateway chose: no terminal escape, no megabytes

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> Any:
        from sim.document import ScenarioError

        if isinstance(excinfo.value, (ScenarioFailed, ScenarioError)):  # a bad scenario file: file, line, field
            return str(excinfo.value)
        return super().repr_failure(excinfo, style)

    def reportinfo(self) -> tuple[Any, int | None, str]:
        return self.scenario_path or Path("sessiongate"), None, f"{self.name} [{self.gateway}]"


class ScenarioFile(pytest.File):
    """A scenario file named as a pytest argument: one item, under the file's own node id."""

    def collect(self) -> list[ScenarioItem]:
        settings = self.config.stash[SETTINGS]
        return [ScenarioItem.from_parent(self, name=self.path.stem, gateway=settings.gateway, path=self.path,
                                         expectations=settings.expectations)]


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> ScenarioFile | None:
    settings = parent.config.stash.get(SETTINGS, None)
    if settings is None or file_path.resolve() not in settings.named:  # named holds scenario files only
        return None
    return ScenarioFile.from_parent(parent, path=file_path)


def _shown(path: Path, here: Path) -> str:
    """A path for a node id: relative to where pytest was started, when it is under it."""
    try:
        return path.resolve().relative_to(here.resolve()).as_posix()
    except ValueError:
        return path.resolve().as_posix()


@pytest.hookimpl(tryfirst=True)  # before -k/-m deselection and --lf filtering
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    settings = config.stash.get(SETTINGS, None)
    if settings is None:
        return
    from conformance.harness.suite import catalog_paths

    gateway, expectations = settings.gateway, settings.expectations
    prefix = f"sessiongate[{gateway}]"
    from conformance.harness.failure_db import FailureDB

    db = FailureDB.open(gateway, settings.failure_db)
    for path in db.saved() if db is not None else []:  # first, as run and fuzz replay them
        name = f"saved/{path.stem}"
        items.append(ScenarioItem.from_parent(session, name=name, nodeid=f"{prefix}::{name}", gateway=gateway, path=path,
                                              expectations=expectations, saved=db))
    named: list[tuple[str, Path]] = []
    if settings.catalog:
        named += [(f"catalog/{path.stem}", path) for path in catalog_paths()]
    named += [(_shown(path, config.invocation_params.dir), path) for path in settings.scenarios]
    for name, path in named:
        items.append(ScenarioItem.from_parent(session, name=name, nodeid=f"{prefix}::{name}", gateway=gateway, path=path,
                                              expectations=expectations))
    profile = config.getoption("sessiongate_profile")
    for seed in settings.seeds:
        name = f"gen-{seed}"
        items.append(ScenarioItem.from_parent(session, name=name, nodeid=f"{prefix}::{name}", gateway=gateway, seed=seed,
                                              profile=profile, expectations=expectations, avoid=settings.avoid))
    ours = [item for item in items if isinstance(item, ScenarioItem) and item.parent is session]
    if ours:  # reported as collected, so pytest's "collected N items" counts them (xdist counts them anyway)
        config.hook.pytest_collectreport(report=pytest.CollectReport(prefix, "passed", None, ours))


def _typos(settings: Settings) -> list[str]:
    """`run`'s warning on expectations entries a letter or two off a catalog scenario's name, when
    the catalog is collected; an entry naming one of the author's own scenarios is no typo."""
    from conformance.harness.suite import catalog_paths, load_all

    if not settings.catalog or not settings.expectations.scenarios():
        return []
    catalog, errors = load_all(catalog_paths())
    own, own_errors = load_all(sorted({*settings.scenarios, *settings.named}))
    if errors or own_errors:  # a name unknown: `run` says nothing then either
        return []
    typos: list[str] = settings.expectations.typos((s.name for s in catalog), (s.name for s in own))
    return typos


def _gone_saved_failures(settings: Settings) -> list[str]:
    """`run`'s warning on entries naming a saved failure that is gone (it passed): with the
    failure database on, after the run, so one removed by it is counted."""
    from conformance.harness.failure_db import FailureDB
    from conformance.harness.suite import FUZZ_NAME, catalog_paths, load_all

    db = FailureDB.open(settings.gateway, settings.failure_db)
    if db is None or not any(FUZZ_NAME.fullmatch(name) for name in settings.expectations.scenarios()):
        return []
    scenarios, errors = load_all([*(catalog_paths() if settings.catalog else []), *sorted({*settings.scenarios, *settings.named}),
                                  *db.saved()])
    if errors:  # a name unknown
        return []
    gone: list[str] = settings.expectations.gone_saved_failures((s.name for s in scenarios), db.shown())
    return gone


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    """`run`'s warning on a mistyped expectations entry and its note on played crashes: how many
    scenarios crashed the gateway only by its own call."""
    settings = config.stash.get(SETTINGS, None)
    if settings is None:
        return
    from conformance.harness.runner import played_note

    for warning in [*_typos(settings), *_gone_saved_failures(settings)]:
        terminalreporter.write_line(warning, yellow=True)
    reports = [r for reports in terminalreporter.stats.values() for r in reports if getattr(r, "when", None) == "call"]
    played = sum(1 for r in reports if ("sessiongate_crashes", "played") in getattr(r, "user_properties", ()))
    if played:
        terminalreporter.write_line(played_note(played, len(reports), settings.gateway, "--sessiongate-isolate"))
