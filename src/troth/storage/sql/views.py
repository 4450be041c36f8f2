"""The operator's reads (``troth.views``), written once for both SQL backends: the columns
and indexes they read along (each backend's migration ``migration``), and the queries.

- The executions list walks ``promises_roots`` (or its ``by_state``/``by_func`` sisters)
  from the newest creation instant down, and resumes each page where the last stopped
  (a row-value comparison on the index's own order), so every page costs its own rows
  however deep it is. A root is a promise with no ``resonate:parent`` (the official SDKs')
  or its own id as parent (troth's); the generated ``parent`` and ``func`` columns hold the
  two tags so the partial indexes can name them. A tag filter has no index (tags are
  open-ended): it filters the rows the walk meets.
- An execution's promises (``family``) are one range of the ``origin`` index: every
  promise of a call tree carries its root as ``resonate:origin`` (the reference CLI's
  ``resonate tree`` reads the same), and the subtree of a node is the id range below it.
"""

from __future__ import annotations

from troth.protocol.conventions import FUNC_TAG
from troth.protocol.ids import LINEAGE_SEP, ORIGIN_SEP
from troth.protocol.records import ORIGIN, PARENT, PromiseRecord, TaskState
from troth.storage.codec import PROMISE_COLUMNS, promise
from troth.storage.sql.connection import Connection
from troth.storage.sql.dialect import Dialect
from troth.views.executions import HALTED, Cursor, Execution, ExecutionQuery, Page

_ROOT = "(parent IS NULL OR parent = id)"


def migration(d: Dialect) -> str:
    """The views' columns and indexes, in dialect ``d``. SQLite adds virtual columns (no
    rewrite of the table); PostgreSQL has only stored ones, so its migration rewrites the
    promises table once."""

    def tag(key: str) -> str:
        return d.tag.format(column="tags", key=key)

    return f"""
ALTER TABLE promises ADD COLUMN parent {d.key} GENERATED ALWAYS AS ({tag(PARENT)}) {d.generated};
ALTER TABLE promises ADD COLUMN func {d.key} GENERATED ALWAYS AS ({tag(FUNC_TAG)}) {d.generated};
CREATE INDEX promises_roots ON promises (created_at, id) WHERE {_ROOT};
CREATE INDEX promises_roots_by_state ON promises (state, created_at, id) WHERE {_ROOT};
CREATE INDEX promises_roots_by_func ON promises (func, created_at, id)
    WHERE func IS NOT NULL AND {_ROOT};
"""


_COLUMNS = ", ".join(f"p.{column}" for column in PROMISE_COLUMNS.split(", "))


def executions_query(d: Dialect, query: ExecutionQuery) -> tuple[str, tuple[object, ...]]:
    """The page ``query`` asks for, one row more than its limit (there is a next page if
    that row comes back); each filter is written so the planner can match an index."""
    where = [_ROOT.replace("parent", "p.parent").replace("= id", "= p.id")]
    args: list[object] = []
    if query.state == HALTED:
        where.append("t.state = ?")
        args.append(TaskState.HALTED.value)
    elif query.state is not None:
        where.append("p.state = ?")
        args.append(query.state)
    if query.function is not None:
        where += ["p.func IS NOT NULL", "p.func = ?"]
        args.append(query.function)
    if query.tag is not None:
        where.append(d.has_tag.format(column="p.tags"))
        args += list(query.tag)
    if query.since_ms is not None:
        where.append("p.created_at >= ?")
        args.append(query.since_ms)
    if query.until_ms is not None:
        where.append("p.created_at < ?")
        args.append(query.until_ms)
    if query.cursor is not None:
        where.append("(p.created_at, p.id) < (?, ?)")
        args += [query.cursor.created_on, query.cursor.id]
    sql = (
        f"SELECT {_COLUMNS}, t.state FROM promises p JOIN tasks t ON t.id = p.id"
        f" WHERE {' AND '.join(where)} ORDER BY p.created_at DESC, p.id DESC LIMIT ?"
    )
    return d.sql(sql), (*args, query.limit + 1)


def executions(conn: Connection, d: Dialect, query: ExecutionQuery) -> Page:
    sql, args = executions_query(d, query)
    rows = conn.execute(sql, args).fetchall()
    found = [Execution.of(promise(row[:-1]), TaskState(row[-1])) for row in rows]
    if len(found) <= query.limit:
        return Page(found, None)
    last = found[query.limit - 1]
    return Page(found[: query.limit], Cursor(last.created_on, last.id))


def family(conn: Connection, d: Dialect, id: str) -> list[PromiseRecord]:
    """Promise ``id`` and every promise below it in its call tree, in id order; [] if
    there is no such promise."""
    row = conn.execute(d.sql(f"SELECT {PROMISE_COLUMNS} FROM promises WHERE id = ?"), (id,))
    found = row.fetchone()
    if found is None:
        return []
    root = promise(found)
    sep = LINEAGE_SEP if ORIGIN_SEP in id else ORIGIN_SEP
    below = d.sql(
        f"SELECT {PROMISE_COLUMNS} FROM promises"
        " WHERE origin = ? AND id >= ? AND id < ? ORDER BY id"
    )
    bounds = (root.tags.get(ORIGIN) or id, id + sep, id + chr(ord(sep) + 1))
    return [root, *(promise(r) for r in conn.execute(below, bounds).fetchall())]


_CHUNK = 500  # ids per statement: far below either database's limit on parameters


def task_states(conn: Connection, d: Dialect, ids: list[str]) -> dict[str, TaskState]:
    """The state of the task of each promise of ``ids`` that has one (by primary key)."""
    found: dict[str, TaskState] = {}
    for start in range(0, len(ids), _CHUNK):
        chunk = ids[start : start + _CHUNK]
        marks = ", ".join("?" for _ in chunk)
        rows = conn.execute(d.sql(f"SELECT id, state FROM tasks WHERE id IN ({marks})"), chunk)
        found.update((id, TaskState(state)) for id, state in rows.fetchall())
    return found
