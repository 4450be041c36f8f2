"""PostgreSQL's service alone: a pool that outlives its connections, and its settings."""

from __future__ import annotations

import asyncio

import pytest
from psycopg.conninfo import make_conninfo

from tests.support.storage import get
from troth.storage.postgres import PostgresService
from troth.storage.postgres.connection import connect

pytestmark = pytest.mark.pg


def test_a_lost_connection_is_replaced_before_a_request_draws_it(url: str) -> None:
    """After a database restart every idle pooled connection is dead; the pool checks a
    connection before handing it out, so no request fails on one (it used to fail one)."""

    async def scenario() -> None:
        service = PostgresService(make_conninfo(url, application_name="doomed"), pool_size=1)
        assert await service.ping()
        with connect(url) as conn:
            conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                " WHERE application_name = 'doomed'"
            )
        assert await service.ping()
        assert (await service.handle(get("anything"), 0)).status == 404
        await service.close()

    asyncio.run(scenario())


def test_bad_settings_are_refused(url: str) -> None:
    with pytest.raises(ValueError):
        PostgresService(url, retry_timeout=0)
    with pytest.raises(ValueError):
        PostgresService(url, pool_size=0)
