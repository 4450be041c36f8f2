"""The console's pages as HTML: a layout, and one function per page or fragment.

Pages are complete without JavaScript (lists, trees, forms, confirmations); the one script
(``static/console.js``) only refreshes a running execution's tree in place. Every value
goes through ``markup.html``, which escapes it.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import UTC, datetime
from urllib.parse import urlencode

import msgspec

from troth.protocol.ids import origin
from troth.protocol.queues import QueueKeyStats, QueueRecord
from troth.protocol.records import PromiseState, Schedule, TaskRecord, TaskState
from troth.server.console.markup import Html, html, join
from troth.server.console.session import CSRF_FIELD
from troth.views.executions import STATES, Cursor, Execution, ExecutionQuery
from troth.views.tree import Node
from troth.views.values import Shown

TITLE = "troth console"
NOTHING = Html("")  # an empty fragment


class Page:
    """What every page shares: the visitor's CSRF token, whether actions are offered, and
    whether the visitor is logged in (so the header offers to log out)."""

    def __init__(self, csrf: str, *, actions: bool, logged_in: bool) -> None:
        self.csrf = csrf
        self.actions = actions
        self.logged_in = logged_in

    def layout(self, title: str, body: Html, *, current: str = "") -> Html:
        links = join(
            html(
                '<a href="{}"{}>{}</a>',
                href,
                Html(' aria-current="page"') if key == current else NOTHING,
                label,
            )
            for key, href, label in _NAV
        )
        logout = (
            self.form("/console/logout", html('<button type="submit">Log out</button>'))
            if self.logged_in
            else NOTHING
        )
        mode = NOTHING if self.actions else html('<span class="badge">read-only</span>')
        return html(
            _LAYOUT, title=f"{title} · {TITLE}", links=links, logout=logout, mode=mode, body=body
        )

    def form(self, action: str, inner: Html, css: str = "inline") -> Html:
        return html(
            '<form method="post" action="{}" class="{}">'
            '<input type="hidden" name="{}" value="{}">{}</form>',
            action, css, CSRF_FIELD, self.csrf, inner,
        )  # fmt: skip

    def action(self, verb: str, id: str, label: str, extra: Html = NOTHING) -> Html:
        """A button that asks for ``verb`` on ``id``; the server confirms before acting."""
        if not self.actions:
            return NOTHING
        return self.form(
            f"/console/actions/{verb}",
            html('<input type="hidden" name="id" value="{}">{}'
                 '<button type="submit" class="{}">{}</button>', id, extra, verb, label),
        )  # fmt: skip

    # -- pages ------------------------------------------------------------------------------

    def executions(
        self, query: ExecutionQuery, rows: Sequence[Execution], next_cursor: Cursor | None
    ) -> Html:
        body = html(
            "<h1>Executions</h1>{}{}{}",
            _search_form(query),
            _executions_table(rows),
            _next_link("/console", query, next_cursor),
        )
        return self.layout("Executions", body, current="executions")

    def execution(self, root: Node, etag: str) -> Html:
        """An execution's page; ``etag`` names its live part as drawn here, so that the
        script's first poll is answered 304 if nothing changed since."""
        body = html(
            "<h1>Execution <code>{}</code></h1>"
            '<section id="live" aria-live="polite" aria-label="execution" data-src="{}"'
            ' data-etag="{}">{}</section>',
            root.id,
            "/console/execution/live?" + urlencode({"id": root.id}),
            etag,
            self.live(root),
        )
        return self.layout(f"Execution {root.id}", body)

    def live(self, root: Node) -> Html:
        """What of an execution's page may change while it runs: its summary, its halt,
        the actions and the tree; ``data-live`` tells the script whether to keep polling."""
        halted = root.task == TaskState.HALTED
        actions = NOTHING
        if self.actions and root.state == PromiseState.PENDING:
            actions = html(
                '<div class="actions">{}{}</div>',
                self.action("continue", root.id, "Continue") if halted else NOTHING,
                self.action("cancel", root.id, "Cancel execution"),
            )
        note = (
            html('<p class="halted"><strong>Halted:</strong> {}</p>',
                 halt_reason(root) or "no reason recorded")
            if halted
            else NOTHING
        )  # fmt: skip
        return html(
            '<div data-live="{}">{}{}{}<h2>Call tree</h2><ul class="tree">{}</ul></div>',
            "true" if root.state == PromiseState.PENDING else "false",
            _summary(root),
            note,
            actions,
            self._node(root),
        )

    def _node(self, node: Node) -> Html:
        children = (
            html("<ul>{}</ul>", join(self._node(child) for child in node.children))
            if node.children
            else NOTHING
        )
        settle = NOTHING
        if self.actions and node.state == PromiseState.PENDING and node.kind == "promise":
            value = html('<label>value (JSON) <input name="value" value="null"></label>')
            settle = html(
                "{}{}",
                self.action("resolve", node.id, "Resolve", value),
                self.action("reject", node.id, "Reject", value),
            )
        error = (
            html('<p class="error"><span class="label">last error</span> {}</p>', node.last_error)
            if node.last_error
            else NOTHING
        )
        stall = (
            html(
                '<p class="stall"><span class="label">warning</span> blocked the event loop '
                "for {} s: every other execution of its worker waited</p>",
                f"{node.stalled_ms / 1000:.1f}",
            )
            if node.stalled_ms is not None
            else NOTHING
        )
        return html(
            '<li class="node state-{state}" data-id="{id}"><div class="line">'
            '<span class="kind">{kind}</span> <code class="id">{id}</code> '
            '<span class="function">{function}</span> {badge} '
            '<span class="timing">{timing}</span>{attempts}</div>{stall}{error}'
            "<details><summary>param and value</summary><dl>"
            "<dt>param</dt><dd>{param}</dd><dt>value</dt><dd>{value}</dd>"
            "<dt>created</dt><dd>{created}</dd><dt>settled</dt><dd>{settled}</dd>"
            "</dl>{settle}</details>{children}</li>",
            state=node.state,
            kind=node.kind,
            id=node.id,
            function=node.function or "",
            badge=_state_badge(node.state),
            timing=_duration(node.duration_ms),
            attempts=(
                html(' <span class="attempts">attempt {}</span>', node.attempts)
                if node.attempts and node.attempts > 1
                else NOTHING
            ),
            stall=stall,
            error=error,
            param=_shown(node.param),
            value=_shown(node.value) if node.state != "pending" else "—",
            created=_time(node.created_on),
            settled=_time(node.settled_on),
            settle=settle,
            children=children,
        )

    def halted(
        self, rows: Sequence[tuple[TaskRecord, str | None]], next_cursor: str | None
    ) -> Html:
        if not rows:
            table = html('<p class="empty">No halted execution.</p>')
        else:
            table = html(
                '<table><thead><tr><th scope="col">execution</th><th scope="col">reason</th>'
                '<th scope="col">version</th><th scope="col"><span class="sr-only">actions'
                "</span></th></tr></thead><tbody>{}</tbody></table>",
                join(
                    html(
                        "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                        _execution_link(task.id),
                        reason or "no reason recorded",
                        task.version,
                        self.action("continue", task.id, "Continue"),
                    )
                    for task, reason in rows
                ),
            )
        body = html(
            "<h1>Halted executions</h1><p>A halted execution waits for code that matches"
            " its history; deploy the fix, then continue it.</p>{}{}",
            table,
            _more("/console/halted", next_cursor),
        )
        return self.layout("Halted", body, current="halted")

    def schedules(self, schedules: Sequence[Schedule], next_cursor: str | None) -> Html:
        if not schedules:
            table = html('<p class="empty">No schedule.</p>')
        else:
            table = html(
                '<table><thead><tr><th scope="col">schedule</th><th scope="col">cron</th>'
                '<th scope="col">promise id</th><th scope="col">next run</th>'
                '<th scope="col">last run</th></tr></thead><tbody>{}</tbody></table>',
                join(
                    html(
                        "<tr><td><code>{}</code></td><td><code>{}</code></td>"
                        "<td><code>{}</code></td><td>{}</td><td>{}</td></tr>",
                        s.id,
                        s.cron,
                        s.promise_id,
                        _time(s.next_run_at),
                        _time(s.last_run_at),
                    )
                    for s in schedules
                ),
            )
        body = html("<h1>Schedules</h1>{}{}", table, _more("/console/schedules", next_cursor))
        return self.layout("Schedules", body, current="schedules")

    def queues(self, queues: Sequence[QueueRecord], next_cursor: str | None) -> Html:
        if not queues:
            table = html('<p class="empty">No queue is declared.</p>')
        else:
            table = html(
                '<table><thead><tr><th scope="col">queue</th><th scope="col">limits</th>'
                '<th scope="col">running</th><th scope="col">waiting</th>'
                '<th scope="col">rate limited until</th></tr></thead><tbody>{}</tbody></table>',
                join(
                    html(
                        '<tr><td><a href="{}"><code>{}</code></a></td><td>{}</td><td>{}</td>'
                        "<td>{}</td><td>{}</td></tr>",
                        "/console/queue?" + urlencode({"name": q.spec.name}),
                        q.spec.name,
                        limits(q),
                        q.running,
                        q.waiting,
                        _time(q.limited_until),
                    )
                    for q in queues
                ),
            )
        body = html("<h1>Queues</h1>{}{}", table, _more("/console/queues", next_cursor))
        return self.layout("Queues", body, current="queues")

    def queue(self, queue: QueueRecord) -> Html:
        keys = (
            html(
                '<table><thead><tr><th scope="col">key</th><th scope="col">running</th>'
                '<th scope="col">waiting</th><th scope="col">rate limited until</th></tr>'
                "</thead><tbody>{}</tbody></table>",
                join(_key_row(k) for k in queue.keys),
            )
            if queue.keys
            else html('<p class="empty">No execution is running or waiting.</p>')
        )
        body = html(
            '<h1>Queue <code>{}</code></h1><dl class="summary"><dt>limits</dt><dd>{}</dd>'
            "<dt>running</dt><dd>{}</dd><dt>waiting</dt><dd>{}</dd>"
            "<dt>rate limited until</dt><dd>{}</dd></dl><h2>Busiest keys</h2>{}",
            queue.spec.name,
            limits(queue),
            queue.running,
            queue.waiting,
            _time(queue.limited_until),
            keys,
        )
        return self.layout(f"Queue {queue.spec.name}", body, current="queues")

    def confirm(self, verb: str, id: str, value: str | None) -> Html:
        extra = (
            html('<input type="hidden" name="value" value="{}"><p>with the value <code>{}</code>'
                 "</p>", value, value)
            if value is not None
            else NOTHING
        )  # fmt: skip
        inner = html(
            '<input type="hidden" name="id" value="{}"><input type="hidden" name="confirmed"'
            ' value="yes">{}<button type="submit" class="{}" autofocus>Yes, {}</button> '
            '<a href="{}">No, go back</a>',
            id, extra, verb, verb, after(id),
        )  # fmt: skip
        body = html(
            "<h1>{} <code>{}</code>?</h1><p>{}</p>{}",
            verb.capitalize(),
            id,
            _CONSEQUENCES[verb],
            self.form(f"/console/actions/{verb}", inner, css="confirm"),
        )
        return self.layout("Confirm", body)

    def message(self, title: str, text: str, back: str | None = None) -> Html:
        link = html('<p><a href="{}">Back</a></p>', back) if back else NOTHING
        body = html('<h1>{}</h1><p role="alert">{}</p>{}', title, text, link)
        return self.layout(title, body)

    def login(self, problem: str | None = None) -> Html:
        alert = html('<p role="alert" class="alert">{}</p>', problem) if problem else NOTHING
        inner = html(
            '<label for="token">Token</label> <input id="token" name="token" type="password"'
            ' autocomplete="current-password" required autofocus> '
            '<button type="submit">Log in</button>'
        )
        body = html(
            "<h1>Log in</h1><p>This server requires a token: the same bearer token (a JWT or"
            " the <code>--auth-token</code> secret) the CLI and the SDKs send. It is kept in"
            " a cookie for this console only.</p>{}{}",
            alert,
            self.form("/console/login", inner, css="login"),
        )
        return self.layout("Log in", body)


