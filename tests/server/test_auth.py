"""Authentication and authorization, tried as an attacker would (issue 11).

One server per backend runs with an RSA key, an issuer, an audience and a static token;
each attack sends its request, then checks both the answer (401 "Unauthorized", 403
"Forbidden") and, through an admin token, that nothing changed. Servers of their own cover
the other key families, the unsigned mode, outbound push tokens and the bind defaults.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import hmac
import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any
from urllib.parse import quote

import httpx
import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa

from tests.support.ports import free_port
from tests.support.push import PushTarget
from tests.support.servers import BACKENDS, FAR, VERSION, TrothServer, serve
from tests.support.tokens import AUD, ISS, Keys, token
from tests.support.waiting import eventually
from troth.cli import _parser
from troth.cli.server import config_from

# Slow: a troth serve process per test (tests/conformance covers the server in the fast suite).
pytestmark = pytest.mark.slow

STATIC = "static-" + "s3cret" * 6
TARGET = {"resonate:target": "poll://any@g"}


# -- tokens ---------------------------------------------------------------------------------


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unsigned(claims: dict[str, Any], alg: str = "none", signature: bytes = b"") -> str:
    header = b64(json.dumps({"alg": alg, "typ": "JWT"}).encode())
    return f"{header}.{b64(json.dumps(claims).encode())}.{b64(signature)}"


# -- the secured server -------------------------------------------------------------------------


class Client:
    """Requests to one server with one token, in ``head.auth`` or as a Bearer header."""

    def __init__(self, server: TrothServer, token: str | None, via: str = "head") -> None:
        self.server = server
        self.token = token
        self.via = via

    def call(self, kind: str, data: dict[str, Any] | None = None) -> tuple[int, Any]:
        head: dict[str, Any] = {"corrId": uuid.uuid4().hex, "version": VERSION}
        headers = {}
        if self.token is not None and self.via == "head":
            head["auth"] = self.token
        elif self.token is not None:
            headers["Authorization"] = f"Bearer {self.token}"
        body = {"kind": kind, "head": head, "data": data or {}}
        response = self.server.http.post("/", json=body, headers=headers)
        answer = response.json()
        assert answer["head"]["status"] == response.status_code
        assert (answer["kind"], answer["head"]["corrId"]) == (kind, head["corrId"])
        return response.status_code, answer["data"]

    def ok(self, kind: str, data: dict[str, Any] | None = None) -> Any:
        status, body = self.call(kind, data)
        assert status == 200, body
        return body

    def poll(self, group: str, id: str = "w1") -> tuple[int, str]:
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        url = f"{self.server.url}/poll/{quote(group, safe='')}/{quote(id, safe='')}"
        with httpx.stream("GET", url, headers=headers, timeout=10) as response:
            body = "" if response.status_code == 200 else response.read().decode()
            return response.status_code, body


@pytest.fixture(scope="module", params=BACKENDS)
def secured(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, keys: Keys
) -> Iterator[TrothServer]:
    flags = (
        *("--auth-publickey", keys.paths["rsa"]),
        *("--auth-iss", ISS, "--auth-aud", AUD),
    )
    folder = tmp_path_factory.mktemp("auth")
    with serve(request.param, folder, *flags, env={"TROTH_AUTH_TOKEN": STATIC}) as server:
        yield server


@pytest.fixture
def admin(secured: TrothServer, keys: Keys) -> Client:
    return Client(secured, token(keys.rsa, role="admin"))


@pytest.fixture
def tenant() -> str:
    """A fresh prefix, so tests on the shared server never meet."""
    return f"t{uuid.uuid4().hex[:8]}-a"


def create(client: Client, id: str, **data: Any) -> dict[str, Any]:
    promise: dict[str, Any] = client.ok("promise.create", {"id": id, "timeoutAt": FAR, **data})[
        "promise"
    ]
    return promise


# -- authentication -----------------------------------------------------------------------------


def test_without_a_token_nothing_is_read_or_written_and_unknown_kinds_stay_unknown(
    secured: TrothServer, admin: Client, tenant: str
) -> None:
    anonymous = Client(secured, None)
    assert anonymous.call("promise.create", {"id": tenant + "p", "timeoutAt": FAR}) == (
        401,
        "Unauthorized",
    )
    assert admin.call("promise.get", {"id": tenant + "p"})[0] == 404
    # Authentication comes before the kind is looked up and before data is read.
    assert anonymous.call("no.such.kind") == (401, "Unauthorized")
    assert anonymous.call("promise.get", {"id": 7}) == (401, "Unauthorized")
    assert anonymous.call("debug.reset") == (401, "Unauthorized")
    assert admin.call("no.such.kind")[0] == 400


@pytest.mark.parametrize(
    "forge",
    [
        pytest.param(
            lambda k: token(rsa.generate_private_key(65537, 2048), role="admin"), id="other-key"
        ),
        pytest.param(lambda k: token(k.rsa, role="admin", expires_in=-120), id="expired"),
        pytest.param(lambda k: token(k.rsa, role="admin", iss="https://evil.test"), id="wrong-iss"),
        pytest.param(lambda k: token(k.rsa, role="admin", aud="other"), id="wrong-aud"),
        pytest.param(lambda k: token(k.rsa, role="admin", iss=None), id="no-iss"),
        pytest.param(lambda k: token(k.rsa, role="admin", aud=None), id="no-aud"),
        pytest.param(
            lambda k: jwt.encode({"iss": ISS, "aud": AUD, "role": "admin"}, k.rsa, "RS256"),
            id="no-exp",
        ),
        pytest.param(
            lambda k: unsigned(
                {"exp": int(time.time()) + 300, "iss": ISS, "aud": AUD, "role": "admin"}
            ),
            id="alg-none",
        ),
        pytest.param(lambda k: hs256_with_the_public_key(k), id="alg-confusion"),
        pytest.param(lambda k: token(k.ec, "ES256", role="admin"), id="other-family"),
        pytest.param(lambda k: token(k.rsa, role="admin")[:-4] + "AAAA", id="bad-signature"),
        pytest.param(lambda k: STATIC[:-1], id="static-prefix"),
        pytest.param(lambda k: STATIC + "x", id="static-longer"),
        pytest.param(lambda k: "not a jwt", id="garbage"),
    ],
)
def test_a_forged_or_stale_token_is_401_and_changes_nothing(
    secured: TrothServer,
    admin: Client,
    keys: Keys,
    tenant: str,
    forge: Callable[[Keys], str],
) -> None:
    forged = forge(keys)
    victim = create(admin, tenant + "victim")
    for via in ("head", "header"):
        attacker = Client(secured, forged, via)
        assert attacker.call("promise.get", {"id": tenant + "victim"}) == (401, "Unauthorized")
        settle = {"id": tenant + "victim", "state": "resolved"}
        assert attacker.call("promise.settle", settle) == (401, "Unauthorized")
        assert attacker.call("promise.search", {}) == (401, "Unauthorized")
        assert attacker.poll("default") == (401, "Unauthorized")
    assert admin.ok("promise.get", {"id": tenant + "victim"})["promise"] == victim


def hs256_with_the_public_key(keys: Keys) -> str:
    """The classic confusion: an HMAC token keyed with the (public) PEM of the server."""
    pem = Path(keys.paths["rsa"]).read_bytes()
    claims = {"exp": int(time.time()) + 300, "iss": ISS, "aud": AUD, "role": "admin"}
    header = b64(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
    payload = b64(json.dumps(claims).encode())
    signature = hmac.new(pem, f"{header}.{payload}".encode(), hashlib.sha256).digest()
    return f"{header}.{payload}.{b64(signature)}"


def test_a_token_expired_within_the_60_s_leeway_still_works(
    secured: TrothServer, keys: Keys, tenant: str
) -> None:
    late = Client(secured, token(keys.rsa, prefix=tenant, expires_in=-30))
    assert late.call("promise.get", {"id": tenant + "p"})[0] == 404


def test_the_token_is_read_from_head_auth_first_then_the_bearer_header(
    secured: TrothServer, keys: Keys, tenant: str
) -> None:
    good = token(keys.rsa, prefix=tenant)
    assert Client(secured, good, "head").call("promise.get", {"id": tenant + "p"})[0] == 404
    assert Client(secured, good, "header").call("promise.get", {"id": tenant + "p"})[0] == 404
    # Both given: head.auth decides, so a bad one there is not rescued by a good header.
    body = {
        "kind": "promise.get",
        "head": {"corrId": "c", "version": VERSION, "auth": "bad"},
        "data": {"id": tenant + "p"},
    }
    response = secured.http.post("/", json=body, headers={"Authorization": f"Bearer {good}"})
    assert response.status_code == 401


def test_the_static_token_has_full_access(secured: TrothServer, tenant: str) -> None:
    static = Client(secured, STATIC, "header")
    create(static, tenant + "p")
    assert static.ok("promise.search", {"tags": {}})["promises"]
    assert static.ok("debug.snap")
    assert static.poll("anything")[0] == 200


# -- authorization: the prefix claim ------------------------------------------------------------


def test_a_scoped_token_works_inside_its_prefix(
    secured: TrothServer, keys: Keys, tenant: str
) -> None:
    mine = Client(secured, token(keys.rsa, prefix=tenant))
    create(mine, tenant + "p")
    settled = mine.ok("promise.settle", {"id": tenant + "p", "state": "resolved"})
    assert settled["promise"]["state"] == "resolved"
    create(mine, tenant + "q")
    listener = {"awaited": tenant + "q", "address": f"poll://uni@{tenant}g/w1"}
    assert mine.call("promise.register_listener", listener)[0] == 200
    schedule = {
        "id": tenant + "s",
        "cron": "0 0 1 1 *",
        "promiseId": tenant + "{{.id}}.{{.timestamp}}",
        "promiseTimeout": 60000,
        "promiseTags": TARGET,
    }
    assert mine.ok("schedule.create", schedule)["schedule"]["id"] == tenant + "s"
    assert mine.poll(tenant + "workers")[0] == 200


def test_a_scoped_token_cannot_touch_another_prefix(
    secured: TrothServer, admin: Client, keys: Keys, tenant: str
) -> None:
    other = tenant[:-1] + "b"  # same origin, another prefix
    victim = create(admin, other + "victim")
    create(admin, tenant + "mine")
    before = admin.ok("debug.snap")
    attacker = Client(secured, token(keys.rsa, prefix=tenant))
    attacks: list[tuple[str, dict[str, Any]]] = [
        ("promise.get", {"id": other + "victim"}),
        ("promise.settle", {"id": other + "victim", "state": "resolved"}),
        ("promise.create", {"id": other + "new", "timeoutAt": FAR}),
        # One end inside the prefix is not enough: every id a request names is checked.
        ("promise.register_callback", {"awaited": other + "victim", "awaiter": tenant + "mine"}),
        ("promise.register_callback", {"awaited": tenant + "mine", "awaiter": other + "victim"}),
        ("promise.register_listener", {"awaited": other + "victim", "address": "poll://any@g"}),
        ("promise.search", {}),
        ("promise.search", {"tags": {"resonate:origin": tenant + "mine"}}),
        ("task.search", {}),
        ("schedule.search", {}),
        ("task.get", {"id": other + "victim"}),
        ("task.halt", {"id": other + "victim"}),
        ("task.heartbeat", {"pid": "p", "tasks": [{"id": other + "victim", "version": 1}]}),
        (
            "task.create",
            {
                "pid": "p",
                "ttl": 1000,
                "action": {
                    "kind": "promise.create",
                    "head": {"corrId": "x", "version": VERSION},
                    "data": {"id": other + "t", "timeoutAt": FAR},
                },
            },
        ),
        (
            "task.fence",
            {
                "id": tenant + "mine",
                "version": 1,
                "action": {
                    "kind": "promise.settle",
                    "head": {"corrId": "x", "version": VERSION},
                    "data": {"id": other + "victim", "state": "resolved"},
                },
            },
        ),
        (
            "schedule.create",
            {
                "id": tenant + "s",
                "cron": "* * * * *",
                "promiseId": other + "{{.id}}",
                "promiseTimeout": 1,
                "promiseTags": TARGET,
            },
        ),
        (
            "schedule.create",
            {
                "id": other + "s",
                "cron": "* * * * *",
                "promiseId": tenant + "{{.id}}",
                "promiseTimeout": 1,
                "promiseTags": TARGET,
            },
        ),
        ("schedule.delete", {"id": other + "s"}),
        ("debug.snap", {}),
        ("debug.reset", {}),
        ("no.such.kind", {}),
    ]
    for kind, data in attacks:
        assert attacker.call(kind, data) == (403, "Forbidden"), kind
    assert attacker.poll(other + "workers") == (403, "Forbidden")
    assert attacker.poll("default") == (403, "Forbidden")
    assert admin.ok("debug.snap") == before
    assert admin.ok("promise.get", {"id": other + "victim"})["promise"] == victim


def _fences(task: str, *settled: str) -> dict[str, Any]:
    """A task.fences creating and settling each of ``settled`` at the task's version 1."""
    head = {"corrId": "x", "version": VERSION}
    actions = []
    for id in settled:
        actions.append(
            {"kind": "promise.create", "head": head, "data": {"id": id, "timeoutAt": FAR}}
        )
        actions.append(
            {"kind": "promise.settle", "head": head, "data": {"id": id, "state": "resolved"}}
        )
    return {"id": task, "version": 1, "actions": actions}


