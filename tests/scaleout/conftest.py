"""Fixtures for the scale-out tests: a fresh PostgreSQL database per test, and a cluster of
``troth serve`` processes on it.

The tests need the PostgreSQL cluster that ``TROTH_TEST_PG_URL`` names (start one with
``scripts/pg-cluster.sh start``); without it they are skipped. Each test gets a database of
its own, not only a schema, because ``LISTEN``/``NOTIFY`` channels are per database: the
servers of one test never hear another's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.scaleout._cluster import Cluster
from tests.support.postgres import cluster_url, fresh_database


@pytest.fixture(scope="session")
def pg_url() -> str:
    return cluster_url()


@pytest.fixture
def db_url(pg_url: str) -> Iterator[str]:
    with fresh_database(pg_url, "troth_scaleout") as url:
        yield url


@pytest.fixture
def make_cluster(db_url: str, tmp_path: Path) -> Iterator[Callable[..., Cluster]]:
    """``make_cluster(size, flags)``: servers on this test's database, closed afterwards."""
    clusters: list[Cluster] = []

    def make(size: int = 3, flags: tuple[str, ...] = ()) -> Cluster:
        cluster = Cluster(db_url, tmp_path, size, flags)
        clusters.append(cluster)
        return cluster.start()

    yield make
    for cluster in clusters:
        cluster.close()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test here needs PostgreSQL: marked ``pg`` (``-m "not pg"``)."""
    here = Path(__file__).parent
    for item in items:
        if here in Path(item.path).parents:
            item.add_marker(pytest.mark.pg)
