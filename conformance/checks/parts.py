"""A long log judged in parts: the checks' model holds one part's turns at a time.

The model of a whole run keeps every turn (≈ 500 bytes each): a 10^6-event run's model was
most of its memory. A spilled log past `WHOLE_RECORDS` is judged in parts (shorter ones fit the
memory bound whole, and a split costs CPU). Most of what the checks judge belongs to one chat:
its turns, the sessions they ran in, those sessions' hooks, ingests and stored rows. `split_log` reads the
log once and joins every chat, session and turn that any record names together (a reply sent
to another chat, a session two chats shared, a turn ingested under a foreign session, a
stored row's turn or parent: whatever a gateway did, what it tied together stays together);
each group of joined names is a *component*, and components are packed into parts of about
`PART_RECORDS` records. A part's view (`LogPart`) is the log as the checks know it, with the
other parts' records left out: the records that name nothing (the scenario, stops, restarts,
faults) are in every part (the resource samples only where a session is deleted:
`_SHARED_ONLY`), and a durable snapshot in a part holds only its sessions. Every check judges
each part's model in turn, and the verdicts are merged (`conformance.checks.judge`); I7, whose
cache is shared by every chat, and I3, which words some findings over many sessions, gather
what they need from every part and judge once, I7 on the shared model (the records that name
nothing, the samples with them).

Nothing here is a shortcut: a log whose parts cannot be told apart (one component, or a kind
this module does not know) is judged whole, and tests judge the catalog, the zoo and
generated seeds both ways and compare the verdicts.
"""

from __future__ import annotations

from array import array
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from conformance.observations import Obs

PART_RECORDS = 250_000  # records a part holds before the next component starts another (a spilled log is longer: SPILL_AT)
# A spilled log up to this many records is judged whole: its model and the checks' state (≈ 100
# bytes a record; 3·10^5 events, 2.1 M records, peaked at 251 MB whole) fit the memory bound, and
# a split costs CPU (the split's pass, each part reading its records again: 10^5 events judged in
# 4.0 s whole, 5.3 s in parts). Past it, the model of the whole log would not fit: parts.
WHOLE_RECORDS = 1_000_000
GLOBAL = 255  # the label of a record every part reads (it names no chat, session or turn)
SHARED = 254  # the label of a record only the shared model reads (`_shared_only`)
MAX_PARTS = 254

# Kinds whose records name no chat, session or turn: every part reads them.
GLOBAL_KINDS = frozenset({"scenario", "advance", "backend_fail", "backend_slow", "checkpoint", "crash", "crash_at",
                          "db_locked", "error", "memory_shutdown", "quiesce", "resources", "restart", "sigterm",
                          "threads", "processes", "durable"})
# Kinds whose records name chats, sessions or turns in their fields, and the detail keys that
# name more of them (a turn id, or a list of them; a session id, or a list).
NAMING_KINDS: dict[str, tuple[str, ...]] = {
    "message": (), "delegate": (), "command": (), "llm_request": (), "sync_turn": (), "skipped": (),
    "on_session_finalize": (), "on_session_reset": (), "delete_parent": (),
    "reply": ("answers",),
    "ingest": ("replies",), "ingest_busy": ("replies",), "ingest_failed": ("replies",), "ingest_repeated": ("replies",),
    "on_session_end": ("replies",),
    "on_session_switch": ("previous",),
    "note": ("turn",),
    "delete_session": ("cascade",),
}


_READ_KINDS = frozenset(NAMING_KINDS) | {"durable"}
# Kinds only I7 reads (on the shared model), unless the log deletes a session: what became of
# the deleted session's agent is then asked of the samples (`deletions._cache_moves`). A
# steady run logs two samples an event: every part reading them cost more than its own records.
_SHARED_ONLY = frozenset({"resources"})
_DELETIONS = frozenset({"delete_session", "delete_parent"})
_LISTS = (list, tuple)  # as `isinstance` takes it (`list | tuple` would make a union object at every record)
_SESSION_KEYS = frozenset({"on_session_switch", "delete_session"})  # kinds whose detail names sessions (the rest: turns)


