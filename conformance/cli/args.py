"""The argument-type layer of the front end: the parser class, value types, the options several
commands share (declared once), and the checks of what they name, each a `UsageError`."""

from __future__ import annotations

import argparse
import math
import os
import re
import threading
from collections.abc import Sequence
from pathlib import Path

from conformance.harness.suite import Expectations, catalog_file, catalog_paths, scenario_paths
from conformance.harness.watchdog import DEFAULT_STEP_TIMEOUT
from sessiongate import UsageError
from sim.clock import parse_duration

MIN_STEP_SECONDS = 0.01  # the watchdog ticks every limit/2: far below this its signals leave the run no time to go on
MAX_STEP_SECONDS = threading.TIMEOUT_MAX  # the longest wait (and interval timer) the platform takes
MAX_MEGABYTES = (1 << 63) // (1 << 20) - 1  # the largest cap RLIMIT_AS takes, in megabytes


def seconds(text: str) -> float:
    try:
        value = float(text.rstrip("s"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds like '10' or '2.5s', got {text!r}") from None
    if not math.isfinite(value):  # inf would overflow the wall-clock wait, nan never compares
        raise argparse.ArgumentTypeError(f"expected a finite number of seconds, got {text!r}")
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {text!r}")
    if value < MIN_STEP_SECONDS:  # 1e-5 spun in the watchdog's signals for good; 1e-4 called the reference unstoppable
        raise argparse.ArgumentTypeError(f"expected at least {MIN_STEP_SECONDS} seconds, got {text!r}")
    if value > MAX_STEP_SECONDS:  # 1e300 was an OverflowError traceback from setitimer
        raise argparse.ArgumentTypeError(f"expected at most {MAX_STEP_SECONDS:.0f} seconds, got {text!r}")
    return value


def megabytes(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number of megabytes, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive number of megabytes, got {text!r}")
    if value > MAX_MEGABYTES:  # setrlimit overflowed in the child: every scenario the gateway's error
        raise argparse.ArgumentTypeError(f"expected at most {MAX_MEGABYTES} megabytes, got {text!r}")
    return value


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}")
    return value


def check_out_dir(directory: str | None, option: str) -> None:
    """A directory the command writes into later must be usable now: creating it only at the end
    would fail after every scenario had run. Creates nothing."""
    if not directory:
        return
    path = Path(directory)
    if path.exists():
        if not path.is_dir():
            raise UsageError(f"{option} {directory}: exists and is not a directory")
        if not os.access(path, os.W_OK | os.X_OK):
            raise UsageError(f"{option} {directory}: directory is not writable")
        return
    parent = path.absolute().parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise UsageError(f"{option} {directory}: cannot be created, {parent} is not a directory")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise UsageError(f"{option} {directory}: cannot be created in {parent} (not writable)")


def scenario_files(paths: Sequence[str]) -> list[Path]:
    """The scenario files PATHS name (files, and folders' *.yaml, *.yml, *.json), or the catalog
    when none is named. A missing path, or folders with nothing in them, is a usage error: nothing
    to run is not a success."""
    paths = [path if Path(path).exists() else str(catalog_file(path) or path) for path in paths]
    missing = [path for path in paths if not Path(path).exists()]
    if missing:
        raise UsageError(f"{missing[0]}: no such file or directory (nor a catalog scenario's name)")
    found = scenario_paths(list(paths)) if paths else catalog_paths()
    if not found:
        raise UsageError(f"no scenario files in {', '.join(paths)} (*.yaml, *.yml, *.json)")
    return found


def load_expectations(gateway: str, explicit: str | None) -> Expectations:
    """The expectations file for `gateway` (`explicit` if given), or a UsageError saying why it cannot be read."""
    try:
        return Expectations.for_gateway(gateway, explicit)
    except IsADirectoryError:
        raise UsageError(f"{explicit}: expectations file is a directory") from None
    except UnicodeDecodeError as err:
        raise UsageError(f"{explicit}: expectations file is not UTF-8 (byte {err.object[err.start]:#04x} at offset {err.start})") from None
    except OSError as err:
        raise UsageError(f"{explicit}: cannot read the expectations file: {err.strerror}") from None


def add_isolation_options(parser: argparse.ArgumentParser) -> None:
    """--isolate, --step-timeout and --memory-mb, defined once: `run` and `fuzz` take them alike,
    and `gateway_factory` reads them."""
    parser.add_argument("--isolate", action="store_true",
                        help="run each scenario's gateway in a child process of its own (an exec: gateway is one already)")
    parser.add_argument("--step-timeout", type=seconds, default=DEFAULT_STEP_TIMEOUT, metavar="SECONDS",
                        help="wall-clock limit per gateway step, in process or in a child (default 10)")
    parser.add_argument("--memory-mb", type=megabytes, default=4096, metavar="MB",
                        help="memory cap of an isolated or exec: gateway (default 4096)")


def add_failure_db_option(parser: argparse.ArgumentParser) -> None:
    """--no-failure-db, defined once: `run` and `fuzz` replay the saved failures (`harness.failure_db`) alike."""
    parser.add_argument("--no-failure-db", action="store_true",
                        help="neither replay nor save failures in .sessiongate/failures/ (or $SESSIONGATE_FAILURE_DB)")


def add_gateway_option(parser: argparse.ArgumentParser, help: str | None = None) -> None:
    """--gateway, defined once (default: reference)."""
    parser.add_argument("--gateway", default="reference", help=help or "gateway name, NAME:ARG or MODULE:FACTORY (default: reference)")


_SEEDS = re.compile(r"(\d+):(\d+)", re.ASCII)  # int() alone also took ' 0\n', '1_0' and other scripts' digits
_SHARD = re.compile(r"(\d+)/(\d+)", re.ASCII)


def parse_seeds(text: str) -> range:
    match = _SEEDS.fullmatch(text) if len(text) <= 40 else None
    if match is None:
        negative = len(text) <= 40 and re.fullmatch(r"-?\d+:-?\d+", text, re.ASCII)
        raise UsageError(f"--seeds expects {'0 <= A <= B' if negative else 'A:B (A <= seed < B)'}, got {text!r}")
    low, high = int(match.group(1)), int(match.group(2))
    if high < low:
        raise UsageError(f"--seeds expects 0 <= A <= B, got {text!r}")
    if high == low:  # zero scenarios would pass trivially
        raise UsageError(f"--seeds {text} is empty (A <= seed < B)")
    return range(low, high)


def parse_time_budget(text: str | None) -> float | None:
    """Seconds: a duration ('90s', '10m', '1h30m') or a bare number of seconds, as --step-timeout takes."""
    if not text:
        return None
    try:
        seconds = parse_duration(text) / 1000
    except ValueError:
        try:
            seconds = float(text.removesuffix("s"))
        except ValueError:
            raise UsageError(f"--time-budget expects a duration like '60s' or '10m', or seconds, got {text!r}") from None
    if not math.isfinite(seconds) or seconds <= 0:
        raise UsageError(f"--time-budget expects a positive, finite time, got {text!r}")
    return seconds


def parse_shard(text: str | None) -> tuple[int, int]:
    if not text:
        return 1, 1
    match = _SHARD.fullmatch(text) if len(text) <= 40 else None
    if match is None:
        raise UsageError(f"--shard expects I/N, got {text!r}")
    index, count = int(match.group(1)), int(match.group(2))
    if not 1 <= index <= count:
        raise UsageError(f"--shard expects 1 <= I <= N, got {text!r}")
    return index, count


def shard(seeds: range, text: str | None) -> range:
    """Every N-th seed starting at the I-th (1-based): shards 1/N … N/N partition the range."""
    index, count = parse_shard(text)
    return seeds[index - 1::count]


def parse_workers(text: str | None) -> int:
    if text in (None, "", "1"):
        return 1
    if text == "auto":
        return os.cpu_count() or 1
    try:
        workers = int(text)  # type: ignore[arg-type]
    except ValueError:
        raise UsageError(f"-j/-n expects a number or 'auto', got {text!r}") from None
    if workers < 1:
        raise UsageError(f"-j/-n expects at least 1, got {workers}")
    most = max_workers()
    if workers > most:  # each is a process with its own interpreter: 100,000 would exhaust the machine
        raise UsageError(f"-j/-n expects at most {most} (8 a core on this machine's {os.cpu_count() or 1}), got {workers}")
    return workers


def max_workers() -> int:
    """The most worker processes a run may start: 8 a core (a gateway that waits on I/O can use
    more than one a core; past that, processes only cost memory and start-up)."""
    return 8 * (os.cpu_count() or 1)