_NAV = (
    ("executions", "/console", "Executions"),
    ("halted", "/console/halted", "Halted"),
    ("schedules", "/console/schedules", "Schedules"),
    ("queues", "/console/queues", "Queues"),
)

_CONSEQUENCES = {
    "continue": "Its task becomes pending again and a worker of its group replays it from"
    " the start. If the code still diverges from its history, it halts again.",
    "cancel": "The execution is asked to stop: it sees a CanceledError at its next durable"
    " call, and its pending children are canceled.",
    "resolve": "The promise is resolved with this value; whatever awaits it resumes.",
    "reject": "The promise is rejected with this value; whatever awaits it sees an error.",
}

_LAYOUT = """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title>
<link rel="stylesheet" href="/console/static/console.css">
<script src="/console/static/console.js" defer></script>
</head><body>
<a class="skip" href="#main">Skip to content</a>
<header><a class="brand" href="/console">troth</a><nav aria-label="main">{links}</nav>
{mode}<span class="spacer"></span>{logout}</header>
<main id="main">{body}</main>
</body></html>
"""


def limits(queue: QueueRecord) -> str:
    """A queue's limits in one line (``concurrency 4, per key 1, rate 50 / 30 s``)."""
    spec = queue.spec
    parts = [
        f"{label} {value}"
        for label, value in (("concurrency", spec.concurrency), ("per key", spec.key_concurrency))
        if value is not None
    ]
    parts += [
        f"{label} {rate.limit} / {_duration(rate.period)}"
        for label, rate in (("rate", spec.rate), ("key rate", spec.key_rate))
        if rate is not None
    ]
    return ", ".join(parts + (["priority"] if spec.priority else [])) or "none"


