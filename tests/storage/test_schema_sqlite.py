"""SQLite's migrations and the single-row invariants its schema enforces."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from troth.engine import Task
from troth.protocol.records import PromiseRecord, PromiseState, TaskState, Value
from troth.storage.sqlite import MIGRATIONS, SchemaTooNew, SqliteStore, connect, migrate

PROMISE = (
    "INSERT INTO promises (id, state, param, value, tags, timeout_at, created_at, settled_at)"
    " VALUES (?, ?, '{}', '{}', '{}', 10, 0, ?)"
)


def version(conn: sqlite3.Connection) -> int:
    return conn.execute("PRAGMA user_version").fetchone()[0]


def tables(conn: sqlite3.Connection) -> set[str]:
    rows = conn.execute("SELECT name FROM sqlite_schema WHERE type = 'table'")
    return {name for (name,) in rows}


@pytest.fixture
def conn(tmp_path: Path):
    conn = connect(str(tmp_path / "t.db"))
    migrate(conn)
    yield conn
    conn.close()


def test_a_fresh_file_gets_every_migration(tmp_path: Path) -> None:
    conn = connect(str(tmp_path / "t.db"))
    assert version(conn) == 0
    assert migrate(conn) == len(MIGRATIONS) == version(conn)
    assert {"promises", "tasks", "callbacks", "outbox", "task_timeouts"} <= tables(conn)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL


def test_an_existing_file_gets_only_the_new_migrations_and_keeps_its_rows(
    tmp_path: Path,
) -> None:
    path = str(tmp_path / "t.db")
    conn = connect(path)
    migrate(conn)
    conn.execute(PROMISE, ("p", "pending", None))
    conn.close()

    conn = connect(path)
    newer = (*MIGRATIONS, "CREATE TABLE extra (x INTEGER);\nINSERT INTO extra VALUES (1);")
    assert migrate(conn, newer) == len(newer)
    assert migrate(conn, newer) == len(newer)  # nothing left to do: a no-op
    assert conn.execute("SELECT count(*) FROM extra").fetchone()[0] == 1
    assert conn.execute("SELECT id FROM promises").fetchall() == [("p",)]
    conn.close()


def test_a_failing_migration_leaves_the_file_at_its_old_version(tmp_path: Path) -> None:
    conn = connect(str(tmp_path / "t.db"))
    migrate(conn)
    broken = (*MIGRATIONS, "CREATE TABLE half (x INTEGER);\nTHIS IS NOT SQL;")
    with pytest.raises(sqlite3.OperationalError):
        migrate(conn, broken)
    assert version(conn) == len(MIGRATIONS)
    assert "half" not in tables(conn)
    assert not conn.in_transaction


def test_a_file_from_a_newer_troth_is_refused(tmp_path: Path) -> None:
    conn = connect(str(tmp_path / "t.db"))
    conn.execute(f"PRAGMA user_version = {len(MIGRATIONS) + 1}")
    with pytest.raises(SchemaTooNew):
        migrate(conn)


@pytest.mark.parametrize(
    ("state", "settled_at"), [("pending", 5), ("resolved", None), ("unknown", None)]
)
def test_a_promise_must_be_settled_exactly_when_it_has_a_settled_at(
    conn: sqlite3.Connection, state: str, settled_at: int | None
) -> None:
    with pytest.raises(sqlite3.IntegrityError):
        conn.execute(PROMISE, ("p", state, settled_at))


@pytest.mark.parametrize(
    ("state", "version", "ttl", "pid", "resumes"),
    [
        ("acquired", 1, None, None, "[]"),  # an acquired task has a holder and a lease
        ("pending", 1, 100, "w", "[]"),  # only an acquired task has one
        ("acquired", 1, 100, None, "[]"),
        ("pending", -1, None, None, "[]"),  # versions start at 0
        ("fulfilled", 1, None, None, '["x"]'),  # a fulfilled task buffers nothing
        ("acquired", 1, -5, "w", "[]"),
    ],
)
def test_a_task_row_must_be_one_the_machine_can_reach(
    conn: sqlite3.Connection,
    state: str,
    version: int,
    ttl: int | None,
    pid: str | None,
    resumes: str,
) -> None:
    conn.execute(PROMISE, ("t", "pending", None))
    with pytest.raises(sqlite3.IntegrityError):
        conn.execute(
            "INSERT INTO tasks (id, state, version, ttl, pid, resumes) VALUES (?, ?, ?, ?, ?, ?)",
            ("t", state, version, ttl, pid, resumes),
        )


def test_a_task_needs_its_promise(conn: sqlite3.Connection) -> None:
    with pytest.raises(sqlite3.IntegrityError):
        conn.execute(
            "INSERT INTO tasks (id, state, version, resumes) VALUES ('t', 'pending', 0, '[]')"
        )


def test_a_check_violation_through_the_store_raises_and_writes_nothing(
    conn: sqlite3.Connection,
) -> None:
    store = SqliteStore(conn, 5000)
    conn.execute("BEGIN")
    store.set_promise(PromiseRecord("t", PromiseState.PENDING, Value(), Value(), {}, 1000, 0))
    with pytest.raises(sqlite3.IntegrityError):
        store.set_task(Task("t", TaskState.ACQUIRED, 1))  # acquired without a holder
    assert store.get_task("t") is None
    conn.execute("ROLLBACK")
