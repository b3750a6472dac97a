"""The durable store's tables: the SQLite schema, the rows the gateway reads and writes, and the
statements `Store` writes many rows with. The store itself is `reference_impl.store`."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from functools import cache
from typing import NamedTuple

SCHEMA = """
-- A table keyed by text is WITHOUT ROWID: a write or a foreign-key check by its key touches one
-- b-tree, not the table and its key's index (most writes of a turn are such writes).
CREATE TABLE sessions (
    id TEXT PRIMARY KEY,
    chat TEXT NOT NULL,
    parent_id TEXT REFERENCES sessions(id) ON DELETE CASCADE,
    kind TEXT NOT NULL DEFAULT 'chat',  -- 'chat' or 'delegate' (delegates have no memory)
    started INTEGER NOT NULL,
    -- A delegate child's parent when its row had to be written without it (the parent's row
    -- not there): not a foreign key, so the link is made again once the parent's row lands.
    spawned_by TEXT
) WITHOUT ROWID;
CREATE TABLE messages (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    turn_id TEXT,
    role TEXT NOT NULL,
    content TEXT NOT NULL,
    visibility TEXT NOT NULL DEFAULT 'visible'
);
CREATE INDEX messages_by_session ON messages(session_id, seq);
-- Routing is not tied to session rows: deleting a row must not silently re-route the chat.
CREATE TABLE routing (
    chat_key TEXT PRIMARY KEY,
    chat TEXT NOT NULL,
    session_id TEXT,
    previous_id TEXT,
    last_user INTEGER,
    anchor INTEGER,
    ended INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;
-- Boundary bookkeeping survives row deletion and restarts: a boundary fires exactly once.
CREATE TABLE session_ends (
    session_id TEXT NOT NULL,
    life INTEGER NOT NULL,
    t INTEGER NOT NULL,
    reason TEXT NOT NULL,
    memory_done INTEGER NOT NULL DEFAULT 0,
    finalize_done INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (session_id, life)
) WITHOUT ROWID;
CREATE TABLE lives (session_id TEXT PRIMARY KEY, life INTEGER NOT NULL) WITHOUT ROWID;
-- Memory watermark: which turns each provider's backend has taken (idempotent recovery).
CREATE TABLE ingested (provider TEXT NOT NULL, turn_id TEXT NOT NULL, PRIMARY KEY (provider, turn_id)) WITHOUT ROWID;
-- A batching provider's buffer, durable apart from the transcript: what it has not shipped yet.
-- Its order is `seq`'s: a new row's is past every row there (no AUTOINCREMENT, whose counter
-- costs a write per insert, is needed for that; only `messages` needs one never reused).
CREATE TABLE memory_outbox (
    seq INTEGER PRIMARY KEY,
    provider TEXT NOT NULL,
    session_id TEXT NOT NULL,
    turn_id TEXT NOT NULL,
    user TEXT NOT NULL,
    assistant TEXT NOT NULL
);
CREATE TABLE counters (name TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID;
-- A command being carried out, so a crash inside it is finished at the restart (a /resume with
-- the sessions it switches between once it has chosen them: finishing it must not resume twice).
CREATE TABLE command_journal (chat_key TEXT PRIMARY KEY, command TEXT NOT NULL, t INTEGER NOT NULL, left_id TEXT, target_id TEXT)
    WITHOUT ROWID;
-- Commands a turn's reply made due (they waited behind it; messages between them never started),
-- not yet carried out: a crash before the chat's queue is drained must not lose them. In `seq`'s
-- order, as the outbox is.
CREATE TABLE due_commands (seq INTEGER PRIMARY KEY, chat_key TEXT NOT NULL, command TEXT NOT NULL, t INTEGER NOT NULL);
"""


_EMPTY_IMAGE: bytes | None = None  # the schema, built once per process (see `_fresh_memory_db`)
_WORDS = {word: word for word in ("user", "assistant", "visible", "hidden")}  # see `read_messages`
_CHUNK = 64  # rows written by one statement (more: chunks inside one transaction)


_SPARE: list[sqlite3.Connection] = []  # in-memory databases a closed store emptied (`_recycle`), for the next one
_SPARE_PAGES = 256  # a database larger than this (1 MB) is closed: a long run's pages are not kept
_PRISTINE: list[tuple[str, str, str | None]] | None = None  # sqlite_master of the empty schema (`_recycle`)


def _fresh_memory_db() -> sqlite3.Connection:
    """A new in-memory database holding the empty schema. Running the schema script costs
    ~0.6 ms, a sizeable part of a short generated scenario, so it runs once per process and
    each store starts from a copy of that database (`deserialize`: the same pages, writable).
    A connection a closed store left empty comes first: its schema is parsed and its statements
    prepared already (≈ 0.9 M instructions a generated seed)."""
    global _EMPTY_IMAGE
    if _SPARE:
        return _SPARE.pop()
    db = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
    if _EMPTY_IMAGE is None:
        db.executescript(SCHEMA)
        _EMPTY_IMAGE = db.serialize()
    else:
        db.deserialize(_EMPTY_IMAGE)
    return db


def _recycle(db: sqlite3.Connection) -> None:
    """A closed store's in-memory database: emptied for the next store (every table its schema
    holds, and the AUTOINCREMENT counters: the same rows, ids and order a fresh copy would give),
    or closed if it is large or its schema is not the pristine one any more."""
    global _PRISTINE
    try:
        small = not db.in_transaction and len(_SPARE) < 2 and db.execute("PRAGMA page_count").fetchone()[0] <= _SPARE_PAGES
        if small:
            schema = db.execute("SELECT type, name, sql FROM sqlite_master ORDER BY type, name").fetchall()
            if _PRISTINE is None:
                pristine = sqlite3.connect(":memory:")
                pristine.executescript(SCHEMA)
                _PRISTINE = pristine.execute("SELECT type, name, sql FROM sqlite_master ORDER BY type, name").fetchall()
                pristine.close()
            if schema == _PRISTINE:
                db.execute("PRAGMA foreign_keys = OFF")
                for kind, table, _sql in schema:
                    if kind == "table":
                        db.execute(f'DELETE FROM "{table}"')
                _SPARE.append(db)
                return
    except sqlite3.Error:
        pass
    db.close()


class StoreLocked(sqlite3.OperationalError):
    """Raised for transcript writes while an injected lock is in force."""


class Row(NamedTuple):
    """One transcript message as the gateway holds it in memory and writes it (a named tuple:
    two are made per turn, and a frozen dataclass costs several times as much to build)."""

    turn: str | None
    role: str
    content: str
    visibility: str = "visible"


@dataclass(slots=True)
class Route:
    chat_key: str
    chat: str
    session_id: str | None
    previous_id: str | None
    last_user: int | None
    anchor: int | None
    ended: bool


def is_foreign_key_error(err: sqlite3.Error) -> bool:
    code = getattr(err, "sqlite_errorcode", None)
    return code == sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY or "FOREIGN KEY" in str(err).upper()


# Statements over n rows (for `Store._write_rows`): SQLite prepares each text once.

@cache
def _insert_messages(count: int) -> str:
    """Shares the session (`?1` in every row: no tuple made a row to prefix it); each row is a `Row`."""
    values = ", ".join(["(?1, ?, ?, ?, ?)"] * count)
    return f"INSERT INTO messages(session_id, turn_id, role, content, visibility) VALUES {values}"


@cache
def _insert_ingested(count: int) -> str:
    """Shares the provider (`?1` in every row); each row is a turn."""
    return f"INSERT OR IGNORE INTO ingested(provider, turn_id) VALUES {', '.join(['(?1, ?)'] * count)}"


@cache
def _delete_outbox(count: int) -> str:
    """Shares the provider; each row is a turn."""
    return f"DELETE FROM memory_outbox WHERE provider = ? AND turn_id IN ({', '.join(['?'] * count)})"


class _transaction:
    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db

    def __enter__(self) -> None:
        self.db.execute("BEGIN")

    def __exit__(self, exc_type: object, *_: object) -> None:
        self.db.execute("ROLLBACK" if exc_type else "COMMIT")