def _key_row(key: QueueKeyStats) -> Html:
    return html(
        "<tr><td><code>{}</code></td><td>{}</td><td>{}</td><td>{}</td></tr>",
        key.key or "(empty key)",
        key.running,
        key.waiting,
        _time(key.limited_until),
    )


def _search_form(query: ExecutionQuery) -> Html:
    states = join(
        html('<option value="{}"{}>{}</option>', value, Html(" selected") if value == (
            query.state or "") else NOTHING, label or "any")
        for value, label in (("", ""), *((s, s.replace("_", " ")) for s in STATES))
    )  # fmt: skip
    tag = f"{query.tag[0]}:{query.tag[1]}" if query.tag else ""
    return html(
        '<form class="search" method="get" action="/console" role="search">'
        '<label>state <select name="state">{}</select></label>'
        '<label>function <input name="function" value="{}"></label>'
        '<label>tag <input name="tag" value="{}" placeholder="key:value"></label>'
        '<label>since <input name="since" type="datetime-local" value="{}"></label>'
        '<label>until <input name="until" type="datetime-local" value="{}"></label>'
        '<button type="submit">Search</button></form>',
        states, query.function or "", tag, _local(query.since_ms), _local(query.until_ms),
    )  # fmt: skip


def _executions_table(rows: Sequence[Execution]) -> Html:
    if not rows:
        return html('<p class="empty">No execution matches.</p>')
    return html(
        '<table><thead><tr><th scope="col">execution</th><th scope="col">function</th>'
        '<th scope="col">state</th><th scope="col">created</th><th scope="col">settled</th>'
        "</tr></thead><tbody>{}</tbody></table>",
        join(
            html(
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                _execution_link(row.id),
                row.function or "",
                _state_badge(row.state),
                _time(row.created_on),
                _time(row.settled_on),
            )
            for row in rows
        ),
    )


