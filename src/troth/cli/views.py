"""What ``troth tree`` and ``troth executions list`` read: a server's JSON API
(``GET /api/executions``, ``troth.server.api``) or, with ``--db``, the database file's own
``Views`` (the same index-backed queries, in this process). Either way the answer is the
same ``troth.views`` data, so a command draws it once.
"""

from __future__ import annotations

from typing import Any, Protocol
from urllib.parse import quote

import httpx

from troth.cli.errors import CliError, Exit, refused
from troth.cli.target import Target
from troth.sdk.errors import ServerError
from troth.storage.service import Views
from troth.views.executions import Cursor, Execution, ExecutionQuery, Page
from troth.views.tree import Node, build, from_json


class Reader(Protocol):
    async def executions(self, query: ExecutionQuery) -> Page: ...

    async def tree(self, id: str) -> Node:
        """The call tree of execution ``id``; ``CliError`` (not found) if there is none."""
        ...

    async def close(self) -> None: ...


def reader(target: Target) -> Reader:
    """The reader of the server or file ``target`` names."""
    app = target.app
    if app.url is not None:
        # Several URLs are one server's failover list: the first one answers reads.
        urls = app.url.split(",") if isinstance(app.url, str) else list(app.url)
        return _Remote(urls[0].strip(), app.token)
    from troth.sdk.local import LocalNetwork

    try:
        network = app.runtime.network
    except ServerError as e:  # the database file cannot be opened
        raise CliError(e.message, Exit.UNREACHABLE) from e
    assert isinstance(network, LocalNetwork)  # no url: the embedded database
    return _Stored(network.service)


def not_found(id: str) -> CliError:
    return CliError(f"execution {id!r}: not found", Exit.NOT_FOUND)


class _Stored:
    def __init__(self, views: Views) -> None:
        self._views = views

    async def executions(self, query: ExecutionQuery) -> Page:
        return await self._views.executions(query)

    async def tree(self, id: str) -> Node:
        records = await self._views.family(id)
        if not records:
            raise not_found(id)
        return build(id, records, await self._views.tasks([r.id for r in records]))

    async def close(self) -> None:
        pass  # the app's network owns the service


class _Remote:
    def __init__(self, url: str, token: str | None) -> None:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._url = url.rstrip("/")
        self._http = httpx.AsyncClient(base_url=self._url, headers=headers, timeout=30)

    async def executions(self, query: ExecutionQuery) -> Page:
        body = await self._get("/api/executions", "execution list", query.params())
        rows = [Execution.from_json(row) for row in body["executions"]]
        next = Cursor.parse(body["next"]) if body.get("next") else None
        return Page(rows, next)

    async def tree(self, id: str) -> Node:
        try:
            body = await self._get(f"/api/executions/{quote(id, safe='')}", f"execution {id!r}")
        except CliError as e:
            raise not_found(id) if e.code is Exit.NOT_FOUND else e from None
        return from_json(body["tree"])

    async def _get(self, path: str, what: str, params: dict[str, str] | None = None) -> Any:
        try:
            response = await self._http.get(path, params=params)
        except httpx.HTTPError as e:
            raise CliError(f"cannot reach the server {self._url}: {e}", Exit.UNREACHABLE) from e
        if response.status_code != 200:
            try:
                message = response.json()["error"]
            except (ValueError, KeyError, TypeError):
                message = response.text.strip() or response.reason_phrase
            raise refused(what, response.status_code, message)
        return response.json()

    async def close(self) -> None:
        await self._http.aclose()
