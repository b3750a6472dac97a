"""The loader's contract: every error is one exact line `file:line: field: message`, unsafe YAML
is refused, and anything at all fed to it yields a Scenario or a ScenarioError, nothing else."""

from __future__ import annotations

import contextlib
import json
import re
import string
from dataclasses import replace
from datetime import date

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conformance.harness.suite import catalog_paths
from sim.clock import from_ms, load_zone
from sim.document import MAX_FILE_BYTES, ScenarioError, parse_document
from sim.loader import load_file, load_text
from sim.scenario import BackendFail, Message, Scenario
from sim.writer import dump_text, scenario_document

# Lines 1-8; events start on line 9.
HEAD = """name: x
zone: Europe/Berlin
start: 2026-03-02T09:00
config:
  reset: {mode: idle, idle_minutes: 30}
chats:
  alice: {}
events:
"""
# The same with a provider; events start on line 10.
HEAD_MEM0 = HEAD.replace("chats:", "  providers: [{name: mem0, retain_every_n_turns: 2}]\nchats:")

LAUGHS = "a: &a [x,x,x,x,x,x,x,x,x,x]\n" + "".join(
    f"{b}: &{b} [{', '.join([f'*{a}'] * 10)}]\n" for a, b in zip("abcde", "bcdef", strict=True)
)

