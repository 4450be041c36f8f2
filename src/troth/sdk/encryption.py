"""An optional AES-256-GCM encryptor for promise values (needs the ``cryptography`` package).

The server stores and returns values byte for byte, so encrypting in the SDK keeps payloads
private from the server and its database. Each encrypted value names its key in the header
``troth:key-id``, so keys can be rotated: new values use the active key while values
written under older keys stay readable as long as those keys are still configured. Values
without the header (written before encryption was turned on) pass through unchanged.

The nonce (12 random bytes) is stored in front of the ciphertext; the codec header is bound
as associated data so a value cannot be replayed as if it were written by another codec.
"""

from __future__ import annotations

import base64
import os

from troth.protocol.conventions import CODEC_HEADER
from troth.protocol.records import Value
from troth.sdk.extras import require

ALGORITHM_HEADER = "troth:encryption"
KEY_ID_HEADER = "troth:key-id"
ALGORITHM = "aes-256-gcm"


class AesGcmEncryptor:
    def __init__(self, keys: dict[str, bytes], active: str) -> None:
        aead = require("cryptography.hazmat.primitives.ciphers.aead", "encryption", "encryption")
        AESGCM = aead.AESGCM

        if active not in keys:
            raise ValueError(f"the active key id {active!r} is not among the keys")
        for kid, key in keys.items():
            if len(key) != 32:
                raise ValueError(f"key {kid!r} must be 32 bytes for AES-256-GCM")
        self._ciphers = {kid: AESGCM(key) for kid, key in keys.items()}
        self.active = active

    def encrypt(self, value: Value) -> Value:
        if value.data is None:
            return value
        headers = dict(value.headers or {})
        nonce = os.urandom(12)
        aad = headers.get(CODEC_HEADER, "").encode()
        sealed = self._ciphers[self.active].encrypt(nonce, base64.b64decode(value.data), aad)
        headers[ALGORITHM_HEADER] = ALGORITHM
        headers[KEY_ID_HEADER] = self.active
        return Value(headers=headers, data=base64.b64encode(nonce + sealed).decode("ascii"))

    def decrypt(self, value: Value) -> Value:
        headers = dict(value.headers or {})
        if headers.get(ALGORITHM_HEADER) != ALGORITHM or value.data is None:
            return value
        kid = headers.pop(KEY_ID_HEADER, "")
        cipher = self._ciphers.get(kid)
        if cipher is None:
            raise ValueError(f"value was encrypted with key {kid!r}, which is not configured")
        del headers[ALGORITHM_HEADER]
        raw = base64.b64decode(value.data)
        aad = headers.get(CODEC_HEADER, "").encode()
        plain = cipher.decrypt(raw[:12], raw[12:], aad)
        return Value(headers=headers, data=base64.b64encode(plain).decode("ascii"))