def test_a_batch_of_fences_is_allowed_only_when_each_of_its_fences_is(
    secured: TrothServer, admin: Client, keys: Keys, tenant: str
) -> None:
    other = tenant[:-1] + "b"
    victim = create(admin, other + "victim")
    mine = Client(secured, token(keys.rsa, prefix=tenant))
    created = {"id": tenant + "t", "timeoutAt": FAR, "tags": TARGET}
    action = {"kind": "promise.create", "head": {"corrId": "x", "version": VERSION}}
    mine.ok("task.create", {"pid": "p", "ttl": 60_000, "action": {**action, "data": created}})
    answer = mine.ok("task.fences", _fences(tenant + "t", tenant + "t.0"))
    assert [f["head"]["status"] for f in answer["fences"]] == [200, 200]
    before = admin.ok("debug.snap")

    # One fence of the batch reaching outside the prefix refuses the whole batch.
    batch = _fences(tenant + "t", tenant + "t.1", other + "victim")
    assert mine.call("task.fences", batch) == (403, "Forbidden")
    # A task outside the prefix, whatever its fences name.
    assert mine.call("task.fences", _fences(other + "victim", tenant + "t.1")) == (403, "Forbidden")
    for stranger in (Client(secured, None), Client(secured, STATIC[:-1], "header")):
        assert stranger.call("task.fences", _fences(tenant + "t", tenant + "t.1")) == (
            401,
            "Unauthorized",
        )
    assert admin.ok("debug.snap") == before
    assert admin.ok("promise.get", {"id": other + "victim"})["promise"] == victim