ERRORS = [
    # fields
    ("negative-advance", HEAD + "  - message: alice\n  - message: alice\n  - checkpoint: c1\n  - advance: -5m\n",
     "x.yaml:12: events[3].advance: expected a positive duration like '61m', got '-5m'"),
    ("unknown-key-top", "name: x\ncolour: red\nevents: []\n", "x.yaml:2: colour: unknown key"),
    ("unknown-key-event", HEAD + "  - message: alice\n    colour: red\n", "x.yaml:10: events[0].colour: unknown key"),
    ("unknown-key-policy", "name: x\nconfig:\n  reset:\n    mode: idle\n    idle_minute: 30\nevents: []\n",
     "x.yaml:5: config.reset.idle_minute: unknown key (did you mean 'idle_minutes'?)"),
    ("unknown-chat", HEAD + "  - message: bob\n", "x.yaml:9: events[0].message: unknown chat 'bob'; declared chats: alice"),
    ("long-value-shortened", HEAD + "  - message: " + "b" * 100 + "\n",
     f"x.yaml:9: events[0].message: unknown chat '{'b' * 40}'...; declared chats: alice"),
    ("duplicate-key-top", "name: x\nname: y\nevents: []\n", "x.yaml:2: name: duplicate key"),
    ("duplicate-key-event", HEAD + "  - message: alice\n    text: hi\n    text: ho\n", "x.yaml:11: events[0].text: duplicate key"),
    ("turn-tag-in-text", HEAD + "  - message: alice\n    text: 'see [t2] above'\n",
     "x.yaml:10: events[0].text: a message's text cannot contain a turn tag like '[t2]': the harness adds its own"),
    ("duplicate-chat", "name: x\nchats:\n  alice: {}\n  alice: {}\nevents: []\n", "x.yaml:4: chats.alice: duplicate key"),
    ("bad-zone", "name: x\nzone: Europe/Atlantis\nevents: []\n",
     "x.yaml:2: zone: unknown time zone 'Europe/Atlantis'; use an IANA name like 'Europe/Berlin'"),
    ("zone-is-a-folder", "name: x\nzone: America\nevents: []\n",
     "x.yaml:2: zone: unknown time zone 'America'; use an IANA name like 'Europe/Berlin'"),
    ("zone-path", "name: x\nzone: ../../etc/passwd\nevents: []\n",
     "x.yaml:2: zone: unknown time zone '../../etc/passwd'; use an IANA name like 'Europe/Berlin'"),
    ("at-goes-back", HEAD + "  - message: alice\n    at: '10:00'\n  - message: alice\n    at: '09:30'\n",
     "x.yaml:12: events[1].at: 09:30 is before the previous event (30m earlier)"),
    ("at-and-after", HEAD + "  - message: alice\n    at: '10:00'\n    after: 5m\n",
     "x.yaml:11: events[0].after: give either 'at' or 'after', not both"),
    ("bad-at", HEAD + "  - message: alice\n    at: '24:00'\n",
     "x.yaml:10: events[0].at: expected a local time like '09:30' or '2026-03-29T04:27', got '24:00'"),
    ("at-no-such-day", HEAD + "  - message: alice\n    at: 2026-02-30T10:00\n",
     "x.yaml:10: events[0].at: expected a local time like '09:30' or '2026-03-29T04:27', got '2026-02-30T10:00'"),
    ("start-time-only", "name: x\nstart: '09:00'\nevents: []\n",
     "x.yaml:2: start: expected a local date and time like '2026-03-29T09:00', got '09:00'"),
    ("start-year-9999", "name: x\nzone: Pacific/Pago_Pago\nstart: 9999-12-31T23:00\nevents: []\n",
     "x.yaml:3: start: expected a date in the years 1970 to 8999, got '9999-12-31T23:00'"),
    ("advance-past-8999", "name: x\nevents:\n  - advance: 3000000d\n", "x.yaml:3: events[0].advance: the timeline runs past the year 8999"),
    ("lock-past-8999", "name: x\nevents:\n  - db_locked: 3000000d\n",
     "x.yaml:3: events[0].db_locked: the timeline runs past the year 8999"),
    ("config-past-8999", "name: x\nconfig:\n  reset: {mode: idle, idle_minutes: 9999999999}\nevents: []\n",
     "x.yaml:2: config: its idle times and intervals run the timeline past the year 8999"),
    ("missing-name", "events: []\n", "x.yaml:1: name: required"),
    ("missing-events", "name: x\n", "x.yaml:1: events: required"),
    ("seed-not-whole", "name: x\nseed: 1.5\nevents: []\n", "x.yaml:2: seed: expected a whole number, got 1.5"),
    ("bad-mode", "name: x\nconfig:\n  reset: {mode: weekly}\nevents: []\n",
     "x.yaml:3: config.reset.mode: expected one of idle, daily, both, none, got 'weekly'"),
    ("at-hour-24", "name: x\nconfig:\n  reset: {mode: daily, at_hour: 24}\nevents: []\n",
     "x.yaml:3: config.reset.at_hour: expected 0 to 23, got 24"),
    ("bad-watcher", "name: x\nconfig:\n  watcher_interval: often\nevents: []\n",
     "x.yaml:3: config.watcher_interval: expected a positive duration like '61m', got 'often'"),
    ("bad-platform", "name: x\nconfig:\n  reset_by_platform:\n    myspace: {mode: idle}\nevents: []\n",
     "x.yaml:4: config.reset_by_platform.myspace: expected one of telegram, discord, slack, whatsapp, signal, cli"),
    ("provider-named-recorder", "name: x\nconfig:\n  providers: [{name: recorder}]\nevents: []\n",
     "x.yaml:3: config.providers[0].name: 'recorder' is the harness's own provider and is always loaded"),
    ("duplicate-provider", "name: x\nconfig:\n  providers:\n    - name: mem0\n    - name: mem0\nevents: []\n",
     "x.yaml:5: config.providers[1].name: duplicate provider 'mem0'"),
    ("bad-chat-name", "name: x\nchats:\n  'a b': {}\nevents: []\n", "x.yaml:3: chats.a b: chat names are letters, digits, '.', '_' or '-'"),
    # events
    ("two-kinds", HEAD + "  - message: alice\n    advance: 5m\n",
     "x.yaml:9: events[0]: expected exactly one of message, command, delegate, advance, sigterm, crash, restart, "
     "delete_session, delete_parent, db_locked, backend_fail, backend_slow, checkpoint, crash_at; found message and advance"),
    ("no-kind", HEAD + "  - at: '10:00'\n",
     "x.yaml:9: events[0]: expected exactly one of message, command, delegate, advance, sigterm, crash, restart, "
     "delete_session, delete_parent, db_locked, backend_fail, backend_slow, checkpoint, crash_at; found none"),
    ("command-without-chat", HEAD + "  - command: /new\n", "x.yaml:9: events[0].command: a command needs 'chat'"),
    ("unknown-command", HEAD + "  - command: /nuke\n    chat: alice\n",
     "x.yaml:9: events[0].command: expected one of /new, /reset, /stop, /resume, got '/nuke'"),
    ("sigterm-with-value", HEAD + "  - sigterm: now\n", "x.yaml:9: events[0].sigterm: takes no value, got 'now'"),
    ("backend-fail-unknown-provider", HEAD_MEM0 + "  - backend_fail: zep\n    for: 5m\n",
     "x.yaml:10: events[0].backend_fail: unknown provider 'zep'; configured providers: mem0"),
    ("backend-fail-no-providers", HEAD + "  - backend_fail: zep\n    for: 5m\n",
     "x.yaml:9: events[0].backend_fail: unknown provider 'zep'; configured providers: none"),
    ("backend-fail-recorder", HEAD_MEM0 + "  - backend_fail: recorder\n    for: 5m\n",
     "x.yaml:10: events[0].backend_fail: 'recorder' is the harness's own provider; its backend cannot be failed"),
    ("backend-fail-without-for", HEAD_MEM0 + "  - backend_fail: mem0\n", "x.yaml:10: events[0].backend_fail: needs 'for', a duration"),
    # a misspelt required key: named at its own line, not 'X: required' at the mapping's first line
    ("misspelt-events", "# a scenario\nname: typo6\nevent:\n  - message: alice\n",
     "x.yaml:3: event: unknown key (did you mean 'events'?)"),
    ("misspelt-name", "nmae: x\nevents: []\n", "x.yaml:1: nmae: unknown key (did you mean 'name'?)"),
    ("misspelt-events-and-no-name", "seed: 1\nevent: []\n", "x.yaml:2: event: unknown key (did you mean 'events'?); name: required"),
    ("unknown-key-and-no-events", "name: x\ntimeline: []\n", "x.yaml:2: timeline: unknown key; events: required"),
    ("misspelt-provider-name", "name: x\nconfig:\n  providers:\n    - retain_every_n_turns: 2\n      nmae: mem0\nevents: []\n",
     "x.yaml:5: config.providers[0].nmae: unknown key (did you mean 'name'?)"),
    ("misspelt-crash-point", "name: x\nevents:\n  - crash_at:\n      hit: 2\n      pont: batch-shipped\n",
     "x.yaml:5: events[0].crash_at.pont: unknown key (did you mean 'point'?)"),
    ("misspelt-command-chat", HEAD + "  - command: /new\n    chta: alice\n",
     "x.yaml:10: events[0].chta: unknown key (did you mean 'chat'?)"),
    ("unknown-key-and-command-without-chat", HEAD + "  - command: /new\n    user: alice\n",
     "x.yaml:10: events[0].user: unknown key; events[0].command: a command needs 'chat'"),
    ("misspelt-backend-for", HEAD_MEM0 + "  - backend_fail: mem0\n    fro: 5m\n",
     "x.yaml:11: events[0].fro: unknown key (did you mean 'for'?)"),
    ("misspelt-kind", HEAD + "  - mesage: alice\n",
     "x.yaml:9: events[0]: unknown key 'mesage' (did you mean 'message'?); expected exactly one of message, command, delegate, "
     "advance, sigterm, crash, restart, delete_session, delete_parent, db_locked, backend_fail, backend_slow, checkpoint, crash_at"),
    ("misspelt-chat-field", "name: x\nchats:\n  alice: {platfrom: slack}\nevents: []\n",
     "x.yaml:3: chats.alice.platfrom: unknown key (did you mean 'platform'?)"),
    # the document
    ("empty-document", "", "x.yaml:1: empty document: expected a mapping with 'name' and 'events'"),
    ("not-a-mapping", "- name: x\n", "x.yaml:1: document: expected a mapping, got a list"),
    ("key-not-text", "name: x\n7: seven\nevents: []\n", "x.yaml:2: keys must be text, got 7"),
    ("number-too-long", "name: x\nseed: " + "9" * 5000 + "\nevents: []\n", "x.yaml:2: seed: a number of 5000 digits is too long"),
    ("invalid-yaml", "name: x\nevents: [\n  - a\n", "x.yaml:3: invalid YAML: expected the node content, but found '-'"),
    ("nul-byte", "name: x\nevents: []\nseed: \x00\n", "x.yaml:3: file contains a NUL byte"),
    ("control-character", "name: x\nevents: []\n# \x7f\n", "x.yaml:3: invalid YAML: character U+007F is not allowed"),
    # unsafe YAML
    ("tag-os-system", "name: !!python/object/apply:os.system ['echo pwned']\nevents: []\n",
     "x.yaml:1: name: YAML tag '!!python/object/apply:os.system' is not allowed"),
    ("tag-object-new", "!!python/object/new:dict {}\n", "x.yaml:1: YAML tag '!!python/object/new:dict' is not allowed"),
    ("tag-binary", "name: x\nseed: !!binary aGVsbG8=\nevents: []\n", "x.yaml:2: seed: YAML tag '!!binary' is not allowed"),
    ("tag-local", "name: !shout x\nevents: []\n", "x.yaml:1: name: YAML tag '!shout' is not allowed"),
    ("tag-on-a-set", "name: x\nevents: !!set {a, b}\n", "x.yaml:2: events: YAML tag '!!set' is not allowed"),
    ("merge-key", "name: x\ndefaults: &d {mode: idle}\nconfig:\n  reset:\n    <<: *d\nevents: []\n",
     "x.yaml:5: config.reset: YAML merge keys are not allowed"),
    ("recursive-alias", "name: x\nevents: &e [*e]\n", "x.yaml:2: events[0]: recursive alias is not allowed"),
    ("billion-laughs", LAUGHS, "x.yaml:1: document too large (over 500000 nodes)"),
    ("nested-too-deeply", "[" * 1500 + "]" * 1500, "x.yaml: invalid YAML: nested too deeply"),
    ("oversized", "name: x\nevents: []\n#" + "x" * MAX_FILE_BYTES, f"x.yaml: file is larger than {MAX_FILE_BYTES} bytes"),
    # found by the input audit's fuzzer: each was a traceback, a misleading message or a file that loaded
    ("lone-surrogate-in-a-comment", "# source: \ud800\nname: x\nevents: []\n",  # libyaml raised UnicodeEncodeError
     "x.yaml:1: not valid Unicode: a lone surrogate \\ud800"),
    ("duplicate-anchor", "name: x\na: &v 1\nb: &v 2\nevents: []\n",  # was 'invalid YAML: second occurrence'
     "x.yaml:3: invalid YAML: found duplicate anchor 'v', first defined on line 2"),
    ("catches-item-not-text", "name: x\ncatches:\n  - a\n  - [b]\nevents: []\n",  # was 'catches: expected a list …, got a list'
     "x.yaml:4: catches[1]: expected a variant name, got a list"),
    ("start-before-1970-in-utc", "name: x\nzone: Etc/GMT-14\nstart: 1970-01-01T00:00\nevents: []\n",  # loaded: a negative clock
     "x.yaml:3: start: expected a date in the years 1970 to 8999 (in UTC as well), got '1970-01-01T00:00', "
     "which is 1969-12-31 10:00 UTC"),
    ("start-after-8999-in-utc", "name: x\nzone: Pacific/Pago_Pago\nstart: 8999-12-31T23:00\nevents: []\n",  # was 'x.yaml:1: config: …'
     "x.yaml:3: start: expected a date in the years 1970 to 8999 (in UTC as well), got '8999-12-31T23:00', "
     "which is 9000-01-01 10:00 UTC"),
    ("at-after-8999-in-utc", "name: x\nzone: Pacific/Pago_Pago\nstart: 8999-12-31T00:00\nevents:\n  - message: a\n    at: '23:30'\n",
     "x.yaml:6: events[0].at: expected a date in the years 1970 to 8999 (in UTC as well), got '23:30', which is 9000-01-01 10:30 UTC"),
]

