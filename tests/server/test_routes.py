"""Every HTTP route answers as docs/references.md#http-routes says, over real HTTP."""

from __future__ import annotations

import httpx
import pytest

from tests.support.servers import TrothServer

# Slow: a troth serve process per test (tests/conformance covers the server in the fast suite).
pytestmark = pytest.mark.slow

GONE = {"error": "This endpoint is no longer supported. Please update to the latest SDK."}


def test_health_answers_200_with_an_empty_body(server: TrothServer) -> None:
    response = server.http.get("/health")
    assert (response.status_code, response.content) == (200, b"")


def test_ready_answers_200_when_storage_answers(server: TrothServer) -> None:
    response = server.http.get("/ready")
    assert (response.status_code, response.content) == (200, b"")


LEGACY = [
    "/promises",
    "/promises/p1",
    "/promises/a/b",
    "/tasks",
    "/tasks/t1",
    "/schedules",
    "/schedules/s",
]


def test_legacy_rest_paths_answer_410_with_json_for_every_method(server: TrothServer) -> None:
    for path in LEGACY:
        for method in ["GET", "POST", "PUT", "PATCH", "DELETE"]:
            response = server.http.request(method, path)
            assert response.status_code == 410, (method, path)
            assert response.headers["content-type"] == "application/json"
            assert response.json() == GONE


def test_unknown_paths_answer_404(server: TrothServer) -> None:
    for path in ["/nope", "/promisesx", "/poll", "/poll/g", "/poll/g/", "/poll/g/w/x", "/readyz"]:
        assert server.http.get(path).status_code == 404, path


def test_other_methods_on_the_rpc_endpoint_answer_405(server: TrothServer) -> None:
    for method in ["GET", "PUT", "DELETE", "PATCH"]:
        assert server.http.request(method, "/").status_code == 405, method


def test_other_verbs_on_a_poll_path_answer_405(server: TrothServer) -> None:
    assert server.http.put("/poll/g/w1").status_code == 405
    assert server.http.delete("/poll/g/w1").status_code == 405


def test_post_on_a_poll_path_is_an_acknowledgement_and_checks_its_body(
    server: TrothServer,
) -> None:
    # POST acknowledges the frames of an ?ack=1 stream (docs/delivery.md).
    assert server.http.post("/poll/g/w1").status_code == 400
    unknown = server.http.post("/poll/g/w1", json={"stream": "nope", "seen": 1})
    assert unknown.status_code == 404


def test_success_is_http_200_with_the_envelope_echoing_kind_and_corr_id(
    server: TrothServer,
) -> None:
    request = server.envelope("promise.create", {"id": "p1", "timeoutAt": 10**13})
    request["head"]["corrId"] = "my-corr-id"
    response = server.http.post("/", json=request)
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    body = response.json()
    assert body["kind"] == "promise.create"
    assert body["head"] == {"corrId": "my-corr-id", "status": 200, "version": "2026-04-01"}
    assert body["data"]["promise"]["id"] == "p1"


@pytest.mark.parametrize("content_type", ["Application/JSON", "application/json; charset=utf-8"])
def test_json_is_json_in_any_case_and_with_parameters(
    server: TrothServer, content_type: str
) -> None:
    # Other content types are 415: tests/server/test_browsers.py.
    request = server.envelope("promise.get", {"id": "nope"})
    response = server.http.post(
        "/", content=httpx.Request("POST", "/", json=request).content,
        headers={"content-type": content_type},
    )  # fmt: skip
    assert response.status_code == 404


@pytest.mark.parametrize(
    ("kind", "data", "status"),
    [
        ("promise.get", {"id": "missing"}, 404),
        ("task.acquire", {"id": "missing", "version": 0, "pid": "w", "ttl": 1000}, 404),
        ("promise.create", {"id": ""}, 400),
    ],
)
def test_error_statuses_are_the_http_status_and_data_is_a_string(
    server: TrothServer, kind: str, data: dict, status: int
) -> None:
    got, body = server.call(kind, data)
    assert got == status
    assert isinstance(body, str) and body


def test_a_conflict_is_http_409(server: TrothServer) -> None:
    server.create_promise("p1", tags={"resonate:target": "poll://any@g"})
    status, body = server.call("task.acquire", {"id": "p1", "version": 7, "pid": "w", "ttl": 1000})
    assert status == 409
    assert isinstance(body, str)


def test_task_suspend_on_a_settled_promise_is_a_real_http_300(server: TrothServer) -> None:
    create = {
        "kind": "promise.create",
        "head": {"corrId": "inner", "version": "2026-04-01"},
        "data": {"id": "root", "timeoutAt": 10**13, "tags": {"resonate:target": "poll://any@g"}},
    }
    claimed = server.ok("task.create", {"pid": "w1", "ttl": 60000, "action": create})
    version = claimed["task"]["version"]
    server.create_promise("root:1")
    server.ok("promise.settle", {"id": "root:1", "state": "resolved"})
    callback = {
        "kind": "promise.register_callback",
        "head": {"corrId": "inner", "version": "2026-04-01"},
        "data": {"awaited": "root:1", "awaiter": "root"},
    }
    suspend = {"id": "root", "version": version, "actions": [callback]}
    request = server.envelope("task.suspend", suspend)
    response = server.http.post("/", json=request)
    assert response.status_code == 300
    assert response.json()["head"]["status"] == 300
    assert "preload" in response.json()["data"]
