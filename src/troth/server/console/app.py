"""Routing, authentication and the actions of the console (see the package docstring)."""

from __future__ import annotations

import hashlib
import logging
import secrets
from collections.abc import Sequence
from importlib.resources import files
from urllib.parse import parse_qs

from troth.protocol.kinds import Kind
from troth.protocol.queues import (
    QueueGetRequest,
    QueueResponse,
    QueueSearchRequest,
    QueueSearchResponse,
)
from troth.protocol.records import PromiseRecord, SettleState, TaskRecord, TaskState
from troth.protocol.requests import (
    PromiseGetRequest,
    ScheduleSearchRequest,
    TaskGetRequest,
    TaskSearchRequest,
)
from troth.protocol.responses import (
    PromiseResponse,
    Reply,
    ScheduleSearchResponse,
    TaskGetResponse,
    TaskSearchResponse,
)
from troth.server.asgi import (
    BodyTooLarge,
    Disconnected,
    Receive,
    Scope,
    Send,
    header,
    read_body,
    respond,
)
from troth.server.auth import Auth, Denied, Grant
from troth.server.console import forms
from troth.server.console.calls import Calls
from troth.server.console.markup import Html
from troth.server.console.pages import NOTHING, Page, after, halt_reason
from troth.server.console.session import Visitor, visitor
from troth.server.rpc import Rpc
from troth.storage.service import Views
from troth.views import actions
from troth.views.tree import Node, build, queue_question, with_queue

log = logging.getLogger(__name__)

