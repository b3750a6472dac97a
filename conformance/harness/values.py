"""What a gateway answers, checked one way in process and over the wire.

`Profile`, `DurableState` and `Resources` reach the checks through the log, so an answer of the
wrong shape would be judged as if the gateway had said something sensible (`Profile("sometimes")`
read as lazy, a `busy` flag of 1 as busy, a session listed twice kept once). The runner passes
every in-process answer through these validators and `conformance.transport.wire` every decoded one, so
the same garbage gets the same error both ways: `bad value in answer to resources: cached[2]:
expected a (session, busy) pair of a str and a bool, got ('s1', 'yes')`.

The `Profile` check is driven by its fields' types (a `Literal`, a non-negative `int`, a `bool`,
`X | None`, a set of event kinds), so a field added to `Profile` is checked without a change here.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Collection
from functools import cache
from operator import attrgetter
from typing import Any

from conformance.adapter import HARNESS_POINTS, Profile
from conformance.features import FEATURES
from conformance.observations import DurableState, Resources, StoredMessage, StoredSession
from conformance.observers import shown
from sessiongate import SessiongateError

SEQUENCES = (tuple, list)  # what a sequence field may be: a tuple in process, a JSON array on the wire
SETS = (frozenset, set, tuple, list)  # what a set field may be (normalized to a frozenset)
KNOWN_ITEMS: dict[str, frozenset[str]] = {"unsupported": FEATURES}  # set fields whose items are names
# Names a set field refuses with a reason (a gateway might think it could lack them), by field.
REFUSED_ITEMS: dict[str, dict[str, str]] = {"unsupported": {
    "message": "every gateway takes messages (one that lacked them would pass every scenario by answering nothing)",
}}


class BadValue(SessiongateError, ValueError):
    """An answer of the wrong shape: the message says where in it, and what was wrong."""


@cache
def _hints() -> dict[str, Any]:
    return typing.get_type_hints(Profile)


def _expected(hint: Any) -> str:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is typing.Literal:
        return " or ".join(map(repr, args))
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_expected(arg) for arg in args)
    if hint is type(None):
        return "None"
    if hint is int:
        return "a non-negative int"
    if origin in (frozenset, set):
        return "a set of str"
    return f"a {getattr(hint, '__name__', hint)}"


def _field(name: str, hint: Any, value: Any) -> Any:
    """`value` checked against `hint` (and normalized: a set field becomes a frozenset)."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is typing.Literal:
        if type(value) is str and value in args:
            return value
    elif origin in (typing.Union, types.UnionType):
        inner: BadValue | None = None  # what is wrong inside a value of the right type (a field of it)
        for arg in args:
            try:
                return _field(name, arg, value)
            except BadValue as err:
                if str(err).startswith(f"{name}."):
                    inner = err
        if inner is not None:
            raise inner
    elif hint is type(None):
        if value is None:
            return value
    elif hint is bool:
        if type(value) is bool:
            return value
    elif hint is int:
        if type(value) is int and value >= 0:
            return value
    elif origin in (frozenset, set):
        if isinstance(value, SETS) and all(type(item) is str for item in value):
            unknown = sorted(set(value) - KNOWN_ITEMS.get(name, set(value)))
            refused = REFUSED_ITEMS.get(name, {})
            if refused and (owed := [item for item in unknown if item in refused]):
                raise BadValue(f"{name}: {', '.join(map(repr, owed))} cannot be declared: {refused[owed[0]]}")
            if unknown:
                raise BadValue(f"{name}: unknown {'names' if len(unknown) > 1 else 'name'} {', '.join(map(repr, unknown))}; "
                               f"known: {', '.join(sorted(KNOWN_ITEMS[name]))}")
            return value if type(value) is frozenset else frozenset(value)
    elif isinstance(hint, type) and isinstance(value, hint):
        if dataclasses.is_dataclass(hint):  # its fields checked by their own types (a ResetPolicy's mode)
            hints = typing.get_type_hints(hint)
            return hint(**{f.name: _field(f"{name}.{f.name}", hints[f.name], getattr(value, f.name))
                           for f in dataclasses.fields(hint)})
        return value
    raise BadValue(f"{name}: expected {_expected(hint)}, got {shown(value)}")


