"""Server-side request forgery through push, tried as an attacker would: a client names a
push target the server can reach and the client cannot (loopback, the metadata endpoint, a
URL with credentials, a host name that resolves to loopback). Each is refused and the local
receiver gets nothing; a target the allow-list names still receives."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from tests.support.ports import loopback_name
from tests.support.push import PushTarget
from tests.support.servers import BACKENDS, FAR, TrothServer, serve
from tests.support.waiting import eventually

# Slow: a troth serve process per test (tests/conformance covers the server in the fast suite).
pytestmark = pytest.mark.slow

TARGET = "resonate:target"


@pytest.fixture(scope="module", params=BACKENDS)
def strict_server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[TrothServer]:
    """A server with the default allow-list (only public addresses), on each backend."""
    folder = tmp_path_factory.mktemp("push-allow")
    with serve(request.param, folder, "--push-allow", "public") as server:
        yield server


@pytest.fixture
def strict(strict_server: TrothServer) -> TrothServer:
    strict_server.ok("debug.reset")
    return strict_server




def refused_at_the_door(server: TrothServer, kind: str, data: dict[str, Any], field: str) -> str:
    status, message = server.call(kind, data)
    assert status == 400, message
    assert field in message and "refused" in message, message
    return str(message)


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("http://127.0.0.1:{port}/", "loopback address 127.0.0.1"),
        ("http://127.1.2.3:{port}/", "loopback address 127.1.2.3"),
        ("http://[::1]:{port}/", "loopback address ::1"),
        ("http://[::ffff:127.0.0.1]:{port}/", "loopback address"),
        ("http://localhost:{port}/", "loopback address 127.0.0.1"),
        ("http://169.254.169.254/latest/meta-data/", "link-local address 169.254.169.254"),
        ("http://0.0.0.0:{port}/", "unspecified address 0.0.0.0"),
        ("http://10.0.0.1/", "private address 10.0.0.1"),
        ("http://172.16.5.4/", "private address 172.16.5.4"),
        ("http://192.168.1.1/", "private address 192.168.1.1"),
        ("http://[fe80::1]/", "link-local address fe80::1"),
        ("http://[fd00::1]/", "private address fd00::1"),
        ("http://user:secret@example.com/", "credentials"),
        ("http://user:secret@127.0.0.1:{port}/", "credentials"),
    ],
)
def test_a_promise_aimed_at_an_internal_address_is_refused_and_nothing_is_sent(
    strict: TrothServer, push_target: PushTarget, url: str, why: str
) -> None:
    port = push_target.server.server_address[1]
    address = url.format(port=port)
    data = {"id": "p1", "timeoutAt": FAR, "tags": {TARGET: address}}
    message = refused_at_the_door(strict, "promise.create", data, f"tags['{TARGET}']")
    assert why in message
    assert strict.snap()["promises"] == []
    time.sleep(0.5)
    assert push_target.attempts == []


def test_every_request_that_names_a_push_target_is_checked(
    strict: TrothServer, push_target: PushTarget
) -> None:
    target = push_target.url
    strict.create_promise("awaited")
    create = {"id": "p1", "timeoutAt": FAR, "tags": {TARGET: target}}
    task_create = {
        "pid": "w",
        "ttl": 1000,
        "action": {"kind": "promise.create", "head": {}, "data": create},
    }
    refused_at_the_door(strict, "task.create", task_create, f"action.data.tags['{TARGET}']")
    listener = {"awaited": "awaited", "address": target}
    refused_at_the_door(strict, "promise.register_listener", listener, "address")
    schedule = {
        "id": "s1",
        "cron": "* * * * *",
        "promiseId": "s1.{{.timestamp}}",
        "promiseTimeout": 60000,
        "promiseTags": {TARGET: target},
    }
    refused_at_the_door(strict, "schedule.create", schedule, f"promiseTags['{TARGET}']")
    snap = strict.snap()
    assert [p["id"] for p in snap["promises"]] == ["awaited"]
    assert snap["schedules"] == [] and snap["messages"] == []
    time.sleep(0.5)
    assert push_target.attempts == []


def test_a_host_name_resolving_to_loopback_passes_the_door_but_is_never_connected_to(
    strict: TrothServer, push_target: PushTarget
) -> None:
    name = loopback_name()
    port = push_target.server.server_address[1]
    address = f"http://{name}:{port}/hook"
    strict.create_promise("p1", tags={TARGET: address})  # the text alone cannot tell
    # Refused at connect time, on the resolved address, and said so in the log.
    eventually(lambda: f"push to {address} failed" in strict.output(), timeout=10)
    assert "refused" in strict.output() and "loopback address 127.0.0.1" in strict.output()
    time.sleep(1.0)
    assert push_target.attempts == []
    # Not lost in silence either: the message waits in the outbox for a wider --push-allow.
    assert [m["address"] for m in strict.snap()["messages"]] == [address]


def test_a_target_the_allow_list_names_still_receives(
    start_server: Callable[..., TrothServer], push_target: PushTarget
) -> None:
    name = loopback_name()
    port = push_target.server.server_address[1]
    server = start_server("--push-allow", f"127.0.0.1:{port},{name}")
    server.create_promise("by-address", tags={TARGET: f"http://127.0.0.1:{port}/a"})
    server.create_promise("by-name", tags={TARGET: f"http://{name}:{port}/b"})
    eventually(lambda: len(push_target.received) == 2, timeout=10)
    # The port is part of the entry: another port on the same address stays refused.
    status, message = server.call(
        "promise.create",
        {"id": "other-port", "timeoutAt": FAR, "tags": {TARGET: "http://127.0.0.1:9/"}},
    )
    assert status == 400 and "loopback address 127.0.0.1" in message


def test_credentials_in_a_url_only_when_allowed(
    start_server: Callable[..., TrothServer], push_target: PushTarget
) -> None:
    server = start_server("--push-allow", "loopback", "--push-allow-credentials")
    port = push_target.server.server_address[1]
    server.create_promise("p1", tags={TARGET: f"http://user:secret@127.0.0.1:{port}/"})
    eventually(lambda: push_target.received, timeout=10)


class _Redirecting:
    """A receiver answering every POST with a redirect to ``to``."""

    def __init__(self, to: str) -> None:
        self.attempts = 0
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("content-length", 0)))
                owner.attempts += 1
                self.send_response(307)
                self.send_header("location", to)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/"

    def __enter__(self) -> _Redirecting:
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def redirecting(push_target: PushTarget) -> Iterator[_Redirecting]:
    with _Redirecting(push_target.url + "/internal") as r:
        yield r


def test_a_redirect_is_not_followed(
    start_server: Callable[..., TrothServer], push_target: PushTarget, redirecting: _Redirecting
) -> None:
    # Only the redirecting receiver is allowed; where it points is never reached, even though
    # that address would be allowed too: a redirect is a failed attempt, not a new target.
    server = start_server("--push-allow", "loopback")
    server.create_promise("p1", tags={TARGET: redirecting.url})
    eventually(lambda: redirecting.attempts >= 2, timeout=10)
    assert push_target.attempts == []
    assert [m["address"] for m in server.snap()["messages"]] == [redirecting.url]
