"""The tables, written once for both SQL backends, and what else their schemas share.

``tables`` is the first migration of each backend (``troth.storage.sqlite.schema``,
``troth.storage.postgres.schema``), in its dialect; the later migrations are the backends'
own. Never edit a released migration: append a new one to each backend's list.

Layout choices, each for a query the server runs on every request or sweep:

- a task shares its promise's id (the machine keys both by it), so no join key is needed;
- callbacks are keyed by (awaited, awaiter) and indexed by awaiter, so settling reads its
  own callbacks and the settlement scrub removes its registrations in O(rows affected);
  ``position`` keeps Lean's registration order;
- the generated ``branch`` and ``origin`` columns index the two tags the server queries
  (preload by branch; a search by origin, with which a client pages through an
  execution's call tree) without a table of tags;
- each timeout table is indexed by deadline in firing order, so finding the next due
  timeout reads one index entry per table;
- the outbox ``seq`` is fresh for every version of a message (an upsert replaces the row
  and draws a new one), and never reused: acknowledging an old delivery cannot delete the
  message that superseded it.

CHECK constraints hold the invariants a single row can state; a handler that would break
one fails alone instead of committing a state the machine cannot reach.
"""

from __future__ import annotations

from troth.storage.sql import debounces, queues
from troth.storage.sql.connection import Connection
from troth.storage.sql.dialect import Dialect


def tables(d: Dialect) -> str:
    """The first migration: every table and index, in dialect ``d``."""

    def json_is(column: str, type: str) -> str:
        return d.json_is.format(column=column, type=type)

    def tag(key: str) -> str:
        return d.tag.format(column="tags", key=key)

    return f"""
CREATE TABLE promises (
    id          {d.key} PRIMARY KEY,
    state       {d.text} NOT NULL CHECK (state IN
                    ('pending', 'resolved', 'rejected', 'rejected_canceled', 'rejected_timedout')),
    param       {d.json} NOT NULL CHECK ({json_is("param", "object")}),
    value       {d.json} NOT NULL CHECK ({json_is("value", "object")}),
    tags        {d.json} NOT NULL CHECK ({json_is("tags", "object")}),
    timeout_at  {d.integer} NOT NULL CHECK (timeout_at >= 0),
    created_at  {d.integer} NOT NULL CHECK (created_at >= 0),
    settled_at  {d.integer} CHECK (settled_at >= 0),
    branch      {d.key} GENERATED ALWAYS AS ({tag("resonate:branch")}) {d.generated},
    origin      {d.key} GENERATED ALWAYS AS ({tag("resonate:origin")}) {d.generated},
    CHECK ((state = 'pending') = (settled_at IS NULL))
);
CREATE INDEX promises_by_state ON promises (state, id);
CREATE INDEX promises_by_branch ON promises (branch, id) WHERE branch IS NOT NULL;
CREATE INDEX promises_by_origin ON promises (origin, id) WHERE origin IS NOT NULL;

CREATE TABLE tasks (
    id       {d.key} PRIMARY KEY REFERENCES promises (id),
    state    {d.text} NOT NULL CHECK (state IN
                 ('pending', 'acquired', 'suspended', 'halted', 'fulfilled')),
    version  {d.integer} NOT NULL CHECK (version >= 0),
    ttl      {d.integer} CHECK (ttl >= 0),
    pid      {d.text},
    resumes  {d.json} NOT NULL CHECK ({json_is("resumes", "array")}),
    CHECK ((state = 'acquired') = (pid IS NOT NULL)),
    CHECK ((pid IS NULL) = (ttl IS NULL)),
    CHECK (state <> 'fulfilled' OR {d.json_empty_array.format(column="resumes")})
);
CREATE INDEX tasks_by_state ON tasks (state, id);

CREATE TABLE callbacks (
    awaited   {d.key} NOT NULL REFERENCES promises (id),
    awaiter   {d.key} NOT NULL REFERENCES promises (id),
    position  {d.integer} NOT NULL,
    PRIMARY KEY (awaited, awaiter)
){d.by_key};
CREATE INDEX callbacks_by_awaiter ON callbacks (awaiter);

CREATE TABLE listeners (
    awaited   {d.key} NOT NULL REFERENCES promises (id),
    address   {d.key} NOT NULL,
    position  {d.integer} NOT NULL,
    PRIMARY KEY (awaited, address)
){d.by_key};

CREATE TABLE schedules (
    id               {d.key} PRIMARY KEY,
    cron             {d.text} NOT NULL,
    promise_id       {d.text} NOT NULL,
    promise_timeout  {d.integer} NOT NULL CHECK (promise_timeout >= 0),
    promise_param    {d.json} NOT NULL CHECK ({json_is("promise_param", "object")}),
    promise_tags     {d.json} NOT NULL CHECK ({json_is("promise_tags", "object")}),
    created_at       {d.integer} NOT NULL,
    next_run_at      {d.integer} NOT NULL,
    last_run_at      {d.integer},
    CHECK (last_run_at IS NULL OR last_run_at < next_run_at)
);

CREATE TABLE promise_timeouts (
    id  {d.key} PRIMARY KEY REFERENCES promises (id),
    at  {d.integer} NOT NULL
){d.by_key};
CREATE INDEX promise_timeouts_due ON promise_timeouts (at, id);

CREATE TABLE task_timeouts (
    id    {d.key} NOT NULL REFERENCES tasks (id),
    kind  {d.small_integer} NOT NULL CHECK (kind IN (0, 1)),  -- 0 = retry, 1 = lease
    at    {d.integer} NOT NULL,
    PRIMARY KEY (id, kind)
){d.by_key};
CREATE INDEX task_timeouts_due ON task_timeouts (at, kind, id);

-- No reference to schedules: Lean deletes a schedule before its timeout.
CREATE TABLE schedule_timeouts (
    id  {d.key} PRIMARY KEY,
    at  {d.integer} NOT NULL
){d.by_key};
CREATE INDEX schedule_timeouts_due ON schedule_timeouts (at, id);

{d.outbox_sequence}CREATE TABLE outbox (
    seq      {d.outbox_seq},
    key      {d.text} NOT NULL UNIQUE,  -- the machine's outbox key, as a JSON array
    kind     {d.text} NOT NULL CHECK (kind IN ('execute', 'unblock')),
    address  {d.text} NOT NULL,
    message  {d.json} NOT NULL CHECK ({json_is("message", "object")})
);
"""