def _next_link(path: str, query: ExecutionQuery, cursor: Cursor | None) -> Html:
    params = {k: v for k, v in _params(query).items() if v}
    return _more(path, None if cursor is None else str(cursor), params)


def _more(path: str, cursor: str | None, params: dict[str, str] | None = None) -> Html:
    """The link to the next page of a list, if there is one."""
    if cursor is None:
        return NOTHING
    query = urlencode({**(params or {}), "cursor": cursor})
    return html('<a class="next" href="{}">Next page</a>', f"{path}?{query}")


def _params(query: ExecutionQuery) -> dict[str, str]:
    return {
        "state": query.state or "",
        "function": query.function or "",
        "tag": f"{query.tag[0]}:{query.tag[1]}" if query.tag else "",
        "since": _local(query.since_ms),
        "until": _local(query.until_ms),
    }


def _summary(root: Node) -> Html:
    return html(
        '<dl class="summary"><dt>function</dt><dd>{}</dd><dt>state</dt><dd>{}</dd>'
        "<dt>task</dt><dd>{}</dd><dt>created</dt><dd>{}</dd><dt>settled</dt><dd>{}</dd>"
        "<dt>duration</dt><dd>{}</dd></dl>",
        root.function or "",
        _state_badge(root.state) if root.queued is None else _queued_badge(root),
        root.task or "none",
        _time(root.created_on),
        _time(root.settled_on),
        _duration(root.duration_ms),
    )