def _exact(cls: type[Any], value: Any) -> Any:
    """`value`, or a `cls` made of its fields when it is an instance of a subclass: the harness
    and its log keep no object of the gateway's, whose methods (a property, an `__eq__`) would
    run where no guard catches what they raise. Over the wire every answer is decoded this way."""
    if type(value) is cls or not dataclasses.is_dataclass(cls):
        return value
    return cls(**{f.name: getattr(value, f.name) for f in dataclasses.fields(cls)})


def profile(value: object) -> Profile:
    """A `Profile` whose every field has its declared type, or `BadValue`."""
    if not isinstance(value, Profile):
        raise BadValue(f"expected a Profile, got {type(value).__name__} {shown(value)}")
    hints = _hints()
    exact = type(value) is Profile
    changed = {}
    for f in dataclasses.fields(Profile):
        given = getattr(value, f.name)
        checked = _field(f.name, hints[f.name], given)
        if checked is not given or not exact:
            changed[f.name] = checked
    points = changed.get("crash_points", value.crash_points)
    if ours := sorted(points & HARNESS_POINTS):
        raise BadValue(f"crash_points: {', '.join(map(repr, ours))} is the harness's own (HARNESS_POINTS, passed by the "
                       f"harness itself): name the gateway's points otherwise")
    if not exact:
        return Profile(**changed)
    return dataclasses.replace(value, **changed) if changed else value


def profile_from_fields(data: object) -> Profile:
    """A `Profile` from its fields by name (the wire form). A field whose default declares nothing
    (None, no kinds) may be left out; leaving out any other would make a claim the gateway never made."""
    if not isinstance(data, dict):
        raise BadValue(f"expected an object of Profile fields, got {shown(data)}")
    given = {}
    for f in dataclasses.fields(Profile):
        if f.name in data:
            given[f.name] = data[f.name]
        elif not (f.default is None or f.default == frozenset()):
            raise BadValue(f"{f.name}: missing")
    return profile(Profile(**given))


def _sequence(where: str, value: object, what: str) -> Collection[Any]:
    if not isinstance(value, SEQUENCES):
        raise BadValue(f"{where}: expected a sequence of {what}, got {shown(value)}")
    return value


def durable_state(value: object, known: dict[str, tuple[str | None, tuple[StoredMessage, ...]]] | None = None) -> DurableState:
    """A `DurableState` of str ids and texts, each session and each chat's routing entry once, or `BadValue`.
    `known`: id -> the parent and the messages tuple a previous answer held for that session,
    checked then: a session holding the same tuple (immutable; its frozen rows were checked) and
    parent is not walked again. Kept up to date here. (Fields, not the `StoredSession`: a gateway
    that rebinds a field of the one it handed out with `object.__setattr__` is walked again.)"""
    if not isinstance(value, DurableState):
        raise BadValue(f"expected a DurableState, got {type(value).__name__} {shown(value)}")
    value = _exact(DurableState, value)
    if _well_formed(value, known):
        if known is not None:
            known.clear()
            known.update({s.id: (s.parent, s.messages) for s in value.sessions})
        return value
    # Each field read once, into a copy of exact types: what was checked is what is kept.
    seen: set[str] = set()
    sessions = [stored_session(i, s, seen) for i, s in enumerate(_sequence("sessions", value.sessions, "StoredSession"))]
    return DurableState(tuple(sessions), routing(value.routing))


