"""``GET /api/executions`` and ``GET /api/executions/{id}`` on a real ``troth serve``
(SQLite and PostgreSQL) with real worker processes: the list with its filters and pages,
an execution's tree with a retried step's attempts and error and an rpc child; every bad
parameter a 400 that names it, an unknown id a 404; auth as on the protocol."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.servers import BACKENDS, TrothServer, serve
from tests.support.shop import GROUP, shop_worker
from tests.support.tokens import AUD, ISS, Keys, token
from tests.support.waiting import eventually
from troth import Troth

pytestmark = pytest.mark.slow  # a server and a worker process per backend


def start(url: str, id: str, fn: str, *args: Any) -> None:
    async def go() -> None:
        app = Troth(url=url)
        try:
            await app.options(target=GROUP).rpc(id, fn, *args).started()
        finally:
            await app.stop()

    asyncio.run(go())


@pytest.fixture(scope="module", params=BACKENDS)
def shop(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[TrothServer]:
    folder = tmp_path_factory.mktemp("api")
    with serve(request.param, folder) as server:
        process = shop_worker(folder, url=server.url)
        yield server
        process.terminate()
        process.wait(30)


def get(server: TrothServer, path: str, **params: str) -> httpx.Response:
    return server.http.get(path, params=params)


def tree_of(server: TrothServer, id: str) -> dict[str, Any]:
    response = get(server, f"/api/executions/{id}")
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "application/json"
    return response.json()["tree"]


def test_the_tree_shows_a_retried_step_and_an_rpc_child(shop: TrothServer) -> None:
    start(shop.url, "order-1", "checkout", 1)

    def retried() -> dict[str, Any] | None:
        tree = tree_of(shop, "order-1")
        steps = [c for c in tree["children"] if c["kind"] == "run"]
        return tree if steps and (steps[0]["attempts"] or 0) >= 3 else None

    tree = eventually(retried, timeout=30)
    assert (tree["kind"], tree["function"], tree["state"]) == ("root", "checkout", "pending")
    assert tree["param"]["decoded"] and tree["param"]["data"]["args"] == [1]
    kinds = {c["kind"]: c for c in tree["children"]}
    assert sorted(kinds) == ["rpc", "run"]  # not the cancel promise made at suspend: unasked
    rpc, step = kinds["rpc"], kinds["run"]
    assert (rpc["kind"], rpc["function"], rpc["state"]) == ("rpc", "reserve", "resolved")
    assert rpc["value"]["data"] == "reserved sku-1"
    assert rpc["duration_ms"] is not None and rpc["duration_ms"] >= 0
    assert (step["kind"], step["function"], step["state"]) == ("run", "charge_card", "pending")
    assert step["last_error"] == "ConnectionError: card service down for order 1"
    failed = [c for c in step["children"] if c["kind"] == "attempt"]
    assert len(failed) == step["attempts"] - 1 >= 2
    # The newest may be caught between its create and its rejection.
    assert [c["state"] for c in failed[:-1]] == ["rejected"] * (len(failed) - 1)
    assert failed[-1]["state"] in ("rejected", "pending")


def test_the_list_filters_and_pages(shop: TrothServer) -> None:
    for n in range(5):
        start(shop.url, f"sum-{n}", "add", n, n)
    start(shop.url, "nap-1", "nap", 60)

    def added() -> list[dict[str, Any]] | None:
        page = get(shop, "/api/executions", function="add", state="resolved").json()
        return page["executions"] if len(page["executions"]) == 5 else None

    rows = eventually(added, timeout=30)
    assert all(a["created_on"] >= b["created_on"] for a, b in itertools.pairwise(rows))
    assert {r["function"] for r in rows} == {"add"}
    napping = get(shop, "/api/executions", function="nap").json()["executions"]
    assert [(r["id"], r["state"]) for r in napping] == [("nap-1", "pending")]

    seen: list[str] = []
    params = {"function": "add", "limit": "2"}
    while True:
        page = get(shop, "/api/executions", **params).json()
        seen += [r["id"] for r in page["executions"]]
        assert len(page["executions"]) <= 2
        if page["next"] is None:
            break
        params["cursor"] = page["next"]
    assert sorted(seen) == [f"sum-{n}" for n in range(5)]

    since = max(r["created_on"] for r in rows)
    recent = get(shop, "/api/executions", since=str(since)).json()["executions"]
    assert all(r["created_on"] >= since for r in recent) and recent


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"state": "running"}, "state"),
        ({"limit": "0"}, "limit"),
        ({"limit": "ten"}, "limit"),
        ({"since": "yesterday"}, "since"),
        ({"tag": "nocolon"}, "tag"),
        ({"cursor": "x"}, "cursor"),
        ({"sort": "id"}, "sort"),
    ],
)
def test_a_bad_parameter_is_a_400_naming_it(
    shop: TrothServer, params: dict[str, str], field: str
) -> None:
    response = get(shop, "/api/executions", **params)
    assert response.status_code == 400
    assert response.json()["field"] == field
    assert response.json()["error"].startswith(f"{field}: ")


def test_a_parameter_given_twice_is_a_400(shop: TrothServer) -> None:
    response = shop.http.get("/api/executions?state=pending&state=resolved")
    assert (response.status_code, response.json()["field"]) == (400, "state")


def test_unknown_ids_paths_and_verbs(shop: TrothServer) -> None:
    missing = get(shop, "/api/executions/no-such-order")
    assert missing.status_code == 404
    assert missing.json()["error"] == "no execution 'no-such-order'"
    assert get(shop, "/api/executions/a/b").status_code == 404
    assert shop.http.post("/api/executions", json={}).status_code == 405


def test_auth_is_the_protocols(tmp_path: Path, keys: Keys) -> None:
    flags = ("--auth-publickey", keys.paths["rsa"], "--auth-iss", ISS, "--auth-aud", AUD)
    with serve("sqlite", tmp_path, *flags, env={"TROTH_AUTH_TOKEN": "s3cret"}) as server:
        admin = {"Authorization": "Bearer s3cret"}
        for id in ("acme-1", "other-1"):
            server.http.post("/", headers=admin, json=server.envelope(
                "promise.create",
                {"id": id, "timeoutAt": 10**13, "tags": {"resonate:target": "poll://any@x"}},
            ))  # fmt: skip
        assert server.http.get("/api/executions").status_code == 401
        listed = server.http.get("/api/executions", headers=admin).json()["executions"]
        assert sorted(r["id"] for r in listed) == ["acme-1", "other-1"]

        scoped = {"Authorization": f"Bearer {token(keys.rsa, prefix='acme-')}"}
        assert server.http.get("/api/executions", headers=scoped).status_code == 403
        assert server.http.get("/api/executions/acme-1", headers=scoped).status_code == 200
        assert server.http.get("/api/executions/other-1", headers=scoped).status_code == 403