JSON_ERRORS = [
    # a missing comma: Python 3.13 words a trailing comma differently from 3.11, not this
    ("json-syntax", '{"name": "x",\n "events": [1 2]}', "x.json:2: invalid JSON: Expecting ',' delimiter (column 15)"),
    ("json-extra-data", '{"name": "x", "events": []}\n{}', "x.json:2: invalid JSON: Extra data (column 1)"),
    ("json-duplicate-key", '{\n  "name": "x",\n  "name": "y",\n  "events": []\n}', "x.json:3: name: duplicate key"),
    ("json-number-too-long", '{"name": "x",\n "seed": ' + "9" * 5000 + ', "events": []}',
     "x.json:2: seed: a number of 5000 digits is too long"),
    ("json-nested-too-deeply", "[" * 100_000 + "]" * 100_000, "x.json: invalid JSON: nested too deeply"),
    ("json-misspelt-events", '{\n  "name": "typo6",\n  "event": []\n}\n', "x.json:3: event: unknown key (did you mean 'events'?)"),
    ("json-misspelt-crash-point", '{"name": "x", "events": [\n  {"crash_at": {"hit": 2,\n                "pont": "batch-shipped"}}]}',
     "x.json:3: events[0].crash_at.pont: unknown key (did you mean 'point'?)"),
    ("json-unknown-chat", '{"name": "x", "chats": {"alice": {}},\n "events": [\n  {"message": "alice"},\n  {"message": "bob"}]}',
     "x.json:4: events[1].message: unknown chat 'bob'; declared chats: alice"),
]


