"""Who may call the server, and on which ids: bearer tokens checked on ``POST /`` and on
``GET /poll/...``.

Two kinds of token are accepted, alone or together:

- a **JWT** verified with the public key of ``--auth-publickey`` (RSA, EC or Ed25519, PEM),
  as the reference server does: ``exp`` required (60 s leeway), ``iss``/``aud`` required and
  matched when ``--auth-iss``/``--auth-aud`` are set. The claim ``role: "admin"`` (any case)
  grants everything; otherwise the claim ``prefix`` scopes the token: every id a request
  touches must start with it (``""``: everything). A token without a usable ``prefix`` is
  authenticated but may do nothing (403). ``--auth-publickey none`` is the reference's
  unsigned mode: claims are read and checked but the signature is not, so anyone can mint
  any token; it exists for compatibility and development only.
- a **static token** (``--auth-token``): a shared secret, compared in constant time, that
  grants everything. For small setups that do not want to run a token issuer.

A missing or bad token is 401 ``Unauthorized``; a good token reaching outside its scope is
403 ``Forbidden``. Unlike the reference, scoping covers every id a request names (both ends
of a callback, the promise a fence or fulfill settles, a schedule's own id as well as its
promise id template) and the poll endpoint: a scoped token polls only groups that start with
its prefix. Searches and debug kinds are not scoped by id, so a scoped token may not use
them (as in the reference).
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import jwt
import msgspec
from cryptography.hazmat.primitives.asymmetric import ec, ed448, ed25519, rsa
from cryptography.hazmat.primitives.serialization import load_pem_public_key

from troth.protocol.kinds import Kind
from troth.protocol.requests import (
    Data,
    PromiseCreateRequest,
    PromiseGetRequest,
    PromiseRegisterCallbackRequest,
    PromiseRegisterListenerRequest,
    PromiseSettleRequest,
    ScheduleCreateRequest,
    ScheduleDeleteRequest,
    ScheduleGetRequest,
    TaskAcquireRequest,
    TaskContinueRequest,
    TaskCreateRequest,
    TaskFenceRequest,
    TaskFencesRequest,
    TaskFulfillRequest,
    TaskGetRequest,
    TaskHaltRequest,
    TaskHeartbeatRequest,
    TaskReleaseRequest,
    TaskSuspendRequest,
)
from troth.protocol.responses import (
    Reply,
    TaskClaimResponse,
    TaskFenceResult,
    TaskSuspendedResponse,
)
from troth.server.config import ServerConfig

log = logging.getLogger(__name__)

UNSIGNED = "none"  # the --auth-publickey value of the reference's unsigned mode
LEEWAY = 60  # seconds of clock skew allowed on exp (and nbf, iat)
_REMEMBERED = 4096  # verified tokens kept
_REMEMBER_SECONDS = 300.0

# The algorithms a key of each family verifies; chosen by the key, never by the token.
_RSA = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512")
_EC = ("ES256", "ES384", "ES512")
_EDDSA = ("EdDSA",)
# Unsigned mode still wants a token that names a real signing algorithm (not "none").
_KNOWN = ("HS256", "HS384", "HS512", *_RSA, *_EC, *_EDDSA)


class AuthConfigError(Exception):
    """The auth settings cannot be used (an unreadable key, an empty token)."""


class Denied(Exception):
    """401 (no or bad token) or 403 (a good token outside its scope)."""

    def __init__(self, status: int) -> None:
        super().__init__("Unauthorized" if status == 401 else "Forbidden")
        self.status = status
        self.message = str(self)


@dataclass(frozen=True)
class Grant:
    """What an authenticated token may touch: ids starting with ``prefix`` (``""``: all);
    ``None``: nothing at all."""

    prefix: str | None
    # Who the token speaks for, which owns the poll ids it connects (``PollHub``): its
    # ``sub`` claim, else its scope; every holder of the static token is one owner.
    owner: str = "static"

    def check_ids(self, ids: Iterable[str] | None) -> None:
        """Raise 403 unless every id is in scope; ``None`` stands for requests not scoped by
        id (searches, debug, kinds unknown to the server), which need an unscoped token."""
        if self.prefix == "":
            return
        if self.prefix is None or ids is None:
            raise Denied(403)
        prefix = self.prefix
        if not all(id.startswith(prefix) for id in ids):
            raise Denied(403)

    def admit_kind(self, kind: str) -> None:
        """Raise 403 if no request of ``kind`` can be in scope: searches, debug kinds and
        kinds the server does not know name no ids, so they need an unscoped token."""
        known = Kind.named(kind)
        if known is None or known.debug or known.endswith(".search"):
            self.check_ids(None)

    def admit(self, data: Data) -> None:
        """Raise 403 unless every id ``data`` names is in scope."""
        self.check_ids(touched_ids(data))

    def check_group(self, group: str) -> None:
        self.check_ids((group,))

    def limit(self, reply: Reply) -> Reply:
        """``reply`` without what lies outside the scope: a preload (a task's branch) is the
        one part of an answer the server computes beyond the ids the request named, so a
        scoped token is sent only the promises of it that start with its prefix. Defence in
        depth: validation keeps a branch an ancestor of the task's id, but an ancestor of a
        scoped id (a token scoped to ``root:1``) may hold siblings outside the scope."""
        prefix = self.prefix
        if not prefix:  # "" sees everything; None was refused before any reply
            return reply
        body = reply.body
        if not isinstance(body, TaskClaimResponse | TaskSuspendedResponse | TaskFenceResult):
            return reply
        inside = [p for p in body.preload if p.id.startswith(prefix)]
        if isinstance(body, TaskFenceResult):
            return Reply(reply.status, body._replace(preload=inside))
        return Reply(reply.status, msgspec.structs.replace(body, preload=inside))


EVERYTHING = Grant("")


class Auth:
    def __init__(
        self,
        key: Any | None = None,
        algorithms: tuple[str, ...] = (),
        unsigned: bool = False,
        issuer: str | None = None,
        audience: str | None = None,
        static_token: str | None = None,
    ) -> None:
        self._key = key
        self._algorithms = list(algorithms)
        self._unsigned = unsigned
        self._issuer = issuer
        self._audience = audience
        # Digests, so that comparing them takes the same time whatever the token's length.
        self._static = _digest(static_token) if static_token is not None else None
        self._jwt = key is not None or unsigned
        self._verified: dict[str, tuple[Grant, float]] = {}  # token: (grant, trusted until)
        self._options: dict[str, Any] = {
            "require": ["exp", *(["iss"] if issuer else []), *(["aud"] if audience else [])],
            "verify_signature": not unsigned,
            "verify_exp": True,
            "verify_nbf": True,
            "verify_iat": True,
            "verify_iss": issuer is not None,
            "verify_aud": audience is not None,
            # The reference reads neither; a token it accepts must not fail on them here.
            "verify_sub": False,
            "verify_jti": False,
        }

    @classmethod
    def from_config(cls, config: ServerConfig) -> Auth | None:
        """The checker ``config`` asks for; ``None`` when auth is off."""
        if config.auth_token is None and config.auth_publickey is None:
            return None
        if config.auth_token is not None and not config.auth_token.strip():
            raise AuthConfigError("--auth-token (TROTH_AUTH_TOKEN) is empty")
        key: Any = None
        algorithms: tuple[str, ...] = ()
        unsigned = False
        if config.auth_publickey == UNSIGNED:
            unsigned = True
        elif config.auth_publickey is not None:
            key, algorithms = load_public_key(config.auth_publickey)
        return cls(
            key,
            algorithms,
            unsigned,
            config.auth_iss or None,
            config.auth_aud or None,
            config.auth_token,
        )

    def authenticate(self, token: str | None) -> Grant:
        """The grant of ``token``; ``Denied(401)`` when it proves nothing."""
        if not token:
            raise Denied(401)
        if self._static is not None and hmac.compare_digest(_digest(token), self._static):
            return EVERYTHING
        if not self._jwt:
            raise Denied(401)
        now = time.time()
        known = self._verified.get(token)
        if known is not None and now < known[1]:
            return known[0]
        try:
            claims = self._verify(token)
        except Exception as e:  # PyJWT's own errors, and any it lets escape on odd claims
            log.debug("token refused: %s: %s", type(e).__name__, e)
            raise Denied(401) from None
        grant = grant_of(claims)
        self._remember(token, grant, claims["exp"], now)
        return grant

    def _remember(self, token: str, grant: Grant, exp: Any, now: float) -> None:
        """Checking a signature costs 0.2 to 0.8 ms, as much as serving the request, and a
        client sends the same token with every request: a verified token is trusted again
        until it expires, for a few minutes at most."""
        if not isinstance(exp, int | float):
            return  # PyJWT also takes a numeric string; such a token is simply checked again
        if len(self._verified) >= _REMEMBERED:
            del self._verified[next(iter(self._verified))]  # the oldest
        self._verified[token] = (grant, min(now + _REMEMBER_SECONDS, exp + LEEWAY))

    def _verify(self, token: str) -> dict[str, Any]:
        if self._unsigned:
            header = jwt.get_unverified_header(token)
            if header.get("alg") not in _KNOWN:
                raise jwt.InvalidAlgorithmError(f"unknown alg {header.get('alg')!r}")
            algorithms = list(_KNOWN)
        else:
            algorithms = self._algorithms
        claims: dict[str, Any] = jwt.decode(
            token,
            self._key if self._key is not None else "",
            algorithms=algorithms,
            options=self._options,  # type: ignore[arg-type]
            audience=self._audience,
            issuer=self._issuer,
            leeway=LEEWAY,
        )
        return claims


def grant_of(claims: dict[str, Any]) -> Grant:
    role = claims.get("role")
    admin = isinstance(role, str) and role.lower() == "admin"
    prefix = "" if admin else claims.get("prefix")
    if not isinstance(prefix, str):
        prefix = None
    sub = claims.get("sub")
    owner = f"sub:{sub}" if isinstance(sub, str) and sub else f"scope:{admin}:{prefix}"
    return Grant(prefix, owner)


def load_public_key(path: str) -> tuple[Any, tuple[str, ...]]:
    """The PEM public key at ``path`` and the algorithms it verifies."""
    try:
        with open(path, "rb") as f:
            pem = f.read()
    except OSError as e:
        raise AuthConfigError(f"cannot read the auth public key {path}: {e}") from None
    try:
        key = load_pem_public_key(pem)
    except ValueError as e:
        raise AuthConfigError(f"{path} is not a PEM public key: {e}") from None
    if isinstance(key, rsa.RSAPublicKey):
        return key, _RSA
    if isinstance(key, ec.EllipticCurvePublicKey):
        return key, _EC
    if isinstance(key, ed25519.Ed25519PublicKey | ed448.Ed448PublicKey):
        return key, _EDDSA
    raise AuthConfigError(
        f"{path}: a {type(key).__name__} cannot verify JWTs: use RSA, EC, Ed25519"
    )


def bearer(headers: Iterable[tuple[bytes, bytes]]) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header (the scheme in any case)."""
    for name, value in headers:
        if name == b"authorization":
            scheme, _, token = value.decode("latin-1").strip().partition(" ")
            if scheme.lower() == "bearer" and token.strip():
                return token.strip()
            return None
    return None


def touched_ids(data: Data) -> list[str] | None:
    """Every promise, task and schedule id a request names; ``None`` for a request that is
    not about particular ids (searches, debug)."""
    if isinstance(
        data,
        PromiseGetRequest
        | PromiseCreateRequest
        | PromiseSettleRequest
        | TaskGetRequest
        | TaskAcquireRequest
        | TaskReleaseRequest
        | TaskHaltRequest
        | TaskContinueRequest
        | ScheduleGetRequest
        | ScheduleDeleteRequest,
    ):
        return [data.id]
    if isinstance(data, PromiseRegisterCallbackRequest):
        return [data.awaited, data.awaiter]
    if isinstance(data, PromiseRegisterListenerRequest):
        return [data.awaited]
    if isinstance(data, TaskCreateRequest):
        return [data.action.data.id]
    if isinstance(data, TaskFulfillRequest):
        return [data.id, data.action.data.id]
    if isinstance(data, TaskFenceRequest):
        return [data.id, data.action.data.id]
    if isinstance(data, TaskFencesRequest):
        # The ids of every fence of the batch: allowed when each fence alone would be.
        return [data.id, *(action.data.id for action in data.actions)]
    if isinstance(data, TaskSuspendRequest):
        callbacks = [id for a in data.actions for id in (a.data.awaited, a.data.awaiter)]
        return [data.id, *callbacks]
    if isinstance(data, TaskHeartbeatRequest):
        return [task.id for task in data.tasks]
    if isinstance(data, ScheduleCreateRequest):
        # The template is checked as written: a scoped schedule names its promises with a
        # literal prefix, so every promise it creates stays in scope.
        return [data.id, data.promise_id]
    return None


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()
