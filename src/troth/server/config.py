"""Everything ``troth serve`` can be told, with its defaults, in one frozen record.

Each field is also a command-line flag (``--tasks-retry-timeout``) and an environment
variable (``TROTH_TASKS_RETRY_TIMEOUT``); ``troth.cli`` builds both from the fields and
their ``help``, so a new setting is added in exactly one place.

Units: a duration is a whole number of milliseconds, as on the wire (``timeoutAt``, ``ttl``)
and in every flag here. Constructors across troth follow suit: a duration parameter is an
``int`` named ``*_ms`` and is passed by keyword, so ``Pusher(timeout_ms=...)`` cannot be
given seconds by mistake; a class turns it into seconds only where asyncio wants them.
Names the specification gives keep its spelling (the machine's ``retry_timeout``, a task's
``ttl``) and are milliseconds too; the SDK's public API takes ``timedelta``, which carries
its unit.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from troth.server.targets import PushAllowList

LOG_FORMATS = ("text", "json")


def _setting(default: Any, help: str) -> Any:
    return field(default=default, metadata={"help": help})


@dataclass(frozen=True)
class ServerConfig:
    host: str | None = _setting(
        None,
        "address to bind; unlike the reference server, troth without auth listens on loopback"
        " only, unless given an address (then it warns at startup that it serves without"
        " authentication)",
    )
    port: int = _setting(8001, "port to listen on")
    db: str = _setting(
        "troth-server.db",
        "SQLite database file (not the embedded SDK's troth.db), or a postgresql:// URL shared"
        " by several servers",
    )
    debug: bool = _setting(False, "enable debug.* kinds and honour head['resonate:debug_time']")
    server_url: str | None = _setting(
        None, "URL sent to workers as serverUrl in execute messages; http://HOST:PORT if unset"
    )
    tasks_retry_timeout: int = _setting(
        5000, "ms until an unclaimed pending task's execute is sent again"
    )
    max_body_bytes: int = _setting(2 * 1024 * 1024, "largest request body accepted (413 beyond)")
    cors_origins: str | None = _setting(
        None,
        "comma-separated origins (scheme://host[:port]) whose web pages may call this server"
        " from a browser, or '*' for any; unset: none may (no CORS headers are sent)",
    )

    request_read_timeout: int = _setting(
        30000,
        "ms a request may take to arrive, head and body, counted from its first byte (or from"
        " when the connection opened or went idle); a slower one's connection is closed",
    )
    max_connections: int = _setting(
        0,
        "HTTP connections open at once (0: three quarters of the open-files limit); at the cap"
        " the connection waiting longest for its request is closed, or the new one gets 503",
    )
    write_timeout: int = _setting(
        30000,
        "ms a response may wait in the server's buffer without the client reading any of it;"
        " then the connection is closed",
    )
    max_buffered_bytes: int = _setting(
        64 * 1024 * 1024,
        "response bytes waiting for slow readers, all connections together; beyond it the"
        " connections that read least recently are closed",
    )
    rate_limit: int = _setting(
        0,
        "requests per second per client address (IPv6: per /64), bursts of one second's worth;"
        " more are answered 429 with Retry-After (0: no limit)",
    )

    poll_max_connections: int = _setting(1000, "open SSE connections allowed (503 beyond)")
    poll_max_per_group: int = _setting(500, "open SSE connections allowed per worker group")
    poll_max_per_client: int = _setting(
        500, "open SSE connections allowed per client credentials (with auth on)"
    )
    poll_buffer_size: int = _setting(100, "frames queued per SSE connection before it is full")
    poll_keepalive: int = _setting(10000, "ms between ': keepalive' comment frames")
    poll_write_timeout: int = _setting(
        5000,
        "ms a frame may wait to be written; a stream slower than that has stopped reading"
        " and is closed, and delivery tries elsewhere",
    )
    poll_unblock_hold: int = _setting(
        10000,
        "ms an unblock written to a stream waits to be confirmed: acknowledged (streams"
        " opened with ?ack=1, else the stream is closed) or, without acknowledgements, the"
        " stream still open; one whose stream ends first is sent again",
    )

    push_concurrency: int = _setting(256, "HTTP push requests in flight at once")
    push_timeout: int = _setting(10000, "ms for one HTTP push request, connecting included")
    push_retries: int = _setting(3, "HTTP push attempts per delivery round")
    push_backoff: int = _setting(100, "ms before the second push attempt; doubles per failure")
    push_backoff_max: int = _setting(60000, "ms at most between push attempts or rounds")
    push_allow: str = _setting(
        "public",
        "HTTP push targets allowed, comma-separated: public, loopback, private, *, addresses,"
        " CIDRs, host names (*.example.com), each optionally with :port and scheme://"
        " (docs/delivery.md); loopback, private and link-local addresses only when listed",
    )
    push_allow_credentials: bool = _setting(
        False, "allow user:password@ in push URLs (sent as Basic auth)"
    )

    delivery_batch_size: int = _setting(100, "outbox messages read per delivery pass")
    delivery_interval: int = _setting(1000, "ms between delivery passes when nothing changes")
    delivery_claim_ttl: int = _setting(
        10000, "ms a server's claim on an outbox message keeps other servers off it"
    )
    timeouts_max_sleep: int = _setting(
        1000, "ms the timeouts loop sleeps at most before looking for deadlines again"
    )
    schedule_catchup_window: int = _setting(
        0,
        "ms a missed schedule occurrence may be late and still be created; one later"
        " than that is skipped (0: none skipped, every missed occurrence is created, as in Lean)",
    )

    auth_publickey: str | None = _setting(
        None,
        "PEM public key (RSA, EC or Ed25519) that verifies the JWTs of POST / and /poll;"
        " 'none': the reference's unsigned mode (claims read, signatures NOT checked)",
    )
    auth_iss: str | None = _setting(None, "JWT issuer required in every token (claim iss)")
    auth_aud: str | None = _setting(None, "JWT audience required in every token (claim aud)")
    auth_token: str | None = _setting(
        None,
        "a shared secret: a request bearing it as its token has full access (set it in the"
        " environment: a flag shows in ps)",
    )
    push_auth_token: str | None = _setting(
        None, "token sent as 'Authorization: Bearer' with every HTTP push"
    )

    console: bool = _setting(True, "serve the web console at /console (docs/console.md)")
    console_read_only: bool = _setting(
        False, "the web console shows everything but offers no action and refuses every one"
    )

    pg_pool_size: int = _setting(10, "PostgreSQL connections per server (with a postgresql:// db)")

    metrics: bool = _setting(True, "serve Prometheus metrics at GET /metrics (docs/metrics.md)")
    metrics_token: str | None = _setting(
        None,
        "a token GET /metrics must bear ('Authorization: Bearer'); unset: /metrics is open"
        " (set it in the environment: a flag shows in ps)",
    )

    shutdown_timeout: int = _setting(10000, "ms to finish in-flight requests on SIGTERM/SIGINT")
    log_level: str = _setting("info", "debug, info, warning or error")
    log_format: str = _setting(
        "text",
        "text (time level logger: message) or json (one object per line, the ids as fields);"
        " uvicorn's lines too (docs/logging.md)",
    )
    access_log: bool = _setting(
        False,
        "log every HTTP request (method, path, kind, ids, status, duration), whatever the"
        " --log-level; on at --log-level debug",
    )

    def __post_init__(self) -> None:
        PushAllowList(self.push_allow)  # a bad entry stops the server at startup, named
        if self.log_format not in LOG_FORMATS:
            raise ValueError(
                f"log format {self.log_format!r} is not one of {', '.join(LOG_FORMATS)}"
            )

    @property
    def authenticates(self) -> bool:
        """Whether every client must prove who it is: unsigned mode proves nothing, even
        beside a static token, since anyone can mint an admin JWT for it."""
        if self.auth_publickey == "none":
            return False
        return self.auth_token is not None or self.auth_publickey is not None

    @property
    def bind(self) -> str:
        """The address to listen on: the one given, else loopback unless auth is on."""
        if self.host is not None:
            return self.host
        return "0.0.0.0" if self.authenticates else "127.0.0.1"

    @property
    def url(self) -> str:
        """The URL workers are told to call back on (``head.serverUrl``)."""
        if self.server_url:
            return self.server_url
        # A wildcard bind address is not something a worker can connect to.
        host = "localhost" if self.bind in ("0.0.0.0", "::", "") else self.bind
        if ":" in host:
            host = f"[{host}]"
        return f"http://{host}:{self.port}"
