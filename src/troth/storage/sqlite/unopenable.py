"""Why a SQLite database file could not be opened, in words about the path the user gave.

SQLite and the OS report the symptom (``unable to open database file``, or a missing
``<db>.owner`` beside it); an operator needs the cause: a directory that does not exist,
a directory given as the file, a file that is not a database, or permissions. The server
and embedded apps both say ``cannot open the database PATH: <why_unopenable>``.
"""

from __future__ import annotations

import errno
import os
import sqlite3

_DENIED = (errno.EACCES, errno.EPERM, errno.EROFS)


def why_unopenable(path: str, error: BaseException) -> str:
    """The cause of ``error``, raised while opening the database file ``path``."""
    directory = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        return "it is a directory, not a database file"
    if not os.path.exists(directory):
        return f"its directory {directory} does not exist"
    if not os.path.isdir(directory):
        return f"{directory} is not a directory"
    denied = isinstance(error, OSError) and error.errno in _DENIED
    if denied or not _may_write(path, directory):
        # EACCES or EROFS ("Read-only file system"), else what the access check found.
        what = error.strerror if isinstance(error, OSError) and denied else None
        return (
            f"{what or 'permission denied'}: troth must read and write the file and create"
            f" files beside it in {directory} (-wal, -shm, .owner, .lock)"
        )
    if isinstance(error, sqlite3.DatabaseError) and "not a database" in str(error):
        return "the file is not a SQLite database"
    return str(error)


def _may_write(path: str, directory: str) -> bool:
    file_ok = not os.path.exists(path) or os.access(path, os.R_OK | os.W_OK)
    return file_ok and os.access(directory, os.W_OK | os.X_OK)
