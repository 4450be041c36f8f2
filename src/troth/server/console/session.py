"""Who is using the console, and whether a form post really comes from one of its pages.

A browser cannot attach a bearer token to a link or a form, so with auth on the console
asks for the token once (``/console/login``) and keeps it in a cookie that scripts cannot
read (``HttpOnly``) and that other sites' pages cannot make the browser send
(``SameSite=Strict``), limited to ``/console``. Every page and every action then
authenticates that token exactly as ``POST /`` authenticates a bearer token
(``troth.server.auth``): the console grants nothing of its own.

Forged posts (CSRF) are refused twice over, with auth on or off (a server on loopback
without auth is still reachable from any page the operator's browser opens):

- the browser's own word: a post whose ``Sec-Fetch-Site`` is another site, or whose
  ``Origin`` is not this server, is refused;
- a double-submit token: each visitor gets a random ``troth_csrf`` cookie, every form
  carries it in a hidden field, and a post whose field does not match its cookie is refused.
  A page of another origin can neither read the cookie nor set it.
"""

from __future__ import annotations

import hmac
import secrets
from dataclasses import dataclass
from http.cookies import SimpleCookie
from urllib.parse import urlsplit

from troth.server.asgi import Scope, header

TOKEN_COOKIE = "troth_console"
CSRF_COOKIE = "troth_csrf"
CSRF_FIELD = "csrf"
PATH = "/console"


@dataclass(frozen=True)
class Visitor:
    """One request's browser: its console token (``None``: not logged in), its CSRF
    token (``new``: made for this response, to be set as a cookie), and whether it came
    over HTTPS (then its cookies are ``Secure``)."""

    token: str | None
    csrf: str
    new: bool
    secure: bool

    def cookies(self) -> list[tuple[bytes, bytes]]:
        """The ``Set-Cookie`` headers a page sends: the CSRF cookie when it is new."""
        return [_set_cookie(CSRF_COOKIE, self.csrf, self.secure)] if self.new else []

    def login_cookie(self, token: str) -> tuple[bytes, bytes]:
        return _set_cookie(TOKEN_COOKIE, token, self.secure)

    def logout_cookie(self) -> tuple[bytes, bytes]:
        return _set_cookie(TOKEN_COOKIE, "", self.secure, max_age=0)

    def forged(self, scope: Scope, form: dict[str, str]) -> bool:
        """Whether a post must be refused as not coming from one of this server's pages."""
        site = header(scope, b"sec-fetch-site")
        if site is not None and site not in (b"same-origin", b"none"):
            return True
        origin = header(scope, b"origin")
        if origin is not None and not _same_origin(origin, header(scope, b"host")):
            return True
        given = form.get(CSRF_FIELD, "")
        return self.new or not hmac.compare_digest(given.encode(), self.csrf.encode())


def visitor(scope: Scope) -> Visitor:
    jar = SimpleCookie()
    raw = header(scope, b"cookie")
    if raw is not None:
        try:
            jar.load(raw.decode("latin-1"))
        except Exception:  # a malformed Cookie header is treated as no cookie at all
            jar = SimpleCookie()
    token = jar[TOKEN_COOKIE].value if TOKEN_COOKIE in jar else None
    csrf = jar[CSRF_COOKIE].value if CSRF_COOKIE in jar else ""
    secure = scope.get("scheme") == "https"
    if len(csrf) < 32:
        return Visitor(token or None, secrets.token_urlsafe(32), new=True, secure=secure)
    return Visitor(token or None, csrf, new=False, secure=secure)


def _set_cookie(
    name: str, value: str, secure: bool, max_age: int | None = None
) -> tuple[bytes, bytes]:
    cookie = f"{name}={value}; Path={PATH}; HttpOnly; SameSite=Strict"
    if secure:
        cookie += "; Secure"
    if max_age is not None:
        cookie += f"; Max-Age={max_age}"
    return b"set-cookie", cookie.encode("latin-1")


def _same_origin(origin: bytes, host: bytes | None) -> bool:
    try:
        netloc = urlsplit(origin.decode("latin-1")).netloc
    except ValueError:
        return False
    return host is not None and netloc.lower() == host.decode("latin-1").lower()
