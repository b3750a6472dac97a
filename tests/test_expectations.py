"""Expectations files: how a gateway name finds its file, and what a file may say."""

from __future__ import annotations

from pathlib import Path

import pytest

from conformance import registry
from conformance.suite import EXPECTATIONS, Expectations
from sim.document import ScenarioError


def test_a_plain_name_is_its_own_stem() -> None:
    assert registry.expectation_names("reference") == ["reference"]
    assert registry.expectation_names("reference:batch-lost-on-shutdown") == ["reference-batch-lost-on-shutdown"]


def test_a_factory_may_name_its_files(monkeypatch: pytest.MonkeyPatch) -> None:
    def factory(arg: str = "") -> None:
        raise AssertionError("not called")

    factory.expectation_names = lambda arg: [f"demo-{arg}.0", f"demo-{arg}"]  # type: ignore[attr-defined]
    monkeypatch.setattr(registry, "registered", lambda: {"demo": "demo.module:factory"})
    monkeypatch.setattr(registry, "_load", lambda target: factory)
    assert registry.expectation_names("demo:7") == ["demo-7.0", "demo-7"]


def test_the_first_stem_with_a_file_applies(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / "demo-7.txt").write_text("01-idle-expiry-end-and-finalize I1  # because\n")
    monkeypatch.setattr("conformance.suite.EXPECTATIONS", tmp_path)
    monkeypatch.setattr("conformance.suite.expectation_names", lambda name: ["demo-7.0", "demo-7"])
    found = Expectations.for_gateway("demo:7")
    assert found.pairs == {("01-idle-expiry-end-and-finalize", "I1"): "because"}
    monkeypatch.setattr("conformance.suite.expectation_names", lambda name: ["nothing"])
    assert Expectations.for_gateway("demo:7").pairs == {}


def test_a_line_without_a_reason_is_refused() -> None:
    with pytest.raises(ScenarioError, match=r"x.txt:2: 01-a: every expected failure needs a one-line reason"):
        Expectations.parse("# header\n01-a I1\n", "x.txt")


@pytest.mark.parametrize("path", sorted(EXPECTATIONS.glob("*.txt")), ids=lambda p: p.name)
def test_every_shipped_file_names_catalog_scenarios_and_checks(path: Path) -> None:
    from conformance.suite import catalog_paths
    from sim.loader import load_file

    names = {load_file(p).name for p in catalog_paths()}
    expectations = Expectations.parse(path.read_text(encoding="utf-8"), str(path))
    assert expectations.pairs, f"{path.name} is empty"
    unknown = sorted({scenario for scenario, _ in expectations.pairs} - names)
    assert not unknown, f"{path.name} names scenarios not in the catalog: {unknown}"


def test_an_expectations_entry_naming_no_catalog_scenario_is_warned_about(tmp_path, capsys) -> None:
    from conformance.cli import main

    typo = tmp_path / "exp.txt"
    typo.write_text("01-idle-expiry-end-and-finalise I1  # the catalog spells it -finalize\n")
    assert main(["run", "-q", "--expectations", str(typo)]) == 0
    assert capsys.readouterr().err.splitlines()[-1] == (
        f"warning: {typo} names no catalog scenario '01-idle-expiry-end-and-finalise': a typo expects nothing")
