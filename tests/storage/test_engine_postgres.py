"""Every engine behaviour test again, against PostgreSQL: the ``machine`` fixture below
hands them a ``PostgresService`` instead of ``tests/engine``'s SQLite one."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from tests.engine.machine import Machine, R
from tests.engine.test_debounce import *  # noqa: F403
from tests.engine.test_promises import *  # noqa: F403
from tests.engine.test_queues import *  # noqa: F403
from tests.engine.test_schedules import *  # noqa: F403
from tests.engine.test_search import *  # noqa: F403
from tests.engine.test_settlement import *  # noqa: F403
from tests.engine.test_tasks import *  # noqa: F403
from tests.engine.test_timeouts import *  # noqa: F403
from troth.storage.postgres import PostgresService

pytestmark = pytest.mark.pg


class PgMachine(Machine):
    """The engine tests' ``Machine``, driving ``PostgresService`` instead of SQLite."""

    def __init__(self, url: str, retry_timeout: int = R) -> None:
        self.loop = asyncio.new_event_loop()
        self.service = PostgresService(url, retry_timeout=retry_timeout, pool_size=2)


@pytest.fixture
def machine(url: str) -> Iterator[Machine]:
    m = PgMachine(url)
    yield m
    m.close()
