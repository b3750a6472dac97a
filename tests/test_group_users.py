"""Two users in one group (issue #21, format gaps): a chat's identity includes its user, so they
are two chats of one group (`chat_id`), and one user's `/new` ends only their session."""

from __future__ import annotations

from dataclasses import replace

import pytest

from conformance.harness.runner import run_scenario
from conformance.harness.suite import catalog_paths, outcome
from conformance.transport.wire import chat_from_wire, chat_to_wire
from reference_impl.gateway import ReferenceGateway
from reference_impl.policy import chat_key
from reference_impl.variants import make
from sim.document import ScenarioError
from sim.loader import load_file, load_text
from sim.scenario import Chat
from sim.writer import dump_text

GROUP = next(p for p in catalog_paths() if p.stem == "60-group-two-users")
CHATS = "name: x\nchats:\n  a: {chat_type: group, chat_id: team, user: alice}\n"  # the next chat on line 4


def test_two_users_of_one_group_load_round_trip_and_route_apart() -> None:
    scenario = load_text(CHATS + "  b: {chat_type: group, chat_id: team, user: bob}\nevents: [{message: a}, {message: b}]\n", "x.yaml")
    a, b = scenario.chats
    assert (a.platform_id, b.platform_id) == ("team", "team") and a.identity != b.identity
    assert chat_key(a) != chat_key(b)
    assert replace(load_text(dump_text(scenario), "x.yaml"), source="x.yaml") == scenario
    assert chat_from_wire(chat_to_wire(a)) == a
    assert "chat_id" not in chat_to_wire(Chat("plain"))  # lines without it read as before


def test_one_chat_under_two_names_is_an_error() -> None:
    with pytest.raises(ScenarioError) as caught:
        load_text(CHATS + "  b: {chat_type: group, chat_id: team, user: alice}\nevents: []\n", "x.yaml")
    assert str(caught.value) == ("x.yaml:4: chats.b: the same chat as a (platform, chat type, chat id, thread and user "
                                 "alike); give each user of a group its own `user`")


def test_new_from_one_user_ends_only_theirs() -> None:
    clean = run_scenario(load_file(GROUP), ReferenceGateway(), "reference")
    assert outcome(clean) == "pass"
    sessions = {r.turns[0]: r.session for r in clean.records if r.kind == "reply"}
    assert sessions == {"t1": "s1", "t2": "s2", "t3": "s3", "t4": "s2"}
    assert [(r.session, r.turns) for r in clean.records if r.kind == "on_session_end"] == [("s1", ("t1",))]
    shared = run_scenario(load_file(GROUP), make("group-shares-one-session"), "reference:group-shares-one-session")
    assert {name for name, v in shared.verdicts.items() if v.status == "fail"} >= {"I1", "I6"}