def error_of(text: str, source: str) -> str:
    with pytest.raises(ScenarioError) as info:
        load_text(text, source)
    return str(info.value)


@pytest.mark.parametrize(("text", "expected"), [pytest.param(text, msg, id=name) for name, text, msg in ERRORS])
def test_yaml_error_message(text: str, expected: str) -> None:
    assert error_of(text, "x.yaml") == expected


@pytest.mark.parametrize(("text", "expected"), [pytest.param(text, msg, id=name) for name, text, msg in JSON_ERRORS])
def test_json_error_message(text: str, expected: str) -> None:
    assert error_of(text, "x.json") == expected


def test_error_carries_its_parts() -> None:
    with pytest.raises(ScenarioError) as info:
        load_text(HEAD + "  - message: bob\n", "catalog/x.yaml")
    assert (info.value.source, info.value.line, info.value.field) == ("catalog/x.yaml", 9, "events[0].message")


def test_json_strings_are_never_tags() -> None:
    assert load_text('{"name": "!!python/object/apply:os.system", "events": []}', "x.json").name == "!!python/object/apply:os.system"


def test_json_is_read_as_json_not_yaml() -> None:
    """Tabs, a key on its own line, long keys, NEL and surrogate pairs: valid JSON that YAML reads differently."""
    text = '{\t"name"\n: "\\ud83d\\ude00 x\u0085y",\n\t"events": [], "catches": ["' + "k" * 2000 + '"]}'
    scenario = load_text(text, "x.json")
    assert (scenario.name, scenario.catches) == ("\U0001f600 x\u0085y", ("k" * 2000,))