class _Names:
    """Union-find over the names a log uses. A turn the harness named (`t<n>`) is held by its
    number in an array and takes the node of the first record naming it with something else
    (its message's chat): a long run's turn ids would otherwise be most of this pass's memory,
    and a node a turn most of its time. Chats and sessions share one namespace (a chat and a
    session of one name are joined: more than needed, never less)."""

    def __init__(self) -> None:
        self.parent = array("i")
        self.first = array("i")  # node -> index of the first record naming it (components in log order)
        self.named: dict[str, int] = {}  # chat or session -> its node
        self.odd: dict[str, int] = {}  # a turn id not of the harness's form -> its node
        self.turns = array("i")  # turn number - 1 -> its node, -1 if none yet
        self.joined: set[tuple[int, int]] = set()  # pairs of nodes already joined: most records repeat one
        self.recent: dict[str, int] = {}  # turn id -> its node, for the turns named lately

    def name(self, name: str, index: int) -> int:
        found = self.named.get(name, -1)
        if found < 0:
            found = self.named[name] = self._new(index)
        return found

    def turn(self, name: str, index: int, owner: int) -> int:
        """The turn's node: `owner` (the record's other node), if the turn had none yet."""
        found = self.recent.get(name, -1)
        if found >= 0:
            return found
        found = self._turn(name, index, owner)
        if len(self.recent) >= 1 << 16:  # a turn's records come close together, and its session's end names it again: a day of turns fits
            self.recent.clear()
        self.recent[name] = found
        return found

    def _turn(self, name: str, index: int, owner: int) -> int:
        if len(name) > 1 and name[0] == "t" and name[1] != "0" and name[1:].isdigit():
            number = int(name[1:]) - 1
            turns = self.turns
            if number < len(turns):
                found = turns[number]
                if found < 0:
                    found = turns[number] = owner if owner >= 0 else self._new(index)
                return found
            if number < len(turns) + 65536:  # not a number from elsewhere: the array stays small
                turns.extend(array("i", [-1]) * (number + 1 - len(turns)))
                found = turns[number] = owner if owner >= 0 else self._new(index)
                return found
        found = self.odd.get(name, -1)
        if found < 0:
            found = self.odd[name] = owner if owner >= 0 else self._new(index)
        return found

    def join(self, a: int, b: int) -> int:
        """Join two nodes (either may be -1: none); returns one of them to join the next to."""
        if a < 0 or a == b:
            return b
        if b < 0 or (a, b) in self.joined:
            return a
        self.joined.add((a, b))
        a, b = self.find(a), self.find(b)
        if a != b:
            if self.first[b] < self.first[a]:  # the earlier-named root stays
                a, b = b, a
            self.parent[b] = a
        return a

    def _new(self, index: int) -> int:
        self.parent.append(len(self.parent))
        self.first.append(index)
        return len(self.parent) - 1

    def find(self, node: int) -> int:
        parent = self.parent
        root = node
        while parent[root] != root:
            root = parent[root]
        while parent[node] != root:  # path compression
            parent[node], node = root, parent[node]
        return root


class LogSplit:
    """Which part each record belongs to (`GLOBAL`: every part), and each part's chats and sessions."""

    def __init__(self, records: Sequence[Obs], labels: bytearray, chats: list[set[str]], sessions: list[set[str]]):
        self.records = records
        self.labels = labels
        self.chats = chats
        self.sessions = sessions

    @property
    def parts(self) -> int:
        return len(self.chats)

    def part(self, number: int) -> LogPart:
        return LogPart(self, number)

    def shared(self) -> LogPart:
        """The records that name nothing, with every chat: what I7 judges the cache on."""
        return LogPart(self, GLOBAL)


