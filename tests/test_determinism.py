"""Determinism is the product: one scenario gives one observation log, byte for byte, whatever the
run, the process, its hash seed or its working directory. Safe under pytest-xdist (`-n 2`)."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys

import pytest

from conformance.harness.runner import run_scenario
from conformance.harness.suite import catalog_paths
from reference_impl import ReferenceGateway
from sim.loader import load_file

CATALOG = catalog_paths()

# Prints one sha256 over the logs of every catalog scenario, in catalog order.
DIGEST_SCRIPT = """
import hashlib
from conformance.harness.runner import run_scenario
from conformance.harness.suite import catalog_paths
from reference_impl import ReferenceGateway
from sim.loader import load_file

digest = hashlib.sha256()
for path in catalog_paths():
    digest.update(run_scenario(load_file(path), ReferenceGateway(), "reference", check=False).log_text().encode())
print(digest.hexdigest())
"""


def catalog_digest_in_subprocess(hash_seed: str, cwd: str) -> str:
    env = {**os.environ, "PYTHONHASHSEED": hash_seed}
    done = subprocess.run([sys.executable, "-c", DIGEST_SCRIPT], env=env, cwd=cwd, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_catalog_is_not_empty() -> None:
    assert len(CATALOG) >= 30


@pytest.mark.parametrize("path", CATALOG, ids=[p.stem for p in CATALOG])
def test_two_runs_give_the_same_log(path) -> None:
    scenario = load_file(path)
    first = run_scenario(scenario, ReferenceGateway(), "reference")
    second = run_scenario(scenario, ReferenceGateway(), "reference")
    assert first.log_text() == second.log_text()
    assert first.verdicts == second.verdicts


def test_hash_seed_and_process_do_not_reach_the_log(tmp_path) -> None:
    """Two interpreters with different PYTHONHASHSEED (and this one, with its own) agree on every log."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    zero = catalog_digest_in_subprocess("0", str(tmp_path / "a"))
    other = catalog_digest_in_subprocess("12345", str(tmp_path / "b"))
    here = hashlib.sha256()
    for path in CATALOG:
        here.update(run_scenario(load_file(path), ReferenceGateway(), "reference", check=False).log_text().encode())
    assert zero == other == here.hexdigest()