def test_file_not_utf8(tmp_path) -> None:
    path = tmp_path / "latin1.yaml"
    path.write_bytes(b"name: x\nevents: []\n# caf\xe9\n")
    with pytest.raises(ScenarioError, match=r"latin1\.yaml:3: file is not UTF-8 text$"):
        load_file(path)


def test_file_with_nul_byte(tmp_path) -> None:
    path = tmp_path / "nul.yaml"
    path.write_bytes(b"name: x\n\x00events: []\n")
    with pytest.raises(ScenarioError, match=r"nul\.yaml:2: file contains a NUL byte$"):
        load_file(path)


def test_file_oversized_is_refused_before_parsing(tmp_path) -> None:
    path = tmp_path / "big.yaml"
    path.write_bytes(b"#" * (MAX_FILE_BYTES + 1))
    with pytest.raises(ScenarioError, match=rf"big\.yaml: file is larger than {MAX_FILE_BYTES} bytes$"):
        load_file(path)


def test_file_missing(tmp_path) -> None:
    with pytest.raises(ScenarioError, match=r"gone\.yaml: cannot read: No such file or directory$"):
        load_file(tmp_path / "gone.yaml")


def test_backend_fail_on_a_configured_provider_loads() -> None:
    scenario = load_text(HEAD_MEM0 + "  - backend_fail: mem0\n    for: 5m\n", "x.yaml")
    assert scenario.events == (BackendFail(scenario.start, provider="mem0", duration=5 * 60_000),)


def test_skipped_wall_time_maps_to_the_transition() -> None:
    """02:30 on the Berlin spring-forward day does not exist; it is the 03:00 CEST jump (01:00 UTC)."""
    scenario = load_text(HEAD + "  - message: alice\n    at: 2026-03-29T02:30\n", "x.yaml")
    assert scenario.events[0].t == 1_774_746_000_000  # 2026-03-29T01:00:00Z


FALL_BACK = "name: x\nzone: Europe/Berlin\nstart: 2026-10-25T01:00\nevents:\n"  # events start on line 5