def split_log(records: Sequence[Obs], part_records: int = PART_RECORDS) -> LogSplit | None:
    """The log's parts, or None where it is one component, no longer than one part, or names a
    kind this module does not know."""
    if len(records) <= part_records:
        return None
    names = _Names()
    nodes = array("i", [-1]) * len(records)  # record -> a node it names (-1: it names nothing)
    chats: dict[str, dict[str, Any]] = records[0].detail.get("chats") or {}
    for chat in chats:
        names.name(chat, 0)
    of_kinds = getattr(records, "of_kinds", None)  # a spilled log: read only the records that name something
    reading: Iterable[tuple[int, Obs]] = enumerate(records) if of_kinds is None else of_kinds(_READ_KINDS)
    name, turn_node, join = names.name, names.turn, names.join
    # `name`, `turn` and `join` inlined where they answer at once (a name known, a turn named
    # lately, a pair joined already: most records repeat their turn's names): a long run's log
    # is millions of records, and the calls were most of this pass.
    named_get, recent_get, joined = names.named.get, names.recent.get, names.joined
    for index, r in reading:
        kind = r.kind
        keys = NAMING_KINDS.get(kind)
        if keys is None:
            if kind == "durable":
                _join_snapshot(names, r, index)
            elif kind not in GLOBAL_KINDS:
                return None  # a kind unknown here: judged whole
            continue
        named = r.chat
        if named is None:
            node = -1
        else:
            node = named_get(named, -1)
            if node < 0:
                node = name(named, index)
        named = r.session
        if named is not None:
            other = named_get(named, -1)
            if other < 0:
                other = name(named, index)
            if node < 0 or node == other:
                node = other
            elif (node, other) not in joined:
                node = join(node, other)
        for turn in r.turns:
            other = recent_get(turn, -1)
            if other < 0:
                other = turn_node(turn, index, node)
            if node < 0 or node == other:
                node = other
            elif (node, other) not in joined:
                node = join(node, other)
        if keys:
            value = r.detail.get(keys[0])
            for named in (value,) if isinstance(value, str) else value if isinstance(value, _LISTS) else ():
                if isinstance(named, str):
                    other = name(named, index) if kind in _SESSION_KEYS else turn_node(named, index, node)
                    node = join(node, other)
        nodes[index] = node
    # Components in the order of their first record, packed into parts; counted and labelled
    # by C loops (a long run's log is millions of records).
    roots = [names.find(node) for node in range(len(names.parent))]
    # Ties (the head's chats, all named at record 0) broken by node: no set order reaches the parts.
    component_records = dict.fromkeys(sorted(set(roots), key=lambda root: (names.first[root], root)), 0)
    for node, count in Counter(nodes).items():
        if node >= 0:
            component_records[roots[node]] += count
    if len(component_records) < 2:
        return None
    part_of: dict[int, int] = {}
    size = part = 0
    for root, count in component_records.items():
        if size and size + count > part_records:
            part, size = min(part + 1, MAX_PARTS - 1), 0  # past MAX_PARTS, the last part takes the rest
        part_of[root] = part
        size += count
    if part == 0:
        return None
    label_of = [part_of[root] for root in roots]
    label_of.append(GLOBAL)  # node -1: the record names nothing
    labels = bytearray(map(label_of.__getitem__, nodes))
    del nodes
    only = _shared_only(records)
    if only is not None:  # GLOBAL (0xFF) -> SHARED (0xFE) where the mask is 1: those records name nothing
        labels = bytearray((int.from_bytes(labels, "big") ^ int.from_bytes(only, "big")).to_bytes(len(labels), "big"))
    part_chats: list[set[str]] = [set() for _ in range(part + 1)]
    part_sessions: list[set[str]] = [set() for _ in range(part + 1)]
    for chat in chats:
        part_chats[label_of[names.named[chat]]].add(chat)
    for named, node in names.named.items():  # chats and sessions share a namespace: a chat's name is harmless here
        part_sessions[label_of[node]].add(named)
    return LogSplit(records, labels, part_chats, part_sessions)


def _shared_only(records: Sequence[Obs]) -> bytes | None:
    """A byte a record, 1 where only the shared model reads it (`_SHARED_ONLY`); None where
    every part reads them (the log deletes a session: `_DELETIONS`)."""
    kind_mask = getattr(records, "kind_mask", None)
    if kind_mask is not None:  # a spilled log: C loops over its kinds
        return None if 1 in kind_mask(_DELETIONS) else kind_mask(_SHARED_ONLY)
    if any(r.kind in _DELETIONS for r in records):
        return None
    return bytes(r.kind in _SHARED_ONLY for r in records)


