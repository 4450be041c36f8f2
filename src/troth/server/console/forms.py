"""What the console reads from query strings and forms, each field checked and named when
it is wrong (a 400 page that says which field and why; nothing is done)."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime

from troth.views.executions import ExecutionQuery, QueryError

_TOKEN = re.compile(r"[A-Za-z0-9\-._~+/]+=*")  # a bearer token (RFC 6750's b64token)


class Invalid(ValueError):
    """A field the console cannot use; the message names it."""


def required(fields: dict[str, str], name: str) -> str:
    value = fields.get(name, "").strip()
    if not value:
        raise Invalid(f"{name}: required")
    return value


def execution_query(fields: dict[str, str], limit: int) -> ExecutionQuery:
    """The list's query: the API's parameters, but times from the form's date fields."""
    params = {k: v for k in ("state", "function", "tag", "cursor") if (v := fields.get(k))}
    for name in ("since", "until"):
        at = _instant(fields, name)
        if at is not None:
            params[name] = str(at)
    try:
        return ExecutionQuery.parse({**params, "limit": str(limit)})
    except QueryError as e:
        raise Invalid(str(e)) from None


def json_value(fields: dict[str, str]) -> object:
    raw = fields.get("value", "").strip() or "null"
    try:
        return json.loads(raw)
    except json.JSONDecodeError as e:
        raise Invalid(f"value: not JSON ({e.msg} at character {e.pos})") from None


def token(raw: str) -> str:
    if not _TOKEN.fullmatch(raw):
        raise Invalid("token: expected letters, digits and -._~+/ (then = padding)")
    return raw


def _instant(fields: dict[str, str], name: str) -> int | None:
    """A ``datetime-local`` value, read as UTC (the console shows every time in UTC)."""
    raw = fields.get(name, "").strip()
    if not raw:
        return None
    try:
        at = datetime.fromisoformat(raw)
    except ValueError:
        raise Invalid(f"{name}: expected a date and time, YYYY-MM-DDTHH:MM[:SS]") from None
    if at.tzinfo is None:
        at = at.replace(tzinfo=UTC)
    return int(at.timestamp() * 1000)
