"""The suite's own tests run with the failure database off (`conformance.harness.failure_db`): a test
that fuzzes a buggy variant from the repository's root must not leave saved failures that the
next `sessiongate run` there would replay. Tests of the database turn it on in a folder of theirs.

A test that hangs is ended after HANG_LIMIT seconds with every thread's stack on stderr (the
process exits; under xdist the test is reported as a crashed worker and the run goes on), so a
hang is a named failure, not a CI job that runs out of time. It is a hang guard, not a timing
assertion: the slowest test takes well under a minute."""

import faulthandler
import os
import sys
from collections.abc import Iterator

import pytest

os.environ["SESSIONGATE_FAILURE_DB"] = "off"

HANG_LIMIT = 480.0


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    faulthandler.dump_traceback_later(HANG_LIMIT, exit=True, file=sys.__stderr__)
    try:
        yield
    finally:
        faulthandler.cancel_dump_traceback_later()
