"""The reference's store hands a closed in-memory database on, emptied, to the next store of the
process (`reference_impl.tables._recycle`): nothing of one scenario may reach the next."""

from __future__ import annotations

import sqlite3

import pytest

from reference_impl import tables
from reference_impl.store import Store
from reference_impl.tables import Row


def _used_store() -> Store:
    store = Store(lambda: 0)
    session = store.new_session_id()
    store.upsert_session(session, "alice", None, "chat", 0)
    store.append(session, [Row("t1", "user", "[t1] hi", "visible"), Row("t1", "assistant", "[t1] hello", "visible")])
    store.record_end(session, "idle")
    store.mark_ingested("recorder", ["t1"])
    return store


def test_the_next_store_starts_empty_with_fresh_counters_and_foreign_keys_on() -> None:
    tables._SPARE.clear()
    first = _used_store()
    db = first.db
    first.close()
    assert [db] == tables._SPARE
    second = Store(lambda: 0)
    assert second.db is db  # reused: its statements prepared already
    assert second.read_messages() == {} and second.all_sessions() == [] and second.ingested("recorder") == set()
    assert second.unfinished_ends() == [] and second.read_routes() == []
    assert second.new_session_id() == "s1"
    assert second.db.execute("PRAGMA foreign_keys").fetchone()[0] == 1
    with pytest.raises(sqlite3.IntegrityError):  # no session row s1 yet: the foreign key refuses it
        second.append("s1", [Row("t1", "user", "[t1] hi", "visible")])


def test_a_database_whose_schema_moved_is_closed_not_handed_on() -> None:
    tables._SPARE.clear()
    store = _used_store()
    store.db.execute("CREATE TABLE extra (x)")
    store.close()
    assert tables._SPARE == []