@pytest.mark.parametrize(("at", "local"), [
    ("02:30", "2026-10-25 02:30:00+02:00"),
    ("02:30 (2nd)", "2026-10-25 02:30:00+01:00"),
    ("02:30:05.250 (2nd)", "2026-10-25 02:30:05.250000+01:00"),
    ("2026-10-25T02:59:59.999 (2nd)", "2026-10-25 02:59:59.999000+01:00"),
    ("01:00:00.250", "2026-10-25 01:00:00.250000+02:00"),
])
def test_at_takes_milliseconds_and_the_second_pass_of_a_repeated_hour(at: str, local: str) -> None:
    """`(2nd)` names the second pass of the hour the fall-back change repeats, as timelines print it;
    the writer writes the instant back (as `after:`), so the file round-trips."""
    scenario = load_text(FALL_BACK + f"  - message: a\n    at: \"{at}\"\n", "x.yaml")
    assert str(from_ms(scenario.events[0].t, load_zone("Europe/Berlin"))) == local
    assert replace(load_text(dump_text(scenario), "x.yaml"), source="x.yaml") == scenario


@pytest.mark.parametrize(("at", "message"), [
    ("03:30 (2nd)", "03:30 (2nd): no DST change repeats 03:30 on 2026-10-25 in Europe/Berlin; "
                    "'(2nd)' names the second pass of a repeated wall time"),
    ("02:30(2nd)", "expected a local time like '09:30' or '2026-03-29T04:27', got '02:30(2nd)'"),
    ("02:30:00.25", "expected a local time like '09:30' or '2026-03-29T04:27', got '02:30:00.25'"),
])
def test_at_errors_name_file_line_and_field(at: str, message: str) -> None:
    with pytest.raises(ScenarioError) as caught:
        load_text(FALL_BACK + f"  - message: a\n    at: \"{at}\"\n", "x.yaml")
    assert str(caught.value) == f"x.yaml:6: events[0].at: {message}"


def test_start_in_the_second_pass_with_milliseconds_round_trips() -> None:
    scenario = load_text("name: x\nzone: Europe/Berlin\nstart: 2026-10-25T02:10:00.500 (2nd)\nevents: []\n", "x.yaml")
    assert "start: 2026-10-25T02:10:00.500 (2nd)\n" in dump_text(scenario)
    assert replace(load_text(dump_text(scenario), "x.yaml"), source="x.yaml") == scenario
    with pytest.raises(ScenarioError, match=r"^x.yaml:3: start: 2026-03-29T02:10 \(2nd\): no DST change repeats"):
        load_text("name: x\nzone: Europe/Berlin\nstart: 2026-03-29T02:10 (2nd)\nevents: []\n", "x.yaml")


# ---------------------------------------------------------------------------------------
# Round trips

CATALOG = catalog_paths()


@pytest.mark.parametrize("path", CATALOG, ids=[p.stem for p in CATALOG])
def test_catalog_round_trip(path) -> None:
    scenario = load_file(path)
    again = load_text(dump_text(scenario), "again.yaml")
    assert replace(again, source=scenario.source, header=scenario.header) == scenario
    assert load_text(dump_text(scenario, scenario.header), "again.yaml").header == scenario.header
    as_json = load_text(json.dumps(scenario_document(scenario), indent="\t"), "again.json")
    assert replace(as_json, source=scenario.source, header=scenario.header) == scenario


def test_dump_quotes_text_that_would_read_back_as_a_number() -> None:
    scenario = load_text('name: "1e5"\nchats: {"08": {}}\nevents: [{message: "08", text: "1.0e5"}, {checkpoint: "-0"}]\n', "x.yaml")
    assert replace(load_text(dump_text(scenario), "x.yaml"), source="x.yaml") == scenario


# ---------------------------------------------------------------------------------------
# Fuzz: anything in, a Scenario or a ScenarioError out

FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

FRAGMENTS = [
    "name: ", "events:", "\n", "  ", "- ", ": ", "message: a", "advance: ", "at: ", "after: ", "config:", "reset:", "mode: ",
    "idle", "daily", "chats:", "zone: ", "start: ", "Europe/Berlin", "Pacific/Kiritimati", "2026-03-29T02:30", "09:30", "25:61",
    "5m", "-5m", "1h30m", "0s", "lazy", "backend_fail: ", "recorder", "for: ", "command: /new", "chat: a", "{", "}", "[", "]", ",",
    "'", '"', "#", "&a ", "*a", "<<: ", "!!python/object/apply:os.system ", "!!str ", "!x ", "? ", "|", ">", "---", "...", "\t",
    "~", "null", "true", "1e5", "-0", "99999999999999999999", "%YAML 1.1\n", "\x85", "\ufeff", "\\", "\r",
]
LOADER_KEYS = ["name", "seed", "zone", "start", "config", "chats", "events", "catches", "reset", "mode", "idle_minutes", "at_hour",
               "providers", "retain_every_n_turns", "watcher_interval", "cache_cap", "message", "at", "after", "advance", "text",
               "command", "chat", "backend_fail", "for", "db_locked", "sigterm", "checkpoint", "platform", "alice"]

