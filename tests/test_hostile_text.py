"""What a gateway says reaches a person's terminal, the reports and the files sessiongate writes
only as `sessiongate.text.readable` makes it: no terminal escape, no character a file cannot hold,
nothing of megabytes; and nothing it says stops a run or the writing of its report.

The gateways are throwaway modules written into tmp_path: the reference (or a bug-zoo variant, so
that checks quote its session ids) whose session ids, exception messages or notes are hostile."""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from conformance.cli import main
from conformance.harness.calls import exception_text
from conformance.harness.suite import CATALOG, Expectations
from conformance.harness.verdict import Violation
from sessiongate.text import readable
from sim.loader import load_file

FIRST = str(CATALOG / "01-idle-expiry-end-and-finalize.yaml")  # fails idle-expiry-no-finalize in I1, quoting its ids
EVIL = "<img src=x onerror=alert(1)></script>]]>\x1b]0;pwned\x07\x1b[31mRED\r\u202e"
RAW = ("\x1b", "\x07", "\r", "\u202e", "\x00", "\ud800")  # none of these may reach a terminal or a report

GATEWAY = '''
import os
from reference_impl.registry import reference

TEXT = os.environ["HOSTILE_TEXT"].encode().decode("unicode_escape") * int(os.environ.get("HOSTILE_TIMES", "1"))


class Hostile(Exception):
    pass


def ids():
    """The bug-zoo variant idle-expiry-no-finalize, its session ids prefixed with TEXT."""
    gateway = reference("idle-expiry-no-finalize")
    make_store = gateway.make_store

    def hostile_store():
        made = make_store()
        new_id = made.new_session_id
        made.new_session_id = lambda: TEXT + new_id()
        return made
    gateway.make_store = hostile_store
    return gateway


def raises():
    gateway = reference()
    def deliver_message(message):
        raise Hostile(TEXT)
    gateway.deliver_message = deliver_message
    return gateway


def notes():
    gateway = reference()
    deliver = gateway.deliver_message
    def deliver_message(message):
        gateway.h.note(TEXT, said=TEXT)
        return deliver(message)
    gateway.deliver_message = deliver_message
    return gateway
'''


