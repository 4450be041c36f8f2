"""Where a command's requests go: a server (``--url``/``TROTH_URL``, ``--token``/
``TROTH_TOKEN``) or an embedded database file (``--db``/``TROTH_DB``), and how a command runs.

The connection is a ``Troth`` app that is never started: its network is the SDK's own
(``troth.sdk.http.HttpNetwork`` or, embedded, ``troth.sdk.local.LocalNetwork``), so the
CLI sends exactly the requests the SDK sends, with the same envelope, auth and checks.
It retries an unreachable server for a few seconds only (``REQUEST_RETRY``, long enough to
ride out a restart, not the SDK's half minute): a person or a script is waiting, and exit
code 3 tells them soon.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
from collections.abc import Awaitable, Callable, Collection
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from troth.cli.errors import CliError, Exit, refused
from troth.protocol.kinds import Kind
from troth.protocol.requests import Data
from troth.protocol.responses import Reply
from troth.sdk.errors import NetworkError, ServerError

if TYPE_CHECKING:
    from troth.sdk.app import Troth

    Commands = argparse._SubParsersAction[argparse.ArgumentParser]
else:
    Commands = argparse._SubParsersAction

REQUEST_RETRY = timedelta(seconds=5)


def options() -> argparse.ArgumentParser:
    """The connection and output options every operator command takes (as a parent)."""
    shared = argparse.ArgumentParser(add_help=False)
    where = shared.add_argument_group("connection")
    where.add_argument("--url", help="the server, e.g. http://127.0.0.1:8001 (env TROTH_URL)")
    where.add_argument("--db", metavar="PATH", help="an embedded database file (env TROTH_DB)")
    where.add_argument("--token", help="the bearer token, if auth is on (env TROTH_TOKEN)")
    shared.add_argument("--json", action="store_true", help="print JSON instead of a table")
    return shared


def paged(parser: argparse.ArgumentParser) -> None:
    """``--limit`` and ``--cursor``, for a search that answers a page at a time."""
    parser.add_argument("--limit", type=int, metavar="N", help="at most N per page")
    parser.add_argument("--cursor", help="the page after this one (printed under a page)")


def subject(commands: Commands, name: str, help: str) -> Commands:
    """``troth NAME ...``: a subject with subcommands of its own (``troth promises get``)."""
    parser = commands.add_parser(name, help=help, description=help)
    return parser.add_subparsers(dest="action", required=True, metavar="ACTION")


Body = Callable[["Target", argparse.Namespace], Awaitable[int]]


def connected(body: Body) -> Callable[[argparse.Namespace], int]:
    """A command that runs ``body`` against the target its options name."""

    def run(args: argparse.Namespace) -> int:
        return asyncio.run(_connected(body, args))

    return run


async def _connected(body: Body, args: argparse.Namespace) -> int:
    # The SDK logs retries and failures for a long-running process; a command says what
    # went wrong in its one line instead (Python would otherwise print the records itself).
    logging.getLogger("troth").addHandler(logging.NullHandler())
    target = Target(_app(args))
    try:
        return await body(target, args)
    except NetworkError as e:
        raise CliError(f"cannot reach the {target.app.mode}: {e}", Exit.UNREACHABLE) from e
    except ServerError as e:  # a request the SDK sent (``invoke``, ``schedules create``)
        if e.kind == "open":  # the embedded database cannot be opened
            raise CliError(e.message, Exit.UNREACHABLE) from e
        raise refused(e.kind, e.status, e.message) from e
    finally:
        await target.app.stop()


def _app(args: argparse.Namespace) -> Troth:
    from troth.sdk.app import Troth
    from troth.sdk.http import server_urls

    url = args.url or os.environ.get("TROTH_URL") or None
    db = args.db or (None if args.url else os.environ.get("TROTH_DB")) or None
    if url is None and db is None:
        raise CliError(
            "no server or database: give --url URL (or TROTH_URL) or --db PATH", Exit.USAGE
        )
    if url is not None and db is not None:
        raise CliError("give either --url or --db, not both", Exit.USAGE)
    if url is not None:
        try:
            url = ",".join(server_urls(url))
        except ValueError as e:
            raise CliError(str(e), Exit.USAGE) from None
    if db is not None and not os.path.isfile(db):
        raise CliError(f"no database file {db!r}", Exit.UNREACHABLE)
    token = args.token or os.environ.get("TROTH_TOKEN") or None
    return Troth(url=url, db=db, token=token, request_retry=REQUEST_RETRY)


class Target:
    """A server or a database file, reached through the SDK's network."""

    def __init__(self, app: Troth) -> None:
        self.app = app

    def now(self) -> int:
        """The wall clock, in ms since the epoch (deadlines are given from now)."""
        return self.app.clock.now()

    async def send(self, kind: Kind, data: Data) -> Reply:
        """One request; the reply whatever its status."""
        return await self.app.runtime.network.send(kind, data)

    async def call(
        self, kind: Kind, data: Data, what: str, expected: Collection[int] = (200,)
    ) -> Any:
        """The body of the reply to one request about ``what`` (``promise 'x'``), or the
        ``CliError`` for a status not ``expected``."""
        status, body = await self.send(kind, data)
        if status not in expected:
            raise refused(what, status, str(body))
        return body