def test_a_token_with_neither_role_nor_a_string_prefix_may_do_nothing(
    secured: TrothServer, keys: Keys, tenant: str
) -> None:
    for claims in ({}, {"prefix": None}, {"prefix": ["a"]}, {"role": "user"}, {"role": 1}):
        nobody = Client(secured, token(keys.rsa, **claims))
        assert nobody.call("promise.get", {"id": tenant + "p"}) == (403, "Forbidden"), claims
        assert nobody.poll(tenant + "g") == (403, "Forbidden"), claims


@pytest.mark.parametrize("claims", [{"role": "admin"}, {"role": "ADMIN"}, {"prefix": ""}])
def test_an_admin_or_empty_prefix_token_may_do_everything(
    secured: TrothServer, keys: Keys, tenant: str, claims: dict[str, Any]
) -> None:
    boss = Client(secured, token(keys.rsa, **claims))
    create(boss, tenant + "p")
    assert boss.ok("promise.search", {"tags": {}})["promises"]
    assert boss.ok("debug.snap")
    assert boss.poll("any-group")[0] == 200


# -- other keys, unsigned mode ------------------------------------------------------------------


@pytest.mark.parametrize(("family", "alg"), [("ec", "ES256"), ("ed25519", "EdDSA")])
def test_ec_and_ed25519_keys_verify_their_tokens_and_refuse_others(
    start_server: Callable[..., TrothServer], keys: Keys, family: str, alg: str
) -> None:
    server = start_server("--auth-publickey", keys.paths[family])
    good = token(getattr(keys, family), alg, iss=None, aud=None, role="admin")
    assert Client(server, good).call("promise.get", {"id": "p"})[0] == 404
    stranger = (
        ec.generate_private_key(ec.SECP256R1())
        if family == "ec"
        else ed25519.Ed25519PrivateKey.generate()
    )
    forged = token(stranger, alg, iss=None, aud=None, role="admin")
    assert Client(server, forged).call("promise.get", {"id": "p"}) == (401, "Unauthorized")
    rsa_signed = token(keys.rsa, iss=None, aud=None, role="admin")
    assert Client(server, rsa_signed).call("promise.get", {"id": "p"}) == (401, "Unauthorized")


