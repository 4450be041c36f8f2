"""The console's routes over plain HTTP against a real ``troth serve``: pages, escaping,
404s and bad input, auth by cookie, CSRF refusal, read-only mode and ``--no-console``.
What a browser does with them is in ``test_browser``."""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.servers import BACKENDS, FAR, TrothServer, serve

pytestmark = pytest.mark.slow  # each module's servers are processes

HOSTILE = '<script>alert("x")</script>'
IMG = "<img src=x onerror=alert(1)>"


def b64(data: Any) -> str:
    return base64.b64encode(json.dumps(data).encode()).decode()


def execution(server: TrothServer, id: str, function: str = "checkout", **param: Any) -> None:
    """A root promise with a task, as an SDK starts an execution (nobody works on it)."""
    tags = {
        "troth:func": function,
        "resonate:origin": id,
        "resonate:branch": id,
        "resonate:parent": id,
        "resonate:target": "poll://any@nobody",
    }
    data = {"id": id, "timeoutAt": FAR, "param": {"data": b64(param)}, "tags": tags}
    server.ok("promise.create", data)


class Visitor:
    """A browser's side of the console over HTTP: its cookies, and the CSRF token the
    console gave it."""

    def __init__(self, server: TrothServer) -> None:
        self.http = httpx.Client(base_url=server.url, timeout=10)

    def get(self, path: str, **params: str) -> httpx.Response:
        return self.http.get(path, params=params or None)  # {} would drop path's own query

    @property
    def csrf(self) -> str:
        if "troth_csrf" not in self.http.cookies:
            self.get("/console/schedules")  # any page gives a new visitor its token
        return self.http.cookies["troth_csrf"]

    def post(self, path: str, headers: dict[str, str] | None = None, **form: str) -> httpx.Response:
        form.setdefault("csrf", self.csrf)
        return self.http.post(path, data=form, headers=headers)


@pytest.fixture(scope="module")
def open_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TrothServer]:
    folder = tmp_path_factory.mktemp("console")
    server = TrothServer(folder / "t.db", folder / "server.log", ["--debug"]).start()
    yield server
    server.close()


@pytest.fixture
def visitor(open_server: TrothServer) -> Visitor:
    return Visitor(open_server)


def promise_state(server: TrothServer, id: str) -> str:
    return str(server.ok("promise.get", {"id": id})["promise"]["state"])


def test_the_pages_show_executions_and_their_trees(
    open_server: TrothServer, visitor: Visitor
) -> None:
    execution(open_server, "order-1", "checkout", cents=1250)
    listed = visitor.get("/console")
    assert listed.status_code == 200
    assert listed.headers["content-type"] == "text/html; charset=utf-8"
    assert "default-src 'self'" in listed.headers["content-security-policy"]
    assert "order-1" in listed.text and "checkout" in listed.text
    page = visitor.get("/console/execution", id="order-1")
    assert page.status_code == 200
    assert "&quot;cents&quot;: 1250" in page.text  # the param, decoded (and escaped)
    assert 'data-live="true"' in page.text  # pending: the script keeps it current
    assert visitor.get("/console/execution/live", id="order-1").text.startswith("<div data-live")
    assert "Cancel execution" in page.text


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_console_reads_and_acts_on_either_backend(backend: str, tmp_path: Path) -> None:
    with serve(backend, tmp_path) as server:
        execution(server, "pg-1", "refund", cents=5)
        server.create_promise("pg-1:approval", tags={"resonate:origin": "pg-1",
                              "resonate:parent": "pg-1", "troth:step": "promise"})  # fmt: skip
        visitor = Visitor(server)
        assert "pg-1" in visitor.get("/console", state="pending").text
        page = visitor.get("/console/execution", id="pg-1").text
        assert "pg-1:approval" in page and "Resolve" in page
        done = visitor.post(
            "/console/actions/resolve", id="pg-1:approval", value="true", confirmed="yes"
        )
        assert done.status_code == 303
        assert done.headers["location"] == "/console/execution?id=pg-1"
        assert promise_state(server, "pg-1:approval") == "resolved"


def test_the_live_part_is_answered_304_until_the_execution_changes(
    open_server: TrothServer, visitor: Visitor
) -> None:
    execution(open_server, "live-1")
    open_server.create_promise("live-1:wait", tags={"resonate:origin": "live-1",
                               "resonate:parent": "live-1", "troth:step": "promise"})  # fmt: skip
    page = visitor.get("/console/execution", id="live-1").text
    etag = re.search(r'data-etag="([^"]+)"', page)
    assert etag is not None
    tag = etag.group(1).replace("&quot;", '"')
    live = "/console/execution/live?id=live-1"
    unchanged = visitor.http.get(live, headers={"If-None-Match": tag})
    assert unchanged.status_code == 304 and unchanged.content == b""
    open_server.ok("promise.settle", {"id": "live-1:wait", "state": "resolved", "value": {}})
    changed = visitor.http.get(live, headers={"If-None-Match": tag})
    assert changed.status_code == 200 and changed.headers["etag"] != tag
    assert "state-resolved" in changed.text