HTML = b"text/html; charset=utf-8"
# Pages are the console's own markup and files only: no inline script, no other origin.
_HEADERS = [
    (
        b"content-security-policy",
        b"default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:;"
        b" form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    ),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"same-origin"),
    (b"cache-control", b"no-store"),
]
_FORM_LIMIT = 64 * 1024  # bytes: a form is an id, a token and a JSON value
_STATIC = {"console.css": b"text/css; charset=utf-8", "console.js": b"text/javascript"}
_PAGE_SIZE = 50


class Console:
    def __init__(self, views: Views, rpc: Rpc, auth: Auth | None, *, read_only: bool) -> None:
        self._views = views
        self._calls = Calls(rpc)
        self._auth = auth
        self._read_only = read_only

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path: str = scope["path"].removeprefix("/console")
        method: str = scope["method"]
        you = visitor(scope)
        if path.startswith("/static/"):
            await self._static(path.removeprefix("/static/"), method, send)
            return
        page = Page(
            you.csrf,
            actions=not self._read_only,
            logged_in=self._auth is not None and bool(you.token),
        )
        if path == "/login":
            await self._login(scope, receive, send, you, page)
            return
        if path == "/logout" and method == "POST":
            await self._logout(scope, receive, send, you, page)
            return
        try:
            grant = self._grant(you)
        except Denied as e:
            await _page(
                send,
                e.status,
                page.login()
                if e.status == 401
                else page.message("Forbidden", "This token may not see this."),
                you,
            )
            return
        if path.startswith("/actions/") and method == "POST":
            await self._act(path.removeprefix("/actions/"), scope, receive, send, you, page)
            return
        if method not in ("GET", "HEAD"):
            await _page(send, 405, page.message("Method not allowed", f"{method} {path}"), you)
            return
        query = {
            k: v[-1] for k, v in parse_qs(scope.get("query_string", b"").decode("latin-1")).items()
        }
        etag = None
        try:
            seen = header(scope, b"if-none-match")
            status, body, etag = await self._read(path, query, grant, you, page, seen)
        except Denied as e:
            status, body = e.status, page.message("Forbidden", "This token may not see this.")
        except forms.Invalid as e:
            status, body = 400, page.message("Bad request", str(e))
        except Exception:  # storage failing: say so, and leave the details to the log
            error = secrets.token_hex(6)
            log.exception("console page %s failed [error %s]", path, error)
            text = f"The page could not be read (error {error}: see the server log)."
            status, body = 500, page.message("Internal error", text)
        tag = [(b"etag", etag.encode())] if etag is not None else []
        if status == 304:
            await respond(send, 304, extra=tag)
        else:
            await _page(send, status, body, you, tag)

    def _grant(self, you: Visitor) -> Grant | None:
        if self._auth is None:
            return None
        return self._auth.authenticate(you.token)

    async def _read(
        self,
        path: str,
        query: dict[str, str],
        grant: Grant | None,
        you: Visitor,
        page: Page,
        seen: bytes | None,
    ) -> tuple[int, Html, str | None]:
        """The page at ``path``, its status, and for the live part of an execution's page
        an ETag: the script polls it every second, and an unchanged execution (the usual
        answer) costs a read and a hash instead of rendering its whole tree again."""
        if path in ("", "/"):
            _unscoped(grant)
            search = forms.execution_query(query, _PAGE_SIZE)
            found = await self._views.executions(search)
            return 200, page.executions(search, found.executions, found.next), None
        if path in ("/execution", "/execution/live"):
            id = forms.required(query, "id")
            if grant is not None:
                grant.check_ids([id])
            records = await self._views.family(id)
            if not records:
                missing = page.message("Not found", f"There is no execution {id}.", "/console")
                return 404, missing, None
            task = await self._task(id, you.token)
            tasks = {id: task.state} if task is not None else {}
            root = await self._queued(build(id, records, tasks), you.token)
            etag = _fingerprint(records, tasks, page)
            if root.queued is not None:  # the line moves without the execution changing
                etag += f"-q{root.queued.position}"
            if path == "/execution":
                return 200, page.execution(root, etag), None
            if seen == etag.encode():
                return 304, NOTHING, etag
            return 200, page.live(root), etag
        if path == "/halted":
            _unscoped(grant)
            halted = TaskSearchRequest(TaskState.HALTED, _PAGE_SIZE, query.get("cursor") or None)
            reply = await self._calls(Kind.TASK_SEARCH, halted, you.token)
            if not isinstance(reply.body, TaskSearchResponse):
                return reply.status, page.message("Cannot list halted tasks", str(reply.body)), None
            rows = [(task, await self._halt_reason(task.id)) for task in reply.body.tasks]
            return 200, page.halted(rows, reply.body.cursor), None
        if path == "/schedules":
            _unscoped(grant)
            reply = await self._calls(
                Kind.SCHEDULE_SEARCH,
                ScheduleSearchRequest(limit=_PAGE_SIZE, cursor=query.get("cursor") or None),
                you.token,
            )
            if not isinstance(reply.body, ScheduleSearchResponse):
                return reply.status, page.message("Cannot list schedules", str(reply.body)), None
            return 200, page.schedules(reply.body.schedules, reply.body.cursor), None
        if path == "/queues":
            _unscoped(grant)
            listing = QueueSearchRequest(limit=_PAGE_SIZE, cursor=query.get("cursor") or None)
            reply = await self._calls(Kind.QUEUE_SEARCH, listing, you.token)
            if not isinstance(reply.body, QueueSearchResponse):
                return reply.status, page.message("Cannot list queues", str(reply.body)), None
            return 200, page.queues(reply.body.queues, reply.body.cursor), None
        if path == "/queue":
            _unscoped(grant)
            name = forms.required(query, "name")
            reply = await self._calls(Kind.QUEUE_GET, QueueGetRequest(name), you.token)
            if reply.status == 404:
                missing = page.message("Not found", f"There is no queue {name}.", "/console/queues")
                return 404, missing, None
            if not isinstance(reply.body, QueueResponse):
                return reply.status, page.message("Cannot read the queue", str(reply.body)), None
            return 200, page.queue(reply.body.queue), None
        return 404, page.message("Not found", "The console has no such page.", "/console"), None

    async def _queued(self, root: Node, token: str | None) -> Node:
        """``root`` with where it waits, if it is queued (a scoped token may not read
        queues: the page then shows it pending)."""
        question = queue_question(root)
        if question is None:
            return root
        return with_queue(root, await self._calls(Kind.QUEUE_GET, question, token))

    async def _halt_reason(self, id: str) -> str | None:
        records = await self._views.family(id)
        return halt_reason(build(id, records)) if records else None

    async def _task(self, id: str, token: str | None) -> TaskRecord | None:
        reply = await self._calls(Kind.TASK_GET, TaskGetRequest(id), token)
        return reply.body.task if isinstance(reply.body, TaskGetResponse) else None

    async def _act(
        self, verb: str, scope: Scope, receive: Receive, send: Send, you: Visitor, page: Page
    ) -> None:
        form = await _form(scope, receive)
        if form is None:
            await _page(send, 400, page.message("Bad request", "The form could not be read."), you)
        elif you.forged(scope, form):
            await _page(send, 403, page.message(
                "Forbidden", "This form did not come from this console: reload the page and"
                " try again."), you)  # fmt: skip
        elif self._read_only:
            await _page(send, 403, page.message("Read-only", "This console is read-only"
                                                " (--console-read-only)."), you)  # fmt: skip
        elif verb not in _ACTIONS:
            await _page(send, 404, page.message("Not found", f"No action {verb!r}."), you)
        else:
            await self._confirmed(verb, form, send, you, page)

    async def _confirmed(
        self, verb: str, form: dict[str, str], send: Send, you: Visitor, page: Page
    ) -> None:
        try:
            id = forms.required(form, "id")
            value = forms.json_value(form) if verb in ("resolve", "reject") else None
        except forms.Invalid as e:
            await _page(send, 400, page.message("Bad request", str(e)), you)
            return
        if form.get("confirmed") != "yes":
            await _page(send, 200, page.confirm(verb, id, form.get("value")), you)
            return
        replies = await self._send(verb, id, value, you.token)
        failed = next((r for r in replies if r.status not in (200, 300)), None)
        back = after(id)
        if failed is not None:
            text = f"{verb} {id} was refused ({failed.status}): {failed.body}"
            await _page(send, failed.status, page.message("Not done", text, back), you)
            return
        await respond(send, 303, extra=[(b"location", back.encode()), *you.cookies()])

    async def _send(self, verb: str, id: str, value: object, token: str | None) -> list[Reply]:
        """The protocol requests of ``verb`` (``troth.views.actions``), sent in order until
        one is refused."""
        if verb == "continue":
            return [await self._calls(Kind.TASK_CONTINUE, actions.resume(id), token)]
        if verb in ("resolve", "reject"):
            state = SettleState.RESOLVED if verb == "resolve" else SettleState.REJECTED
            return [await self._calls(Kind.PROMISE_SETTLE, actions.settle(id, state, value), token)]
        found = await self._calls(Kind.PROMISE_GET, PromiseGetRequest(id), token)
        if not isinstance(found.body, PromiseResponse):
            return [found]
        create, settle = actions.cancel(found.body.promise, _CANCEL_REASON)
        if create is not None:
            created = await self._calls(Kind.PROMISE_CREATE, create, token)
            if created.status != 200:
                return [created]
        return [await self._calls(Kind.PROMISE_SETTLE, settle, token)]

    async def _login(
        self, scope: Scope, receive: Receive, send: Send, you: Visitor, page: Page
    ) -> None:
        if self._auth is None:
            await respond(send, 303, extra=[(b"location", b"/console")])
            return
        if scope["method"] != "POST":
            await _page(send, 200, page.login(), you)
            return
        form = await _form(scope, receive)
        if form is None or you.forged(scope, form):
            await _page(send, 403, page.login("Reload the page and log in again."), you)
            return
        token = form.get("token", "").strip()
        try:
            self._auth.authenticate(forms.token(token))
        except (Denied, forms.Invalid):
            await _page(send, 401, page.login("This token is not accepted."), you)
            return
        await respond(
            send, 303, extra=[(b"location", b"/console"), you.login_cookie(token), *you.cookies()]
        )

    async def _logout(
        self, scope: Scope, receive: Receive, send: Send, you: Visitor, page: Page
    ) -> None:
        form = await _form(scope, receive)
        if form is None or you.forged(scope, form):
            await _page(send, 403, page.message("Forbidden", "Reload the page first."), you)
            return
        await respond(send, 303, extra=[(b"location", b"/console/login"), you.logout_cookie()])

    async def _static(self, name: str, method: str, send: Send) -> None:
        kind = _STATIC.get(name)
        if kind is None or method not in ("GET", "HEAD"):
            await respond(send, 404)
            return
        body = files(__package__).joinpath("static", name).read_bytes()
        await respond(send, 200, body, kind, extra=[(b"cache-control", b"max-age=300")])


_ACTIONS = ("continue", "cancel", "resolve", "reject")
_CANCEL_REASON = "canceled from the console"


def _unscoped(grant: Grant | None) -> None:
    """Lists are searches: as on ``POST /``, only an unscoped token may search."""
    if grant is not None:
        grant.check_ids(None)


async def _form(scope: Scope, receive: Receive) -> dict[str, str] | None:
    """An urlencoded form body, or None if it is not one or too long."""
    try:
        body = await read_body(scope, receive, _FORM_LIMIT)
    except (BodyTooLarge, Disconnected):
        return None
    try:
        pairs = parse_qs(body.decode("utf-8"), keep_blank_values=True, strict_parsing=False)
    except (UnicodeDecodeError, ValueError):
        return None
    return {k: v[-1] for k, v in pairs.items()}


async def _page(
    send: Send,
    status: int,
    body: Html,
    you: Visitor,
    extra: Sequence[tuple[bytes, bytes]] = (),
) -> None:
    headers = [*_HEADERS, *you.cookies(), *extra]
    await respond(send, status, body.encode(), HTML, extra=headers)


def _fingerprint(records: list[PromiseRecord], tasks: dict[str, TaskState], page: Page) -> str:
    """What the live part of an execution's page is drawn from: its promises' states (a
    promise changes only by settling), its task's state, and the visitor's page."""
    digest = hashlib.blake2b(digest_size=16)
    for r in records:
        digest.update(f"{r.id}\0{r.state}\0{r.settled_at}\n".encode())
    digest.update(f"{sorted(tasks.items())}\0{page.csrf}\0{page.actions}".encode())
    return f'"{digest.hexdigest()}"'
