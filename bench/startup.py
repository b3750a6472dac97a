"""Start-up cost of `sessiongate --help` (and `--version`) against a bare interpreter.

Each command is started N times as a fresh process (`python -c pass`, then `python -m sessiongate
--help`, `python -m sessiongate --version`); the best time of each is kept, since start-up noise
only ever adds. The front end imports only the command it runs (conformance/cli/__init__.py), so
`--help` reads no simulator, checks or gateway. Wall time is read here, and only here.

Run: python bench/startup.py [--quick]. The last line is `ratio vs bare interpreter: X.XX` (of --help;
the issue's bound is 3)."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def best_of(argv: list[str], runs: int) -> float:
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    best = float("inf")
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run(argv, cwd=ROOT, env=env, check=True, stdout=subprocess.DEVNULL)
        best = min(best, time.perf_counter() - started)
    return best


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="5 runs each instead of 30")
    args = parser.parse_args()
    runs = 5 if args.quick else 30
    bare = best_of([sys.executable, "-c", "pass"], runs)
    help_ = best_of([sys.executable, "-m", "sessiongate", "--help"], runs)
    version = best_of([sys.executable, "-m", "sessiongate", "--version"], runs)
    print(f"bare interpreter        {bare * 1000:7.1f} ms")
    print(f"sessiongate --version   {version * 1000:7.1f} ms  ({version / bare:.2f}x)")
    print(f"sessiongate --help      {help_ * 1000:7.1f} ms  ({help_ / bare:.2f}x)")
    print(f"ratio vs bare interpreter: {help_ / bare:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
