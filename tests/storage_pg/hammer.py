"""The child of the PostgreSQL crash test: the SQLite hammer's workers on PostgresService.

Usage, from the repository root: ``PYTHONPATH=. python tests/storage_pg/hammer.py CONNINFO``.
Prints ``<step> <id>`` after each acknowledged write (see ``tests/storage/hammer.py``) and
runs until killed.
"""

from __future__ import annotations

import asyncio
import itertools
import sys

from tests.storage.hammer import WORKERS, worker
from troth.storage.postgres import PostgresService


async def main(url: str) -> None:
    service = PostgresService(url, pool_size=WORKERS)
    ids = itertools.count()
    await asyncio.gather(*(worker(service, ids) for _ in range(WORKERS)))  # type: ignore[arg-type]


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