def test_unsigned_mode_reads_claims_without_signatures_and_says_so(
    start_server: Callable[..., TrothServer],
) -> None:
    server = start_server("--auth-publickey", "none")
    exp = int(time.time()) + 300
    # The reference's development mode: any signature passes, the claims still count.
    scoped = unsigned({"exp": exp, "prefix": "a/"}, alg="RS256", signature=b"whatever")
    assert Client(server, scoped).call("promise.get", {"id": "a/p"})[0] == 404
    assert Client(server, scoped).call("promise.get", {"id": "b/p"}) == (403, "Forbidden")
    for refused in (
        unsigned({"exp": exp, "role": "admin"}, alg="none"),
        unsigned({"exp": int(time.time()) - 120, "role": "admin"}, alg="RS256"),
        unsigned({"role": "admin"}, alg="RS256"),
    ):
        assert Client(server, refused).call("promise.get", {"id": "a/p"}) == (401, "Unauthorized")
    assert server.output().count("unsigned mode") == 1


def test_an_unusable_key_stops_the_server_with_one_clear_line(tmp_path: Path) -> None:
    not_a_key = tmp_path / "key.pem"
    not_a_key.write_text("hello")
    for path, says in (
        (str(tmp_path / "missing.pem"), "cannot read"),
        (str(not_a_key), "not a PEM"),
    ):
        run = subprocess.run(
            [sys.executable, "-m", "troth", "serve", "--port", str(free_port()),
             "--db", str(tmp_path / "t.db"), "--auth-publickey", path],
            capture_output=True, timeout=30,
        )  # fmt: skip
        assert run.returncode == 1
        assert says in run.stderr.decode(), run.stderr


