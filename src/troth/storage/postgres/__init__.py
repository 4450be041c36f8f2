"""troth.storage.postgres: the backend for several servers sharing one PostgreSQL database.

``PostgresService`` serves the ``troth.storage.service.Service`` interface over a pool of
psycopg connections; ``PostgresStore`` is the engine's ``Store`` over one transaction;
``schema`` holds the tables and their versioned migrations; ``locks`` states the locking
rule that keeps concurrent transactions correct.
"""

from troth.storage.postgres.schema import MIGRATIONS, SchemaTooNew, migrate
from troth.storage.postgres.service import PostgresService
from troth.storage.postgres.store import PostgresStore

__all__ = ["MIGRATIONS", "PostgresService", "PostgresStore", "SchemaTooNew", "migrate"]