def test_the_list_pages_through_executions(open_server: TrothServer, visitor: Visitor) -> None:
    for n in range(55):
        execution(open_server, f"bulk-{n:02}", "bulk")
    first = visitor.get("/console", function="bulk").text
    assert first.count("<tr>") == 1 + 50  # the head row, then a full page, newest first
    assert "bulk-54" in first and "bulk-04" not in first
    link = re.search(r'<a class="next" href="([^"]+)"', first)
    assert link is not None
    second = visitor.get(link.group(1).replace("&amp;", "&")).text
    assert second.count("<tr>") == 1 + 5
    assert "bulk-04" in second and "bulk-54" not in second
    assert 'class="next"' not in second


def test_search_filters_by_function_and_names_a_bad_field(
    open_server: TrothServer, visitor: Visitor
) -> None:
    execution(open_server, "search-a", "refund")
    execution(open_server, "search-b", "invoice")
    found = visitor.get("/console", function="refund").text
    assert "search-a" in found and "search-b" not in found
    bad = visitor.get("/console", tag="no-colon")
    assert bad.status_code == 400 and "tag" in bad.text
    bad = visitor.get("/console", since="yesterday")
    assert bad.status_code == 400 and "since" in bad.text


def test_user_data_is_escaped_everywhere(open_server: TrothServer, visitor: Visitor) -> None:
    id = f"x{HOSTILE}"
    execution(open_server, id, IMG, note=HOSTILE)
    pages = [
        visitor.get("/console").text,
        visitor.get("/console/execution", id=id).text,
        visitor.post("/console/actions/resolve", id=id, value=json.dumps(HOSTILE)).text,
    ]
    for text in pages:
        assert "<script>alert" not in text and "<img src=x" not in text
        assert "&lt;script&gt;" in text or "&lt;img" in text


def test_unknown_pages_executions_and_files_are_404(visitor: Visitor) -> None:
    assert visitor.get("/console/nothing").status_code == 404
    missing = visitor.get("/console/execution", id="never-started")
    assert missing.status_code == 404 and "never-started" in missing.text
    assert visitor.get("/console/static/../app.py").status_code == 404
    assert visitor.get("/console/execution").status_code == 400  # id: required


def test_an_action_asks_for_confirmation_then_acts(
    open_server: TrothServer, visitor: Visitor
) -> None:
    open_server.create_promise("approval-1")
    asked = visitor.post("/console/actions/resolve", id="approval-1", value='{"ok": true}')
    assert asked.status_code == 200 and "Yes, resolve" in asked.text
    assert promise_state(open_server, "approval-1") == "pending"
    done = visitor.post(
        "/console/actions/resolve", id="approval-1", value='{"ok": true}', confirmed="yes"
    )
    assert done.status_code == 303
    promise = open_server.ok("promise.get", {"id": "approval-1"})["promise"]
    assert promise["state"] == "resolved"
    assert json.loads(base64.b64decode(promise["value"]["data"])) == {"ok": True}


def test_a_bad_value_is_named_and_changes_nothing(
    open_server: TrothServer, visitor: Visitor
) -> None:
    open_server.create_promise("approval-2")
    bad = visitor.post("/console/actions/reject", id="approval-2", value="{oops", confirmed="yes")
    assert bad.status_code == 400 and "value" in bad.text
    assert promise_state(open_server, "approval-2") == "pending"


def test_a_refused_request_is_shown_with_its_status(visitor: Visitor) -> None:
    refused = visitor.post("/console/actions/continue", id="no-such-task", confirmed="yes")
    assert refused.status_code == 404 and "no-such-task" in refused.text


def test_cancel_follows_the_sdk_convention(open_server: TrothServer, visitor: Visitor) -> None:
    execution(open_server, "nap-9", "nap")
    done = visitor.post("/console/actions/cancel", id="nap-9", confirmed="yes")
    assert done.status_code == 303
    assert done.headers["location"] == "/console/execution?id=nap-9"
    assert promise_state(open_server, "nap-9:cancel") == "resolved"