# -- outbound push ------------------------------------------------------------------------------


def test_pushes_carry_the_configured_bearer_token(
    start_server: Callable[..., TrothServer], push_target: PushTarget
) -> None:
    server = start_server(env={"TROTH_PUSH_AUTH_TOKEN": "push-token.1"})
    tags = {"resonate:target": push_target.url}
    server.create_promise("pushed", tags=tags)
    assert eventually(lambda: push_target.authorizations) == ["Bearer push-token.1"]


# -- configuration ------------------------------------------------------------------------------


def config(argv: list[str], env: dict[str, str] | None = None) -> Any:
    return config_from(_parser().parse_args(argv), env or {})


def test_tokens_that_could_split_a_header_are_refused_at_startup() -> None:
    for bad in ("", "a b", "tok\r\nX-Evil: 1", "é"):
        for name in ("TROTH_AUTH_TOKEN", "TROTH_PUSH_AUTH_TOKEN", "TROTH_METRICS_TOKEN"):
            with pytest.raises(ValueError, match="must be a non-empty token"):
                config(["serve"], {name: bad})
    assert config(["serve"], {"TROTH_AUTH_TOKEN": "abc.DEF-_~+/=="}).auth_token == "abc.DEF-_~+/=="


def test_the_bind_address_defaults_to_loopback_unless_auth_is_on_or_one_is_given(
    keys: Keys,
) -> None:
    assert config(["serve"]).bind == "127.0.0.1"
    assert config(["serve"], {"TROTH_AUTH_TOKEN": STATIC}).bind == "0.0.0.0"
    assert config(["serve", "--auth-publickey", keys.paths["rsa"]]).bind == "0.0.0.0"
    # Unsigned mode proves nothing about the caller: it is not auth for this purpose.
    assert config(["serve", "--auth-publickey", "none"]).bind == "127.0.0.1"
    unsigned_beside_static = config(
        ["serve", "--auth-publickey", "none"], {"TROTH_AUTH_TOKEN": STATIC}
    )
    assert unsigned_beside_static.bind == "127.0.0.1"
    assert config(["serve", "--host", "0.0.0.0"]).bind == "0.0.0.0"
    assert config(["serve"], {"TROTH_HOST": "::"}).bind == "::"
    assert config(["dev"], {"TROTH_AUTH_TOKEN": STATIC}).bind == "127.0.0.1"
    assert config(["dev", "--host", "0.0.0.0"]).bind == "0.0.0.0"


