"""Loading a scenario file near the size cap: libyaml's composer against the pure-Python one,
in one process. Before this, every file went through the pure-Python composer.

Run: python bench/loader.py [--kib 1000]   (prints the seconds of each and their ratio)
"""

from __future__ import annotations

import argparse
import time
from unittest import mock

import yaml

from sim import document
from sim.loader import load_text


def big_scenario(kib: int) -> str:
    """A scenario of about `kib` KiB: one chat, messages a second apart."""
    head = "name: big\nchats: {alice: {}}\nevents:\n"
    event = "  - {message: alice, after: 1s}\n"
    return head + event * (kib * 1024 // len(event))


def seconds(text: str) -> float:
    start = time.process_time()
    load_text(text, "big.yaml")
    return time.process_time() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--kib", type=int, default=1000)
    args = parser.parse_args()
    text = big_scenario(args.kib)
    fast = seconds(text)
    with mock.patch.object(document, "_Loader", document._PyLoader):
        slow = seconds(text)
    print(f"{len(text) / 1024:.0f} KiB, {text.count(chr(10)) - 3} events: libyaml {fast:.2f} s CPU, "
          f"pure Python {slow:.2f} s CPU, ratio {slow / fast:.1f}x (libyaml available: {yaml.__with_libyaml__})")


if __name__ == "__main__":
    main()
