"""The console's parts in-process (the fast suite): escaping by default, reading the
visitor's cookies and judging a post's origin, reading forms, rendering a tree. The same
behaviour over a real server is in ``test_routes`` and in a browser in ``test_browser``."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from troth.protocol.records import PromiseRecord, PromiseState, TaskState, Value
from troth.server.console import forms
from troth.server.console.markup import Html, html, join
from troth.server.console.pages import Page, halt_reason
from troth.server.console.session import visitor
from troth.views.tree import build

CSRF = "c" * 43


def scope(**headers: str) -> dict[str, Any]:
    return {
        "scheme": "http",
        "headers": [(k.replace("_", "-").encode(), v.encode()) for k, v in headers.items()],
    }


def test_values_are_escaped_and_fragments_are_not() -> None:
    inner = html("<b>{}</b>", "<i>")
    assert inner == "<b>&lt;i&gt;</b>"
    assert html("<p>{}</p>", inner) == "<p><b>&lt;i&gt;</b></p>"  # escaped once, not twice
    assert html('<a title="{}">', '"x" onclick=') == '<a title="&quot;x&quot; onclick=">'
    assert html("{}", None) == ""
    assert join([inner, Html("<br>")]) == "<b>&lt;i&gt;</b><br>"


def test_a_new_visitor_gets_a_csrf_token_and_an_old_one_keeps_it() -> None:
    new = visitor(scope())
    assert new.new and len(new.csrf) >= 32 and new.token is None
    assert [name for name, _ in new.cookies()] == [b"set-cookie"]
    old = visitor(scope(cookie=f"troth_csrf={CSRF}; troth_console=tok.en/1="))
    assert not old.new and old.csrf == CSRF and old.token == "tok.en/1="
    assert old.cookies() == []
    assert visitor(scope(cookie='bad"cookie')).token is None  # unreadable: no cookie at all


@pytest.mark.parametrize(
    ("headers", "field", "forged"),
    [
        ({}, CSRF, False),
        ({"origin": "http://127.0.0.1:8001", "host": "127.0.0.1:8001"}, CSRF, False),
        ({"sec_fetch_site": "same-origin"}, CSRF, False),
        ({}, "other", True),
        ({}, "", True),
        ({"origin": "https://evil.example", "host": "127.0.0.1:8001"}, CSRF, True),
        ({"origin": "null", "host": "127.0.0.1:8001"}, CSRF, True),
        ({"sec_fetch_site": "cross-site"}, CSRF, True),
        ({"sec_fetch_site": "same-site"}, CSRF, True),
    ],
)
def test_a_post_is_forged_unless_it_comes_from_a_console_page(
    headers: dict[str, str], field: str, forged: bool
) -> None:
    request = scope(cookie=f"troth_csrf={CSRF}", **headers)
    assert visitor(request).forged(request, {"csrf": field}) is forged


def test_a_post_without_the_cookie_is_forged_whatever_its_field() -> None:
    request = scope()
    you = visitor(request)
    assert you.forged(request, {"csrf": you.csrf})


def test_cookies_are_strict_http_only_and_secure_over_https() -> None:
    plain = visitor(scope()).login_cookie("t")[1].decode()
    assert plain == "troth_console=t; Path=/console; HttpOnly; SameSite=Strict"
    secure = visitor({**scope(), "scheme": "https"}).login_cookie("t")[1].decode()
    assert secure.endswith("; Secure")


@pytest.mark.parametrize(
    ("fields", "named"),
    [
        ({"tag": "nocolon"}, "tag"),
        ({"since": "monday"}, "since"),
        ({"state": "sleeping"}, "state"),
        ({"cursor": "x"}, "cursor"),
    ],
)
def test_a_bad_search_field_is_named(fields: dict[str, str], named: str) -> None:
    with pytest.raises(forms.Invalid, match=f"^{named}: "):
        forms.execution_query(fields, 50)


def test_the_search_form_reads_times_as_utc() -> None:
    query = forms.execution_query({"since": "2026-01-02T03:04", "function": "f"}, 50)
    assert query.since_ms == 1767323040000 and query.function == "f" and query.limit == 50


def test_values_and_tokens_are_checked() -> None:
    assert forms.json_value({"value": '{"a": 1}'}) == {"a": 1}
    assert forms.json_value({}) is None
    with pytest.raises(forms.Invalid, match=r"^value: not JSON"):
        forms.json_value({"value": "{"})
    with pytest.raises(forms.Invalid, match=r"^token: "):
        forms.token("has space")
    with pytest.raises(forms.Invalid, match=r"^id: required"):
        forms.required({"id": " "}, "id")


def b64(data: Any) -> str:
    return base64.b64encode(json.dumps(data).encode()).decode()


def record(id: str, state: str = "pending", value: Any = None, **tags: str) -> PromiseRecord:
    data = None if value is None else b64(value)
    all_tags = {"resonate:origin": "run<1>", **tags}
    return PromiseRecord(id, PromiseState(state), Value(), Value(data=data), all_tags, 10**13, 1)


def test_a_halted_tree_shows_its_reason_continue_and_settle_buttons() -> None:
    records = [
        record("run<1>", **{"troth:func": "f<x>"}),
        record(
            "run<1>:halt1", "resolved", {"version": 2, "reason": "call <g> differs"},
            **{"resonate:parent": "run<1>"},
        ),
        record("run<1>:0", **{"resonate:parent": "run<1>", "troth:step": "promise"}),
    ]  # fmt: skip
    root = build("run<1>", records, {"run<1>": TaskState.HALTED})
    assert halt_reason(root) == "call <g> differs"
    shown = Page(CSRF, actions=True, logged_in=False).execution(root, '"tag"')
    assert "call &lt;g&gt; differs" in shown and "<g>" not in shown
    assert "f&lt;x&gt;" in shown
    for verb in ("continue", "cancel", "resolve", "reject"):
        assert f'action="/console/actions/{verb}"' in shown
    assert shown.count(f'name="csrf" value="{CSRF}"') == 4  # one per form
    read_only = Page(CSRF, actions=False, logged_in=False).execution(root, '"tag"')
    assert "/console/actions/" not in read_only and "read-only" in read_only


def test_a_step_that_blocked_the_event_loop_shows_a_warning() -> None:
    stalled = Value(headers={"troth:stalled-ms": "3042"}, data="InNsZXB0Ig==")
    records = [
        record("run<2>", **{"troth:func": "f"}),
        PromiseRecord(
            "run<2>:0", PromiseState.RESOLVED, Value(), stalled,
            {"resonate:parent": "run<2>", "troth:step": "run:blocking"}, 10**13, 0, 5,
        ),
        record("run<2>:1", **{"resonate:parent": "run<2>", "troth:step": "run:quick"}),
    ]  # fmt: skip
    root = build("run<2>", records)
    assert [n.stalled_ms for n in root.walk()] == [None, 3042, None]
    shown = Page(CSRF, actions=False, logged_in=False).execution(root, '"tag"')
    assert shown.count('class="stall"') == 1
    assert "blocked the event loop for 3.0 s" in shown
    assert shown.index('class="stall"') > shown.index('data-id="run&lt;2&gt;:0"')
