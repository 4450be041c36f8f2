"""PostgreSQL's migrations (fresh, existing, concurrent, too new, failing) and its CHECK
constraints."""

from __future__ import annotations

import threading

import psycopg
import pytest

from troth.storage.postgres import MIGRATIONS, SchemaTooNew, migrate
from troth.storage.postgres.connection import connect

pytestmark = pytest.mark.pg


def version(url: str) -> int:
    with connect(url) as conn:
        return conn.execute("SELECT version FROM troth_schema_version").fetchone()[0]


def tables(url: str) -> set[str]:
    with connect(url) as conn:
        rows = conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()"
        ).fetchall()
    return {name for (name,) in rows}


def test_a_fresh_database_is_migrated_to_the_latest_version(fresh_url: str) -> None:
    assert tables(fresh_url) == set()
    with connect(fresh_url) as conn:
        assert migrate(conn) == len(MIGRATIONS)
    assert version(fresh_url) == len(MIGRATIONS)
    assert {"promises", "tasks", "callbacks", "listeners", "outbox"} <= tables(fresh_url)


def test_migrating_an_up_to_date_database_keeps_its_rows(fresh_url: str) -> None:
    with connect(fresh_url) as conn:
        migrate(conn)
        conn.execute(
            "INSERT INTO promises (id, state, param, value, tags, timeout_at, created_at)"
            " VALUES ('p', 'pending', '{}', '{}', '{}', 10, 0)"
        )
        assert migrate(conn) == len(MIGRATIONS)
        assert conn.execute("SELECT id FROM promises").fetchall() == [("p",)]


def test_an_existing_database_gets_only_the_migrations_it_lacks(fresh_url: str) -> None:
    later = (*MIGRATIONS, "CREATE TABLE added_later (x integer)")
    with connect(fresh_url) as conn:
        migrate(conn)
        assert migrate(conn, later) == len(later)
    assert version(fresh_url) == len(later)
    assert "added_later" in tables(fresh_url)


def test_servers_starting_together_migrate_once(fresh_url: str) -> None:
    later = (*MIGRATIONS, "CREATE TABLE added_later (x integer)")
    starters = 8
    barrier = threading.Barrier(starters)
    versions: list[int] = []
    failures: list[BaseException] = []

    def start() -> None:
        try:
            with connect(fresh_url) as conn:
                barrier.wait()
                versions.append(migrate(conn, later))
        except BaseException as error:  # reported below, with every other starter's fate
            failures.append(error)

    threads = [threading.Thread(target=start) for _ in range(starters)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    assert versions == [len(later)] * starters
    assert version(fresh_url) == len(later)


def test_a_failing_migration_leaves_the_previous_version(fresh_url: str) -> None:
    broken = (*MIGRATIONS, "CREATE TABLE half_done (x integer); SELECT no_such_column")
    with connect(fresh_url) as conn:
        migrate(conn)
        with pytest.raises(psycopg.errors.UndefinedColumn):
            migrate(conn, broken)
    assert version(fresh_url) == len(MIGRATIONS)
    assert "half_done" not in tables(fresh_url)


def test_a_database_from_a_newer_troth_is_refused(fresh_url: str) -> None:
    with connect(fresh_url) as conn:
        migrate(conn)
        conn.execute("UPDATE troth_schema_version SET version = version + 1")
        with pytest.raises(SchemaTooNew):
            migrate(conn)


PROMISE = "INSERT INTO promises (id, state, param, value, tags, timeout_at, created_at, settled_at)"


@pytest.mark.parametrize(
    "statement",
    [
        f"{PROMISE} VALUES ('p', 'pending', '{{}}', '{{}}', '{{}}', 10, 0, 5)",
        f"{PROMISE} VALUES ('p', 'resolved', '{{}}', '{{}}', '{{}}', 10, 0, NULL)",
        f"{PROMISE} VALUES ('p', 'done', '{{}}', '{{}}', '{{}}', 10, 0, 5)",
        f"{PROMISE} VALUES ('p', 'pending', '[]', '{{}}', '{{}}', 10, 0, NULL)",
        f"{PROMISE} VALUES ('p', 'pending', '{{}}', '{{}}', '{{}}', -1, 0, NULL)",
        "INSERT INTO tasks VALUES ('q', 'acquired', 1, NULL, NULL, '[]')",
        "INSERT INTO tasks VALUES ('q', 'pending', 1, 5, NULL, '[]')",
        "INSERT INTO tasks VALUES ('q', 'fulfilled', 1, NULL, NULL, '[\"x\"]')",
        "INSERT INTO tasks VALUES ('nobody', 'pending', 0, NULL, NULL, '[]')",
        "INSERT INTO task_timeouts VALUES ('q', 2, 10)",
        "INSERT INTO callbacks VALUES ('q', 'nobody', 1)",
    ],
)
def test_rows_the_machine_cannot_reach_are_refused(fresh_url: str, statement: str) -> None:
    with connect(fresh_url) as conn:
        migrate(conn)
        conn.execute(f"{PROMISE} VALUES ('q', 'pending', '{{}}', '{{}}', '{{}}', 10, 0, NULL)")
        with pytest.raises(psycopg.errors.IntegrityError):
            conn.execute(statement)
