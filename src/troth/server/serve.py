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
import sqlite3
import sys
from collections.abc import Callable, Generator
from typing import Any

import uvicorn

from troth.engine.timeouts import CatchUp
from troth.server.app import App
from troth.server.auth import UNSIGNED, AuthConfigError
from troth.server.config import ServerConfig
from troth.server.connections import ConnectionGuard
from troth.server.ratelimit import RateLimit
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


def open_storage(config: ServerConfig) -> Service:
    """PostgreSQL for a ``postgres(ql)://`` URL (several servers may share it), else the
    SQLite file ``config.db`` (one server owns it)."""
    catch_up = CatchUp(window=config.schedule_catchup_window or None)
    if not is_postgres(config.db):
        from troth.storage.sqlite import SqliteService

        return SqliteService(
            config.db,
            retry_timeout=config.tasks_retry_timeout,
            owner="server",
            catch_up=catch_up,
        )
    from troth.storage.postgres import PostgresService

    return PostgresService(
        config.db,
        retry_timeout=config.tasks_retry_timeout,
        pool_size=config.pg_pool_size,
        catch_up=catch_up,
    )


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
    return uvicorn.Config(
        RateLimit(app, config.rate_limit) if config.rate_limit > 0 else app,
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
    """Serve until told to stop; the process exit code."""
    logging.basicConfig(
        stream=sys.stderr,
        level=config.log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )

    async def main() -> int:
        try:
            storage = open_storage(config)
        except FileInUseError as e:
            log.error("troth serve: %s", e)
            return 1
        except (OSError, sqlite3.Error) as e:
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
        await server.serve()
        return 0 if server.started else 1

    with asyncio.Runner(loop_factory=loop_factory()) as runner:
        return runner.run(main())


def loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop
