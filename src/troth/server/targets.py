"""Which HTTP push targets the server may reach: the ``--push-allow`` list.

A push makes the server send a request to an address a client chose. Unchecked, any client
could aim it at what only the server can reach (server-side request forgery): a service on
loopback, the cloud metadata endpoint at 169.254.169.254, the private network. So a push goes
only to targets the allow-list admits, and the check is made twice:

- at the door, on the URL text (``PushAllowList.refusal``): a ``resonate:target`` or listener
  address that no resolution could make allowed is a 400 naming the field;
- at connect time, on the addresses the host name resolves to (``PushAllowList.resolve``):
  the push connects to the very address that was checked, so a name that resolves to
  127.0.0.1, or is changed to resolve there after the door let it in (DNS rebinding), is
  refused there.

The list is comma-separated entries, each ``[scheme://]host[:port]``:

================== ======================================================================
``public``         every globally routable address (the default)
``loopback``       127.0.0.0/8 and ::1 (``localhost``)
``private``        10.0.0.0/8, 172.16.0.0/12, 192.168.0.0/16 and fc00::/7
``*``              any address at all
``10.1.0.0/16``    an address or a network (CIDR), IPv4 or IPv6
``hooks.example``  that host name, whatever it resolves to (the name is trusted)
``*.example.com``  the names under example.com
``…:8443``         only that port (``[::1]:8443`` for IPv6)
``https://…``      only that scheme (``https://public``: public addresses over TLS only)
``none`` or empty  no push at all
================== ======================================================================

Link-local addresses (169.254.0.0/16 with the metadata endpoint, fe80::/10), 0.0.0.0,
broadcast, multicast and the other special-purpose ranges are in none of the named classes:
only an explicit network or ``*`` admits them. Credentials in a URL (``user:pass@``) are
refused unless ``--push-allow-credentials``.
"""

from __future__ import annotations

import asyncio
import ipaddress
import re
import socket
from collections.abc import Iterator
from typing import Literal, NamedTuple
from urllib.parse import SplitResult, urlsplit

from troth.protocol.records import TARGET
from troth.protocol.requests import (
    Data,
    PromiseCreateRequest,
    PromiseRegisterListenerRequest,
    ScheduleCreateRequest,
    TaskCreateRequest,
    TaskFenceRequest,
    TaskFencesRequest,
)

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network

_LOOPBACK = tuple(ipaddress.ip_network(n) for n in ("127.0.0.0/8", "::1/128"))
_PRIVATE = tuple(
    ipaddress.ip_network(n) for n in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "fc00::/7")
)
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_LOCALHOST = ipaddress.ip_address("127.0.0.1")
_NAME = re.compile(r"[a-z0-9_-]+(\.[a-z0-9_-]+)*\.?")
_SCHEMES = ("http", "https")


class Refused(Exception):
    """A push target the allow-list does not admit; the message says why."""


class _Rule(NamedTuple):
    scheme: str | None  # None: http and https
    port: int | None  # None: any port
    kind: Literal["any", "public", "networks", "name"]
    networks: tuple[Network, ...] = ()
    name: str = ""  # "example.com", or "*.example.com" for the names under it

    def admits_port(self, scheme: str, port: int) -> bool:
        return self.scheme in (None, scheme) and self.port in (None, port)

    def admits_name(self, host: str) -> bool:
        if self.kind != "name":
            return False
        if self.name.startswith("*."):
            return host.endswith(self.name[1:])
        return host == self.name

    def admits_address(self, address: Address) -> bool:
        if self.kind == "any":
            return True
        if self.kind == "public":
            return is_public(address)
        return any(address in network for network in self.networks)


def is_public(address: Address) -> bool:
    """Globally routable, also when an IPv6 form only wraps an IPv4 address."""
    inner = _embedded_v4(address)
    if inner is not None:
        return is_public(inner)
    return address.is_global and not address.is_multicast