yamlish = st.lists(st.sampled_from(FRAGMENTS) | st.text(max_size=4), max_size=40).map("".join)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8) | st.sampled_from(FRAGMENTS),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.sampled_from(LOADER_KEYS) | st.text(max_size=4), inner, max_size=5),
    max_leaves=30,
)


def loads_or_refuses(text: str, source: str) -> None:
    with contextlib.suppress(ScenarioError):
        assert isinstance(load_text(text, source), Scenario)


@FUZZ
@given(yamlish)
def test_fuzz_yamlish_text(text: str) -> None:
    loads_or_refuses(text, "fuzz.yaml")


@FUZZ
@given(st.text() | st.binary().map(lambda b: b.decode("utf-8", errors="replace")))
def test_fuzz_any_text(text: str) -> None:
    loads_or_refuses(text, "fuzz.yaml")
    loads_or_refuses(text, "fuzz.json")


@FUZZ
@given(json_values)
def test_fuzz_json_documents(value: object) -> None:
    text = json.dumps(value)
    loads_or_refuses(text, "fuzz.json")
    loads_or_refuses(yaml.safe_dump(value), "fuzz.yaml")


@FUZZ
@given(json_values)
def test_json_reads_like_json_loads(value: object) -> None:
    def plain(v: object) -> object:
        if isinstance(v, dict):
            return {k: plain(x) for k, x in v.items()}
        return [plain(x) for x in v] if isinstance(v, list) else v

    text = json.dumps(value, indent="\t" if isinstance(value, dict) else None)
    assert plain(parse_document(text, "x.json")) == json.loads(text)


# ---------------------------------------------------------------------------------------
# Valid documents load

NAMES = st.text(string.ascii_letters + string.digits + "_.-", min_size=1, max_size=6)


class Yaml12Dumper(yaml.SafeDumper):
    """PyYAML writes YAML 1.1 and leaves '08' and '1e5' bare; the loader reads plain scalars the YAML 1.2 way."""


Yaml12Dumper.add_implicit_resolver("tag:yaml.org,2002:int", re.compile(r"^[-+]?[0-9]+$"), list("-+0123456789"))
YAML12_FLOAT = re.compile(r"^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$")
Yaml12Dumper.add_implicit_resolver("tag:yaml.org,2002:float", YAML12_FLOAT, list("-+.0123456789"))
DURATION = st.integers(1, 3 * 24 * 60).map(lambda minutes: f"{minutes}m")


@st.composite
def scenario_documents(draw: st.DrawFn) -> dict:
    chats = draw(st.lists(NAMES, min_size=1, max_size=4, unique=True))
    providers = draw(st.lists(st.sampled_from(["mem0", "hindsight", "zep"]), max_size=2, unique=True))
    day = draw(st.dates(min_value=date(2000, 1, 1), max_value=date(2100, 12, 31)))
    document = {
        "name": draw(NAMES),
        "seed": draw(st.integers(0, 2**64)),
        "zone": draw(st.sampled_from(["UTC", "Europe/Berlin", "Pacific/Kiritimati", "Pacific/Pago_Pago", "America/New_York"])),
        "start": f"{day.isoformat()}T{draw(st.integers(0, 23)):02d}:{draw(st.integers(0, 59)):02d}",
        "config": {
            "reset": {"mode": draw(st.sampled_from(["idle", "daily", "both", "none"])), "idle_minutes": draw(st.integers(1, 3000)),
                      "at_hour": draw(st.integers(0, 23))},
            "cache_cap": draw(st.integers(1, 100)),
            "watcher_interval": draw(st.sampled_from(["lazy", "30s", "5m"])),
            "providers": [{"name": p, "retain_every_n_turns": draw(st.integers(1, 5))} for p in providers],
        },
        "chats": {name: {"platform": draw(st.sampled_from(["telegram", "slack", "cli"]))} for name in chats},
    }
    events = []
    for _ in range(draw(st.integers(0, 12))):
        kind = draw(st.sampled_from(["message", "command", "advance", "sigterm", "restart", "checkpoint", "db_locked", "backend_fail"]))
        chat = draw(st.sampled_from(chats))
        event = {
            "message": {"message": chat, "text": draw(st.text(min_size=1, max_size=10))},
            "command": {"command": draw(st.sampled_from(["/new", "/reset", "/stop", "/resume"])), "chat": chat},
            "advance": {"advance": draw(DURATION)},
            "sigterm": {"sigterm": True},
            "restart": {"restart": None},
            "checkpoint": {"checkpoint": draw(NAMES)},
            "db_locked": {"db_locked": draw(DURATION)},
            "backend_fail": {"backend_fail": providers[0], "for": draw(DURATION)} if providers else {"crash": True},
        }[kind]
        if draw(st.booleans()):
            event["after"] = draw(DURATION)
        events.append(event)
    document["events"] = events
    return document


