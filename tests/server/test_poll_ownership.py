"""Who may hold a poll id (docs/delivery.md, "Ownership"): an id belongs to the credentials
that connected it. A second connection with other credentials is refused and takes nothing;
one with the same credentials (a worker reconnecting) takes the id over. Connections are
capped per group and per client."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support.servers import BACKENDS, TrothServer, serve
from tests.support.sse import SseClient
from tests.support.tokens import AUD, ISS, Keys, token

# Slow: a troth serve process per test (tests/conformance covers the server in the fast suite).
pytestmark = pytest.mark.slow

TARGET = {"resonate:target": "poll://any@payments/w1"}


@pytest.fixture(params=BACKENDS)
def secured(request: pytest.FixtureRequest, tmp_path: Path, keys: Keys) -> Iterator[TrothServer]:
    flags = (
        *("--auth-publickey", keys.paths["rsa"], "--auth-iss", ISS, "--auth-aud", AUD),
        *("--poll-max-per-client", "3"),
    )
    with serve(request.param, tmp_path, *flags) as server:
        yield server


def worker_token(keys: Keys, sub: str) -> str:
    return token(keys.rsa, sub=sub, prefix="payments")


def admin(keys: Keys) -> str:
    return token(keys.rsa, role="admin")


def executes(server: TrothServer, bearer: str, count: int) -> list[str]:
    ids = [f"payments-{i}" for i in range(count)]
    for id in ids:
        server.ok("promise.create", {"id": id, "timeoutAt": 2**53 - 1, "tags": TARGET}, auth=bearer)
    return ids


def test_a_second_connection_with_other_credentials_is_refused_and_takes_nothing(
    secured: TrothServer,
    keys: Keys,
) -> None:
    real = SseClient(secured.port, "payments", "w1", token=worker_token(keys, "worker-1"))
    assert real.status == 200
    thief = SseClient(secured.port, "payments", "w1", token=worker_token(keys, "intruder"))
    assert thief.status == 409
    assert b"another client" in thief.body
    ids = executes(secured, admin(keys), 10)
    assert sorted(real.message()["data"]["task"]["id"] for _ in ids) == sorted(ids)
    real.close()


def test_the_same_credentials_take_the_id_over_and_the_old_stream_ends(
    secured: TrothServer,
    keys: Keys,
) -> None:
    old = SseClient(secured.port, "payments", "w1", token=worker_token(keys, "worker-1"))
    # A refreshed token of the same subject is the same client.
    new = SseClient(secured.port, "payments", "w1", token=worker_token(keys, "worker-1"))
    assert (old.status, new.status) == (200, 200)
    with pytest.raises(EOFError):
        while True:
            old.chunk(timeout=5)
    ids = executes(secured, admin(keys), 3)
    assert sorted(new.message()["data"]["task"]["id"] for _ in ids) == sorted(ids)
    new.close()


def test_connections_are_capped_per_client(secured: TrothServer, keys: Keys) -> None:
    mine = worker_token(keys, "worker-1")
    streams = [SseClient(secured.port, "payments", f"w{i}", token=mine) for i in range(3)]
    assert [s.status for s in streams] == [200, 200, 200]
    over = SseClient(secured.port, "payments", "w9", token=mine)
    assert over.status == 503 and b"these credentials" in over.body
    other = SseClient(secured.port, "payments", "w9", token=worker_token(keys, "worker-2"))
    assert other.status == 200
    for s in [*streams, other]:
        s.close()


def test_connections_are_capped_per_group(start_server: Callable[..., TrothServer]) -> None:
    server = start_server("--poll-max-per-group", "2")
    streams = [SseClient(server.port, "g", f"w{i}") for i in range(2)]
    over = SseClient(server.port, "g", "w2")
    assert over.status == 503 and b"group 'g'" in over.body
    elsewhere = SseClient(server.port, "h", "w2")
    assert elsewhere.status == 200
    for s in [*streams, elsewhere]:
        s.close()


def test_without_auth_a_reconnecting_worker_takes_its_id_over(
    start_server: Callable[..., TrothServer], tmp_path: Path
) -> None:
    server = start_server()
    old = SseClient(server.port, "g", "w1")
    new = SseClient(server.port, "g", "w1")
    with pytest.raises(EOFError):
        while True:
            old.chunk(timeout=5)
    server.create_promise("p", tags={"resonate:target": "poll://uni@g/w1"})
    assert new.message()["data"]["task"]["id"] == "p"
    new.close()
