"""Observations: plain records of what crossed the boundary between harness and gateway.

The checks read nothing else: this log plus the final durable state. Every record has one
canonical serialization (sorted keys, no spaces), so two runs compare byte for byte.
"""

from __future__ import annotations

import json
import re
from collections import namedtuple
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from operator import attrgetter
from typing import Any

from sim.scenario import TURN_TAG

TURN_ID = TURN_TAG  # sim.scenario's: the loader keeps it out of a message's own text


def turn_ids(text: str) -> tuple[str, ...]:
    """Every turn id carried in a text: '[t7] hello' -> ('t7',)."""
    return tuple(TURN_ID.findall(text))


def first_turn(text: str) -> str | None:
    match = TURN_ID.search(text)
    return match.group(1) if match else None


_REPLY_WORD = " reply"


def reply_text(turn: str) -> str:
    """The fake LLM's answer to turn `turn`: '[t7] reply'. The loader refuses a message whose
    first line is 'reply', so a tag followed by ' reply' and a line end is always a reply."""
    return f"[{turn}]{_REPLY_WORD}"


def halves(texts: Sequence[str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(turns whose user message, turns whose reply) the texts carry, each in first-seen order
    once. A tag is a reply's where ' reply' and a line end (or the text's end) follow it, as in
    `reply_text`; every other tag is a copy of the user's message, however a gateway wrapped it.
    Read by content, not position: a provider may ship one text per message or whole turns.
    The texts are scanned as one, joined by line ends: a tag holds no line end, and one that
    ends a text reads the same before the next text's line end as at the end of its own."""
    return halves_in("\n".join(texts))


def halves_in(joined: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """`halves` of texts already joined by line ends."""
    users, replies, _apart = read_call(joined)
    return users, replies


def read_call(joined: str) -> tuple[tuple[str, ...], tuple[str, ...], list[str]]:
    """`halves` of texts joined by line ends (one ingest call's), and the turns whose reply does
    not follow its own message in them: the tag just before a reply's is not its message's
    (`[t1] hello`, `[t2] hello`, `[t1] reply`, `[t2] reply` pairs t1's message with t2's), or its
    message comes after it. A backend is handed texts, not roles: their order is what pairs
    them. A reply alone in its call is no matter (a provider may ship a turn's halves in two
    calls). One scan."""
    users: dict[str, None] = {}
    replies: dict[str, None] = {}
    apart: list[str] = []
    tags = _halves_of(joined)  # (turn, ' reply' where a reply's tag, else '')
    before = None
    for k, tag in enumerate(tags):
        turn, reply = tag
        if not reply:
            users[turn] = None
        else:
            replies[turn] = None
            if (before is None or before[0] != turn or before[1]) and (before is not None or (turn, "") in tags[k + 1:]) \
                    and turn not in apart:
                apart.append(turn)
        before = tag
    return tuple(users), tuple(replies), apart


def not_whole(text: str, users: Sequence[str], said: Mapping[str, str]) -> list[str]:
    """The turns of `users` (tags the text carries as a copy of the user's message) whose
    message it does not hold whole: `[t3]` or `[t3] good` where the user said `[t3] good
    morning`. What memory took and what an end's transcript carries are a turn's by what the
    user said, not by its tag alone, as a stored row is (`whole_turns`). `said`: turn -> its
    message's text where it is not 'hello'."""
    if len(users) == 1:  # the usual text, of one turn: no list made up
        t = users[0]  # type: ignore[index]
        return [] if f"[{t}] {said.get(t, 'hello')}" in text else [t]
    return [t for t in users if f"[{t}] {said.get(t, 'hello')}" not in text]


# A tag, and whether ' reply' and a line end (or the text's end) follow it: `halves` in one C scan.
_halves_of = re.compile(TURN_ID.pattern + rf"(?=({re.escape(_REPLY_WORD)})(?:\n|\Z))?").findall


def ingested_halves(record: Obs) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(user messages, replies) an `ingest` record says its backend took; a log written before
    ingests told the halves apart lists each turn once in `turns`, read as both halves."""
    replies = record.detail.get("replies")
    return record.turns, record.turns if replies is None else tuple(replies)


Step = int | str  # a scenario event's number, or "k.n" for the n-th callback after event k (see Obs)


def event_of(step: Step) -> int:
    """The scenario event a step belongs to: itself, or k for a callback's "k.n"."""
    return step if isinstance(step, int) else int(step.partition(".")[0])


def _plain(value: object) -> Any:
    """A mapping that is not a dict (a spilled snapshot's sessions, loaded as read) as the dict it reads as."""
    if isinstance(value, Mapping):
        return dict(value)
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


# json.dumps/json.loads with these options build an encoder per call: half the cost of a short record.
_encode = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=_plain).encode


class Obs(namedtuple("Obs", "t step kind chat session turns detail")):
    """One observation: at virtual time `t`, during step `step`, `kind` happened.

    `step` is the scenario event the harness was applying (an int: 1 for the first event, 0
    before it, N+1 for quiescence after the last, N), or, for a record a callback produced (a
    gateway timer, an LLM answer, a crash point's restart), the text "k.n": the n-th callback
    that ran since event k began (docs/contract.md, *The observation log*).

    Fields: t (int), step (int | str), kind (str), chat and session (str | None), turns
    (tuple[str, ...]) and detail (dict[str, Any]). An immutable tuple rather than a frozen
    dataclass: a long run makes millions, and a frozen dataclass's `__init__` (one
    `object.__setattr__` per field) was 3% of a generated seed's time."""

    __slots__ = ()
    t: int
    step: Step
    kind: str
    chat: str | None
    session: str | None
    turns: tuple[str, ...]
    detail: dict[str, Any]

    def __new__(cls, t: int, step: Step, kind: str, chat: str | None = None, session: str | None = None,
                turns: tuple[str, ...] = (), detail: dict[str, Any] | None = None) -> Obs:
        return tuple.__new__(cls, (t, step, kind, chat, session, turns, {} if detail is None else detail))

    def to_json(self) -> str:
        data: dict[str, Any] = {"t": self.t, "step": self.step, "kind": self.kind}
        if self.chat is not None:
            data["chat"] = self.chat
        if self.session is not None:
            data["session"] = self.session
        if self.turns:
            data["turns"] = list(self.turns)
        if self.detail:
            data["detail"] = self.detail
        return _encode(data)

    @staticmethod
    def from_json(line: str) -> Obs:
        data = json.loads(line)
        get = data.get
        return Obs(data["t"], data["step"], data["kind"], get("chat"), get("session"), tuple(get("turns", ())), get("detail", {}))

    def d(self, key: str, default: Any = None) -> Any:
        return self.detail.get(key, default)


def log_text(records: Sequence[Obs]) -> str:
    """The canonical text of a log: one JSON line per record."""
    return "".join(r.to_json() + "\n" for r in records)


@dataclass(frozen=True, slots=True, init=False)
class StoredMessage:
    """One message row as the durable store holds it."""

    role: str
    content: str
    visibility: str = "visible"  # or "hidden" (a muted notification reply's rows)

    def __init__(self, role: str, content: str, visibility: str = "visible") -> None:
        # Each slot set through its descriptor: a frozen dataclass's own `__init__` calls
        # `object.__setattr__` per field, ≈ 5.8 k instructions a row against ≈ 3.8 k (every
        # stored row of a snapshot is made once).
        _set_role(self, role)
        _set_content(self, content)
        _set_visibility(self, visibility)

    @property
    def turn(self) -> str | None:
        return first_turn(self.content)

    @property
    def turns(self) -> tuple[str | None, ...]:
        """Every turn the row carries (a gateway may fold two messages into one row), or (None,)."""
        return _turns_of_tags(_turn_tags(self.content))


_set_role, _set_content, _set_visibility = (getattr(StoredMessage, name).__set__ for name in ("role", "content", "visibility"))


@dataclass(frozen=True, slots=True)
class StoredSession:
    id: str
    parent: str | None
    messages: tuple[StoredMessage, ...]


_session_id = attrgetter("id")
_TURNS_KEPT = 100_000  # rows whose turns a `DurableState.to_detail` cache keeps (a long run's final snapshot holds millions)


def stored_rows(messages: Iterable[StoredMessage], known: dict[str, tuple[str | None, ...]],
                shared: Callable[[str | None, str | None], str | None], learn: bool = True,
                said: Mapping[str, str] | None = None, cut: list[str] | None = None) -> list[list[Any]]:
    """A session's rows in the log's form ([role, turn, visibility], a row carrying two turns
    once for each; `shared`: one string per turn id). `known`: content -> turns, looked up
    first, and kept up to `_TURNS_KEPT` rows when `learn`. With `said` (turn -> the text of
    its message where it is not 'hello'), a row names a turn only if it holds that turn's
    message or answer whole (`whole_turns`): one that kept the tag and lost the words is no row
    of the turn, and the turn goes into `cut` (the store lost what the user said)."""
    rows: list[list[Any]] = []
    keep = learn and len(known) < _TURNS_KEPT
    for m in messages:
        if type(m) is not StoredMessage:  # a subclass's own `turns` is asked
            for turn in m.turns:
                rows.append([m.role, shared(turn, turn), m.visibility])
            continue
        turns = known.get(m.content) if known else None  # none known: no hash a row
        if turns is None:
            plain = _plain_row(m.content) if said is not None else None
            if plain is not None and ((words := plain.group(2)) == "reply" or words == said.get(plain.group(1), "hello")):
                found = [plain.group(1)]  # the usual row, whole (`[t3] hello`, `[t3] reply`): one match, no more
            else:
                found = _turn_tags(m.content)  # `StoredMessage.turns` inline for the usual row, of one turn
                # a cut row is not kept in `known`: its turns go to `cut` each time
                if said is not None and found and len(whole := whole_turns(m.content, found, said)) < len(found):
                    if cut is not None:
                        cut.extend(t for t in dict.fromkeys(found) if t not in whole)
                    for turn in _turns_of_tags(whole):
                        rows.append([m.role, shared(turn, turn), m.visibility])
                    continue
            if len(found) == 1:
                turn = found[0]
                if keep:
                    known[m.content] = (turn,)
                    keep = len(known) < _TURNS_KEPT
                rows.append([m.role, shared(turn, turn), m.visibility])
                continue
            turns = _turns_of_tags(found)
            if keep:
                known[m.content] = turns
                keep = len(known) < _TURNS_KEPT
        for turn in turns:  # a loop: a comprehension makes a function call of each row
            rows.append([m.role, shared(turn, turn), m.visibility])
    return rows


_turn_tags = TURN_ID.findall
_plain_row = re.compile(r"\[(t\d+)\] (.*)", re.DOTALL).fullmatch  # a tag and words: the turn's message or answer, as made?


def whole_turns(content: str, found: list[str], said: Mapping[str, str]) -> list[str]:
    """The tags of `found` whose turn's message (`[t3] hello`) or answer (`[t3] reply`) the
    content holds whole: a row is a turn's by what the user said or the LLM answered, not by
    its tag alone."""
    return [t for t in found if f"[{t}] {said.get(t, 'hello')}" in content or f"[{t}]{_REPLY_WORD}" in content]


def _turns_of_tags(found: list[str]) -> tuple[str | None, ...]:
    """The turns a row's tags name, each once in first-seen order, or (None,) for none."""
    if len(found) == 1:  # the usual row: one turn (made unique by dict.fromkeys, it cost more than the scan)
        return (found[0],)
    return tuple(dict.fromkeys(found)) or (None,)


@dataclass(frozen=True)
class DurableState:
    """What survives the process: transcripts by session, and each chat's routing entry."""

    sessions: tuple[StoredSession, ...] = ()
    routing: tuple[tuple[str, str], ...] = ()  # (chat name, session id), sorted

    def to_detail(self, turns_of: dict[str, tuple[str | None, ...]] | None = None,
                  rows_of: dict[str, tuple[tuple[StoredMessage, ...], str | None, dict[str, Any]]] | None = None,
                  pack: Callable[[Iterator[tuple[str, dict[str, Any]]]], Any] | None = None,
                  remember: bool = True, said: Mapping[str, str] | None = None) -> dict[str, Any]:
        """A compact, canonical form for the log: session -> [[role, turn, visibility], …], a row
        carrying two turns (folded by the gateway) once for each. A turn id is one string for all
        its rows (a turn's message and reply: two), which a spilled log's file keeps shared.
        `turns_of`: content -> `StoredMessage.turns`, kept by the caller between snapshots (the
        runner's: most rows of a snapshot were in the one before), up to `_TURNS_KEPT` rows.
        `rows_of`: session id -> (its messages tuple, its parent, its body) of the caller's last snapshot: the
        same (immutable) tuple again has the same rows, shared (no reader changes a record). `pack`: the sessions are handed to
        it one at a time, as made, and kept in the form it returns (`spill.SpilledSessions.pack`:
        each marshalled, for a long run's last snapshot), `rows_of` read but not kept up to date.
        `remember=False`: neither is kept up to date (the caller's last snapshot: the runner's final).
        `said`: as for `stored_rows`; a session whose rows lost a turn's words lists it under `cut`."""
        bodies = self._bodies(turns_of, rows_of if pack is None and remember else None, rows_of, pack is not None, remember,
                              said)
        sessions = dict(bodies) if pack is None else pack(bodies)
        return {"sessions": sessions, "routing": {chat: sid for chat, sid in self.routing}}

    def _bodies(self, turns_of: dict[str, tuple[str | None, ...]] | None,
                keep: dict[str, tuple[tuple[StoredMessage, ...], str | None, dict[str, Any]]] | None,
                rows_of: dict[str, tuple[tuple[StoredMessage, ...], str | None, dict[str, Any]]] | None,
                apart: bool = False, learn: bool = True,
                said: Mapping[str, str] | None = None) -> Iterator[tuple[str, dict[str, Any]]]:
        """(session id, its body) in id order, for `to_detail` (`keep`: where each session's rows go;
        `apart`: a turn id shared within its session only, each packed by itself; `learn`: rows'
        turns kept in `turns_of`)."""
        share: dict[str | None, str | None] = {}
        shared = share.setdefault
        known: dict[str, tuple[str | None, ...]] = {} if turns_of is None else turns_of
        for s in sorted(self.sessions, key=_session_id):
            if apart:
                share.clear()
            last = rows_of.get(s.id) if rows_of is not None else None
            if last is not None and last[0] is s.messages and last[1] == s.parent:
                yield s.id, last[2]  # the same body, shared: no reader changes a record
                continue
            cut: list[str] = []
            rows = stored_rows(s.messages, known, shared, learn, said, cut)
            body = {"parent": s.parent, "rows": rows, "cut": cut} if cut else {"parent": s.parent, "rows": rows}
            if keep is not None:
                keep[s.id] = (s.messages, s.parent, body)
            yield s.id, body


@dataclass(frozen=True, slots=True)
class Resources:
    """What the gateway holds right now: cached agents (session, busy) and live tasks."""

    cached: tuple[tuple[str, bool], ...] = ()
    running: int = 0

    def to_detail(self) -> dict[str, Any]:
        return {"cached": [[sid, busy] for sid, busy in self.cached], "running": self.running}


class ResourcesDeltas:
    """The runner's side of `CacheReplay`: each `Gateway.resources()` sample in, the detail of
    its `resources` record out (None when nothing the checks read changed). A record says
    which agents came and went and how many tasks run, not the gateway's order or its busy
    flags: I7 judges an agent idle by the log's turns in flight, and a flag flipped or an
    agent moved at every turn made a record of nearly every sample. The whole state first,
    and whenever a session is listed twice."""

    __slots__ = ("last", "last_members")

    def __init__(self) -> None:
        self.last: Resources | None = None
        self.last_members: dict[str, bool] | None = None  # session -> busy of `last`; None if it lists one twice

    def detail(self, now: Resources) -> dict[str, Any] | None:
        last = self.last
        if last is not None and now.cached == last.cached:
            self.last = now
            return None if now.running == last.running else {"running": now.running}
        members = dict(now.cached)
        if len(members) != len(now.cached):  # a session listed twice: whole records until it is not
            members_now: dict[str, bool] | None = None
        else:
            members_now = members
        before = self.last_members
        self.last, self.last_members = now, members_now
        if last is None or before is None or members_now is None:
            return now.to_detail()
        detail = membership(before, members_now)
        if now.running != last.running:
            detail["running"] = now.running
        return detail or None

    def resync(self, now: Resources) -> None:
        """The gateway's state as the changes its hook answered rebuilt it (`CacheReplay`): the
        base the next whole answer is diffed against."""
        self.last = now
        members = dict(now.cached)
        self.last_members = members if len(members) == len(now.cached) else None


def membership(before: Mapping[str, bool], after: Mapping[str, bool]) -> dict[str, Any]:
    """The delta form of which sessions left and came between two caches (session -> busy):
    `drop` and `add` each sorted by session, so that any two ways of saying one change log
    the same record."""
    detail: dict[str, Any] = {}
    if before.keys() != after.keys():
        if gone := before.keys() - after.keys():
            detail["drop"] = sorted(gone)
        if came := after.keys() - before.keys():
            detail["add"] = [[sid, after[sid]] for sid in sorted(came)]
    return detail


class CacheReplay:
    """The gateway's resources as the log's `resources` records rebuild them, record by record.

    A record with `cached` states the whole cache (the first one does); any other states what
    changed since the one before, applied in this order: `drop` (sessions no longer cached),
    `busy`/`idle` (flags flipped in place: logs of before 2026-12-06, and the hook's answers),
    `add` ([session, busy] appended at the end), `running` (when it changed). So the checks
    read every sample in one pass over small records. A flag is as of the last record that
    named its session, the order that of the records (the log keeps neither as the gateway
    changes them: `ResourcesDeltas`).
    """

    __slots__ = ("cached", "listed", "running")

    def __init__(self) -> None:
        self.cached: dict[str, bool] = {}  # session -> busy, in the records' order
        self.running = 0
        self.listed: list[tuple[str, bool]] | None = None  # the raw list, when a session is listed twice

    def apply(self, detail: dict[str, Any], touched: set[str] | None = None) -> None:
        """Take in one record's detail; `touched`, when given, gains the sessions whose entry it
        touched (most replays, the runner's among them, ask none: a set a record was ≈ a tenth
        of the call)."""
        cached = self.cached
        if "running" in detail:
            self.running = detail["running"]
        if "cached" in detail:
            if touched is not None:
                touched.update(cached)
            listed = [(sid, busy) for sid, busy in detail["cached"]]
            cached.clear()
            for sid, busy in listed:
                cached[sid] = cached.get(sid, True) and busy  # idle if any entry is
            if touched is not None:
                touched.update(cached)
            self.listed = listed if len(listed) != len(cached) else None
            return
        # Replayed at every record, by the runner and by I7: a list skipped when absent (a
        # record of one change names one list), tested with `in` (no method call a list). A
        # change to a listing that named a session twice applies to the cache it stands for.
        if self.listed is not None and len(detail) > ("running" in detail):
            self.listed = None
        if "drop" in detail:
            for sid in detail["drop"]:
                if cached.pop(sid, None) is not None and touched is not None:
                    touched.add(sid)
        if "busy" in detail:
            for sid in detail["busy"]:
                if cached.get(sid) is False:
                    cached[sid] = True
                    if touched is not None:
                        touched.add(sid)
        if "idle" in detail:
            for sid in detail["idle"]:
                if cached.get(sid) is True:
                    cached[sid] = False
                    if touched is not None:
                        touched.add(sid)
        if "add" in detail:
            for sid, now_busy in detail["add"]:
                cached.pop(sid, None)
                cached[sid] = now_busy
                if touched is not None:
                    touched.add(sid)

    def net(self, change: dict[str, Any]) -> dict[str, Any] | None:
        """Take in one answer of the gateway's `resources_delta` hook (validated: drop, busy,
        idle, add, running) and say what it changed as a `resources` record's detail: which
        sessions left and came, and `running` (as `ResourcesDeltas` diffs two samples). An
        agent moved or a flag flipped is no change of the record's (None if nothing is)."""
        # Asked at every sample the hook answers something (a turn of a full cache: one agent
        # loaded, one evicted): `apply`'s steps inline, plain loops, no comprehension (a frame each).
        cached, running = self.cached, self.running
        if "running" in change:
            self.running = change["running"]
        if self.listed is not None and len(change) > ("running" in change):
            self.listed = None
        detail: dict[str, Any] = {}
        gone: list[str] = []
        came: list[str] = []
        if "drop" in change:
            for sid in change["drop"]:
                if cached.pop(sid, None) is not None:
                    gone.append(sid)
        if "busy" in change:
            for sid in change["busy"]:
                if cached.get(sid) is False:
                    cached[sid] = True
        if "idle" in change:
            for sid in change["idle"]:
                if cached.get(sid) is True:
                    cached[sid] = False
        if "add" in change:
            for sid, busy in change["add"]:
                if cached.pop(sid, None) is None:  # not cached now: came, unless the change dropped it
                    if sid in gone:
                        gone.remove(sid)
                    else:
                        came.append(sid)
                cached[sid] = busy
        if gone:
            if len(gone) > 1:
                gone.sort()
            detail["drop"] = gone
        if came:
            if len(came) > 1:
                came.sort()
                detail["add"] = [[sid, cached[sid]] for sid in came]
            else:
                detail["add"] = [[came[0], cached[came[0]]]]
        if self.running != running:
            detail["running"] = self.running
        return detail or None

    def entries(self) -> list[tuple[str, bool]]:
        """(session, busy) for every cached agent, in the gateway's order."""
        return list(self.listed) if self.listed is not None else list(self.cached.items())

    def resources(self) -> Resources:
        return Resources(tuple(self.entries()), self.running)