@settings(max_examples=150, deadline=None)
@given(scenario_documents(), st.booleans())
def test_valid_documents_load(document: dict, as_json: bool) -> None:
    text = json.dumps(document) if as_json else yaml.dump(document, Dumper=Yaml12Dumper, sort_keys=False)
    scenario = load_text(text, "valid.json" if as_json else "valid.yaml")
    assert (scenario.name, len(scenario.chats), len(scenario.events)) == (document["name"], len(document["chats"]), len(document["events"]))
    messages = sum("message" in event for event in document["events"])
    assert [e.turn for e in scenario.events if isinstance(e, Message)] == [f"t{i + 1}" for i in range(messages)]
    assert all(a.t <= b.t for a, b in zip(scenario.events, scenario.events[1:], strict=False))
    assert replace(load_text(dump_text(scenario), "again.yaml"), source=scenario.source) == scenario


def test_a_chat_with_no_value_takes_the_defaults() -> None:
    scenario = load_text("name: x\nchats:\n  alice:\n  bob: {platform: discord}\nevents:\n  - message: alice\n", "x.yaml")
    assert [(c.name, c.platform, c.chat_type) for c in scenario.chats] == [("alice", "telegram", "dm"), ("bob", "discord", "dm")]


def test_lines_after_a_nel_or_line_separator_inside_a_string_are_counted_by_newlines() -> None:
    """YAML's marks count NEL, U+2028 and U+2029 as line breaks; files (and editors) do not."""
    for odd in ("\u0085", "\u2028", "\u2029"):
        text = f'name: x\nchats:\n  alice: {{}}\nevents:\n  - message: alice\n    text: "a{odd}b"\n  - advance: -5m\n'
        with pytest.raises(ScenarioError) as caught:
            load_text(text, "x.yaml")
        assert str(caught.value).startswith("x.yaml:7: events[1].advance"), str(caught.value)


def test_a_byte_order_mark_is_read_past_in_json_as_in_yaml() -> None:
    body = '{"name": "x", "chats": {"alice": {}}, "events": [{"message": "alice"}]}'
    assert load_text("\ufeff" + body, "x.json").name == "x"
    assert load_text("\ufeffname: x\nchats: {alice: {}}\nevents: [{message: alice}]\n", "x.yaml").name == "x"


def test_a_lone_surrogate_anywhere_is_refused() -> None:
    with pytest.raises(ScenarioError, match=r"x\.json:1: chats\.alice\.user: not valid Unicode: a lone surrogate \\udc00"):
        load_text('{"name": "x", "chats": {"alice": {"user": "\\udc00"}}, "events": [{"message": "alice"}]}', "x.json")


def test_a_large_file_loads_with_libyaml() -> None:
    """A file near the size cap (1 MiB) composes in C; the pure-Python composer took minutes.
    bench/loader.py measures it."""
    events = "".join("  - message: alice\n    after: 1s\n" for _ in range(2_000))
    assert len(load_text(f"name: big\nchats: {{alice: {{}}}}\nevents:\n{events}", "big.yaml").events) == 2_000


def test_a_chat_named_only_by_its_events_follows_the_name_rules() -> None:
    """Its written (or shrunk) file declares it under `chats:`, which would not load again."""
    with pytest.raises(ScenarioError, match=r"x\.yaml:3: events\[0\]\.message: chat names are letters, digits"):
        load_text("name: x\nevents:\n  - message: 'al ice'\n", "x.yaml")
    assert load_text("name: x\nevents:\n  - message: al.ice\n", "x.yaml").chats[0].name == "al.ice"