def listening(port: int) -> set[str]:
    """The local addresses of the TCP sockets listening on ``port`` (from /proc/net)."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(FileNotFoundError), open(table) as f:
            for line in f.readlines()[1:]:
                local, state = line.split()[1], line.split()[3]
                address, _, hex_port = local.partition(":")
                if state == "0A" and int(hex_port, 16) == port:
                    found.add(_address(address))
    return found


def _address(hex_address: str) -> str:
    raw = bytes.fromhex(hex_address)
    if len(raw) == 4:
        return ".".join(str(b) for b in reversed(raw))
    words = [raw[i : i + 4][::-1] for i in range(0, 16, 4)]
    return ":".join(b"".join(words)[i : i + 2].hex() for i in range(0, 16, 2))


@contextlib.contextmanager
def serving(
    tmp_path: Path, *args: str, env: dict[str, str] | None = None
) -> Iterator[tuple[int, Path]]:
    """``troth <args>`` (serve or dev) on a free port, without the harness's --host."""
    port = free_port()
    log = tmp_path / f"serve-{port}.log"
    command = [
        sys.executable,
        "-m",
        "troth",
        *args,
        "--port",
        str(port),
        "--db",
        str(tmp_path / f"{port}.db"),
    ]
    environ = {k: v for k, v in os.environ.items() if not k.startswith("TROTH_")}
    with open(log, "wb") as out:
        process = subprocess.Popen(command, stdout=out, stderr=out, env={**environ, **(env or {})})
    try:
        eventually(lambda: "troth serving at" in log.read_text() and listening(port), timeout=20)
        yield port, log
    finally:
        process.terminate()
        process.wait(15)


@pytest.mark.parametrize("command", ["serve", "dev"])
def test_without_auth_the_server_listens_on_loopback_only_and_does_not_warn(
    tmp_path: Path, command: str
) -> None:
    with serving(tmp_path, command) as (port, log):
        assert listening(port) == {"127.0.0.1"}
        assert httpx.get(f"http://127.0.0.1:{port}/health").status_code == 200
    assert "WITHOUT AUTHENTICATION" not in log.read_text()


