"""What the shared SQL needs of a connection; sqlite3's and psycopg's both answer it."""

from __future__ import annotations

from typing import Any, Protocol


class Cursor(Protocol):
    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...


class Connection(Protocol):
    def execute(self, query: Any, params: Any = ..., /) -> Cursor: ...
