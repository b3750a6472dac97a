"""Under `--isolate` a gateway gets the harness it gets in process: each harness facility a Python
gateway may use is carried to the parent (conformance/transport/exec_server.py's `RemoteHarness`).

`harness.llm.usage_of` was missing there: the Hermes adapter asks it for every answer it is
given, so every Hermes run under `--isolate` failed at its first reply with `AttributeError: usage_of`.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from test_usage import SCENARIO as USAGE

from conformance.harness.runner import run_scenario
from conformance.transport.isolation import isolated
from sim.loader import load_text

SCENARIO = USAGE.replace("name: usage\n", "name: usage-isolated\n", 1)  # its four answers, each usage kind

ASKING_MODULE = '''
from reference_impl import ReferenceGateway


class Asking(ReferenceGateway):
    """The reference gateway, asking the harness what each answer reports as it arrives, and
    noting it, so the log shows what it was told."""

    def start(self, config, harness):
        self.asked = harness
        super().start(config, harness)

    def deliver_reply(self, request_id, text):
        self.asked.note("usage_of", request=request_id, usage=self.asked.llm.usage_of(request_id))
        super().deliver_reply(request_id, text)
'''


def test_an_isolated_gateway_is_told_the_usage_of_each_answer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "sg_asking.py").write_text(ASKING_MODULE, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    import sg_asking  # type: ignore[import-not-found]

    scenario = load_text(SCENARIO, "usage-isolated.yaml")
    here = run_scenario(scenario, sg_asking.Asking(), "asking")
    there = run_scenario(scenario, isolated("sg_asking:Asking", env={"PYTHONPATH": str(tmp_path)}), "asking")
    assert there.failure is None, there.failure.describe()
    told = [(r.d("request"), r.d("usage")) for r in there.records if r.kind == "note" and r.d("what") == "usage_of"]
    assert told == [("r1", 5000), ("r2", "large"), ("r3", "none"), ("r4", "small")]
    assert there.log_text() == here.log_text()
    assert there.verdicts == here.verdicts
