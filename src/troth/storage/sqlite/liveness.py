"""Which processes use a SQLite file, and taking back what dead ones held.

Every ``SqliteService`` (an embedded app, ``troth serve``, a script) holds a *shared* OS
file lock (``flock``) on a sidecar file, ``<db>.lock``, for as long as it has the database
open. The kernel drops a process's locks when it exits, however it exits (``kill -9``
included), so the lock is a liveness signal no crash can leave behind.

An embedded app asks once, at start, whether it is alone: it tries to turn its shared lock
into an *exclusive* one without waiting. That succeeds only when no other process holds
the file open through troth, and then every task still acquired was acquired by a process
that has died (an embedded app holds no task before it starts), and every unicast address
other than its own names a dead process.

Why the probe runs inside a SQLite write transaction: ``flock`` converts a lock by
dropping it and taking the new one, so for an instant the prober holds nothing. Another
process starting in that instant could see itself alone and take back tasks the prober is
about to run. Every probe holds the database's write lock, so probes never overlap; and a
process that is merely running never probes, it only keeps its shared lock.

A file is either one server's or embedded apps', never both at once: a second sidecar,
``<db>.owner``, is held *exclusively* by ``troth serve`` and *shared* by embedded apps
(``hold_owner``), so a second server, or an embedded app on a served file, or a server on a
file embedded apps use, is refused at start with a message that says who holds it. Tools
that only read (a CLI) take neither lock. The one setup this cannot see through: a file
served by ``troth serve`` whose server is down while its remote workers still hold tasks;
an embedded app opened on that file alone would take those tasks back early.
"""

from __future__ import annotations

import logging
import os
import sqlite3

from troth.protocol.addresses import parse_poll

log = logging.getLogger(__name__)

try:
    import fcntl
except ImportError:  # Windows: no flock; leases lapse in their own time there.
    fcntl = None  # type: ignore[assignment]


def hold_shared(path: str) -> int | None:
    """Open ``<path>.lock`` and hold a shared lock on it; the descriptor, or None when the
    database is not a file (``:memory:``) or the platform or file system has no ``flock``
    (then no process on the file can lock it, so none is ever seen alone)."""
    if fcntl is None or path in ("", ":memory:"):
        return None
    try:
        fd = os.open(f"{path}.lock", os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as error:
        log.warning("cannot open %s.lock (%s): dead processes' leases will lapse", path, error)
        return None
    try:
        # Waits only while a starting process probes (milliseconds, see the module doc).
        fcntl.flock(fd, fcntl.LOCK_SH)
    except OSError as error:
        os.close(fd)
        log.warning("cannot lock %s.lock (%s): dead processes' leases will lapse", path, error)
        return None
    except BaseException:
        os.close(fd)
        raise
    return fd


class FileInUseError(RuntimeError):
    """The database file is owned in a way that excludes this process (see ``hold_owner``)."""


def hold_owner(path: str, server: bool, who: str) -> int | None:
    """Take ``<path>.owner``: exclusively for a server, shared for an embedded app.

    ``who`` (a server's pid and address) is written into the file by a server, so that a
    refused process can say who holds it. Raises ``FileInUseError`` when refused; None when
    locks are not available here (no ``flock``, or an in-memory database).
    """
    if fcntl is None or path in ("", ":memory:"):
        return None
    fd = os.open(f"{path}.owner", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, (fcntl.LOCK_EX if server else fcntl.LOCK_SH) | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 512, 0).decode(errors="replace").strip()
        os.close(fd)
        if holder:
            raise FileInUseError(f"{path} is served by {holder}; one server per file") from None
        raise FileInUseError(
            f"{path} is in use by embedded troth apps; a server needs the file to itself"
        ) from None
    except BaseException:
        os.close(fd)
        raise
    if server:
        os.ftruncate(fd, 0)
        os.pwrite(fd, who.encode(), 0)
    return fd


def alone(fd: int) -> bool:
    """Whether no other process holds the lock file; call inside a write transaction.

    Leaves the shared lock held either way.
    """
    assert fcntl is not None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        alone = False
    else:
        alone = True
    # A failed conversion may have dropped the shared lock; nobody holds an exclusive one
    # (only a prober does, and we hold the database's write lock), so this never waits.
    fcntl.flock(fd, fcntl.LOCK_SH)
    return alone


def take_back(conn: sqlite3.Connection, pid: str, now: int) -> None:
    """What dead processes held, made available now; call inside a write transaction.

    Every task timeout is brought forward to ``now``: a lease of an acquired task lapses at
    once (the timeouts loop runs the very transition an expired lease runs: the task is
    pending again and offered), and a pending task's re-offer is not waited for. Unicast
    listeners and messages for any process but ``pid`` are dropped: nobody can receive them.
    """
    conn.execute("UPDATE task_timeouts SET at = ? WHERE at > ?", (now, now))
    rows = conn.execute(
        "SELECT address FROM listeners WHERE address LIKE 'poll://uni@%'"
        " UNION SELECT address FROM outbox WHERE address LIKE 'poll://uni@%'"
    )
    dead = [(address,) for (address,) in rows if foreign(address, pid)]
    conn.executemany("DELETE FROM listeners WHERE address = ?", dead)
    conn.executemany("DELETE FROM outbox WHERE address = ?", dead)


def foreign(address: str, pid: str) -> bool:
    """Whether ``address`` is a unicast poll address naming a process other than ``pid``."""
    poll = parse_poll(address)
    return poll is not None and poll.cast == "uni" and poll.id != pid