def _join_snapshot(names: _Names, r: Obs, index: int) -> None:
    """A stored session with its parent and its rows' turns; a routed chat with its session."""
    detail = r.detail
    sessions = detail.get("sessions") or {}
    recent_get, turn, join, joined = names.recent.get, names.turn, names.join, names.joined
    for sid in sessions:
        body = sessions[sid]
        node = names.name(sid, index)
        if not isinstance(body, dict):
            continue
        parent = body.get("parent")
        if isinstance(parent, str):
            node = names.join(node, names.name(parent, index))
        for row in body.get("rows") or ():  # every row of the run in the final snapshot: `join` inlined as in `split_log`
            if isinstance(row, _LISTS) and len(row) > 1 and isinstance(row[1], str):
                other = recent_get(row[1], -1)
                if other < 0:
                    other = turn(row[1], index, node)
                if node == other:
                    continue
                if (node, other) not in joined:
                    node = join(node, other)
    routing = detail.get("routing") or {}
    if isinstance(routing, dict):
        for chat, sid in routing.items():
            if isinstance(chat, str) and isinstance(sid, str):
                names.join(names.name(chat, index), names.name(sid, index))


class LogPart(Sequence[Obs]):
    """One part of a split log as the model reads it: indexes are the whole log's (a verdict
    names the records of the log), the walk yields the part's records and those every part
    reads, and a durable snapshot holds the part's sessions and routes only. The head lists
    the part's chats (`GLOBAL`: the records that name nothing, with every chat)."""

    def __init__(self, split: LogSplit, part: int) -> None:
        self.split = split
        self.part = part
        self.records = split.records
        self.durable_labels = getattr(split.records, "durable_labels", None)
        keep = bytearray(256)
        keep[GLOBAL] = keep[SHARED if part == GLOBAL else part] = 1
        self._keep = bytes(keep)
        self.size = split.labels.count(GLOBAL) + split.labels.count(SHARED if part == GLOBAL else part)  # the walk's
        head = self.records[0]
        if part != GLOBAL:
            chats = split.chats[part]
            detail = dict(head.detail)
            detail["chats"] = {name: info for name, info in (head.detail.get("chats") or {}).items() if name in chats}
            head = Obs(head.t, head.step, head.kind, head.chat, head.session, head.turns, detail)
        self._head = head

    def __len__(self) -> int:
        return len(self.records)

    def __getitem__(self, index: int) -> Obs:  # type: ignore[override]
        if index == 0:
            return self._head
        return self._cut(self.records[index])

    def pick(self, indexes: Sequence[int]) -> Iterator[Obs]:
        pick = getattr(self.records, "pick", None)
        for index, r in zip(indexes, pick(indexes) if pick is not None else map(self.records.__getitem__, indexes),
                            strict=True):
            yield self._head if index == 0 else self._cut(r)

    def walk(self, unread: frozenset[str]) -> Iterator[tuple[int, Obs]]:
        """(index, record) of the records the part reads, in order; where the log is spilled, a
        stub for a record whose kind is in `unread` (`SpilledRecords.walk`)."""
        keep, labels = self._keep, self.split.labels
        walk = getattr(self.records, "walk", None)
        if walk is None:
            records = self.records
            for index, label in enumerate(labels):
                if keep[label]:
                    yield index, (self._head if index == 0 else self._cut(records[index]))
            return
        for index, r in self.records.walk_kept(unread, labels, keep):  # type: ignore[attr-defined]
            yield index, (self._head if index == 0 else self._cut(r))

    def _cut(self, r: Obs) -> Obs:
        if r.kind != "durable" or self.part == GLOBAL or "sessions" not in r.detail:
            return r
        detail = dict(r.detail)
        sessions = detail["sessions"]
        mine = self.split.sessions[self.part]
        if sessions is not None:
            if hasattr(sessions, "select"):
                detail["sessions"] = sessions.select(mine)
            else:
                detail["sessions"] = {sid: body for sid, body in sessions.items() if sid in mine}
        routing = detail.get("routing")
        if isinstance(routing, dict):
            chats = self.split.chats[self.part]
            detail["routing"] = {chat: sid for chat, sid in routing.items() if chat in chats or sid in mine}
        return Obs(r.t, r.step, r.kind, r.chat, r.session, r.turns, detail)
