"""The JSON read API of the operator's views, beside the protocol on the same port.

| route                             | answer                                                  |
|-----------------------------------|---------------------------------------------------------|
| ``GET /api/executions``           | a page of executions: ``{"executions": [...], "next"}`` |
| ``GET /api/executions/{id}``      | an execution's call tree: ``{"tree": {...}}``           |

The list takes ``state``, ``function``, ``tag=key:value``, ``since``, ``until`` (ms since
the epoch), ``cursor`` (a page's ``next``) and ``limit``
(``troth.views.executions.ExecutionQuery.parse``). A bad parameter is a 400 whose body
names it (``{"error", "field"}``); an unknown id is a 404. Auth is the protocol's: with
auth on, a request needs a bearer token; listing is a search, so it needs an unscoped
token, and a tree is read with a token whose prefix covers the id.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qsl, unquote

import msgspec

from troth.server.asgi import JSON, Receive, Scope, Send, respond
from troth.server.auth import Auth, Denied, bearer
from troth.storage.service import Views
from troth.views.executions import ExecutionQuery, QueryError
from troth.views.tree import build, to_json

PREFIX = "/api/executions"


class Api:
    """``/api/executions`` and below (``path`` as the app matched it)."""

    def __init__(self, views: Views, auth: Auth | None) -> None:
        self._views = views
        self._auth = auth

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["method"] not in ("GET", "HEAD"):
            await _answer(send, 405, {"error": f"{scope['method']} is not allowed here: GET"})
            return
        raw: bytes = scope.get("raw_path") or scope["path"].encode()
        rest = raw.split(b"?", 1)[0].decode("latin-1")[len(PREFIX) :]
        try:
            grant = self._auth.authenticate(bearer(scope["headers"])) if self._auth else None
            if rest in ("", "/"):
                if grant is not None:
                    grant.check_ids(None)  # a search names no ids
                await self._list(scope, send)
            elif rest.startswith("/") and "/" not in rest[1:]:
                id = unquote(rest[1:], errors="strict")
                if grant is not None:
                    grant.check_ids([id])
                await self._tree(id, send)
            else:
                await _answer(send, 404, {"error": "no such resource"})
        except Denied as e:
            await _answer(send, e.status, {"error": e.message})
        except UnicodeDecodeError:
            await _answer(send, 400, {"error": "the id is not UTF-8", "field": "id"})

    async def _list(self, scope: Scope, send: Send) -> None:
        pairs = parse_qsl(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True)
        params: dict[str, str] = {}
        for key, value in pairs:
            if key in params:
                await _answer(send, 400, {"error": f"{key}: given twice", "field": key})
                return
            params[key] = value
        try:
            query = ExecutionQuery.parse(params)
        except QueryError as e:
            await _answer(send, 400, {"error": str(e), "field": e.field})
            return
        page = await self._views.executions(query)
        executions = [execution.to_json() for execution in page.executions]
        next = str(page.next) if page.next is not None else None
        await _answer(send, 200, {"executions": executions, "next": next})

    async def _tree(self, id: str, send: Send) -> None:
        records = await self._views.family(id)
        if not records:
            await _answer(send, 404, {"error": f"no execution {id!r}", "field": "id"})
            return
        tasks = await self._views.tasks([record.id for record in records])
        await _answer(send, 200, {"tree": to_json(build(id, records, tasks))})


async def _answer(send: Send, status: int, body: dict[str, Any]) -> None:
    await respond(send, status, msgspec.json.encode(body), JSON)
