"""What the SQL backends spell differently, and nothing else.

The tables (``troth.storage.sql.schema``) and the queries (``troth.storage.sql.queries``)
are written once, with ``?`` for a parameter; a ``Dialect`` holds each backend's spelling
of the few things SQLite and PostgreSQL really do differently, and says why where the
choice is ours rather than the database's.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True)
class Dialect:
    name: str
    placeholder: str  # a query parameter, as the driver spells it

    # -- column types -----------------------------------------------------------------------
    key: str  # ids and addresses: compared, ordered and indexed
    text: str
    integer: str  # 64 bits: instants in ms, versions, positions
    small_integer: str
    json: str  # JSON kept as the text written, so key order and escapes survive
    json_is: str  # a CHECK that {column} holds a JSON {type} ('object', 'array')
    json_empty_array: str  # a CHECK that {column} holds []
    tag: str  # the value of tag {key} in the JSON object {column}, as text
    generated: str  # how a generated column is kept
    by_key: str  # the clause that lays a table out in its primary key's order
    outbox_sequence: str  # a statement run before the outbox table is created, or ""
    outbox_seq: str  # the outbox ``seq`` column: fresh on every insert, never reused

    # -- queries ----------------------------------------------------------------------------
    has_tag: str  # a search term: the JSON object {column} holds tag ? with value ?
    set_message: str  # the outbox upsert; it draws a fresh ``seq`` for the row
    lock_shared: str  # the clause that keeps a row read from being deleted until commit

    def sql(self, query: str) -> str:
        """``query``, written with ``?`` parameters, in this dialect. No query of the
        backends holds a ``?`` or ``%`` of its own (psycopg would read ``%`` as a
        parameter's start)."""
        return query if self.placeholder == "?" else query.replace("?", self.placeholder)


# The outbox upsert's columns and parameters; each dialect says how the row is replaced.
_MESSAGE = "INTO outbox (key, kind, address, message) VALUES (?, ?, ?, ?)"

SQLITE = Dialect(
    name="sqlite",
    placeholder="?",
    key="TEXT",
    text="TEXT",
    integer="INTEGER",
    small_integer="INTEGER",
    json="TEXT",
    json_is="json_type({column}) = '{type}'",
    json_empty_array="{column} = '[]'",
    tag="""json_extract({column}, '$."{key}"')""",
    # Computed when read: the indexes over them hold the values, the table need not.
    generated="VIRTUAL",
    # Small rows read by key: stored in the primary key's b-tree, with no rowid beside it.
    by_key=" WITHOUT ROWID",
    outbox_sequence="",
    # AUTOINCREMENT never reuses a seq, not even the largest one after it was deleted.
    outbox_seq="INTEGER PRIMARY KEY AUTOINCREMENT",
    has_tag="EXISTS (SELECT 1 FROM json_each({column}) WHERE key = ? AND value = ?)",
    # REPLACE deletes the superseded row and inserts anew, so the row gets a new seq.
    set_message=f"INSERT OR REPLACE {_MESSAGE}",
    lock_shared="",  # one writer at a time: nothing else deletes it meanwhile
)

POSTGRES = Dialect(
    name="postgres",
    placeholder="%s",
    # Ordered by code point (``ORDER BY id``, search cursors, the firing order of ties), as
    # in SQLite and the oracle, whatever the database's locale.
    key='text COLLATE "C"',
    text="text",
    integer="bigint",
    small_integer="smallint",
    # ``json``, not ``jsonb``: jsonb would reorder keys and refuses the \u0000 escape.
    json="json",
    json_is="json_typeof({column}) = '{type}'",
    json_empty_array="json_array_length({column}) = 0",
    tag="{column} ->> '{key}'",
    generated="STORED",  # PostgreSQL has no virtual generated columns
    by_key="",
    outbox_sequence="CREATE SEQUENCE outbox_seq;\n",
    # An upsert draws from the sequence again, and a reset never rewinds it.
    outbox_seq="bigint PRIMARY KEY DEFAULT nextval('outbox_seq')",
    has_tag="{column} ->> ? = ?",
    # The newer message is anybody's to deliver: the old row's delivery claim goes with it.
    set_message=f"""
INSERT {_MESSAGE}
ON CONFLICT (key) DO UPDATE SET
    seq = nextval('outbox_seq'), kind = excluded.kind,
    address = excluded.address, message = excluded.message,
    claimed_by = NULL, claimed_until = NULL
""",
    # The weakest lock a DELETE waits for; a delivery claim (an update of other columns)
    # does not, so claiming a row is never held up by a sweep reading it.
    lock_shared=" FOR KEY SHARE",
)
