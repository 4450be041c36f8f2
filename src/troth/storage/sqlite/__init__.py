"""troth.storage.sqlite: the embedded default backend, one SQLite file in WAL mode.

``SqliteService`` serves the ``troth.storage.service.Service`` interface with a single
group-committing writer and a pool of readers; ``SqliteStore`` is the engine's ``Store``
over a connection; ``schema`` holds the tables and their versioned migrations.
"""

from troth.storage.sqlite.schema import MIGRATIONS, SchemaTooNew, connect, migrate
from troth.storage.sqlite.service import SqliteService
from troth.storage.sqlite.store import SqliteStore

__all__ = ["MIGRATIONS", "SchemaTooNew", "SqliteService", "SqliteStore", "connect", "migrate"]
