"""The bad-input fuzz again, with auth on: bad tokens and scoped tokens are as safe as bad data.

The server runs with an RSA public key and a static token; the judging machine holds the
static token (full access) in its ``Authorization`` header. On top of the damage of
``test_bad_input`` (where a mutated ``head.auth`` now overrides that header), these send:

- tokens of every shape (garbage, truncated, claims of the wrong types, dates out of any
  range, other algorithms): never a 5xx, and a 401 or 403 writes nothing;
- every kind's valid request, mutated, under a token scoped to a prefix: whatever the
  answer, no promise or task outside the prefix changed.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from hypothesis import event, given, settings
from hypothesis import strategies as st

from tests.support.fuzzing import json_values, mutated
from tests.support.servers import BACKENDS, TrothServer, serve
from tests.support.wire import HEAD, VALID
from troth.protocol import Kind

from ._client import MAX_BODY_BYTES, RETRY_TIMEOUT, HttpMachine
from .test_bad_input import (
    FUZZ,
    broken_heads,
    dumps,
    envelope,
    judge,
    mutated_requests,
    nasty_fields,
    seed,
)

# Slow: hypothesis drives a troth serve process for seconds a test (tests/protocol: in-process).
pytestmark = pytest.mark.slow

STATIC = "conformance-static-token-0123456789"
KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)


@pytest.fixture(scope="module", params=BACKENDS)
def live(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[TrothServer]:
    """As conftest's, with auth on."""
    folder = tmp_path_factory.mktemp("conformance-auth")
    key = folder / "key.pem"
    key.write_bytes(
        KEY.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    flags = (
        *("--tasks-retry-timeout", str(RETRY_TIMEOUT)),
        *("--max-body-bytes", str(MAX_BODY_BYTES)),
        *("--auth-publickey", str(key)),
    )
    with serve(request.param, folder, *flags, env={"TROTH_AUTH_TOKEN": STATIC}) as server:
        yield server


@pytest.fixture(scope="module")
def machine(live: TrothServer) -> Iterator[HttpMachine]:
    m = HttpMachine(live.url)
    m.http.headers["Authorization"] = f"Bearer {STATIC}"
    yield m
    m.close()


# -- the damage of test_bad_input, through the auth door ---------------------------------------


@settings(FUZZ, max_examples=100)
@given(body=mutated_requests())
def test_mutated_requests_of_every_kind(machine: HttpMachine, body: bytes) -> None:
    judge(machine, body)


@settings(FUZZ, max_examples=100)
@given(body=nasty_fields())
def test_nasty_ids_tags_addresses_and_numbers(machine: HttpMachine, body: bytes) -> None:
    judge(machine, body)


@settings(FUZZ, max_examples=150)
@given(body=broken_heads())
def test_broken_heads_and_kinds(machine: HttpMachine, body: bytes) -> None:
    judge(machine, body)


# -- tokens of every shape ------------------------------------------------------------------------

NOW = int(time.time())
claim_values = st.sampled_from(
    [None, "", "admin", "ADMIN", "p", "p:1", "q", 0, -1, 1.5, 2**70, 10**300, True, [], ["admin"],
     {"a": 1}, NOW + 3600, NOW - 3600, "2999-01-01"]
) | json_values  # fmt: skip
claims = st.fixed_dictionaries(
    {},
    optional={
        "exp": st.sampled_from([NOW + 3600, NOW - 3600, NOW + 30, 2**62, 10**300]) | claim_values,
        "role": claim_values,
        "prefix": claim_values,
        "iss": claim_values,
        "aud": claim_values,
        "nbf": claim_values,
        "iat": claim_values,
        "sub": claim_values,
    },
)


def _signed(payload: dict[str, Any], alg: str) -> str:
    try:
        return jwt.encode(payload, KEY, algorithm=alg)
    except (TypeError, ValueError, OverflowError):  # claims jwt.encode itself cannot write
        return jwt.encode({"exp": payload.get("exp")}, KEY, algorithm=alg)


tokens = (
    st.builds(_signed, claims, st.sampled_from(["RS256", "PS384", "RS512"]))
    | st.builds(
        lambda t, n: t[:n], st.builds(_signed, claims, st.just("RS256")), st.integers(0, 400)
    )
    | st.text(max_size=60)
    | st.sampled_from(["Bearer", "a.b.c", "..", "e30.e30.", "e30.e30.e30", STATIC[:-1], STATIC * 2])
    | st.lists(st.binary(max_size=40), min_size=1, max_size=4).map(
        lambda parts: ".".join(jwt.utils.base64url_encode(p).decode() for p in parts)
    )
)


@settings(FUZZ, max_examples=250)
@given(
    token=tokens,
    where=st.sampled_from(["head", "header"]),
    kind=st.sampled_from(sorted(Kind)),
)
def test_tokens_of_every_shape_are_never_a_5xx_and_a_refusal_writes_nothing(
    machine: HttpMachine, token: str, where: str, kind: str
) -> None:
    if not re.fullmatch(r"[!-~]+( [!-~]+)*", token):
        where = "head"  # not something an HTTP client sends as a header value
    seed(machine)
    before = machine.ok("debug.snap")
    head = {**HEAD, "auth": token} if where == "head" else HEAD
    headers = {"content-type": "application/json"}
    if where == "header":
        headers["Authorization"] = f"Bearer {token}"
    else:
        headers["Authorization"] = ""
    body = dumps(envelope(kind, VALID[kind], head))
    response = machine.http.post("/", content=body, headers=headers)
    status = response.status_code
    event(f"status {status}")
    assert status < 500, (token, response.text[:300])
    answer = response.json()
    assert answer["head"]["status"] == status
    if status in (401, 403):
        assert answer["data"] in ("Unauthorized", "Forbidden")
        assert machine.ok("debug.snap") == before, token


# -- scoped tokens -------------------------------------------------------------------------------


def scoped(prefix: str) -> str:
    return jwt.encode({"exp": NOW + 3600, "prefix": prefix}, KEY, algorithm="RS256")


def records(snap: dict[str, Any]) -> dict[tuple[str, str], str]:
    """Every promise and task of a snapshot, by id, as comparable text."""
    return {
        (table, record["id"]): json.dumps(record, sort_keys=True)
        for table in ("promises", "tasks")
        for record in snap.get(table, [])
    }


@settings(FUZZ, max_examples=250)
@given(
    case=mutated() | st.sampled_from(sorted(VALID.items())),
    prefix=st.sampled_from(["p", "p:", "p:1", "q"]),
)
def test_a_scoped_token_changes_nothing_outside_its_prefix(
    machine: HttpMachine, case: tuple[str, Any], prefix: str
) -> None:
    kind, data = case
    seed(machine)
    before = records(machine.ok("debug.snap"))
    body = dumps(envelope(kind, data))
    headers = {"content-type": "application/json", "Authorization": f"Bearer {scoped(prefix)}"}
    response = machine.http.post("/", content=body, headers=headers)
    status = response.status_code
    event(f"status {status}")
    assert status < 500, (body[:300], response.text[:300])
    if kind.startswith("debug.") or kind.endswith(".search"):
        assert status == 403, (kind, status)  # whatever the data: these name no ids
    after = records(machine.ok("debug.snap"))
    changed = {key for key in before.keys() | after.keys() if before.get(key) != after.get(key)}
    outside = {key for key in changed if not key[1].startswith(prefix)}
    assert not outside, (prefix, kind, data, outside)