@pytest.fixture
def hostile(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    """`hostile(text, times=1)`: the module `hostile_gw` saying `text` (Python escapes allowed)."""
    (tmp_path / "hostile_gw.py").write_text(GATEWAY)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("PYTHONPATH", str(tmp_path) + ":" + str(Path(__file__).resolve().parents[1]))  # an exec: child's too
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SESSIONGATE_FAILURE_DB", "off")

    def say(text: str, times: int = 1) -> None:
        monkeypatch.setenv("HOSTILE_TEXT", text)
        monkeypatch.setenv("HOSTILE_TIMES", str(times))
        sys.modules.pop("hostile_gw", None)
    return say


def _plain(text: str) -> None:
    assert not [c for c in RAW if c in text], text[:300]


@pytest.mark.parametrize("gateway", ["hostile_gw:ids", f"exec:{sys.executable} -m conformance.transport.exec_server hostile_gw:ids"])
def test_a_session_id_with_terminal_escapes_prints_escaped(hostile, capsys, tmp_path: Path, gateway: str) -> None:
    """Before: the ids' ESC ] 0 (retitles the window), ESC [31m, CR and U+202E reached the terminal raw."""
    hostile(EVIL.encode("unicode_escape").decode())
    assert main(["run", FIRST, "--gateway", gateway, "--report", str(tmp_path / "out")]) == 1
    out = capsys.readouterr().out
    _plain(out)
    assert r"\x1b]0;pwned\x07\x1b[31mRED\x0d\u202es1 got on_session_end" in out
    ET.parse(tmp_path / "out" / "junit.xml")
    html = (tmp_path / "out" / "report.html").read_text(encoding="utf-8")
    _plain(html)
    assert "<img" not in html and "</script>]" not in html and "&lt;img src=x onerror=alert(1)&gt;" in html


def test_enormous_values_are_cut_on_the_terminal_and_in_every_report(hostile, capsys, tmp_path: Path) -> None:
    """Before: a 200,000-character id made a 200,000-character line and a 5 MB report.html (its
    id in every tooltip); an exception's message went into junit.xml and summary.json once per check."""
    hostile("A", times=200_000)
    assert main(["run", FIRST, "--gateway", "hostile_gw:ids", "--report", str(tmp_path / "ids")]) == 1
    assert main(["run", FIRST, "--gateway", "hostile_gw:raises", "--report", str(tmp_path / "raises")]) == 1
    out = capsys.readouterr().out
    assert max(map(len, out.splitlines())) < 1100
    assert "characters cut]" in out
    for report in ("ids", "raises"):
        for name in ("junit.xml", "summary.json", "report.html"):
            assert (tmp_path / report / name).stat().st_size < 100_000, (report, name)
    summary = json.loads((tmp_path / "raises" / "summary.json").read_text(encoding="utf-8"))
    reason = summary["scenarios"][0]["verdicts"]["I1"]["reason"]
    assert reason.startswith("gateway error at step 1 (message (line 12)): Hostile: AAA") and "characters cut]" in reason
    log = (tmp_path / "raises" / summary["scenarios"][0]["log"]).read_text(encoding="utf-8")
    assert "A" * 200_000 in log  # the log keeps the whole message: only what a person reads is cut


def test_fuzz_writes_a_failure_file_that_loads_whatever_the_ids_hold(hostile, capsys, tmp_path: Path) -> None:
    """Before: the failure file's header quoted the id's ESC, YAML refused its own file and the
    whole fuzz run ended as a usage error (exit 2: `invalid YAML: character U+001B is not allowed`)."""
    hostile(EVIL.encode("unicode_escape").decode())
    assert main(["fuzz", "--seeds", "0:2", "--gateway", "hostile_gw:ids", "--out", "ff", "--no-shrink"]) == 1
    out = capsys.readouterr().out
    _plain(out)
    assert "2 scenarios, 0 passed, 2 failed" in out
    for path in sorted((tmp_path / "ff").glob("gen-*.yaml")):
        assert load_file(path).name == path.stem
        assert r"# failing: I1 session <img src=x onerror=alert(1)></script>]]>\x1b]0;pwned" in path.read_text(encoding="utf-8")


def test_a_lone_surrogate_a_gateway_hands_over_does_not_lose_the_report(hostile, capsys, tmp_path: Path) -> None:
    """Before: the log could not be written as UTF-8 and the run ended in a traceback, no report."""
    hostile(r"\ud800 lone")
    assert main(["run", FIRST, "--gateway", "hostile_gw:notes", "--report", "out"]) == 0
    capsys.readouterr()
    files = {name: (tmp_path / "out" / name).read_bytes() for name in ("junit.xml", "summary.json", "report.html")}
    index = json.loads((tmp_path / "out" / "logs" / "index.json").read_text(encoding="utf-8"))
    log = (tmp_path / "out" / index["runs"][0]["log"]).read_text(encoding="utf-8")
    notes = [json.loads(line) for line in log.splitlines() if '"note"' in line]
    assert notes and notes[0]["detail"]["said"] == "\ud800 lone"  # kept exactly, as a JSON escape
    assert main(["report", "out"]) == 0  # re-rendered from the logs: the same bytes
    assert files == {name: (tmp_path / "out" / name).read_bytes() for name in files}
    assert main(["replay", FIRST, "--gateway", "hostile_gw:notes"]) == 0
    assert r"said=\ud800 lone" in capsys.readouterr().out


def test_a_lone_surrogate_over_the_wire_does_not_lose_the_report(hostile, capsys, tmp_path: Path) -> None:
    """A child's JSON may spell a lone surrogate ("\\ud800"): the same as in process."""
    child = tmp_path / "child.py"
    child.write_text(
        "import json, subprocess, sys\n"
        "inner = subprocess.Popen([sys.executable, '-m', 'conformance.transport.exec_server', 'reference'],\n"
        "                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)\n"
        "for line in sys.stdin:\n"
        "    if json.loads(line).get('op') == 'deliver_message':\n"
        "        print(json.dumps({'call': 'note', 'args': {'what': '\\ud800', 'detail': {}}}), flush=True)\n"
        "        sys.stdin.readline()\n"
        "    inner.stdin.write(line); inner.stdin.flush()\n"
        "    while True:\n"
        "        out = inner.stdout.readline()\n"
        "        sys.stdout.write(out); sys.stdout.flush()\n"
        "        if 'call' not in json.loads(out):\n"
        "            break\n"
        "        inner.stdin.write(sys.stdin.readline()); inner.stdin.flush()\n")
    assert main(["run", FIRST, "--gateway", f"exec:{sys.executable} {child}", "--report", "out"]) == 0
    assert "1 scenario, 1 passed" in capsys.readouterr().out
    assert (tmp_path / "out" / "report.html").exists()


def test_an_exception_whose_str_or_class_name_misbehaves_is_still_named() -> None:
    """Before: a `__str__` raising SystemExit, or a metaclass `__name__` that raises, was reported
    as that SystemExit "raised outside a gateway call: … or by sessiongate itself"."""

    class Silent(Exception):
        def __str__(self) -> str:
            raise SystemExit(0)

    class Meta(type):
        @property
        def __name__(cls) -> str:  # type: ignore[override]
            raise SystemExit(0)

    class Nameless(Exception, metaclass=Meta):
        pass

    assert exception_text(Silent()) == "Silent: <its message raised SystemExit>"
    assert exception_text(Nameless("boom")) == "Nameless: boom"


def test_a_signature_is_one_word_of_an_expectations_line_whatever_the_session_id() -> None:
    """Before: a session id 'a b#c' made update-expectations write a line its own run refused
    (`expected 'SCENARIO CHECK [SIGNATURE]  # reason'`, exit 2), so nothing was judged."""
    violation = Violation("session a b#c\n got no end", session="a b#c\n")
    line = f"01-x I1 {violation.signature}  # known"
    assert violation.signature == r"b-c-got-no-end@a\x20b\x23c\x0a"
    assert Expectations.parse(line, "x.txt").signed == {("01-x", "I1"): {violation.signature: "known"}}


def test_readable_leaves_plain_text_alone_and_escapes_the_rest() -> None:
    assert readable("s1 got on_session_end at 09:45 — ü, 字, 😀\ttab") == "s1 got on_session_end at 09:45 — ü, 字, 😀\ttab"
    assert readable("a\x00b\x1b[2J\r\u202e\ud800\x85\u2028") == r"a\x00b\x1b[2J\x0d\u202e\ud800\x85\u2028"
    assert readable("one\ntwo\x1b", lines=True) == "one\ntwo\\x1b"
    cut = readable("x" * 5000)
    assert len(cut) < 1100 and cut.startswith("x" * 666) and cut.endswith("x" * 333) and "[4001 characters cut]" in cut


def test_a_traceback_is_shown_without_reading_the_gateways_source(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Before: `short_traceback` read the source of every frame (`extract_tb`), so a gateway's code
    compiled under the file name /dev/zero made sessiongate read it until memory ran out (15 s and
    3 GB under `ulimit -v`, in process; in an exec: child, up to its memory cap)."""
    import linecache

    from conformance.harness.calls import short_traceback

    source = tmp_path / "gw.py"
    source.write_text("def boom():\n    raise RuntimeError('boom')\n")
    namespace: dict[str, object] = {}
    exec(compile(source.read_text(), str(source), "exec"), namespace)
    read: list[str] = []
    monkeypatch.setattr(linecache, "updatecache", lambda filename, *args: read.append(filename) or [])
    try:
        namespace["boom"]()  # type: ignore[operator]
    except RuntimeError as err:
        assert short_traceback(err)[-2:] == ("gw.py:2 in boom", "RuntimeError: boom")
    assert read == []
