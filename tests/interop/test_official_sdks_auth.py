"""The official SDKs against `troth serve` with auth on: their token options work.

Both SDKs take a token from RESONATE_TOKEN (the TypeScript one also needs it passed to its
constructor for the poll stream; interop/ts/sdk.mjs does) and send it in ``head.auth``, as
a Bearer header and on ``GET /poll``. The server here verifies RS256 JWTs with an issuer
and an audience (``secured_server`` in conftest.py); the same workflows as
test_official_sdks.py run, and a process without the token gets nowhere.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request

from tests.interop.sdks import Sdk, settle_json


def test_hello_world_returns_the_greeting_with_auth_on(secured_sdk: Sdk) -> None:
    group = secured_sdk.unique("g")
    secured_sdk.worker(group)
    invocation = secured_sdk.invoke(secured_sdk.unique("hello"), "hello", group, "world")
    assert invocation.result() == "hello world"


def test_rpc_and_sleep_cross_workers_with_auth_on(secured_sdk: Sdk) -> None:
    group_a, group_b = secured_sdk.unique("ga"), secured_sdk.unique("gb")
    a, b = secured_sdk.worker(group_a), secured_sdk.worker(group_b)
    result = secured_sdk.invoke(secured_sdk.unique("rpc"), "caller", group_a, group_b, 41).result()
    assert result == {"pid": a.pid, "callee": {"pid": b.pid, "value": 42}}
    slept_ms = secured_sdk.invoke(secured_sdk.unique("sleep"), "sleeper", group_a, 1000).result()
    assert slept_ms >= 1000


def test_an_external_settle_needs_the_token_too(secured_sdk: Sdk) -> None:
    group = secured_sdk.unique("g")
    secured_sdk.worker(group)
    tag = secured_sdk.unique("ext")
    run = secured_sdk.invoke(tag, "waiter", group, tag)
    promise_id = secured_sdk.wait_marker(f"{tag} promise ").split()[-1]

    server = secured_sdk.server
    body = {
        "kind": "promise.settle",
        "head": {"corrId": "anonymous", "version": "2026-04-01"},
        "data": {"id": promise_id, "state": "resolved"},
    }
    anonymous = urllib.request.Request(
        server.url + "/",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    try:
        urllib.request.urlopen(anonymous, timeout=10)
        raise AssertionError("an anonymous settle was accepted")
    except urllib.error.HTTPError as e:
        assert e.code == 401

    settle_json(server, promise_id, {"approved": True})
    assert run.result() == {"got": {"approved": True}}