def stored_session(i: int, s: object, seen: set[str]) -> StoredSession:
    """The `i`-th session of a durable state, checked (`seen`: the ids before it, kept up to
    date), as a `StoredSession` of exact types: the whole answer's (`durable_state`) or one part
    of the `durable_parts` hook's, so both get the same error for the same garbage."""
    if type(s) is StoredSession and _session_well_formed(s) and s.id not in seen:  # the common case, in C
        seen.add(s.id)
        return s
    where = f"sessions[{i}]"
    if not isinstance(s, StoredSession):
        raise BadValue(f"{where}: expected a StoredSession, got {shown(s)}")
    sid, parent, messages = s.id, s.parent, s.messages
    if not isinstance(sid, str) or not (parent is None or isinstance(parent, str)):
        raise BadValue(f"{where}: expected a str id and a str or None parent, got {shown((sid, parent))}")
    sid, parent = _chars(sid), None if parent is None else _chars(parent)  # a str subclass: its characters
    if sid in seen:
        raise BadValue(f"{where}: session {sid!r} is listed twice")
    seen.add(sid)
    rows: list[StoredMessage] = []
    for j, m in enumerate(_sequence(f"{where}.messages", messages, "StoredMessage")):
        fields = (m.role, m.content, m.visibility) if isinstance(m, StoredMessage) else None
        if fields is None or not all(isinstance(field, str) for field in fields):
            raise BadValue(f"{where}.messages[{j}]: expected a StoredMessage of str role, content and "
                           f"visibility, got {shown(m)}")
        exact = type(m) is StoredMessage and all(type(field) is str for field in fields)
        rows.append(m if exact else StoredMessage(*map(_chars, fields)))  # a str subclass: its characters, as handed values are
    return StoredSession(sid, parent, tuple(rows))


def _chars(value: str) -> str:
    """A str (or a subclass's characters, none of its methods run)."""
    return value if type(value) is str else str.__str__(value)


def _session_well_formed(s: StoredSession) -> bool:
    """One session of exact types throughout (its rows checked in C), read from `s` once."""
    if type(s.id) is not str or not (s.parent is None or type(s.parent) is str) or type(s.messages) is not tuple:
        return False
    rows = s.messages
    if not rows:
        return True
    if set(map(type, rows)) != {StoredMessage}:
        return False
    return all(set(map(type, map(attrgetter(name), rows))) == {str} for name in ("role", "content", "visibility"))


def routing(value: object) -> tuple[tuple[str, str], ...]:
    """A durable state's routing: (chat, session) pairs of str, each chat once, or `BadValue`."""
    if type(value) is tuple and _pairs_of(value, str, str) and len({chat for chat, _sid in value}) == len(value):
        return value
    chats: set[str] = set()
    pairs: list[tuple[str, str]] = []
    for i, pair in enumerate(_sequence("routing", value, "(chat, session) pairs")):
        entry = (pair[0], pair[1]) if isinstance(pair, SEQUENCES) and len(pair) == 2 else None
        if entry is None or type(entry[0]) is not str or type(entry[1]) is not str:
            raise BadValue(f"routing[{i}]: expected a (chat, session) pair of str, got {shown(pair)}")
        if entry[0] in chats:
            raise BadValue(f"routing[{i}]: chat {entry[0]!r} has two routing entries")
        chats.add(entry[0])
        pairs.append(entry)
    return tuple(pairs)


def _unchanged(last: tuple[str | None, tuple[StoredMessage, ...]] | None, s: StoredSession) -> bool:
    return last is not None and last[1] is s.messages and last[0] == s.parent


def _well_formed(state: DurableState, known: dict[str, tuple[str | None, tuple[StoredMessage, ...]]] | None = None) -> bool:
    """The common case, checked mostly in C: tuples of the right types, no id or chat twice
    (a session whose parent and messages tuple `known` holds was checked before)."""
    sessions, routing = state.sessions, state.routing
    if type(sessions) is not tuple or type(routing) is not tuple or not _pairs_of(routing, str, str):
        return False
    if sessions and set(map(type, sessions)) != {StoredSession}:
        return False
    if len({s.id for s in sessions}) != len(sessions) or len({chat for chat, _sid in routing}) != len(routing):
        return False
    fresh = [s for s in sessions if not _unchanged(known.get(s.id), s)] if known else sessions
    for s in fresh:
        if type(s.id) is not str or not (s.parent is None or type(s.parent) is str) or type(s.messages) is not tuple:
            return False
        if s.messages and set(map(type, s.messages)) != {StoredMessage}:
            return False
    rows = [m for s in fresh for m in s.messages]
    fields = (list(map(attrgetter(name), rows)) for name in ("role", "content", "visibility"))
    return all(not column or set(map(type, column)) == {str} for column in fields)


