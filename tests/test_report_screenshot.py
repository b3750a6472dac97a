"""The HTML report of a failing zoo run renders in a real browser with its timeline.

Needs Debian's chromium (`apt-get install -y chromium`); skipped without it.
"""

from __future__ import annotations

import struct
import subprocess
from pathlib import Path

import pytest
from reportcase import failing_result

import reports

CHROMIUM = Path("/usr/bin/chromium")
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync")

pytestmark = pytest.mark.skipif(not CHROMIUM.exists(), reason="needs /usr/bin/chromium (apt-get install -y chromium)")


def chromium(profile: Path, *args: str) -> subprocess.CompletedProcess[str]:
    # The timeout only stops a hung browser; nothing here depends on how long it takes.
    return subprocess.run([str(CHROMIUM), *FLAGS, f"--user-data-dir={profile}", *args],
                          capture_output=True, text=True, timeout=300, check=True)


def test_failing_report_renders_its_timeline(tmp_path):
    result = failing_result()
    reports.write_all([result], str(tmp_path / "run"), "reference")
    page = (tmp_path / "run" / "report.html").as_uri()
    png = tmp_path / "report.png"
    chromium(tmp_path / "profile", f"--screenshot={png}", "--window-size=1400,2000", page)
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert struct.unpack(">II", data[16:24]) == (1400, 2000)
    assert len(data) > 40_000  # a blank or text-only page of this size compresses to far less
    dom = chromium(tmp_path / "profile", "--dump-dom", page).stdout
    assert dom.count("<svg") == 1
    assert f'aria-label="timeline of {result.scenario.name}"' in dom
    assert dom.count('fill="#d62728"') >= 1  # the numbered violation badge


def test_compare_page_renders_its_table(tmp_path):
    """`sessiongate compare` of two runs: the browser lays out one cell per scenario and run."""
    from reportcase import mixed_results

    from conformance.cli import main

    results = mixed_results()
    reports.write_all(results, str(tmp_path / "a"), "reference")
    reports.write_all(results[:2], str(tmp_path / "b"), "reference")
    page = tmp_path / "compare.html"
    assert main(["compare", str(tmp_path / "a"), str(tmp_path / "b"), "--label", "all", "--label", "two", "--out", str(page)]) == 0
    png = tmp_path / "compare.png"
    chromium(tmp_path / "profile", f"--screenshot={png}", "--window-size=1000,700", page.as_uri())
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert struct.unpack(">II", data[16:24]) == (1000, 700)
    assert len(data) > 15_000  # coloured cells, not a blank page
    dom = chromium(tmp_path / "profile", "--dump-dom", page.as_uri()).stdout
    assert dom.count('id="c-') == len(results) * 2
    assert dom.count(">not run</td>") == 2
