"""bench/hermes_split.py sorts py-spy samples into Hermes's own work and the harness's."""

from __future__ import annotations

import importlib.util
import types
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SITE = "/venv/lib/python3.11/site-packages"


def load_split() -> types.ModuleType:  # bench/ is scripts, not a package
    spec = importlib.util.spec_from_file_location("hermes_split", ROOT / "bench" / "hermes_split.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def frame(name: str, path: str, line: int = 1) -> str:
    return f"{name} ({path}:{line})"


RUNNER = frame("run_scenario", "/repo/conformance/harness/runner.py")
SETTLE = frame("Generation.settle", "/repo/conformance/adapters/hermes/runtime.py")
LOOP = frame("BaseEventLoop._run_once", "/usr/lib/python3.11/asyncio/base_events.py")
HANDLE = frame("GatewayRunner._handle_message", f"{SITE}/gateway/run.py")
LOAD = frame("load_config", f"{SITE}/hermes_cli/config.py")
COPY = frame("_copy_config", "/repo/conformance/adapters/hermes/speed.py")
NOW = frame("fake_time", f"{SITE}/freezegun/api.py")
JUDGE = frame("judge", "/repo/conformance/checks/__init__.py")
ENTER = frame("FrozenClock.enter", "/repo/conformance/adapters/hermes/clock.py")
START = frame("_freeze_time.start", f"{SITE}/freezegun/api.py")
WAIT = frame("Condition.wait", "/usr/lib/python3.11/threading.py")
IMPORT = frame("_find_and_load", "<frozen importlib._bootstrap>")


def test_each_sample_lands_in_its_class() -> None:
    split = load_split()
    lines = [
        ";".join([RUNNER, SETTLE, LOOP, HANDLE]) + " 10",  # Hermes alone
        ";".join([RUNNER, SETTLE, LOOP, HANDLE, LOAD, COPY]) + " 4",  # its deep copy, done by a seam
        ";".join([RUNNER, SETTLE, LOOP, HANDLE, NOW]) + " 2",  # Hermes reading the virtual clock
        ";".join([RUNNER, ENTER, START]) + " 5",  # entering freezegun
        ";".join([RUNNER, JUDGE]) + " 6",  # the checks
        ";".join([RUNNER, SETTLE, LOOP]) + " 3",  # event-loop driving
        ";".join([RUNNER, WAIT]) + " 50",  # a wait is not busy
        ";".join([RUNNER, IMPORT, HANDLE]) + " 7",  # import time is left out
        " 1",  # no Python frame
    ]
    counts = split.split(lines)
    assert counts == {"Hermes alone": 10, "Hermes work done by a seam": 4, "virtual time": 7,
                      "runner and checks": 6, "the adapter's other work": 3, "no Python frame": 1}


def test_report_gives_the_floor(capsys: pytest.CaptureFixture[str]) -> None:
    split = load_split()
    counts = split.split([";".join([RUNNER, HANDLE]) + " 50", ";".join([RUNNER, HANDLE, LOAD, COPY]) + " 10",
                          ";".join([RUNNER, ENTER, START]) + " 15", ";".join([RUNNER, JUDGE]) + " 5",
                          ";".join([RUNNER, SETTLE]) + " 20", " 25"])
    split.report(counts, 80.0)
    out = capsys.readouterr().out.splitlines()
    assert out[-4:] == [
        "Hermes's own work: 60.0% of attributed busy samples; with virtual time, runner and checks: 80.0%",
        "CPU a catalog scenario: 80.0 ms (12.5 scenarios/s)",
        "  Hermes's own work alone: 48.0 ms (20.8 scenarios/s)",
        "  with virtual time, runner and checks: 64.0 ms (15.6 scenarios/s)",
    ]
