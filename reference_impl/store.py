"""The durable store: real SQLite with foreign keys on. It is the reference gateway's disk.

A crash drops every Python object but this connection (the database survives); a restart
rebuilds from it. Writes can be refused as 'database is locked' to inject that fault.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterable, Iterator
from functools import cache
from itertools import chain, starmap

from conformance.observations import StoredMessage, StoredSession
from reference_impl.tables import (
    _CHUNK,
    _WORDS,
    SCHEMA,
    Route,
    Row,
    StoreLocked,
    _delete_outbox,
    _fresh_memory_db,
    _insert_ingested,
    _insert_messages,
    _recycle,
    _transaction,
    is_foreign_key_error,
)


class Store:
    """Transcripts, routing and lifecycle flags in one SQLite database."""

    def __init__(self, now: Callable[[], int], path: str = ":memory:") -> None:
        self._now = now
        self.crash_point: Callable[[str], None] = _no_point  # the gateway's `Harness.crash_point`
        self._in_memory = path == ":memory:"
        if self._in_memory:
            self.db = _fresh_memory_db()  # the schema, and no row
        else:
            self.db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
            # A file another process opens after this one is killed: the write-ahead log keeps a
            # transaction the kill cut off out of the database, and without fsync what a commit
            # wrote survives a killed process all the same (the kernel holds it), if not a power cut.
            self.db.execute("PRAGMA journal_mode = WAL")
            self.db.execute("PRAGMA synchronous = OFF")
            if not self.db.execute("SELECT name FROM sqlite_master WHERE name = 'sessions'").fetchone():
                self.db.executescript(SCHEMA)
        self.db.execute("PRAGMA foreign_keys = ON")
        # The writes, on one cursor (each `db.execute` makes a cursor: ≈ 4% of a write); a write
        # that returns a row (`next_id`) has it read at once, which ends the statement
        self._dml: Callable[..., sqlite3.Cursor] = self.db.cursor().execute
        self.locked_until = -1
        self._appends_to_sizing = _SIZE_EVERY  # appends left before the in-memory database's size is looked at
        # A read cache of transcripts: reloading an evicted agent re-reads its whole session,
        # which dominated long runs. Kept in step by `append` (after the commit) and dropped
        # by any deletion; `read_transcript` (what other surfaces see) bypasses it, and the
        # writes all go to SQLite as before. A session's entry goes once memory has its end
        # (a /resume back to it reads it again), so the cache holds live sessions, not history.
        self._transcripts: dict[str, list[Row]] = {}
        # Session rows known to exist, with their parent (written or read since the last deletion).
        self._existing: dict[str, str | None] = {}
        self._lives: dict[str, int] = {}  # session -> life, read once: only `bump_life` writes it
        self._seen_rows: dict[str, list[StoredMessage]] = {}  # what `read_messages` has read, up to `_seen_seq`
        self._seen_tuples: dict[str, tuple[StoredMessage, ...]] = {}  # the same as handed out: one tuple while no row comes
        self._seen_seq = 0
        # `all_sessions`' rows (id -> parent), kept in step by the writes of session rows; None
        # (after a deletion, whose cascade no cache follows, or a crash): read again.
        self._sessions: dict[str, str | None] | None = None
        self._unlinked: set[str] = set()  # parents some child row was written without (`orphan_session`)
        self.saved_routes: dict[str, None] = {}  # keys of the routing entries written, oldest first, for the watcher
        # The routing table, read once: only `save_route` writes it, and it keeps this in step.
        self._routing: dict[str, tuple[str, str, str | None, str | None, int | None, int | None, bool]] = {}
        if not self._in_memory:  # a new in-memory database has nothing to read
            self._read_kept()

    def reopen(self) -> None:
        """After a crash: the read caches were the dead process's memory (a crash point may have
        cut a write between the database and a cache); only the database survives."""
        self._transcripts.clear()
        self._existing.clear()
        self._lives.clear()
        self._sessions = None
        self.saved_routes = {}
        self._read_kept()

    def _read_kept(self) -> None:
        """The state kept beside the database, read from it: the routing table and the parents
        children were written without."""
        self._routing = {
            route.chat_key: (route.chat_key, route.chat, route.session_id, route.previous_id, route.last_user,
                             route.anchor, route.ended)
            for route in self.read_routes()
        }
        self._unlinked = {parent for (parent,) in self.db.execute(
            "SELECT DISTINCT spawned_by FROM sessions WHERE parent_id IS NULL AND spawned_by IS NOT NULL")}

    def close(self) -> None:
        """The run is over: the database goes, and with it every read cache (the rows
        `read_messages` has read are every stored row by the final snapshot; other objects of
        the gateway, its memory manager, still hold the store). An in-memory database goes
        back emptied for the next store (`tables._recycle`); this store keeps a closed one."""
        db, self.db, self._dml = self.db, _CLOSED, _CLOSED_DML
        if self._in_memory and db is not _CLOSED:
            _recycle(db)
        else:
            db.close()
        self._transcripts, self._existing, self._lives, self._seen_rows, self._seen_tuples = {}, {}, {}, {}, {}
        self._sessions = None
        self._routing, self.saved_routes = {}, {}

    # -- faults -----------------------------------------------------------------------

    def _check_lock(self) -> None:
        """Before a write (a few a turn): the clock is read only once a lock was ever asked."""
        if self.locked_until >= 0 and self._now() < self.locked_until:
            raise StoreLocked("database is locked")

    # -- transcripts ------------------------------------------------------------------

    def next_id(self, name: str) -> int:
        """The counter's next value, durable before it is handed out: an UPDATE once the row
        exists (an upsert costs more, and only a store's first id needs the INSERT). Read from
        the database every time, not kept: another writer may have moved it."""
        row = self._dml("UPDATE counters SET value = value + 1 WHERE name = ? RETURNING value", (name,)).fetchone()
        if row is None:
            self._dml("INSERT INTO counters(name, value) VALUES (?, 1)", (name,))
            return 1
        return int(row[0])

    def new_session_id(self) -> str:
        """An id no session has had (the counter is durable). Its life is 0 with no read: a
        `lives` row only exists for a session /resume went back to. It has no rows either, so
        its transcript is cached from the start (`append` keeps it): loading it after an
        eviction, or ending it without an agent, reads nothing."""
        session = f"s{self.next_id('session')}"
        self._lives[session] = 0
        self._transcripts[session] = []
        return session

    def upsert_session(self, session_id: str, chat: str, parent_id: str | None, kind: str, started: int) -> None:
        """Create the row, or refresh its parent (session create is an upsert). A row known to
        exist with this parent, itself known to exist, is left as it is: the upsert would
        change nothing (an agent reloaded after eviction upserts its row at its next write).
        A dangling parent is not known to exist: the upsert's foreign-key failure is the
        gateway's cue to drop it."""
        self._check_lock()
        known = self._existing
        if session_id in known and known[session_id] == parent_id and (parent_id is None or parent_id in known):
            return
        self._dml(
            "INSERT INTO sessions(id, chat, parent_id, kind, started) VALUES (?, ?, ?, ?, ?) "
            "ON CONFLICT(id) DO UPDATE SET parent_id = excluded.parent_id",
            (session_id, chat, parent_id, kind, started),
        )
        self._existing[session_id] = parent_id
        if self._sessions is not None:
            self._sessions[session_id] = parent_id
        if session_id in self._unlinked:
            self._link_children(session_id)

    def orphan_session(self, session_id: str, chat: str, spawned_by: str, kind: str, started: int) -> None:
        """A delegate child's row written without its parent, whose row is not there (deleted by
        another surface, or not written yet): the parent is kept aside, and the link made again
        when the parent's row lands (`_link_children`), so a child never stays parentless beside
        the parent that spawned it."""
        self._check_lock()
        self._dml(
            "INSERT INTO sessions(id, chat, parent_id, kind, started, spawned_by) VALUES (?, ?, NULL, ?, ?, ?) "
            "ON CONFLICT(id) DO UPDATE SET parent_id = NULL, spawned_by = excluded.spawned_by",
            (session_id, chat, kind, started, spawned_by),
        )
        self._existing[session_id] = None
        if self._sessions is not None:
            self._sessions[session_id] = None
        self._unlinked.add(spawned_by)

    def _link_children(self, parent_id: str) -> None:
        """The parent's row landed: its children written without it name it again."""
        self._unlinked.discard(parent_id)
        children = [sid for (sid,) in self.db.execute(
            "SELECT id FROM sessions WHERE spawned_by = ? AND parent_id IS NULL ORDER BY id", (parent_id,))]
        self._dml("UPDATE sessions SET parent_id = ? WHERE spawned_by = ? AND parent_id IS NULL", (parent_id, parent_id))
        for child in children:
            self._existing[child] = parent_id
            if self._sessions is not None:
                self._sessions[child] = parent_id

    def append(self, session_id: str, rows: Iterable[Row]) -> None:
        """Append rows atomically: all land or none do. One multi-row INSERT is one statement,
        so atomic by itself (a turn is two rows: one statement instead of BEGIN, the inserts
        and COMMIT); a long replay is chunked inside a transaction."""
        self._check_lock()
        rows = list(rows)
        self._write_rows(_insert_messages, rows, (session_id,))
        cached = self._transcripts.get(session_id)
        if cached is not None:
            cached.extend(rows)
        self._appends_to_sizing -= 1
        if not self._appends_to_sizing:
            self._size_up()

    def _size_up(self) -> None:
        """An in-memory database past `_ON_DISK_PAGES` moves to a private temporary file (the
        same database, copied by SQLite's backup): its memory is then SQLite's page cache (2 MB),
        not every page a long run wrote (≈ 140 MB at 10^6 events). Its statements cost more
        (≈ 25 %), so a short run's stays in memory; behaviour does not move (the same rows,
        ids and order), and a crash keeps it as it kept the in-memory one."""
        self._appends_to_sizing = _SIZE_EVERY
        db = self.db
        if not self._in_memory or db.in_transaction or db.execute("PRAGMA page_count").fetchone()[0] < _ON_DISK_PAGES:
            return
        on_disk = sqlite3.connect("", isolation_level=None, check_same_thread=False)  # "": deleted when closed
        db.backup(on_disk)
        on_disk.execute("PRAGMA foreign_keys = ON")
        self.db, self._dml, self._in_memory = on_disk, on_disk.cursor().execute, False
        self._appends_to_sizing = -1  # never again (it counts down past zero)
        db.close()

    def session_exists(self, session_id: str) -> bool:
        if session_id in self._existing:
            return True
        row = self.db.execute("SELECT parent_id FROM sessions WHERE id = ?", (session_id,)).fetchone()
        if row is None:
            return False
        self._existing[session_id] = row[0]
        return True

    def transcript(self, session_id: str) -> list[Row]:
        """The session's rows, for the gateway: served from the read cache once read."""
        cached = self._transcripts.get(session_id)
        if cached is None:
            cached = self._transcripts[session_id] = self.read_transcript(session_id)
        return list(cached)

    def read_transcript(self, session_id: str) -> list[Row]:
        """The session's rows as the database holds them (bypassing the read cache)."""
        return [
            Row(turn, role, content, visibility)
            for turn, role, content, visibility in self.db.execute(
                "SELECT turn_id, role, content, visibility FROM messages WHERE session_id = ? ORDER BY seq",
                (session_id,),
            )
        ]

    def read_messages(self) -> dict[str, tuple[StoredMessage, ...]]:
        """Every session's rows as the database holds them, read incrementally: message rows
        are only ever inserted (with a growing sequence number) or deleted with their
        session's row, so each read fetches the rows past the last one it saw, and a deletion
        forgets the sessions whose rows went. (The runner snapshots the store at every stop,
        checkpoint and deletion: re-reading every row each time cost more than the turns that
        wrote them.)"""
        seen, words, tuples = self._seen_rows, _WORDS, self._seen_tuples
        grown: dict[str, list[StoredMessage]] = {}  # the sessions with new rows: only their tuples are made again
        seq = seen_seq = self._seen_seq  # the last row read, kept once at the end (not an attribute set a row)
        for seq, session, role, content, visibility in self.db.execute(  # noqa: B007 (the last kept)
            "SELECT seq, session_id, role, content, visibility FROM messages WHERE seq > ? ORDER BY seq", (seen_seq,)
        ):  # SQLite hands out a new string per value: a role or visibility is kept as one shared copy
            rows = grown.get(session)
            if rows is None:
                rows = grown[session] = seen.setdefault(session, [])
            rows.append(StoredMessage(words.get(role, role), content, words.get(visibility, visibility)))
        self._seen_seq = seq
        for session, rows in grown.items():  # a session with no new row keeps its tuple (the runner's checks skip it)
            tuples[session] = tuple(rows)
        return dict(tuples)  # a tuple for every session `seen` holds (a deletion forgets both)

    def read_sessions(self) -> Iterator[StoredSession]:
        """Every session row with its messages, as the database holds them (bypassing the read
        caches), one session at a time in id order: a long run's final snapshot is every row,
        and this holds one session's (`ReferenceGateway.durable_parts`). One statement, walked
        by the sessions' key and the messages' index: SQLite sorts nothing."""
        words = _WORDS
        sid: str | None = None
        parent: str | None = None
        rows: list[StoredMessage] = []
        for session, parent_id, role, content, visibility in self.db.execute(
            "SELECT s.id, s.parent_id, m.role, m.content, m.visibility FROM sessions AS s "
            "LEFT JOIN messages AS m ON m.session_id = s.id ORDER BY s.id, m.seq"
        ):
            if session != sid:
                if sid is not None:
                    yield StoredSession(sid, parent, tuple(rows))
                sid, parent, rows = session, parent_id, []
            if role is not None:  # NOT NULL in a row: None is a session without one
                rows.append(StoredMessage(words.get(role, role), content, words.get(visibility, visibility)))
        if sid is not None:
            yield StoredSession(sid, parent, tuple(rows))

    def forget_messages(self) -> None:
        """Drop what `read_messages` has read (every stored row, once a long run's snapshot was
        taken whole): the next read fetches every row again."""
        self._seen_rows, self._seen_tuples, self._seen_seq = {}, {}, 0

    def delete_session(self, session_id: str, *, keep_children: bool = False) -> None:
        """What another surface does. `keep_children` deletes with foreign keys off, as the
        sqlite3 shell does by default: the row and its messages go, its children dangle."""
        self._sessions = None
        try:
            if keep_children:
                self.db.execute("PRAGMA foreign_keys = OFF")
                try:
                    with _transaction(self.db):
                        self.db.execute("DELETE FROM messages WHERE session_id = ?", (session_id,))
                        self.db.execute("DELETE FROM sessions WHERE id = ?", (session_id,))
                finally:
                    self.db.execute("PRAGMA foreign_keys = ON")
            else:
                self.db.execute("DELETE FROM sessions WHERE id = ?", (session_id,))
        finally:  # messages only go with their session's row: forget what the caches hold of sessions gone
            alive = {sid for (sid,) in self.db.execute("SELECT id FROM sessions")}
            for known in (self._transcripts, self._existing):  # a cascade reaches sessions no cache names
                for gone in [sid for sid in known if sid not in alive]:
                    del known[gone]
            for gone in [sid for sid in self._seen_rows if sid not in alive]:
                del self._seen_rows[gone]
                self._seen_tuples.pop(gone, None)

    # -- routing ----------------------------------------------------------------------

    def routes(self) -> list[Route]:
        """Every routing entry, by chat key (from the read cache)."""
        return [Route(*row) for _key, row in sorted(self._routing.items())]

    def read_routes(self) -> list[Route]:
        """Every routing entry as the database holds it (bypassing the read cache)."""
        return [
            Route(key, chat, sid, prev, last, anchor, bool(ended))
            for key, chat, sid, prev, last, anchor, ended in self.db.execute(
                "SELECT chat_key, chat, session_id, previous_id, last_user, anchor, ended FROM routing ORDER BY chat_key"
            )
        ]

    def routed_sessions(self) -> list[tuple[str, str]]:
        """(chat, session) of every routing entry that leads to a session, as the database holds
        them (the snapshot's routing: two columns fetched, not a `Route` of seven a row, read at
        every snapshot). `<> ''` is false for NULL too."""
        return list(self.db.execute("SELECT chat, session_id FROM routing WHERE session_id <> ''"))

    def route(self, chat_key: str) -> Route | None:
        row = self._routing.get(chat_key)
        return Route(*row) if row else None

    def save_route(self, route: Route) -> None:
        """Write the entry: an UPDATE when the row exists (the read cache mirrors the table; an
        UPDATE costs about half the upsert it replaces), else an INSERT. The chat name is
        never updated: the first one stays."""
        known = self._routing.get(route.chat_key)
        if known is None:
            self._dml(
                "INSERT INTO routing(chat_key, chat, session_id, previous_id, last_user, anchor, ended) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                (route.chat_key, route.chat, route.session_id, route.previous_id, route.last_user, route.anchor,
                 int(route.ended)),
            )
        else:
            self._dml(
                "UPDATE routing SET session_id = ?, previous_id = ?, last_user = ?, anchor = ?, ended = ? "
                "WHERE chat_key = ?",
                (route.session_id, route.previous_id, route.last_user, route.anchor, int(route.ended), route.chat_key),
            )
        self._routing[route.chat_key] = (
            route.chat_key, known[1] if known else route.chat, route.session_id, route.previous_id, route.last_user,
            route.anchor, bool(route.ended))  # as the upsert left it: the first chat name stays
        self.saved_routes[route.chat_key] = None

    def take_saved_routes(self) -> list[Route]:
        """The routing entries written since the last call, as they are now, in the order
        first written (a change feed, so the gateway's expiry index never re-reads the whole
        table)."""
        saved, self.saved_routes = self.saved_routes, {}
        return list(starmap(Route, map(self._routing.__getitem__, saved)))  # C loops: no comprehension's frame a turn

    # -- lifecycle flags --------------------------------------------------------------

    def life(self, session_id: str) -> int:
        life = self._lives.get(session_id)
        if life is None:
            row = self.db.execute("SELECT life FROM lives WHERE session_id = ?", (session_id,)).fetchone()
            life = self._lives[session_id] = int(row[0]) if row else 0
        return life

    def bump_life(self, session_id: str) -> None:
        (life,) = self.db.execute(
            "INSERT INTO lives(session_id, life) VALUES (?, 1) ON CONFLICT(session_id) DO UPDATE SET life = life + 1 "
            "RETURNING life",
            (session_id,),
        ).fetchone()
        self._lives[session_id] = int(life)

    def record_end(self, session_id: str, reason: str) -> bool:
        """Mark the session's current life ended. False if it already was (exactly once)."""
        cursor = self._dml(
            "INSERT OR IGNORE INTO session_ends(session_id, life, t, reason) VALUES (?, ?, ?, ?)",
            (session_id, self.life(session_id), self._now(), reason),
        )
        return cursor.rowcount == 1

    def mark_end_done(self, session_id: str, *columns: str) -> None:
        """Set the end's flags (`memory_done`, `finalize_done`, or both in one statement)."""
        assert columns and set(columns) <= {"memory_done", "finalize_done"}
        if "memory_done" in columns:  # memory has the transcript: the read cache keeps live sessions only
            self._transcripts.pop(session_id, None)
        self._dml(_mark_done(columns), (session_id, self.life(session_id)))

    def unfinished_ends(self) -> list[tuple[str, str, bool, bool]]:
        """Ends recorded but whose hooks did not all fire (a crash in between)."""
        return [
            (sid, reason, bool(mem), bool(fin))
            for sid, reason, mem, fin in self.db.execute(
                "SELECT session_id, reason, memory_done, finalize_done FROM session_ends "
                "WHERE memory_done = 0 OR finalize_done = 0 ORDER BY t, session_id"
            )
        ]

    def is_ended(self, session_id: str) -> bool:
        return self.db.execute(
            "SELECT 1 FROM session_ends WHERE session_id = ? AND life = ?", (session_id, self.life(session_id))
        ).fetchone() is not None

    # -- memory watermark -------------------------------------------------------------

    def mark_ingested(self, provider: str, turns: Iterable[str]) -> None:
        self._write_rows(_insert_ingested, list(zip(turns)), (provider,))

    def ingested(self, provider: str) -> set[str]:
        """The watermark's turns a restart needs: those the outbox still holds (a ship whose
        watermark was saved, before its outbox rows went). A turn is handed to memory once, so
        no later turn is in the watermark: reading all of it cost a row a turn at every boot."""
        return {row[0] for row in self.db.execute(
            "SELECT turn_id FROM ingested WHERE provider = ?1 AND turn_id IN "
            "(SELECT turn_id FROM memory_outbox WHERE provider = ?1)", (provider,))}

    def outbox_add(self, provider: str, session: str, turn: str, user: str, assistant: str) -> None:
        self._dml(
            "INSERT INTO memory_outbox(provider, session_id, turn_id, user, assistant) VALUES (?, ?, ?, ?, ?)",
            (provider, session, turn, user, assistant),
        )

    def outbox_done(self, provider: str, turns: Iterable[str]) -> None:
        self._write_rows(_delete_outbox, [(turn,) for turn in turns], (provider,))

    def outbox(self, provider: str) -> list[tuple[str, str, str, str]]:
        """(session, turn, user, assistant) still unshipped, in the order they were buffered."""
        return list(self.db.execute(
            "SELECT session_id, turn_id, user, assistant FROM memory_outbox WHERE provider = ? ORDER BY seq", (provider,)
        ))

    # -- the command journal ----------------------------------------------------------

    def journal_command(self, chat_key: str, command: str) -> None:
        self.db.execute("INSERT OR REPLACE INTO command_journal(chat_key, command, t) VALUES (?, ?, ?)",
                        (chat_key, command, self._now()))

    def journal_switch(self, chat_key: str, left: str | None, target: str) -> None:
        self.db.execute("UPDATE command_journal SET left_id = ?, target_id = ? WHERE chat_key = ?", (left, target, chat_key))

    def commands_due(self, chat_key: str, commands: list[str]) -> None:
        for command in commands:
            self.db.execute("INSERT INTO due_commands(chat_key, command, t) VALUES (?, ?, ?)", (chat_key, command, self._now()))

    def command_taken(self, chat_key: str) -> None:
        """The chat's oldest due command is being carried out: it moves to the command journal
        in one transaction (a crash between the two would lose it, or run it twice)."""
        with _transaction(self.db):
            self.db.execute("INSERT OR REPLACE INTO command_journal(chat_key, command, t) SELECT chat_key, command, t "
                            "FROM due_commands WHERE chat_key = ? ORDER BY seq LIMIT 1", (chat_key,))
            self.db.execute("DELETE FROM due_commands WHERE seq = (SELECT MIN(seq) FROM due_commands WHERE chat_key = ?)",
                            (chat_key,))

    def clear_due(self, chat_key: str) -> None:
        """A turn started ahead of the chat's remaining commands: they wait behind it again."""
        self.db.execute("DELETE FROM due_commands WHERE chat_key = ?", (chat_key,))

    def due(self) -> list[tuple[str, str, int]]:
        """(chat key, command, when it became due) of due commands a crash left, in order."""
        return list(self.db.execute("SELECT chat_key, command, t FROM due_commands ORDER BY seq"))

    def journal_done(self, chat_key: str) -> None:
        self.db.execute("DELETE FROM command_journal WHERE chat_key = ?", (chat_key,))

    def journal(self) -> list[tuple[str, str, int, str | None, str | None]]:
        """(chat key, command, when it took effect, left, target) of the commands a crash cut short."""
        return list(self.db.execute("SELECT chat_key, command, t, left_id, target_id FROM command_journal ORDER BY chat_key"))

    def all_sessions(self) -> list[tuple[str, str | None]]:
        """(id, parent) of every session row, by id: read again only after a deletion (or a
        crash); the writes of session rows keep it in step (`upsert_session`, `orphan_session`,
        `_link_children`): a snapshot after a new session reads no row (the ids' order is SQLite's
        `BINARY`, bytes of UTF-8: the order of Python's `str`)."""
        if self._sessions is None:
            self._sessions = dict(self.db.execute("SELECT id, parent_id FROM sessions"))
        return sorted(self._sessions.items())

    def _write_rows(self, statement: Callable[[int], str], rows: list[tuple], shared: tuple = ()) -> None:
        """Write many rows with few statements: `statement(n)` is the SQL for n rows, whose
        parameters are `shared`, then each row's values. One statement is atomic by itself;
        more than `_CHUNK` rows go in chunks inside one transaction."""
        if not rows:
            return
        if len(rows) <= _CHUNK:
            self._dml(statement(len(rows)), [*shared, *chain.from_iterable(rows)])
            return
        with _transaction(self.db):  # a crash between chunks rolls back (SQLite's journal): none land
            for start in range(0, len(rows), _CHUNK):
                if start:
                    self.crash_point("rows-chunk-written")
                self._write_rows(statement, rows[start:start + _CHUNK], shared)


_SIZE_EVERY = 1024  # appends (a turn writes one or two) between two looks at the in-memory database's size
_ON_DISK_PAGES = 4096  # pages (16 MB) past which it moves to a temporary file: a gateway day's is 980


@cache
def _mark_done(columns: tuple[str, ...]) -> str:
    return f"UPDATE session_ends SET {', '.join(f'{column} = 1' for column in columns)} WHERE session_id = ? AND life = ?"


_CLOSED = sqlite3.connect(":memory:")  # what a closed store holds: any use raises, as its own closed database did
_CLOSED_DML = _CLOSED.cursor().execute
_CLOSED.close()


def _no_point(_point: str) -> None:
    """A store used without a harness (tests, tools): no crash point ever fires."""


__all__ = ["SCHEMA", "Route", "Row", "Store", "StoreLocked", "is_foreign_key_error"]