def _embedded_v4(address: Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv4-mapped, 6to4 or NAT64 IPv6 address stands for."""
    if not isinstance(address, ipaddress.IPv6Address):
        return None
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    if address in _NAT64:
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return None


def describe(address: Address) -> str:
    """What kind of address this is, for refusals: 'loopback address 127.0.0.1'."""
    inner = _embedded_v4(address) or address
    if inner.is_loopback:
        kind = "loopback"
    elif inner.is_link_local:
        kind = "link-local"
    elif any(inner in network for network in _PRIVATE):
        kind = "private"
    elif inner.is_unspecified:
        kind = "unspecified"
    elif inner.is_multicast:
        kind = "multicast"
    elif not inner.is_global:
        kind = "special-purpose"
    else:
        kind = "public"
    return f"{kind} address {address}"


def _parse_rule(entry: str) -> _Rule:
    scheme: str | None = None
    if "://" in entry:
        scheme, _, entry = entry.partition("://")
        scheme = scheme.lower()
        if scheme not in _SCHEMES:
            raise ValueError(f"scheme {scheme!r}: only http and https are pushed to")
    host, port = _split_port(entry)
    host = host.lower()
    if host == "*":
        return _Rule(scheme, port, "any")
    if host == "public":
        return _Rule(scheme, port, "public")
    if host == "loopback":
        return _Rule(scheme, port, "networks", _LOOPBACK)
    if host == "private":
        return _Rule(scheme, port, "networks", _PRIVATE)
    try:
        return _Rule(scheme, port, "networks", (ipaddress.ip_network(host, strict=False),))
    except ValueError:
        pass
    if not _NAME.fullmatch(host.removeprefix("*.")):
        raise ValueError("expected public, loopback, private, *, an address, a CIDR or a host")
    return _Rule(scheme, port, "name", name=host)


def _split_port(entry: str) -> tuple[str, int | None]:
    """``host:port``, ``[v6]:port``, or a bare host, address or CIDR (``::1``, ``fe80::/10``)."""
    if entry.startswith("["):
        host, bracket, rest = entry[1:].partition("]")
        if not bracket or (rest and not rest.startswith(":")):
            raise ValueError("expected [address]:port")
        return host, _port(rest[1:]) if rest else None
    if entry.count(":") == 1:
        host, _, port = entry.partition(":")
        return host, _port(port)
    return entry, None


def _port(text: str) -> int:
    if not text.isdigit() or not 0 < int(text) < 65536:
        raise ValueError(f"port {text!r} is not a number from 1 to 65535")
    return int(text)


class PushAllowList:
    """The parsed ``--push-allow`` list, with ``--push-allow-credentials``."""

    def __init__(self, spec: str, credentials: bool = False) -> None:
        self.spec = spec
        self.credentials = credentials
        self._rules: list[_Rule] = []
        for entry in (e.strip() for e in spec.split(",")):
            if not entry or entry.lower() == "none":
                continue
            try:
                self._rules.append(_parse_rule(entry))
            except ValueError as e:
                raise ValueError(f"--push-allow entry {entry!r}: {e}") from None

    def __str__(self) -> str:
        return f"--push-allow {self.spec!r}"

    def refusal(self, url: str) -> str | None:
        """Why ``url`` can never be pushed to, judging by its text; None if it may be.

        A host name that no name entry admits passes when an address entry might admit what
        it resolves to: ``resolve`` decides at connect time."""
        try:
            parts = urlsplit(url)
            scheme, host, port = _target(parts)
        except ValueError:
            return "not a valid URL"
        if scheme not in _SCHEMES or not host:
            return "not an http(s) URL"
        if "@" in parts.netloc and not self.credentials:
            return "credentials in the URL are refused (see --push-allow-credentials)"
        rules = [r for r in self._rules if r.admits_port(scheme, port)]
        if any(r.admits_name(host) for r in rules):
            return None
        # localhost is loopback by definition (RFC 6761): no need to ask a resolver.
        is_localhost = host == "localhost" or host.endswith(".localhost")
        literal = _LOCALHOST if is_localhost else _literal(host)
        if literal is not None:
            if any(r.admits_address(literal) for r in rules):
                return None
            return f"{describe(literal)} is not allowed by {self}"
        if any(r.kind != "name" for r in rules):
            return None
        return f"{scheme}://{host}:{port} is not allowed by {self}"

    async def resolve(self, url: str) -> list[str]:
        """The addresses a push to ``url`` may connect to, in resolver order; ``Refused``
        when there are none. Connecting to these (never to the name again) is what makes
        the check hold against DNS rebinding."""
        reason = self.refusal(url)
        if reason is not None:
            raise Refused(reason)
        scheme, host, port = _target(urlsplit(url))
        rules = [r for r in self._rules if r.admits_port(scheme, port)]
        literal = _literal(host)
        if literal is not None:
            return [str(literal)]
        loop = asyncio.get_running_loop()
        infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        resolved = list(dict.fromkeys(str(info[4][0]) for info in infos))
        if any(r.admits_name(host) for r in rules):
            return resolved
        allowed = [a for a in resolved if any(r.admits_address(_ip(a)) for r in rules)]
        if not allowed:
            refused = describe(_ip(resolved[0])) if resolved else "no address"
            raise Refused(f"{host} resolves to {refused}, not allowed by {self}")
        return allowed


def _target(parts: SplitResult) -> tuple[str, str, int]:
    """Scheme, host (lower case, no trailing dot) and port of a URL; ValueError if bad."""
    scheme = parts.scheme.lower()
    port = parts.port or (443 if scheme == "https" else 80)
    return scheme, (parts.hostname or "").lower().rstrip("."), port


def _ip(text: str) -> Address:
    """A resolved address, without the scope a link-local IPv6 address comes with."""
    return ipaddress.ip_address(text.partition("%")[0])


def _literal(host: str) -> Address | None:
    """The address a URL names directly, if it does (IPv6 inside brackets)."""
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return None


# -- the door ---------------------------------------------------------------------------------


def push_addresses(data: Data) -> Iterator[tuple[str, str]]:
    """(field, address) of every HTTP address a request would make the server push to."""
    if isinstance(data, PromiseCreateRequest):
        yield from _tag(data.tags, "tags")
    elif isinstance(data, TaskCreateRequest | TaskFenceRequest):
        if isinstance(created := data.action.data, PromiseCreateRequest):
            yield from _tag(created.tags, "action.data.tags")
    elif isinstance(data, TaskFencesRequest):
        for i, action in enumerate(data.actions):
            if isinstance(created := action.data, PromiseCreateRequest):
                yield from _tag(created.tags, f"actions[{i}].data.tags")
    elif isinstance(data, ScheduleCreateRequest):
        yield from _tag(data.promise_tags, "promiseTags")
    elif isinstance(data, PromiseRegisterListenerRequest):
        yield "address", data.address


def _tag(tags: dict[str, str], where: str) -> Iterator[tuple[str, str]]:
    if TARGET in tags:
        yield f"{where}[{TARGET!r}]", tags[TARGET]


def door_refusal(data: Data, allow: PushAllowList) -> str | None:
    """The 400 message for a request that names a push target the list refuses."""
    for field, address in push_addresses(data):
        if not address.lower().startswith(("http://", "https://")):
            continue  # poll addresses go to SSE connections, not out of the server
        reason = allow.refusal(address)
        if reason is not None:
            return f"{field}: push target {address!r} refused: {reason}"
    return None
