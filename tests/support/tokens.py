"""Key pairs and JWTs for the tests of a server with auth on."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa

ISS, AUD = "https://issuer.test", "troth-tests"


class Keys:
    """Key pairs made fresh for the test session; public halves as PEM files."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.rsa = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.ec = ec.generate_private_key(ec.SECP256R1())
        self.ed25519 = ed25519.Ed25519PrivateKey.generate()
        self.paths = {
            name: self._pem(name, getattr(self, name)) for name in ("rsa", "ec", "ed25519")
        }

    def _pem(self, name: str, key: Any) -> str:
        path = self.folder / f"{name}.pem"
        path.write_bytes(
            key.public_key().public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
            )
        )
        return str(path)


def token(
    key: Any,
    alg: str = "RS256",
    expires_in: int = 300,
    iss: str | None = ISS,
    aud: str | list[str] | None = AUD,
    **claims: Any,
) -> str:
    payload: dict[str, Any] = {"exp": int(time.time()) + expires_in, **claims}
    if iss is not None:
        payload["iss"] = iss
    if aud is not None:
        payload["aud"] = aud
    return jwt.encode(payload, key, algorithm=alg)