def deferred_retries(d: Dialect) -> str:
    """A later migration of both backends: a retry the server's timeouts loop deferred
    (``troth.engine.timeouts.defer_idle_retry``) is marked, and the deadline index leads
    with the mark, so the loop reads the head of the undeferred entries alone however many
    are deferred, and a sweep that fires everything (``debug.tick``) reads both heads."""
    return f"""
ALTER TABLE task_timeouts ADD COLUMN deferred {d.small_integer} NOT NULL DEFAULT 0
    CHECK (deferred IN (0, 1));
DROP INDEX task_timeouts_due;
CREATE INDEX task_timeouts_due ON task_timeouts (deferred, at, kind, id);
"""


# Children before parents, so references hold at every step of a reset.
TABLES: tuple[str, ...] = (
    *debounces.TABLES,
    *queues.TABLES,
    "outbox",
    "schedule_timeouts",
    "task_timeouts",
    "promise_timeouts",
    "schedules",
    "listeners",
    "callbacks",
    "tasks",
    "promises",
)


def clear(conn: Connection) -> None:
    """Delete every row (``debug.reset``), in the caller's transaction. DELETE rather than
    PostgreSQL's TRUNCATE: a reset is for tests and small tables, where TRUNCATE's new files
    and their fsyncs cost far more. The outbox's seq counter is kept on purpose: a delivery
    read before the reset must not match a message enqueued after it."""
    for table in TABLES:
        conn.execute(f"DELETE FROM {table}")