def test_an_explicit_public_bind_without_auth_warns_once(tmp_path: Path) -> None:
    with serving(tmp_path, "serve", env={"TROTH_HOST": "0.0.0.0"}) as (port, log):
        assert listening(port) == {"0.0.0.0"}
    assert log.read_text().count("serving WITHOUT AUTHENTICATION on 0.0.0.0") == 1


def test_with_auth_the_server_listens_everywhere_without_a_warning(tmp_path: Path) -> None:
    with serving(tmp_path, "serve", env={"TROTH_AUTH_TOKEN": STATIC}) as (port, log):
        assert listening(port) == {"0.0.0.0"}
    assert "WITHOUT AUTHENTICATION" not in log.read_text()


# -- troth's own SDK ------------------------------------------------------------------------------


def test_the_sdk_sends_troth_token_on_requests_and_on_its_poll_stream(
    secured: TrothServer, keys: Keys, tenant: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from troth import Context, Troth

    monkeypatch.setenv("TROTH_TOKEN", token(keys.rsa, prefix=tenant))
    app = Troth(url=secured.url, group=tenant + "workers")

    def double(x: int) -> int:
        return 2 * x

    @app.register
    async def work(ctx: Context, x: int) -> int:
        return await ctx.run(double, x) + 1

    async def main() -> int:
        async with app:
            # rpc: the execution reaches this app's worker only through its poll stream.
            result: int = await asyncio.wait_for(app.rpc(tenant + "job", work, 20).result(), 30)
            return result

    assert asyncio.run(main()) == 41


# -- verified tokens are remembered ---------------------------------------------------------------


def test_a_verified_token_is_trusted_again_until_it_expires_and_no_longer(
    keys: Keys, monkeypatch: pytest.MonkeyPatch
) -> None:
    from troth.server import auth

    checker = auth.Auth(keys.rsa.public_key(), ("RS256",))
    verified: list[str] = []
    verify = checker._verify

    def counting(token: str) -> dict[str, Any]:
        verified.append(token)
        return verify(token)

    monkeypatch.setattr(checker, "_verify", counting)
    clock = [time.time()]
    monkeypatch.setattr(auth, "time", SimpleNamespace(time=lambda: clock[0]))
    good = token(keys.rsa, iss=None, aud=None, expires_in=30, prefix="a")
    assert checker.authenticate(good).prefix == "a"
    assert checker.authenticate(good).prefix == "a"
    assert verified == [good]  # the second time from memory
    forged = good[:-4] + ("AAAA" if not good.endswith("AAAA") else "BBBB")
    for _ in range(2):
        with pytest.raises(auth.Denied):
            checker.authenticate(forged)
    assert verified == [good, forged, forged]  # a refusal is never remembered
    clock[0] += 30 + auth.LEEWAY + 1  # past exp and its leeway: checked again
    checker.authenticate(good)  # (PyJWT's own clock has not moved, so it passes again)
    assert verified == [good, forged, forged, good]


# -- isolation: what the server computes for a scoped token (issue 34) ---------------------------

LINEAGE = ("resonate:origin", "resonate:branch", "resonate:parent")


def test_a_scoped_schedule_cannot_fire_promises_on_another_tenants_branch(
    secured: TrothServer, admin: Client, keys: Keys, tenant: str
) -> None:
    """The reproduction of issue 34: a schedule's lineage tags are held to promise.create's
    rule, so a tenant cannot fire promises on another root's branch (whose tasks would be
    preloaded with that root's values)."""
    bank = tenant[:-1] + "b" + "bank"
    create(admin, bank)
    create(admin, bank + ":1", tags=dict.fromkeys(LINEAGE, bank))
    admin.ok("promise.settle", {"id": bank + ":1", "state": "resolved", "value": {"data": "c2Vj"}})
    attacker = Client(secured, token(keys.rsa, prefix=tenant))

    def schedule(id: str, promise_id: str, **tags: str) -> dict[str, Any]:
        return {
            "id": id,
            "cron": "* * * * * *",
            "promiseId": promise_id,
            "promiseTimeout": 60_000,
            "promiseTags": {"resonate:target": f"poll://any@{tenant}g", **tags},
        }

    leak = schedule(tenant + "leak", tenant + "{{.id}}.{{.timestamp}}")
    for tag in LINEAGE:
        alone = {**leak, "promiseTags": {**leak["promiseTags"], tag: bank}}
        status, message = attacker.call("schedule.create", alone)
        assert status == 400, (tag, message)
        assert f"must equal {tag} in promiseTags or start with '{bank}:'" in message
    every = {**leak, "promiseTags": {**leak["promiseTags"], **dict.fromkeys(LINEAGE, bank)}}
    assert attacker.call("schedule.create", every)[0] == 400
    assert admin.call("schedule.get", {"id": tenant + "leak"})[0] == 404
    # The same check for the admin: it is a rule of the data, not of the token.
    assert admin.call("schedule.create", every)[0] == 400
    # Lineage tags that every fired id descends from are accepted, as on promise.create.
    root = tenant + "own"
    mine = schedule(tenant + "own", root + ":{{.timestamp}}", **dict.fromkeys(LINEAGE, root))
    accepted = attacker.ok("schedule.create", mine)["schedule"]
    assert accepted["promiseTags"]["resonate:branch"] == root
    # A fixed promise id may equal its lineage tags (the root of its own branch).
    fixed = schedule(tenant + "fixed", tenant + "fixed", **dict.fromkeys(LINEAGE, tenant + "fixed"))
    assert attacker.call("schedule.create", fixed)[0] == 200
    # A timestamp cannot be made to look like a child: "<bank>:{{.timestamp}}" descends, but
    # it is outside the tenant's prefix, and a tag naming the timestamp's digits does not.
    digits = schedule(tenant + "dig", root + ":1{{.timestamp}}", **{LINEAGE[1]: root + ":1"})
    assert attacker.call("schedule.create", digits)[0] == 400
    for id in ("own", "fixed"):  # they fire every second: not left for the other tests
        assert admin.call("schedule.delete", {"id": tenant + id})[0] == 200


def test_a_scoped_token_is_preloaded_only_with_promises_inside_its_prefix(
    secured: TrothServer, admin: Client, keys: Keys, tenant: str
) -> None:
    """Defence in depth: a token scoped to ``root:1`` acquires the task of ``root:1``, whose
    branch ``root`` also holds a settled sibling ``root:2`` that the token may not read."""
    root = tenant + "root"
    create(admin, root)
    lineage = dict.fromkeys(LINEAGE, root)
    create(admin, root + ":2", tags=lineage)
    admin.ok("promise.settle", {"id": root + ":2", "state": "resolved", "value": {"data": "c2Vj"}})
    create(admin, root + ":1.1", tags=lineage)
    settle = {"state": "resolved", "value": {"data": "b2s="}}
    admin.ok("promise.settle", {"id": root + ":1.1", **settle})
    for child in (":1", ":3"):
        create(admin, root + child, tags={**lineage, "resonate:target": "poll://any@g"})
    acquire = {"version": 0, "pid": "w", "ttl": 60_000}
    # The server computes the whole branch; the admin sees it.
    seen = admin.ok("task.acquire", {"id": root + ":3", **acquire})["preload"]
    assert {p["id"] for p in seen} == {root + ":2", root + ":1.1"}
    scoped = Client(secured, token(keys.rsa, prefix=root + ":1"))
    claimed = scoped.ok("task.acquire", {"id": root + ":1", **acquire})
    assert [p["id"] for p in claimed["preload"]] == [root + ":1.1"]
    assert claimed["promise"]["id"] == root + ":1"
