"""Fixtures that run the official Resonate SDKs against a real ``troth serve`` process
(the harness is ``tests.interop.sdks``)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import jwt
import pytest

from tests.interop.sdks import RETRY_TIMEOUT_MS, Sdk, sdk_command
from tests.support.servers import TrothServer


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TrothServer]:
    """One server for the whole session; tests keep apart by unique ids and groups."""
    yield from _serve(tmp_path_factory.mktemp("troth"))


@pytest.fixture(scope="session")
def secured_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TrothServer]:
    """One server with auth on (an RSA key, an issuer, an audience) for the session; its
    clients present an admin JWT, which both SDKs take from RESONATE_TOKEN."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    work = tmp_path_factory.mktemp("troth-auth")
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    public = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    (work / "key.pem").write_bytes(public)
    claims = {"exp": int(time.time()) + 3600, "iss": "interop", "aud": ["troth"], "role": "admin"}
    token = jwt.encode(claims, key, algorithm="RS256")
    flags = ["--auth-publickey", str(work / "key.pem"), "--auth-iss", "interop"]
    yield from _serve(work, *flags, "--auth-aud", "troth", token=token)


def _serve(work: Path, *flags: str, token: str | None = None) -> Iterator[TrothServer]:
    flags = ("--tasks-retry-timeout", str(RETRY_TIMEOUT_MS), *flags)
    server = TrothServer(work / "troth.db", work / "server.log", flags, token=token)
    try:
        yield server.start()
    finally:
        server.close()


@pytest.fixture(params=["ts", "py"])
def sdk(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Sdk]:
    yield from _sdk(request, tmp_path, "server")


@pytest.fixture(params=["ts", "py"])
def secured_sdk(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Sdk]:
    """An SDK whose processes hold the admin token of ``secured_server``."""
    yield from _sdk(request, tmp_path, "secured_server")


def _sdk(request: pytest.FixtureRequest, tmp_path: Path, server_fixture: str) -> Iterator[Sdk]:
    command = sdk_command(request.param)  # skip before paying for a server
    server = request.getfixturevalue(server_fixture)
    s = Sdk(name=request.param, server=server, work=tmp_path, argv0=command)
    try:
        yield s
    finally:
        s.close()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test here runs an official SDK: marked ``interop`` (``-m "not interop"``)."""
    here = Path(__file__).parent
    for item in items:
        if here in Path(item.path).parents:
            item.add_marker(pytest.mark.interop)
