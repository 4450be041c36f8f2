"""Run the app under uvicorn (httptools, uvloop when installed) until SIGTERM or SIGINT.

Graceful shutdown: stop accepting connections, end every SSE stream (they never end on
their own, and uvicorn would otherwise wait its whole grace period for them), let in-flight
requests finish within ``shutdown_timeout``, then stop the loops and close storage. What
was acknowledged to a client is already committed, so a harder stop loses nothing either.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import signal
import socket
import sqlite3
from collections.abc import Callable, Generator
from typing import Any

import uvicorn

from troth.engine.timeouts import CatchUp
from troth.server import logs
from troth.server.access import AccessLog
from troth.server.app import App
from troth.server.auth import UNSIGNED, AuthConfigError
from troth.server.config import ServerConfig
from troth.server.connections import ConnectionGuard
from troth.server.ratelimit import RateLimit
from troth.server.sockets import CannotListen, listen
from troth.storage.service import Service
from troth.storage.sqlite.liveness import FileInUseError

log = logging.getLogger(__name__)


class _Server(uvicorn.Server):
    def __init__(self, config: uvicorn.Config, app: App) -> None:
        super().__init__(config)
        self._app = app

    async def shutdown(self, sockets: list | None = None) -> None:
        self._app.hub.close_all()
        await super().shutdown(sockets)

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        # uvicorn re-raises the signal after a graceful shutdown, which turns a clean stop
        # into death by SIGTERM; troth exits 0 instead.
        handled = (signal.SIGINT, signal.SIGTERM)
        previous = {sig: signal.signal(sig, self.handle_exit) for sig in handled}
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)


def is_postgres(db: str) -> bool:
    return db.startswith(("postgres://", "postgresql://"))


class StorageUnavailable(Exception):
    """The database cannot be opened; the message says why, without a password."""


def open_storage(config: ServerConfig) -> Service:
    """PostgreSQL for a ``postgres(ql)://`` URL (several servers may share it), else the
    SQLite file ``config.db`` (one server owns it). Raises ``StorageUnavailable`` when the
    database cannot be opened (``FileInUseError`` when another process owns the file)."""
    catch_up = CatchUp(window=config.schedule_catchup_window or None)
    if not is_postgres(config.db):
        from troth.storage.sqlite import SqliteService
        from troth.storage.sqlite.unopenable import why_unopenable

        try:
            return SqliteService(
                config.db,
                retry_timeout=config.tasks_retry_timeout,
                owner="server",
                catch_up=catch_up,
            )
        except (OSError, sqlite3.Error) as e:
            raise StorageUnavailable(why_unopenable(config.db, e)) from e
    import psycopg

    from troth.storage.postgres import PostgresService

    try:
        return PostgresService(
            config.db,
            retry_timeout=config.tasks_retry_timeout,
            pool_size=config.pg_pool_size,
            catch_up=catch_up,
        )
    except psycopg.Error as e:
        # psycopg's first line names the host and port (never the password); the rest is
        # a hint ("Is the server running...?") that would make it several lines.
        raise StorageUnavailable(str(e).strip().splitlines()[0]) from e


def shown_db(db: str) -> str:
    """``db`` for the log: a PostgreSQL URL without its password."""
    if not is_postgres(db):
        return db
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    params = conninfo_to_dict(db)
    if "password" in params:
        params["password"] = "***"
    return make_conninfo("", **params)


def uvicorn_config(app: Any, config: ServerConfig) -> uvicorn.Config:
    """How ``troth serve`` runs an ASGI app; the benchmark serves its echo app the same way."""
    guard = ConnectionGuard(
        read_timeout_ms=config.request_read_timeout,
        max_connections=config.max_connections,
        write_timeout_ms=config.write_timeout,
        max_buffered_bytes=config.max_buffered_bytes,
    )
    if config.rate_limit > 0:
        app = RateLimit(app, config.rate_limit)
    if config.access_log or config.log_level.lower() == "debug":
        app = AccessLog(app)  # outermost: a request the rate limit refuses is logged too
    return uvicorn.Config(
        app,
        host=config.bind,
        port=config.port,
        http=guard.protocol,  # httptools, with the bounds of ``troth.server.connections``
        ws="none",  # no WebSocket route: an upgraded connection would escape the guard
        lifespan="on",
        access_log=False,
        log_config=None,
        log_level=config.log_level.lower(),
        # uvicorn annotates this `int`, but only hands it to asyncio.wait_for, which takes
        # seconds as a float; a grace period in milliseconds is meant to keep its fraction.
        timeout_graceful_shutdown=config.shutdown_timeout / 1000,  # type: ignore[arg-type]
        server_header=False,
    )


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a host name: it may resolve to anything


def warn_if_exposed(config: ServerConfig) -> None:
    """One line at startup when anyone who can reach the server may do anything on it."""
    if config.auth_publickey == UNSIGNED:
        log.warning(
            "auth runs in unsigned mode (--auth-publickey none): token signatures are NOT"
            " checked, so anyone can forge an admin token; for development only"
        )
    if not config.authenticates and not is_loopback(config.bind):
        log.warning(
            "serving WITHOUT AUTHENTICATION on %s: anyone who reaches port %d can read,"
            " settle and delete every promise; set --auth-publickey or --auth-token"
            " (docs/security.md)",
            config.bind,
            config.port,
        )


def run(config: ServerConfig) -> int:
    """Serve until told to stop; the process exit code (1 when it cannot start: the
    reason is one line of the log)."""
    logs.configure(config.log_level, config.log_format)

    async def main() -> int:
        try:
            # First, so a taken port is found before the database is opened.
            sockets = listen(config.bind, config.port)
        except CannotListen as e:
            log.error("troth serve: %s", e)
            return 1
        try:
            return await serve(config, sockets)
        finally:
            for sock in sockets:
                sock.close()

    with asyncio.Runner(loop_factory=loop_factory()) as runner:
        return runner.run(main())


async def serve(config: ServerConfig, sockets: list[socket.socket]) -> int:
    """Open the database and serve on ``sockets`` until told to stop; the exit code."""
    try:
        storage = open_storage(config)
    except FileInUseError as e:
        log.error("troth serve: %s", e)
        return 1
    except StorageUnavailable as e:
        log.error("troth serve: cannot open the database %s: %s", shown_db(config.db), e)
        return 1
    try:
        app = App(storage, config)
    except AuthConfigError as e:
        log.error("troth serve: %s", e)
        await storage.close()
        return 1
    server = _Server(uvicorn_config(app, config), app)
    log.info(
        "troth serving at %s (bind %s:%d, db %s, debug %s)",
        config.url,
        config.bind,
        config.port,
        shown_db(config.db),
        "on" if config.debug else "off",
    )
    warn_if_exposed(config)
    await server.serve(sockets)
    return 0 if server.started else 1


def loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop
