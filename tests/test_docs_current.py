"""Figures the README and the docs quote that the code can recompute: each held to a fresh
computation, so a scenario added to the catalog, or a release to an adapter, cannot leave a
page behind (the README's coverage table had stayed at 79 scenarios while the catalog grew to 82)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from conformance.adapters.openclaw import RELEASES
from conformance.cli import main
from conformance.harness.suite import catalog_paths

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def coverage_markdown() -> str:
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["coverage", "--markdown"]) == 0
    return out.getvalue()


def _first_table(text: str) -> list[str]:
    """The rows of the first markdown table in `text` whose header starts with `| state`."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| state"))
    end = next((i for i in range(start, len(lines)) if not lines[i].startswith("|")), len(lines))
    return lines[start:end]


def test_docs_coverage_is_what_the_command_prints(coverage_markdown: str) -> None:
    doc = (ROOT / "docs" / "coverage.md").read_text(encoding="utf-8")
    assert coverage_markdown.strip() in doc, "docs/coverage.md: paste `sessiongate coverage --markdown` again"


def test_the_readme_coverage_table_is_the_catalogs(coverage_markdown: str) -> None:
    assert _first_table(README) == _first_table(coverage_markdown), \
        "README.md's coverage table: paste the first table of `sessiongate coverage --markdown` again"
    said = re.search(r"the (\d+) catalog scenarios exercise", README)
    assert said is not None and int(said.group(1)) == len(catalog_paths())


def test_the_readme_has_one_coverage_table_and_its_commands_table() -> None:
    """A paste of the coverage table over the Commands table (forty-eighth session) passed the
    test above, which reads the first `| state` table only: the README lost every command's line."""
    sections = re.split(r"^## ", README, flags=re.MULTILINE)
    commands = next(s for s in sections if s.startswith("Commands\n"))
    coverage = next(s for s in sections if s.startswith("Lifecycle coverage of the catalog\n"))
    assert "| command | what it does |" in commands, "README.md's Commands section lost its table"
    assert "| state \\ event" not in commands and "| state \\ event" in coverage
    assert README.count("| state \\ event") == 1, "README.md has more than one coverage table"
    documented = set(re.findall(r"^\| `sessiongate ([a-z-]+)", commands, flags=re.MULTILINE))
    import argparse

    from conformance.cli import build_parser

    [sub] = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    assert documented == set(sub.choices), "README.md's Commands table: a line for each command, none for a gone one"


def test_the_pytest_example_counts_the_catalog() -> None:
    doc = (ROOT / "docs" / "gateway-authors.md").read_text(encoding="utf-8")
    said = re.search(r"\((\d+) and 500: `collected (\d+) items`", doc)
    assert said is not None
    assert (int(said.group(1)), int(said.group(2))) == (len(catalog_paths()), len(catalog_paths()) + 500)


def test_the_readme_names_every_openclaw_release() -> None:
    line = next(line for line in README.splitlines() if "the real\nOpenClaw" in line or "npm `openclaw`" in line)
    assert all(release in line for release in RELEASES), f"README.md names OpenClaw releases: {line!r}"


def test_the_authors_guide_names_every_setting_a_gateway_may_lack() -> None:
    """It listed two of the eight (`muted`, `daily_min_idle_minutes`)."""
    from conformance.features import SETTINGS

    doc = (ROOT / "docs" / "gateway-authors.md").read_text(encoding="utf-8")
    said = re.search(r"the settings you do not have \(`SETTINGS`: ([^)]*)\)", doc.replace("\n", " "))
    assert said is not None
    assert re.findall(r"`(\w+)`", said.group(1)) == list(SETTINGS)
