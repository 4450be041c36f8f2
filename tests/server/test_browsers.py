"""Web pages of other origins, and what a failure shows, as attacks on a real ``troth serve``.

Before: ``Content-Type`` was not read, so a ``text/plain`` POST from any page (one a browser
sends across origins without asking) settled a promise; and a 500 answered the exception's
text, which can show SQL, stored data and file paths.
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import psycopg
import pytest

from tests.support.servers import BACKENDS, TrothServer, serve

# Slow: a troth serve process per test (tests/conformance covers the server in the fast suite).
pytestmark = pytest.mark.slow

EVIL = "http://evil.example"
APP = "https://app.example"
SECRET = "secret-internals-7f3a"


@pytest.fixture(params=BACKENDS)
def backend_server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[TrothServer]:
    with serve(request.param, tmp_path) as server:
        yield server


def settle_body(server: TrothServer, id: str) -> bytes:
    return json.dumps(server.envelope("promise.settle", {"id": id, "state": "resolved"})).encode()


def cors_headers(response: httpx.Response) -> dict[str, str]:
    return {k: v for k, v in response.headers.items() if k.startswith("access-control-")}


# -- content type ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "content_type",
    ["text/plain", "text/plain;charset=UTF-8", "application/x-www-form-urlencoded", None],
)
def test_a_cross_origin_post_that_is_not_json_is_415_and_settles_nothing(
    backend_server: TrothServer, content_type: str | None
) -> None:
    server = backend_server
    server.create_promise("payment")
    headers = {"origin": EVIL}
    if content_type is not None:
        headers["content-type"] = content_type
    # What a page's fetch(url, {method: "POST", body}) sends without a preflight.
    response = server.http.post("/", content=settle_body(server, "payment"), headers=headers)
    assert response.status_code == 415
    assert response.text == "Unsupported Content-Type: POST / takes application/json"
    assert cors_headers(response) == {}
    assert server.ok("promise.get", {"id": "payment"})["promise"]["state"] == "pending"
    assert server.http.get("/health").status_code == 200


# -- CORS ------------------------------------------------------------------------------------


def preflight(server: TrothServer, origin: str) -> httpx.Response:
    return server.http.options(
        "/",
        headers={
            "origin": origin,
            "access-control-request-method": "POST",
            "access-control-request-headers": "content-type,authorization",
        },
    )


def post_json_from(server: TrothServer, origin: str) -> httpx.Response:
    request = server.envelope("promise.get", {"id": "nope"})
    return server.http.post("/", json=request, headers={"origin": origin})


def test_no_cors_headers_by_default(start_server: Callable[..., TrothServer]) -> None:
    server = start_server()
    answer = preflight(server, EVIL)
    assert answer.status_code == 405 and cors_headers(answer) == {}
    answer = preflight(server, APP)
    assert answer.status_code == 405 and cors_headers(answer) == {}
    # A non-browser client may still call; a page could not read the answer.
    answer = post_json_from(server, EVIL)
    assert answer.status_code == 404 and cors_headers(answer) == {}


def test_cors_headers_only_for_the_configured_origins(
    start_server: Callable[..., TrothServer],
) -> None:
    server = start_server("--cors-origins", f"{APP}, http://localhost:3000/")
    answer = preflight(server, APP)
    assert answer.status_code == 204
    assert answer.headers["access-control-allow-origin"] == APP
    assert answer.headers["vary"] == "origin"
    assert "POST" in answer.headers["access-control-allow-methods"]
    allowed = answer.headers["access-control-allow-headers"]
    assert "content-type" in allowed and "authorization" in allowed
    answer = post_json_from(server, APP)
    assert answer.status_code == 404
    assert answer.headers["access-control-allow-origin"] == APP
    assert post_json_from(server, "http://localhost:3000").status_code == 404
    assert "access-control-allow-origin" in post_json_from(server, "http://localhost:3000").headers

    # Any other origin: no preflight, and nothing in the answers that lets a page read them.
    for origin in (EVIL, "https://app.example.evil.example", "null"):
        answer = preflight(server, origin)
        assert answer.status_code == 405 and cors_headers(answer) == {}, origin
        assert cors_headers(post_json_from(server, origin)) == {}, origin

    # The SSE stream of an allowed page is readable by it, and only by it.
    for origin, id, readable in ((APP, "w-app", True), (EVIL, "w-evil", False)):
        url = f"{server.url}/poll/g/{id}"
        with httpx.stream("GET", url, headers={"origin": origin}, timeout=5) as stream:
            assert stream.status_code == 200
            assert ("access-control-allow-origin" in stream.headers) is readable


def test_a_wildcard_allows_any_origin(start_server: Callable[..., TrothServer]) -> None:
    server = start_server("--cors-origins", "*")
    answer = preflight(server, EVIL)
    assert (answer.status_code, answer.headers["access-control-allow-origin"]) == (204, EVIL)


# -- 5xx bodies ------------------------------------------------------------------------------


def _break_creates(server: TrothServer) -> None:
    """A real storage failure: the database refuses one id with an error of its own, as a
    trigger an operator (or a corrupt schema) could add."""
    if isinstance(server.db, Path):
        with sqlite3.connect(server.db) as conn:
            conn.execute(
                "CREATE TRIGGER boom BEFORE INSERT ON promises WHEN NEW.id = 'boom'"
                f" BEGIN SELECT RAISE(ABORT, '{SECRET} at /var/lib/troth'); END"
            )
        return
    with psycopg.connect(str(server.db), autocommit=True) as conn:
        conn.execute(
            "CREATE FUNCTION boom() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
            f" RAISE EXCEPTION '{SECRET} at /var/lib/troth'; END $$"
        )
        conn.execute(
            "CREATE TRIGGER boom BEFORE INSERT ON promises FOR EACH ROW"
            " WHEN (NEW.id = 'boom') EXECUTE FUNCTION boom()"
        )


def test_a_500_names_an_error_id_and_no_exception_text(backend_server: TrothServer) -> None:
    server = backend_server
    _break_creates(server)
    response = server.send("promise.create", {"id": "boom", "timeoutAt": 10**13})
    assert response.status_code == 500
    body = response.json()
    assert body["kind"] == "promise.create" and body["head"]["status"] == 500
    found = re.fullmatch(
        r"Internal error \(error ([0-9a-f]{12}): see the server log\)", body["data"]
    )
    assert found, body
    assert SECRET not in response.text and "troth" not in response.text
    # Nothing was written, the server serves on, and the log tells the operator what happened.
    assert server.call("promise.get", {"id": "boom"})[0] == 404
    server.create_promise("fine")
    log = server.output()
    line = next(line for line in log.splitlines() if found.group(1) in line)
    assert "promise.create failed" in line
    assert SECRET in log[log.index(line) :]