def resources(value: object) -> Resources:
    """A `Resources` of (str, bool) pairs and a non-negative int, or `BadValue`."""
    if not isinstance(value, Resources):
        raise BadValue(f"expected a Resources, got {type(value).__name__} {shown(value)}")
    value = _exact(Resources, value)
    if type(value.running) is not int or value.running < 0:
        raise BadValue(f"running: expected a non-negative int, got {shown(value.running)}")
    cached = _sequence("cached", value.cached, "(session, busy) pairs")
    if type(cached) is tuple and _pairs_of(cached, str, bool):  # asked after every event: the common case in C
        return value
    pairs: list[tuple[str, bool]] = []
    for i, pair in enumerate(cached):
        entry = (pair[0], pair[1]) if isinstance(pair, SEQUENCES) and len(pair) == 2 else None  # read once, kept
        if entry is None or type(entry[0]) is not str or type(entry[1]) is not bool:
            raise BadValue(f"cached[{i}]: expected a (session, busy) pair of a str and a bool, got {shown(pair)}")
        pairs.append(entry)
    return Resources(tuple(pairs), value.running)


def _pairs_of(items: tuple[Any, ...], first: type, second: type) -> bool:
    """Every item a tuple of a `first` and a `second`, checked without a Python loop."""
    if not items:
        return True
    if set(map(type, items)) != {tuple} or set(map(len, items)) != {2}:
        return False
    left, right = zip(*items, strict=True)
    return set(map(type, left)) == {first} and set(map(type, right)) == {second}


_CHANGE_LISTS = frozenset(("drop", "busy", "idle"))  # a str looked up by its cached hash, not compared with each


def resources_change(value: object) -> dict[str, Any] | Resources | None:
    """An answer of the optional `resources_delta` hook: None (nothing changed), a `Resources`
    (the whole state, as `resources`), or a dict of what changed in the `resources` record's
    delta form, `drop`/`busy`/`idle` (lists of sessions), `add` ([session, busy] pairs) and
    `running`. The dict comes back as fresh lists with its empty entries left out, so the log
    holds nothing the gateway can still change; anything else is a `BadValue`."""
    if value is None:
        return None
    if type(value) is not dict:
        if isinstance(value, Resources):
            return resources(value)
        raise BadValue(f"expected None, a Resources or a dict of changes, got {type(value).__name__} {shown(value)}")
    # Asked after most events, with a list or two of one or two items: plain loops (a set of
    # the items' types, built and compared per list, cost more than the rest of the call).
    out: dict[str, Any] = {}
    for key, item in value.items():
        if type(key) is not str:
            raise BadValue(f"expected str keys, got {shown(key)}")
        if key in _CHANGE_LISTS:
            if type(item) not in SEQUENCES:
                raise BadValue(f"{key}: expected a list of session ids, got {shown(item)}")
            for sid in item:
                if type(sid) is not str:
                    raise BadValue(f"{key}: expected a list of session ids, got {shown(item)}")
            if item:
                out[key] = list(item)
        elif key == "add":
            if type(item) not in SEQUENCES:
                raise BadValue(f"add: expected a list of [session, busy] pairs, got {shown(item)}")
            pairs = []
            for pair in item:
                if not (type(pair) in SEQUENCES and len(pair) == 2 and type(pair[0]) is str and type(pair[1]) is bool):
                    raise BadValue(f"add[{len(pairs)}]: expected a [session, busy] pair of a str and a bool, got {shown(pair)}")
                pairs.append([pair[0], pair[1]])
            if pairs:
                out["add"] = pairs
        elif key == "running":
            if type(item) is not int or item < 0:
                raise BadValue(f"running: expected a non-negative int, got {shown(item)}")
            out["running"] = item
        else:
            raise BadValue(f"unknown key {key!r}: a change has drop, busy, idle, add and running")
    return out
