"""The suite's own tests run with the failure database off (`conformance.harness.failure_db`): a test
that fuzzes a buggy variant from the repository's root must not leave saved failures that the
next `sessiongate run` there would replay. Tests of the database turn it on in a folder of theirs."""

import os

os.environ["SESSIONGATE_FAILURE_DB"] = "off"
