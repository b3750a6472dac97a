"""`sessiongate compare`: saved runs side by side. Every cell says the outcome (the first failing
check of a failure), links to an anchor that exists in that run's own report, ids are unique,
text is escaped, and the same runs give the same bytes wherever the command runs from."""

from __future__ import annotations

import os
import re
from dataclasses import replace
from pathlib import Path

import pytest
from reportcase import mixed_results, scenario

import reports
from conformance.cli import main
from conformance.harness.runner import run_scenario
from reference_impl import ReferenceGateway
from reports.compare import CompareError, column, render
from sim.loader import load_text

ODD = """
name: odd <b>&"name'
start: 2026-03-02T09:00
config: {reset: {mode: idle, idle_minutes: 60}}
events:
  - message: alice
"""


class NoMinIdle(ReferenceGateway):
    """A gateway that cannot take daily_min_idle_minutes: catalog 21 is skipped whole."""

    def profile(self, config):  # type: ignore[no-untyped-def]
        return replace(super().profile(config), unsupported=frozenset({"daily_min_idle_minutes"}))


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two run directories under one root: `mixed` (pass, fail, xfail, error) and `other`
    (the same scenarios clean, an unsupported one, and one with a name to escape)."""
    root = tmp_path_factory.mktemp("compare")
    mixed = mixed_results()
    reports.write_all(mixed, str(root / "mixed"), "reference")
    clean = [run_scenario(r.scenario, ReferenceGateway(), "other") for r in mixed]
    clean.append(run_scenario(scenario("21-"), NoMinIdle(), "other"))
    clean.append(run_scenario(load_text(ODD), ReferenceGateway(), "other"))
    reports.write_all(clean, str(root / "other"), "other")
    return root


def page_of(runs: Path, out: Path) -> str:
    assert main(["compare", str(runs / "mixed"), str(runs / "other"), "--out", str(out)]) == 0
    return out.read_text(encoding="utf-8")


def cells(page: str) -> dict[tuple[str, int], tuple[str, str, str]]:
    """(scenario, column) -> (class, href, text) of every cell of the scenario table."""
    out = {}
    for row in re.findall(r'<tr id="r-\d+"[^>]*>(.*?)</tr>', page):
        name = re.search(r'<td class="name">(.*?)</td>', row).group(1)
        for css, j, href, text in re.findall(r'<td class="([\w-]+)" id="c-\d+-(\d+)"[^>]*><a href="([^"]*)">([^<]*)</a></td>', row):
            out[name, int(j)] = (css, href, text)
    return out


def test_each_cell_is_the_outcome_with_the_first_failing_check(runs: Path, tmp_path: Path) -> None:
    page = page_of(runs, tmp_path / "compare.html")
    got = cells(page)
    mixed = {name: got[name, 0] for name, j in got if j == 0}
    words = sorted(text for _css, _href, text in mixed.values())
    assert [w for w in words if w.startswith("expected failure")] == ["expected failure I1"]
    assert any(re.fullmatch(r"fail I\d", w) for w in words)
    assert "gateway error" in words and "pass" in words
    other = [text for (name, j), (_c, _h, text) in got.items() if j == 1]
    assert "unsupported" in other
    assert other.count("pass") >= 4
    assert 'class="differs"' in page  # the failing scenario passes in the other run


def test_links_reach_an_anchor_of_each_run_report(runs: Path, tmp_path: Path) -> None:
    out = tmp_path / "deep" / "er" / "compare.html"
    page = page_of(runs, out)
    hrefs = re.findall(r'href="([^"]*)"', page)
    assert hrefs and all(not h.startswith("/") for h in hrefs)  # relative: the page moves with the runs
    for href in hrefs:
        file, _, anchor = href.partition("#")
        target = (out.parent / file).resolve()
        assert target.is_file(), href
        if anchor:
            assert f'id="{anchor}"' in target.read_text(encoding="utf-8"), href


def test_ids_are_unique_and_text_is_escaped(runs: Path, tmp_path: Path) -> None:
    page = page_of(runs, tmp_path / "compare.html")
    ids = re.findall(r'\bid="([^"]*)"', page)
    assert len(ids) == len(set(ids))
    assert "<b>" not in page and "odd &lt;b&gt;&amp;&quot;name&#x27;" in page


def test_the_same_runs_give_the_same_bytes(runs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first = page_of(runs, tmp_path / "a" / "compare.html")
    monkeypatch.chdir(tmp_path)
    second = page_of(runs, Path("b") / "compare.html")
    assert first == second
    assert str(tmp_path) not in first and str(runs) not in first


def test_labels_name_columns_and_must_differ(runs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "c.html"
    assert main(["compare", str(runs / "mixed"), str(runs / "other"), "--label", "one", "--label", "two", "--out", str(out)]) == 0
    assert ">one</a></th>" in out.read_text(encoding="utf-8")
    assert main(["compare", str(runs / "mixed"), str(runs / "mixed"), "--out", str(out)]) == 2
    assert "two run directories are labelled 'reference': name them with --label" in capsys.readouterr().err
    assert main(["compare", str(tmp_path / "nothing"), "--out", str(out)]) == 2
    assert f"{tmp_path / 'nothing'}: no such directory (`sessiongate run --report DIR` writes one)" in capsys.readouterr().err
    with pytest.raises(CompareError):
        render([])


def test_a_scenario_one_run_lacks_is_not_run_there(runs: Path, tmp_path: Path) -> None:
    page = render([column(runs / "mixed", tmp_path), column(runs / "other", tmp_path)])
    assert page.count(">not run</td>") == 2  # 21 and the odd one, absent from `mixed`
    assert os.path.relpath(runs / "mixed", tmp_path).replace(os.sep, "/") in page
