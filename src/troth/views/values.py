"""A promise's param or value, decoded for display.

troth's JSON codec (header ``troth:codec: json``) and the official SDKs (no header) both
write base64 of JSON, which is shown as the JSON it holds. Anything else (encrypted,
another serializer, bytes that are not JSON) is shown raw, with a label saying why: the
views never hold the app's keys or its classes, and they never fail on a value.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from typing import Any

import msgspec

from troth.protocol.conventions import CODEC_HEADER
from troth.protocol.records import Value


@dataclass(frozen=True)
class Shown:
    """A value as shown: ``decoded`` says whether ``data`` is the JSON it holds; if not,
    ``data`` is the raw ``data`` string (or None) and ``note`` says why."""

    decoded: bool
    data: Any
    headers: dict[str, str]
    note: str | None = None

    @property
    def empty(self) -> bool:
        return not self.decoded and self.data is None

    def to_json(self) -> dict[str, Any]:
        shown: dict[str, Any] = {"decoded": self.decoded, "data": self.data}
        if self.headers:
            shown["headers"] = self.headers
        if self.note is not None:
            shown["note"] = self.note
        return shown


def shown(value: Value) -> Shown:
    """``value`` as shown: its JSON when it holds JSON, else raw with the reason."""
    headers = dict(value.headers or {})
    if value.data is None:
        return Shown(False, None, headers, None)
    codec = headers.get(CODEC_HEADER, "json")
    foreign = sorted(key for key in headers if key.startswith("troth:") and key != CODEC_HEADER)
    if foreign:
        # Encryption adds its own headers (``troth:encryption``, a key id).
        return Shown(False, value.data, headers, f"encoded with {', '.join(foreign)}")
    if codec != "json":
        return Shown(False, value.data, headers, f"written by the {codec!r} serializer")
    try:
        raw = base64.b64decode(value.data, validate=True)
    except (binascii.Error, ValueError):
        return Shown(False, value.data, headers, "not base64")
    if not raw:
        return Shown(False, value.data, headers, "empty")
    try:
        return Shown(True, msgspec.json.decode(raw), headers)
    except msgspec.DecodeError:
        return Shown(False, value.data, headers, "not JSON")


def json_value(data: Any) -> Value:
    """``data`` written as troth's JSON codec writes it (what every SDK reads back)."""
    encoded = base64.b64encode(msgspec.json.encode(data)).decode("ascii")
    return Value(headers={CODEC_HEADER: "json"}, data=encoded)


def error_text(data: Any) -> str | None:
    """The one-line text of an error an SDK recorded (``{"__type": "error", "name",
    "message"}``, the shape troth and the TypeScript SDK share); None if ``data`` is not
    one."""
    if not isinstance(data, dict) or data.get("__type") not in ("error", "aggregate_error"):
        return None
    name, message = data.get("name"), data.get("message")
    if isinstance(name, str) and isinstance(message, str) and message:
        return f"{name}: {message}"
    return name if isinstance(name, str) else str(message)
