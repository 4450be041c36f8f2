"""The ``--push-allow`` syntax and what each entry admits (``troth.server.targets``)."""

from __future__ import annotations

import asyncio

import pytest

from tests.support.ports import loopback_name
from troth.cli import _parser, main
from troth.cli.server import config_from
from troth.server.config import ServerConfig
from troth.server.targets import PushAllowList, Refused


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1/",
        "http://127.255.255.254:8080/",
        "http://[::1]/",
        "http://localhost:8001/",
        "http://api.localhost/",
        "http://10.1.2.3/",
        "http://172.16.0.1/",
        "http://172.31.255.255/",
        "http://192.168.0.1/",
        "http://169.254.169.254/",
        "http://169.254.0.1/",
        "http://[fe80::1]/",
        "http://[fc00::1]/",
        "http://[fdff::1]/",
        "http://0.0.0.0/",
        "http://[::]/",
        "http://100.64.0.1/",  # carrier-grade NAT: not the public internet either
        "http://224.0.0.1/",
        "http://255.255.255.255/",
        "http://[::ffff:169.254.169.254]/",  # IPv4-mapped
        "http://[64:ff9b::a9fe:a9fe]/",  # NAT64 of 169.254.169.254
        "http://[2002:7f00:1::]/",  # 6to4 of 127.0.0.1
        "http://user:pw@example.com/",
        "http://user@example.com/",
        "ftp://example.com/",
        "http://example.com:99999/",
    ],
)
def test_the_default_refuses(url: str) -> None:
    assert PushAllowList(ServerConfig().push_allow).refusal(url) is not None


@pytest.mark.parametrize(
    "url", ["http://8.8.8.8/", "https://example.com/hook", "http://[2606:4700::1]:8080/"]
)
def test_the_default_admits_public_targets(url: str) -> None:
    assert PushAllowList("public").refusal(url) is None


@pytest.mark.parametrize(
    ("spec", "url", "allowed"),
    [
        ("loopback", "http://127.0.0.1:9/", True),
        ("loopback", "http://localhost:9/", True),
        ("loopback", "http://10.0.0.1/", False),
        ("private", "http://10.0.0.1/", True),
        ("private", "http://169.254.169.254/", False),  # link-local is not private
        ("private", "http://127.0.0.1/", False),
        ("169.254.169.254", "http://169.254.169.254/", True),
        ("10.1.0.0/16", "http://10.1.200.3/", True),
        ("10.1.0.0/16", "http://10.2.0.3/", False),
        ("10.1.0.0/16:8080", "http://10.1.0.3:8080/", True),
        ("10.1.0.0/16:8080", "http://10.1.0.3/", False),
        ("[::1]:9000", "http://[::1]:9000/", True),
        ("[::1]:9000", "http://[::1]:9001/", False),
        ("fd00::/8", "http://[fd12::3]/", True),
        ("https://public", "https://example.com/", True),
        ("https://public", "http://example.com/", False),
        ("hooks.internal", "http://hooks.internal/x", True),
        ("hooks.internal", "http://HOOKS.internal./x", True),
        ("hooks.internal", "http://other.internal/", False),
        ("*.example.com", "https://a.b.example.com/", True),
        ("*.example.com", "https://example.com/", False),
        ("*", "http://169.254.169.254/", True),
        ("*", "http://user:pw@example.com/", False),  # credentials need their own flag
        ("", "http://example.com/", False),
        ("none", "http://8.8.8.8/", False),
    ],
)
def test_an_entry_admits_what_it_names(spec: str, url: str, allowed: bool) -> None:
    assert (PushAllowList(spec).refusal(url) is None) is allowed


def test_credentials_are_admitted_only_when_allowed() -> None:
    assert PushAllowList("public", credentials=True).refusal("http://u:p@example.com/") is None


@pytest.mark.parametrize(
    "spec", ["ftp://example.com", "10.0.0.1:0", "host:port", "a..b", "[::1", "a:b:c", "*."]
)
def test_a_bad_entry_stops_the_configuration(spec: str) -> None:
    with pytest.raises(ValueError, match="--push-allow entry"):
        ServerConfig(push_allow=spec)


def test_a_name_is_checked_on_the_addresses_it_resolves_to() -> None:
    async def resolve(spec: str, url: str) -> list[str]:
        return await PushAllowList(spec).resolve(url)

    url = f"http://{loopback_name()}:80/"
    assert PushAllowList("public").refusal(url) is None  # its text cannot tell
    with pytest.raises(Refused, match="resolves to loopback address"):
        asyncio.run(resolve("public,10.0.0.0/8", url))
    assert asyncio.run(resolve("loopback", url)) == ["127.0.0.1"]


def test_serve_admits_public_targets_and_dev_loopback_too() -> None:
    def push_allow(*argv: str, env: dict[str, str] | None = None) -> str:
        return config_from(_parser().parse_args(argv), env or {}).push_allow

    assert push_allow("serve") == "public"
    assert push_allow("dev") == "public,loopback"
    assert push_allow("dev", "--push-allow", "none") == "none"
    assert push_allow("dev", env={"TROTH_PUSH_ALLOW": "10.0.0.0/8"}) == "10.0.0.0/8"


def test_a_bad_entry_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit:
        main(["serve", "--push-allow", "public,10.0.0.0/33"])
    assert exit.value.code == 2
    assert "--push-allow entry '10.0.0.0/33'" in capsys.readouterr().err
