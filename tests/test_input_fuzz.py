"""A derandomized Hypothesis fuzzer of the loader over mutated catalog files (the input audit's,
cut to a CI budget): keys deleted, renamed and added, values swapped for other YAML types (lists,
maps, null, huge ints, NaN, inf, negatives, dates, long and non-ASCII text), lines truncated,
duplicated and spliced with anchors, tags, tabs and odd characters. Each file loads, or is refused
with a ScenarioError naming the file and a line; a file that loads runs on the reference with no
exception and no checker error."""

from __future__ import annotations

import json
import math
import re
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conformance.harness.registry import resolve
from conformance.harness.runner import run_scenario
from conformance.harness.suite import catalog_paths
from conformance.harness.verdict import CHECKER_ERROR
from sim.document import ScenarioError, parse_document
from sim.loader import load_text

TEXTS = [path.read_text(encoding="utf-8") for path in catalog_paths()]


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return [_plain(v) for v in value] if isinstance(value, list) else value


DOCS = [_plain(parse_document(text, "x.yaml")) for text in TEXTS]
FUZZ = settings(max_examples=250, deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck))

SCALARS = st.sampled_from([
    None, True, False, 0, -1, 2**63, 10**30, 1.5, -0.0, math.nan, math.inf, -math.inf, "", "x" * 500, "é日\u202e", "a\tb",
    "08", "09:30", "25:61", "2026-03-29T02:30", "1970-01-01T00:00", "8999-12-31T23:59", "5m", "-5m", "0s", "lazy", "default",
    "idle", "/new", "alice", "recorder", "Etc/GMT-14", "before-timers", "[t1] x", "02:30 (2nd)",
])
KEYS = st.sampled_from(["name", "seed", "zone", "start", "config", "chats", "events", "catches", "reset", "mode", "idle_minutes",
                        "providers", "watcher_interval", "message", "command", "advance", "restart", "crash_at", "point", "hit",
                        "at", "after", "order", "text", "chat", "for", "platform", "<<", ""])
VALUES = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(KEYS, inner, max_size=3), max_leaves=6)
SNIPPETS = ["\t", "&a ", "*a", "<<: *a", "!!python/object/apply:os.system ['x'] ", "!!binary aGk= ", "!x ", "? ", "- ", ": ",
            "{", "[", "'", '"', "#", "|", "---\n", "\ufeff", "\x85", "\u2028", "\r", "\x1b", "\ud800", "\x00", "~", ".nan",
            "9" * 5000, "[" * 300]


def _paths(doc: Any, prefix: tuple = ()) -> list[tuple]:
    out = [prefix]
    if isinstance(doc, dict):
        for key, value in doc.items():
            out += _paths(value, (*prefix, key))
    elif isinstance(doc, list):
        for index, value in enumerate(doc):
            out += _paths(value, (*prefix, index))
    return out


@st.composite
def mutated_documents(draw: st.DrawFn) -> str:
    doc = json.loads(json.dumps(draw(st.sampled_from(DOCS))))
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(_paths(doc)))
        if not path:
            continue
        parent = doc
        for step in path[:-1]:
            parent = parent[step]
        op = draw(st.sampled_from(["replace", "replace", "delete", "rename", "wrap"]))
        if op == "replace":
            parent[path[-1]] = draw(VALUES)
        elif op == "delete":
            del parent[path[-1]]
        elif op == "rename" and isinstance(parent, dict):
            parent[draw(KEYS)] = parent.pop(path[-1])
        elif op == "wrap":
            parent[path[-1]] = [parent[path[-1]]]
    return yaml.safe_dump(doc, sort_keys=False, allow_unicode=True, default_flow_style=draw(st.booleans()))


@st.composite
def mutated_texts(draw: st.DrawFn) -> str:
    lines = draw(st.sampled_from(TEXTS)).split("\n")
    for _ in range(draw(st.integers(1, 3))):
        i = draw(st.integers(0, len(lines) - 1))
        op = draw(st.sampled_from(["insert", "insert", "duplicate", "delete", "truncate"]))
        if op == "insert":
            j = draw(st.integers(0, len(lines[i])))
            lines[i] = lines[i][:j] + draw(st.sampled_from(SNIPPETS) | st.text(max_size=3)) + lines[i][j:]
        elif op == "duplicate":
            lines.insert(i, lines[i])
        elif op == "delete" and len(lines) > 1:
            del lines[i]
        elif op == "truncate":
            lines = lines[: i + 1]
            lines[i] = lines[i][: draw(st.integers(0, len(lines[i])))]
    return "\n".join(lines)


def loads_or_names_its_line(text: str, source: str) -> None:
    try:
        scenario = load_text(text, source)
    except ScenarioError as err:
        assert str(err).startswith(f"{source}:") and "\n" not in str(err), str(err)
        assert 1 <= err.line <= text.count("\n") + 1 or re.search("nested too deeply|larger than", err.message), str(err)
        return
    result = run_scenario(scenario, resolve("reference")(), "reference", budget=20_000)
    assert not [check for check, verdict in result.verdicts.items() if verdict.status == CHECKER_ERROR], result.verdicts


@FUZZ
@given(mutated_documents())
def test_mutated_documents_load_or_name_their_line(text: str) -> None:
    loads_or_names_its_line(text, "m/x.yaml")


@FUZZ
@given(mutated_documents().map(lambda text: json.dumps(yaml.safe_load(text), default=str)))
def test_mutated_documents_as_json_load_or_name_their_line(text: str) -> None:
    loads_or_names_its_line(text, "m/x.json")


@FUZZ
@given(mutated_texts())
def test_mutated_texts_load_or_name_their_line(text: str) -> None:
    loads_or_names_its_line(text, "m/x.yaml")