def execution_url(id: str) -> str:
    return "/console/execution?" + urlencode({"id": id})


def after(id: str) -> str:
    """Where an action on promise ``id`` leads back to: its execution's page."""
    return execution_url(origin(id))


def _execution_link(id: str) -> Html:
    return html('<a href="{}"><code>{}</code></a>', execution_url(id), id)


def _queued_badge(root: Node) -> Html:
    assert root.queued is not None
    return html('<span class="state state-queued">{}</span>', root.queued.text())


def _state_badge(state: object) -> Html:
    return html('<span class="state state-{}">{}</span>', state, str(state).replace("_", " "))


def _shown(value: Shown) -> Html:
    if value.decoded:
        return html("<pre>{}</pre>", msgspec.json.format(msgspec.json.encode(value.data)).decode())
    if value.data is None:
        return Html("—")
    return html('<code class="raw">{}</code> <span class="why">(raw: {})</span>',
                value.data, value.note)  # fmt: skip


def halt_reason(root: Node) -> str | None:
    """Why the execution last halted: the reason its latest halt record holds."""
    halts = [child for child in root.children if child.kind == "halt" and child.value.decoded]
    if not halts:
        return None
    data = halts[-1].value.data
    reason = data.get("reason") if isinstance(data, dict) else data
    return None if reason is None else str(reason)


def _time(ms: int | None) -> Html:
    """An instant in UTC, to the second (a thousand of them render in a few ms)."""
    if ms is None:
        return Html("—")
    at = time.gmtime(ms // 1000)
    day, clock = time.strftime("%Y-%m-%d", at), time.strftime("%H:%M:%S", at)
    return Html(f'<time datetime="{day}T{clock}Z">{day} {clock}</time>')  # digits only


def _local(ms: int | None) -> str:
    """A ``datetime-local`` field's value (UTC, as the console shows every time)."""
    if ms is None:
        return ""
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S")


def _duration(ms: int | None) -> str:
    if ms is None:
        return ""
    if ms < 1000:
        return f"{ms} ms"
    if ms < 60_000:
        return f"{ms / 1000:.1f} s"
    return f"{ms // 60_000} min {ms % 60_000 // 1000} s"
