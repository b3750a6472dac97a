"""pytest plugin (entry point `pytest11`): conformance scenarios as pytest items.

    pytest --sessiongate-gateway NAME --sessiongate-seeds 0:500 [--no-sessiongate-catalog] -n auto

adds one item per catalog scenario and one per generated seed, so pytest-xdist, --junitxml,
-k, --lf and friends work on them. A failing item shows each failing check's evidence.
Without a --sessiongate-* option it does nothing at all (every pytest run loads it).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("sessiongate", "sessiongate conformance scenarios")
    group.addoption("--sessiongate-gateway", metavar="NAME", help="run conformance scenarios against this gateway")
    group.addoption("--sessiongate-seeds", metavar="A:B", help="also run the generated scenarios of seeds A <= seed < B")
    group.addoption("--sessiongate-profile", default="default", help="generation profile (default: default)")
    group.addoption("--sessiongate-catalog", dest="sessiongate_catalog", action="store_true", default=True,
                    help="include the built-in catalog (the default)")
    group.addoption("--no-sessiongate-catalog", dest="sessiongate_catalog", action="store_false",
                    help="leave the built-in catalog out")


def _active(config: pytest.Config) -> bool:
    return bool(config.getoption("sessiongate_gateway") or config.getoption("sessiongate_seeds"))


class ScenarioFailed(Exception):
    """A scenario's verdicts include a failure; carries the evidence to show."""


class ScenarioItem(pytest.Item):
    """One scenario against one gateway: a catalog file, or a generated seed."""

    def __init__(self, *, gateway: str, path: Path | None = None, seed: int | None = None, profile: str = "default",
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.gateway, self.scenario_path, self.seed, self.profile = gateway, path, seed, profile

    def scenario(self) -> Any:
        from sim.generate import scenario_for_seed
        from sim.loader import load_file

        return load_file(self.scenario_path) if self.scenario_path is not None else scenario_for_seed(self.seed or 0, self.profile)

    def runtest(self) -> None:
        from conformance.registry import resolve
        from conformance.runner import run_scenario
        from conformance.suite import Expectations, outcome

        result = run_scenario(self.scenario(), resolve(self.gateway)(), self.gateway)
        result = Expectations.for_gateway(self.gateway).apply(result)
        word = outcome(result)
        if word == "xfail":
            pytest.xfail("; ".join(f"{c}: {v.reason}" for c, v in result.verdicts.items() if v.status == "xfail"))
        if word != "pass":
            raise ScenarioFailed(self._evidence(result))

    def _evidence(self, result: Any) -> str:
        bad = [check for check, v in result.verdicts.items() if v.status in ("fail", "xpass", "error", "timeout")]
        lines = [f"{result.scenario.name} on {self.gateway}: {', '.join(bad)} not passing"]
        if result.failure is not None:
            lines.append(f"  {result.failure.describe()}")
            lines += [f"    {frame}" for frame in result.failure.traceback]
        for check, verdict in result.verdicts.items():
            if verdict.status in ("pass", "skip", "xfail"):
                continue
            lines.append(f"  {check} {verdict.status}: {verdict.reason if not verdict.violations else ''}".rstrip())
            for violation in verdict.violations[:10]:
                lines.append(f"    - {violation.message}")
            if len(verdict.violations) > 10:
                lines.append(f"    … and {len(verdict.violations) - 10} more")
        if self.seed is not None:
            profile = f" --profile {self.profile}" if self.profile != "default" else ""
            lines.append(f"reproduce: sessiongate fuzz --seeds {self.seed}:{self.seed + 1} --gateway {self.gateway}{profile}")
        else:
            lines.append(f"reproduce: sessiongate replay {self.scenario_path} --gateway {self.gateway}")
        return "\n".join(lines)

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> Any:
        if isinstance(excinfo.value, ScenarioFailed):
            return str(excinfo.value)
        return super().repr_failure(excinfo, style)

    def reportinfo(self) -> tuple[Any, int | None, str]:
        return self.scenario_path or Path("sessiongate"), None, f"{self.name} [{self.gateway}]"


@pytest.hookimpl(tryfirst=True)  # before -k/-m deselection and --lf filtering
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    if not _active(config):
        return
    from conformance.cli import UsageError
    from conformance.fuzz import parse_seeds
    from conformance.registry import UnknownGateway, resolve
    from conformance.suite import catalog_paths

    gateway = config.getoption("sessiongate_gateway") or "reference"
    seeds = config.getoption("sessiongate_seeds")
    try:
        resolve(gateway)
        seed_range = parse_seeds(seeds) if seeds else range(0)
    except (UsageError, UnknownGateway) as err:
        raise pytest.UsageError(f"sessiongate: {err}") from None
    prefix = f"sessiongate[{gateway}]"
    if config.getoption("sessiongate_catalog"):
        for path in catalog_paths():
            name = f"catalog/{path.stem}"
            items.append(ScenarioItem.from_parent(session, name=name, nodeid=f"{prefix}::{name}", gateway=gateway, path=path))
    profile = config.getoption("sessiongate_profile")
    for seed in seed_range:
        name = f"gen-{seed}"
        items.append(ScenarioItem.from_parent(session, name=name, nodeid=f"{prefix}::{name}", gateway=gateway, seed=seed,
                                              profile=profile))