@pytest.mark.parametrize(
    "forgery",
    [
        {"csrf": "not-the-cookie"},
        {"headers": {"Origin": "https://evil.example"}},
        {"headers": {"Sec-Fetch-Site": "cross-site"}},
    ],
    ids=["csrf-token", "origin", "sec-fetch-site"],
)
def test_forged_posts_are_refused(
    open_server: TrothServer, visitor: Visitor, forgery: dict[str, Any]
) -> None:
    id = f"forged-{len(forgery)}-{next(iter(forgery.get('headers', {'t': 0})))}"
    open_server.create_promise(id)
    refused = visitor.post("/console/actions/resolve", id=id, value="1", confirmed="yes", **forgery)
    assert refused.status_code == 403
    assert promise_state(open_server, id) == "pending"


def test_a_post_without_the_csrf_cookie_is_refused(open_server: TrothServer) -> None:
    open_server.create_promise("no-cookie")
    fresh = httpx.post(
        f"{open_server.url}/console/actions/resolve",
        data={"id": "no-cookie", "value": "1", "confirmed": "yes", "csrf": "x" * 43},
    )
    assert fresh.status_code == 403
    assert promise_state(open_server, "no-cookie") == "pending"


def test_read_only_hides_actions_and_refuses_them(tmp_path: Path) -> None:
    server = TrothServer(tmp_path / "t.db", tmp_path / "s.log", ["--console-read-only"]).start()
    try:
        execution(server, "ro-1")
        server.create_promise("ro-1:wait")
        visitor = Visitor(server)
        page = visitor.get("/console/execution", id="ro-1").text
        assert "read-only" in page and "/console/actions/" not in page
        refused = visitor.post("/console/actions/cancel", id="ro-1", confirmed="yes")
        assert refused.status_code == 403 and "read-only" in refused.text
        refused = visitor.post("/console/actions/resolve", id="ro-1:wait", confirmed="yes")
        assert refused.status_code == 403
        assert promise_state(server, "ro-1") == "pending"
        assert promise_state(server, "ro-1:wait") == "pending"
    finally:
        server.close()


def test_no_console_serves_nothing(tmp_path: Path) -> None:
    server = TrothServer(tmp_path / "t.db", tmp_path / "s.log", ["--no-console"]).start()
    try:
        assert httpx.get(f"{server.url}/console").status_code == 404
        assert httpx.get(f"{server.url}/console/static/console.css").status_code == 404
    finally:
        server.close()


def test_with_auth_the_console_takes_the_token_once_in_a_strict_cookie(tmp_path: Path) -> None:
    secret = "console-secret-1"
    server = TrothServer(
        tmp_path / "t.db", tmp_path / "s.log", ["--auth-token", secret], token=secret
    ).start()
    try:
        execution(server, "paid-1")
        visitor = Visitor(server)
        asked = visitor.get("/console")
        assert asked.status_code == 401 and 'name="token"' in asked.text
        assert "paid-1" not in asked.text
        wrong = visitor.post("/console/login", token="guess")
        assert wrong.status_code == 401 and "troth_console" not in wrong.headers.get(
            "set-cookie", ""
        )
        # Even the refusal of an action needs the token: nothing is done, nothing shown.
        refused = visitor.post("/console/actions/cancel", id="paid-1", confirmed="yes")
        assert refused.status_code == 401
        logged = visitor.post("/console/login", token=secret)
        assert logged.status_code == 303
        cookie = logged.headers["set-cookie"]
        assert re.search(r"troth_console=console-secret-1; Path=/console; HttpOnly", cookie)
        assert "SameSite=Strict" in cookie
        assert "paid-1" in visitor.get("/console").text
        done = visitor.post("/console/actions/cancel", id="paid-1", confirmed="yes")
        assert done.status_code == 303
        assert promise_state(server, "paid-1:cancel") == "resolved"
        visitor.post("/console/logout")
        assert visitor.get("/console").status_code == 401
    finally:
        server.close()


def test_a_scoped_token_sees_only_its_prefix(tmp_path: Path) -> None:
    from tests.support.tokens import AUD, ISS, Keys, token

    keys = Keys(tmp_path)
    flags = ["--auth-publickey", keys.paths["ed25519"], "--auth-iss", ISS, "--auth-aud", AUD]
    admin = token(keys.ed25519, "EdDSA", role="admin")
    server = TrothServer(tmp_path / "t.db", tmp_path / "s.log", flags, token=admin).start()
    try:
        execution(server, "shop-1")
        execution(server, "bank-1")
        visitor = Visitor(server)
        assert visitor.post("/console/login", token=token(keys.ed25519, "EdDSA", prefix="shop-")
                            ).status_code == 303  # fmt: skip
        assert visitor.get("/console/execution", id="shop-1").status_code == 200
        assert visitor.get("/console/execution", id="bank-1").status_code == 403
        assert visitor.get("/console").status_code == 403  # a list is a search: unscoped only
        refused = visitor.post("/console/actions/cancel", id="bank-1", confirmed="yes")
        assert refused.status_code == 403
        assert promise_state(server, "bank-1") == "pending"
    finally:
        server.close()
